"""Experiment a: Rensmeyer & Niggemann's 1-D target N(0, 1) with fixed, adaptive and no share of Γ.

The rows of ``sgrld reproduce stationary-1d`` (pSGLD: rmsprop eps 1e-8, lr 5e-5; Monge: α² 1,
lr 1e-3; Shampoo: eps 1e-3 relative, every step, lr 1e-4; exact gradients, start θ₀ = 1; burn-in
3 time units and 4 sampled, Monge 10 and 20; 41 bins), at decay 0.9, 0.99 and γ_t = 1/√t. Per
(sampler, decay) one program runs the variants side by side on the same keys:

* ``c=0`` … ``c=1``: Γ scaled by a fixed share (c = 0: as published; 1: the library's Γ);
* ``auto``: Γ along the probe ĉ⊙z (share.py; moments over 20 memories of the metric;
  ``auto-w100``: over 100; ``auto2``: the quadratic feature (θ − μ)², 20 memories);
* ``freeze``: the metric adapts during the first half of the burn-in, then is frozen (Γ = 0): the
  library's ``adapt_until`` (``freeze-avg``: frozen at the plain average of its statistic over
  the second quarter of the burn-in instead of its last moving average); the burn-in's second
  half lets the chains relax under the frozen metric (Stan's terminal window).

TV to N(0, 1) as in RESULTS §7, with its Monte-Carlo floor. ``pred`` checks DERIVATION.md's
marginal law: from each run's own binned conditional means D̄(θ) = E[G⁻¹(S_t)|θ_t] and
Γ̄(θ) = E[applied drift|θ_t], the stationary density is ``p/D̄ · exp(∫Γ̄/D̄)``; pred is the TV
between that prediction and the run's histogram (on bins of 0.05), and ``c*(|θ|)`` is the share
of the full Γ the run would have needed, D̄′/E[Γ̂|θ] (c = 1 run), at a few |θ|.

    .venv/bin/python benchmarks/right_by_default/exp_1d.py [--chains 2048] [--families ...]
        [--decays 0.9 0.99 inverse_sqrt] [--span 1] [--lr-scale 1] [--order 1]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from runner import configs, simulate  # noqa: E402
from share import make_step  # noqa: E402

import sgrld  # noqa: E402
from sgrld.samples.distances import (  # noqa: E402
    bin_probabilities,
    frequencies,
    noise_floor,
    normal_pdf,
    total_variation,
)

FAMILIES = {
    # name: (metric factory of decay, lr, burn, span, thin) in time units (1/lr steps)
    "pSGLD": (lambda d: sgrld.metrics.rmsprop(decay=d, eps=1e-8), 5e-5, 3.0, 4.0, 0.05),
    "Monge": (lambda d: sgrld.metrics.monge(alpha2=1.0, decay=d), 1e-3, 10.0, 20.0, 0.1),
    "Shampoo": (
        lambda d: sgrld.metrics.shampoo(decay=d, eps=1e-3, update_every=1),
        1e-4,
        3.0,
        4.0,
        0.05,
    ),
}
FINE = np.linspace(-2.05, 2.05, 83)  # bins of 0.05 for the marginal-law check
PROBE = (0.05, 0.15, 0.3, 0.6, 1.0, 1.5)


def variants(burn_in: int, grid: bool) -> list[tuple[str, dict]]:
    out = [
        ("c=0", {"scale": 0.0}),
        ("c=1", {"scale": 1.0}),
        ("auto", {"auto": True}),
        ("auto-w100", {"auto": True, "window": 100.0}),
        ("auto2", {"auto": True, "order": 2}),
    ]
    if grid:
        out += [(f"c={c:g}", {"scale": c}) for c in (0.25, 0.5, 0.75)]
    out += [
        ("freeze", {"scale": 0.0, "freeze_at": burn_in // 2}),
        ("freeze-avg", {"scale": 0.0, "freeze_at": burn_in // 2, "freeze_average": True}),
        ("freeze-avg-Γ", {"scale": 1.0, "freeze_at": burn_in // 2, "freeze_average": True}),
    ]
    return out


def predicted_law(x, d, g, edges=FINE):
    """Bin probabilities of p/D̄·exp(∫Γ̄/D̄) from samples x with D = G⁻¹(S_t) and applied Γ g."""
    centers = 0.5 * (edges[1:] + edges[:-1])
    idx = np.digitize(x, edges) - 1
    ok = (idx >= 0) & (idx < len(centers))
    cnt = np.bincount(idx[ok], minlength=len(centers))
    dbar = np.bincount(idx[ok], d[ok], minlength=len(centers)) / np.maximum(cnt, 1)
    gbar = np.bincount(idx[ok], g[ok], minlength=len(centers)) / np.maximum(cnt, 1)
    good = cnt > 20
    dbar, gbar = np.where(good, dbar, np.nan), np.where(good, gbar, np.nan)
    ratio = np.nan_to_num(gbar / dbar)
    integral = np.concatenate([[0.0], np.cumsum(0.5 * (ratio[1:] + ratio[:-1]) * np.diff(centers))])
    integral -= integral[len(centers) // 2]
    dens = normal_pdf(centers) / dbar * np.exp(integral)
    dens = np.where(good, dens, 0.0)
    probs = dens / dens.sum()
    emp = cnt / cnt.sum()
    return probs, emp, centers, dbar, gbar


def needed_share(centers, dbar, gbar_full):
    """c*(|θ|) = D̄′(θ)/E[Γ̂|θ] at the probe points (symmetrised, from the c = 1 run)."""
    slope = np.gradient(dbar, centers)
    out = []
    for a in PROBE:
        vals = []
        for s in (1, -1):
            i = int(np.argmin(np.abs(centers - s * a)))
            if np.isfinite(slope[i]) and np.isfinite(gbar_full[i]) and gbar_full[i] != 0:
                vals.append(slope[i] / gbar_full[i])
        out.append(float(np.mean(vals)) if vals else math.nan)
    return out


def run_family(name, decay, chains, span_scale, lr_scale, order, grid, seed):
    make_metric, lr, burn, span, thin_t = FAMILIES[name]
    lr = lr * lr_scale
    metric = make_metric(decay)
    u = sgrld.samples.targets.standard_normal().potential
    init, step = make_step(
        u, metric, decay=decay, learning_rate=lr, num_data=1, order=order, record=True
    )
    per_unit = 1.0 / lr
    burn_in = round(burn * per_unit)
    thin = max(1, round(thin_t * per_unit))
    num_samples = max(1, round(span * span_scale / thin_t))
    names, cfg = configs(variants(burn_in, grid))
    rec = lambda p, info, s: (p, info.inv_one, info.gamma / lr, info.share_mean)
    (x, d, g, c), wall = simulate(
        init,
        step,
        cfg,
        jnp.ones((), jnp.float32),
        jax.random.key(seed),
        chains=chains,
        burn_in=burn_in,
        num_samples=num_samples,
        thin=thin,
        batch_fn=lambda k: jnp.zeros((), jnp.float32),
        record=rec,
    )
    target = bin_probabilities(normal_pdf)
    rows = []
    full = None
    for i, n in enumerate(names):
        xi = x[i]
        ok = np.all(np.isfinite(xi), axis=1)
        xi, di, gi = xi[ok], d[i][ok], g[i][ok]
        freqs = frequencies(xi)
        floor = noise_floor(xi)[0]
        probs, emp, centers, dbar, gbar = predicted_law(xi.ravel(), di.ravel(), gi.ravel())
        row = {
            "sampler": name,
            "decay": str(decay),
            "variant": n,
            "lr": lr,
            "tv": total_variation(freqs, target),
            "floor": floor,
            "share": float(np.mean(c[i][ok][:, -1])),
            "pred": total_variation(emp, probs),
            "diverged": int((~ok).sum()),
            "wall": wall,
        }
        if n == "c=1":
            full = (centers, dbar, gbar)
        rows.append(row)
    if full is not None:
        centers, dbar, gbar = full
        cstar = needed_share(centers, dbar, gbar)
        for r in rows:
            if r["variant"] == "c=1":
                r["c_star"] = cstar
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=2048)
    parser.add_argument("--families", nargs="+", default=list(FAMILIES))
    parser.add_argument("--decays", nargs="+", default=["0.9", "0.99", "inverse_sqrt"])
    parser.add_argument("--span", type=float, default=1.0, help="fraction of the sampled span")
    parser.add_argument("--lr-scale", type=float, nargs="+", default=[1.0])
    parser.add_argument("--order", type=int, default=1)
    parser.add_argument("--grid", action="store_true", help="also c = 0.25, 0.5, 0.75")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    print(f"jax {jax.__version__} {jax.devices()[0].device_kind}; {args.chains} chains per variant")
    head = (
        "| sampler | decay | lr | variant | TV to N(0,1) | floor | ĉ (end) | pred | "
        "diverged | wall s |"
    )
    print(head)
    print("|" + "---|" * 10)
    out = []
    for name in args.families:
        for dec in args.decays:
            decay = dec if dec == "inverse_sqrt" else float(dec)
            for s in args.lr_scale:
                rows = run_family(
                    name, decay, args.chains, args.span, s, args.order, args.grid, args.seed
                )
                for r in rows:
                    print(
                        f"| {r['sampler']} | {r['decay']} | {r['lr']:g} | {r['variant']} | "
                        f"{r['tv']:.4f} | {r['floor']:.4f} | {r['share']:.3f} | {r['pred']:.4f} | "
                        f"{r['diverged']} | {r['wall']:.0f} |",
                        flush=True,
                    )
                    if "c_star" in r:
                        cs = ", ".join(
                            f"{a:g}: {v:.2f}" for a, v in zip(PROBE, r["c_star"], strict=True)
                        )
                        print(f"|  |  |  | c*(abs θ) of the c=1 run: {cs} |  |  |  |  |  |  |")
                out += rows
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
