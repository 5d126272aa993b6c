"""Yu et al. (2023) Tables 3, 7 and 9: ResNet-20 on CIFAR-10 sampled by SGRLD in four metrics.

``sgrld reproduce cifar-resnet`` runs the CIFAR-10 experiments of Sec. 4.4 and App. A.5-A.7 of
Yu, Hartmann, Williams & Klami (TMLR 2023) and writes our numbers next to the paper's:

* data: CIFAR-10 from the official python files (``--data-dir``; their MD5s are checked),
  40 000 training images (10 000 held out for validation), standardised per channel with the
  training set's mean and standard deviation, no augmentation, the official 10 000 test images;
* model: :class:`sgrld.bnn.ResNet20`, Fortuin et al.'s "Google ResNet-20" (16-32-64 channels,
  batch normalisation over the minibatch while sampling; a sample is scored with the statistics
  of 500 training images at its own parameters, where the authors used torch's running averages);
* priors: ``gaussian``, independent ``N(0, (1.41/√fan_in)²)`` weights and ``N(0, 1)`` biases, and
  ``correlated``, Fortuin et al.'s (2022) correlated normal prior on the 3x3 convolution kernels
  (:func:`sgrld.bnn.priors.conv_correlated`: each filter's 9 positions jointly Gaussian with the
  exponential kernel ``exp(−d/ℓ)``, ℓ = 1, as their ``ConvCorrelatedNormal``), the same Gaussian
  on the rest. The fan-in of a convolution is ``3·3·C_in`` (``--conv-fan-in channels``: ``C_in``,
  as the authors' code, whose 3x3 kernels then have 9 times the prior variance). Batch-norm
  scales and shifts get the bias prior ``N(0, 1)``; the authors' had none (flat);
* samplers: Identity, Wenzel, RMSprop and Shampoo with λ = 0.99, ε = 1e-8 (Shampoo roots every
  100 steps, Wenzel's scales refreshed once per epoch), no Γ correction, T = 1, and the learning
  rates of Table 5 (:data:`PAPER`). The paper found Monge best at α² = 0, i.e. Identity, with both
  priors, so Monge is not run and the table says so;
* schedule: batches of 100 (400 steps per epoch), burn-in 1000 minibatches, a sample every 100
  (4 per epoch), 400 epochs (``--epochs`` to shorten);
* Table 7 (equal time): every sampler's ensemble is cut at the total sampling time of the
  fastest sampler of Table 3 (per prior): sampler ``m`` keeps its first ``⌊B / t_m⌋`` epochs,
  ``B`` the fastest total and ``t_m`` its median seconds per epoch, at the learning rates the
  paper re-chose for that budget (App. A.6: RMSprop 0.00075, Shampoo 0.025; each a run of its
  own); Table 9 is the ECE (30 bins) of the Table 3 ensembles.

With ``--replicates R`` every cell is run with seeds ``seed, …, seed + R − 1`` and printed as
mean ± standard deviation (ddof 1), as the paper's 10 runs. A value of ours is marked ▼ where it
is worse than the paper's mean by more than twice the paper's standard deviation.

``--quick`` is a smoke test of the pipeline, not a reproduction: the first 1 000 training
images, a ResNet-8 of width 4, 1 epoch of 20 batches of 50, burn-in 10, a sample every 5.

Outputs in ``--out``: a run folder per cell ``<prior>/<metric>[/lr<lr>][/seed<s>]``,
``cifar_resnet.md`` and ``cifar_resnet.json`` (the table) and ``curves_<prior>.png`` (test
log p(y|X) and accuracy against epochs of the Table 3 runs). ``--resume`` continues a stopped
command: each run folder from its newest checkpoint (a finished run is read back), a run not yet
started starts; the full command takes days on a CPU, so this is how it survives being stopped.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sgrld_app import api as app
from sgrld_app.api import Config, from_dict, run_config
from sgrld_reproductions.cifar_resnet.paper import PAPER
from sgrld_reproductions.cifar_resnet.table import (
    COLUMNS,  # noqa: F401 - read by Reproduction.from_module, as NOTES
    NOTES,  # noqa: F401
    Cell,
    monge_row,
    seconds_per_epoch,
    table3_row,
    table7_row,
)
from sgrld_reproductions.scaffolding import (
    METRIC_LABELS,
    OnResult,
    Reproduction,
    Results,
    choices_option,
    curvature_option,
    data_dir_option,
    epochs_option,
    last_run_message,
    metric_params,
    metrics_option,
    no_verify_option,
    replicates_option,
    start_results,
    worst_run_exit_code,
)

PRIORS = ("gaussian", "correlated")
TABLES = ("3", "7")


PRIOR_KINDS = {"gaussian": "gaussian", "correlated": "conv_correlated"}
"""Our prior names -> ``prior.kind``."""
FULL = {"width": 16, "depth": 20, "batch_size": 100, "burn_in": 1000, "thin": 100, "epochs": 400}
"""The paper's network and schedule (Sec. 4.3, App. A.5)."""
QUICK = {
    "width": 4, "depth": 8, "batch_size": 50, "burn_in": 10, "thin": 5, "epochs": 1,
    "train_size": 1000,
}  # fmt: skip
"""``--quick``: a ResNet-8 of width 4 on the first 1 000 training images, 20 steps."""


