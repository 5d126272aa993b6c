"""Horseshoe priors: half-Cauchy scales sampled with the weights, per tensor or per weight."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.bnn.priors.prior import (
    INV_SOFTPLUS_ONE,
    ConvFanIn,
    Prior,
    PyTree,
    Scaling,
    check_config,
    gaussian_leaf,
    is_weight,
    sum_terms,
)


class HorseshoeScales(NamedTuple):
    """Unconstrained scales of one tensor under :func:`horseshoe_per_weight`.

    Attributes:
        global_rho: scalar, the tensor's global scale is ``softplus(global_rho) * multiplier``.
        local_rho: same shape as the tensor, local scales ``softplus(local_rho)``.
    """

    global_rho: jax.Array
    local_rho: jax.Array


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


def _scaled_log_prob(
    leaf_log_prob: Callable[[jax.Array, Any, float], jax.Array],
    scaling: Scaling,
    net_params: PyTree,
    prior_params: PyTree,
) -> jax.Array:
    """Sum over leaves of ``leaf_log_prob(w, scales, m)``, or ``log N(w; 0, m²)`` where the
    leaf has no sampled scales (``None``); ``m`` is the leaf's multiplier."""
    terms = []
    for w, scales in _pair_leaves(net_params, prior_params):
        m = scaling.of(w)
        if scales is None:
            terms.append(gaussian_leaf(w, m))
            continue
        terms.append(leaf_log_prob(w, scales, m))
    return sum_terms(terms)


def _tensor_init(on_biases: bool, net_params: PyTree) -> PyTree:
    """One ``rho = inv_softplus(1)`` per tensor with a horseshoe, ``None`` for the others."""
    return jax.tree.map(
        lambda w: jnp.asarray(INV_SOFTPLUS_ONE, w.dtype) if on_biases or is_weight(w) else None,
        net_params,
    )


def _tensor_log_prob(
    hyperscale: float, include_jacobian: bool, w: jax.Array, rho: jax.Array, m: float
) -> jax.Array:
    """``log N(w; 0, sigma²) + log p(rho)`` for one tensor, ``sigma = softplus(rho)·m``."""
    sigma, logp_sigma = _softplus_scale_logpdf(rho, m, hyperscale, include_jacobian)
    return gaussian_leaf(w, sigma) + logp_sigma


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
    check_config(
        conv_fan_in, weight_scale=weight_scale, hyperscale=hyperscale, bias_scale=bias_scale
    )
    scaling = Scaling(weight_scale, bias_scale, conv_fan_in)
    leaf_log_prob = functools.partial(_tensor_log_prob, hyperscale, include_jacobian)
    log_prob = functools.partial(_scaled_log_prob, leaf_log_prob, scaling)
    return Prior(init=functools.partial(_tensor_init, on_biases), log_prob=log_prob)


def _per_weight_init(on_biases: bool, net_params: PyTree) -> PyTree:
    """:class:`HorseshoeScales` at ``inv_softplus(1)`` per tensor with a horseshoe, else None."""

    def leaf_init(w: jax.Array) -> HorseshoeScales | None:
        if not (on_biases or is_weight(w)):
            return None
        return HorseshoeScales(
            global_rho=jnp.asarray(INV_SOFTPLUS_ONE, w.dtype),
            local_rho=jnp.full(w.shape, INV_SOFTPLUS_ONE, w.dtype),
        )

    return jax.tree.map(leaf_init, net_params)


def _per_weight_log_prob(
    hyperscale: float,
    local_scale: float,
    include_jacobian: bool,
    w: jax.Array,
    scales: HorseshoeScales,
    m: float,
) -> jax.Array:
    """``log N(w; 0, (tau·lambda)²) + log p(rho_g) + sum log p(rho_i)`` for one tensor."""
    tau, logp_tau = _softplus_scale_logpdf(scales.global_rho, m, hyperscale, include_jacobian)
    lam, logp_lam = _softplus_scale_logpdf(scales.local_rho, 1.0, local_scale, include_jacobian)
    return gaussian_leaf(w, tau * lam) + logp_tau + jnp.sum(logp_lam)


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
        conv_fan_in: the fan-in convention of :func:`horseshoe`.

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
    check_config(
        conv_fan_in,
        weight_scale=weight_scale,
        hyperscale=hyperscale,
        local_scale=local_scale,
        bias_scale=bias_scale,
    )
    scaling = Scaling(weight_scale, bias_scale, conv_fan_in)
    leaf_log_prob = functools.partial(
        _per_weight_log_prob, hyperscale, local_scale, include_jacobian
    )
    log_prob = functools.partial(_scaled_log_prob, leaf_log_prob, scaling)
    return Prior(init=functools.partial(_per_weight_init, on_biases), log_prob=log_prob)
