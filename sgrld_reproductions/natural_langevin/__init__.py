"""``sgrld reproduce natural-langevin``: Table 1 of Marceau-Caron & Ollivier (2017), "Natural
Langevin dynamics for neural networks" (GSI 2017), with the Γ-corrected Fisher rows no paper has.

* Network and data: MNIST with pixels in [0, 1], a 784-400-400-10 ReLU MLP, minibatches of 100,
  N = 50 000 training images (10 000 more held out for validation), the official test set.
* Bayesian model: Gaussian prior N(0, σ² = 0.1) on every parameter; the metric's statistic leaves
  the prior out, as the authors' code does (``prior_in_metric=False``).
* Methods (:data:`~sgrld_reproductions.natural_langevin.runs.METHODS`): SGLD with the Euclidean
  (identity), RMSProp, DOP and QDOP metrics, each scored as the ensemble of its samples and as
  the network at their mean (PostMean); the same Fisher metrics with the Γ correction, its kick
  tamed to one noise sd (``gamma_kick_limit=1``);
  SGD and dropout (:mod:`~sgrld_reproductions.natural_langevin.baselines`).
* Step sizes: every η of the paper's grid, halved every 10 000 updates; per row the η with the
  best validation accuracy of that row's predictor (:func:`select`).

One run per method and η (:func:`sgrld_reproductions.natural_langevin.runs.run`) writes its runner
files to ``<out>/<method>/lr-<η>/``; the table goes to ``natural_langevin.md`` and
``natural_langevin.json`` (each row with its grid: every η's status and scores). ``--resume``
continues a stopped command: each of these runs from its newest checkpoint (a finished one is
read back); dropout, which writes no folder, runs again.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any, NamedTuple

from sgrld_app import api as app
from sgrld_reproductions import scaffolding
from sgrld_reproductions.natural_langevin import runs

EPOCHS = 100
"""Default passes over the 50 000 training images: 50 000 updates (the paper does not say)."""
BURN_IN, THIN = 500, 100
QUICK = {"train_size": 10_000, "epochs": 5, "burn_in": 100, "thin": 25}
"""``--quick``: the first 10 000 training images, 5 epochs (500 updates), burn-in 100, thin 25."""
TRAIN_EVAL_SIZE = VALIDATION_SIZE = 10_000


class Paper(NamedTuple):
    """A row of Table 1: NLL (mean per example) and accuracy (%) on the training and test sets."""

    train_nll: float
    train_acc: float
    test_nll: float
    test_acc: float


PAPER = {
    "SGD": Paper(0.0003, 100.00, 0.0584, 98.24),
    "Dropout": Paper(0.0006, 100.00, 0.0519, 98.61),
    "Ensemble, Euclidean": Paper(0.0357, 99.63, 0.0726, 98.10),
    "Ensemble, RMSProp": Paper(0.0415, 99.47, 0.0742, 98.17),
    "Ensemble, DOP": Paper(0.0292, 99.69, 0.0660, 98.13),
    "Ensemble, QDOP": Paper(0.0229, 99.85, 0.0591, 98.38),
    "PostMean, Euclidean": Paper(0.0281, 99.12, 0.1240, 97.16),
    "PostMean, RMSProp": Paper(0.0299, 99.07, 0.1134, 97.21),
    "PostMean, DOP": Paper(0.0243, 99.20, 0.1389, 97.20),
    "PostMean, QDOP": Paper(0.0292, 99.60, 0.3429, 98.14),
}
"""Table 1 of Marceau-Caron & Ollivier (2017), by row."""

VIEWS = {"ensemble": "Ensemble", "postmean": "PostMean"}


class Row(NamedTuple):
    """A row of the output table: its label, its method and which predictor of the method's runs
    (``"final"``: the trained network of SGD or dropout; ``"ensemble"``; ``"postmean"``)."""

    label: str
    method: runs.Method
    view: str


def table_layout() -> list[Row]:
    """The rows: SGD, dropout, then every SGLD method as ensemble and then as PostMean.

    Example:
      >>> [row.label for row in table_layout()][:4]
      ['SGD', 'Dropout', 'Ensemble, Euclidean', 'Ensemble, RMSProp']
    """
    sgld = [m for m in runs.METHODS if m.kind == "sgld"]
    single = [Row(m.name, m, "final") for m in runs.METHODS if m.kind != "sgld"]
    return single + [Row(f"{v}, {m.name}", m, view) for view, v in VIEWS.items() for m in sgld]


def select(grid: list[dict[str, Any]], view: str) -> dict[str, Any] | None:
    """The completed run of ``grid`` with the best validation accuracy of its ``view`` predictor
    (the smaller η on a tie), or None if no run completed with one.

    Example:
      >>> def run(lr, acc, status="completed"):
      ...     return {"learning_rate": lr, "status": status,
      ...             "scores": {"ensemble": {"val": {"accuracy": acc}}}}
      >>> grid = [run(0.1, 97.0), run(0.01, 98.0), run(1.0, 99.0, "diverged"), run(0.001, 98.0)]
      >>> select(grid, "ensemble")["learning_rate"]
      0.001
    """

    def val_accuracy(run):
        acc = run["scores"].get(view, {}).get("val", {}).get("accuracy")
        return acc if run["status"] == "completed" and acc is not None else -math.inf

    candidates = [r for r in grid if val_accuracy(r) > -math.inf]
    if not candidates:
        return None
    return max(sorted(candidates, key=lambda r: r["learning_rate"]), key=val_accuracy)


COLUMNS = app.columns("""
    row              method             {}
    lr               η                  {}
    train_nll        train NLL          {:.4f}
    paper_train_nll  paper              {:.4f}
    train_acc        train acc. %       {:.2f}
    paper_train_acc  paper              {:.2f}
    test_nll         test NLL           {:.4f}
    paper_test_nll   paper              {:.4f}
    test_acc         test acc. %        {:.2f}
    paper_test_acc   paper              {:.2f}
    val_acc          val acc. %         {:.2f}
    seconds          s/run              {:.0f}
    status           runs               {}
