"""Priors over Bayesian-neural-network parameters.

A prior is a :class:`Prior` ``(init, log_prob)``:

* ``init(net_params) -> prior_params`` builds the extra parameters that the prior samples jointly
  with the network (horseshoe scales), or ``{}`` when there are none;
* ``log_prob(net_params, prior_params) -> scalar`` is the exact log density (normalising constants
  included) of the whole pytree, summed over leaves.

The sampled pytree is ``params = {"net": net_params, "prior": prior_params}`` and
:func:`logprior_fn` turns a prior into the ``logprior_fn(params)`` that the samplers take.

Leaves are classified by rank, so any Flax module or hand-written parameter pytree works:

* a **weight** has ``ndim >= 2``: a Dense kernel ``(in, out)``, a convolution kernel
  ``(*spatial, in, out)`` (Flax layout, e.g. ``(kh, kw, in, out)``);
* a **bias** has ``ndim <= 1`` (Dense/conv biases, and any other vector or scalar leaf).

Weights are scaled by their fan-in, ``scale = weight_scale / sqrt(fan_in)``, as in BNNpriors
(Fortuin et al., 2021) and Yu et al. (2023). With ``conv_fan_in="full"`` (default) the fan-in is
``prod(shape[:-1])``, i.e. ``kh·kw·in`` for a convolution; ``conv_fan_in="channels"`` uses ``in``
only, which reproduces the authors' code (``bnn_priors`` ``Conv2dPrior``) and its known bug: the
prior variance of a k×k kernel is then k² times too large. For Dense kernels both are ``in``.

References:
    Yu, Hartmann, Williams, Klami. Scalable Stochastic Gradient Riemannian Langevin Dynamics in
    Non-Diagonal Metrics. TMLR 2023, Sec. 4.3-4.4 and App. B.
    Fortuin et al. Bayesian Neural Network Priors Revisited. ICLR 2022.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import stats

PyTree = Any
ConvFanIn = Literal["full", "channels"]

_INV_SOFTPLUS_ONE = math.log(math.expm1(1.0))  # softplus(_INV_SOFTPLUS_ONE) == 1


class Prior(NamedTuple):
    """A prior over network parameters and its own sampled hyper-parameters.

    Attributes:
        init: ``init(net_params) -> prior_params``, the initial sampled hyper-parameters
            (a pytree, ``{}`` if the prior has none).
        log_prob: ``log_prob(net_params, prior_params) -> scalar``, the exact joint log density.
    """

    init: Callable[[PyTree], PyTree]
    log_prob: Callable[[PyTree, PyTree], jax.Array]


class HorseshoeScales(NamedTuple):
    """Unconstrained scales of one tensor under :func:`horseshoe_per_weight`.

    Attributes:
        global_rho: scalar, the tensor's global scale is ``softplus(global_rho) * multiplier``.
        local_rho: same shape as the tensor, local scales ``softplus(local_rho)``.
    """

    global_rho: jax.Array
    local_rho: jax.Array


def logprior_fn(prior: Prior) -> Callable[[PyTree], jax.Array]:
    """Wrap a prior into the ``logprior_fn(params)`` the samplers take.

    ``log p(params) = prior.log_prob(params["net"], params["prior"])``.

    Args:
        prior: a :class:`Prior`.

    Returns:
        ``logprior_fn(params) -> scalar`` for ``params = {"net": ..., "prior": ...}``.

    Example:
        >>> import jax.numpy as jnp
        >>> lp = logprior_fn(gaussian(weight_scale=1.0))
        >>> round(float(lp({"net": {"kernel": jnp.zeros((1, 1))}, "prior": {}})), 4)
        -0.9189
    """
    return lambda params: prior.log_prob(params["net"], params["prior"])


# --------------------------------------------------------------------------------------------
# Shared leaf classification and scaling


def _is_weight(leaf: jax.Array) -> bool:
    return leaf.ndim >= 2


def _fan_in(shape: tuple[int, ...], conv_fan_in: ConvFanIn) -> int:
    """Fan-in of a weight: ``prod(shape[:-1])``, or ``shape[-2]`` for convs with "channels"."""
    if conv_fan_in == "channels":
        return shape[-2]
    return math.prod(shape[:-1])


def _leaf_scale(
    leaf: jax.Array, weight_scale: float, bias_scale: float, conv_fan_in: ConvFanIn
) -> float:
    """Static scale of a leaf: ``weight_scale/sqrt(fan_in)`` for weights, else ``bias_scale``."""
    if _is_weight(leaf):
        return weight_scale / math.sqrt(_fan_in(leaf.shape, conv_fan_in))
    return bias_scale


def _check_config(conv_fan_in: ConvFanIn, **positive: float) -> None:
    if conv_fan_in not in ("full", "channels"):
        raise ValueError(f"conv_fan_in must be 'full' or 'channels', got {conv_fan_in!r}")
    for name, value in positive.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def _sum(terms: list[jax.Array]) -> jax.Array:
    return jnp.asarray(sum(terms, 0.0))


def _no_prior_params(net_params: PyTree) -> dict:
    del net_params
    return {}


def _factorised(
    logpdf: Callable[[jax.Array, float], jax.Array],
    weight_scale: float,
    bias_scale: float,
    conv_fan_in: ConvFanIn,
) -> Prior:
    """Prior with i.i.d. elements ``logpdf(x, scale)``, scale from :func:`_leaf_scale`."""

    def log_prob(net_params: PyTree, prior_params: PyTree) -> jax.Array:
        del prior_params
        return _sum(
            [
                jnp.sum(logpdf(leaf, _leaf_scale(leaf, weight_scale, bias_scale, conv_fan_in)))
                for leaf in jax.tree.leaves(net_params)
            ]
        )

    return Prior(init=_no_prior_params, log_prob=log_prob)


# --------------------------------------------------------------------------------------------
# Factorised priors


def gaussian(
    weight_scale: float = 1.41, bias_scale: float = 1.0, conv_fan_in: ConvFanIn = "full"
) -> Prior:
    """Independent Gaussian prior with fan-in scaled weights.

    ``w ~ N(0, (weight_scale/sqrt(fan_in))²)`` for weights and ``b ~ N(0, bias_scale²)`` for
    biases. This is the Gaussian prior of Yu et al. (2023), Sec. 4.3.

    Args:
        weight_scale: weight standard deviation times ``sqrt(fan_in)``.
        bias_scale: bias standard deviation.
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).

    Returns:
        A :class:`Prior` without sampled hyper-parameters (``init`` gives ``{}``).

    Example:
        >>> import jax.numpy as jnp
        >>> prior = gaussian(weight_scale=2.0)
        >>> net = {"kernel": jnp.zeros((4, 3)), "bias": jnp.zeros(3)}
        >>> round(float(prior.log_prob(net, prior.init(net))), 4)  # 15 · log N(0; 0, 1)
        -13.7841
    """
    _check_config(conv_fan_in, weight_scale=weight_scale, bias_scale=bias_scale)
    return _factorised(
        lambda x, s: stats.norm.logpdf(x, 0.0, s), weight_scale, bias_scale, conv_fan_in
    )


def laplace(
    weight_scale: float = 1.41, bias_scale: float = 1.0, conv_fan_in: ConvFanIn = "full"
) -> Prior:
    """Independent Laplace prior with fan-in scaled weights.

    ``p(w) = exp(-|w|/b) / (2b)`` with ``b = weight_scale/sqrt(fan_in)`` for weights and
    ``b = bias_scale`` for biases. ``b`` is the Laplace scale (standard deviation ``sqrt(2)·b``),
    as in BNNpriors.

    Args:
        weight_scale: weight Laplace scale times ``sqrt(fan_in)``.
        bias_scale: bias Laplace scale.
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).

    Returns:
        A :class:`Prior` without sampled hyper-parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> prior = laplace(bias_scale=0.5)
        >>> round(float(prior.log_prob({"bias": jnp.zeros(2)}, {})), 4)  # 2·(-log(2·0.5))
        0.0
    """
    _check_config(conv_fan_in, weight_scale=weight_scale, bias_scale=bias_scale)
    return _factorised(
        lambda x, s: stats.laplace.logpdf(x, 0.0, s), weight_scale, bias_scale, conv_fan_in
    )


def student_t(
    df: float = 3.0,
    weight_scale: float = 1.41,
    bias_scale: float = 1.0,
    conv_fan_in: ConvFanIn = "full",
) -> Prior:
    """Independent Student-t prior with fan-in scaled weights.

    ``w/s ~ t(df)`` with ``s = weight_scale/sqrt(fan_in)`` for weights and ``s = bias_scale``
    for biases, as in BNNpriors (Fortuin et al., 2022).

    Args:
        df: degrees of freedom.
        weight_scale: weight t-scale times ``sqrt(fan_in)``.
        bias_scale: bias t-scale.
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).

    Returns:
        A :class:`Prior` without sampled hyper-parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> prior = student_t(df=1.0)  # Cauchy: log p(0) = -log(pi)
        >>> round(float(prior.log_prob({"bias": jnp.zeros(())}, {})), 4)
        -1.1447
    """
    _check_config(conv_fan_in, df=df, weight_scale=weight_scale, bias_scale=bias_scale)
    return _factorised(
        lambda x, s: stats.t.logpdf(x, df, 0.0, s), weight_scale, bias_scale, conv_fan_in
    )


# --------------------------------------------------------------------------------------------
# Horseshoe priors (sampled scales)


def _half_cauchy_logpdf(x: jax.Array, scale: float) -> jax.Array:
    """``log HalfCauchy(x; 0, scale) = log(2/(pi·scale)) - log(1 + (x/scale)²)`` for x >= 0."""
    return math.log(2.0 / (math.pi * scale)) - jnp.log1p(jnp.square(x / scale))


def _softplus_scale_logpdf(
    rho: jax.Array, multiplier: float, hyperscale: float, include_jacobian: bool
) -> tuple[jax.Array, jax.Array]:
    """Scale ``sigma = softplus(rho)·multiplier`` and the log density of its half-Cauchy prior.

    With ``include_jacobian`` the density is the one on ``rho``:
    ``log HalfCauchy(sigma; 0, hyperscale) + log sigmoid(rho) + log multiplier``; without it,
    the density on ``sigma`` evaluated at ``sigma(rho)`` (BNNpriors), which is improper in rho.
    Returns ``(sigma, elementwise log density)``.
    """
    sigma = jax.nn.softplus(rho) * multiplier
    logp = _half_cauchy_logpdf(sigma, hyperscale)
    if include_jacobian:
        logp = logp + jax.nn.log_sigmoid(rho) + math.log(multiplier)
    return sigma, logp


def _pair_leaves(net_params: PyTree, prior_params: PyTree) -> list[tuple[jax.Array, Any]]:
    """Pair each network leaf with the subtree of ``prior_params`` at the same position."""
    try:
        prior_leaves = jax.tree.structure(net_params).flatten_up_to(prior_params)
    except (ValueError, TypeError) as err:
        raise ValueError(
            "prior_params must mirror the structure of net_params; build them with "
            f"prior.init(net_params). {err}"
        ) from err
    return list(zip(jax.tree.leaves(net_params), prior_leaves, strict=True))


def horseshoe(
    weight_scale: float = 1.41,
    hyperscale: float = 1.0,
    include_jacobian: bool = True,
    on_biases: bool = True,
    bias_scale: float = 1.0,
    conv_fan_in: ConvFanIn = "full",
) -> Prior:
    """Layer-wise horseshoe prior of Yu et al. (2023): one half-Cauchy scale per tensor.

    For each tensor with a horseshoe, one unconstrained scalar ``rho`` is sampled jointly with
    the weights::

        sigma = softplus(rho) · m,   w_i | sigma ~ N(0, sigma²),   sigma ~ HalfCauchy(0, hyperscale)

    with multiplier ``m = weight_scale/sqrt(fan_in)`` for weights and ``m = bias_scale`` for
    biases. As in the authors' code (BNNpriors ``Horseshoe``), the half-Cauchy is evaluated at
    ``sigma`` *including* the multiplier, and ``rho`` starts at ``inv_softplus(1)`` so that
    ``sigma = m`` initially. This is a global shrinkage per tensor, not the textbook horseshoe
    (see :func:`horseshoe_per_weight`).

    Because the sampler moves ``rho``, the density must be the one on ``rho``: with
    ``include_jacobian=True`` the change of variables term ``log|dsigma/drho| =
    log sigmoid(rho) + log m`` is added. ``include_jacobian=False`` reproduces the authors' code,
    which omits it; the implied density on ``rho`` is then improper (flat as ``rho -> -inf``).

    Yu et al. put the horseshoe on both weights and biases of the MLP (``on_biases=True``,
    bias multiplier 1). With ``on_biases=False`` biases get ``N(0, bias_scale²)`` and their entry
    in ``prior_params`` is ``None`` (an empty pytree node).

    Args:
        weight_scale: weight multiplier times ``sqrt(fan_in)``.
        hyperscale: scale of the half-Cauchy on ``sigma``.
        include_jacobian: add the softplus Jacobian (correct density on ``rho``).
        on_biases: horseshoe on biases too; otherwise biases are Gaussian.
        bias_scale: bias multiplier (horseshoe) or standard deviation (Gaussian).
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).

    Returns:
        A :class:`Prior` whose ``prior_params`` mirror ``net_params`` with a scalar ``rho`` per
        tensor (``None`` for Gaussian biases).

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> prior = horseshoe()
        >>> net = {"kernel": jnp.zeros((4, 3)), "bias": jnp.zeros(3)}
        >>> rho = prior.init(net)
        >>> round(float(jax.nn.softplus(rho["kernel"]) * 1.41 / 2), 3)  # sigma starts at m
        0.705
        >>> bool(jnp.isfinite(prior.log_prob(net, rho)))
        True
    """
    _check_config(
        conv_fan_in, weight_scale=weight_scale, hyperscale=hyperscale, bias_scale=bias_scale
    )

    def has_scale(leaf: jax.Array) -> bool:
        return on_biases or _is_weight(leaf)

    def init(net_params: PyTree) -> PyTree:
        return jax.tree.map(
            lambda w: jnp.asarray(_INV_SOFTPLUS_ONE, w.dtype) if has_scale(w) else None,
            net_params,
        )

    def log_prob(net_params: PyTree, prior_params: PyTree) -> jax.Array:
        terms = []
        for w, rho in _pair_leaves(net_params, prior_params):
            m = _leaf_scale(w, weight_scale, bias_scale, conv_fan_in)
            if rho is None:
                terms.append(jnp.sum(stats.norm.logpdf(w, 0.0, m)))
                continue
            sigma, logp_sigma = _softplus_scale_logpdf(rho, m, hyperscale, include_jacobian)
            terms.append(jnp.sum(stats.norm.logpdf(w, 0.0, sigma)) + logp_sigma)
        return _sum(terms)

    return Prior(init=init, log_prob=log_prob)


def horseshoe_per_weight(
    weight_scale: float = 1.41,
    hyperscale: float = 1.0,
    local_scale: float = 1.0,
    include_jacobian: bool = True,
    on_biases: bool = True,
    bias_scale: float = 1.0,
    conv_fan_in: ConvFanIn = "full",
) -> Prior:
    """Textbook horseshoe (Carvalho et al., 2009): local scale per weight, global per tensor.

    For each tensor with a horseshoe::

        tau = softplus(rho_g) · m,          tau ~ HalfCauchy(0, hyperscale)
        lambda_i = softplus(rho_i),          lambda_i ~ HalfCauchy(0, local_scale)
        w_i | tau, lambda_i ~ N(0, (tau · lambda_i)²)

    with ``m`` the multiplier of :func:`horseshoe` (``weight_scale/sqrt(fan_in)`` or
    ``bias_scale``), the half-Cauchy on ``tau`` evaluated including ``m``, and all ``rho`` starting
    at ``inv_softplus(1)``. ``include_jacobian`` adds ``log sigmoid(rho_g) + log m`` and
    ``log sigmoid(rho_i)`` for every local scale, as in :func:`horseshoe`.

    Args:
        weight_scale: global multiplier times ``sqrt(fan_in)`` for weights.
        hyperscale: scale of the half-Cauchy on the global scale ``tau``.
        local_scale: scale of the half-Cauchy on the local scales ``lambda_i``.
        include_jacobian: add the softplus Jacobians (correct density on ``rho``).
        on_biases: horseshoe on biases too; otherwise biases are ``N(0, bias_scale²)``.
        bias_scale: bias global multiplier (horseshoe) or standard deviation (Gaussian).
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).

    Returns:
        A :class:`Prior` whose ``prior_params`` mirror ``net_params`` with a
        :class:`HorseshoeScales` per tensor (``None`` for Gaussian biases).

    Example:
        >>> import jax.numpy as jnp
        >>> prior = horseshoe_per_weight()
        >>> scales = prior.init({"kernel": jnp.zeros((4, 3))})
        >>> scales["kernel"].local_rho.shape, scales["kernel"].global_rho.shape
        ((4, 3), ())
    """
    _check_config(
        conv_fan_in,
        weight_scale=weight_scale,
        hyperscale=hyperscale,
        local_scale=local_scale,
        bias_scale=bias_scale,
    )

    def init(net_params: PyTree) -> PyTree:
        def leaf_init(w: jax.Array) -> HorseshoeScales | None:
            if not (on_biases or _is_weight(w)):
                return None
            return HorseshoeScales(
                global_rho=jnp.asarray(_INV_SOFTPLUS_ONE, w.dtype),
                local_rho=jnp.full(w.shape, _INV_SOFTPLUS_ONE, w.dtype),
            )

        return jax.tree.map(leaf_init, net_params)

    def log_prob(net_params: PyTree, prior_params: PyTree) -> jax.Array:
        terms = []
        for w, scales in _pair_leaves(net_params, prior_params):
            m = _leaf_scale(w, weight_scale, bias_scale, conv_fan_in)
            if scales is None:
                terms.append(jnp.sum(stats.norm.logpdf(w, 0.0, m)))
                continue
            tau, logp_tau = _softplus_scale_logpdf(
                scales.global_rho, m, hyperscale, include_jacobian
            )
            lam, logp_lam = _softplus_scale_logpdf(
                scales.local_rho, 1.0, local_scale, include_jacobian
            )
            terms.append(
                jnp.sum(stats.norm.logpdf(w, 0.0, tau * lam)) + logp_tau + jnp.sum(logp_lam)
            )
        return _sum(terms)

    return Prior(init=init, log_prob=log_prob)


# --------------------------------------------------------------------------------------------
# Correlated prior for convolution kernels


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
        A :class:`Prior` without sampled hyper-parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> prior = conv_correlated(weight_scale=1.0)
        >>> net = {"conv": jnp.zeros((3, 3, 2, 4)), "dense": jnp.zeros((8, 2))}
        >>> bool(jnp.isfinite(prior.log_prob(net, prior.init(net))))
        True
    """
    _check_config(
        conv_fan_in, weight_scale=weight_scale, lengthscale=lengthscale, bias_scale=bias_scale
    )

    def conv_logpdf(w: jax.Array, scale: float) -> jax.Array:
        spatial, num_filters = w.shape[:-2], w.shape[-2] * w.shape[-1]
        dim = math.prod(spatial)
        chol, log_det_chol = exponential_kernel_cholesky(spatial, float(lengthscale))
        z = jax.scipy.linalg.solve_triangular(
            jnp.asarray(chol, w.dtype), w.reshape(dim, num_filters) / scale, lower=True
        )
        log_norm = log_det_chol + dim * math.log(scale) + 0.5 * dim * math.log(2.0 * math.pi)
        return -0.5 * jnp.sum(jnp.square(z)) - num_filters * log_norm

    def log_prob(net_params: PyTree, prior_params: PyTree) -> jax.Array:
        del prior_params
        terms = []
        for w in jax.tree.leaves(net_params):
            scale = _leaf_scale(w, weight_scale, bias_scale, conv_fan_in)
            if w.ndim >= 3:
                terms.append(conv_logpdf(w, scale))
            else:
                terms.append(jnp.sum(stats.norm.logpdf(w, 0.0, scale)))
        return _sum(terms)

    return Prior(init=_no_prior_params, log_prob=log_prob)
