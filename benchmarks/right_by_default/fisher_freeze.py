"""Does DOP (or QDOP, ``--methods``) frozen after a warm-up (the library's default,
``adapt_until="auto"``) stay finite on MNIST? The first non-finite step for each burn-in and ε
(RESULTS §29).

The reproduction's DOP chain (``runs.sampler`` of ``natural-langevin``: 784-400-400-10, N(0, 0.1)
prior, batch 100, γ_t = 1/√t) at step size ``--lr`` and seed ``--seed``, with
``adapt_until="auto"`` resolved for each burn-in B of ``--burn-ins`` (adapt until 3B/4, frozen
at the statistic's average over ``[5B/8, 3B/4)``), runs ``--updates`` updates from the same
initialisation and minibatches. Per
row: the freeze step, the first step whose gradient or parameters are not finite (with its
leaf), and the largest gradient norm of each 500 updates::

    python benchmarks/right_by_default/fisher_freeze.py --data-dir ../shared/data/mnist \\
        [--lr 0.001] [--updates 3000] [--burn-ins 400 600 1000 2000] [--eps 1e-4 1e-3] \\
        [--methods dop qdop]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py
sys.path.insert(0, str(Path(__file__).resolve().parent))  # mnist_gamma_drift.py
from mnist_gamma_drift import CHUNK, chunks, method_of  # noqa: E402
from timing import environment, table  # noqa: E402

from sgrld_reproductions.natural_langevin import runs  # noqa: E402


def first_nonfinite(method, lr, burn_in, x, y, steps, seed):
    """``(freeze step, (step, leaf) of the first non-finite step or None, max ‖g‖ per chunk)``."""
    sampler = runs.sampler(method, lr, x.shape[0], adapt_until="auto").adaptation.resolve(burn_in)
    norms = []
    for start, (_, infos) in zip(
        range(0, steps, CHUNK), chunks(sampler, x, y, steps, seed), strict=True
    ):
        ok = np.asarray(infos.is_finite)
        norms.append(float(np.nanmax(np.asarray(infos.grad_norm))))
        if not ok.all():
            i = int(np.argmin(ok))
            leaf = int(np.asarray(infos.nonfinite_leaf)[i])
            return sampler.adaptation.adapt_until, (start + i, leaf), norms
    return sampler.adaptation.adapt_until, None, norms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/mnist")
    parser.add_argument("--lr", type=float, default=0.001)
    parser.add_argument("--updates", type=int, default=3000)
    parser.add_argument("--burn-ins", type=int, nargs="+", default=[400, 600, 1000, 2000])
    parser.add_argument("--eps", type=float, nargs="+", default=[runs.EPS, 1e-3])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--methods", nargs="+", choices=["dop", "qdop"], default=["dop"])
    args = parser.parse_args()
    if args.updates < CHUNK or args.updates % CHUNK:
        parser.error(f"--updates must be a positive multiple of {CHUNK}, got {args.updates}")
    if not args.lr > 0 or not all(e > 0 for e in args.eps):
        parser.error("--lr and every --eps must be > 0")
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
            until, bad, norms = first_nonfinite(
                method, args.lr, burn_in, x, y, args.updates, args.seed
            )
            seconds = time.perf_counter() - start
            print(f"  {name}, ε = {eps:g}, burn-in {burn_in}: {seconds:.0f} s, non-finite {bad}")
            where = "finite" if bad is None else f"step {bad[0]} (leaf {bad[1]})"
            rows.append(
                [name, f"{eps:g}", str(burn_in), str(until), where]
                + [" ".join(f"{g:.3g}" for g in norms)]
            )
    head = ["method", "ε", "burn-in", "frozen at", f"first non-finite in {args.updates}"]
    head.append("max ‖g‖ per 500")
    print(table(head, rows))


if __name__ == "__main__":
    main()
