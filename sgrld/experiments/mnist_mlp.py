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
  correction, T = 1, and the learning rates of Table 4 and the α² of Sec. 4.3 (:data:`PAPER`).
  Where the paper found α² = 0 best for Monge ("Identity (α² = 0) is optimal") Monge *is* the
  Identity sampler, so it is not run again and the table says so;
* schedule: batches of 100 (500 steps per epoch), burn-in 1000 minibatches, a sample every 100
  (5 per epoch), 400 epochs in the paper (``--epochs`` to shorten).

Scores are those of the paper (:mod:`sgrld.runner`): test log p(y|X) of the ensemble average and
its accuracy after the last epoch, plus the average confidence (the mean largest predicted
probability, beside Table 10's for horseshoe W = 400), ECE (30 bins), seconds per epoch (ours: the
median epoch of sampling *and* evaluating 5 samples on 20 000 images; the paper's are per-step
sampling times on one Xeon core, not comparable across machines) and, with ``--curvature``, the
mean curvature C(x) over samples on 1000 test points. A value of ours is marked ▼ where it is below
the paper's mean by more than twice the paper's standard deviation over its 10 runs.

``--replicates R`` runs each cell R times (seeds ``--seed`` to ``--seed + R − 1``) as the chains
of one program (:func:`sgrld.sweep.run_sweep`), and the table gives our mean ± std over them, as
the paper's over its 10 runs (the curves are then those of the ensemble of all replicates).

``--quick`` trains on the first 10 000 training images for 4 epochs (100 steps each; burn-in 200,
a sample every 25): with the default W = 400 and horseshoe prior, a few minutes for the five
metrics. It is a smoke test of the pipeline, not a reproduction.

