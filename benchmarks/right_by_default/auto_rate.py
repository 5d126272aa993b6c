"""``learning_rate="auto"`` against a 7-point grid on targets with known answers (issue 49).

For each target and metric: the whitened mean and covariance errors of ``sgrld.sample`` with
``learning_rate="auto"``, and of the same run at every rate of the grid the search tries (a factor
3 apart), with the same burn-in, steps, chains, starts and seeds (``--seeds``). Printed per row:
the rate auto chose at each seed, the grid's best rate and its errors, auto's errors (means over
the seeds), and the ratio of auto's mean larger error to the grid best's (the acceptance: at
most 1.25; at full batch also at most 0.1).

Samplers: ``sgrld.sgrld`` with each metric, and ``sgrld.sghmc`` (identity metric, its default
friction 0.1), row ``sghmc``. Monge is ``sgrld.metrics.monge()``, as a user writes it: with
``"auto"`` its α² is searched beside the rate, and at the grid's numbers it is the published 1.

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
    "monge": lambda: sgrld.metrics.monge(),  # α² chosen beside an "auto" rate, else 1
    "fisher_diag": lambda: sgrld.metrics.fisher_diag(),
    "fisher_qdiag": lambda: sgrld.metrics.fisher_qdiag(),
    "shampoo": lambda: sgrld.metrics.shampoo(),
    "sghmc": lambda: sgrld.metrics.identity(),  # sgrld.sghmc, friction 0.1 (its default)
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
        metrics=["identity", "rmsprop", "monge", "shampoo", "sghmc"],
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
    if metric == "sghmc":
        sampler = sgrld.sghmc(target["potential"], learning_rate=lr, num_data=target["num_data"])
    else:
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


def row(name, target, metric, args):
    """One table row: auto and every rate any seed's search tried, at each of ``args.seeds``
    seeds; errors are means over the seeds (one seed's covariance error is mostly its Monte
    Carlo noise: on N(0, 1) the same rate gave 0.001 and 0.083 at two seeds)."""
    t0 = time.perf_counter()
    seeds = range(args.seed, args.seed + args.seeds)
    chosen, auto_err, rates = [], [], set()
    for seed in seeds:
        out, err = run(target, metric, "auto", args, seed)
        tried = re.search(r"over \d+ rates \((.*?)\) in", out.guarantee).group(1)
        rates |= {float(part.split(":")[0]) for part in tried.split(", ")}
        chosen.append(float(out.guarantee.split("lr ")[1].split(" ")[0]))
        auto_err.append(err)
    grid = {}  # rate -> errors [seeds, 2]
    for lr in sorted(rates, reverse=True):
        try:
            grid[lr] = np.array([run(target, metric, lr, args, seed)[1] for seed in seeds])
        except FloatingPointError:
            grid[lr] = np.full((len(seeds), 2), np.inf)
    best = min(grid, key=lambda r: grid[r].max(1).mean())
    auto, at_best = np.array(auto_err), grid[best]
    ratio = auto.max(1).mean() / at_best.max(1).mean()
    print(
        f"| {name} | {metric} | {' / '.join(f'{c:.3g}' for c in chosen)} | {best:.3g} | "
        f"{at_best[:, 0].mean():.3f} / {at_best[:, 1].mean():.3f} | "
        f"{auto[:, 0].mean():.3f} / {auto[:, 1].mean():.3f} | "
        f"{ratio:.2f} | {time.perf_counter() - t0:.0f} s |",
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
    p.add_argument("--seeds", type=int, default=1, help="seeds per row, from --seed on")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    print(
        f"# auto_rate.py, {date.today()}, {platform.machine()}, jax {jax.__version__}; burn-in "
        f"{args.burn_in}, {args.steps} steps, thin {args.thin}, {args.chains} chains, seeds "
        f"{args.seed}..{args.seed + args.seeds - 1}; errors: whitened mean / covariance "
        "(spectral), means over the seeds; ratio: the mean over seeds of auto's larger error "
        "over that of the grid's best rate (least mean larger error)"
    )
    head = "target | metric | auto lr | grid best lr | grid best errors | auto errors | ratio | s"
    print(f"| {head} |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.targets:
        target = TARGETS[name]()
        for metric in args.metrics or target["metrics"]:
            if metric in target["metrics"]:
                row(name, target, metric, args)


if __name__ == "__main__":
    main()
