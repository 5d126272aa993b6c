"""Issue 36's 1-D bar measured through the library: Rensmeyer & Niggemann's N(0, 1) with the online
share ĉ of Γ, beside the fixed shares and the default (warm-up, then freeze).

The settings of ``sgrld reproduce stationary-1d`` (exact gradients, ``--chains`` chains from
θ₀ = 1; pSGLD: ``rmsprop(eps=1e-8)``, lr 5e-5; Monge: α² = 1, lr 1e-3; Shampoo: ``eps=1e-3``
relative, refreshed every step, lr 1e-4), at decay 0.9, 0.99 and γ_t = 1/√t. Per (sampler, decay)
the variants run through ``sgrld.sgrld`` and ``sgrld.sample`` with the same keys:

* ``c=0`` / ``c=1``: adapting throughout, Γ scaled by a fixed share (``c=0``: no Γ, as
  published; ``c=1``: the full Γ);
* ``ĉ``: adapting throughout, ``correction="hutchinson", correction_scale="auto"``;
* ``c=1, tamed`` / ``ĉ, tamed``: the same with Γ's kick tamed to one noise sd
  (``gamma_kick_limit=1``);
* ``default``: ``sgrld.sgrld``'s defaults (``adapt_until="auto"``: adapt, then freeze; no Γ).

Burn-in and span are in time units of 1/lr steps (pSGLD and Shampoo: burn-in 3, span 4, thinned
every 0.05; Monge: 10, 20, every 0.1). TV to N(0, 1) on the reproduction's 41 bins of 0.1 over
[−2.05, 2.05] plus the outside, with the Monte-Carlo floor of the pooled histogram.

    python benchmarks/right_by_default/library_1d.py [--chains 2048] [--seed 0]
        [--families pSGLD Monge Shampoo] [--decays 0.9 0.99 inverse_sqrt]
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py
from timing import environment, table  # noqa: E402

import sgrld  # noqa: E402
from sgrld.samplers.guarantee import BiasWarning  # noqa: E402
from sgrld.samples.distances import (  # noqa: E402
    bin_probabilities,
    frequencies,
    noise_floor,
    normal_pdf,
    total_variation,
)

FAMILIES = {
    # name: (metric of decay, lr, burn-in, span, thin), the last three in time units of 1/lr steps
    "pSGLD": (lambda d: sgrld.metrics.rmsprop(decay=d, eps=1e-8), 5e-5, 3.0, 4.0, 0.05),
    "Monge": (lambda d: sgrld.metrics.monge(alpha2=1.0, decay=d), 1e-3, 10.0, 20.0, 0.1),
    "Shampoo": (
        lambda d: sgrld.metrics.shampoo(decay=d, eps=1e-3, update_every=1),
        1e-4, 3.0, 4.0, 0.05,
    ),
}  # fmt: skip
VARIANTS = {
    "c=0": {"adapt_until": None},
    "c=1": {"adapt_until": None, "correction": "hutchinson", "correction_scale": 1.0},
    "ĉ": {"adapt_until": None, "correction": "hutchinson", "correction_scale": "auto"},
    "c=1, tamed": {
        "adapt_until": None,
        "correction": "hutchinson",
        "correction_scale": 1.0,
        "gamma_kick_limit": 1.0,
    },
    "ĉ, tamed": {
        "adapt_until": None,
        "correction": "hutchinson",
        "correction_scale": "auto",
        "gamma_kick_limit": 1.0,
    },
    "default": {},
}


def run_row(family: str, decay, variant: str, chains: int, seed: int) -> dict:
    make_metric, lr, burn, span, thin_t = FAMILIES[family]
    target = sgrld.samples.targets.standard_normal()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BiasWarning)  # the table says what each row is
        sampler = sgrld.sgrld(
            target.potential, make_metric(decay), learning_rate=lr, num_data=1,
            **VARIANTS[variant],
        )  # fmt: skip
    thin = max(1, round(thin_t / lr))
    start = time.perf_counter()
    samples = sgrld.sample(
        jax.random.key(seed),
        sampler,
        jnp.ones((), jnp.float32),
        target.batch_fn,
        num_samples=round(span / thin_t),
        thin=thin,
        burn_in=round(burn / lr),
        num_chains=chains,
    )
    x = np.asarray(samples.params, np.float64)  # [chains, samples]
    wall = time.perf_counter() - start
    ok = np.all(np.isfinite(x), axis=1)
    x = x[ok]
    share = samples.info.share_mean if hasattr(samples.info, "share_mean") else None
    return {
        "tv": total_variation(frequencies(x), bin_probabilities(normal_pdf)),
        "floor": noise_floor(x)[0],
        "share": None if share is None else float(np.mean(np.asarray(share))),
        "diverged": int((~ok).sum()),
        "wall": wall,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--families", nargs="+", choices=list(FAMILIES), default=list(FAMILIES))
    parser.add_argument("--decays", nargs="+", default=["0.9", "0.99", "inverse_sqrt"])
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    args = parser.parse_args()
    print(environment(), flush=True)
    rows = []
    for family in args.families:
        for d in args.decays:
            decay = d if d == "inverse_sqrt" else float(d)
            cells = [family, "1/√t" if d == "inverse_sqrt" else d]
            for v in args.variants:
                r = run_row(family, decay, v, args.chains, args.seed)
                mark = "**" if r["tv"] <= 0.02 else ""
                cell = f"{mark}{r['tv']:.3f}{mark}"
                if r["share"] is not None:
                    cell += f" (ĉ {r['share']:.2f})"
                if r["diverged"]:
                    cell += f" [{r['diverged']} diverged]"
                cells.append(cell)
                print(f"  {family} {d} {v}: TV {r['tv']:.4f} floor {r['floor']:.4f} "
                      f"share {r['share']} {r['wall']:.0f} s", flush=True)  # fmt: skip
            rows.append(cells)
    print(table(["sampler", "decay", *args.variants], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
