"""Yu et al. (2023) Tables 1 and 2: MNIST 784-W-W-10 MLPs sampled by SGRLD in five metrics.

``sgrld reproduce mnist-mlp`` runs the configurations of Sec. 4.3 and App. A.5 of Yu, Hartmann,
Williams & Klami (TMLR 2023) and writes our numbers next to the paper's:

* data: MNIST, 50 000 training images (10 000 held out for validation with seed 1), pixels / 255,
  the official 10 000 test images (:func:`sgrld.data.load_dataset`);
* model: a 784-W-W-10 ReLU MLP, W ∈ {400, 800, 1200}, He initialisation;
* priors: Gaussian ``N(0, (1.41/√fan_in)²)`` on weights and ``N(0, 1)`` on biases, or the layer-wise
  horseshoe on weights and biases, *without* the softplus Jacobian, as in the authors' code
  (:func:`sgrld.bnn.priors.horseshoe` with ``include_jacobian=False``);
* samplers: Identity, Wenzel, RMSprop, Monge and Shampoo with λ = 0.99, ε = 1e-8 (Monge λ = 0.9;
  Shampoo roots every 100 steps, blocks of 128; Wenzel's scales refreshed once per epoch), no Γ
  correction, T = 1, and the learning rates of Table 4 and the α² of Sec. 4.3
  (:data:`~sgrld_reproductions.scaffolding.yu_mnist.MNIST_PAPER`).
  Where the paper found α² = 0 best for Monge ("Identity (α² = 0) is optimal") Monge *is* the
  Identity sampler, so it is not run again and the table says so;
* schedule: batches of 100 (500 steps per epoch), burn-in 1000 minibatches, a sample every 100
  (5 per epoch), 400 epochs in the paper (``--epochs`` to shorten).

Scores are those of the paper (:mod:`sgrld_app.runner`): test log p(y|X) of the ensemble average and
its accuracy after the last epoch, plus the average confidence (the mean largest predicted
probability, beside Table 10's for horseshoe W = 400), ECE (30 bins), seconds per epoch (ours: the
median epoch of sampling *and* evaluating 5 samples on 20 000 images; the paper's are per-step
sampling times on one Xeon core, not comparable across machines) and, with ``--curvature``, the
mean curvature C(x) over samples on 1000 test points. A value of ours is marked ▼ where it is below
the paper's mean by more than twice the paper's standard deviation over its 10 runs.

``--replicates R`` runs each cell R times (seeds ``--seed`` to ``--seed + R − 1``) as the chains
of one program (:func:`sgrld_app.api.run_sweep`), and the table gives our mean ± std over them, as
the paper's over its 10 runs; the curves are then the mean over replicates with a ±1.96 std band,
as the paper's Fig. 3 (each replicate's ensemble is scored every epoch: the ``"groups"`` of
``metrics.jsonl``).

``--equal-time`` adds Table 6 (App. A.6): per setting, every sampler's ensemble cut at the total
sampling time of the fastest sampler run: sampler ``m`` keeps its first ``⌊B / t_m⌋`` epochs,
``B = min_m t_m · epochs`` and ``t_m`` its median sampling seconds per epoch (``sample_s`` of
``metrics.jsonl``, evaluation excluded), the ensemble after those epochs being that epoch's record
(each replicate's with ``--replicates``). The paper re-chose the learning rates for the cut on the
validation log-likelihood and names the changes (:data:`EQUAL_TIME_LR`); where it did, the other
rate is run too, cut at the same epochs (the times of the Table 1 run, as the paper assumed equal
times across learning rates), and the rate of higher validation log-likelihood at the cut is kept
(the rows say which). Other learning rates are kept at Table 4's: the paper found none of them
changed. Equal time compares samplers, so it needs two metrics or more.

``--lr-grid`` chooses the learning rates as the paper did (App. A.5) instead of taking Table 4's:
each metric's cell is one sweep of Table 4's rate and the two rates either side of it on the
paper's grid ``[1, 2.5, 5, 7.5] × 10^x``
(:func:`~sgrld_reproductions.scaffolding.yu_mnist.lr_ladder`: at W = 400 the authors' own grids in
their notebook, but for Wenzel's, e.g. 0.075 to 0.75 for Identity with the horseshoe) × the
replicates, and the rate of highest mean validation log p(y|X) among those with no diverged chain
is kept, after the last epoch for Tables
1-2 and at the cut for Table 6 (then no run at :data:`EQUAL_TIME_LR`).

``--quick`` trains on the first 10 000 training images for 4 epochs (100 steps each; burn-in 2
epochs, 4 samples an epoch: burn-in 200, a sample every 25, on ``--train-size`` images as many
epochs and samples): with the default W = 400 and horseshoe prior, a few minutes for the five
metrics. It is a smoke test of the pipeline, not a reproduction.

``--train-size``, ``--validation-size`` and ``--no-verify-checksums`` run on other (e.g. small
test) IDX files.

Outputs in ``--out``: per setting and metric a run folder ``<prior>-<W>/<metric>/`` (config,
``metrics.jsonl``, ``summary.json``; ``.../lr<lr>/`` for a re-chosen rate), ``mnist_mlp.md`` and
``mnist_mlp.json`` (the table: ``table`` 1-2, and 6 with ``--equal-time``) and
``curves_<prior>-<W>.png`` (test log p(y|X) and accuracy against epochs, as the paper's Fig. 3).
``--resume`` continues a stopped command: each run folder from its newest checkpoint (a finished
run is read back), a run not yet started starts.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import MISSING, TEXT, ConfigError, mean_std
from sgrld_reproductions.scaffolding import (
    METRIC_LABELS,
    MNIST_PAPER,
    MNIST_QUICK,
    MnistCell,
    OnResult,
    Reproduction,
    Results,
    YuPaper,
    curvature_option,
    data_options,
    data_settings,
    epochs_option,
    equal_time_epochs,
    last_run_message,
    lr_ladder,
    metrics_option,
    mnist_caption,
    mnist_config,
    positive_int,
    replicates_option,
    run_cell,
    start_results,
    worst_run_exit_code,
)

WIDTHS = (400, 800, 1200)
PRIORS = ("gaussian", "horseshoe")
STEPS_PER_EPOCH = 500

Pair = tuple[float, float]
TABLE6: dict[tuple[str, int], dict[str, tuple[Pair, Pair]]] = {
    ("gaussian", 400): {
        "identity": ((-0.1311, 0.0004), (0.9684, 0.0005)),
        "wenzel": ((-0.1315, 0.0002), (0.9686, 0.0003)),
        "rmsprop": ((-0.1310, 0.0005), (0.9689, 0.0006)),
        "shampoo": ((-0.1304, 0.0002), (0.9684, 0.0004)),
    },
    ("gaussian", 800): {
        "identity": ((-0.1667, 0.0004), (0.9587, 0.0003)),
        "wenzel": ((-0.1668, 0.0004), (0.9583, 0.0004)),
        "rmsprop": ((-0.1648, 0.0002), (0.9612, 0.0003)),
        "shampoo": ((-0.1635, 0.0003), (0.9596, 0.0004)),
    },
    ("gaussian", 1200): {
        "identity": ((-0.1932, 0.0004), (0.9514, 0.0004)),
        "wenzel": ((-0.1935, 0.0004), (0.9519, 0.0003)),
        "rmsprop": ((-0.1894, 0.0006), (0.9566, 0.0003)),
        "monge": ((-0.1785, 0.0005), (0.9560, 0.0005)),
        "shampoo": ((-0.1878, 0.0003), (0.9541, 0.0003)),
    },
    ("horseshoe", 400): {
        "identity": ((-0.0750, 0.0004), (0.9823, 0.0003)),
        "wenzel": ((-0.0777, 0.0009), (0.9806, 0.0003)),
        "rmsprop": ((-0.0680, 0.0013), (0.9792, 0.0007)),
        "monge": ((-0.0650, 0.0006), (0.9826, 0.0006)),
        "shampoo": ((-0.0691, 0.0009), (0.9812, 0.0008)),
    },
    ("horseshoe", 800): {
        "identity": ((-0.0798, 0.0003), (0.9818, 0.0004)),
        "wenzel": ((-0.0842, 0.0008), (0.9787, 0.0002)),
        "rmsprop": ((-0.0656, 0.0013), (0.9801, 0.0007)),
        "monge": ((-0.0628, 0.0010), (0.9835, 0.0007)),
        "shampoo": ((-0.0663, 0.0009), (0.9819, 0.0006)),
    },
    ("horseshoe", 1200): {
        "identity": ((-0.0809, 0.0004), (0.9814, 0.0002)),
        "wenzel": ((-0.1009, 0.0009), (0.9745, 0.0005)),
        "rmsprop": ((-0.0630, 0.0011), (0.9808, 0.0007)),
        "monge": ((-0.0699, 0.0005), (0.9832, 0.0005)),
        "shampoo": ((-0.0599, 0.0005), (0.9831, 0.0003)),
    },
}
"""Table 6 of Yu et al. (2023), equal computation time: (log p(y|X), accuracy), each mean and
standard deviation over 10 runs, by (prior, W) and metric (Monge absent where α² = 0 is optimal)."""
EQUAL_TIME_LR: dict[tuple[str, int, str], float] = {
    ("gaussian", 400, "shampoo"): 0.005,
    ("gaussian", 800, "shampoo"): 0.0025,
    ("gaussian", 1200, "shampoo"): 0.0025,
    ("horseshoe", 400, "rmsprop"): 0.00075,
}
"""The learning rates the paper re-chose for the equal time budget where they differ from Table 4's
(App. A.6), by (prior, W, metric)."""


def _cell(
    ours: float | None, paper: tuple[float, float] | None, over: np.ndarray | None = None
) -> tuple[str, str]:
    """(ours, paper) formatted; ours marked ▼ below the paper's mean − 2 standard deviations.
    ``over``: our value in each replicate, shown as mean ± std (the mean is compared)."""
    text = app.format_value(ours)
    if over is not None:
        ours = float(np.mean(over)) if np.all(np.isfinite(over)) else None
        text = mean_std(over)
    if paper is None:
        return text, MISSING
    worse = ours is not None and ours < paper[0] - 2 * paper[1]
    return text + (" ▼" if worse else ""), f"{paper[0]:.4f} ± {paper[1]:.4f}"


COLUMNS = tuple(
    (name, name, TEXT if name in ("table", "prior", "metric", "lr", "status") else "{:>}")
    for name in (
        "table", "prior", "W", "metric", "lr", "log p(y|X)", "paper log p", "acc.", "paper acc.",
        "conf.", "paper conf.", "ECE", "curv.", "paper curv.", "s/epoch", "paper s/epoch",
        "eval s/epoch", "epochs", "status",
    )
)  # fmt: skip
"""The columns of the output table, ours next to the paper's: preformatted text (:func:`table_row`),
right-aligned except the names."""
NOTES = (
    "table 1-2: the ensembles after the last epoch; table 6 (--equal-time): each ensemble cut at "
    "the fastest sampler's total sampling time (epochs: those within it; lr: the rate kept on "
    "validation at the cut). s/epoch: the sampler's time per epoch, evaluation excluded, as the "
    "paper timed it (the paper's: one CPU core, per step; ours with --replicates or --lr-grid: "
    "that of the sweep's chains together); eval s/epoch: the time spent scoring "
    "the epoch's samples on the test and validation sets. conf.: the average confidence, the "
    "mean largest predicted probability of the ensemble (paper: Table 10, 3 runs, horseshoe "
    "W = 400 only); below the accuracy, the ensemble is under-confident."
)


def seconds_per_epoch(result: app.Result) -> float:
    """A run's median sampling seconds per epoch (its records' ``sample_s``), the time source
    of ``--equal-time``.

    Raises:
        ConfigError: the run has no epoch, or an epoch's record has no ``sample_s``.

    Example:
        >>> from types import SimpleNamespace
        >>> seconds_per_epoch(SimpleNamespace(records=[{"sample_s": s} for s in (3, 1, 2)]))
        2.0
        >>> seconds_per_epoch(SimpleNamespace(records=[{"epoch": 1}], out="r/identity"))
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: --equal-time cuts each ensemble by ...
    """
    times = [r.get("sample_s") for r in result.records]
    if not times or any(t is None or not np.isfinite(t) for t in times):
        where = f" in {result.out}/metrics.jsonl" if getattr(result, "out", None) else ""
        raise ConfigError(
            f"--equal-time cuts each ensemble by the epochs' sampling times, but the run's "
            f"records{where} ({len(times)} epochs) lack sample_s: run the cells again to time them"
        )
    return float(np.median(times))


def _row(
    table: str,
    prior: str,
    width: int,
    metric: str,
    cell: MnistCell | None,
    paper: YuPaper,
    rate: int = 0,
) -> dict[str, str]:
    row = dict.fromkeys((key for key, _, _ in COLUMNS), MISSING)
    row |= {"table": table, "prior": prior, "W": str(width), "metric": METRIC_LABELS[metric]}
    if cell is None:
        note = "α² = 0 is optimal (= Identity)"
        return row | {"log p(y|X)": note, "paper log p": note, "status": "not run"}
    alpha2 = f", α²={paper.alpha2:g}" if paper.alpha2 else ""
    status = cell.result.status
    diverged = cell.result.records[-1].get("divergences", 0) if cell.result.records else 0
    if diverged and status == "completed":  # a sweep's other chains went on
        status += f" ({diverged} chain(s) diverged)"
    lr = format(cell.learning_rates[rate], "g")
    if len(cell.learning_rates) > 1:
        lr += f" (val. of {', '.join(format(r, 'g') for r in cell.learning_rates)})"
    return row | {"lr": lr + alpha2, "status": status}


def table_row(prior: str, width: int, metric: str, cell: MnistCell | None) -> dict[str, str]:
    """One row of Tables 1-2 (``cell=None``: Monge where α² = 0, i.e. Identity, is best), at the
    cell's rate of best validation log p(y|X) (:meth:`MnistCell.choose`)."""
    paper = MNIST_PAPER[(prior, width)][metric]
    rate = 0 if cell is None else cell.choose()
    row = _row("1-2", prior, width, metric, cell, paper, rate)
    if cell is None:
        return row
    result, replicates = cell.result, None if cell.scores is None else cell.scores[rate]
    final = result.records[-1] if result.records else {}
    over = (replicates or {}).get
    ll, acc = "test_log_likelihood", "test_accuracy"
    row["log p(y|X)"], row["paper log p"] = _cell(final.get(ll), paper.log_lik, over(ll))
    row["acc."], row["paper acc."] = _cell(final.get(acc), paper.accuracy, over(acc))
    ece = app.format_value(final.get("test_ece"))
    confidence = app.format_value(final.get("test_confidence"))
    curvature = app.format_value(final.get("curvature"), "{:.2f}")  # pooled over all chains
    if replicates is not None and "test_confidence" in replicates:
        confidence = mean_std(replicates["test_confidence"])
    return row | {
        "conf.": confidence,
        "paper conf.": app.format_value(paper.confidence),
        "ECE": ece if replicates is None else mean_std(replicates["test_ece"]),
        "curv.": MISSING if len(cell.learning_rates) > 1 else curvature,
        "paper curv.": app.format_value(paper.curvature, "{:.2f}"),
        "s/epoch": app.format_value(result.summary["sampler_seconds_per_epoch"], "{:.2f}"),
        "paper s/epoch": app.format_value(paper.seconds, "{:.1f}"),
        "eval s/epoch": app.format_value(result.summary["eval_seconds_per_epoch"], "{:.2f}"),
        "epochs": str(len(result.records)),
    }


