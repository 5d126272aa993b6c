"""``sgrld reproduce isgd-mnist``: the MNIST ConvNet table of Franzese et al. (2021), "A Scalable
Bayesian Sampling Method Based on Stochastic Gradient Descent Isotropization" (Entropy 23, 1426;
App. C.2): test accuracy (correct out of 10,000), summed test NLL and ECE of i-SGD, the samplers
and the baselines, mean ± std over replicates, beside the paper's numbers.

* Data: MNIST, inputs in [0, 1] (:func:`sgrld.data.load_dataset`), the last ``--validation-size``
  training images held out to choose the learning rate, minibatches of 100.
* Model: the ConvNet of Li et al. (2016) (:class:`sgrld.bnn.CNN`, ``model.kind = "cnn"``), a
  LeNet-style network (two 5x5 convolutions of 32 and 64 channels, each with ReLU and 2x2
  max-pooling, dense layers of 200 and 200 ReLU units, 10 outputs; 1.4 M parameters); the
  Gaussian prior (:func:`sgrld.bnn.priors.gaussian`); the categorical likelihood.
* Methods: those of :data:`~sgrld_reproductions.scaffolding.isgd_methods.ISGD_METHODS` that the
  paper's MNIST table has (SGLD, i-SGD with its λ rule, SGHMC, vSGD, MC dropout, SWAG, SGD), each
  scored by the
  runner's online ensemble (MC dropout: :class:`sgrld.bnn.dropout.DropoutCNN`).
* Learning rates: each method's grid (:data:`GRID`, :data:`GRIDS`) is run with replicate 0's
  seed, the learning rate with the best validation log-likelihood is chosen
  (:func:`~sgrld_reproductions.scaffolding.isgd_methods.select_rate`) and replicates 1, ..., R − 1
  run at it (seeds ``--seed + r``).

The table goes to ``isgd_mnist.md`` and ``isgd_mnist.json`` (every run with its scores).
"""

from __future__ import annotations

import argparse
import functools
from typing import Any, NamedTuple

import numpy as np

from sgrld_app import api as app
from sgrld_reproductions import scaffolding
from sgrld_reproductions.isgd_mnist.runs import Plan, run

KEYS = ("isgd", "sghmc", "dropout", "sgd", "swag", "sgld", "vsgd")
"""The methods run, in the paper's row order (``--methods`` names)."""
GRIDS = {"sghmc": (0.003, 0.01, 0.03), "isgd": ()}
"""Learning-rate grids (lr = h·N) other than :data:`GRID` (i-SGD: its λ rule, no grid)."""
GRID = (0.01, 0.03, 0.1)
"""The grid of SGLD, vSGD, SGD, SWAG and MC dropout."""
METHODS = tuple(
    m._replace(grid=GRIDS.get(m.key, GRID))
    for key in KEYS
    for m in scaffolding.ISGD_METHODS
    if m.key == key
)
"""The methods: :data:`~sgrld_reproductions.scaffolding.isgd_methods.ISGD_METHODS`' rows with
MNIST's grids."""
WIDTHS = (200, 200)
EPOCHS, SAMPLES, REPLICATES, VALIDATION = 20, 20, 3, 10_000
QUICK = {"train_size": 2000, "epochs": 1, "samples": 5, "validation": 500, "widths": (32,)}
"""``--quick``: 2,000 training images, 1 epoch, S = 5, 500 validation images, one dense layer of
32 units, one replicate, the middle learning rate of each grid."""


class Paper(NamedTuple):
    """A row of the paper's table: acc (correct of 10,000), mnll (summed), ece, each mean ± std
    (over the runs that did not fail), and the failed runs."""

    acc: float
    acc_std: float
    mnll: float
    mnll_std: float
    ece: float
    ece_std: float
    failed: int


PAPER = {
    "isgd": Paper(9916.3333, 2.8674, 263.5311, 16.3600, 0.0491, 0.0003, 0),
    "sghmc": Paper(9930.6667, 2.4944, 268.2559, 6.8172, 0.0531, 0.0003, 0),
    "dropout": Paper(9912.6667, 6.0185, 362.8973, 24.8881, 0.0541, 0.0011, 0),
    "sgd": Paper(9886.6667, 11.0252, 352.6640, 20.8622, 0.0468, 0.0001, 0),
    "baseline r": Paper(9919.0000, 9.4163, 242.7644, 17.0736, 0.0482, 0.0006, 0),
    "swag": Paper(9917.0000, 2.8284, 308.8182, 20.0979, 0.0524, 0.0011, 0),
    "sgld": Paper(9927.0000, 1.0000, 279.7685, 16.6563, 0.0531, 0.0004, 1),
    "vsgd": Paper(9927.3333, 6.7987, 225.3725, 16.3739, 0.0481, 0.0005, 0),
    "i-sgd T": Paper(9915.6667, 0.9428, 255.9641, 12.8051, 0.0478, 0.0002, 0),
    "sghmc T": Paper(9937.0000, 0.0000, 231.5332, 0.0000, 0.0518, 0.0000, 2),
}
"""The paper's MNIST ConvNet table (App. C.2), by our method key (its own label for the rows we
do not run). Its ± are population stds (ddof = 0) over three runs less the failed ones: i-SGD's
9916.33 ± 2.87 is e.g. {9913, 9916, 9920}; SGHMC T's ± 0 with 2 failed is one run."""
PAPER_ONLY = {
    "baseline r": "not run (the paper's text does not say what r changes)",
    "i-sgd T": "not run (a temperature variant the text does not define)",
    "sghmc T": "not run (a temperature variant the text does not define)",
}

