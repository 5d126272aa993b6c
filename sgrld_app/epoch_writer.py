"""The per-epoch callback of :func:`sgrld_app.runner.run`: score the epoch's samples, record the
epoch, write its files and, every ``checkpoint_every`` epochs but not within ``checkpoint_seconds``
of the last, a checkpoint (:mod:`sgrld_app.checkpoint`).

An epoch is committed in one order: its ``metrics.jsonl`` line and sample file, then the in-memory
state (records, ensembles, carry), then (when due) the checkpoint, which is written from that
state. Memory and every checkpoint therefore hold only epochs whose files are all on disk; the
files of a later epoch, left by a run killed in between, are cut away on resume
(:func:`sgrld_app.run_folder.cut_back`). The runner writes a last checkpoint however the run ends.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from sgrld.chains import engine as eng
from sgrld.interrupts import Stop
from sgrld.samplers.isgd import warn_if_clipped
from sgrld.samples import results
from sgrld_app import checkpoint, records, scoring


@dataclass
class RunSetup:
    """Everything a run needs, prepared before its first epoch."""

    engine: eng.Engine
    carry: eng.Carry
    keys: jax.Array
    curvature_keys: jax.Array
    train: tuple[jax.Array, jax.Array]
    eval_sets: dict[str, tuple[jax.Array, jax.Array]]
    scores: scoring.Scores
    score_fn: Callable
    steps: int
    names: list[str]
    kind: scoring.Kind = "classification"
    groups: int | None = None
    """Groups of chains scored apart in every record (:attr:`sgrld_app.experiment.RunPlan.seeds`;
    None: none)."""


def compile_epoch(setup: RunSetup) -> tuple[Callable, float]:
    """Compile the epoch's chunk and scoring functions; return the scorer and the seconds."""
    start = time.perf_counter()
    slots = setup.engine.slots(setup.steps)
    chunk = setup.engine.compile(
        setup.carry, setup.keys, setup.train, num_steps=setup.steps, slots=slots
    )
    chunk_out = chunk.out_info[1]
    score = (
        jax.jit(setup.score_fn)
        .lower(setup.scores, chunk_out, setup.curvature_keys, setup.eval_sets)
        .compile()
    )
    return score, time.perf_counter() - start


class EpochWriter:
    """The engine's callback ``(index, carry, chunk, seconds) -> stop`` (see the module docstring).

    Args:
        setup: the run's prepared state (restored from ``resumed`` if given).
        out: the results folder, or ``None``.
        save_samples: write each epoch's samples to ``out/samples/``.
        curvature: record the mean curvature of the samples.
        stop: the signals received (:mod:`sgrld.interrupts`); a signal stops the run after the
            epoch in flight is committed.
        checkpoint_info: the run's ``schedule`` and ``meta``, stored in every checkpoint.
        checkpoint_every: a checkpoint after every this many epochs.
        checkpoint_seconds: skip a due checkpoint until this many seconds have passed since the
            last one (or since sampling started): on a GPU an epoch of ten MLP chains can take
            less time than writing their 27 MB checkpoint.
        resumed: the checkpoint the run continues from, or ``None``.
        stop_on_divergence: stop the run after the epoch in which a chain diverged (``False``:
            the other chains go on, as the chains of a sweep, :mod:`sgrld_app.sweep`).
    """

    def __init__(
        self,
        setup: RunSetup,
        out: Path | None,
        save_samples: bool,
        curvature: bool,
        stop: Stop,
        checkpoint_info: Mapping[str, Any],
        checkpoint_every: int,
        checkpoint_seconds: float,
        resumed: checkpoint.Saved | None = None,
        stop_on_divergence: bool = True,
    ):
        self.setup, self.out, self.save, self.curvature = setup, out, save_samples, curvature
        self.stop, self.info, self.every = stop, dict(checkpoint_info), checkpoint_every
        self.stop_on_divergence = stop_on_divergence
        self.seconds, self.last_checkpoint = checkpoint_seconds, time.monotonic()
        self.score: Callable | None = None
        self.compile_s = math.nan
        self.scores, self.carry = setup.scores, setup.carry
        self.records: list[dict[str, Any]] = [] if resumed is None else resumed.info["records"]
        self.first = len(self.records)
        self.state = None if resumed is None else setup.carry.state
        self.checkpointed = self.first
        self.cpu = time.process_time()
        self.warned_clipping = False  # i-SGD's systematic clipping: one warning a run

    def compile(self) -> None:
        """Compile the epoch's chunk and scoring functions (timed as ``compile_s``)."""
        self.score, self.compile_s = compile_epoch(self.setup)
        self.cpu, self.last_checkpoint = time.process_time(), time.monotonic()

    def __call__(self, index: int, carry: eng.Carry, chunk: eng.Chunk, sample_s: float) -> bool:
        s, epoch = self.setup, self.first + index
        start = time.perf_counter()
        scores, values, draws = jax.block_until_ready(
            self.score(self.scores, chunk, s.curvature_keys, s.eval_sets)
        )
        groups = None
        if s.groups is not None:  # the replicates of a sweep, scored apart
            labels = {name: y for name, (_, y) in s.eval_sets.items()}
            groups = scoring.group_scores(s.kind, scores, labels, s.groups)
        eval_s = time.perf_counter() - start
        cpu, self.cpu = self.cpu, time.process_time()
        seconds = {
            "epoch_s": sample_s + eval_s,
            "sample_s": sample_s,
            "eval_s": eval_s,
            "epoch_cpu_s": self.cpu - cpu,
        }
        previous = self.records[-1]["samples"] if self.records else 0
        rec = records.record(
            epoch, s.steps, scores, previous, chunk, values, carry, seconds, groups
        )
        if self.curvature:
            total = float(np.sum(np.asarray(scores.curvature_sum)))
            rec["curvature"] = total / rec["samples"] if rec["samples"] else math.nan
        diverged = bool(np.any(np.asarray(carry.diverged_step) >= 0))
        if self.out is not None:
            results.append_record(self.out / "metrics.jsonl", rec)
            if self.save:
                results.write_samples(self.out / "samples", epoch + 1, chunk, draws)
        self.scores, self.carry, self.state = scores, carry, carry.state
        self.records.append(rec)
        self.warned_clipping = self.warned_clipping or warn_if_clipped(rec)
        due = time.monotonic() - self.last_checkpoint >= self.seconds
        if (epoch + 1) % self.every == 0 and due:
            self.checkpoint()
        return (diverged and self.stop_on_divergence) or self.stop.signal is not None

    def checkpoint(self) -> None:
        """Write a checkpoint of the last committed epoch, unless it has one already."""
        if self.out is None or self.checkpointed == len(self.records):
            return
        trees = {"carry": self.carry, "scores": self.scores, "keys": self.setup.keys}
        checkpoint.save(self.out, len(self.records), trees, {**self.info, "records": self.records})
        self.checkpointed, self.last_checkpoint = len(self.records), time.monotonic()
