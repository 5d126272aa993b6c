"""Spatially correlated Gaussian prior for convolution kernels (Fortuin et al., 2022)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.bnn.priors.prior import ConvFanIn, Prior, check_config, gaussian_leaf, leafwise_prior


@functools.lru_cache(maxsize=64)
def exponential_kernel_cholesky(
    spatial_shape: tuple[int, ...], lengthscale: float
) -> tuple[np.ndarray, float]:
    """Cholesky factor of the exponential kernel on a filter's spatial grid (numpy, cached).

    ``K[p, p'] = exp(-||p - p'|| / lengthscale)`` over the grid positions ``p`` of a filter of
    shape ``spatial_shape`` (e.g. ``(kh, kw)``), in row-major order. This is the Matérn-1/2
    kernel that BNNpriors calls "SquaredExponentialNormal". Computed once per
    ``(spatial_shape, lengthscale)`` from static shapes, so it is safe inside ``jit``.

    Args:
        spatial_shape: filter shape without the channel axes.
        lengthscale: kernel length scale, in grid units.

    Returns:
        ``(L, log_det_L)``: lower-triangular ``L`` with ``L Lᵀ = K`` (float64, read-only) and
        ``sum(log diag L)``.

    Example:
        >>> L, _ = exponential_kernel_cholesky((1, 2), 1.0)
        >>> (L @ L.T).round(4).tolist()  # exp(-1) off the diagonal
        [[1.0, 0.3679], [0.3679, 1.0]]
    """
    grid = np.indices(spatial_shape).reshape(len(spatial_shape), -1).T.astype(np.float64)
    dist = np.linalg.norm(grid[:, None, :] - grid[None, :, :], axis=-1)
    chol = np.linalg.cholesky(np.exp(-dist / lengthscale))
    chol.setflags(write=False)
    return chol, float(np.sum(np.log(np.diag(chol))))


def _correlated_logpdf(lengthscale: float, w: jax.Array, scale: float) -> jax.Array:
    """``sum_{c,d} log N(w_{:, c, d}; 0, scale²·K)`` for a kernel ``(*spatial, in, out)``."""
    spatial, num_filters = w.shape[:-2], w.shape[-2] * w.shape[-1]
    dim = math.prod(spatial)
    chol, log_det_chol = exponential_kernel_cholesky(spatial, float(lengthscale))
    z = jax.scipy.linalg.solve_triangular(
        jnp.asarray(chol, w.dtype), w.reshape(dim, num_filters) / scale, lower=True
    )
    log_norm = log_det_chol + dim * math.log(scale) + 0.5 * dim * math.log(2.0 * math.pi)
    return -0.5 * jnp.sum(jnp.square(z)) - num_filters * log_norm


def _leaf_logpdf(lengthscale: float, w: jax.Array, scale: float) -> jax.Array:
    """The correlated density for a convolution kernel (``ndim >= 3``), else i.i.d. Gaussian."""
    if w.ndim >= 3:
        return _correlated_logpdf(lengthscale, w, scale)
    return gaussian_leaf(w, scale)


def conv_correlated(
    weight_scale: float = 1.41,
    lengthscale: float = 1.0,
    bias_scale: float = 1.0,
    conv_fan_in: ConvFanIn = "full",
) -> Prior:
    """Spatially correlated Gaussian prior for convolution kernels (Fortuin et al., 2022).

    For a kernel of shape ``(*spatial, in, out)`` (Flax layout, e.g. ``(kh, kw, in, out)``), each
    of the ``in·out`` filters ``w_{:, c, d}`` is independently

        ``w_{:, c, d} ~ N(0, s² K)``,  ``K[p, p'] = exp(-||p - p'|| / lengthscale)``,

    over its ``d = prod(spatial)`` grid positions, with ``s = weight_scale/sqrt(fan_in)``.
    ``K`` is an exponential kernel (the authors' code calls it "squared exponential"); its
    Cholesky factor comes from :func:`exponential_kernel_cholesky`, computed once per shape.
    A 1x1 kernel reduces to ``N(0, s²)``. Dense kernels (``ndim == 2``) get the fan-in scaled
    Gaussian prior and biases ``N(0, bias_scale²)``, as in the authors' correlated ResNet.

    Args:
        weight_scale: marginal weight standard deviation times ``sqrt(fan_in)``.
        lengthscale: kernel length scale, in grid units.
        bias_scale: bias standard deviation.
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).

    Returns:
        A :class:`Prior` with no sampled hyper-parameters: ``init`` gives ``{}``.

    Example:
        >>> import jax.numpy as jnp
        >>> prior = conv_correlated(weight_scale=1.0)
        >>> net = {"conv": jnp.zeros((3, 3, 2, 4)), "dense": jnp.zeros((8, 2))}
        >>> bool(jnp.isfinite(prior.log_prob(net, prior.init(net))))
        True
    """
    check_config(
        conv_fan_in, weight_scale=weight_scale, lengthscale=lengthscale, bias_scale=bias_scale
    )
    leaf_log_prob = functools.partial(_leaf_logpdf, lengthscale)
    return leafwise_prior(leaf_log_prob, weight_scale, bias_scale, conv_fan_in)