COLUMNS = app.columns("""
    method       method
    lr           lr
    acc          acc (of 10,000)
    paper_acc    paper
    within       |Δ| ≤ 2 std
    acc_pct      acc %
    mnll         mnll (sum)
    paper_mnll   paper
    ece          ECE
    paper_ece    paper
    failed       failed
    paper_failed  paper
    seconds      s
""")
"""The table's columns: ours beside the paper's."""

NOTES = (
    "Mean ± std over the replicates that did not diverge, std with ddof = 0 as the paper's (its ± "
    "are population stds over 3 runs: i-SGD's 9916.33 ± 2.87 is e.g. {9913, 9916, 9920}; SGHMC "
    "T's ± 0 with 2 failed is one run). acc: correct predictions of the ensemble's mean "
    "probabilities, scaled to 10,000 test images (and in %); mnll: the SUM over the test images of "
    "−log p̄(y|x), scaled to 10,000 images, as the paper prints it; ECE: 30 equal-width "
    "confidence bins (sgrld.evaluation.expected_calibration_error, the runner's); failed: diverged "
    "replicates; |Δ| ≤ 2 std: whether our mean accuracy is within twice the paper's std of its "
    "mean (no (below) / no (above) otherwise). Mean H0 and H1 (predictive entropies on MNIST and "
    "on out-of-distribution images) are left out: the paper's out-of-distribution set is not "
    "named in its text. The ConvNet is not given in the paper's text: ours is Li et al.'s (2016) "
    "LeNet-style ConvNet (sgrld.bnn.CNN: 5x5 convolutions of 32 and 64 channels with ReLU and 2x2 "
    "max-pooling, dense 200-200, 10 outputs), the network of the SG-MCMC MNIST literature that "
    "sgrld already has, LeNet-5's layout at Caffe's LeNet widths. Settings the text does not "
    "give, chosen here: Gaussian prior, batches of 100, --epochs epochs; the ensemble is S = "
    "--samples states: the samplers and vSGD keep every (steps/2S)-th state of the second half, "
    "SWAG and MC dropout draw S networks after the other updates. lr: learning_rate = h·N, "
    "chosen among the method's grid (SGLD, vSGD, SGD, SWAG, dropout: {.01, .03, .1}; SGHMC "
    "(friction 0.1): {.003, .01, .03}; or those of --lr) by the validation log-likelihood of "
    "replicate 0, whose test scores are kept; the other replicates run at that rate (a rate at "
    "the grid's edge is marked so: one beyond it may do better). i-SGD uses "
    "its λ rule (no learning rate, margin 2, warmed up through the burn-in, λ from the noise of "
    "about its last 1,000 updates). SWAG: K = 20 (fewer if fewer iterates are collected), SWA "
    "from half the training. MC dropout: p = 0.5 on the inputs of every dense layer. s: seconds "
    "of the row's runs, compilation included. Rows the paper has that are not run here: "
    "baseline r, i-sgd T, sghmc T. —: nothing to report."
)


def _within(acc: list[float], paper: Paper) -> str:
    """Whether our mean accuracy lies within the paper's mean ± 2 std."""
    if not acc:
        return app.MISSING
    delta = float(np.mean(acc)) - paper.acc
    if abs(delta) <= 2 * paper.acc_std:
        return "yes"
    return "no (above)" if delta > 0 else "no (below)"


def _paper_row(paper: Paper) -> dict[str, str]:
    return {
        "paper_acc": f"{paper.acc:.1f} ± {paper.acc_std:.1f}",
        "paper_mnll": f"{paper.mnll:.1f} ± {paper.mnll_std:.1f}",
        "paper_ece": f"{paper.ece:.4f} ± {paper.ece_std:.4f}",
        "paper_failed": str(paper.failed),
    }