def equal_time_row(
    prior: str, width: int, metric: str, candidates: list[MnistCell], seconds: float, budget: float
) -> dict[str, str]:
    """The Table 6 row of one metric after the epochs that fit in ``budget`` seconds at
    ``seconds`` per epoch, at the rate of highest mean validation log p(y|X) at that cut among
    ``candidates`` (the metric's run, with ``--lr-grid`` of every rate, and without it a run at
    the paper's re-chosen rate, :data:`EQUAL_TIME_LR`); none: Monge where α² = 0 is optimal."""
    paper = MNIST_PAPER[(prior, width)][metric]
    if not candidates:
        return _row("6", prior, width, metric, None, paper)
    epochs = equal_time_epochs(seconds, budget, min(len(c.result.records) for c in candidates))
    kept = epochs if epochs else None
    best = [(c, c.choose(kept)) for c in candidates]
    val = lambda c, i: float(np.mean(c.values(i, "val_log_likelihood", kept))) if kept else np.nan
    ranked = [(val(c, i), k) for k, (c, i) in enumerate(best) if np.isfinite(val(c, i))]
    cell, rate = best[max(ranked)[1] if ranked else 0]
    row = _row("6", prior, width, metric, cell, paper, rate)
    if len(candidates) > 1:
        others = ", ".join(format(c.learning_rates[0], "g") for c in candidates if c is not cell)
        row["lr"] += f" (val. over {others})"
    cut = lambda key: cell.values(rate, key, kept) if kept else np.array([np.nan])
    paper_ll, paper_acc = TABLE6[(prior, width)].get(metric, (None, None))
    keys = ("test_log_likelihood", "test_accuracy", "test_ece", "test_confidence")
    values = {key: cut(key) for key in keys}
    show = lambda v: mean_std(v) if len(v) > 1 else app.format_value(float(v[0]))
    row["log p(y|X)"], row["paper log p"] = _cell(*_one(values["test_log_likelihood"], paper_ll))
    row["acc."], row["paper acc."] = _cell(*_one(values["test_accuracy"], paper_acc))
    return row | {
        "conf.": show(values["test_confidence"]),
        "ECE": show(values["test_ece"]),
        "s/epoch": app.format_value(seconds, "{:.2f}"),
        "paper s/epoch": app.format_value(paper.seconds, "{:.1f}"),
        "epochs": str(epochs),
    }


