"""Factorised priors: i.i.d. Gaussian, Laplace or Student-t elements with fan-in scaled weights."""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.scipy import stats

from sgrld.bnn.priors.prior import ConvFanIn, Prior, check_config, leafwise_prior


def _summed(logpdf: Callable[[jax.Array, float], jax.Array], x: jax.Array, scale: float):
    return jnp.sum(logpdf(x, scale))


def _factorised(
    logpdf: Callable[[jax.Array, float], jax.Array],
    weight_scale: float,
    bias_scale: float,
    conv_fan_in: ConvFanIn,
) -> Prior:
    """The :func:`~sgrld.bnn.priors.prior.leafwise_prior` of i.i.d. ``logpdf(x, scale)``."""
    leaf_log_prob = functools.partial(_summed, logpdf)
    return leafwise_prior(leaf_log_prob, weight_scale, bias_scale, conv_fan_in)


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
    check_config(conv_fan_in, weight_scale=weight_scale, bias_scale=bias_scale)
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
        conv_fan_in: how the fan-in of a convolution is counted, as for :func:`gaussian`.

    Returns:
        A :class:`Prior` of i.i.d. Laplace elements, with no sampled hyper-parameters.

    Example:
        >>> import jax.numpy as jnp
        >>> prior = laplace(bias_scale=0.5)
        >>> round(float(prior.log_prob({"bias": jnp.zeros(2)}, {})), 4)  # 2·(-log(2·0.5))
        0.0
    """
    check_config(conv_fan_in, weight_scale=weight_scale, bias_scale=bias_scale)
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
        conv_fan_in: the fan-in convention of :func:`gaussian` (``"full"`` or ``"channels"``).

    Returns:
        A :class:`Prior` of i.i.d. Student-t elements (``init`` gives ``{}``).

    Example:
        >>> import jax.numpy as jnp
        >>> prior = student_t(df=1.0)  # Cauchy: log p(0) = -log(pi)
        >>> round(float(prior.log_prob({"bias": jnp.zeros(())}, {})), 4)
        -1.1447
    """
    check_config(conv_fan_in, df=df, weight_scale=weight_scale, bias_scale=bias_scale)
    return _factorised(
        lambda x, s: stats.t.logpdf(x, df, 0.0, s), weight_scale, bias_scale, conv_fan_in
    )
