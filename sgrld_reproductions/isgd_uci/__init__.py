"""``sgrld reproduce isgd-uci``: the UCI regression tables of Franzese et al. (2021), "A Scalable
Bayesian Sampling Method Based on Stochastic Gradient Descent Isotropization" (Entropy 23, 1426;
App. C.1), test RMSE and NLL of i-SGD, the samplers and the baselines, with our Γ-corrected rows.

* Data: wine, protein, naval, kin8nm, power and boston, on the published splits of
  Hernández-Lobato & Adams (:mod:`sgrld.data.uci`; 20 splits, 5 for protein); inputs and targets
  standardised on the training rows, scores in the targets' units.
* Model: one hidden layer of 50 ReLU units (100 for protein), the Gaussian prior
  (:func:`sgrld.bnn.priors.gaussian`), the Gaussian likelihood with its noise level sampled (the
  baselines: learnt), minibatches of 32.
* Methods (:data:`~sgrld_reproductions.isgd_uci.ISGD_METHODS`): SGLD, i-SGD (its λ rule), SGHMC,
  vSGD, MC dropout, SWAG, SGD (the paper's "Baseline"), and pSGLD (RMSprop metric) without and
  with the Γ correction. Every one is scored by the runner's online ensemble.
* Learning rates: per split, each method's grid is run on the training split less 10 % held out
  for validation, and the run with the best validation RMSE is scored on the test split.

Each run is :func:`sgrld_reproductions.isgd_uci.runs.run`; the table goes to ``isgd_uci.md`` and
``isgd_uci.json`` (each row with every split's chosen learning rate and scores, and every run).
"""

from __future__ import annotations

import argparse
from typing import Any, NamedTuple

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import ConfigError
from sgrld_reproductions.isgd_uci import runs
from sgrld_reproductions.scaffolding import (
    ISGD_METHODS,
    ISGDMethod,
    OnResult,
    Reproduction,
    Results,
    data_dir_option,
    exit_code_of,
    grid_of,
    lr_label,
    lr_note,
    method_lr,
    method_options,
    no_verify_option,
    positive_int,
    quick_note,
    record_run,
    run_progress,
    select_rate,
    spread,
)

DATASETS = ("uci_wine", "uci_protein", "uci_naval", "uci_kin8nm", "uci_power", "uci_boston")
"""The paper's data sets, in its tables' order."""
SPLITS = {"uci_protein": 5}
"""Published splits of each data set (20 for the others)."""
STEPS, SAMPLES = 10_000, 100
LONG, LONG_STEPS = ("uci_protein", "uci_naval", "uci_kin8nm"), 40_000
"""Data sets whose runs make :data:`LONG_STEPS` updates by default: at 10,000 their test RMSE is
still falling (kin8nm's SGLD: 0.094 at 10,000 updates, 0.079 at 40,000; RESULTS §22)."""
QUICK = {"datasets": ("uci_boston",), "splits": 1, "steps": 400, "samples": 20}
"""``--quick``: boston, split 0, 400 updates, S = 20, the middle learning rate of each grid."""
VALIDATION_SHARE = 0.1
"""The share of each training split held out to choose the learning rate."""


class Paper(NamedTuple):
    """One cell of the paper's tables: mean ± std over splits, and the splits that failed."""

    mean: float
    std: float
    failed: int = 0


def _paper(table: str) -> dict[tuple[str, str], Paper]:
    """``{(row, data set): Paper}`` from lines ``row mean std[/F] ...`` (:data:`DATASETS` order)."""
    cells = {}
    for line in table.strip().splitlines():
        row, *values = line.split()
        for dataset, mean, std in zip(DATASETS, values[::2], values[1::2], strict=True):
            std, _, failed = std.partition("/")
            cells[row, dataset] = Paper(float(mean), float(std), int(failed or 0))
    return cells