def _one(values: np.ndarray, paper: Pair | None) -> tuple[Any, Pair | None, Any]:
    """:func:`_cell`'s arguments for per-replicate values: one value alone, else all of them."""
    if len(values) > 1:
        return None, paper, values
    return (None if np.isnan(values[0]) else float(values[0])), paper, None


def options(parser: argparse.ArgumentParser) -> None:
    epochs_option(parser, paper=400, quick=MNIST_QUICK["epochs"])
    parser.add_argument(
        "--width", type=int, nargs="+", choices=WIDTHS, default=[400], help="hidden width(s) W"
    )
    parser.add_argument(
        "--prior", nargs="+", choices=PRIORS, default=["horseshoe"], help="prior(s)"
    )
    metrics_option(parser)
    data_options(parser)
    parser.add_argument(
        "--chains", type=positive_int, default=1, help="chains per run (default: 1)"
    )
    replicates_option(
        parser,
        "runs per cell (seeds --seed, --seed + 1, ...) as the chains of one program; the table "
        "gives their mean ± std, as the paper's 10 runs, and the curves a ±1.96 std band "
        "(default: 1)",
    )
    curvature_option(parser)
    parser.add_argument(
        "--equal-time",
        action="store_true",
        help="add Table 6: each ensemble cut at the fastest sampler's total sampling time (needs "
        "two metrics or more; runs the paper's re-chosen learning rates too)",
    )
    parser.add_argument(
        "--lr-grid",
        action="store_true",
        help="choose each metric's learning rate on validation among Table 4's and two rates of "
        "the paper's grid [1, 2.5, 5, 7.5]x10^x either side (one sweep per metric); "
        "--equal-time then re-chooses it at the cut",
    )


