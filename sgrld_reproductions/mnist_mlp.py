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

Scores are those of the paper (:mod:`sgrld.run.runner`): test log p(y|X) of the ensemble average and
its accuracy after the last epoch, plus the average confidence (the mean largest predicted
probability, beside Table 10's for horseshoe W = 400), ECE (30 bins), seconds per epoch (ours: the
median epoch of sampling *and* evaluating 5 samples on 20 000 images; the paper's are per-step
sampling times on one Xeon core, not comparable across machines) and, with ``--curvature``, the
mean curvature C(x) over samples on 1000 test points. A value of ours is marked ▼ where it is below
the paper's mean by more than twice the paper's standard deviation over its 10 runs.

``--replicates R`` runs each cell R times (seeds ``--seed`` to ``--seed + R − 1``) as the chains
of one program (:func:`sgrld.run.sweep.run_sweep`), and the table gives our mean ± std over them, as
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
paper's grid ``[1, 2.5, 5, 7.5] × 10^x`` (:func:`lr_ladder`: at W = 400 the authors' own grids
in their notebook, but for Wenzel's, e.g. 0.075 to 0.75 for Identity with the horseshoe) × the
replicates, and the rate of highest mean
validation log p(y|X) among those with no diverged chain is kept, after the last epoch for Tables
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
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from sgrld.run import report, run_folder, runner
from sgrld.run.config import Config, ConfigError, from_dict
from sgrld.run.from_config import run_config
from sgrld.run.report import MISSING, TEXT
from sgrld.run.sweep import Grid, mean_std, run_sweep
from sgrld_reproductions.reproduction import (
    OnResult,
    Reproduction,
    Results,
    data_dir_option,
    epochs_option,
    equal_time_epochs,
    last_run_message,
    no_verify_option,
    positive_int,
    replicates_option,
    worst_run_exit_code,
)

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
MNIST_FOLDER = "folder with the four MNIST IDX files"
"""What ``--data-dir`` holds (:func:`sgrld_reproductions.reproduction.data_dir_option`)."""


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

