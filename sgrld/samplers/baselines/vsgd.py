"""vSGD: constant-learning-rate SGD as approximate Bayesian inference (Mandt, Hoffman & Blei 2017).

At a constant learning rate the SGD iterates ``θ ← θ − lr·∇loss(θ; batch)`` do not converge:
near a mode with Hessian ``A`` (of the per-datum loss) and per-example gradient covariance ``C``,
minibatches of ``b`` make them an Ornstein–Uhlenbeck process whose stationary law is Gaussian
with covariance ``Σ`` solving ``AΣ + ΣA = (lr/b)·C`` (their Eq. 9). For the loss ``Û/N`` of a
Bayesian model, the posterior's covariance is ``A⁻¹/N``; Σ matches it when ``C ≈ A`` (the Fisher
identity) and ``lr = 2b/N`` (their Theorem 1 with a scalar rate, Eq. 15's isotropic case). The
method: run SGD at a constant ``lr``, discard a burn-in, then keep every ``k``-th iterate; the
kept iterates are the ensemble. Here the sampler is :func:`sgrld.samplers.baselines.sgd` with a
constant rate, and the keeping is the engine's and the runner's ``burn_in`` / ``thin``, so vSGD's
ensemble is scored exactly as a sampler's samples are.

The learning rate is a hyperparameter (tuned on validation data by ``sgrld reproduce isgd-uci``,
as Franzese et al. did); ``2b/N`` is the value at which the iterates' spread is the posterior's
under the assumptions above.

Reference: S. Mandt, M. D. Hoffman, D. M. Blei, "Stochastic Gradient Descent as Approximate
Bayesian Inference", JMLR 18 (2017), Sec. 4, Eq. (9), (15).
"""

from __future__ import annotations

from sgrld.samplers.baselines.sgd import Loss, sgd
from sgrld.samplers.contract import Sampler


def vsgd(
    loss_fn: Loss,
    learning_rate: float,
    *,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
) -> Sampler:
    """Constant-learning-rate SGD whose iterates after a burn-in, one every ``thin`` steps, form the
    ensemble: ``θ ← θ − lr·(∇loss(θ; batch) + wd·θ)`` (with momentum μ: the velocity of
    :func:`~sgrld.samplers.baselines.sgd`), stationary around a mode with covariance ``Σ``,
    ``AΣ + ΣA = (lr/b)·C`` (module docstring).

    Args:
      loss_fn: ``(params, batch) -> scalar``, e.g. a :func:`sgrld.potential`.
      learning_rate: the constant ``lr`` > 0 (a schedule is refused: the stationary law needs a
        constant rate).
      momentum: μ ∈ [0, 1).
      weight_decay: wd ≥ 0.

    Returns:
      The :class:`~sgrld.Sampler` of :func:`~sgrld.samplers.baselines.sgd`; keep its states with
      ``burn_in`` and ``thin`` (:func:`sgrld.sample`, :class:`sgrld_app.experiment.RunPlan`).

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> x = jax.random.normal(jax.random.key(0), (256,))      # N = 256, b = 16
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, num_data=256)
      >>> batches = lambda key: x[jax.random.choice(key, 256, (16,))]
      >>> out = sgrld.sample(jax.random.key(1), vsgd(u, 2 * 16 / 256), jnp.zeros(()),
      ...                    batches, num_samples=600, burn_in=1000, thin=5)
      >>> sd = float(out.params.std())   # the posterior's is 1/√N = 0.0625
      >>> 0.04 < sd < 0.09
      True
    """
    if callable(learning_rate):
        raise TypeError("vsgd: learning_rate must be a constant (its iterates' law needs one)")
    return sgd(loss_fn, learning_rate, momentum=momentum, weight_decay=weight_decay)
