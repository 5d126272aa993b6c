"""Test distributions with exact gradients and known answers.

Each :class:`Target` has a potential ``U(θ) = −log p(θ)`` in the sampler's form
``potential(params, batch)`` with ``num_data = 1`` (so ``learning_rate`` is the step size ``h``).
Stochastic gradients are emulated as Yu et al. (2023, Sec. 4.2) do: the *batch* is a draw
``ε ~ N(0, grad_noise² I)`` shaped like the parameters and the potential is ``U(θ) + ⟨ε, θ⟩``,
so its gradient is ``∇U(θ) + ε`` and its Hessian is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from sgrld.numerics.pytrees import PyTree


class Target(NamedTuple):
    """A target distribution with known answers.

    Attributes:
      name: short name.
      potential: ``(params, noise) -> U(θ) + ⟨noise, θ⟩``.
      batch_fn: ``key -> noise``, the gradient noise of one step (zeros if ``grad_noise == 0``).
      init_params: a starting point.
      log_prob: ``params -> log p(θ)`` (normalised).
      sample: ``(key, n) -> n`` exact draws, stacked on a leading axis.
      mean: the exact mean (flattened, numpy), or None if not known in closed form.
      cov: the exact covariance of the flattened parameters (numpy), or None.
    """

    name: str
    potential: Callable[[PyTree, PyTree], jax.Array]
    batch_fn: Callable[[jax.Array], PyTree]
    init_params: PyTree
    log_prob: Callable[[PyTree], jax.Array]
    sample: Callable[[jax.Array, int], PyTree]
    mean: np.ndarray | None
    cov: np.ndarray | None


def _noisy(log_prob, init_params, grad_noise: float):
    grad_noise = float(grad_noise)
    if not grad_noise >= 0:
        raise ValueError(f"grad_noise must be >= 0, got {grad_noise}")

    def potential(params, noise):
        linear = sum(
            jnp.vdot(jax.lax.stop_gradient(e), x)
            for e, x in zip(jax.tree.leaves(noise), jax.tree.leaves(params), strict=True)
        )
        return -log_prob(params) + linear

    def batch_fn(key):
        return jax.tree.map(
            lambda x: grad_noise * jax.random.normal(key, jnp.shape(x), jnp.result_type(x)),
            init_params,
        )

    return potential, batch_fn


def gaussian(
    mean, cov, shape: tuple[int, ...] | None = None, grad_noise: float = 0.0, name: str = "gaussian"
) -> Target:
    """Multivariate normal ``N(mean, cov)`` over the flattened parameter array of ``shape``.

    Args:
      mean: ``[D]`` mean.
      cov: ``[D, D]`` symmetric positive-definite covariance.
      shape: the parameter's shape (default ``(D,)``; a matrix shape exercises Shampoo's factors),
        or a dict of shapes for a pytree of parameters (flattened in ``ravel_pytree`` order).
      grad_noise: standard deviation of the additive gradient noise.
      name: the target's name.

    Returns:
      The target.

    Example:
      >>> import jax, sgrld
      >>> t = sgrld.samples.targets.gaussian([0.0, 1.0], [[1.0, 0.5], [0.5, 2.0]])
      >>> jax.grad(t.potential)(t.init_params, t.batch_fn(jax.random.key(0))).tolist()
      [0.0, 0.0]
    """
    mean = np.asarray(mean, np.float64)
    cov = np.asarray(cov, np.float64)
    dim = mean.size
    if mean.ndim != 1 or cov.shape != (dim, dim):
        raise ValueError(f"mean must be [D] and cov [D, D]; got {mean.shape} and {cov.shape}")
    if not np.allclose(cov, cov.T) or np.linalg.eigvalsh(cov).min() <= 0:
        raise ValueError("cov must be symmetric positive definite")
    shape = (dim,) if shape is None else shape
    template = (
        {k: jnp.zeros(v, jnp.float32) for k, v in shape.items()}
        if isinstance(shape, dict)
        else jnp.zeros(tuple(shape), jnp.float32)
    )
    flat_template, unravel = ravel_pytree(template)
    if flat_template.size != dim:
        raise ValueError(f"shape {shape} does not hold {dim} numbers")
    precision = jnp.asarray(np.linalg.inv(cov), jnp.float32)
    mu = jnp.asarray(mean, jnp.float32)
    chol = jnp.asarray(np.linalg.cholesky(cov), jnp.float32)
    log_norm = float(-0.5 * dim * np.log(2 * np.pi) - 0.5 * np.linalg.slogdet(cov)[1])

    def log_prob(params):
        d = ravel_pytree(params)[0] - mu
        return -0.5 * d @ precision @ d + log_norm

    def sample(key, n):
        z = jax.random.normal(key, (n, dim))
        return jax.vmap(unravel)(mu + z @ chol.T)

    init = unravel(mu)
    potential, batch_fn = _noisy(log_prob, init, grad_noise)
    return Target(name, potential, batch_fn, init, log_prob, sample, mean, cov)


def standard_normal(grad_noise: float = 0.0) -> Target:
    """The one-dimensional ``N(0, 1)`` of Rensmeyer & Niggemann, on a scalar parameter."""
    t = gaussian([0.0], [[1.0]], shape=(), grad_noise=grad_noise, name="standard_normal")
    return t._replace(init_params=jnp.ones((), jnp.float32))


def anisotropic_gaussian(
    dim: int = 10, condition: float = 100.0, shape=None, grad_noise: float = 0.0
) -> Target:
    """Zero-mean Gaussian with independent coordinates whose variances span ``condition``.

    Standard deviations are geometric from ``condition^{-1/4}`` to ``condition^{1/4}``.
    """
    std = np.geomspace(condition**-0.25, condition**0.25, dim)
    return gaussian(np.zeros(dim), np.diag(std**2), shape, grad_noise, "anisotropic_gaussian")


def correlated_gaussian(
    dim: int = 2, rho: float = 0.9, condition: float = 10.0, shape=None, grad_noise: float = 0.0
) -> Target:
    """Zero-mean Gaussian ``Σ = S R S`` with ``R_ij = rho^{|i−j|}`` and geometric scales ``S``."""
    if not -1 < rho < 1:
        raise ValueError(f"rho must lie in (-1, 1), got {rho}")
    idx = np.arange(dim)
    corr = rho ** np.abs(idx[:, None] - idx[None, :])
    std = np.geomspace(condition**-0.25, condition**0.25, dim)
    cov = std[:, None] * corr * std[None, :]
    return gaussian(np.zeros(dim), cov, shape, grad_noise, "correlated_gaussian")


def funnel(
    dim: int = 2, mean: float = 2.0, sigma2: float = 80.0, grad_noise: float = 0.0
) -> Target:
    """Neal's funnel with a softplus variance, as in Yu et al. (2023, Sec. 4.2).

    ``θ = (x_1, …, x_{D−1}, v)`` with ``v ~ N(0, sigma2)`` and ``x_i | v ~ N(mean, softplus(v))``
    (softplus(v) is the *variance*, as in the authors' code, ``sigma2 = 80``). The hard marginal is
    that of ``v``, exactly ``N(0, sigma2)``; the starting point is ``(1, …, 1)`` as in the paper.
    """
    if dim < 2:
        raise ValueError(f"the funnel needs dim >= 2, got {dim}")

    def log_prob(params):
        x, v = params[:-1], params[-1]
        var = jax.nn.softplus(v)
        lp_x = -0.5 * jnp.sum((x - mean) ** 2) / var - 0.5 * (dim - 1) * jnp.log(2 * jnp.pi * var)
        return lp_x - 0.5 * v**2 / sigma2 - 0.5 * jnp.log(2 * jnp.pi * sigma2)

    def sample(key, n):
        kv, kx = jax.random.split(key)
        v = jnp.sqrt(sigma2) * jax.random.normal(kv, (n,))
        x = mean + jnp.sqrt(jax.nn.softplus(v))[:, None] * jax.random.normal(kx, (n, dim - 1))
        return jnp.concatenate([x, v[:, None]], axis=1)

    init = jnp.ones((dim,), jnp.float32)
    potential, batch_fn = _noisy(log_prob, init, grad_noise)
    return Target("funnel", potential, batch_fn, init, log_prob, sample, None, None)