QUICK = {"train_size": 10_000, "epochs": 4, "burn_in_epochs": 2, "samples_per_epoch": 4}
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
        >>> c = config("horseshoe", 400, "monge", Path("r"), epochs=400)
        >>> c.sampler.learning_rate, c.sampler.metric_params, c.prior.params, c.run.burn_in
        (0.25, {'alpha2': 1.25, 'decay': 0.9}, {'include_jacobian': False}, 1000)
    """
    paper = PAPER[(prior, width)][metric]
    if (learning_rate or paper.learning_rate) is None:
        raise ValueError(f"{metric} with the {prior} prior and W={width}: α² = 0 is optimal")
    train_size = train_size or (QUICK["train_size"] if quick else None)
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
        },
        "run": {
            "epochs": epochs,
            "burn_in": QUICK["burn_in_epochs"] * steps if quick else 1000,
            "thin": max(1, steps // QUICK["samples_per_epoch"]) if quick else 100,
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


class Cell(NamedTuple):
    """The run of one (prior, W, metric): its learning rate(s), all their replicates.

    Attributes:
        learning_rates: the rates run (one, or ``--lr-grid``'s, the settings of one sweep).
        result: the run (a sweep's, with a grid or ``--replicates R > 1``: its records give each
            (rate, replicate)'s scores under ``"groups"``, rate by rate).
        scores: per rate, the final scores of each replicate
            (:attr:`sgrld.run.sweep.SweepResult.scores`); ``None`` for one ``sgrld run``.
        replicates: replicates per rate.
    """

    learning_rates: tuple[float, ...]
    result: runner.Result
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
            >>> Cell((0.1, 0.25, 0.5), run, scores, replicates=2).choose()
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


def at_epoch(result: runner.Result, key: str, epochs: int | None = None) -> np.ndarray:
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


def seconds_per_epoch(result: runner.Result) -> float:
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
        sgrld.run.config.key_checks.ConfigError: --equal-time cuts each ensemble by the epochs' sampling ...
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
    table: str, prior: str, width: int, metric: str, cell: Cell | None, paper: Paper, rate: int = 0
) -> dict[str, str]:
    row = dict.fromkeys((key for key, _, _ in COLUMNS), MISSING)
    row |= {"table": table, "prior": prior, "W": str(width), "metric": LABELS[metric]}
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


def table_row(prior: str, width: int, metric: str, cell: Cell | None) -> dict[str, str]:
    """One row of Tables 1-2 (``cell=None``: Monge where α² = 0, i.e. Identity, is best), at the
    cell's rate of best validation log p(y|X) (:meth:`Cell.choose`)."""
    paper = PAPER[(prior, width)][metric]
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
    ece = report.format_value(final.get("test_ece"))
    confidence = report.format_value(final.get("test_confidence"))
    curvature = report.format_value(final.get("curvature"), "{:.2f}")  # pooled over all chains
    if replicates is not None and "test_confidence" in replicates:
        confidence = mean_std(replicates["test_confidence"])
    return row | {
        "conf.": confidence,
        "paper conf.": report.format_value(paper.confidence),
        "ECE": ece if replicates is None else mean_std(replicates["test_ece"]),
        "curv.": MISSING if len(cell.learning_rates) > 1 else curvature,
        "paper curv.": report.format_value(paper.curvature, "{:.2f}"),
        "s/epoch": report.format_value(result.summary["sampler_seconds_per_epoch"], "{:.2f}"),
        "paper s/epoch": report.format_value(paper.seconds, "{:.1f}"),
        "eval s/epoch": report.format_value(result.summary["eval_seconds_per_epoch"], "{:.2f}"),
        "epochs": str(len(result.records)),
    }


def equal_time_row(
    prior: str, width: int, metric: str, candidates: list[Cell], seconds: float, budget: float
) -> dict[str, str]:
    """The Table 6 row of one metric after the epochs that fit in ``budget`` seconds at
    ``seconds`` per epoch, at the rate of highest mean validation log p(y|X) at that cut among
    ``candidates`` (the metric's run, with ``--lr-grid`` of every rate, and without it a run at
    the paper's re-chosen rate, :data:`EQUAL_TIME_LR`); none: Monge where α² = 0 is optimal."""
    paper = PAPER[(prior, width)][metric]
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
    show = lambda v: mean_std(v) if len(v) > 1 else report.format_value(float(v[0]))
    row["log p(y|X)"], row["paper log p"] = _cell(*_one(values["test_log_likelihood"], paper_ll))
    row["acc."], row["paper acc."] = _cell(*_one(values["test_accuracy"], paper_acc))
    return row | {
        "conf.": show(values["test_confidence"]),
        "ECE": show(values["test_ece"]),
        "s/epoch": report.format_value(seconds, "{:.2f}"),
        "paper s/epoch": report.format_value(paper.seconds, "{:.1f}"),
        "epochs": str(epochs),
    }


def _one(values: np.ndarray, paper: Pair | None) -> tuple[Any, Pair | None, Any]:
    """:func:`_cell`'s arguments for per-replicate values: one value alone, else all of them."""
    if len(values) > 1:
        return None, paper, values
    return (None if np.isnan(values[0]) else float(values[0])), paper, None


def options(parser: argparse.ArgumentParser) -> None:
    epochs_option(parser, paper=400, quick=QUICK["epochs"])
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


def metrics_option(parser: argparse.ArgumentParser) -> None:
    """``--metrics NAME ...``: the metrics to run, of :data:`METRICS` (default: all)."""
    parser.add_argument(
        "--metrics", nargs="+", choices=METRICS, default=list(METRICS), help="metrics to run"
    )


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
        help=f"use the first N training images (default: 50000; {QUICK['train_size']} with "
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
    """The :func:`config` keywords of :func:`data_options` and ``--quick``."""
    return {
        "data_dir": args.data_dir,
        "quick": args.quick,
        "train_size": args.train_size,
        "validation_size": args.validation_size,
        "verify_checksums": not args.no_verify_checksums,
    }


def _epochs(args: argparse.Namespace) -> int:
    return args.epochs or (QUICK["epochs"] if args.quick else 400)


def header(args: argparse.Namespace) -> str:
    return f"MNIST MLP, {_epochs(args)} epochs{' (--quick: a smoke test)' if args.quick else ''}"


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
) -> Cell:
    """Run one cell: ``sgrld run`` for one replicate at the configuration's rate, else one sweep
    of ``rates`` (default: that rate alone) × ``replicates``; with ``resume``, the run in its
    folder continues (:func:`sgrld.run.run_folder.existing_of`)."""
    existing = run_folder.existing_of(Path(config.out.folder), resume)
    if replicates == 1 and rates is None:
        result = run_config(config, existing=existing, progress=True, label=label)
        return Cell((config.sampler.learning_rate,), result)
    grids = [] if rates is None else [Grid("sampler.learning_rate", rates)]
    sweep = run_sweep(config, grids, replicates, existing=existing, progress=True, label=label)
    return Cell(rates or (config.sampler.learning_rate,), sweep.result, sweep.scores, replicates)


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

    def run(prior: str, width: int, metric: str, lr: float | None = None) -> Cell:
        cfg = config(
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
        label = f"{prior} W={width} {LABELS[metric]} lr={shown}"
        cell = run_cell(cfg, args.replicates, label, rates, args.resume)
        results["runs"].append(cell.result)
        return cell

    for prior, width in itertools.product(args.prior, args.width):
        cells: dict[str, Cell] = {}
        for metric in args.metrics:
            if PAPER[(prior, width)][metric].learning_rate is None:
                results["rows"].append(table_row(prior, width, metric, None))
                continue
            cell = cells[metric] = run(prior, width, metric)
            results["rows"].append(table_row(prior, width, metric, cell))
            curves = results["curves"].setdefault((prior, width), {})
            curves[LABELS[metric]] = cell.records(cell.choose())
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
    summary="Yu et al. (2023) Tables 1-2: MNIST 784-W-W-10 MLPs in five metrics",
    progress=last_run_message,
    exit_code=worst_run_exit_code,
    stem="mnist_mlp",
    quick_help="a smoke test in a few minutes: the first 10 000 training images, 4 epochs, "
    "burn-in 2 epochs, 4 samples an epoch (with the default W=400 and horseshoe prior)",
    out="results/mnist-mlp",
    resumable=True,
)