def config(
    prior: str,
    metric: str,
    out: Path,
    *,
    learning_rate: float,
    epochs: int,
    seed: int = 0,
    quick: bool = False,
    data_dir: str | None = None,
    validation_size: int = 10_000,
    verify_checksums: bool = True,
    conv_fan_in: str = "full",
    curvature: bool = False,
) -> Config:
    """The configuration of one run (with ``quick``, the smoke-test variant).

    Example:
        >>> c = config("correlated", "shampoo", Path("r"), learning_rate=0.01, epochs=400)
        >>> c.model.kind, c.prior.kind, c.sampler.metric_params["update_every"], c.run.thin
        ('resnet20', 'conv_correlated', 100, 100)
    """
    size = QUICK if quick else FULL
    steps = (size.get("train_size", 50_000 - validation_size)) // size["batch_size"]
    prior_params: dict[str, Any] = {"weight_scale": 1.41, "bias_scale": 1.0}
    if prior == "correlated":
        prior_params["lengthscale"] = 1.0
    settings: dict[str, Any] = {
        "data": {
            "name": "cifar10",
            "batch_size": size["batch_size"],
            "validation_size": validation_size,
            "verify_checksums": verify_checksums,
        },
        "model": {"kind": "resnet20", "widths": [size["width"]], "depth": size["depth"]},
        "prior": {
            "kind": PRIOR_KINDS[prior],
            "params": prior_params | {"conv_fan_in": conv_fan_in},
        },
        "sampler": {
            "metric": metric,
            "learning_rate": learning_rate,
            "metric_params": metric_params(metric, steps, None),
            "adapt_until": "never",  # the paper's setting: the metric adapts throughout
        },
        "run": {
            "epochs": epochs,
            "burn_in": size["burn_in"],
            "thin": size["thin"],
            "seed": seed,
            "curvature": curvature,
        },
        "out": {"folder": str(out)},
    }
    if data_dir is not None:
        settings["data"]["data_dir"] = data_dir
    if quick:
        settings["data"]["train_size"] = QUICK["train_size"]
    return from_dict(settings)


def options(parser: argparse.ArgumentParser) -> None:
    epochs_option(parser, paper=FULL["epochs"], quick=QUICK["epochs"])
    choices_option(parser, "--prior", PRIORS, "prior(s)")
    metrics_option(parser)
    tables = "3 (with 9, its ECE) and/or 7 (equal time, two more runs per prior)"
    choices_option(parser, "--tables", TABLES, tables)
    replicates_option(
        parser, "independent runs per cell, seeds SEED ... SEED+R-1 (paper: 10; default: 1)"
    )
    data_dir_option(parser, "folder with cifar-10-batches-py")
    parser.add_argument(
        "--validation-size",
        type=int,
        default=10_000,
        help="training images held out for validation (default: 10000, as the paper)",
    )
    no_verify_option(
        parser, "do not check the files' MD5s (for files that are not the official ones)"
    )
    parser.add_argument(
        "--conv-fan-in",
        choices=("full", "channels"),
        default="full",
        help="prior scale of a convolution 1.41/sqrt(fan-in): full = 3*3*C_in (default), "
        "channels = C_in (the authors' code)",
    )
    curvature_option(parser)


