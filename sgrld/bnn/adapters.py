"""Models of other JAX libraries as ``(net_params, apply_fn)``, the two things sgrld needs.

A likelihood (:mod:`sgrld.bnn.likelihoods`) takes ``apply_fn(net_params, x) -> outputs`` on a
minibatch ``x [B, ...]``, and the sampler moves ``params = {"net": net_params, ...}``, a pytree of
arrays. A plain JAX function ``(params, x) -> logits`` is already such an ``apply_fn``; the
adapters below make one of a Flax NNX module (:func:`nnx`), an Equinox model (:func:`equinox`) and
a Haiku transform (:func:`haiku`). Each imports its library when called, so ``import sgrld``
needs none of them (``pip install sgrld[equinox]``, ``sgrld[haiku]``; NNX is part of Flax).

Every metric works on every adapter's parameters, and the Fisher metrics find the dense and
convolution layers of any of them in the traced log-likelihood
(:mod:`sgrld.numerics.jaxpr_taps`). QDOP's bias–weight pairs are proposed by name
(:func:`sgrld.numerics.tap_statistics.bias_pairs`: ``kernel``/``bias`` and ``w``/``b`` with the
output units last, Equinox's ``weight [out, in]`` with them first) and confirmed in the traced
log-likelihood (:func:`sgrld.numerics.tap_statistics.bias_units`); an unconfirmed pair keeps
DOP's rows, with a ``FallbackWarning``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax

from sgrld.numerics.pytrees import PyTree

ApplyFn = Callable[[PyTree, jax.Array], jax.Array]


def nnx(module: Any) -> tuple[PyTree, ApplyFn]:
    """A Flax NNX module as its parameters (a nested dict) and ``apply_fn``.

    ``nnx.split(module, nnx.Param, ...)`` separates the parameters from the rest of the module's
    state (kept as it is); ``apply_fn(net_params, x)`` merges them back (``nnx.merge``) and calls
    the module on ``x``, without changing ``module``.

    Args:
      module: an ``nnx.Module`` whose call takes a minibatch ``x``.

    Returns:
      ``(net_params, apply_fn)``; ``net_params`` is the parameters' pure dict
      (``{"Linear_0": {"kernel": ..., "bias": ...}}``-like, by attribute name).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx as fnnx
      >>> net, apply = nnx(fnnx.Linear(3, 2, rngs=fnnx.Rngs(0)))
      >>> sorted(net), apply(net, jnp.ones((5, 3))).shape
      (['bias', 'kernel'], (5, 2))
    """
    from flax import nnx as fnnx  # optional: Flax's NNX

    graphdef, state, rest = fnnx.split(module, fnnx.Param, ...)

    def apply_fn(net_params: PyTree, x: jax.Array) -> jax.Array:
        params = jax.tree.map(lambda v: v, state)  # a copy to fill: `state` stays as it is
        fnnx.replace_by_pure_dict(params, net_params)
        return fnnx.merge(graphdef, params, rest)(x)

    return fnnx.to_pure_dict(state), apply_fn


def equinox(model: Any) -> tuple[PyTree, ApplyFn]:
    """An Equinox model of one example as its arrays and ``apply_fn`` over a minibatch.

    ``eqx.partition(model, eqx.is_inexact_array)`` separates the floating-point arrays (the
    parameters) from the rest; ``apply_fn(net_params, x) = vmap(eqx.combine(net_params,
    rest))(x)``, since Equinox layers take one example.

    Args:
      model: an ``eqx.Module`` mapping one example to its outputs.

    Returns:
      ``(net_params, apply_fn)``; ``net_params`` is the model with its non-array fields ``None``.

    Example:
      >>> import jax, jax.numpy as jnp, equinox as eqx
      >>> net, apply = equinox(eqx.nn.Linear(3, 2, key=jax.random.key(0)))
      >>> net.weight.shape, apply(net, jnp.ones((5, 3))).shape
      ((2, 3), (5, 2))
    """
    import equinox as eqx  # optional: sgrld[equinox]

    params, static = eqx.partition(model, eqx.is_inexact_array)

    def apply_fn(net_params: PyTree, x: jax.Array) -> jax.Array:
        return jax.vmap(eqx.combine(net_params, static))(x)

    return params, apply_fn


def haiku(transformed: Any, key: jax.Array, x: jax.Array) -> tuple[PyTree, ApplyFn]:
    """A Haiku transform as its parameters, initialised on ``x``, and ``apply_fn``.

    ``transformed.init(key, x)`` gives Haiku's parameters ``{module: {"w": ..., "b": ...}}``,
    whose module names join their scopes with ``/`` (``mlp/~/linear_0``); ArviZ's ``DataTree``
    refuses ``/`` in a variable's name, so ``net_params`` names them with ``.`` instead
    (``mlp.linear_0``). ``apply_fn(net_params, x) = transformed.apply(params, None, x)`` with
    Haiku's names back: the network may not draw random numbers when applied (a sampler's step
    has no key for it).

    Args:
      transformed: ``hk.transform(forward)`` of a ``forward(x)`` on a minibatch.
      key: the initialisation's PRNG key.
      x: a minibatch of the inputs' shape (one example is enough).

    Returns:
      ``(net_params, apply_fn)``.

    Example:
      >>> import jax, jax.numpy as jnp, haiku as hk
      >>> t = hk.transform(lambda x: hk.nets.MLP([3, 2])(x))
      >>> net, apply = haiku(t, jax.random.key(0), jnp.ones((1, 3)))
      >>> jax.tree.map(jnp.shape, net)["mlp.linear_1"], apply(net, jnp.ones((5, 3))).shape
      ({'b': (2,), 'w': (3, 2)}, (5, 2))
    """
    params = transformed.init(key, x)
    names = {name.replace("/~/", ".").replace("/", "."): name for name in params}
    if len(names) != len(params):
        raise ValueError(f"Haiku's module names {sorted(params)} collide with '/' read as '.'")

    def apply_fn(net_params: PyTree, x: jax.Array) -> jax.Array:
        return transformed.apply({names[k]: v for k, v in net_params.items()}, None, x)

    return {new: params[old] for new, old in names.items()}, apply_fn
