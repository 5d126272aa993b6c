"""MC dropout (Gal & Ghahramani 2016): an MLP trained by SGD with dropout, and T stochastic forward
passes at test time as the ensemble.

Training: :class:`DropoutMLP` (the layers and parameter names of :class:`sgrld.bnn.MLP`, with
*inverted* dropout: a unit is zeroed with probability p and the others are scaled by 1/(1 − p))
on a loss that draws its masks from the step's key (:func:`dropout_loss`), by the SGD step of
:func:`sgrld.samplers.baselines.sgd`.

Test time: a dropout pass multiplies the inputs of each Dense layer by ``m/(1 − p)``,
``m ~ Bernoulli(1 − p)``; that is the plain network with the rows of the layer's kernel scaled::

    (h ⊙ m/(1 − p)) W + b = h (diag(m/(1 − p)) W) + b.

So one pass with one mask per unit is a *network* (:func:`thin`), and the T passes are T
parameter draws that the runner scores like a sampler's samples, through the plain
:class:`sgrld.bnn.MLP`. :func:`mc_dropout` trains for ``train_steps`` steps, then makes every later
step a draw (with the runner: ``burn_in = train_steps``, ``thin = 1``). The draw's mask is shared by
the points scored (Keras draws one per point): the scores, averages over points of per-point
averages over passes, have the same expectation.

Reference: Y. Gal, Z. Ghahramani, "Dropout as a Bayesian Approximation: Representing Model
Uncertainty in Deep Learning", ICML 2016, Sec. 3 and 5 (UCI: dropout on the inputs and the hidden
layer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from sgrld.bnn.models import CNN, as_images, conv_stack, he_normal
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.baselines.sgd import Descent, descend, descent, init_state
from sgrld.samplers.contract import Sampler
from sgrld.samplers.info import step_info

ApplyFn = Callable[[PyTree, jax.Array], jax.Array]


class DropoutMLP(nn.Module):
    """:class:`sgrld.bnn.MLP` with dropout after every hidden layer (same parameter names), and on
    the inputs with ``drop_inputs``.

    ``h_0 = dropout(x)`` (or ``x``), ``h_l = dropout(relu(h_{l−1} W_l + b_l))``,
    ``out = h_L W_out + b_out``; dropout zeroes a unit with probability ``rate`` and scales the
    others by ``1/(1 − rate)`` when ``train``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from sgrld.bnn import MLP, init_params
      >>> net = init_params(MLP(features=(8,), num_outputs=3), jax.random.key(0), (1, 5))
      >>> m, x = DropoutMLP(features=(8,), num_outputs=3), jnp.ones((2, 5))
      >>> test = m.apply({"params": net}, x, train=False)
      >>> bool((test == MLP((8,), 3).apply({"params": net}, x)).all())
      True
    """

    features: Sequence[int] = (400, 400)
    num_outputs: int = 10
    rate: float = 0.5
    drop_inputs: bool = False

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        if self.drop_inputs:
            x = nn.Dropout(self.rate, deterministic=not train)(x)
        for width in self.features:
            x = nn.relu(nn.Dense(width, kernel_init=he_normal)(x))
            x = nn.Dropout(self.rate, deterministic=not train)(x)
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)


class DropoutCNN(CNN):
    """:class:`sgrld.bnn.CNN` with dropout on the inputs of every Dense layer (the flattened
    convolution features and each hidden layer's output); same parameter names, so
    :func:`thin` and :func:`mc_dropout` apply to its parameters as to an MLP's with
    ``drop_inputs=True`` (the convolutions are never dropped).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from sgrld.bnn import CNN, apply_fn, init_params
      >>> cnn = CNN(dense_features=(8,))
      >>> net = init_params(cnn, jax.random.key(0), (1, 28, 28, 1))
      >>> m, x = DropoutCNN(dense_features=(8,), rate=0.5), jnp.ones((2, 784))
      >>> test = m.apply({"params": net}, x, train=False)
      >>> bool((test == apply_fn(cnn)(net, x)).all())
      True
    """

    rate: float = 0.5

    @nn.compact
    def __call__(self, x: jax.Array, *, train: bool) -> jax.Array:
        x = conv_stack(self, as_images(x, self.image_shape, "DropoutCNN"))
        for width in self.dense_features:
            x = nn.Dropout(self.rate, deterministic=not train)(x)
            x = nn.relu(nn.Dense(width, kernel_init=he_normal)(x))
        x = nn.Dropout(self.rate, deterministic=not train)(x)
        return nn.Dense(self.num_outputs, kernel_init=he_normal)(x)


def dropout_loss(
    make_loss: Callable[[ApplyFn], Callable[[PyTree, PyTree], jax.Array]],
    model: DropoutMLP | DropoutCNN,
) -> Callable[[PyTree, PyTree, jax.Array], jax.Array]:
    """``(params, batch, key) -> loss`` with ``model``'s dropout masks drawn from ``key``, one per
    example and unit.

    Args:
      make_loss: ``apply -> loss(params, batch)``, e.g. ``lambda apply:
        sgrld.potential(sgrld.bnn.likelihoods.gaussian(apply), logprior, N)``.
      model: the :class:`DropoutMLP` or :class:`DropoutCNN`.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> from sgrld.bnn import MLP, init_params, likelihoods
      >>> model = DropoutMLP(features=(4,), num_outputs=1, rate=0.5)
      >>> net = init_params(MLP((4,), 1), jax.random.key(0), (1, 2))
      >>> loss = dropout_loss(lambda apply: sgrld.potential(
      ...     likelihoods.gaussian(apply, 1.0), None, num_data=8), model)
      >>> batch = (jnp.ones((8, 2)), jnp.zeros(8))
      >>> a, b = (float(loss({"net": net}, batch, jax.random.key(k))) for k in (1, 2))
      >>> a != b
      True
    """

    def loss(params, batch, key):
        apply = lambda net, x: model.apply({"params": net}, x, train=True, rngs={"dropout": key})
        return make_loss(apply)(params, batch)

    return loss


def _dense_layers(net: PyTree) -> list[str]:
    """The ``Dense_i`` layer names of an MLP's or a CNN's parameters, in order (ValueError for
    others)."""
    dense = [name for name in net if name.startswith("Dense_")]
    names = [f"Dense_{i}" for i in range(len(dense))]
    convs = [f"Conv_{i}" for i in range(len(net) - len(dense))]
    if not names or set(names) | set(convs) != set(net):
        raise ValueError(
            f"dropout: expected the parameters of sgrld.bnn.MLP (Dense_0, Dense_1, ...) or "
            f"sgrld.bnn.CNN (Conv_0, ..., Dense_0, ...), got {sorted(net)}"
        )
    return names


def thin(key: jax.Array, net: PyTree, rate: float, *, drop_inputs: bool = False) -> PyTree:
    """One test-time dropout pass as a network: the kernel rows of each Dense layer whose inputs
    are dropped (all but the first; the first too with ``drop_inputs``) scaled by ``m/(1 − rate)``,
    ``m ~ Bernoulli(1 − rate)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> net = {"Dense_0": {"kernel": jnp.ones((2, 3)), "bias": jnp.zeros(3)},
      ...        "Dense_1": {"kernel": jnp.ones((3, 1)), "bias": jnp.zeros(1)}}
      >>> out = thin(jax.random.key(0), net, 0.5)
      >>> sorted(set(out["Dense_1"]["kernel"].ravel().tolist())) in ([0.0, 2.0], [0.0], [2.0])
      True
      >>> bool((out["Dense_0"]["kernel"] == 1).all())
      True
    """
    names = _dense_layers(net)
    keys = jax.random.split(key, len(names))
    out = dict(net)
    for i, name in enumerate(names):
        if i == 0 and not drop_inputs:
            continue
        kernel = net[name]["kernel"]
        keep = jax.random.bernoulli(keys[i], 1.0 - rate, kernel.shape[:1])
        scale = jnp.where(keep, 1.0 / (1.0 - rate), 0.0).astype(kernel.dtype)
        out[name] = {**net[name], "kernel": kernel * scale[:, None]}
    return out


class MCDropoutState(NamedTuple):
    """State of an MC-dropout chain.

    Attributes:
      step: int32 number of steps taken.
      params: the SGD iterate while training, then the latest thinned network.
      trained: the SGD iterate (fixed after training).
      opt_state: optax's state.
    """

    step: jax.Array
    params: PyTree
    trained: PyTree
    opt_state: Any


class _Options(NamedTuple):
    descent: Descent
    train_steps: int
    rate: float
    drop_inputs: bool


def mc_dropout(
    loss_fn: Callable[[PyTree, PyTree, jax.Array], jax.Array],
    learning_rate: float | Callable,
    *,
    train_steps: int,
    rate: float,
    drop_inputs: bool = False,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> Sampler:
    """MC dropout: SGD on a dropout loss for ``train_steps`` steps, then every step a test-time
    dropout pass (:func:`thin` of the trained network) as the chain's ``params``.

    Args:
      loss_fn: ``(params, batch, key) -> scalar`` with the masks drawn from ``key``
        (:func:`dropout_loss`); ``params`` holds the MLP's parameters under ``"net"``.
      learning_rate: SGD's ``lr`` (a float > 0 or a schedule).
      train_steps: SGD steps; every later step is a draw.
      rate: the dropout probability p ∈ [0, 1) (the model's).
      drop_inputs: whether the inputs are dropped too (the model's).
      momentum: SGD's μ ∈ [0, 1).
      weight_decay: SGD's wd ≥ 0.

    Returns:
      A :class:`~sgrld.Sampler` with :class:`MCDropoutState` and :class:`~sgrld.StepInfo`.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> from sgrld.bnn import MLP, init_params, likelihoods
      >>> model = DropoutMLP(features=(8,), num_outputs=1, rate=0.1)
      >>> loss = dropout_loss(lambda apply: sgrld.potential(
      ...     likelihoods.gaussian(apply, 1.0), None, num_data=32), model)
      >>> s = mc_dropout(loss, 0.05, train_steps=20, rate=0.1)
      >>> x = jax.random.normal(jax.random.key(0), (32, 2))
      >>> params = {"net": init_params(MLP((8,), 1), jax.random.key(1), (1, 2))}
      >>> out = sgrld.sample(jax.random.key(2), s, params, lambda k: (x, x[:, 0]),
      ...                    num_samples=5, burn_in=20)
      >>> out.params["net"]["Dense_1"]["kernel"].shape
      (5, 8, 1)
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"mc_dropout: rate must lie in [0, 1), got {rate}")
    if isinstance(train_steps, bool) or int(train_steps) != train_steps or train_steps < 1:
        raise ValueError(f"mc_dropout: train_steps must be an integer >= 1, got {train_steps!r}")
    d = descent(
        loss_fn, learning_rate, momentum=momentum, weight_decay=weight_decay, takes_key=True
    )
    options = _Options(d, int(train_steps), float(rate), bool(drop_inputs))
    return Sampler(partial(_init, options), partial(_step, options))


def _init(o: _Options, params: PyTree) -> MCDropoutState:
    if not isinstance(params, dict) or "net" not in params:
        raise ValueError('mc_dropout: params must be a dict with the network under "net"')
    _dense_layers(params["net"])
    params, opt_state = init_state(o.descent, params)
    return MCDropoutState(jnp.zeros((), jnp.int32), params, params, opt_state)


def _step(o: _Options, key, state: MCDropoutState, batch):
    """SGD on the trained network while training, then a thinned copy of it; one gradient
    either way (after training, at the trained network, for ``info`` only)."""
    loss_key, draw_key = jax.random.split(key)
    value, grads, fitted, opt_state = descend(
        o.descent, loss_key, state.trained, state.opt_state, batch
    )
    training = state.step < o.train_steps
    trained = jax.tree.map(lambda a, b: jnp.where(training, a, b), fitted, state.trained)

    def draw(trained):
        return {**trained, "net": thin(draw_key, trained["net"], o.rate, drop_inputs=o.drop_inputs)}

    params = jax.lax.cond(training, lambda t: t, draw, trained)
    lr = jnp.where(training, o.descent.schedule(state.step), 0.0)
    info = step_info(value, grads, lr, params)
    return MCDropoutState(state.step + 1, params, trained, opt_state), info
