"""The methods of Franzese et al. (2021)'s i-SGD experiments, shared by ``sgrld reproduce
isgd-uci`` and ``isgd-mnist``: the table's methods and their ``[sampler]`` overrides, the account of
a run, the choice of a learning rate on validation and the options that name methods and rates.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from sgrld_app import api as app
from sgrld_app.api import finite
from sgrld_reproductions.scaffolding.options import choices_option, positive_number


class ISGDMethod(NamedTuple):
    """A row of the table.

    Attributes:
      key: its name on the command line.
      label: its name in the table.
      paper: its row in Franzese et al.'s tables (None: not there).
      kind: ``"sampler"`` (a configuration's ``[sampler]``), ``"sgd"``, ``"vsgd"``, ``"swag"`` or
        ``"dropout"`` (:mod:`sgrld.samplers.baselines`).
      sampler: the ``--set`` overrides of ``[sampler]`` (samplers only).
      grid: the learning rates tried (none: i-SGD's λ rule, which has no learning rate).
    """

    key: str
    label: str
    paper: str | None
    kind: str
    sampler: tuple[str, ...] = ()
    grid: tuple[float, ...] = (0.003, 0.01, 0.03)

    @property
    def tuned(self) -> bool:
        """Whether a learning rate is chosen (on validation data)."""
        return bool(self.grid)


SMALL_GRID = (0.001, 0.003, 0.01)
"""The grid of SGHMC (friction 0.1: steps about 10x SGLD's) and pSGLD (G⁻¹ = 1/(√V + eps) > 1)."""


ISGD_METHODS = (
    ISGDMethod(
        "sgld", "SGLD", "sgld", "sampler", ("sampler.kind=sgrld", "sampler.metric=identity")
    ),
    ISGDMethod(
        "isgd", "i-SGD", "i-sgd", "sampler", ("sampler.kind=isgd", "sampler.learning_rate=rule"), ()
    ),
    ISGDMethod("sghmc", "SGHMC", "sghmc", "sampler", ("sampler.kind=sghmc",), SMALL_GRID),
    ISGDMethod("vsgd", "vSGD", "vsgd", "vsgd"),
    ISGDMethod("dropout", "MC dropout", "drop", "dropout"),
    ISGDMethod("swag", "SWAG", None, "swag"),
    ISGDMethod("sgd", "SGD", "Baseline", "sgd"),
    ISGDMethod(
        "rmsprop", "RMSprop", None, "sampler",
        (
            "sampler.kind=sgrld", "sampler.metric=rmsprop", "sampler.metric_params.eps=1e-4",
            "sampler.adapt_until=never",
        ),
        SMALL_GRID,
    ),
    ISGDMethod(
        "rmsprop-gamma", "RMSprop + Γ", None, "sampler",
        (
            "sampler.kind=sgrld", "sampler.metric=rmsprop", "sampler.metric_params.eps=1e-4",
            "sampler.correction=hutchinson", "sampler.correction_scale=1",
            "sampler.adapt_until=never",
        ),
        SMALL_GRID,
    ),
)  # fmt: skip
"""The methods, in the table's order: the paper's and our Γ-corrected RMSprop (pSGLD + Γ)."""


ISGD_NOISE_WINDOW = 1000
"""i-SGD's ``noise_window`` in the reproductions: λ from the gradient noise of about the last
1,000 steps of a warm-up through the burn-in."""


def sampler_overrides(method: ISGDMethod, lr: float | None, burn_in: int) -> list[str]:
    """The ``[sampler]`` overrides of a run: the method's, its learning rate, and for i-SGD a
    warm-up through the ``burn_in`` with a noise window of :data:`ISGD_NOISE_WINDOW`, so that its
    λ is that of the gradient noise where the chain samples (:mod:`sgrld.samplers.isgd`: λ fixed
    after the first 100 steps clipped 15% of kin8nm's coordinates, this 0.4%).

    Example:
      >>> isgd = next(m for m in ISGD_METHODS if m.key == "isgd")
      >>> sampler_overrides(isgd, None, 5000)[2:]
      ['sampler.warmup=5000', 'sampler.noise_window=1000']
    """
    sampler = list(method.sampler)
    if lr is not None:
        sampler.append(f"sampler.learning_rate={lr}")
    if "sampler.kind=isgd" in method.sampler:
        sampler += [
            f"sampler.warmup={max(burn_in, 1)}",
            f"sampler.noise_window={ISGD_NOISE_WINDOW}",
        ]
    return sampler


def run_summary(
    result: app.Result, start: float, keys: Sequence[str], **extra: Any
) -> dict[str, Any]:
    """The JSON-ready account of a run: ``status``, ``message``, ``seconds`` since ``start`` (a
    :func:`time.perf_counter`), ``samples`` (the ensemble's size), ``**extra``, and the ``keys``
    of its last record (None where missing or not finite).

    Example:
      >>> done = app.Result("completed", "done", [{"samples": 5, "test_rmse": 0.5}], 0.0,
      ...                      None, None, {})
      >>> s = run_summary(done, time.perf_counter(), ("test_rmse", "val_rmse"), split=3)
      >>> s["status"], s["samples"], s["split"], s["test_rmse"], s["val_rmse"]
      ('completed', 5, 3, 0.5, None)
    """
    final = result.records[-1] if result.records else {}
    return {
        "status": result.status,
        "message": result.message,
        "seconds": time.perf_counter() - start,
        "samples": final.get("samples", 0),
        **extra,
        **{key: finite(final.get(key, math.nan)) for key in keys},
    }


def grid_of(method: ISGDMethod, args: argparse.Namespace) -> tuple[float | None, ...]:
    """The learning rates tried (``None``: the method's own rule): its ``--lr METHOD=LR`` entries,
    else its grid (``--quick``: the grid's middle one)."""
    if not method.tuned:
        return (None,)
    own = tuple(lr for key, lr in args.lr or () if key == method.key)
    if own:
        return own
    return (method.grid[len(method.grid) // 2],) if args.quick else method.grid


def method_lr(text: str) -> tuple[str, float]:
    """A ``--lr`` entry ``METHOD=LR``: a method of the table with a tuned learning rate, LR > 0.

    Example:
      >>> method_lr("sgld=0.03")
      ('sgld', 0.03)
    """
    key, _, value = text.partition("=")
    keys = [m.key for m in ISGD_METHODS if m.tuned]
    if key not in keys:
        raise argparse.ArgumentTypeError(f"{text!r}: expected METHOD=LR with METHOD in {keys}")
    return key, positive_number(text, value, "LR")


def select_rate(grid: list[dict[str, Any]], score: str = "val_rmse") -> dict[str, Any] | None:
    """The completed run with the lowest ``score`` (validation RMSE; ``sgrld reproduce
    isgd-mnist``: ``"val_nll"``), the smaller lr on a tie, or None.

    Example:
      >>> grid = [{"lr": 0.1, "status": "completed", "val_rmse": 2.0},
      ...         {"lr": 0.01, "status": "completed", "val_rmse": 2.0},
      ...         {"lr": 1.0, "status": "diverged", "val_rmse": 1.0}]
      >>> select_rate(grid)["lr"]
      0.01
    """
    done = [r for r in grid if r["status"] == "completed" and r[score] is not None]
    if not done:
        return None
    return min(sorted(done, key=lambda r: r["lr"] or 0.0), key=lambda r: r[score])


def spread(values: list[float], fmt: str, ddof: int = 1) -> str:
    """``mean ± std`` of ``values``, each formatted by ``fmt`` (the mean alone for one value), or
    — without any; ``ddof = 0`` for a population std (``sgrld reproduce isgd-mnist``, as its paper).

    Example:
      >>> spread([1.0, 2.0, 3.0], "{:.2f}"), spread([1.0, 3.0], "{:.1f}", ddof=0), spread([], "{}")
      ('2.00 ± 1.00', '2.0 ± 1.0', '—')
    """
    if not values:
        return app.MISSING
    mean = fmt.format(float(np.mean(values)))
    return mean if len(values) < 2 else f"{mean} ± {fmt.format(float(np.std(values, ddof=ddof)))}"


def method_options(
    parser: argparse.ArgumentParser,
    methods: Sequence[ISGDMethod],
    lr: Callable[[str], tuple[str, float]],
    repeat_note: str = "",
) -> None:
    """Add ``--methods METHOD ...`` (of ``methods``' keys, default all) and ``--lr METHOD=LR ...``
    (each entry parsed by ``lr``, e.g. :func:`method_lr`): the methods run and their learning
    rates (``repeat_note``: a note in the help of ``--lr``).

    Example:
      >>> p = argparse.ArgumentParser()
      >>> method_options(p, ISGD_METHODS[:2], method_lr)
      >>> args = p.parse_args(["--lr", "sgld=0.1", "sgld=0.2"])
      >>> args.methods, args.lr
      (['sgld', 'isgd'], [('sgld', 0.1), ('sgld', 0.2)])
    """
    keys = [m.key for m in methods]
    choices_option(
        parser, "--methods", keys, f"methods (default: all): {', '.join(keys)}", metavar="METHOD"
    )
    parser.add_argument(
        "--lr",
        type=lr,
        nargs="+",
        metavar="METHOD=LR",
        help=f"try only these learning rates for these methods {repeat_note}(default: each "
        "method's grid; its middle value with --quick)",
    )


def lr_note(args: argparse.Namespace) -> str:
    """The headers' note of the learning rates fixed by ``--lr`` ("" without it).

    Example:
      >>> lr_note(argparse.Namespace(lr=[("sgld", 0.03), ("swag", 0.01)]))
      '; learning rates of --lr: sgld=0.03, swag=0.01'
    """
    fixed = ", ".join(f"{key}={lr:g}" for key, lr in args.lr or ())
    return f"; learning rates of --lr: {fixed}" if fixed else ""


def lr_label(lr: float | None) -> str:
    """A run's learning rate in a progress line: ``rule`` for i-SGD's λ rule (None).

    Example:
      >>> lr_label(0.003), lr_label(None)
      ('0.003', 'rule')
    """
    return "rule" if lr is None else format(lr, "g")
