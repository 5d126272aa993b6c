# ruff: noqa: F722  (jaxtyping shape strings such as "n C" are not Python expressions)
"""Online evaluation scores of posterior-sample ensembles, and the input-space curvature C(x).

The ensembles are accumulators in the Optax/BlackJAX style: a NamedTuple state and pure,
jit-able functions ``init_*``, ``update_*``, ``*_scores`` and ``merge_*``. Memory is O(n·C)
(classification) or O(n) (regression) whatever the number of samples S, so samples can be
scored as they are drawn and then discarded. Every function works under ``jax.vmap`` over a
leading chain axis, and ``merge_*`` pools a chain-stacked state into one ensemble.

The scores follow the evaluation of Yu et al. (SSGRLDNDM, ``exp_utils.const_evaluate``): the
log-likelihood is the log of the ensemble-averaged (BMA) probability, averaged over points; the
accuracy is the argmax of the averaged probability; the ECE is top-label with equal-width bins.
These are evaluation *scores*; "metric" in sgrld always means the sampler's Riemannian metric.

References:
    H. Yu, M. Hartmann, B. Williams, A. Klami. Scalable Stochastic Gradient Riemannian Langevin
    Dynamics in Non-Diagonal Metrics. TMLR 2023 (Sec. 4.1; App. A.7 for the ECE).
    S. Srinivas, K. Matoba, H. Lakkaraju, F. Fleuret. Efficient Training of Low-Curvature Neural
    Networks. NeurIPS 2022.
    M. P. Naeini, G. Cooper, M. Hauskrecht. Obtaining Well Calibrated Probabilities Using
    Bayesian Binning. AAAI 2015.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int, PRNGKeyArray


def _log_count(count: Int[Array, ""], dtype: jnp.dtype) -> Float[Array, ""]:
    """log S in ``dtype``; -inf for an empty ensemble, so its scores are NaN."""
    return jnp.log(count.astype(dtype))


# --------------------------------------------------------------------------------------------
# Plain functions on stacked predictions
# --------------------------------------------------------------------------------------------


def ensemble_log_likelihood(log_likelihoods: Float[ArrayLike, "S n"]) -> Float[Array, ""]:
    """Log-likelihood of the ensemble-averaged predictive, averaged over points.

    .. math:: \\frac{1}{n}\\sum_i \\log\\Big(\\frac{1}{S}\\sum_s p(y_i \\mid x_i, \\theta_s)\\Big)

    This is the log of the averaged probability (the Bayesian model average), not the average
    of the per-sample log-probabilities; by Jensen the former is the larger. It is the
    ``log p(y|X)`` of Yu et al. (2023, Sec. 4.1).

    Args:
        log_likelihoods: ``log p(y_i | x_i, theta_s)`` of each sample (rows) and point (columns).

    Returns:
        The scalar score (higher is better).

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import ensemble_log_likelihood
        >>> log_lik = jnp.log(jnp.array([[0.9], [0.1]]))  # two samples, one point
        >>> print(f"{float(ensemble_log_likelihood(log_lik)):.4f}")  # log 0.5
        -0.6931
    """
    log_likelihoods = jnp.asarray(log_likelihoods)
    log_sum = jax.nn.logsumexp(log_likelihoods, axis=0)
    return jnp.mean(log_sum) - jnp.log(log_likelihoods.shape[0])


def expected_calibration_error(
    probs: Float[ArrayLike, "n C"], labels: Int[ArrayLike, " n"], num_bins: int = 30
) -> Float[Array, ""]:
    """Top-label expected calibration error with equal-width confidence bins (L1).

    .. math:: \\mathrm{ECE} = \\sum_{b=0}^{B-1} \\frac{n_b}{n}\\,
              \\lvert \\mathrm{acc}_b - \\mathrm{conf}_b \\rvert

    The confidence of a point is its largest probability and its prediction the argmax (the
    first class on ties). Bin ``b`` covers ``(b/B, (b+1)/B]``; a confidence of exactly 0 goes
    into bin 0. The edges are ``b/B`` rounded to the dtype of ``probs``, so a confidence equal
    to ``b/B`` in that dtype lies in bin ``b - 1``. Empty bins contribute nothing. This is the
    ``ece`` of google/uncertainty-metrics, which Yu et al. (2023, App. A.7) use with 30 bins;
    the ECE itself is from Naeini et al. (2015).

    Args:
        probs: predictive probabilities, one row per point.
        labels: integer class labels.
        num_bins: number of bins B (static under ``jax.jit``).

    Returns:
        The scalar ECE in [0, 1] (lower is better).

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import expected_calibration_error
        >>> probs = jnp.array([[0.75, 0.25], [0.6, 0.4]])
        >>> ece = expected_calibration_error(probs, jnp.array([0, 1]), num_bins=4)
        >>> print(f"{float(ece):.4f}")  # one bin (0.5, 0.75]: |1/2 - 0.675|
        0.1750
    """
    probs = jnp.asarray(probs)
    confidence = jnp.max(probs, axis=-1)
    correct = (jnp.argmax(probs, axis=-1) == jnp.asarray(labels)).astype(confidence.dtype)
    inner_edges = jnp.arange(1, num_bins, dtype=confidence.dtype) / num_bins
    # The bin index is the number of edges strictly below the confidence: (b/B, (b+1)/B].
    bins = jnp.sum(confidence[:, None] > inner_edges, axis=-1)
    # n_b/n · |acc_b - conf_b| = |sum over bin b of (correct - confidence)| / n.
    gaps = jax.ops.segment_sum(correct - confidence, bins, num_segments=num_bins)
    return jnp.sum(jnp.abs(gaps)) / confidence.shape[0]


# --------------------------------------------------------------------------------------------
# Classification ensemble
# --------------------------------------------------------------------------------------------


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
    """Log-likelihood, accuracy and ECE of the ensemble-averaged predictive.

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
        ``{"log_likelihood", "accuracy", "ece"}``, each a scalar.

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import (classification_scores, init_classification,
        ...                               update_classification)
        >>> state = init_classification(num_points=2, num_classes=2)
        >>> state = update_classification(state, jnp.log(jnp.array([[0.9, 0.1], [0.4, 0.6]])))
        >>> state = update_classification(state, jnp.log(jnp.array([[0.5, 0.5], [0.8, 0.2]])))
        >>> scores = classification_scores(state, jnp.array([0, 1]), num_bins=10)
        >>> print({name: round(float(value), 4) for name, value in scores.items()})
        {'log_likelihood': -0.6365, 'accuracy': 0.5, 'ece': 0.45}
    """
    labels = jnp.asarray(labels)
    log_probs = state.log_prob_sum - _log_count(state.count, state.log_prob_sum.dtype)
    log_lik = jnp.take_along_axis(log_probs, labels[:, None], axis=-1)[:, 0]
    return {
        "log_likelihood": jnp.mean(log_lik),
        "accuracy": jnp.mean(jnp.argmax(log_probs, axis=-1) == labels),
        "ece": expected_calibration_error(jnp.exp(log_probs), labels, num_bins),
    }


# --------------------------------------------------------------------------------------------
# Regression ensemble
# --------------------------------------------------------------------------------------------


class RegressionEnsemble(NamedTuple):
    """Running predictive of a Gaussian-likelihood regression ensemble.

    Attributes:
        count: number of samples added, S (int32 scalar).
        mean_sum: ``sum_s mu_s(x_i)``.
        mean_sq_sum: ``sum_s mu_s(x_i)^2``.
        var_sum: ``sum_s sigma_s(x_i)^2``.
        log_density_sum: ``log sum_s N(y_i | mu_s(x_i), sigma_s(x_i)^2)`` (-inf before the
            first sample), so the mixture NLL is exact.

    All per-point fields have shape [n] and dtype float32. The variance is formed from raw
    sums (mergeable across chains, but subject to cancellation in float32 when
    ``|mu| >> spread``); train on standardised targets, as usual.
    """

    count: Int[Array, ""]
    mean_sum: Float[Array, " n"]
    mean_sq_sum: Float[Array, " n"]
    var_sum: Float[Array, " n"]
    log_density_sum: Float[Array, " n"]


def init_regression(num_points: int) -> RegressionEnsemble:
    """Empty regression ensemble (S = 0).

    Args:
        num_points: number of evaluation points n.

    Returns:
        The state, with zero sums and ``log_density_sum = -inf``.

    Example:
        >>> from sgrld.evaluation import init_regression
        >>> state = init_regression(num_points=5)
        >>> print(int(state.count), state.mean_sum.shape, state.mean_sum.dtype)
        0 (5,) float32
    """
    zeros = jnp.zeros((num_points,), jnp.float32)
    return RegressionEnsemble(
        count=jnp.zeros((), jnp.int32),
        mean_sum=zeros,
        mean_sq_sum=zeros,
        var_sum=zeros,
        log_density_sum=jnp.full((num_points,), -jnp.inf, jnp.float32),
    )


def update_regression(
    state: RegressionEnsemble,
    mean: Float[ArrayLike, " n"],
    std: Float[ArrayLike, " n"],
    y: Float[ArrayLike, " n"],
) -> RegressionEnsemble:
    """Add one posterior sample's Gaussian predictive N(mu_s, sigma_s^2) to the ensemble.

    .. math:: \\ell_i \\leftarrow \\operatorname{logaddexp}\\big(\\ell_i,\\,
              \\log\\mathcal N(y_i \\mid \\mu_s(x_i), \\sigma_s(x_i)^2)\\big)

    and the sums of :math:`\\mu_s`, :math:`\\mu_s^2`, :math:`\\sigma_s^2` are incremented.

    Args:
        state: the ensemble so far.
        mean: predictive mean mu_s of the new sample at each point.
        std: predictive standard deviation sigma_s (> 0; a scalar broadcasts).
        y: the targets, the same at every update (in the units the model is trained on).

    Returns:
        The updated state, with the same shapes and dtypes.

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import init_regression, update_regression
        >>> state = update_regression(init_regression(1), jnp.zeros(1), 1.0, jnp.zeros(1))
        >>> print(f"{float(state.log_density_sum[0]):.4f}")  # log N(0 | 0, 1)
        -0.9189
    """
    dtype = state.mean_sum.dtype
    mean = jnp.asarray(mean).astype(dtype)
    std = jnp.asarray(std).astype(dtype)
    log_density = jax.scipy.stats.norm.logpdf(jnp.asarray(y).astype(dtype), mean, std)
    return RegressionEnsemble(
        count=state.count + 1,
        mean_sum=state.mean_sum + mean,
        mean_sq_sum=state.mean_sq_sum + mean**2,
        var_sum=state.var_sum + jnp.broadcast_to(std**2, mean.shape),
        log_density_sum=jnp.logaddexp(state.log_density_sum, log_density),
    )


def merge_regression(states: RegressionEnsemble) -> RegressionEnsemble:
    """Pool a chain-stacked regression ensemble (leading chain axis) into one ensemble.

    Sums and counts add over the chain axis; ``log_density_sum`` is log-sum-exp'd over it.

    Args:
        states: a state whose leaves carry a leading chain axis.

    Returns:
        The state of the ensemble of every chain's samples, without the chain axis.

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import init_regression, merge_regression, update_regression
        >>> chains = jax.vmap(lambda _: init_regression(2))(jnp.arange(3))
        >>> chains = jax.vmap(update_regression, (0, 0, None, None))(
        ...     chains, jnp.ones((3, 2)), 1.0, jnp.zeros(2))
        >>> print(int(merge_regression(chains).count))
        3
    """
    return RegressionEnsemble(
        count=jnp.sum(states.count, axis=0),
        mean_sum=jnp.sum(states.mean_sum, axis=0),
        mean_sq_sum=jnp.sum(states.mean_sq_sum, axis=0),
        var_sum=jnp.sum(states.var_sum, axis=0),
        log_density_sum=jax.nn.logsumexp(states.log_density_sum, axis=0),
    )


def regression_predictive(
    state: RegressionEnsemble,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    """Mean and variance of the ensemble's Gaussian-mixture predictive at each point.

    .. math:: \\bar\\mu = \\frac{1}{S}\\sum_s \\mu_s, \\qquad
              \\bar\\sigma^2 = \\frac{1}{S}\\sum_s \\sigma_s^2
              + \\Big(\\frac{1}{S}\\sum_s \\mu_s^2 - \\bar\\mu^2\\Big)

    (aleatoric plus epistemic variance; the epistemic part is clipped at 0 against rounding).

    Args:
        state: the ensemble (at least one sample).

    Returns:
        ``(mean, variance)``, each of shape [n].

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import init_regression, regression_predictive, update_regression
        >>> state = init_regression(1)
        >>> for mu in (-1.0, 1.0):
        ...     state = update_regression(state, jnp.array([mu]), 0.5, jnp.zeros(1))
        >>> mean, variance = regression_predictive(state)
        >>> print(float(mean[0]), float(variance[0]))  # 0.25 + 1
        0.0 1.25
    """
    count = state.count.astype(state.mean_sum.dtype)
    mean = state.mean_sum / count
    spread = jnp.maximum(state.mean_sq_sum / count - mean**2, 0.0)
    return mean, state.var_sum / count + spread


def regression_scores(
    state: RegressionEnsemble, y: Float[ArrayLike, " n"], y_scale: float = 1.0
) -> dict[str, Float[Array, ""]]:
    """RMSE of the ensemble mean and NLL of the Gaussian-mixture predictive.

    .. math:: \\mathrm{RMSE} = s\\sqrt{\\tfrac{1}{n}\\textstyle\\sum_i (\\bar\\mu_i - y_i)^2},
              \\qquad
              \\mathrm{NLL} = -\\frac{1}{n}\\sum_i \\log\\Big(\\frac{1}{S}\\sum_s
              \\mathcal N(y_i \\mid \\mu_s, \\sigma_s^2)\\Big) + \\log s

    with ``s = y_scale``. If the model was trained on targets standardised as
    ``(y_raw - m) / s``, pass the standardised ``y`` (the same as to :func:`update_regression`)
    and ``y_scale = s`` to report both scores in the raw units: the RMSE scales by ``s`` and
    the density picks up the Jacobian ``1/s``. ``y_scale = 1`` reports them as trained.

    Args:
        state: the ensemble (at least one sample).
        y: the targets, in the units passed to :func:`update_regression`.
        y_scale: the standard deviation used to standardise the targets.

    Returns:
        ``{"rmse", "nll"}``, each a scalar (lower is better).

    Example:
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import init_regression, regression_scores, update_regression
        >>> y = jnp.array([0.0, 1.0])
        >>> state = update_regression(init_regression(2), jnp.array([0.0, 0.0]), 1.0, y)
        >>> scores = regression_scores(state, y)
        >>> print({name: round(float(value), 4) for name, value in scores.items()})
        {'rmse': 0.7071, 'nll': 1.1689}
    """
    y = jnp.asarray(y)
    dtype = state.mean_sum.dtype
    log_mixture = state.log_density_sum - _log_count(state.count, dtype)
    error = state.mean_sum / state.count.astype(dtype) - y
    return {
        "rmse": jnp.sqrt(jnp.mean(error**2)) * y_scale,
        "nll": -jnp.mean(log_mixture) + jnp.log(y_scale),
    }


# --------------------------------------------------------------------------------------------
# Curvature
# --------------------------------------------------------------------------------------------


def _unit(v: Array) -> Array:
    """v / ||v||, and 0 for v = 0 (a zero Hessian then gives curvature 0, not NaN)."""
    norm = jnp.sqrt(jnp.sum(v**2))
    return v / jnp.where(norm > 0, norm, 1)


def curvature(
    key: PRNGKeyArray,
    loss_fn: Callable[[Array, Any], Array],
    x: Float[ArrayLike, "n ..."],
    y: ArrayLike,
    num_iterations: int = 20,
) -> Float[Array, " n"]:
    """Normalised input-space curvature of the loss at every point (Srinivas et al., 2022).

    .. math:: C(x_i) = \\frac{\\lvert \\sigma_{\\max}(\\nabla^2_x \\ell(x_i, y_i)) \\rvert}
              {\\lVert \\nabla_x \\ell(x_i, y_i) \\rVert + 10^{-6}}

    :math:`\\sigma_{\\max}` comes from ``num_iterations`` steps of the power method
    ``u <- H u / ||H u||`` on Hessian-vector products in input space (forward-over-reverse:
    ``jax.linearize`` of ``jax.grad``, so the gradient pass is traced once per point), started
    from a unit ``u`` drawn from ``key``; the value is the Rayleigh quotient ``u^T H u`` of the
    final unit ``u``. The power method finds the eigenvalue of largest modulus; it does not
    converge when two eigenvalues of opposite sign have equal modulus.

    Yu et al. (``exp_utils.smoothness_test_exact``, adapted from ``kylematoba/lcnn``)
    differentiate the batch potential (mean NLL plus -log p(theta)/N, which is constant in x)
    and divide ``u`` by ``||Hu|| + 1e-6``. Here the loss is the per-point NLL and ``u`` is
    normalised exactly; the two ratios agree up to the 1e-6 terms (the 1/B factor cancels).
    Yu et al. (2023, Sec. 4.1) report the mean of C over the first 1000 test points, averaged
    over the posterior samples.

    Memory grows with n (the linearisation of every point is kept through the loop): call it
    on chunks of points (Yu et al. use batches of 100), under ``jax.jit`` with the parameters
    as an argument so that it compiles once per model, e.g.
    ``jax.jit(lambda params, key, x, y: curvature(key, partial(nll, params), x, y))``.

    Args:
        key: PRNG key for the random starting vectors (drawn for all points at once).
        loss_fn: ``loss_fn(x_single, y_single) -> scalar``, the per-example NLL with the
            parameters closed over (e.g. ``lambda x, y: nll(params, x, y)``); it must be
            twice differentiable in ``x`` (evaluate BatchNorm with running statistics).
        x: inputs with a leading point axis; each point may have any shape.
        y: targets with the same leading axis (any pytree of arrays).
        num_iterations: number of power-method steps.

    Returns:
        C at each of the n points.

    Example:
        >>> import jax
        >>> import jax.numpy as jnp
        >>> from sgrld.evaluation import curvature
        >>> loss_fn = lambda x, y: 0.5 * jnp.sum(jnp.array([1.0, 3.0]) * (x - y) ** 2)
        >>> x, y = jnp.array([[1.0, 0.0]]), jnp.zeros((1, 2))
        >>> c = curvature(jax.random.key(0), loss_fn, x, y)  # H = diag(1, 3), grad = (1, 0)
        >>> print(f"{float(c[0]):.4f}")
        3.0000
    """
    x = jnp.asarray(x)
    grad_fn = jax.grad(loss_fn)

    def one_point(x_i, y_i, u_i):
        grad, hvp = jax.linearize(lambda z: grad_fn(z, y_i), x_i)
        u = jax.lax.fori_loop(0, num_iterations, lambda _, u: _unit(hvp(u)), _unit(u_i))
        rayleigh = jnp.vdot(u, hvp(u))
        return jnp.abs(rayleigh) / (jnp.sqrt(jnp.sum(grad**2)) + 1e-6)

    starts = jax.random.normal(key, x.shape, x.dtype)
    return jax.vmap(one_point)(x, y, starts)