""")
"""The table's columns: ours beside the paper's (its ``paper`` columns)."""

NOTES = (
    "η: the step size chosen among the paper's grid ({.001, .01, .1, 1} for Euclidean, SGD and "
    "dropout; {.0001, .001, .01, .1} for the others) by the validation accuracy of the row's "
    "predictor (10 000 held-out training images), halved every 10 000 updates; our "
    "learning_rate is the paper's η (θ ← θ − η·G⁻¹(ḡ − ∇log p(θ)/N) + √(2η/N)·G^{-1/2}ξ). "
    f"Updates: {EPOCHS} epochs of 500 = {EPOCHS * 500:,} by default (the paper does not say; "
    "--epochs changes it). NLL: mean per example; train scores on the first 10 000 training "
    "images. Ensemble: predictive average (of probabilities) of the states after 600, 700, ... "
    "updates (every 100th after the first 500); PostMean: the network at the mean of the same "
    "states. Prior N(0, 0.1) on every parameter, not in the metric; initialisation N(0, "
    "1/fan-in), zero biases; one chain and seed per run. RMSProp: G = √V + ε with V the "
    "1/√t-weighted average of the squared minibatch gradient and ε = 1e-4; the paper's Alg. 2 "
    "is C = (D + ε)^{-1/2}, ε inside the root. DOP, QDOP: the empirical (OP) Fisher of the "
    "minibatch's per-example gradients, γ_t = 1/√t, ε = 1e-4. + Γ: the same with the "
    "Hutchinson Γ correction (one probe, the share ĉ), its kick tamed to one noise sd per "
    "coordinate (Γ is stiff where the Fisher is far below ε), new rows. SGD: identity, no "
    "prior, no noise (T = 0); Dropout: p = 0.5 on the hidden layers, "
    "plain SGD without prior; both the final network after the same updates and η schedule. "
    "runs: runs that completed out of the η tried. —: nothing to report (not run, diverged, or "
    "not in the paper)."
)


def _grid_entry(run: dict[str, Any], view: str) -> dict[str, Any]:
    """What the JSON keeps of one η of a row's grid."""
    scores = run["scores"].get(view, {})
    return {
        "learning_rate": run["learning_rate"],
        "status": run["status"],
        "seconds": run["seconds"],
        **{f"{name}_{k}": v for name, s in scores.items() for k, v in s.items()},
    }


