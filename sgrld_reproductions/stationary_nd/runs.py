"""The problems and samplers of ``sgrld reproduce stationary-nd``
(:mod:`sgrld_reproductions.stationary_nd`, which describes the experiment): the targets with their
step sizes and budgets, the adaptive metrics, one sampler's run on one target and the time of a
step.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld.samples.distances import covariance_error, w1_to_normal
from sgrld_reproductions.scaffolding import sample_timed

FUNNEL_SIGMA2 = 4.0
ADAM = {"a": 1.0, "eps": 0.1, "decay": 0.9, "beta": 0.5}


class Problem(NamedTuple):
    """A target with its step size and budget.

    Attributes:
      key: short name.
      title: description for the table.
      target: the :class:`~sgrld.samples.targets.Target`.
      learning_rate: lr of every sampler on it.
      chains: vmapped chains (full run).
      burn: burn-in steps.
      span: sampling steps per chain after the burn-in (full run).
      thin: steps between kept samples.
      fewer_chains: ``(metric name, chains)`` pairs for samplers that run with fewer chains
        than ``chains`` (full run), because a step of theirs costs far more.
    """

    key: str
    title: str
    target: sgrld.samples.targets.Target
    learning_rate: float
    chains: int
    burn: int
    span: int
    thin: int
    fewer_chains: tuple[tuple[str, int], ...] = ()

    def chains_for(self, metric: str) -> int:
        """The chains of the full run for the sampler named ``metric``."""
        return dict(self.fewer_chains).get(metric, self.chains)

    @property
    def num_leaves(self) -> int:
        """Number of parameter leaves (Wenzel's metric is the identity on one)."""
        return len(jax.tree.leaves(self.target.init_params))

    @property
    def gaussian(self) -> bool:
        """Whether the target has a known covariance (scored by the covariance error)."""
        return self.target.cov is not None


def problems() -> tuple[Problem, ...]:
    """The three targets, in table order."""
    return (
        Problem(
            "gaussian-2d",
            "correlated 2-D Gaussian, rho 0.9, two scalar leaves",
            sgrld.samples.targets.correlated_gaussian(
                dim=2, rho=0.9, condition=1.0, shape={"a": (1,), "b": (1,)}
            ),
            1e-3,
            chains=512,
            burn=10_000,
            span=20_000,
            thin=100,
        ),
        Problem(
            "gaussian-10d",
            "anisotropic 10-D Gaussian, variances 0.32-3.2, two leaves of 5",
            sgrld.samples.targets.anisotropic_gaussian(
                dim=10, condition=10.0, shape={"a": (5,), "b": (5,)}
            ),
            1e-2,
            chains=4096,
            burn=5_000,
            span=20_000,
            thin=200,
            fewer_chains=(("Shampoo", 128),),
        ),
        Problem(
            "funnel",
            f"2-D funnel, v ~ N(0, {FUNNEL_SIGMA2:g}), one leaf",
            sgrld.samples.targets.funnel(dim=2, sigma2=FUNNEL_SIGMA2),
            1e-3,
            chains=256,
            burn=20_000,
            span=40_000,
            thin=400,
        ),
    )


class MetricSpec(NamedTuple):
    """An adaptive metric (or Adam-SGLD) and its hyperparameters.

    Attributes:
      name: the table's name.
      settings: hyperparameters, for the JSON.
      make: ``(potential, lr, correction) -> Sampler``.
      correctable: whether a Γ-corrected version exists.
    """

    name: str
    settings: dict[str, Any]
    make: Callable[[Callable, float, str | None], sgrld.Sampler]
    correctable: bool = True


def _sgrld_spec(name: str, factory: Callable, **settings: Any) -> MetricSpec:
    def make(potential, lr, correction):
        return sgrld.sgrld(
            potential,
            factory(**settings),
            learning_rate=lr,
            num_data=1,
            correction=correction,
            correction_scale=1.0,  # issue 3's claim is about the full Γ
            adapt_until=None,  # the paper's setting: the metric adapts throughout
        )

    return MetricSpec(name, settings, make, correctable=name != "Identity")


def metric_specs() -> tuple[MetricSpec, ...]:
    """The samplers of every row, in table order."""
    m = sgrld.metrics
    return (
        _sgrld_spec("Identity", m.identity),
        _sgrld_spec("RMSprop", m.rmsprop, decay=0.5, eps=0.1),
        _sgrld_spec("Wenzel", m.wenzel, decay=0.5, eps=1e-8, update_every=1),
        _sgrld_spec("Monge", m.monge, alpha2=1.0, decay=0.5),
        _sgrld_spec("Shampoo", m.shampoo, decay=0.5, eps=0.1, update_every=1),
        MetricSpec(
            "Adam-SGLD",
            ADAM,
            lambda potential, lr, correction: sgrld.adam_sgld(
                potential, learning_rate=lr, num_data=1, **ADAM
            ),
            correctable=False,
        ),
    )


def time_per_step(
    key: jax.Array,
    runs: dict[str, tuple[sgrld.Sampler, Any]],
    batch_fn: Callable,
    steps: int,
    rounds: int,
) -> dict[str, float]:
    """Seconds per step of all chains, for several samplers timed in alternation.

    ``runs`` maps a name to ``(sampler, state)``, the state with a leading chain axis. For each,
    ``steps`` steps of the vmapped sampler run inside one jitted ``lax.scan`` (compiled first);
    then ``rounds`` rounds time one call of each in turn, and the fastest call of each counts, so
    that load from other processes on a shared machine affects both sides of a ratio alike.

    Returns:
      ``{name: seconds per step}``.
    """
    batch = batch_fn(key)

    def compiled(sampler, state):
        keys = jax.random.split(key, jax.tree.leaves(state)[0].shape[0])
        step = jax.vmap(sampler.step, in_axes=(0, 0, None))

        @jax.jit
        def advance(state):
            def body(s, t):
                s, _ = step(jax.vmap(lambda k: jax.random.fold_in(k, t))(keys), s, batch)
                return s, None

            return jax.lax.scan(body, state, jnp.arange(steps))[0]

        jax.block_until_ready(advance(state))
        return advance

    advance = {name: compiled(*run) for name, run in runs.items()}
    best = dict.fromkeys(runs, math.inf)
    for _ in range(rounds):
        for name, (_, state) in runs.items():
            start = time.perf_counter()
            jax.block_until_ready(advance[name](state))
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: t / steps for name, t in best.items()}


