"""``learning_rate="auto"`` against a 7-point grid on targets with known answers (issue 49).

For each target and metric: the whitened mean and covariance errors of ``sgrld.sample`` with
``learning_rate="auto"``, and of the same run at every rate of the grid the search tries (a factor
3 apart), with the same burn-in, steps, chains, starts and seed. Printed per row: the rate auto
chose, the grid's best rate and errors, auto's errors, and their ratio to the grid's best (the
acceptance: at most 1.25; at full batch also at most 0.1).

Targets: the australian BLR against NUTS (``tests/data/australian_blr_nuts.npz``; full batch and
batch 32, started from 0; ``blr_full_far``: full batch started from 10 in every coordinate, 10
prior standard deviations away, for the robustness of the choice to the start), a 10-D
correlated Gaussian of condition number 100 (started from 0, its mean), and the 1-D N(0, 1)
(Rensmeyer & Niggemann's stationary target). The chains start dispersed (``sgrld.sample``'s
default jitter).

    .venv/bin/python benchmarks/right_by_default/auto_rate.py [--quick] [--targets ...]
"""

from __future__ import annotations

import argparse
import platform
import re
import sys
import time
import warnings
from datetime import date
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import sgrld

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tests import blr_reference as blr  # noqa: E402

METRICS = {
    "identity": lambda: sgrld.metrics.identity(),
    "rmsprop": lambda: sgrld.metrics.rmsprop(),
    "monge": lambda: sgrld.metrics.monge(alpha2=1.0),
    "fisher_diag": lambda: sgrld.metrics.fisher_diag(),
    "fisher_qdiag": lambda: sgrld.metrics.fisher_qdiag(),
}


def blr_target(batch_size, start=0.0):
    problem, ref = blr.load_problem(blr.DATA_FILE), np.load(blr.REFERENCE)
    data = (jnp.asarray(problem.x, jnp.float32), jnp.asarray(problem.y, jnp.float32))
    n = len(problem.y)
    potential = sgrld.potential(blr.loglik_fn, blr.logprior_fn, n)
    return dict(
        potential=potential,
        num_data=n,
        start=blr.as_params(np.full(15, start, np.float32)),
        batch_fn=sgrld.minibatch_fn(data, batch_size),
        vector=blr.as_vector,
        mean=ref["mean"],
        cov=ref["cov"],
        metrics=list(METRICS),
    )


def gaussian_target(t):
    return dict(
        potential=t.potential,
        num_data=1,
        start=t.init_params,
        batch_fn=t.batch_fn,
        vector=lambda p: np.asarray(p).reshape(*np.shape(p)[:2], -1),
        mean=np.asarray(t.mean),
        cov=np.asarray(t.cov),
        metrics=["identity", "rmsprop", "monge"],
    )


TARGETS = {
    "blr_full": lambda: blr_target(690),
    "blr_b32": lambda: blr_target(32),
    "blr_full_far": lambda: blr_target(690, start=10.0),  # 10 prior sd from the prior's mean
    "gauss10_k100": lambda: gaussian_target(
        sgrld.samples.targets.correlated_gaussian(10, rho=0.5, condition=100.0)
    ),
    "normal_1d": lambda: gaussian_target(sgrld.samples.targets.standard_normal()),
}


def errors(target, out):
    draws = target["vector"](out.params).astype(np.float64)
    draws = draws.reshape(-1, draws.shape[-1])
    mean = draws.mean(0)
    cov = np.atleast_2d(np.cov(draws, rowvar=False))
    return blr.whitened_errors(mean, cov, target["mean"], np.atleast_2d(target["cov"]))


def run(target, metric, lr, args, seed):
    sampler = sgrld.sgrld(
        target["potential"], METRICS[metric](), learning_rate=lr, num_data=target["num_data"]
    )
    out = sgrld.sample(
        jax.random.key(seed),
        sampler,
        target["start"],
        target["batch_fn"],
        num_samples=args.steps // args.thin,
        thin=args.thin,
        burn_in=args.burn_in,
        num_chains=args.chains,
    )
    return out, errors(target, out)


def row(name, target, metric, args, seed):
    t0 = time.perf_counter()
    auto_out, auto_err = run(target, metric, "auto", args, seed)
    tried = re.search(r"over \d+ rates \((.*?)\) in", auto_out.guarantee).group(1)
    rates = [float(part.split(":")[0]) for part in tried.split(", ")]  # the grid auto searched
    grid = {}
    for lr in rates:
        try:
            grid[lr] = run(target, metric, lr, args, seed)[1]
        except FloatingPointError:
            grid[lr] = (np.inf, np.inf)
    best = min(grid, key=lambda r: max(grid[r]))
    chosen = float(auto_out.guarantee.split("lr ")[1].split(" ")[0])
    ratio = max(auto_err) / max(grid[best])
    print(
        f"| {name} | {metric} | {chosen:.3g} | {best:.3g} | {grid[best][0]:.3f} / "
        f"{grid[best][1]:.3f} | {auto_err[0]:.3f} / {auto_err[1]:.3f} | {ratio:.2f} | "
        f"{time.perf_counter() - t0:.0f} s |",
        flush=True,
    )


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", nargs="+", default=list(TARGETS))
    p.add_argument("--metrics", nargs="+", default=None)
    p.add_argument("--burn-in", type=int, default=2000)
    p.add_argument("--steps", type=int, default=8000)
    p.add_argument("--thin", type=int, default=4)
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print(
        f"# auto_rate.py, {date.today()}, {platform.machine()}, jax {jax.__version__}; burn-in "
        f"{args.burn_in}, {args.steps} steps, thin {args.thin}, {args.chains} chains, seed "
        f"{args.seed}; errors: whitened mean / covariance (spectral); ratio: max of auto's two "
        "over max of the grid best's"
    )
    head = "target | metric | auto lr | grid best lr | grid best errors | auto errors | ratio | s"
    print(f"| {head} |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.targets:
        target = TARGETS[name]()
        for metric in args.metrics or target["metrics"]:
            if metric in target["metrics"]:
                row(name, target, metric, args, args.seed)


if __name__ == "__main__":
    main()
