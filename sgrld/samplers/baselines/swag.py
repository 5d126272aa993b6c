"""SWAG (Maddox et al. 2019): a Gaussian fitted to the SGD iterates, with a diagonal plus low-rank
covariance, sampled for the ensemble.

SGD (:func:`sgrld.samplers.baselines.sgd`'s step, with or without weight decay) runs for
``train_steps`` steps. From step ``swa_start`` on, every ``collect_every``-th iterate θ_i (i = 1..n)
is folded into the first two moments and the last K deviations::

    θ̄ = (1/n) Σ_i θ_i,    \\overline{θ²} = (1/n) Σ_i θ_i²,    Σ_diag = max(\\overline{θ²} − θ̄²,
    0), D = [θ_i − θ̄_i]  for the last K collections (θ̄_i: the mean after collecting θ_i).

After ``train_steps`` every step is an independent draw (the chain's ``params``) from
``N(θ̄, ½Σ_diag + DDᵀ/(2(K−1)))``::

    θ = θ̄ + (1/√2)·Σ_diag^{1/2} z₁ + (1/√(2(K−1)))·D z₂,    z₁ ~ N(0, I_d), z₂ ~ N(0, I_K),

the covariance ``½(Σ_diag + Σ_lowrank)`` of their Eq. (1)–(3) (the scale ½ of their experiments).
With ``burn_in = train_steps`` and ``thin = 1`` the runner's ensemble is S = (steps after
``train_steps``) draws, scored like a sampler's samples. The moments are kept per leaf (D as a
``[K, *leaf.shape]`` buffer, written as a ring), z₂ is shared by all leaves.

K must be at most the number of collections, ``⌊(train_steps − swa_start)/collect_every⌋``: a
larger rank is refused when the sampler is built (D would hold columns never written).

Reference: W. J. Maddox, P. Izmailov, T. Garipov, D. P. Vetrov, A. G. Wilson, "A Simple Baseline
for Bayesian Uncertainty in Deep Learning", NeurIPS 2019, Sec. 3–4, Algorithm 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.noise import normal_like
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.baselines.sgd import Descent, Loss, descend, descent, init_state
from sgrld.samplers.contract import Sampler
from sgrld.samplers.info import step_info


class SWAGMoments(NamedTuple):
    """What SWAG collects from the SGD iterates.

    Attributes:
      count: int32 number of iterates collected, n.
      mean: θ̄ (shaped like the parameters).
      sq_mean: the mean of θ².
      deviations: D, per leaf ``[K, *leaf.shape]``; row ``i mod K`` holds the i-th collection's
        ``θ_i − θ̄_i``.
    """

    count: jax.Array
    mean: PyTree
    sq_mean: PyTree
    deviations: PyTree


class SWAGState(NamedTuple):
    """State of a SWAG chain.

    Attributes:
      step: int32 number of steps taken.
      params: the SGD iterate while training, then the latest draw.
      opt_state: optax's state.
      moments: the :class:`SWAGMoments`.
    """

    step: jax.Array
    params: PyTree
    opt_state: Any
    moments: SWAGMoments


class _Options(NamedTuple):
    descent: Descent
    train_steps: int
    swa_start: int
    collect_every: int
    rank: int


def collections(train_steps: int, swa_start: int, collect_every: int) -> int:
    """The number of iterates collected: steps ``s`` in ``[swa_start, train_steps)`` with
    ``(s + 1 − swa_start) % collect_every == 0``.

    Example:
      >>> collections(train_steps=100, swa_start=50, collect_every=10)
      5
    """
    return max(train_steps - swa_start, 0) // collect_every


def swag(
    loss_fn: Loss,
    learning_rate: float | Callable,
    *,
    train_steps: int,
    swa_start: int,
    collect_every: int = 1,
    rank: int = 20,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> Sampler:
    """SWAG: SGD for ``train_steps`` steps collecting the moments, then independent draws
    ``θ = θ̄ + Σ_diag^{1/2} z₁/√2 + D z₂/√(2(K−1))`` (module docstring).

    Args:
      loss_fn: ``(params, batch) -> scalar``, e.g. a :func:`sgrld.potential`.
      learning_rate: SGD's ``lr`` (a float > 0 or a schedule; Maddox et al. hold it constant
        from ``swa_start``).
      train_steps: SGD steps; every later step is a draw.
      swa_start: the first step whose iterate may be collected (≥ 0).
      collect_every: collect every this many steps (Maddox et al.: once an epoch).
      rank: K, the columns of D (≥ 2, at most the number of collections).
      momentum: SGD's μ ∈ [0, 1).
      weight_decay: SGD's wd ≥ 0 ("SWAG wd" of Franzese et al.; with a prior in the loss, that
        is weight decay already).

    Returns:
      A :class:`~sgrld.Sampler` with :class:`SWAGState` and :class:`~sgrld.StepInfo`.

    Raises:
      ValueError: for a rank below 2 or above the number of collected iterates, or bad steps.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = lambda w, b: 0.5 * jnp.sum((w - b) ** 2)
      >>> s = swag(u, 0.1, train_steps=60, swa_start=20, collect_every=2, rank=5)
      >>> batches = lambda key: jax.random.normal(key, (3,))
      >>> out = sgrld.sample(jax.random.key(0), s, jnp.zeros(3), batches,
      ...                    num_samples=10, burn_in=60)
      >>> out.params.shape
      (10, 3)
      >>> swag(u, 0.1, train_steps=60, swa_start=20, collect_every=2, rank=30)
      Traceback (most recent call last):
      ...
      ValueError: swag: rank 30 is above the number of collected iterates, 20 ...
    """
    for name, value, low in (
        ("train_steps", train_steps, 1),
        ("swa_start", swa_start, 0),
        ("collect_every", collect_every, 1),
        ("rank", rank, 2),
    ):
        if isinstance(value, bool) or int(value) != value or value < low:
            raise ValueError(f"swag: {name} must be an integer >= {low}, got {value!r}")
    collected = collections(train_steps, swa_start, collect_every)
    if rank > collected:
        raise ValueError(
            f"swag: rank {rank} is above the number of collected iterates, {collected} (steps "
            f"{swa_start} to {train_steps} every {collect_every}); lower rank or collect more "
            "(earlier swa_start, more train_steps, smaller collect_every)"
        )
    d = descent(loss_fn, learning_rate, momentum=momentum, weight_decay=weight_decay)
    options = _Options(d, int(train_steps), int(swa_start), int(collect_every), int(rank))
    return Sampler(partial(_init, options), partial(_step, options))


def _init(o: _Options, params: PyTree) -> SWAGState:
    params, opt_state = init_state(o.descent, params)
    zeros = jax.tree.map(jnp.zeros_like, params)
    deviations = jax.tree.map(lambda x: jnp.zeros((o.rank, *x.shape), x.dtype), params)
    moments = SWAGMoments(jnp.zeros((), jnp.int32), zeros, zeros, deviations)
    return SWAGState(jnp.zeros((), jnp.int32), params, opt_state, moments)


def collect(moments: SWAGMoments, params: PyTree) -> SWAGMoments:
    """Fold one iterate into the moments: running means, and ``θ − θ̄`` into row ``n mod K``.

    Example:
      >>> import jax.numpy as jnp
      >>> m = SWAGMoments(jnp.int32(0), jnp.zeros(2), jnp.zeros(2), jnp.zeros((2, 2)))
      >>> for theta in ([1.0, 0.0], [3.0, 2.0]):
      ...     m = collect(m, jnp.array(theta))
      >>> m.mean.tolist(), m.sq_mean.tolist(), m.deviations.tolist()
      ([2.0, 1.0], [5.0, 2.0], [[0.0, 0.0], [1.0, 1.0]])
    """
    n = moments.count.astype(jnp.float32)
    average = lambda m, x: ((n * m + x) / (n + 1)).astype(m.dtype)  # a leaf keeps its dtype
    mean = jax.tree.map(average, moments.mean, params)
    sq_mean = jax.tree.map(lambda m, x: average(m, x**2), moments.sq_mean, params)
    rank = jax.tree.leaves(moments.deviations)[0].shape[0]
    row = moments.count % rank
    deviations = jax.tree.map(
        lambda dev, x, m: dev.at[row].set((x - m).astype(dev.dtype)),
        moments.deviations,
        params,
        mean,
    )
    return SWAGMoments(moments.count + 1, mean, sq_mean, deviations)


def draw(key: jax.Array, moments: SWAGMoments) -> PyTree:
    """One draw ``θ̄ + Σ_diag^{1/2} z₁/√2 + D z₂/√(2(K−1))`` from the fitted Gaussian.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> m = SWAGMoments(jnp.int32(2), jnp.ones(2), jnp.ones(2), jnp.zeros((2, 2)))
      >>> draw(jax.random.key(0), m).tolist()     # no spread: the mean
      [1.0, 1.0]
    """
    diag_key, rank_key = jax.random.split(key)
    rank = jax.tree.leaves(moments.deviations)[0].shape[0]
    z1 = normal_like(diag_key, moments.mean)
    z2 = jax.random.normal(rank_key, (rank,), jnp.float32)
    low = 1.0 / math.sqrt(2.0 * (rank - 1))

    def leaf(mean, sq_mean, dev, z):
        sd = jnp.sqrt(jnp.maximum(sq_mean - mean**2, 0.0))
        spread = sd * z / math.sqrt(2.0) + low * jnp.tensordot(z2.astype(dev.dtype), dev, 1)
        return (mean + spread).astype(mean.dtype)

    return jax.tree.map(leaf, moments.mean, moments.sq_mean, moments.deviations, z1)


def _step(o: _Options, key, state: SWAGState, batch):
    """SGD (and a collection when due) while training, then a draw; one gradient either way
    (after training, the loss at the last draw, for ``info`` only)."""
    loss_key, draw_key = jax.random.split(key)
    value, grads, fitted, opt_state = descend(
        o.descent, loss_key, state.params, state.opt_state, batch
    )
    s = state.step
    training = s < o.train_steps
    due = training & (s >= o.swa_start) & ((s + 1 - o.swa_start) % o.collect_every == 0)
    moments = jax.lax.cond(due, collect, lambda m, _: m, state.moments, fitted)
    params = jax.lax.cond(training, lambda m: fitted, lambda m: draw(draw_key, m), moments)
    lr = jnp.where(training, o.descent.schedule(s), 0.0)
    return SWAGState(s + 1, params, opt_state, moments), step_info(value, grads, lr, params)
