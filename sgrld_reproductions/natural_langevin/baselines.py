"""The dropout baseline of Marceau-Caron & Ollivier (2017) Table 1: an MLP with dropout on its
hidden layers (:class:`sgrld.bnn.dropout.DropoutMLP`), trained by plain SGD on the mean negative
log-likelihood (no prior, no noise), scored as one network (not MC dropout).

Each epoch is one jitted ``jax.lax.scan`` over shuffled minibatches (the last incomplete one
dropped, as the runner does); at test time dropout is off, and since it is *inverted* dropout
(kept units scaled by ``1/(1 − rate)`` in training) the test network is the plain
:class:`sgrld.bnn.MLP` with the same parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from sgrld.bnn.dropout import DropoutMLP
from sgrld.numerics.pytrees import PyTree


def nll_loss(model: nn.Module) -> Callable[[PyTree, tuple, jax.Array], jax.Array]:
    """``(net, (x, y), key) -> −(1/B) Σᵢ log softmax(f(xᵢ))[yᵢ]``, dropout drawn from ``key``."""

    def loss(net, batch, key):
        x, y = batch
        logits = model.apply({"params": net}, x, train=True, rngs={"dropout": key})
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=1))

    return loss


def sgd_epoch(loss_fn: Callable, learning_rate: Callable, batch_size: int) -> Callable:
    """``(net, data, key, start) -> net``: one epoch of ``θ ← θ − η_t ∇loss(θ; batch_t, key_t)``.

    The examples are permuted with ``key``; step ``t = start + i`` (global) has the step size
    ``learning_rate(t)`` and the key ``fold_in(key, t)``.
    """

    def epoch(net, data, key, start):
        x, y = data
        steps = x.shape[0] // batch_size
        order = jax.random.permutation(key, x.shape[0])[: steps * batch_size]

        def step(net, inputs):
            idx, t = inputs
            grads = jax.grad(loss_fn)(net, (x[idx], y[idx]), jax.random.fold_in(key, t))
            lr = learning_rate(t)
            return jax.tree.map(lambda w, g: w - lr * g, net, grads), None

        inputs = (order.reshape(steps, batch_size), start + jnp.arange(steps, dtype=jnp.int32))
        return jax.lax.scan(step, net, inputs)[0]

    return jax.jit(epoch)


def train_dropout(
    key: jax.Array,
    net: PyTree,
    train: tuple[Any, Any],
    *,
    learning_rate: Callable[[jax.Array], jax.Array],
    epochs: int,
    batch_size: int,
    widths: Sequence[int],
    rate: float = 0.5,
) -> tuple[PyTree, bool]:
    """Train :class:`DropoutMLP` by SGD from ``net`` for ``epochs`` passes over ``train``.

    Args:
      key: PRNG key of the shuffling and the dropout masks (epoch ``e`` uses ``fold_in(key, e)``).
      net: the initial parameters (those of :class:`sgrld.bnn.MLP` with ``widths``).
      train: inputs ``[n, d]`` and integer labels ``[n]``.
      learning_rate: ``step -> η`` (the global step from 0).
      epochs: passes over the training set.
      batch_size: minibatch size.
      widths: the hidden widths.
      rate: the dropout probability of a hidden unit.

    Returns:
      ``(net, finite)``: the trained parameters and whether they are all finite (training stops
      after the first epoch that produced a NaN/inf).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from sgrld.bnn import MLP, init_params
      >>> x = jax.random.normal(jax.random.key(0), (64, 2)); y = (x[:, 0] > 0).astype(jnp.int32)
      >>> net = init_params(MLP((16,), 2), jax.random.key(1), (1, 2))
      >>> _, finite = train_dropout(jax.random.key(2), net, (x, y), learning_rate=lambda t: 0.1,
      ...     epochs=2, batch_size=16, widths=(16,))
      >>> finite
      True
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"rate must lie in [0, 1), got {rate}")
    model = DropoutMLP(features=tuple(widths), num_outputs=_outputs(net), rate=rate)
    epoch = sgd_epoch(nll_loss(model), learning_rate, batch_size)
    data = tuple(jnp.asarray(a) for a in train)
    steps = data[0].shape[0] // batch_size
    if steps < 1:
        raise ValueError(f"batch_size {batch_size} is larger than the training set")
    for e in range(epochs):
        net = epoch(net, data, jax.random.fold_in(key, e), jnp.int32(e * steps))
        if not _finite(net):
            return net, False
    return net, True


def _outputs(net: PyTree) -> int:
    """The output width: that of the last Dense layer."""
    return net[f"Dense_{len(net) - 1}"]["bias"].shape[0]


@jax.jit
def _finite(net: PyTree) -> jax.Array:
    return jnp.all(jnp.array([jnp.all(jnp.isfinite(w)) for w in jax.tree.leaves(net)]))