Outputs in ``--out``: per setting and metric a run folder ``<prior>-<W>/<metric>/`` (config,
``metrics.jsonl``, ``summary.json``), ``mnist_mlp.md`` and ``mnist_mlp.json`` (the table) and
``curves_<prior>-<W>.png`` (test log p(y|X) and accuracy against epochs, as the paper's Fig. 3).
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from sgrld import report, runner
from sgrld.config import Config, from_dict
from sgrld.experiments.reproduction import OnResult, Reproduction, Results, worst_run_exit_code
from sgrld.from_config import run_config
from sgrld.report import MISSING, TEXT
from sgrld.sweep import mean_std, run_sweep

METRICS = ("identity", "wenzel", "rmsprop", "monge", "shampoo")
LABELS = {
    "identity": "Identity",
    "wenzel": "Wenzel",
    "rmsprop": "RMSprop",
    "monge": "Monge",
    "shampoo": "Shampoo",
}
WIDTHS = (400, 800, 1200)
PRIORS = ("gaussian", "horseshoe")
STEPS_PER_EPOCH = 500


class Paper(NamedTuple):
    """One cell of the paper: the setting of Table 4 / Sec. 4.3 and the results of Tables 1-2.

    Attributes:
        learning_rate: Table 4, or None where Monge with α² = 0 (Identity) was optimal.
        alpha2: Monge's α² (Sec. 4.3), else None.
        log_lik: test log p(y|X), mean and standard deviation over 10 runs (Table 1).
        accuracy: test accuracy, mean and standard deviation (Table 1).
        curvature: mean curvature C(θ) (Table 2).
        seconds: seconds per epoch on one CPU core (Table 2).
        confidence: average confidence, the mean largest predicted probability (Table 10,
            horseshoe W = 400 only, 3 runs).
    """

    learning_rate: float | None
    alpha2: float | None = None
    log_lik: tuple[float, float] | None = None
    accuracy: tuple[float, float] | None = None
    curvature: float | None = None
    seconds: float | None = None
    confidence: float | None = None


IDENTITY_OPTIMAL = Paper(None)
PAPER: dict[tuple[str, int], dict[str, Paper]] = {
    ("gaussian", 400): {
        "identity": Paper(0.05, None, (-0.1310, 0.0004), (0.9685, 0.0005), 5.93, 8.1),
        "wenzel": Paper(0.075, None, (-0.1315, 0.0002), (0.9686, 0.0003), 5.82, 7.7),
        "rmsprop": Paper(0.00025, None, (-0.1307, 0.0005), (0.9689, 0.0004), 6.30, 8.8),
        "monge": IDENTITY_OPTIMAL,
        "shampoo": Paper(0.0025, None, (-0.1286, 0.0003), (0.9689, 0.0004), 6.28, 18.8),
    },
    ("gaussian", 800): {
        "identity": Paper(0.05, None, (-0.1667, 0.0004), (0.9587, 0.0003), 4.69, 19.9),
        "wenzel": Paper(0.05, None, (-0.1667, 0.0004), (0.9583, 0.0005), 4.68, 20.3),
        "rmsprop": Paper(0.0005, None, (-0.1643, 0.0003), (0.9614, 0.0003), 4.67, 24.2),
        "monge": IDENTITY_OPTIMAL,
        "shampoo": Paper(0.0075, None, (-0.1620, 0.0004), (0.9605, 0.0003), 4.53, 46.5),
    },
    ("gaussian", 1200): {
        "identity": Paper(0.025, None, (-0.1932, 0.0004), (0.9514, 0.0004), 4.16, 43.5),
        "wenzel": Paper(0.05, None, (-0.1933, 0.0004), (0.9519, 0.0003), 4.10, 49.1),
        "rmsprop": Paper(0.0005, None, (-0.1886, 0.0005), (0.9568, 0.0003), 4.11, 56.9),
        "monge": Paper(0.025, 0.75, (-0.1780, 0.0005), (0.9560, 0.0005), 6.92, 59.2),
        "shampoo": Paper(0.0075, None, (-0.1854, 0.0003), (0.9559, 0.0004), 3.93, 92.9),
    },
    ("horseshoe", 400): {
        "identity": Paper(0.25, None, (-0.0750, 0.0004), (0.9823, 0.0003), 14.65, 8.3, 0.9544),
        "wenzel": Paper(0.75, None, (-0.0768, 0.0009), (0.9807, 0.0003), 14.79, 9.5, 0.9568),
        "rmsprop": Paper(0.0005, None, (-0.0678, 0.0011), (0.9798, 0.0008), 25.76, 10.7, 0.9684),
        "monge": Paper(0.25, 1.25, (-0.0629, 0.0009), (0.9831, 0.0005), 15.08, 12.9, 0.9648),
        "shampoo": Paper(0.005, None, (-0.0641, 0.0009), (0.9820, 0.0006), 17.84, 20.1, 0.9663),
    },
    ("horseshoe", 800): {
        "identity": Paper(0.5, None, (-0.0798, 0.0003), (0.9818, 0.0004), 15.01, 24.8),
        "wenzel": Paper(0.5, None, (-0.0839, 0.0008), (0.9789, 0.0003), 14.45, 26.2),
        "rmsprop": Paper(0.0005, None, (-0.0656, 0.0013), (0.9800, 0.0005), 20.09, 29.3),
        "monge": Paper(0.25, 0.5, (-0.0612, 0.0014), (0.9834, 0.0008), 12.09, 32.1),
        "shampoo": Paper(0.005, None, (-0.0603, 0.0011), (0.9824, 0.0004), 12.74, 53.3),
    },
    ("horseshoe", 1200): {
        "identity": Paper(0.25, None, (-0.0809, 0.0004), (0.9814, 0.0002), 15.28, 56.3),
        "wenzel": Paper(0.25, None, (-0.1006, 0.0009), (0.9746, 0.0005), 11.41, 58.2),
        "rmsprop": Paper(0.0005, None, (-0.0631, 0.0011), (0.9808, 0.0007), 16.96, 58.3),
        "monge": Paper(0.25, 0.075, (-0.0694, 0.0005), (0.9833, 0.0004), 16.78, 60.1),
        "shampoo": Paper(0.005, None, (-0.0564, 0.0007), (0.9834, 0.0005), 10.07, 89.1),
    },
}
"""Tables 1, 2, 4 and 10 and Sec. 4.3 of Yu et al. (2023), by (prior, W) and metric."""

QUICK = {"train_size": 10_000, "epochs": 4, "burn_in": 200, "thin": 25}
"""``--quick``: the first 10 000 training images, 4 epochs, burn-in 200, a sample every 25."""


def metric_params(metric: str, steps_per_epoch: int, alpha2: float | None) -> dict[str, Any]:
    """The metric's hyperparameters in the paper (Sec. 4.1, App. A.5).

    Example:
        >>> metric_params("monge", 500, 1.25)
        {'alpha2': 1.25, 'decay': 0.9}
    """
    return {
        "identity": {},
        "wenzel": {"decay": 0.99, "eps": 1e-8, "update_every": steps_per_epoch},
        "rmsprop": {"decay": 0.99, "eps": 1e-8},
        "monge": {"alpha2": alpha2, "decay": 0.9},
        "shampoo": {"decay": 0.99, "eps": 1e-8, "update_every": 100, "block_size": 128},
    }[metric]


def config(
    prior: str,
    width: int,
    metric: str,
    out: Path,
    *,
    epochs: int,
    data_dir: str | None = None,
    quick: bool = False,
    chains: int = 1,
    seed: int = 0,
    curvature: bool = False,
) -> Config:
    """The configuration of one cell of Tables 1-2 (with ``quick``, the smoke-test variant).

    Example:
        >>> c = config("horseshoe", 400, "monge", Path("r"), epochs=400)
        >>> c.sampler.learning_rate, c.sampler.metric_params, c.prior.params, c.run.burn_in
        (0.25, {'alpha2': 1.25, 'decay': 0.9}, {'include_jacobian': False}, 1000)
    """
    paper = PAPER[(prior, width)][metric]
    if paper.learning_rate is None:
        raise ValueError(f"{metric} with the {prior} prior and W={width}: α² = 0 is optimal")
    train_size = QUICK["train_size"] if quick else None
    steps = (train_size or 50_000) // 100
    prior_params = {"include_jacobian": False} if prior == "horseshoe" else {}
    settings: dict[str, Any] = {
        "data": {"name": "mnist", "batch_size": 100},
        "model": {"kind": "mlp", "widths": [width, width]},
        "prior": {"kind": prior, "params": prior_params},
        "sampler": {
            "metric": metric,
            "learning_rate": paper.learning_rate,
            "metric_params": metric_params(metric, steps, paper.alpha2),
        },
        "run": {
            "epochs": epochs,
            "burn_in": QUICK["burn_in"] if quick else 1000,
            "thin": QUICK["thin"] if quick else 100,
            "chains": chains,
            "seed": seed,
            "curvature": curvature,
        },
        "out": {"folder": str(out / f"{prior}-{width}" / metric)},
    }
    if data_dir is not None:
        settings["data"]["data_dir"] = data_dir
    if train_size is not None:
        settings["data"]["train_size"] = train_size
    return from_dict(settings)


def _cell(
    ours: float | None, paper: tuple[float, float] | None, over: np.ndarray | None = None
) -> tuple[str, str]:
    """(ours, paper) formatted; ours marked ▼ below the paper's mean − 2 standard deviations.
    ``over``: our value in each replicate, shown as mean ± std (the mean is compared)."""
    text = report.format_value(ours)
    if over is not None:
        ours = float(np.mean(over)) if np.all(np.isfinite(over)) else None
        text = mean_std(over)
    if paper is None:
        return text, MISSING
    worse = ours is not None and ours < paper[0] - 2 * paper[1]
    return text + (" ▼" if worse else ""), f"{paper[0]:.4f} ± {paper[1]:.4f}"


COLUMNS = tuple(
    (name, name, TEXT if name in ("prior", "metric", "lr", "status") else "{:>}")
    for name in (
        "prior", "W", "metric", "lr", "log p(y|X)", "paper log p", "acc.", "paper acc.", "conf.",
        "paper conf.", "ECE", "curv.", "paper curv.", "s/epoch", "paper s/epoch", "eval s/epoch",
        "epochs", "status",
    )
)  # fmt: skip
"""The columns of the output table, ours next to the paper's: preformatted text (:func:`table_row`),
right-aligned except the names."""
NOTES = (
    "s/epoch: the sampler's time per epoch, evaluation excluded, as the paper timed it (the "
    "paper's: one CPU core, per step); eval s/epoch: the time spent scoring the epoch's samples "
    "on the test and validation sets. conf.: the average confidence, the mean largest "
    "predicted probability of the ensemble (paper: Table 10, 3 runs, horseshoe W = 400 only); "
    "below the accuracy, the ensemble is under-confident."
)


def table_row(
    prior: str,
    width: int,
    metric: str,
    result: runner.Result | None,
    replicates: dict[str, np.ndarray] | None = None,
) -> dict[str, str]:
    """One row of the output table (``result=None``: Monge where α² = 0, i.e. Identity, is best;
    ``replicates``: the scores of each replicate, :attr:`sgrld.sweep.SweepResult.scores`)."""
    paper = PAPER[(prior, width)][metric]
    row = dict.fromkeys((key for key, _, _ in COLUMNS), MISSING)
    row |= {"prior": prior, "W": str(width), "metric": LABELS[metric]}
    if result is None:
        note = "α² = 0 is optimal (= Identity)"
        return row | {"log p(y|X)": note, "paper log p": note, "status": "not run"}
    final = result.records[-1] if result.records else {}
    over = (replicates or {}).get
    ll, acc = "test_log_likelihood", "test_accuracy"
    row["log p(y|X)"], row["paper log p"] = _cell(final.get(ll), paper.log_lik, over(ll))
    row["acc."], row["paper acc."] = _cell(final.get(acc), paper.accuracy, over(acc))
    ece = report.format_value(final.get("test_ece"))
    alpha2 = f", α²={paper.alpha2:g}" if paper.alpha2 else ""
    return row | {
        "lr": format(paper.learning_rate, "g") + alpha2,
        "conf.": report.format_value(final.get("test_confidence")),
        "paper conf.": report.format_value(paper.confidence),
        "ECE": ece if replicates is None else mean_std(replicates["test_ece"]),
        "curv.": report.format_value(final.get("curvature"), "{:.2f}"),
        "paper curv.": report.format_value(paper.curvature, "{:.2f}"),
        "s/epoch": report.format_value(result.summary["sampler_seconds_per_epoch"], "{:.2f}"),
        "paper s/epoch": report.format_value(paper.seconds, "{:.1f}"),
        "eval s/epoch": report.format_value(result.summary["eval_seconds_per_epoch"], "{:.2f}"),
        "epochs": str(len(result.records)),
        "status": result.status,
    }


def options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--epochs", type=int, help="epochs per run (default: 400 as the paper, 4 with --quick)"
    )
    parser.add_argument(
        "--width", type=int, nargs="+", choices=WIDTHS, default=[400], help="hidden width(s) W"
    )
    parser.add_argument(
        "--prior", nargs="+", choices=PRIORS, default=["horseshoe"], help="prior(s)"
    )
    parser.add_argument(
        "--metrics", nargs="+", choices=METRICS, default=list(METRICS), help="metrics to run"
    )
    parser.add_argument(
        "--data-dir",
        help="folder with the four MNIST IDX files (default: $SGRLD_DATA_DIR, else "
        "~/.cache/sgrld/data)",
    )
    parser.add_argument("--chains", type=int, default=1, help="chains per run (default: 1)")
    parser.add_argument(
        "--replicates",
        type=int,
        default=1,
        help="runs per cell (seeds --seed, --seed + 1, ...) as the chains of one program; the "
        "table gives their mean ± std, as the paper's 10 runs (default: 1)",
    )
    parser.add_argument(
        "--curvature", action="store_true", help="also score the curvature C(x) (slow)"
    )


