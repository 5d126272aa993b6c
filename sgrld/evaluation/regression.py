# ruff: noqa: F722  (jaxtyping shape strings such as "n C" are not Python expressions)
"""The regression ensemble: a running Gaussian-mixture predictive of S samples in O(n) memory."""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike, Float, Int

from sgrld.evaluation.scores import log_count


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
    log_mixture = state.log_density_sum - log_count(state.count, dtype)
    error = state.mean_sum / state.count.astype(dtype) - y
    return {
        "rmse": jnp.sqrt(jnp.mean(error**2)) * y_scale,
        "nll": -jnp.mean(log_mixture) + jnp.log(y_scale),
    }