PAPER_RMSE = _paper("""
    sgld      0.759 0.07  5.687 0.05  0.007 0.00/6  0.171 0.07/3  11.753 3.25  9.602 2.06
    i-sgd     0.635 0.05  4.699 0.03  0.001 0.00    0.079 0.00    4.320 0.13   3.703 1.19
    Baseline  0.641 0.05  4.733 0.05  0.001 0.00    0.080 0.00    4.354 0.12   3.705 1.19
    vsgd      0.635 0.05  4.699 0.03  0.001 0.00    0.079 0.00    4.325 0.13   3.588 1.06/1
    sghmc     0.628 0.04  4.712 0.03  0.000 0.00/2  0.076 0.00/1  4.310 0.14   3.659 1.24
    drop      0.637 0.04  4.968 0.05  0.003 0.00    0.139 0.01    4.531 0.16   3.803 1.26
""")
"""The paper's test RMSE table (App. C.1; ``/F``: F splits failed)."""
PAPER_NLL = _paper("""
    sgld      1.546 0.25  5.604 0.08  -1.751 0.28/6  5.140 7.05/3   8.429 3.14  30.386 15.77
    i-sgd     1.129 0.15  4.371 0.03  -2.466 1.12    -0.460 0.65    3.122 0.07  9.799 5.69
    Baseline  1.182 0.03  3.964 0.04  0.920 0.00     0.924 0.00     3.071 0.06  5.421 2.73
    vsgd      1.128 0.15  4.371 0.03  -2.466 1.12    -0.480 0.65    3.088 0.06  8.413 5.89/1
    sghmc     1.041 0.12  4.142 0.02  -2.763 1.33/2  -0.798 0.39/1  2.924 0.04  3.097 0.83
    drop      1.065 0.12  4.218 0.06  -2.322 0.75    -0.086 0.41    2.941 0.04  3.989 1.23
""")
"""The paper's mean test NLL table."""

COLUMNS = app.columns("""
    dataset      data set
    method       method
    lr           lr
    rmse         test RMSE
    paper_rmse   paper
    within       ≤ paper + std
    nll          test NLL
    paper_nll    paper
    splits       splits
    seconds      s
""")
"""The table's columns: ours beside the paper's."""

NOTES = (
    "Mean ± std (ddof = 1) over the splits run; paper: Franzese et al. (2021) App. C.1, over its "
    "splits (its std printed to two decimals, so 0.00 means < 0.005; (F = n): n splits failed). ≤"
    " paper + std: whether our mean RMSE is at most the paper's mean plus its printed std. "
    "Settings the paper's text does not give, chosen here: minibatches of 32 (Gal & Ghahramani's "
    "UCI setting); every run makes at least the same number of updates whatever the data set "
    "(--steps, whole epochs; 40,000 for kin8nm, naval and protein, whose RMSE is still falling at "
    "10,000), so small sets get many epochs and large sets few; the ensemble is S"
    " = --samples states: the samplers and vSGD keep every (steps/2S)-th state of the second "
    "half, SWAG and MC dropout draw S networks after the other updates. lr: learning_rate = h·N "
    "(SGD's step on the per-datum loss Û/N), chosen per split among the method's grid (SGLD, "
    "vSGD, SGD, SWAG, dropout: {.003, .01, .03}; SGHMC (friction 0.1): {.001, .003, .01}; pSGLD: "
    "{.001, .003, .01}; or those of --lr, see the caption) by the validation RMSE of the run on "
    "the training split less 10 %, whose test scores are reported (not retrained: one run per "
    "grid point); the table gives the learning rates chosen. i-SGD uses its λ rule (no learning "
    "rate, margin 2, warmed up through the burn-in, λ from the noise of about its last 1,000 "
    "updates). SWAG: K = 20, SWA from half the training, about S "
    "iterates collected, no extra weight decay (the prior's). MC dropout: p = 0.05 on the inputs "
    "and the hidden layer. pSGLD: RMSprop metric, decay 0.99, eps 1e-4; + Γ: with the Hutchinson "
    "Γ correction (one probe). s: seconds of the row's runs (all grid points and splits, "
    "compilation included; set JAX_COMPILATION_CACHE_DIR to reuse compilations across splits). —:"
    " nothing to report (not run, all runs diverged, or not in the paper)."
)


def _paper_cell(cell: Paper | None, fmt: str) -> str:
    if cell is None:
        return app.MISSING
    failed = f" (F = {cell.failed})" if cell.failed else ""
    return f"{fmt.format(cell.mean)} ± {cell.std:.2f}{failed}"


