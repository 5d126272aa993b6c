"""Per-example log-likelihoods ``loglik_fn(params, batch) -> [batch]`` for BNNs.

The samplers build the per-datum potential ``U/N = mean NLL over the batch - log p(theta)/N`` from
``loglik_fn`` and a prior. A batch is a tuple ``(x, y)``; ``params`` is the whole sampled pytree,
of which a likelihood reads ``params["net"]`` (passed to ``apply_fn``) and, for regression with a
sampled noise level, ``params["likelihood"]``.

Each returned ``loglik_fn`` also has ``loglik_fn.sample(key, params, x) -> ỹ ~ p(ỹ|x, θ)``, the
model labels of the Fisher metrics (:func:`sgrld.metrics.fisher_diag` with ``labels="model"``).

``apply_fn(net_params, x) -> outputs`` may be any function (e.g. :func:`sgrld.bnn.models.apply_fn`
of a Flax module). Shapes are checked when the function is traced and mismatches raise a
``ValueError``, so broadcasting never silently turns ``[B]`` against ``[B, 1]`` into ``[B, B]``.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jax.scipy import stats

from sgrld.numerics.pytrees import PyTree

Batch = tuple[jax.Array, jax.Array]
ApplyFn = Callable[[PyTree, jax.Array], jax.Array]
LoglikFn = Callable[[PyTree, Batch], jax.Array]


def categorical(apply_fn: ApplyFn) -> LoglikFn:
    """Categorical (softmax) likelihood for classification.

    ``log p(y_i | x_i, theta) = log softmax(f_theta(x_i))[y_i]`` with ``f_theta = apply_fn(
    params["net"], .)`` returning logits ``[B, num_classes]``.

    Args:
        apply_fn: ``apply_fn(net_params, x) -> logits`` of shape ``[B, num_classes]``.

    Returns:
        ``loglik_fn(params, (x, y)) -> [B]``. ``y`` must be integer labels of shape ``[B]`` in
        ``[0, num_classes)``; a label outside that range gives NaN (JAX cannot check values at
        trace time). Raises ``ValueError`` if the logits are not 2-D, ``y`` is not an integer
        array or ``y.shape != (B,)``.

    Example:
        >>> import jax.numpy as jnp
        >>> loglik = categorical(lambda net, x: x @ net)
        >>> params = {"net": jnp.eye(2)}
        >>> loglik(params, (jnp.zeros((3, 2)), jnp.array([0, 1, 1]))).round(4).tolist()
        [-0.6931, -0.6931, -0.6931]
    """

    def loglik_fn(params: PyTree, batch: Batch) -> jax.Array:
        x, y = batch
        y = jnp.asarray(y)
        logits = apply_fn(params["net"], x)
        if logits.ndim != 2:
            raise ValueError(
                f"categorical likelihood expects logits of shape [batch, num_classes], got "
                f"shape {logits.shape}"
            )
        if not jnp.issubdtype(y.dtype, jnp.integer):
            raise ValueError(
                f"categorical likelihood expects integer class labels, got dtype {y.dtype}"
            )
        if y.shape != logits.shape[:1]:
            raise ValueError(
                f"labels must have shape [batch] = ({logits.shape[0]},) to match logits of shape "
                f"{logits.shape}, got {y.shape}"
            )
        num_classes = logits.shape[1]
        log_probs = jax.nn.log_softmax(logits, axis=-1)
        picked = jnp.take_along_axis(log_probs, y[:, None], axis=-1, mode="fill")[:, 0]
        return jnp.where((y >= 0) & (y < num_classes), picked, jnp.nan)

    def sample(key: jax.Array, params: PyTree, x: jax.Array) -> jax.Array:
        """Labels ``ỹ ~ softmax(f_θ(x))``, int32 ``[B]`` (the Fisher metrics' model labels)."""
        return jax.random.categorical(key, apply_fn(params["net"], x), axis=-1).astype(jnp.int32)

    loglik_fn.sample = sample
    return loglik_fn


def init_likelihood_params(log_noise: float = 0.0) -> dict[str, jax.Array]:
    """Initial sampled parameters of :func:`gaussian` with ``noise_std=None``.

    ``params["likelihood"] = {"log_noise": log sigma}``.

    Args:
        log_noise: initial log noise standard deviation.

    Returns:
        ``{"log_noise": scalar float32 array}``.

    Example:
        >>> init_likelihood_params()
        {'log_noise': Array(0., dtype=float32)}
    """
    return {"log_noise": jnp.asarray(log_noise, jnp.float32)}


def _squeeze_trailing_one(
    a: jax.Array, name: str, batch_size: int, likelihood: str = "gaussian"
) -> jax.Array:
    """Accept ``[B]`` or ``[B, 1]`` and return ``[B]``; anything else is a ``ValueError``."""
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.shape != (batch_size,):
        raise ValueError(
            f"{likelihood} likelihood expects {name} of shape [batch] or [batch, 1] with "
            f"batch = {batch_size}, got {a.shape}"
        )
    return a


def gaussian(apply_fn: ApplyFn, noise_std: float | None = None) -> LoglikFn:
    """Gaussian likelihood for scalar regression, with fixed or sampled noise.

    ``log p(y_i | x_i, theta) = log N(y_i; f_theta(x_i), sigma²)``, with ``sigma = noise_std`` if
    given, else ``sigma = exp(params["likelihood"]["log_noise"])`` sampled with the network (the
    log parameterisation keeps ``sigma > 0``; start from :func:`init_likelihood_params`). The
    prior on ``log_noise`` is not part of this function: without one it is flat in ``log sigma``.

    Predictions ``apply_fn(params["net"], x)`` and targets ``y`` may each be ``[B]`` or ``[B, 1]``;
    a trailing axis of size 1 is squeezed, so ``regression_mlp`` outputs ``[B, 1]`` work as is.

    Args:
        apply_fn: ``apply_fn(net_params, x) -> predictions`` of shape ``[B]`` or ``[B, 1]``.
        noise_std: fixed noise standard deviation, or ``None`` to sample ``log_noise``.

    Returns:
        ``loglik_fn(params, (x, y)) -> [B]``, where ``B = x.shape[0]``. Raises ``ValueError`` if
        the shapes do not reduce to ``[B]``, or if the noise is sampled and ``params`` has no
        ``["likelihood"]["log_noise"]``.

    Example:
        >>> import jax.numpy as jnp
        >>> loglik = gaussian(lambda net, x: x @ net, noise_std=1.0)
        >>> params = {"net": jnp.ones((2, 1))}
        >>> loglik(params, (jnp.zeros((3, 2)), jnp.zeros(3))).round(4).tolist()
        [-0.9189, -0.9189, -0.9189]
    """
    if noise_std is not None and not noise_std > 0:
        raise ValueError(f"noise_std must be positive or None, got {noise_std}")

    def loglik_fn(params: PyTree, batch: Batch) -> jax.Array:
        x, y = batch
        batch_size = jnp.shape(x)[0]
        mean = _squeeze_trailing_one(apply_fn(params["net"], x), "predictions", batch_size)
        y = _squeeze_trailing_one(jnp.asarray(y), "targets y", batch_size)
        if noise_std is not None:
            return stats.norm.logpdf(y, mean, noise_std)
        try:
            log_noise = params["likelihood"]["log_noise"]
        except (KeyError, TypeError) as err:
            raise ValueError(
                "gaussian(noise_std=None) samples the noise: params must contain "
                'params["likelihood"]["log_noise"] (see init_likelihood_params)'
            ) from err
        return stats.norm.logpdf(y, mean, jnp.exp(log_noise))

    def sample(key: jax.Array, params: PyTree, x: jax.Array) -> jax.Array:
        """Targets ``ỹ ~ N(f_θ(x), σ²)``, ``[B]`` (the Fisher metrics' model labels)."""
        mean = _squeeze_trailing_one(apply_fn(params["net"], x), "predictions", jnp.shape(x)[0])
        sigma = noise_std if noise_std is not None else jnp.exp(params["likelihood"]["log_noise"])
        return mean + sigma * jax.random.normal(key, mean.shape, mean.dtype)

    loglik_fn.sample = sample
    return loglik_fn


def bernoulli(apply_fn: ApplyFn) -> LoglikFn:
    """Bernoulli (logistic) likelihood for binary classification.

    ``log p(y_i | x_i, theta) = y_i·z_i − softplus(z_i)`` with the logit ``z_i = f_theta(x_i)``
    of ``apply_fn(params["net"], .)`` and ``y_i ∈ {0, 1}``: ``log σ(z)`` for ``y = 1`` and
    ``log(1 − σ(z))`` for ``y = 0``, computed without forming ``σ(z)``. With a linear
    ``f_theta`` (:func:`sgrld.bnn.models.logistic_regression`) it is logistic regression.

    Args:
        apply_fn: ``apply_fn(net_params, x) -> logits`` of shape ``[B]`` or ``[B, 1]``.

    Returns:
        ``loglik_fn(params, (x, y)) -> [B]``, where ``B = x.shape[0]``. ``y`` holds the labels 0/1
        (integer or float) of shape ``[B]`` or ``[B, 1]``; another value is not checked (JAX
        cannot check values at trace time) and gives the formula's value. Raises ``ValueError``
        if the shapes do not reduce to ``[B]``.

    Example:
        >>> import jax.numpy as jnp
        >>> loglik = bernoulli(lambda net, x: x @ net)
        >>> params = {"net": jnp.ones((1, 1))}  # z = x
        >>> x, y = jnp.array([[0.0], [2.0], [2.0]]), jnp.array([1, 1, 0])
        >>> loglik(params, (x, y)).round(4).tolist()  # log ½, log σ(2), log(1 − σ(2))
        [-0.6931, -0.1269, -2.1269]
    """

    def logits(params: PyTree, x: jax.Array) -> jax.Array:
        z = apply_fn(params["net"], x)
        return _squeeze_trailing_one(z, "logits", jnp.shape(x)[0], "bernoulli")

    def loglik_fn(params: PyTree, batch: Batch) -> jax.Array:
        x, y = batch
        z = logits(params, x)
        y = _squeeze_trailing_one(jnp.asarray(y), "labels y", z.shape[0], "bernoulli")
        return y.astype(z.dtype) * z - jax.nn.softplus(z)

    def sample(key: jax.Array, params: PyTree, x: jax.Array) -> jax.Array:
        """Labels ``ỹ ~ Bernoulli(σ(f_θ(x)))``, int32 ``[B]`` (the Fisher metrics' model labels)."""
        return jax.random.bernoulli(key, jax.nn.sigmoid(logits(params, x))).astype(jnp.int32)

    loglik_fn.sample = sample
    return loglik_fn