def _epochs(args: argparse.Namespace) -> int:
    return args.epochs or (QUICK["epochs"] if args.quick else 400)


def header(args: argparse.Namespace) -> str:
    return f"MNIST MLP, {_epochs(args)} epochs{' (--quick: a smoke test)' if args.quick else ''}"


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    """Run the requested cells in turn (Monge where α² = 0 is optimal is not run)."""
    results: Results = {
        "config": {
            "title": header(args),
            "epochs": _epochs(args),
            "quick": args.quick,
            "seed": args.seed,
            "replicates": args.replicates,
        },
        "rows": [],
        "runs": [],
        "curves": {},
    }
    for prior, width, metric in itertools.product(args.prior, args.width, args.metrics):
        if PAPER[(prior, width)][metric].learning_rate is None:
            results["rows"].append(table_row(prior, width, metric, None))
            continue
        cfg = config(
            prior,
            width,
            metric,
            Path(args.out),
            epochs=_epochs(args),
            data_dir=args.data_dir,
            quick=args.quick,
            chains=args.chains,
            seed=args.seed,
            curvature=args.curvature,
        )
        label, replicates = f"{prior} W={width} {LABELS[metric]}", None
        if args.replicates == 1:
            result = run_config(cfg, progress=True, label=label)
        else:
            sweep = run_sweep(cfg, [], args.replicates, progress=True, label=label)
            result, replicates = sweep.result, sweep.scores[0]
        results["rows"].append(table_row(prior, width, metric, result, replicates))
        results["runs"].append(result)
        results["curves"].setdefault((prior, width), {})[LABELS[metric]] = result.records
        on_result(results)
        if result.status == "interrupted":
            break
    return results


def progress(results: Results) -> str | None:
    last = results["runs"][-1]
    return None if last.status == "completed" else last.message


def plot(results: Results, out: Path) -> list[Path]:
    """``curves_<prior>-<W>.png`` per setting: test log p(y|X) and accuracy against epochs."""
    return [
        report.plot_curves(
            curves, out / f"curves_{prior}-{width}.png", f"MNIST, {prior} prior, W={width}"
        )
        for (prior, width), curves in results["curves"].items()
    ]


def caption(results: Results) -> str:
    """The title of the run and what ▼ marks."""
    return f"{results['config']['title']}. ▼: below the paper's mean − 2 std (10 runs)."


REPRODUCTION = Reproduction.from_module(
    globals(),
    exit_code=worst_run_exit_code,
    stem="mnist_mlp",
    quick_help="a smoke test in a few minutes: the first 10 000 training images, 4 epochs, "
    "burn-in 200, a sample every 25 (with the default W=400 and horseshoe prior)",
    out="results/mnist-mlp",
)
