"""SGLD and pSGLD as ``sgrld reproduce psgld`` (Li, Chen, Carlson & Carin, AAAI 2016) runs them,
with the correct noise or the authors' code's, and what a run measures of them: the seconds per
step (:func:`step_seconds`) and the smallest ESS (:func:`min_ess`).

Both samplers are :func:`sgrld.sgrld` with the per-datum potential ``Û/N``: SGLD with the identity
metric, pSGLD with the RMSprop metric (:func:`sgrld.metrics.rmsprop`, decay α = 0.99, λ = 1e-5,
the paper's defaults), the Γ term dropped as the paper's practical pSGLD does::

    θ ← θ − lr·G⁻¹∇Û(θ)/N + √(2·lr·T/N)·G^{-1/2}ξ,    G⁻¹ = diag(1/(λ + √V)).

**The noise of the authors' code** (``SGLD_RMSprop.m`` and ``SGLD.m``) has variance
``2·lr/(N²·(λ + √V))`` instead of ``2·lr/(N·(λ + √V))``: a factor N too small, which is exactly
the update above at temperature ``T = 1/N`` (:func:`temperature`). The ``"bug"`` rows run that
temperature; the library has no such option. The ``"none"`` rows run ``T = 0``, the optimisers
the paper compares with (SGLD → SGD, pSGLD → RMSprop), scored at their last iterate.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

import sgrld
from sgrld.numerics.pytrees import PyTree

DECAY, LAMBDA = 0.99, 1e-5
"""pSGLD's α and λ (the paper's defaults)."""
NOISES = ("correct", "bug", "none")
"""``correct``: T = 1; ``bug``: the authors' code's noise, T = 1/N; ``none``: T = 0, the
optimiser."""


class Method(NamedTuple):
    """SGLD or pSGLD: ``key`` on the command line, ``name`` in the table, ``optimiser`` the name
    of the same update without noise (Li et al.'s SGD and RMSprop rows)."""

    key: str
    name: str
    optimiser: str

    def label(self, noise: str) -> str:
        """The table's name of this method with ``noise``.

        Example:
          >>> METHODS[1].label("bug"), METHODS[1].label("none")
          ('pSGLD', 'RMSprop')
        """
        return self.optimiser if noise == "none" else self.name

    def metric(self) -> sgrld.metrics.Metric:
        """The identity (SGLD) or the RMSprop metric with α = 0.99, λ = 1e-5 (pSGLD)."""
        if self.key == "sgld":
            return sgrld.metrics.identity()
        return sgrld.metrics.rmsprop(decay=DECAY, eps=LAMBDA)


METHODS = (Method("sgld", "SGLD", "SGD"), Method("psgld", "pSGLD", "RMSprop"))


def temperature(noise: str, num_data: int) -> float:
    """The temperature that gives a run's noise: 1 (``"correct"``), 1/N (``"bug"``) or 0
    (``"none"``).

    The noise term of :func:`sgrld.sgrld` is ``√(2·lr·T/N)·G^{-1/2}ξ``; at ``T = 1/N`` it is
    ``√(2·lr)/N·G^{-1/2}ξ``, the ``sqrt(2*lr./pcder).*randn/opts.N`` of Li et al.'s code, whose
    drift ``lr·G⁻¹·ḡ`` is ours. Such a chain targets p(θ|D)^N: nearly an optimiser. At ``T = 0``
    it is one: SGD (identity metric) or RMSprop (pSGLD's metric) on the MAP potential.

    Example:
      >>> temperature("correct", 690), temperature("bug", 4), temperature("none", 4)
      (1.0, 0.25, 0.0)
    """
    temperatures = {"correct": 1.0, "bug": 1.0 / num_data, "none": 0.0}
    if noise not in temperatures:
        raise ValueError(f"noise must be one of {NOISES}, got {noise!r}")
    return temperatures[noise]


def sampler(
    method: Method, potential: Callable, learning_rate: Any, noise: str, num_data: int
) -> sgrld.Sampler:
    """SGLD or pSGLD on ``potential`` (``Û/N`` of N = ``num_data`` data; Γ dropped, the prior
    inside the metric's statistic, as the authors' code), with the noise of ``noise``.

    Example:
      >>> t = sgrld.samples.targets.standard_normal()
      >>> s = sampler(METHODS[1], t.potential, 0.1, "bug", 1)
      >>> key = jax.random.key(0)
      >>> s.step(key, s.init(t.init_params), t.batch_fn(key))[1].learning_rate.item()
      0.1
    """
    return sgrld.sgrld(
        potential,
        method.metric(),
        learning_rate=learning_rate,
        num_data=num_data,
        temperature=temperature(noise, num_data),
        adapt_until=None,  # the paper's setting: the metric adapts throughout
    )


def step_seconds(
    key: jax.Array, sampler: sgrld.Sampler, params: PyTree, batch_fn: Callable, steps: int
) -> float:
    """Wall seconds per step of one chain: ``steps`` steps in one jitted ``lax.scan``, the fastest
    of three timed calls after the first (which compiles), so that a loaded machine's pauses
    count less.

    Example:
      >>> t = sgrld.samples.targets.standard_normal()
      >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
      >>> 0 < step_seconds(jax.random.key(0), s, t.init_params, t.batch_fn, 100) < 0.01
      True
    """

    @jax.jit
    def chain(key, state):
        def body(state, k):
            batch_key, step_key = jax.random.split(k)
            return sampler.step(step_key, state, batch_fn(batch_key))[0], None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    state = sampler.init(params)
    jax.block_until_ready(chain(key, state))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(chain(key, state))
        times.append(time.perf_counter() - start)
    return min(times) / steps


def min_ess(draws: np.ndarray) -> float:
    """The smallest bulk ESS over the columns of ``draws`` ``[chains, draws, dims]`` (ArviZ's
    rank-normalised split ESS, as :func:`sgrld.samples.diagnostics.convergence`).

    Example:
      >>> x = np.random.default_rng(0).normal(size=(2, 400, 3))
      >>> 600 < min_ess(x) < 1000
      True
    """
    import arviz_base
    import arviz_stats

    ess = arviz_stats.ess(arviz_base.dict_to_dataset({"theta": draws}), method="bulk")
    return float(ess["theta"].min())