def _epochs(args: argparse.Namespace) -> int:
    return args.epochs or (QUICK["epochs"] if args.quick else FULL["epochs"])


def header(args: argparse.Namespace) -> str:
    quick = " (--quick: a smoke test)" if args.quick else ""
    return f"CIFAR-10 ResNet-20, {_epochs(args)} epochs, {args.replicates} replicate(s){quick}"


def _run_cell(
    args: argparse.Namespace, prior: str, metric: str, learning_rate: float, folder: Path
) -> Cell:
    results = []
    for r in range(args.replicates):
        cfg = config(
            prior,
            metric,
            folder / f"seed{args.seed + r}" if args.replicates > 1 else folder,
            learning_rate=learning_rate,
            epochs=_epochs(args),
            seed=args.seed + r,
            quick=args.quick,
            data_dir=args.data_dir,
            validation_size=args.validation_size,
            verify_checksums=not args.no_verify_checksums,
            conv_fan_in=args.conv_fan_in,
            curvature=args.curvature,
        )
        label = f"{prior} {METRIC_LABELS[metric]} lr={learning_rate:g} seed={args.seed + r}"
        existing = app.existing_of(Path(cfg.out.folder), args.resume)
        results.append(run_config(cfg, existing=existing, progress=True, label=label))
        if results[-1].status == "interrupted":
            break
    return Cell(prior, metric, learning_rate, results)


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    """Run Table 3's cells, then the equal-time runs Table 7 needs, prior by prior."""
    results = start_results(args, header(args), _epochs(args), conv_fan_in=args.conv_fan_in)

    def done(cell_: Cell) -> bool:
        results["runs"].extend(cell_.results)
        on_result(results)
        return cell_.results[-1].status == "interrupted"

    out = Path(args.out)
    for prior in args.prior:
        cells: dict[str, Cell] = {}
        for metric in args.metrics:
            lr = PAPER[prior][metric].learning_rate
            if lr is None:
                continue
            cells[metric] = _run_cell(args, prior, metric, lr, out / prior / metric)
            if "3" in args.tables:
                results["rows"].append(table3_row(cells[metric]))
            results["curves"].setdefault(prior, {})[METRIC_LABELS[metric]] = (
                cells[metric].results[0].records
            )
            if done(cells[metric]):
                return results
        if "3" in args.tables and "monge" in args.metrics:
            results["rows"].append(monge_row(prior, "3 & 9"))
        if "7" not in args.tables or not cells:
            continue
        seconds = {metric: seconds_per_epoch(c) for metric, c in cells.items()}
        budget = min(s * _epochs(args) for s in seconds.values())
        for metric, cell_ in cells.items():
            lr = PAPER[prior][metric].equal_time_lr
            if lr != cell_.learning_rate:
                cell_ = _run_cell(args, prior, metric, lr, out / prior / metric / f"lr{lr:g}")
                if done(cell_):
                    return results
            results["rows"].append(table7_row(cell_, seconds[metric], budget))
            on_result(results)
        if "monge" in args.metrics:
            results["rows"].append(monge_row(prior, "7"))
    return results


def plot(results: Results, out: Path) -> list[Path]:
    """``curves_<prior>.png`` per prior: test log p(y|X) and accuracy against epochs."""
    return [
        app.plot_curves(curves, out / f"curves_{prior}.png", f"CIFAR-10 ResNet-20, {prior} prior")
        for prior, curves in results["curves"].items()
    ]


def caption(results: Results) -> str:
    """The title of the run and what ▼ marks."""
    return f"{results['config']['title']}. ▼: worse than the paper's mean by over 2 std (10 runs)."


REPRODUCTION = Reproduction.from_module(
    globals(),
    summary="Yu et al. (2023) Tables 3, 7, 9: ResNet-20 on CIFAR-10, "
    "Gaussian and correlated priors",
    progress=last_run_message,
    exit_code=worst_run_exit_code,
    quick_help="a smoke test of the pipeline: a ResNet-8 of width 4, the first 1 000 training "
    "images, 1 epoch of 20 batches of 50",
    resumable=True,
)
