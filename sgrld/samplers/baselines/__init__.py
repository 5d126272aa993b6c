"""The approximate-inference baselines of Franzese et al. (2021), each a :class:`~sgrld.Sampler`
whose kept states are its ensemble, so the engine, :func:`sgrld.sample` and the experiment runner
run them and score them with the same ensemble evaluation as the samplers:

* :func:`sgd`: SGD (MAP or ML), one network: keep the last state;
* :func:`vsgd`: constant-learning-rate SGD (Mandt, Hoffman & Blei 2017): keep every ``thin``-th
  iterate after a burn-in;
* :func:`swag`: SWAG (Maddox et al. 2019): SGD collecting the SWA mean and a diagonal plus rank-K
  covariance, then independent Gaussian draws.

MC dropout (Gal & Ghahramani 2016), which needs a network with dropout layers, is
:func:`sgrld.bnn.dropout.mc_dropout`.

They share the :class:`~sgrld.Sampler` contract and :func:`~sgrld.samplers.info.step_info`, not
the Langevin parts (:mod:`sgrld.parts`, :func:`~sgrld.samplers.assembly.advance`): they inject no
noise and have no metric nor Γ, and their step is an optax optimiser's (momentum, weight decay),
with a loss that may take the step's key (MC dropout's masks), which the gradient estimate of
:mod:`sgrld.parts.gradients` does not. :func:`sgrld.samplers.baselines.sgd.descend` is their one
gradient step.

Example:
  >>> import jax, jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, num_data=64)
  >>> x = 1.0 + jax.random.normal(jax.random.key(0), (64,))
  >>> batches = lambda key: x[jax.random.choice(key, 64, (8,))]
  >>> out = sgrld.sample(jax.random.key(1), sgd(u, 0.1), jnp.zeros(()), batches,
  ...                    num_samples=1, burn_in=199)
  >>> abs(float(out.params[0]) - float(x.mean())) < 0.3
  True
"""

from sgrld.samplers.baselines.sgd import SGDState, sgd
from sgrld.samplers.baselines.swag import SWAGMoments, SWAGState, swag
from sgrld.samplers.baselines.vsgd import vsgd

__all__ = [
    "SGDState",
    "SWAGMoments",
    "SWAGState",
    "sgd",
    "swag",
    "vsgd",
]
