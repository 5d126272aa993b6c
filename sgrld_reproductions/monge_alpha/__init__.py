"""Yu et al. (2023) Fig. 4: the Monge metric against its α², beside the other metrics, on MNIST.

``sgrld reproduce monge-alpha`` runs the setting of Fig. 4 of Yu, Hartmann, Williams & Klami (TMLR
2023): the 784-400-400-10 MLP with the horseshoe prior on MNIST, 400 epochs, as
:mod:`sgrld_reproductions.mnist_mlp` (data, prior, schedule and the Monge sampler's λ = 0.9), and
sweeps Monge's metric parameter α² of ``G(θ) = I + α² ∇ℓ∇ℓᵀ`` (Sec. 3.1):

* α² grid: 0 (the Identity metric) and the authors' grid for the figure, 0.05, 0.1, 0.25, 0.5,
  0.75, 1.0, 1.25, 1.5, 1.75, 2.0 and 2.25 (their notebook ``final_results/
  plot_experiments_results.ipynb``, which also ran 2.5, 2.75 and 3.0: "starting from α² = 2.5,
  it no longer works"); ``--alpha2`` to choose others;
* learning rates: each α² at the rate the authors chose for it on validation: 0.25 up to
  α² = 1.25, 0.5 from 1.5 on (:data:`PAPER`); a value off their grid gets the rate of the
  nearest value of it. With ``--prior gaussian`` (not in the figure;
  the notebook's α² ∈ {0.1, 0.5, 1.0} there, every one at 0.05) every α² gets 0.05;
* one sweep per learning rate (:func:`sgrld_app.api.run_sweep`): every (α², replicate) pair a
  chain of one compiled program, α² a per-chain value of the sampler state; ``--replicates R`` runs
  seeds ``--seed`` to ``--seed + R − 1``. ``--lr-grid`` chooses each α²'s rate as the authors did
  instead: one sweep of every (rate, α², replicate) over Identity's Table 4 rate and two either
  side on the paper's grid (:func:`~sgrld_reproductions.scaffolding.yu_mnist.lr_ladder`; for
  the horseshoe 0.075 to 0.75, the authors' Monge grid), the rate of best mean validation
  log p(y|X) without a diverged chain kept per α²;
* the other metrics (``--metrics``; default Identity, Wenzel, RMSprop and Shampoo) at their
  Table 4 learning rates, each a run (a sweep of its replicates), drawn as horizontal lines.

The table gives per α² our test log p(y|X) and accuracy (mean ± std over replicates, ddof 1)
beside the authors' (mean ± std over their 10 runs, ddof 0 as ``np.std`` in their notebook, the
numbers behind Fig. 4), the validation log p(y|X), the chains that diverged and which α² is best on
validation (the paper's choice, Sec. 4.1); then the other metrics beside Table 1. A value of ours
is marked ▼ where it is below the paper's mean by more than twice the paper's standard deviation.

``--quick`` runs the figure's pipeline on the first 10 000 training images for 4 epochs (burn-in
2 epochs, 4 samples an epoch: :data:`~sgrld_reproductions.scaffolding.yu_mnist.MNIST_QUICK`) with
α² ∈ {0, 0.5, 1.25, 2.0}: a smoke test, not a reproduction.

Outputs in ``--out``: the run folders ``horseshoe-400/monge[/lr<lr>]/`` (one sweep each, with
its ``sweep.md``) and ``horseshoe-400/<metric>/``, ``monge_alpha.md`` and ``monge_alpha.json``
(the table, with every replicate's scores) and ``monge_alpha.png`` (the figure: test log p(y|X)
and accuracy against α², ±1.96 std bars over replicates, the paper's points beside ours, the
other metrics as horizontal lines). ``--resume`` continues a stopped command: each run folder from
its newest checkpoint (a finished run is read back), a run not yet started starts.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import BAND, ConfigError, Grid, run_sweep
from sgrld_reproductions.monge_alpha.table import (
    COLUMNS,  # noqa: F401 - read by Reproduction.from_module, as NOTES
    NOTES,  # noqa: F401
    PAPER,
    WIDTH,
    alpha2_row,
    mark_best,
    reference_row,
)
from sgrld_reproductions.scaffolding import (
    METRIC_LABELS,
    MNIST_PAPER,
    MNIST_QUICK,
    OnResult,
    Reproduction,
    Results,
    choices_option,
    data_options,
    data_settings,
    epochs_option,
    last_run_message,
    lr_ladder,
    mnist_caption,
    mnist_config,
    replicates_option,
    run_cell,
    worst_run_exit_code,
)

ALPHA2 = (0.0, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25)
"""The default grid: 0 (Identity) and the authors' α² that finished."""
QUICK_ALPHA2 = (0.0, 0.5, 1.25, 2.0)
"""The grid of ``--quick``."""
REFERENCES = ("identity", "wenzel", "rmsprop", "shampoo")


