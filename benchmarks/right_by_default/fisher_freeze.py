"""Does DOP (or QDOP, ``--methods``) frozen after a warm-up (the library's default,
``adapt_until="auto"``) stay finite on MNIST? The first non-finite step for each burn-in and ε
(RESULTS §29).

The reproduction's DOP chain (``runs.sampler`` of ``natural-langevin``: 784-400-400-10, N(0, 0.1)
prior, batch 100, γ_t = 1/√t) at step size ``--lr`` and seed ``--seed``, with
``adapt_until="auto"`` resolved for each burn-in B of ``--burn-ins`` (adapt until 3B/4, frozen
at the statistic's average over ``[5B/8, 3B/4)``), runs ``--updates`` updates from the same
initialisation and minibatches. The frozen drift is clipped at ``--frozen-drift-limit`` noise sds
(:func:`sgrld.sgrld`'s ``frozen_drift_limit``, by default the library's; ``inf``: never
clipped, the chain of RESULTS §29). Per row: the freeze step, the first step whose gradient or
parameters are not finite (with its leaf), the steps where the clip bound (``info.drift_fallback``,
which only the clip sets here: it binds after the freeze only), the last state's training NLL on
2,000 images and mean θ²/σ² of the two large kernels (1 for weights that sample the prior) and
the largest gradient norm of each 500 updates::

    python benchmarks/right_by_default/fisher_freeze.py --data-dir ../shared/data/mnist \\
        [--lr 0.001] [--updates 3000] [--burn-ins 400 600 1000 2000] [--eps 1e-4 1e-3] \\
        [--methods dop qdop] [--frozen-drift-limit 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py
sys.path.insert(0, str(Path(__file__).resolve().parent))  # mnist_gamma_drift.py
from mnist_gamma_drift import CHUNK, chunks, method_of, summary  # noqa: E402
from timing import environment, table  # noqa: E402

from sgrld.parts.preconditioning import FROZEN_DRIFT_SDS  # noqa: E402
from sgrld_reproductions.natural_langevin import runs  # noqa: E402


class Outcome(NamedTuple):
    """One chain's row."""

    frozen_at: int
    nonfinite: tuple[int, int] | None
    """``(step, leaf)`` of the first non-finite step, or None."""
    clipped: int
    """Steps where the clip bound, up to the first non-finite step."""
    norms: list[float]
    """The largest ‖g‖ of each chunk."""
    end: dict[str, float] | None
    """The last state's train NLL and θ²/σ² (:func:`mnist_gamma_drift.summary`), if finite."""


def first_nonfinite(method, lr, burn_in, x, y, steps, seed, drift_limit) -> Outcome:
    """The chain frozen after ``burn_in`` to its ``steps``-th update or first non-finite step."""
    sampler = runs.sampler(
        method, lr, x.shape[0], adapt_until="auto", frozen_drift_limit=drift_limit
    ).adaptation.resolve(burn_in)
    until = sampler.adaptation.adapt_until
    norms, clipped = [], 0
    for start, chunk in zip(
        range(0, steps, CHUNK), chunks(sampler, x, y, steps, seed), strict=True
    ):
        state, infos = chunk
        ok = np.asarray(infos.is_finite)
        norms.append(float(np.nanmax(np.asarray(infos.grad_norm))))
        end = len(ok) if ok.all() else int(np.argmin(ok))
        clipped += int(np.asarray(infos.drift_fallback)[:end].sum())
        if not ok.all():
            leaf = int(np.asarray(infos.nonfinite_leaf)[end])
            return Outcome(until, (start + end, leaf), clipped, norms, None)
    return Outcome(until, None, clipped, norms, summary(state, x, y))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/mnist")
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--updates", type=int, default=3000)
    parser.add_argument("--burn-ins", type=int, nargs="+", default=[400, 600, 1000, 2000])
    parser.add_argument("--eps", type=float, nargs="+", default=[runs.EPS, 1e-3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", choices=["dop", "qdop"], default=["dop"])
    parser.add_argument(
        "--frozen-drift-limit", type=float, default=FROZEN_DRIFT_SDS, help="inf: never clipped"
    )
    args = parser.parse_args()
    if args.updates < CHUNK or args.updates % CHUNK:
        parser.error(f"--updates must be a positive multiple of {CHUNK}, got {args.updates}")
    if not args.lr > 0 or not args.frozen_drift_limit > 0 or not all(e > 0 for e in args.eps):
        parser.error("--lr, --frozen-drift-limit and every --eps must be > 0")
    if not all(2 <= b <= args.updates for b in args.burn_ins):
        parser.error(f"every --burn-ins must lie in [2, --updates], got {args.burn_ins}")
    print(environment())
    data = runs.load_data(args.data_dir, 10_000, None, 0)
    x, y = (jnp.asarray(a) for a in data.train)
    rows = []
    for name, eps in ((name, eps) for name in args.methods for eps in args.eps):
        method = method_of(name, False, eps)
        for burn_in in args.burn_ins:
            start = time.perf_counter()
            out = first_nonfinite(
                method, args.lr, burn_in, x, y, args.updates, args.seed, args.frozen_drift_limit
            )
            seconds = time.perf_counter() - start
            print(f"  {name}, ε = {eps:g}, burn-in {burn_in}: {seconds:.0f} s, {out}", flush=True)
            bad = out.nonfinite
            where = "finite" if bad is None else f"step {bad[0]} (leaf {bad[1]})"
            end = ["", ""] if out.end is None else [f"{v:.3f}" for v in out.end.values()]
            rows.append(
                [name, f"{eps:g}", str(burn_in), str(out.frozen_at), where, str(out.clipped)]
                + [end[0], " / ".join(end[1:])]
                + [" ".join(f"{g:.3g}" for g in out.norms)]
            )
    head = ["method", "ε", "burn-in", "frozen at", f"first non-finite in {args.updates}"]
    head += [f"steps clipped at {args.frozen_drift_limit:g} sds", "train NLL"]
    head += ["θ²/σ² Dense_0 / Dense_1", "max ‖g‖ per 500"]
    print(table(head, rows))


if __name__ == "__main__":
    main()
