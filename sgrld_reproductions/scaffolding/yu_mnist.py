"""Yu et al. (2023)'s MNIST MLP setting, shared by ``sgrld reproduce mnist-mlp``, ``monge-alpha``
and ``cifar-resnet``: the paper's cells (Tables 1, 2, 4 and 10), their configurations, the run of a
cell and its scores by epoch, and the options of the MNIST data.

The setting itself (data, model, priors, samplers, schedule) is described in
:mod:`sgrld_reproductions.mnist_mlp`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import Config, Grid, from_dict, run_config, run_sweep
from sgrld_reproductions.scaffolding.driver import Results
from sgrld_reproductions.scaffolding.options import (
    choices_option,
    data_dir_option,
    no_verify_option,
    positive_int,
)

MNIST_METRICS = ("identity", "wenzel", "rmsprop", "monge", "shampoo")
METRIC_LABELS = {
    "identity": "Identity",
    "wenzel": "Wenzel",
    "rmsprop": "RMSprop",
    "monge": "Monge",
    "shampoo": "Shampoo",
}


MNIST_FOLDER = "folder with the four MNIST IDX files"
"""What ``--data-dir`` holds (:func:`~sgrld_reproductions.scaffolding.options.data_dir_option`)."""


class YuPaper(NamedTuple):
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


IDENTITY_OPTIMAL = YuPaper(None)
MNIST_PAPER: dict[tuple[str, int], dict[str, YuPaper]] = {
    ("gaussian", 400): {
        "identity": YuPaper(0.05, None, (-0.1310, 0.0004), (0.9685, 0.0005), 5.93, 8.1),
        "wenzel": YuPaper(0.075, None, (-0.1315, 0.0002), (0.9686, 0.0003), 5.82, 7.7),
        "rmsprop": YuPaper(0.00025, None, (-0.1307, 0.0005), (0.9689, 0.0004), 6.30, 8.8),
        "monge": IDENTITY_OPTIMAL,
        "shampoo": YuPaper(0.0025, None, (-0.1286, 0.0003), (0.9689, 0.0004), 6.28, 18.8),
    },
    ("gaussian", 800): {
        "identity": YuPaper(0.05, None, (-0.1667, 0.0004), (0.9587, 0.0003), 4.69, 19.9),
        "wenzel": YuPaper(0.05, None, (-0.1667, 0.0004), (0.9583, 0.0005), 4.68, 20.3),
        "rmsprop": YuPaper(0.0005, None, (-0.1643, 0.0003), (0.9614, 0.0003), 4.67, 24.2),
        "monge": IDENTITY_OPTIMAL,
        "shampoo": YuPaper(0.0075, None, (-0.1620, 0.0004), (0.9605, 0.0003), 4.53, 46.5),
    },
    ("gaussian", 1200): {
        "identity": YuPaper(0.025, None, (-0.1932, 0.0004), (0.9514, 0.0004), 4.16, 43.5),
        "wenzel": YuPaper(0.05, None, (-0.1933, 0.0004), (0.9519, 0.0003), 4.10, 49.1),
        "rmsprop": YuPaper(0.0005, None, (-0.1886, 0.0005), (0.9568, 0.0003), 4.11, 56.9),
        "monge": YuPaper(0.025, 0.75, (-0.1780, 0.0005), (0.9560, 0.0005), 6.92, 59.2),
        "shampoo": YuPaper(0.0075, None, (-0.1854, 0.0003), (0.9559, 0.0004), 3.93, 92.9),
    },
    ("horseshoe", 400): {
        "identity": YuPaper(0.25, None, (-0.0750, 0.0004), (0.9823, 0.0003), 14.65, 8.3, 0.9544),
        "wenzel": YuPaper(0.75, None, (-0.0768, 0.0009), (0.9807, 0.0003), 14.79, 9.5, 0.9568),
        "rmsprop": YuPaper(0.0005, None, (-0.0678, 0.0011), (0.9798, 0.0008), 25.76, 10.7, 0.9684),
        "monge": YuPaper(0.25, 1.25, (-0.0629, 0.0009), (0.9831, 0.0005), 15.08, 12.9, 0.9648),
        "shampoo": YuPaper(0.005, None, (-0.0641, 0.0009), (0.9820, 0.0006), 17.84, 20.1, 0.9663),
    },
    ("horseshoe", 800): {
        "identity": YuPaper(0.5, None, (-0.0798, 0.0003), (0.9818, 0.0004), 15.01, 24.8),
        "wenzel": YuPaper(0.5, None, (-0.0839, 0.0008), (0.9789, 0.0003), 14.45, 26.2),
        "rmsprop": YuPaper(0.0005, None, (-0.0656, 0.0013), (0.9800, 0.0005), 20.09, 29.3),
        "monge": YuPaper(0.25, 0.5, (-0.0612, 0.0014), (0.9834, 0.0008), 12.09, 32.1),
        "shampoo": YuPaper(0.005, None, (-0.0603, 0.0011), (0.9824, 0.0004), 12.74, 53.3),
    },
    ("horseshoe", 1200): {
        "identity": YuPaper(0.25, None, (-0.0809, 0.0004), (0.9814, 0.0002), 15.28, 56.3),
        "wenzel": YuPaper(0.25, None, (-0.1006, 0.0009), (0.9746, 0.0005), 11.41, 58.2),
        "rmsprop": YuPaper(0.0005, None, (-0.0631, 0.0011), (0.9808, 0.0007), 16.96, 58.3),
        "monge": YuPaper(0.25, 0.075, (-0.0694, 0.0005), (0.9833, 0.0004), 16.78, 60.1),
        "shampoo": YuPaper(0.005, None, (-0.0564, 0.0007), (0.9834, 0.0005), 10.07, 89.1),
    },
}
"""Tables 1, 2, 4 and 10 and Sec. 4.3 of Yu et al. (2023), by (prior, W) and metric."""


MNIST_QUICK = {"train_size": 10_000, "epochs": 4, "burn_in_epochs": 2, "samples_per_epoch": 4}
"""``--quick``: the first 10 000 training images, 4 epochs, burn-in 2 epochs, 4 samples an epoch
(burn-in 200, a sample every 25)."""


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


def mnist_config(
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
    learning_rate: float | None = None,
    train_size: int | None = None,
    validation_size: int | None = None,
    verify_checksums: bool = True,
) -> Config:
    """The configuration of one cell of Tables 1-2 (with ``quick``, the smoke-test variant).

    ``learning_rate`` replaces Table 4's (the run folder gets ``lr<lr>/``); ``train_size``,
    ``validation_size`` and ``verify_checksums`` set the data keys of the same names (``None``:
    the paper's 50 000 / 10 000 images, or ``quick``'s).

    Example:
        >>> c = mnist_config("horseshoe", 400, "monge", Path("r"), epochs=400)
        >>> c.sampler.learning_rate, c.sampler.metric_params, c.prior.params, c.run.burn_in
        (0.25, {'alpha2': 1.25, 'decay': 0.9}, {'include_jacobian': False}, 1000)
    """
    paper = MNIST_PAPER[(prior, width)][metric]
    if (learning_rate or paper.learning_rate) is None:
        raise ValueError(f"{metric} with the {prior} prior and W={width}: α² = 0 is optimal")
    train_size = train_size or (MNIST_QUICK["train_size"] if quick else None)
    steps = (train_size or 60_000 - (validation_size or 10_000)) // 100
    prior_params = {"include_jacobian": False} if prior == "horseshoe" else {}
    settings: dict[str, Any] = {
        "data": {"name": "mnist", "batch_size": 100},
        "model": {"kind": "mlp", "widths": [width, width]},
        "prior": {"kind": prior, "params": prior_params},
        "sampler": {
            "metric": metric,
            "learning_rate": learning_rate or paper.learning_rate,
            "metric_params": metric_params(metric, steps, paper.alpha2 or 0.0),
            "adapt_until": "never",  # the paper's setting: the metric adapts throughout
        },
        "run": {
            "epochs": epochs,
            "burn_in": MNIST_QUICK["burn_in_epochs"] * steps if quick else 1000,
            "thin": max(1, steps // MNIST_QUICK["samples_per_epoch"]) if quick else 100,
            "chains": chains,
            "seed": seed,
            "curvature": curvature,
        },
        "out": {"folder": str(out / f"{prior}-{width}" / metric)},
    }
    if learning_rate not in (None, paper.learning_rate):
        settings["out"]["folder"] += f"/lr{learning_rate:g}"
    data = settings["data"]
    for key, value in (("data_dir", data_dir), ("train_size", train_size)):
        if value is not None:
            data[key] = value
    if validation_size is not None:
        data["validation_size"] = validation_size
    if not verify_checksums:
        data["verify_checksums"] = False
    return from_dict(settings)


class MnistCell(NamedTuple):
    """The run of one (prior, W, metric): its learning rate(s), all their replicates.

    Attributes:
        learning_rates: the rates run (one, or ``--lr-grid``'s, the settings of one sweep).
        result: the run (a sweep's, with a grid or ``--replicates R > 1``: its records give each
            (rate, replicate)'s scores under ``"groups"``, rate by rate).
        scores: per rate, the final scores of each replicate
            (:attr:`sgrld_app.api.SweepResult.scores`); ``None`` for one ``sgrld run``.
        replicates: replicates per rate.
    """

    learning_rates: tuple[float, ...]
    result: app.Result
    scores: list[dict[str, Any]] | None = None
    replicates: int = 1

    def values(self, rate: int, key: str, epochs: int | None = None) -> np.ndarray:
        """``key`` of each replicate of rate ``rate`` after ``epochs`` epochs (:func:`at_epoch`)."""
        values = at_epoch(self.result, key, epochs)
        return values if len(values) == 1 else values[rate * self.replicates :][: self.replicates]

    def choose(self, epochs: int | None = None) -> int:
        """The rate of highest mean validation log p(y|X) after ``epochs`` epochs among those
        none of whose chains diverged (the paper's rule, App. A.5), else the first.

        Example:
            >>> from types import SimpleNamespace
            >>> rec = {"groups": {"val_log_likelihood": [-0.2, -0.2, -0.1, -0.1, -0.3, -0.3]}}
            >>> run = SimpleNamespace(records=[rec])
            >>> scores = [{"diverged": 0}, {"diverged": 0}, {"diverged": 0}]
            >>> MnistCell((0.1, 0.25, 0.5), run, scores, replicates=2).choose()
            1
        """
        ranked = [
            (float(np.mean(self.values(i, "val_log_likelihood", epochs))), i)
            for i in range(len(self.learning_rates))
            if self.scores is None or not self.scores[i].get("diverged")
        ]
        finite = [(value, i) for value, i in ranked if np.isfinite(value)]
        return max(finite)[1] if finite else 0

    def records(self, rate: int) -> list[dict[str, Any]]:
        """The records with only rate ``rate``'s replicates under ``"groups"`` (its curves)."""
        if len(self.learning_rates) == 1:
            return self.result.records
        part = slice(rate * self.replicates, (rate + 1) * self.replicates)
        return [
            r | {"groups": {k: v[part] for k, v in r["groups"].items()}}
            for r in self.result.records
        ]


def lr_ladder(rate: float, each_side: int = 2) -> tuple[float, ...]:
    """The paper's learning-rate grid ``[1, 2.5, 5, 7.5] × 10^x`` (App. A.5) around ``rate``:
    ``each_side`` values below and above it.

    Example:
        >>> lr_ladder(0.25), lr_ladder(0.0005)
        ((0.075, 0.1, 0.25, 0.5, 0.75), (0.0001, 0.00025, 0.0005, 0.00075, 0.001))
    """
    exponent = math.floor(math.log10(rate))
    ladder = sorted(
        float(f"{m}e{e}") for e in range(exponent - 2, exponent + 3) for m in (1, 2.5, 5, 7.5)
    )
    i = min(range(len(ladder)), key=lambda j: abs(ladder[j] - rate))
    return tuple(ladder[max(0, i - each_side) : i + each_side + 1])


def at_epoch(result: app.Result, key: str, epochs: int | None = None) -> np.ndarray:
    """``key`` of each replicate's ensemble after ``epochs`` epochs (``None``: the last), NaN where
    missing: from the record's ``"groups"`` (a sweep's replicates), else the record's own value.

    Example:
        >>> from types import SimpleNamespace
        >>> run = SimpleNamespace(records=[{"acc": 0.9, "groups": {"acc": [0.8, None]}},
        ...                                {"acc": 0.95, "groups": {"acc": [0.9, 0.97]}}])
        >>> at_epoch(run, "acc", 1).tolist(), at_epoch(run, "acc").tolist()
        ([0.8, nan], [0.9, 0.97])
    """
    records = result.records if epochs is None else result.records[:epochs]
    if not records:
        return np.array([np.nan])
    last = records[-1]
    values = last["groups"][key] if "groups" in last else [last.get(key)]
    return np.array([np.nan if v is None else v for v in values], np.float64)


def metrics_option(parser: argparse.ArgumentParser) -> None:
    """``--metrics NAME ...``: the metrics to run, of :data:`MNIST_METRICS` (default: all)."""
    choices_option(parser, "--metrics", MNIST_METRICS, "metrics to run")


def curvature_option(parser: argparse.ArgumentParser) -> None:
    """``--curvature``: also score the mean curvature C(x) (the paper's Table 2)."""
    parser.add_argument(
        "--curvature", action="store_true", help="also score the curvature C(x) (slow)"
    )


def data_options(parser: argparse.ArgumentParser) -> None:
    """``--data-dir``, ``--train-size``, ``--validation-size`` and ``--no-verify-checksums``."""
    data_dir_option(parser, MNIST_FOLDER)
    parser.add_argument(
        "--train-size",
        type=positive_int,
        help=f"use the first N training images (default: 50000; {MNIST_QUICK['train_size']} with "
        "--quick)",
    )
    parser.add_argument(
        "--validation-size",
        type=positive_int,
        help="training images held out for validation (default: 10000, as the paper)",
    )
    no_verify_option(
        parser, "do not check the files' SHA-256 (for files that are not the official ones)"
    )


def data_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The :func:`mnist_config` keywords of :func:`data_options` and ``--quick``."""
    return {
        "data_dir": args.data_dir,
        "quick": args.quick,
        "train_size": args.train_size,
        "validation_size": args.validation_size,
        "verify_checksums": not args.no_verify_checksums,
    }


def start_results(args: argparse.Namespace, title: str, epochs: int, **more: Any) -> Results:
    """The results of a cell-by-cell reproduction (``sgrld reproduce mnist-mlp``,
    ``cifar-resnet``) before its first run: its ``config`` (``title``, ``epochs``, ``--quick``,
    ``--seed``, ``--replicates``, then ``**more``) and no ``rows``, ``runs`` or ``curves``.

    Example:
      >>> args = argparse.Namespace(quick=True, seed=0, replicates=2)
      >>> start_results(args, "T", 4, lr_grid=False)["config"]
      {'title': 'T', 'epochs': 4, 'quick': True, 'seed': 0, 'replicates': 2, 'lr_grid': False}
    """
    config = {"title": title, "epochs": epochs, "quick": args.quick, "seed": args.seed}
    config |= {"replicates": args.replicates, **more}
    return {"config": config, "rows": [], "runs": [], "curves": {}}


def run_cell(
    config: Config,
    replicates: int,
    label: str,
    rates: tuple[float, ...] | None = None,
    resume: bool = False,
) -> MnistCell:
    """Run one cell: ``sgrld run`` for one replicate at the configuration's rate, else one sweep
    of ``rates`` (default: that rate alone) × ``replicates``; with ``resume``, the run in its
    folder continues (:func:`sgrld_app.api.existing_of`)."""
    existing = app.existing_of(Path(config.out.folder), resume)
    if replicates == 1 and rates is None:
        result = run_config(config, existing=existing, progress=True, label=label)
        return MnistCell((config.sampler.learning_rate,), result)
    grids = [] if rates is None else [Grid("sampler.learning_rate", rates)]
    sweep = run_sweep(config, grids, replicates, existing=existing, progress=True, label=label)
    return MnistCell(
        rates or (config.sampler.learning_rate,), sweep.result, sweep.scores, replicates
    )


def mnist_caption(results: Results) -> str:
    """The title of the run and what ▼ marks."""
    return f"{results['config']['title']}. ▼: below the paper's mean − 2 std (10 runs)."