def learning_rate(prior: str, alpha2: float) -> float:
    """The learning rate of α²: the authors' for a value of their grid, else that of the nearest
    value of their grid (Identity's Table 4 rate at α² = 0).

    Example:
        >>> learning_rate("horseshoe", 1.25), learning_rate("horseshoe", 1.3)
        (0.25, 0.25)
        >>> learning_rate("horseshoe", 1.45), learning_rate("horseshoe", 4.0)
        (0.5, 0.5)
        >>> learning_rate("gaussian", 0.0), learning_rate("gaussian", 2.0)
        (0.05, 0.05)
    """
    if alpha2 in PAPER[prior]:
        return PAPER[prior][alpha2].learning_rate
    if alpha2 == 0:
        return MNIST_PAPER[(prior, WIDTH)]["identity"].learning_rate
    return PAPER[prior][min(PAPER[prior], key=lambda a: abs(a - alpha2))].learning_rate


def alpha2_value(text: str) -> float:
    """An ``--alpha2`` value: a finite number ≥ 0.

    Example:
        >>> alpha2_value("1.25")
        1.25
        >>> alpha2_value("-1")
        Traceback (most recent call last):
        ...
        argparse.ArgumentTypeError: α² must be a finite number >= 0, got -1
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"α² must be a finite number >= 0, got {text}")
    return value


ALPHA2_KEY = "sampler.metric_params.alpha2"


def _best_rate(scores: list[dict[str, Any]]) -> int:
    """Of one α²'s settings at several learning rates (:attr:`sgrld_app.api.SweepResult.scores`),
    the one of highest mean validation log p(y|X) with no diverged chain (else the first).

    Example:
        >>> _best_rate([{"diverged": 0, "val_log_likelihood": np.array([-0.2])},
        ...             {"diverged": 1, "val_log_likelihood": np.array([-0.1])},
        ...             {"diverged": 0, "val_log_likelihood": np.array([-0.15])}])
        2
    """
    ranked = [
        (float(np.mean(s["val_log_likelihood"])), i)
        for i, s in enumerate(scores)
        if not s["diverged"] and np.all(np.isfinite(s["val_log_likelihood"]))
    ]
    return max(ranked)[1] if ranked else 0


def _text(values: tuple[float, ...] | list[float]) -> str:
    return ", ".join(f"{v:g}" for v in values)


def options(parser: argparse.ArgumentParser) -> None:
    epochs_option(parser, paper=400, quick=MNIST_QUICK["epochs"])
    parser.add_argument(
        "--alpha2",
        type=alpha2_value,
        nargs="+",
        help=f"Monge's α² values (default: {_text(ALPHA2)}; with --quick {_text(QUICK_ALPHA2)})",
    )
    parser.add_argument(
        "--prior",
        choices=("horseshoe", "gaussian"),
        default="horseshoe",
        help="prior (default: horseshoe, Fig. 4's)",
    )
    others = "the other metrics, at their Table 4 learning rates (default: all; none: only Monge)"
    choices_option(parser, "--metrics", REFERENCES, others, nargs="*")
    replicates_option(
        parser, "runs per α² and metric, seeds --seed, --seed + 1, ... (paper: 10; default: 1)"
    )
    parser.add_argument(
        "--lr-grid",
        action="store_true",
        help="choose each α²'s learning rate on validation among Identity's Table 4 rate and two "
        "either side on the paper's grid (the authors' Monge grid), one sweep of rates x α²",
    )
    data_options(parser)


def _epochs(args: argparse.Namespace) -> int:
    return args.epochs or (MNIST_QUICK["epochs"] if args.quick else 400)


def _grid(args: argparse.Namespace) -> tuple[float, ...]:
    values = tuple(args.alpha2 or (QUICK_ALPHA2 if args.quick else ALPHA2))
    if len(set(values)) < len(values):
        raise ConfigError(f"--alpha2: a value is repeated in {list(values)}")
    return values


def header(args: argparse.Namespace) -> str:
    quick = " (--quick: a smoke test)" if args.quick else ""
    return (
        f"Monge's α² on MNIST, {args.prior} prior, W={WIDTH}, {_epochs(args)} epochs, "
        f"{args.replicates} replicate(s){quick}"
    )


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    """One sweep of α² per learning rate, then the other metrics."""
    grid = _grid(args)
    results: Results = {
        "config": {
            "title": header(args),
            "prior": args.prior,
            "width": WIDTH,
            "epochs": _epochs(args),
            "alpha2": list(grid),
            "quick": args.quick,
            "seed": args.seed,
            "replicates": args.replicates,
            "lr_grid": args.lr_grid,
        },
        "rows": [],
        "runs": [],
    }
    common = {"epochs": _epochs(args), "seed": args.seed, **data_settings(args)}
    out = Path(args.out)
    by_rate: dict[tuple[float, ...], list[float]] = {}
    for alpha2 in sorted(grid):
        rate = learning_rate(args.prior, alpha2)
        rates = lr_ladder(learning_rate(args.prior, 0.0)) if args.lr_grid else (rate,)
        by_rate.setdefault(rates, []).append(alpha2)
    for rates, values in by_rate.items():
        lr = rates[len(rates) // 2]  # the rate, or the middle of the grid (its folder)
        cfg = mnist_config(args.prior, WIDTH, "monge", out, learning_rate=lr, **common)
        label = f"Monge lr={_text(rates)} α²={_text(values)}"
        grids = [Grid("sampler.learning_rate", rates), Grid(ALPHA2_KEY, tuple(values))]
        existing = app.existing_of(Path(cfg.out.folder), args.resume)
        sweep = run_sweep(
            cfg, grids, args.replicates, existing=existing, progress=True, label=label
        )
        results["runs"].append(sweep.result)
        for a, alpha2 in enumerate(values):
            i = _best_rate(sweep.scores[a :: len(values)])
            scores = sweep.scores[i * len(values) + a]
            row = alpha2_row(args.prior, alpha2, rates[i], scores, sweep.result)
            if len(rates) > 1:
                row["lr"] += f" (val. of {_text(rates)})"
            results["rows"].append(row)
        mark_best(results["rows"])
        on_result(results)
        if sweep.result.status == "interrupted":
            return results
    for metric in args.metrics:
        cfg = mnist_config(args.prior, WIDTH, metric, out, **common)
        label = METRIC_LABELS[metric]
        cell = run_cell(cfg, args.replicates, label, resume=args.resume)
        results["runs"].append(cell.result)
        results["rows"].append(reference_row(args.prior, metric, cell))
        on_result(results)
        if cell.result.status == "interrupted":
            break
    return results


def _band(values: list[float | None]) -> tuple[float, float]:
    """Mean and ±1.96 std (ddof 1; 0 for one value) of finite values, NaN without any."""
    finite = np.array([v for v in values if v is not None], np.float64)
    if not len(finite):
        return math.nan, math.nan
    return float(finite.mean()), BAND * float(finite.std(ddof=1)) if len(finite) > 1 else 0.0


def plot(results: Results, out: Path) -> Path:
    """``monge_alpha.png``: test log p(y|X) and accuracy against α² (ours with ±1.96 std bars over
    replicates, the paper's beside), the other metrics as horizontal lines (the paper's dotted)."""
    plt = app.pyplot()
    prior = results["config"]["prior"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), constrained_layout=True)
    monge = [r for r in results["rows"] if r["metric"] == "Monge"]
    panels = (
        ("test_log_likelihood", "test log p(y|X)", "log_lik"),
        ("test_accuracy", "test accuracy", "accuracy"),
    )
    for ax, (key, label, field) in zip(axes, panels, strict=True):
        x = [float(r["α²"]) for r in monge]
        ours = np.array([_band(r["replicates"][key]) for r in monge]).reshape(-1, 2)
        ax.errorbar(x, ours[:, 0], yerr=ours[:, 1], marker="o", capsize=3, label="Monge (ours)")
        paper = [(a, getattr(p, field)) for a, p in sorted(PAPER[prior].items()) if p.log_lik]
        if paper:
            ax.errorbar(
                [a for a, _ in paper],
                [v[0] for _, v in paper],
                yerr=[BAND * v[1] for _, v in paper],
                marker="s",
                linestyle="--",
                capsize=3,
                color="grey",
                label="Monge (paper)",
            )
        others = [r for r in results["rows"] if r["metric"] != "Monge"]
        for i, row in enumerate(others):
            color, ours = f"C{i + 2}", _band(row["replicates"][key])[0]
            if math.isfinite(ours):  # not a run that diverged before its first sample
                ax.axhline(ours, color=color, label=row["metric"])
            metric = {name: m for m, name in METRIC_LABELS.items()}[row["metric"]]
            reference = MNIST_PAPER[(prior, WIDTH)][metric]
            value = getattr(reference, field)
            if value is not None:
                ax.axhline(value[0], color=color, linestyle=":")
        ax.set(xlabel="α²", ylabel=label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"Monge's α², MNIST, {prior} prior, W={WIDTH} (dotted: paper)", fontsize=10)
    return app.save_figure(fig, out / "monge_alpha.png", dpi=120)


caption = mnist_caption

REPRODUCTION = Reproduction.from_module(
    globals(),
    summary="Yu et al. (2023) Fig. 4: Monge's α² against the other metrics, MNIST MLP",
    progress=last_run_message,
    exit_code=worst_run_exit_code,
    quick_help="a smoke test in a few minutes: the first 10 000 training images, 4 epochs, "
    f"α² ∈ {{{', '.join(map(str, QUICK_ALPHA2))}}}",
    resumable=True,
)