def _epochs(args: argparse.Namespace) -> int:
    return args.epochs or (MNIST_QUICK["epochs"] if args.quick else 400)


def header(args: argparse.Namespace) -> str:
    return f"MNIST MLP, {_epochs(args)} epochs{' (--quick: a smoke test)' if args.quick else ''}"


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    """Run the requested cells in turn (Monge where α² = 0 is optimal is not run); with
    ``--equal-time``, per setting then the re-chosen rates and the Table 6 rows."""
    if args.equal_time and len(args.metrics) < 2:
        raise ConfigError(
            "--equal-time cuts every sampler at the fastest one's time: give two metrics or "
            f"more (--metrics), got {args.metrics}"
        )
    results = start_results(
        args, header(args), _epochs(args), equal_time=args.equal_time, lr_grid=args.lr_grid
    )

    def run(prior: str, width: int, metric: str, lr: float | None = None) -> MnistCell:
        cfg = mnist_config(
            prior,
            width,
            metric,
            Path(args.out),
            epochs=_epochs(args),
            chains=args.chains,
            seed=args.seed,
            curvature=args.curvature,
            learning_rate=lr,
            **data_settings(args),
        )
        rate = cfg.sampler.learning_rate
        rates = lr_ladder(rate) if args.lr_grid and lr is None else None
        shown = ",".join(f"{r:g}" for r in rates or (rate,))
        label = f"{prior} W={width} {METRIC_LABELS[metric]} lr={shown}"
        cell = run_cell(cfg, args.replicates, label, rates, args.resume)
        results["runs"].append(cell.result)
        return cell

    for prior, width in itertools.product(args.prior, args.width):
        cells: dict[str, MnistCell] = {}
        for metric in args.metrics:
            if MNIST_PAPER[(prior, width)][metric].learning_rate is None:
                results["rows"].append(table_row(prior, width, metric, None))
                continue
            cell = cells[metric] = run(prior, width, metric)
            results["rows"].append(table_row(prior, width, metric, cell))
            curves = results["curves"].setdefault((prior, width), {})
            curves[METRIC_LABELS[metric]] = cell.records(cell.choose())
            on_result(results)
            if cell.result.status == "interrupted":
                return results
        if args.equal_time and cells:
            seconds = {metric: seconds_per_epoch(c.result) for metric, c in cells.items()}
            budget = min(t * len(cells[m].result.records) for m, t in seconds.items())
            for metric in args.metrics:
                candidates = [cells[metric]] if metric in cells else []
                lr = EQUAL_TIME_LR.get((prior, width, metric))
                if candidates and lr is not None and not args.lr_grid:
                    candidates.append(run(prior, width, metric, lr))
                    if candidates[-1].result.status == "interrupted":
                        return results
                row = equal_time_row(
                    prior, width, metric, candidates, seconds.get(metric, 0.0), budget
                )
                results["rows"].append(row)
                on_result(results)
    return results


def plot(results: Results, out: Path) -> list[Path]:
    """``curves_<prior>-<W>.png`` per setting: test log p(y|X) and accuracy against epochs, with
    ``--replicates`` the mean and a ±1.96 std band over replicates (the paper's Fig. 3)."""
    return [
        app.plot_curves(
            curves, out / f"curves_{prior}-{width}.png", f"MNIST, {prior} prior, W={width}"
        )
        for (prior, width), curves in results["curves"].items()
    ]


REPRODUCTION = Reproduction.from_module(
    globals(),
    caption=mnist_caption,
    summary="Yu et al. (2023) Tables 1-2: MNIST 784-W-W-10 MLPs in five metrics",
    progress=last_run_message,
    exit_code=worst_run_exit_code,
    quick_help="a smoke test in a few minutes: the first 10 000 training images, 4 epochs, "
    "burn-in 2 epochs, 4 samples an epoch (with the default W=400 and horseshoe prior)",
    resumable=True,
)