def _format(dataset: str) -> str:
    """Three decimals, four for naval (whose RMSE is about 0.001)."""
    return "{:.4f}" if dataset == "uci_naval" else "{:.3f}"


def table_row(dataset: str, method: ISGDMethod, grid: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from the runs of a method on a data set (every grid point of every split)."""
    by_split: dict[int, list] = {}
    for r in grid:
        by_split.setdefault(r["split"], []).append(r)
    chosen = {k: select_rate(v) for k, v in sorted(by_split.items())}
    kept = [r for r in chosen.values() if r is not None]
    rmse, nll = [r["test_rmse"] for r in kept], [r["test_nll"] for r in kept]
    paper_rmse = PAPER_RMSE.get((method.paper, dataset))
    paper_nll = PAPER_NLL.get((method.paper, dataset))
    fmt = _format(dataset)
    within = app.MISSING
    if rmse and paper_rmse is not None:
        within = "yes" if np.mean(rmse) <= paper_rmse.mean + paper_rmse.std else "no"
    lrs = sorted({r["lr"] for r in kept if r["lr"] is not None})
    lr = "rule" if not method.tuned else ", ".join(format(x, "g") for x in lrs) or app.MISSING
    return {
        "dataset": dataset.removeprefix("uci_"),
        "method": method.label,
        "lr": lr,
        "rmse": spread(rmse, fmt),
        "paper_rmse": _paper_cell(paper_rmse, fmt),
        "within": within,
        "nll": spread(nll, "{:.3f}"),
        "paper_nll": _paper_cell(paper_nll, "{:.3f}"),
        "splits": f"{len(kept)}/{len(by_split)}" if by_split else "not run",
        "seconds": round(sum(r["seconds"] for r in grid)),
        "per_split": {
            str(k): None if r is None else {key: r[key] for key in _KEPT} for k, r in chosen.items()
        },
        "runs": grid,
    }


_KEPT = ("lr", "test_rmse", "test_nll", "val_rmse", "val_nll", "samples")


def table_rows(results: Results) -> list[dict[str, Any]]:
    """Every (data set, method) that was asked for, in the paper's order."""
    config = results["config"]
    grids: dict[tuple[str, str], list] = {}
    for r in results["runs"]:
        grids.setdefault((r["dataset"], r["method"]), []).append(r)
    methods = [m for m in ISGD_METHODS if m.key in config["methods"]]
    return [table_row(d, m, grids.get((d, m.key), [])) for d in config["datasets"] for m in methods]


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, metavar="NAME",
        help=f"data sets (default: all six; uci_boston with --quick): {', '.join(DATASETS)}",
    )  # fmt: skip
    method_options(parser, ISGD_METHODS, method_lr, "(repeat a method for several) ")
    parser.add_argument(
        "--splits",
        type=positive_int,
        help="run the first N published splits (default: all, 20 and 5 for protein; 1 with "
        "--quick)",
    )
    parser.add_argument(
        "--steps",
        type=positive_int,
        help=f"updates per run, at least (default {STEPS:,}, {LONG_STEPS:,} for protein, naval "
        f"and kin8nm; {QUICK['steps']} with --quick)",
    )
    parser.add_argument(
        "--samples",
        type=_samples,
        help=f"ensemble size S, >= 20 (SWAG's rank) (default {SAMPLES}; {QUICK['samples']} "
        "with --quick)",
    )
    data_dir_option(
        parser, "folder with the UCI sets (uci/<folder>/ or <folder>/ of the published layout)"
    )
    no_verify_option(
        parser,
        "skip the SHA-256 check of the data files (files of your own in the published layout)",
    )


def _samples(text: str) -> int:
    value = positive_int(text)
    if value < 20:
        raise argparse.ArgumentTypeError(f"must be at least 20 (SWAG's rank K), got {text}")
    return value


