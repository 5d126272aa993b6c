"""What a run is: its plan (:class:`RunPlan`: how long, which steps are kept), its experiment
(:class:`Experiment`: what to sample and how to score it) and its outcome (:class:`Result`), which
:func:`sgrld_app.runner.run` takes and returns.

Burn-in and thinning count minibatches over the whole run (global step ``s``, from 0), as in the
authors' code: ``s`` is a sample when ``s >= burn_in and (s + 1) % thin == 0``
(:func:`sample_steps`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import jax
import numpy as np

from sgrld.chains import engine as eng
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.sampler import Sampler
from sgrld_app import scoring

Status = Literal["completed", "diverged", "interrupted"]
EXIT_CODES = {"completed": 0, "diverged": 1, "interrupted": 130}
"""The ``sgrld`` command's exit code for each :class:`Result` status."""


def first_kept_window(burn_in: int, thin: int) -> int:
    """The engine's burn-in (:func:`sgrld.chains.engine.is_kept`) for the authors' rule.

    Example:
        >>> first_kept_window(7, 4)  # kept: 7, 11, ... = the engine's rule from step 4
        4
    """
    return math.ceil((burn_in + 1) / thin) * thin - thin


def sample_steps(num_steps: int, burn_in: int, thin: int) -> np.ndarray:
    """The global steps (0-based) at which a sample is taken.

    Step ``s`` is a sample when ``s >= burn_in`` and ``(s + 1) % thin == 0``, as in the authors'
    code (``inference.py``), so with ``burn_in = 1000`` and ``thin = 100`` the first sample is the
    state after the 1100th minibatch.

    Example:
        >>> sample_steps(30, burn_in=7, thin=4).tolist()
        [7, 11, 15, 19, 23, 27]
    """
    s = np.arange(num_steps)
    return s[eng.is_kept(s, first_kept_window(burn_in, thin), thin)]


@dataclass(frozen=True)
class RunPlan:
    """How long to sample and which steps to keep.

    Attributes:
        epochs: passes over the training set.
        batch_size: minibatch size B (an epoch is ``n_train // B`` steps).
        burn_in: global steps before the first sample.
        thin: a sample every ``thin`` steps (see :func:`sample_steps`).
        chains: independent chains, run with ``jax.vmap``.
        seed: seed of the initialisation, shuffling and noise of all chains.
        seeds: one seed per group of chains instead (``None``: ``seed`` for all): the chains are
            cut into ``len(seeds)`` groups of ``chains / len(seeds)`` consecutive chains, and
            group ``g`` gets the initialisations and keys of a run of that many chains with
            ``seed = seeds[g]`` (the replicates of :mod:`sgrld_app.sweep`).
    """

    epochs: int
    batch_size: int
    burn_in: int = 0
    thin: int = 1
    chains: int = 1
    seed: int = 0
    seeds: tuple[int, ...] | None = None

    def __post_init__(self):
        lows = {"epochs": 1, "batch_size": 1, "burn_in": 0, "thin": 1, "chains": 1}
        for name, low in lows.items():
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if self.seeds is not None and (not self.seeds or self.chains % len(self.seeds)):
            raise ValueError(
                f"seeds must be None or 1 to chains={self.chains} seeds dividing the chains "
                f"into equal groups, got {len(self.seeds)}"
            )


@dataclass(frozen=True)
class Experiment:
    """What to sample and how to score it.

    Attributes:
        sampler: a :class:`sgrld.Sampler` whose ``step(key, state, (x, y))`` takes a minibatch.
        init_fn: ``key -> params`` of one chain (called with a different key per chain).
        predict_fn: ``(params, x) -> logits [n, C]`` (classification) or
            ``(params, x) -> (mean [n], std [n] or scalar)`` (regression).
        train: training inputs and targets (numpy or JAX arrays with a leading example axis).
        eval_sets: evaluation sets by name, e.g. ``{"test": (x, y), "val": (x, y)}``; empty
            sets are skipped.
        kind: ``"classification"`` or ``"regression"``.
        meta: anything JSON-serialisable to store in ``summary.json`` (e.g. the configuration).
        chain_args: further arguments of ``sampler.init`` after the parameters, each with a
            leading chain axis (e.g. the per-chain hyperparameters of
            :func:`sgrld.samplers.swept.swept`).
        keep: a predicate ``step -> bool`` that a kept step must also pass (``None``: burn-in
            and thinning alone), e.g. the sampling phases of a cyclical schedule
            (:attr:`sgrld.numerics.schedules.Cyclical.keep`, :class:`sgrld.chains.engine.Engine`).
        eval_units: ``y -> y`` from the training targets' units to those of ``eval_sets`` and
            ``predict_fn`` (``None``: the same units), e.g. ``y·std + mean`` for a regression
            trained on standardised targets and scored in their own units; used where training
            rows are held out and scored (:func:`sgrld_app.auto_rate.held_out`).
        searched_option: ``(key, values)``: an option of ``[sampler]`` that a
            ``learning_rate="auto"`` search chooses beside the rate, among ``values``
            (``("metric_params.alpha2", ...)`` for Monge's α² not given;
            :func:`sgrld_app.auto_rate.search_rate`), ``sampler`` being at the first value until
            the search; ``None``: the rate alone.
        sampler_at: ``value -> sampler`` at that value of ``searched_option``'s key.
        guarantee_at: ``value -> guarantee`` of the run at that value (``meta["guarantee"]`` is
            the first value's until the search).
    """

    sampler: Sampler
    init_fn: Callable[[jax.Array], PyTree]
    predict_fn: Callable[[PyTree, jax.Array], Any]
    train: tuple[Any, Any]
    eval_sets: Mapping[str, tuple[Any, Any]]
    kind: scoring.Kind = "classification"
    meta: Mapping[str, Any] = field(default_factory=dict)
    chain_args: tuple[Any, ...] = ()
    keep: Callable[[Any], Any] | None = None
    eval_units: Callable[[Any], Any] | None = None
    searched_option: tuple[str, tuple[float, ...]] | None = None
    sampler_at: Callable[[float], Sampler] | None = None
    guarantee_at: Callable[[float], str] | None = None


@dataclass
class Result:
    """The outcome of :func:`run`.

    Attributes:
        status: ``"completed"``, ``"diverged"`` or ``"interrupted"``.
        message: a human-readable account of what happened (and where the results are).
        records: one dict per completed epoch (the lines of ``metrics.jsonl``).
        compile_s: seconds to compile the epoch's two functions.
        state: the final sampler states (leading chain axis), or ``None`` if no epoch completed.
        out: the results folder, or ``None``.
        summary: the contents of ``summary.json``.
        scores: the final ensembles of every chain (leading chain axis), or ``None``.
        diverged_step: per chain, the global step at which it diverged, or −1.
    """

    status: Status
    message: str
    records: list[dict[str, Any]]
    compile_s: float
    state: Any
    out: Path | None
    summary: dict[str, Any]
    scores: scoring.Scores | None = None
    diverged_step: np.ndarray | None = None