class RunResult(NamedTuple):
    """One sampler on one target.

    Attributes:
      error: covariance error (Gaussians) or W1 of v (funnel), on the chains that did not diverge.
      diverged: chains that produced a NaN/inf (dropped).
      samples: samples scored.
      wall_s: wall time of the sampling, compilation included.
      state: the final sampler state of every chain.
      step_s: seconds per step of all chains (:func:`time_per_step`), NaN until timed.
    """

    error: float
    diverged: int
    samples: int
    wall_s: float
    state: Any
    step_s: float = math.nan


def exact_gradient(target: sgrld.samples.targets.Target) -> Callable[[jax.Array], Any]:
    """``key -> batch`` of zero gradient noise (exact gradients, no random draw per step)."""
    zeros = jax.tree.map(jnp.zeros_like, target.init_params)
    return lambda key: zeros


def run_sampler(
    key: jax.Array,
    problem: Problem,
    sampler: sgrld.Sampler,
    chains: int,
    span: int,
    *,
    progress: bool = False,
) -> RunResult:
    """Sample ``problem`` with ``sampler`` from its start point and score the samples."""
    target = problem.target
    batch_fn = exact_gradient(target)
    out, wall = sample_timed(
        key,
        sampler,
        target.init_params,
        batch_fn,
        num_samples=span // problem.thin,
        thin=problem.thin,
        burn_in=problem.burn,
        num_chains=chains,
        init="shared",  # every chain at the target's start, as published
        progress=progress,
    )
    flat = jax.vmap(jax.vmap(lambda p: ravel_pytree(p)[0]))(out.params)
    flat = np.asarray(flat, np.float64)
    ok = np.asarray(out.diverged_at) < 0
    flat = flat[ok].reshape(-1, flat.shape[-1])
    if flat.shape[0] < 2:
        error = math.nan
    elif problem.gaussian:
        error = covariance_error(flat, target.cov)
    else:
        error = w1_to_normal(flat[:, -1], math.sqrt(FUNNEL_SIGMA2))
    return RunResult(error, int((~ok).sum()), int(flat.shape[0]), wall, out.state)
