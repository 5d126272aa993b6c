# ruff: noqa: F722  (jaxtyping shape strings such as "n C" are not Python expressions)
"""The classification ensemble: a running BMA predictive of S samples in O(n·C) memory."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from sgrld.evaluation.scores import expected_calibration_error, log_count


class ClassificationEnsemble(NamedTuple):
    """Running predictive of a classification ensemble.

    Attributes:
        count: number of samples added, S (int32 scalar).
        log_prob_sum: ``log sum_s p(c | x_i, theta_s)`` for every point i and class c
            (float32; -inf before the first sample).
    """

    count: Int[Array, ""]
    log_prob_sum: Float[Array, "n C"]


def init_classification(num_points: int, num_classes: int) -> ClassificationEnsemble:
    """Empty classification ensemble (S = 0).

    Args:
        num_points: number of evaluation points n.
        num_classes: number of classes C.

    Returns:
        The state, with ``count = 0`` and ``log_prob_sum = -inf``.

    Example:
        >>> from sgrld.evaluation import init_classification
        >>> state = init_classification(num_points=3, num_classes=10)
        >>> print(int(state.count), state.log_prob_sum.shape, state.log_prob_sum.dtype)
        0 (3, 10) float32
    """
    return ClassificationEnsemble(
        count=jnp.zeros((), jnp.int32),
        log_prob_sum=jnp.full((num_points, num_classes), -jnp.inf, jnp.float32),
    )


def update_classification(
    state: ClassificationEnsemble, logits: Float[ArrayLike, "n C"]
) -> ClassificationEnsemble:
    """Add one posterior sample's predictions to the ensemble.

    .. math:: L_{ic} \\leftarrow \\operatorname{logaddexp}\\big(L_{ic},\\,
              \\log\\operatorname{softmax}(f_\\theta(x_i))_c\\big), \\qquad S \\leftarrow S + 1

    Args:
        state: the ensemble so far.
        logits: unnormalised log-probabilities of the new sample (any float dtype; they are
            cast to the state's dtype before the softmax).

    Returns:
        The updated state, with the same shapes and dtypes (so it can be carried by
        ``jax.lax.scan``).

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import init_classification, update_classification
        >>> state = init_classification(num_points=1, num_classes=2)
        >>> state = update_classification(state, jnp.array([[0.0, 0.0]]))
        >>> print(int(state.count), jnp.exp(state.log_prob_sum).round(3))
        1 [[0.5 0.5]]
    """
    log_probs = jax.nn.log_softmax(jnp.asarray(logits).astype(state.log_prob_sum.dtype), axis=-1)
    return ClassificationEnsemble(
        count=state.count + 1,
        log_prob_sum=jnp.logaddexp(state.log_prob_sum, log_probs),
    )


def merge_classification(states: ClassificationEnsemble) -> ClassificationEnsemble:
    """Pool a chain-stacked ensemble (leading chain axis) into one ensemble of all samples.

    .. math:: L_{ic} = \\log\\sum_k \\exp L^{(k)}_{ic}, \\qquad S = \\sum_k S^{(k)}

    Args:
        states: a state whose leaves carry a leading chain axis, e.g. the output of
            ``jax.vmap(update_classification)``.

    Returns:
        The state of the ensemble of every chain's samples, without the chain axis.

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import (init_classification, merge_classification,
        ...                               update_classification)
        >>> chains = jax.vmap(lambda _: init_classification(2, 3))(jnp.arange(4))
        >>> logits = jnp.zeros((4, 2, 3))  # one sample per chain
        >>> chains = jax.vmap(update_classification)(chains, logits)
        >>> print(int(merge_classification(chains).count))
        4
    """
    return ClassificationEnsemble(
        count=jnp.sum(states.count, axis=0),
        log_prob_sum=jax.nn.logsumexp(states.log_prob_sum, axis=0),
    )


def classification_scores(
    state: ClassificationEnsemble, labels: Int[ArrayLike, " n"], num_bins: int = 30
) -> dict[str, Float[Array, ""]]:
    """Log-likelihood, accuracy, ECE and average confidence of the ensemble-averaged predictive.

    .. math:: \\bar p(c \\mid x_i) = \\frac{1}{S}\\sum_s p(c \\mid x_i, \\theta_s), \\quad
              \\text{log\\_likelihood} = \\frac{1}{n}\\sum_i \\log \\bar p(y_i \\mid x_i), \\quad
              \\text{accuracy} = \\frac{1}{n}\\sum_i [\\arg\\max_c \\bar p(c \\mid x_i) = y_i]

    and ``ece`` is :func:`expected_calibration_error` of :math:`\\bar p`, as in Yu et al. (2023,
    Sec. 4.1). The state must hold at least one sample (an empty ensemble gives NaN).

    Args:
        state: the ensemble.
        labels: integer class labels of the n points.
        num_bins: number of ECE bins (static under ``jax.jit``).

    Returns:
        ``{"log_likelihood", "accuracy", "ece", "confidence"}``, each a scalar.

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import (classification_scores, init_classification,
        ...                               update_classification)
        >>> state = init_classification(num_points=2, num_classes=2)
        >>> state = update_classification(state, jnp.log(jnp.array([[0.9, 0.1], [0.4, 0.6]])))
        >>> state = update_classification(state, jnp.log(jnp.array([[0.5, 0.5], [0.8, 0.2]])))
        >>> scores = classification_scores(state, jnp.array([0, 1]), num_bins=10)
        >>> print({name: round(float(value), 4) for name, value in scores.items()})
        {'log_likelihood': -0.6365, 'accuracy': 0.5, 'ece': 0.45, 'confidence': 0.7}
    """
    labels = jnp.asarray(labels)
    log_probs = state.log_prob_sum - log_count(state.count, state.log_prob_sum.dtype)
    log_lik = jnp.take_along_axis(log_probs, labels[:, None], axis=-1)[:, 0]
    return {
        "log_likelihood": jnp.mean(log_lik),
        "accuracy": jnp.mean(jnp.argmax(log_probs, axis=-1) == labels),
        "ece": expected_calibration_error(jnp.exp(log_probs), labels, num_bins),
        "confidence": jnp.mean(jnp.exp(jnp.max(log_probs, axis=-1))),
    }