def table_row(row: Row, grid: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from the runs of its method (``grid``, possibly empty)."""
    paper = PAPER.get(row.label)
    best = select(grid, row.view)
    scores = best["scores"][row.view] if best else {}
    get = lambda name, key: scores.get(name, {}).get(key)
    done = sum(r["status"] == "completed" for r in grid)
    return {
        "row": row.label,
        "lr": format(best["learning_rate"], "g") if best else app.MISSING,
        "train_nll": get("train", "nll"),
        "train_acc": get("train", "accuracy"),
        "test_nll": get("test", "nll"),
        "test_acc": get("test", "accuracy"),
        "val_acc": get("val", "accuracy"),
        "seconds": best["seconds"] if best else None,
        "status": f"{done}/{len(grid)} completed" if grid else "not run",
        **{f"paper_{k}": getattr(paper, k, None) for k in Paper._fields},
        "grid": [_grid_entry(r, row.view) for r in grid],
    }


def table_rows(results: scaffolding.Results) -> list[dict[str, Any]]:
    """Every row of the table (rows without runs show only the paper's numbers)."""
    by_method: dict[str, list] = {}
    for run in results["runs"]:
        by_method.setdefault(run["method"], []).append(run)
    return [table_row(row, by_method.get(row.method.name, [])) for row in table_layout()]


def options(parser: argparse.ArgumentParser) -> None:
    keys = [m.key for m in runs.METHODS]
    parser.add_argument(
        "--epochs",
        type=scaffolding.positive_int,
        help=f"epochs of 500 updates per run (default {EPOCHS}, {QUICK['epochs']} with --quick)",
    )
    scaffolding.choices_option(
        parser, "--methods", keys, f"methods to run (default: all): {', '.join(keys)}", "METHOD"
    )
    parser.add_argument(
        "--lr",
        type=step_size,
        nargs="+",
        metavar="[METHOD=]ETA",
        help="try only these step sizes η: ETA for every method, METHOD=ETA for one method "
        "(which then tries only its own; repeat for several) (default: the paper's grid; one "
        "step size per method with --quick)",
    )
    parser.add_argument(
        "--validation-size",
        type=int,
        default=VALIDATION_SIZE,
        help="training images held out for validation (default: %(default)s)",
    )
    parser.add_argument(
        "--train-eval-size",
        type=int,
        default=TRAIN_EVAL_SIZE,
        help="score the training set on its first N images (default: %(default)s; 0: none)",
    )
    scaffolding.data_dir_option(parser, scaffolding.MNIST_FOLDER)


def _plan(args: argparse.Namespace) -> runs.Plan:
    q = QUICK if args.quick else {"epochs": EPOCHS, "burn_in": BURN_IN, "thin": THIN}
    return runs.Plan(args.epochs or q["epochs"], q["burn_in"], q["thin"], args.seed)


def step_size(text: str) -> tuple[str | None, float]:
    """A ``--lr`` entry: ``ETA`` (every method) or ``METHOD=ETA`` (one method), η finite > 0.

    Example:
      >>> step_size("0.01"), step_size("qdop=1e-3")
      ((None, 0.01), ('qdop', 0.001))
    """
    key, _, eta = text.rpartition("=")
    keys = [m.key for m in runs.METHODS]
    if "=" in text and key not in keys:
        raise argparse.ArgumentTypeError(f"unknown method {key!r} in {text!r}: one of {keys}")
    return (key or None), scaffolding.positive_number(text, eta, "η")


def _grid(method: runs.Method, args: argparse.Namespace) -> tuple[float, ...]:
    """The η tried for ``method``: its own ``--lr METHOD=ETA`` entries, else the plain ``--lr``
    entries, else the paper's grid (``--quick``: its one η)."""
    entries = args.lr or []
    own = tuple(eta for key, eta in entries if key == method.key)
    shared = tuple(eta for key, eta in entries if key is None)
    if own or shared:
        return own or shared
    return (method.quick_lr,) if args.quick else method.grid


def header(args: argparse.Namespace) -> str:
    plan = _plan(args)
    return (
        f"Natural Langevin dynamics (Marceau-Caron & Ollivier 2017, Table 1): MNIST 784-400-400-10,"
        f" {plan.epochs} epochs, burn-in {plan.burn_in}, a sample every {plan.thin}"
        f"{scaffolding.quick_note(args)}"
    )


def compute(args: argparse.Namespace, on_result: scaffolding.OnResult) -> scaffolding.Results:
    """Run every selected method at every η of its grid in turn."""
    plan = _plan(args)
    train_size = QUICK["train_size"] if args.quick else None
    data = runs.load_data(args.data_dir, args.validation_size, train_size, args.train_eval_size)
    methods = [m for m in runs.METHODS if m.key in args.methods]
    config = {"title": header(args), "quick": args.quick, **plan._asdict()}
    config |= {"train_size": len(data.train[0]), "validation_size": args.validation_size}
    config["train_eval_size"] = args.train_eval_size
    config["methods"] = {m.name: m.hyperparameters() | {"grid": _grid(m, args)} for m in methods}
    results: scaffolding.Results = {"config": config, "runs": []}
    for method in methods:
        for lr in _grid(method, args):
            out = Path(args.out) / method.key / f"lr-{lr:g}"
            run = runs.run(
                method, lr, data, plan, scaffolding.RunSpec(out, progress=True, resume=args.resume)
            )
            if scaffolding.record_run(results, run, on_result):
                return results
    return results


def progress(results: scaffolding.Results) -> str:
    """The last run's validation and test scores, status and time."""
    run, fmt = results["runs"][-1], app.format_value
    parts = [
        f"{VIEWS.get(view, 'final')}: val acc. {fmt(s['val']['accuracy'], '{:.2f}')}, "
        f"test NLL {fmt(s['test']['nll'])}"
        for view, s in run["scores"].items()
    ]
    return scaffolding.progress_line(
        f"{run['method']} η={run['learning_rate']:g}", parts, run, sep="; "
    )


def exit_code(results: scaffolding.Results) -> int:
    """130 if interrupted; 1 if a method that ran has a predictor with no completed run; else 0.

    A diverged η of a grid is an outcome of the search, not a failure of the command.
    """
    rows = table_rows(results)
    failed = any(row["grid"] and row["lr"] == app.MISSING for row in rows)
    return scaffolding.exit_code_of(results["runs"], failed)


REPRODUCTION = scaffolding.Reproduction.from_module(
    globals(),
    summary="Marceau-Caron & Ollivier (2017) Table 1: Fisher-preconditioned SGLD on MNIST",
    quick_help="a smoke test in a few minutes on a CPU: the first 10 000 training images, 5 "
    "epochs (500 updates), burn-in 100, a sample every 25, one step size per method",
    resumable=True,
)
