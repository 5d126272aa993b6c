# ruff: noqa: F722  (jaxtyping shape strings such as "n C" are not Python expressions)
"""The normalised input-space curvature C(x) of Srinivas et al. (2022), by the power method."""

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, PRNGKeyArray


def _unit(v: Array) -> Array:
    """v / ||v||, and 0 for v = 0 (a zero Hessian then gives curvature 0, not NaN)."""
    norm = jnp.sqrt(jnp.sum(v**2))
    return v / jnp.where(norm > 0, norm, 1)


def _point_curvature(
    grad_fn: Callable[[Array, Any], Array], num_iterations: int, x_i: Array, y_i: Any, u_i: Array
) -> Array:
    """C at one point: ``|u^T H u| / (||grad|| + 1e-6)`` after the power method from ``u_i``."""
    grad, hvp = jax.linearize(lambda z: grad_fn(z, y_i), x_i)
    u = jax.lax.fori_loop(0, num_iterations, lambda _, u: _unit(hvp(u)), _unit(u_i))
    rayleigh = jnp.vdot(u, hvp(u))
    return jnp.abs(rayleigh) / (jnp.sqrt(jnp.sum(grad**2)) + 1e-6)


def curvature(
    key: PRNGKeyArray,
    loss_fn: Callable[[Array, Any], Array],
    x: Float[ArrayLike, "n ..."],
    y: ArrayLike,
    num_iterations: int = 20,
) -> Float[Array, " n"]:
    """Normalised input-space curvature of the loss at every point (Srinivas et al., 2022).

    .. math:: C(x_i) = \\frac{\\lvert \\sigma_{\\max}(\\nabla^2_x \\ell(x_i, y_i)) \\rvert}
              {\\lVert \\nabla_x \\ell(x_i, y_i) \\rVert + 10^{-6}}

    :math:`\\sigma_{\\max}` comes from ``num_iterations`` steps of the power method
    ``u <- H u / ||H u||`` on Hessian-vector products in input space (forward-over-reverse:
    ``jax.linearize`` of ``jax.grad``, so the gradient pass is traced once per point), started
    from a unit ``u`` drawn from ``key``; the value is the Rayleigh quotient ``u^T H u`` of the
    final unit ``u``. The power method finds the eigenvalue of largest modulus; it does not
    converge when two eigenvalues of opposite sign have equal modulus.

    Yu et al. (``exp_utils.smoothness_test_exact``, adapted from ``kylematoba/lcnn``)
    differentiate the batch potential (mean NLL plus -log p(theta)/N, which is constant in x)
    and divide ``u`` by ``||Hu|| + 1e-6``. Here the loss is the per-point NLL and ``u`` is
    normalised exactly; the two ratios agree up to the 1e-6 terms (the 1/B factor cancels).
    Yu et al. (2023, Sec. 4.1) report the mean of C over the first 1000 test points, averaged
    over the posterior samples.

    Memory grows with n (the linearisation of every point is kept through the loop): call it
    on chunks of points (Yu et al. use batches of 100), under ``jax.jit`` with the parameters
    as an argument so that it compiles once per model, e.g.
    ``jax.jit(lambda params, key, x, y: curvature(key, partial(nll, params), x, y))``.

    Args:
        key: PRNG key for the random starting vectors (drawn for all points at once).
        loss_fn: ``loss_fn(x_single, y_single) -> scalar``, the per-example NLL with the
            parameters closed over (e.g. ``lambda x, y: nll(params, x, y)``); it must be
            twice differentiable in ``x`` (evaluate BatchNorm with running statistics).
        x: inputs with a leading point axis; each point may have any shape.
        y: targets with the same leading axis (any pytree of arrays).
        num_iterations: number of power-method steps.

    Returns:
        C at each of the n points.

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import curvature
        >>> loss_fn = lambda x, y: 0.5 * jnp.sum(jnp.array([1.0, 3.0]) * (x - y) ** 2)
        >>> x, y = jnp.array([[1.0, 0.0]]), jnp.zeros((1, 2))
        >>> c = curvature(jax.random.key(0), loss_fn, x, y)  # H = diag(1, 3), grad = (1, 0)
        >>> print(f"{float(c[0]):.4f}")
        3.0000
    """
    x = jnp.asarray(x)
    one_point = functools.partial(_point_curvature, jax.grad(loss_fn), num_iterations)
    starts = jax.random.normal(key, x.shape, x.dtype)
    return jax.vmap(one_point)(x, y, starts)
