"""Kernel Stein discrepancy (KSD) with the inverse multiquadric (IMQ) kernel.

The KSD measures how far a sample ``x_1, …, x_n`` is from a density ``p`` known up to its
normalising constant, from the sample and the score ``s = ∇ log p`` at each point alone (no
draws from ``p``). With the Langevin Stein operator and a kernel ``k``, the Stein kernel is

    k₀(x, y) = s(x)·s(y) k(x, y) + s(x)·∇_y k(x, y) + s(y)·∇_x k(x, y) + tr ∇_x ∇_y k(x, y),

whose mean under ``p ⊗ p`` is 0, and the KSD is the square root of its V-statistic,
``KSD = √((1/n²) Σ_{i,j} k₀(x_i, x_j))``. For the IMQ kernel ``k(x, y) = (c² + ‖x − y‖²)^β``,
with ``r = x − y``, ``q = c² + ‖r‖²`` and ``d`` the dimension,

    k₀(x, y) = q^β s(x)·s(y) + 2β q^(β−1) (s(y) − s(x))·r − 2βd q^(β−1) − 4β(β−1) q^(β−2) ‖r‖².

With ``β ∈ (−1, 0)`` the KSD goes to 0 if and only if the sample converges weakly to ``p`` (for
distantly dissipative ``p``, e.g. Gaussians), which kernels with light tails (Gaussian, Matérn)
do not guarantee: the IMQ KSD also sees mass that is missing in, or added to, the tails. For an
i.i.d. sample from ``p`` it falls as ``O(n^{-1/2})``. It needs O(n²) kernel evaluations, computed
in blocks of rows (memory O(block_size · n)), so it is for low-dimensional targets and a few
thousand draws (:func:`ksd` thins evenly to ``max_draws``).

**A subset of the coordinates.** For a high-dimensional posterior the kernel can act on a subset
``S`` of the coordinates, with the *joint* score's components ``s_S = ∇_S log p(θ)``: the Stein
kernel above with ``x_S, s_S`` and ``d = |S|``. Its mean under ``p ⊗ p`` is still 0, because
``∇_S log p(θ) = ∇_S log p(θ_S | θ_{−S})`` and integrating by parts over ``θ_S`` for each fixed
``θ_{−S}`` gives ``E_p[s_S(θ)·f(θ_S) + ∇_S·f(θ_S)] = 0`` for every smooth ``f``. So the subset KSD
is a discrepancy that is 0 for exact draws and sees any error of ``q`` that the test functions of
``θ_S`` see (through ``s_S`` it also sees errors in how ``θ_S`` depends on the rest); it costs
the full gradient per draw but only ``|S|`` in the kernel sum.

References:
    Gorham & Mackey (2017), Measuring sample quality with kernels, ICML, Sec. 3 and Theorem 8
    (IMQ, β = −1/2, c = 1). Liu, Lee & Jordan (2016), A kernelized Stein discrepancy for
    goodness-of-fit tests, ICML, Eq. (4).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from sgrld.numerics.pytrees import PyTree


def imq_ksd(
    x: jax.Array, scores: jax.Array, c: float = 1.0, beta: float = -0.5, block_size: int = 512
) -> jax.Array:
    """The IMQ kernel Stein discrepancy of points ``x`` with scores ``∇ log p(x)``.

    ``KSD = √((1/n²) Σ_{i,j} k₀(x_i, x_j))`` with the IMQ Stein kernel ``k₀`` of the module
    docstring; rows are processed ``block_size`` at a time (``jax.lax.map``), each against all
    ``n`` points, so memory is O(block_size · n) whatever the dimension.

    Args:
        x: ``[n, d]`` points.
        scores: ``[n, d]``, ``∇ log p`` at each point.
        c: the kernel's scale (> 0).
        beta: the kernel's exponent, in (−1, 0) for the convergence guarantee.
        block_size: rows per block.

    Returns:
        The KSD, a scalar (float32 for float32 inputs).

    Example:
        >>> import jax
        >>> z = jax.random.normal(jax.random.key(0), (1000, 2))  # N(0, I): score −z
        >>> round(float(imq_ksd(z, -z)), 3), round(float(imq_ksd(z + 1.0, -(z + 1.0))), 3)
        (0.064, 1.028)
    """
    x, scores = jnp.asarray(x), jnp.asarray(scores)
    n, d = x.shape
    b = max(1, min(block_size, n))
    blocks = -(-n // b)
    pad = blocks * b - n
    dot = lambda a, bt: jnp.matmul(a, bt.T, precision=jax.lax.Precision.HIGHEST)
    sq_x = jnp.sum(x * x, axis=1)
    s_dot_x = jnp.sum(scores * x, axis=1)

    def block(args):
        xb, sb, wb = args
        r2 = jnp.maximum(jnp.sum(xb * xb, axis=1)[:, None] + sq_x[None, :] - 2 * dot(xb, x), 0.0)
        q = c**2 + r2
        # (s(y) − s(x))·(x − y), rows x = xb, columns y = x
        cross = dot(xb, scores) - s_dot_x[None, :] - jnp.sum(sb * xb, axis=1)[:, None] + dot(sb, x)
        k0 = (
            q**beta * dot(sb, scores)
            + 2 * beta * q ** (beta - 1) * (cross - d)
            - 4 * beta * (beta - 1) * q ** (beta - 2) * r2
        )
        return jnp.sum(wb[:, None] * k0)

    rows = lambda a: jnp.pad(a, [(0, pad)] + [(0, 0)] * (a.ndim - 1)).reshape(
        blocks, b, *a.shape[1:]
    )
    weights = rows(jnp.ones(n, x.dtype))
    total = jnp.sum(jax.lax.map(block, (rows(x), rows(scores), weights)))
    return jnp.sqrt(jnp.maximum(total, 0.0)) / n


def ksd(
    draws: PyTree,
    log_prob: Callable[[PyTree], jax.Array],
    max_draws: int | None = 4000,
    c: float = 1.0,
    beta: float = -0.5,
    block_size: int = 512,
    coordinates: int | None = None,
    seed: int = 0,
    score_batch: int = 16,
) -> float:
    """The IMQ KSD (:func:`imq_ksd`) of draws of a parameter pytree, the score by autodiff.

    Each draw is flattened with ``ravel_pytree`` and its score is ``∇ log_prob`` (``jax.grad``,
    mapped over the draws ``score_batch`` at a time, so a full-batch ``log_prob`` of a large
    model does not hold every draw's activations at once). Pooled chains are one sample: pass the
    valid draws of all chains stacked (:func:`sgrld.samples.diagnostics.pooled_draws`). With
    ``coordinates = K`` below the dimension, the kernel acts on ``K`` coordinates drawn without
    replacement (``numpy`` generator of ``seed``) with the joint score's components there (the
    subset KSD of the module docstring).

    Args:
        draws: the parameters, leaves ``[n, ...]``.
        log_prob: ``params -> log p(θ)`` of one draw, up to a constant (e.g. a
            :class:`sgrld.samples.targets.Target`'s ``log_prob``, or ``−N·potential(θ, full
            data)``).
        max_draws: above this many draws, ``max_draws`` evenly spaced ones are used (the cost is
            O(n²)); ``None`` keeps all.
        c: the kernel's scale.
        beta: the kernel's exponent.
        block_size: rows per block.
        coordinates: how many coordinates the kernel acts on (``None``: all).
        seed: the seed of the coordinates' choice.
        score_batch: draws whose score is computed at once.

    Returns:
        The KSD as a Python float.

    Raises:
        ValueError: if ``coordinates`` or ``score_batch`` is below 1.

    Example:
        >>> import jax, sgrld
        >>> t = sgrld.samples.targets.gaussian([0.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])
        >>> exact = t.sample(jax.random.key(0), 2000)
        >>> wide = 1.5 * exact  # over-dispersed
        >>> round(ksd(exact, t.log_prob), 3), round(ksd(wide, t.log_prob), 3)
        (0.044, 0.336)
        >>> round(ksd(wide, t.log_prob, coordinates=1), 3)  # one coordinate of the two
        0.317
    """
    for name, value in (("coordinates", coordinates), ("score_batch", score_batch)):
        if value is not None and (isinstance(value, bool) or int(value) != value or value < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    n = jax.tree.leaves(draws)[0].shape[0]
    if max_draws is not None and n > max_draws:
        pick = np.round(np.linspace(0, n - 1, max_draws)).astype(int)
        draws = jax.tree.map(lambda a: jnp.asarray(a)[pick], draws)
    flat = jax.vmap(lambda p: ravel_pytree(p)[0])
    x = flat(draws)
    scores = flat(jax.lax.map(jax.grad(log_prob), draws, batch_size=min(score_batch, n)))
    if coordinates is not None and coordinates < x.shape[1]:
        pick = np.sort(np.random.default_rng(seed).choice(x.shape[1], coordinates, replace=False))
        x, scores = x[:, pick], scores[:, pick]
    return float(imq_ksd(x, scores, c, beta, block_size))