def table_row(method: scaffolding.ISGDMethod, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from a method's runs: the grid of replicate 0, then the other replicates at the
    learning rate chosen on validation (the chosen run of replicate 0 counts as a replicate),
    marked where it is the grid's largest or smallest.

    acc = 10,000 · (test accuracy) and mnll = −10,000 · (mean test log-likelihood), the paper's
    count and sum over MNIST's 10,000 test images; mean ± std (ddof = 0) over the completed runs.
    failed: the replicates that ran to an end without a score (diverged), of those that ended (an
    interrupted replicate is neither).

    Example:
      >>> run = lambda lr, k, acc: {"lr": lr, "replicate": k, "status": "completed",
      ...     "test_accuracy": acc, "test_log_likelihood": -0.025, "test_ece": 0.05,
      ...     "val_nll": 1 - acc if k == 0 else None, "seconds": 1.0}
      >>> sgd = next(m for m in METHODS if m.key == "sgd")
      >>> row = table_row(sgd, [run(0.01, 0, 0.9880), run(0.03, 0, 0.9890), run(0.03, 1, 0.9900)])
      >>> row["lr"], row["acc"], row["mnll"], row["within"], row["paper_acc"], row["failed"]
      ("0.03 (grid's largest)", '9895.0 ± 5.0', '250.0 ± 0.0', 'yes', '9886.7 ± 11.0', '0/2')
      >>> cut = {"lr": 0.03, "replicate": 2, "status": "interrupted", "seconds": 1.0}
      >>> table_row(sgd, [run(0.01, 0, 0.9880), run(0.03, 0, 0.9890), cut])["failed"]
      '0/1'
    """
    grid = [r for r in runs if r["replicate"] == 0]
    chosen = scaffolding.select_rate(grid, score="val_nll")
    lr = None if chosen is None else chosen["lr"]
    kept = ([] if chosen is None else [chosen]) + [r for r in runs if r["replicate"] > 0]
    done = [r for r in kept if r["status"] == "completed" and r["test_accuracy"] is not None]
    spread = functools.partial(scaffolding.spread, ddof=0)  # population stds, as the paper's
    acc = [10_000 * r["test_accuracy"] for r in done]  # of 10,000 images, as the paper's
    mnll = [-10_000 * r["test_log_likelihood"] for r in done]  # the mean NLL's sum over 10,000
    ece = [r["test_ece"] for r in done]
    paper = PAPER[method.key]
    ended = len({r["replicate"] for r in runs if r["status"] != "interrupted"})
    return {
        "method": method.label,
        "lr": _rate_label(method, lr, [r["lr"] for r in grid]),
        "acc": spread(acc, "{:.1f}"),
        "within": _within(acc, paper),
        "acc_pct": spread([a / 100 for a in acc], "{:.2f}"),
        "mnll": spread(mnll, "{:.1f}"),
        "ece": spread(ece, "{:.4f}"),
        "failed": f"{ended - len(done)}/{ended}" if runs else "not run",
        "seconds": round(sum(r["seconds"] for r in runs)),
        **_paper_row(paper),
        "runs": runs,
    }


def _rate_label(method: scaffolding.ISGDMethod, lr: float | None, grid: list[float]) -> str:
    """The ``lr`` column: the chosen rate, marked where it is the largest or smallest of a grid
    of two or more (one beyond it may do better); ``"rule"`` for i-SGD."""
    if not method.tuned:
        return "rule"
    if lr is None:
        return app.MISSING
    rates = sorted(set(grid))
    edge = "largest" if lr == rates[-1] else "smallest" if lr == rates[0] else None
    return format(lr, "g") + (f" (grid's {edge})" if edge and len(rates) > 1 else "")


def table_rows(results: scaffolding.Results) -> list[dict[str, Any]]:
    """The methods asked for, then the paper's rows that are not run here."""
    runs: dict[str, list] = {}
    for r in results["runs"]:
        runs.setdefault(r["method"], []).append(r)
    asked = results["config"]["methods"]
    rows = [table_row(m, runs.get(m.key, [])) for m in METHODS if m.key in asked]
    for label, why in PAPER_ONLY.items():
        row = dict.fromkeys((key for key, _, _ in COLUMNS), app.MISSING)
        rows.append(row | _paper_row(PAPER[label]) | {"method": label, "failed": why})
    return rows


def method_lr(text: str) -> tuple[str, float]:
    """A ``--lr`` entry ``METHOD=LR``
    (:func:`~sgrld_reproductions.scaffolding.isgd_methods.method_lr`) whose method is one of
    :data:`METHODS` with a learning rate.

    Example:
      >>> method_lr("swag=0.05")
      ('swag', 0.05)
    """
    key, lr = scaffolding.method_lr(text)
    keys = [m.key for m in METHODS if m.tuned]
    if key not in keys:
        raise argparse.ArgumentTypeError(f"{text!r}: expected METHOD=LR with METHOD in {keys}")
    return key, lr


def options(parser: argparse.ArgumentParser) -> None:
    scaffolding.method_options(parser, METHODS, method_lr)
    parser.add_argument(
        "--replicates",
        type=scaffolding.positive_int,
        help=f"runs per method at the chosen learning rate (default {REPLICATES}; 1 with --quick)",
    )
    sizes = {
        "--epochs": f"passes over the training images (default {EPOCHS}; {QUICK['epochs']} with "
        "--quick)",
        "--samples": f"ensemble size S (default {SAMPLES}; {QUICK['samples']} with --quick)",
        "--train-size": "use the first N training images (default: all; "
        f"{QUICK['train_size']} with --quick)",
        "--validation-size": "training images held out to choose the learning rate (default "
        f"{VALIDATION:,}; {QUICK['validation']} with --quick)",
    }
    for flag, help in sizes.items():
        parser.add_argument(flag, type=scaffolding.positive_int, help=help)
    scaffolding.data_dir_option(parser, scaffolding.MNIST_FOLDER)
    scaffolding.no_verify_option(
        parser, "skip the SHA-256 check of the IDX files (files of one's own)"
    )


def _settings(args: argparse.Namespace) -> tuple[Plan, int]:
    """The plan and the number of replicates the arguments ask for."""
    q = args.quick
    plan = Plan(
        args.epochs or (QUICK["epochs"] if q else EPOCHS),
        args.samples or (QUICK["samples"] if q else SAMPLES),
        args.train_size or (QUICK["train_size"] if q else None),
        args.validation_size or (QUICK["validation"] if q else VALIDATION),
        QUICK["widths"] if q else WIDTHS,
        args.data_dir,
        args.seed,
        not args.no_verify_checksums,
    )
    return plan, args.replicates or (1 if q else REPLICATES)


def header(args: argparse.Namespace) -> str:
    plan, replicates = _settings(args)
    images = "all the" if plan.train_size is None else f"the first {plan.train_size:,}"
    return (
        f"Franzese et al. (2021) MNIST ConvNet (dense {list(plan.widths)}): {images} training "
        f"images after {plan.validation_size:,} held out for validation, {plan.epochs} "
        f"epoch(s), S = {plan.samples}, {replicates} replicate(s){scaffolding.lr_note(args)}"
        f"{scaffolding.quick_note(args)}"
    )


def compute(args: argparse.Namespace, on_result: scaffolding.OnResult) -> scaffolding.Results:
    """Each method's grid on replicate 0, then replicates 1, ..., R − 1 at the chosen rate."""
    plan, replicates = _settings(args)
    methods = [m for m in METHODS if m.key in args.methods]
    config = {"title": header(args), "quick": args.quick, "replicates": replicates}
    config |= plan._asdict() | {"methods": [m.key for m in methods]}
    config["grids"] = {m.key: scaffolding.grid_of(m, args) for m in methods}
    results: scaffolding.Results = {"config": config, "runs": []}
    for method in methods:
        jobs = [(lr, 0) for lr in config["grids"][method.key]]
        while jobs:
            lr, replicate = jobs.pop(0)
            r = run(method, lr, plan, replicate)
            record = {"method": method.key, "lr": lr, "replicate": replicate, **r}
            if scaffolding.record_run(results, record, on_result):
                return results
            if not jobs and replicate == 0:
                grid = [x for x in results["runs"] if x["method"] == method.key]
                chosen = scaffolding.select_rate(grid, score="val_nll")
                if chosen is not None:
                    jobs = [(chosen["lr"], k) for k in range(1, replicates)]
    return results


progress = scaffolding.run_progress(
    lambda r: f"{r['method']} lr={scaffolding.lr_label(r['lr'])} replicate {r['replicate']}",
    {"val NLL": "val_nll", "test accuracy": "test_accuracy"},
)
"""The last run's validation NLL, test accuracy, status and time."""


def exit_code(results: scaffolding.Results) -> int:
    """130 if interrupted; 1 if a method that ran has no completed run; else 0."""
    done = {r["method"] for r in results["runs"] if r["status"] == "completed"}
    return scaffolding.exit_code_of(
        results["runs"], any(r["method"] not in done for r in results["runs"])
    )


REPRODUCTION = scaffolding.Reproduction.from_module(
    globals(),
    summary="Franzese et al. (2021) App. C.2: i-SGD, samplers and baselines, MNIST ConvNet",
    quick_help="a smoke test in about 2.5 minutes on a CPU: the first 2,000 training images, 1 "
    "epoch, one dense layer of 32 units, S = 5, one replicate, one learning rate per method",
)
