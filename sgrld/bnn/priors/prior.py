"""The :class:`Prior` interface, and the leaf classification and fan-in scaling every prior uses."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Literal, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy import stats

from sgrld.numerics.pytrees import PyTree

ConvFanIn = Literal["full", "channels"]

INV_SOFTPLUS_ONE = math.log(math.expm1(1.0))  # softplus(INV_SOFTPLUS_ONE) == 1


class Prior(NamedTuple):
    """A prior over network parameters and its own sampled hyper-parameters.

    Attributes:
        init: ``init(net_params) -> prior_params``, the initial sampled hyper-parameters
            (a pytree, ``{}`` if the prior has none).
        log_prob: ``log_prob(net_params, prior_params) -> scalar``, the exact joint log density.
    """

    init: Callable[[PyTree], PyTree]
    log_prob: Callable[[PyTree, PyTree], jax.Array]


def logprior_fn(prior: Prior) -> Callable[[PyTree], jax.Array]:
    """Wrap a prior into the ``logprior_fn(params)`` the samplers take.

    ``log p(params) = prior.log_prob(params["net"], params["prior"])``.

    Args:
        prior: a :class:`Prior`.

    Returns:
        ``logprior_fn(params) -> scalar`` for ``params = {"net": ..., "prior": ...}``.

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.bnn.priors import gaussian
        >>> lp = logprior_fn(gaussian(weight_scale=1.0))
        >>> round(float(lp({"net": {"kernel": jnp.zeros((1, 1))}, "prior": {}})), 4)
        -0.9189
    """
    return lambda params: prior.log_prob(params["net"], params["prior"])


def is_weight(leaf: jax.Array) -> bool:
    """Whether a leaf is a weight (``ndim >= 2``) rather than a bias."""
    return leaf.ndim >= 2


def fan_in(shape: tuple[int, ...], conv_fan_in: ConvFanIn) -> int:
    """Fan-in of a weight: ``prod(shape[:-1])``, or ``shape[-2]`` for convs with "channels"."""
    if conv_fan_in == "channels":
        return shape[-2]
    return math.prod(shape[:-1])


class Scaling(NamedTuple):
    """The static per-leaf scale of a prior: fan-in scaled for weights, constant for biases.

    Attributes:
        weight_scale: scale of a weight times ``sqrt(fan_in)``.
        bias_scale: scale of a bias.
        conv_fan_in: ``"full"`` (``kh·kw·in``) or ``"channels"`` (``in``, the authors' code).
    """

    weight_scale: float
    bias_scale: float
    conv_fan_in: ConvFanIn

    def of(self, leaf: jax.Array) -> float:
        """``weight_scale/sqrt(fan_in)`` for a weight, else ``bias_scale``.

        Example:
            >>> import jax.numpy as jnp
            >>> scaling = Scaling(weight_scale=2.0, bias_scale=0.5, conv_fan_in="full")
            >>> scaling.of(jnp.zeros((4, 3))), scaling.of(jnp.zeros(3))
            (1.0, 0.5)
        """
        if is_weight(leaf):
            return self.weight_scale / math.sqrt(fan_in(leaf.shape, self.conv_fan_in))
        return self.bias_scale


def check_config(conv_fan_in: ConvFanIn, **positive: float) -> None:
    """Raise ``ValueError`` for an unknown ``conv_fan_in`` or a keyword that is not positive."""
    if conv_fan_in not in ("full", "channels"):
        raise ValueError(f"conv_fan_in must be 'full' or 'channels', got {conv_fan_in!r}")
    for name, value in positive.items():
        if not value > 0:
            raise ValueError(f"{name} must be positive, got {value}")


def sum_terms(terms: list[jax.Array]) -> jax.Array:
    """The sum of per-leaf log densities, as an array (0.0 for no leaves)."""
    return jnp.asarray(sum(terms, 0.0))


def gaussian_leaf(w: jax.Array, scale: float | jax.Array) -> jax.Array:
    """``sum log N(w; 0, scale²)`` over the entries of a leaf."""
    return jnp.sum(stats.norm.logpdf(w, 0.0, scale))


def no_prior_params(net_params: PyTree) -> dict:
    """``init`` of a prior without sampled hyper-parameters: ``{}``."""
    del net_params
    return {}


def leafwise_log_prob(
    leaf_log_prob: Callable[[jax.Array, float], jax.Array],
    scaling: Scaling,
    net_params: PyTree,
    prior_params: PyTree,
) -> jax.Array:
    """``sum_l leaf_log_prob(w_l, scaling.of(w_l))`` over the leaves; ``prior_params`` unused."""
    del prior_params
    return sum_terms(
        [leaf_log_prob(leaf, scaling.of(leaf)) for leaf in jax.tree.leaves(net_params)]
    )


def leafwise_prior(
    leaf_log_prob: Callable[[jax.Array, float], jax.Array],
    weight_scale: float,
    bias_scale: float,
    conv_fan_in: ConvFanIn,
) -> Prior:
    """The :class:`Prior` without sampled hyper-parameters whose log density is
    :func:`leafwise_log_prob`, each leaf's scale from :class:`Scaling` of these arguments."""
    log_prob = functools.partial(
        leafwise_log_prob, leaf_log_prob, Scaling(weight_scale, bias_scale, conv_fan_in)
    )
    return Prior(init=no_prior_params, log_prob=log_prob)