def steps_of(dataset: str, args: argparse.Namespace) -> int:
    """The updates per run on ``dataset``: ``--steps``, else ``--quick``'s, else
    :data:`LONG_STEPS` for :data:`LONG` and :data:`STEPS` for the others.

    Example:
      >>> args = argparse.Namespace(steps=None, quick=False)
      >>> steps_of("uci_boston", args), steps_of("uci_kin8nm", args)
      (10000, 40000)
    """
    if args.steps or args.quick:
        return args.steps or QUICK["steps"]
    return LONG_STEPS if dataset in LONG else STEPS


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The data sets, split count, ensemble size and run plan of each data set the arguments ask
    for."""
    q = QUICK if args.quick else {"datasets": DATASETS, "splits": None}
    datasets = tuple(args.datasets or q["datasets"])
    samples = args.samples or (QUICK["samples"] if args.quick else SAMPLES)
    verify = not args.no_verify_checksums
    short = [d for d in datasets if steps_of(d, args) < samples]
    if short:  # a run keeps S states of its second half (config_of's burn-in and thinning)
        raise ConfigError(
            f"--steps {steps_of(short[0], args)} is below the ensemble size S = {samples} "
            "(--samples): a run needs at least S updates"
        )
    plans = {
        d: runs.Plan(steps_of(d, args), samples, args.data_dir, args.seed, verify) for d in datasets
    }
    splits = args.splits or q["splits"]
    return {"datasets": datasets, "splits": splits, "samples": samples, "plans": plans}


def header(args: argparse.Namespace) -> str:
    s = _settings(args)
    splits = "all splits" if s["splits"] is None else f"{s['splits']} split(s)"
    return (
        f"Franzese et al. (2021) UCI regression: {', '.join(s['datasets'])}; {splits}, "
        f"{_steps_note(s['datasets'], args)}, S = {s['samples']}{lr_note(args)}"
        f"{quick_note(args)}"
    )


def _steps_note(datasets: tuple[str, ...], args: argparse.Namespace) -> str:
    """``"10,000 updates a run (40,000 for kin8nm)"``: the updates per run of ``datasets``."""
    steps = {d: steps_of(d, args) for d in datasets}
    common = max(set(steps.values()), key=list(steps.values()).count)
    other = {n: [d.removeprefix("uci_") for d in steps if steps[d] == n] for n in steps.values()}
    notes = [f"{n:,} for {', '.join(names)}" for n, names in other.items() if n != common]
    return f"{common:,} updates a run" + (f" ({'; '.join(notes)})" if notes else "")


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    """Every method at every learning rate of its grid, on every split of every data set."""
    s = _settings(args)
    methods = [m for m in ISGD_METHODS if m.key in args.methods]
    config = {"title": header(args), "quick": args.quick}
    config |= {"steps": {d: p.steps for d, p in s["plans"].items()}, "samples": s["samples"]}
    config |= {"data_dir": args.data_dir, "seed": args.seed, "verify": not args.no_verify_checksums}
    config |= {"datasets": list(s["datasets"]), "methods": [m.key for m in methods]}
    config["grids"] = {m.key: grid_of(m, args) for m in methods}
    results: Results = {"config": config, "runs": []}
    for dataset in s["datasets"]:
        plan = s["plans"][dataset]
        available = SPLITS.get(dataset, 20)
        for split in range(min(s["splits"] or available, available)):
            n = runs.train_size(dataset, split, plan)
            validation = max(round(VALIDATION_SHARE * n), 1)
            for method in methods:
                for lr in grid_of(method, args):
                    r = runs.run(method, dataset, split, lr, plan, validation)
                    run = {"dataset": dataset, "split": split, "method": method.key, "lr": lr, **r}
                    if record_run(results, run, on_result):
                        return results
    return results


progress = run_progress(
    lambda r: f"{r['dataset']} split {r['split']} {r['method']} lr={lr_label(r['lr'])}",
    {"val RMSE": "val_rmse", "test RMSE": "test_rmse", "test NLL": "test_nll"},
)
"""The last run's validation and test RMSE, test NLL, status and time."""


def exit_code(results: Results) -> int:
    """130 if interrupted; 1 if a method that ran has a split where no run completed; else 0."""
    rows = table_rows(results)
    return exit_code_of(results["runs"], any(None in row["per_split"].values() for row in rows))


REPRODUCTION = Reproduction.from_module(
    globals(),
    summary="Franzese et al. (2021) App. C.1: i-SGD, samplers and baselines on six UCI sets",
    quick_help="a smoke test in about a minute on a CPU: boston, split 0, 400 updates a run, "
    "S = 20, one learning rate per method",
)
