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

from sgrld_app import api as app
from sgrld_app.api import ConfigError
from sgrld_reproductions.mnist_mlp.table import (
    COLUMNS,  # noqa: F401 - read by Reproduction.from_module, as NOTES
    EQUAL_TIME_LR,
    NOTES,  # noqa: F401
    equal_time_row,
    seconds_per_epoch,
    table_row,
)
from sgrld_reproductions.scaffolding import (
    METRIC_LABELS,
    MNIST_PAPER,
    MNIST_QUICK,
    MnistCell,
    OnResult,
    Reproduction,
    Results,
    curvature_option,
    data_options,
    data_settings,
    epochs_option,
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
