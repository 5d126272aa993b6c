"""Bayesian-neural-network stack: models, priors and likelihoods for the SGRLD samplers.

The sampled pytree is ``params = {"net": net_params, "prior": prior_params}`` (plus
``params["likelihood"]`` for regression with sampled noise). ``likelihoods.*`` give
``loglik_fn(params, batch) -> [batch]`` and ``priors.logprior_fn(prior)`` gives
``logprior_fn(params) -> scalar``, the two functions the samplers take.

Example:
    >>> import jax
    >>> from sgrld.bnn import MLP, apply_fn, init_params, likelihoods, logprior_fn, priors
    >>> model = MLP(features=(16,))
    >>> prior = priors.horseshoe()
    >>> net = init_params(model, jax.random.key(0), (1, 784))
    >>> params = {"net": net, "prior": prior.init(net)}
    >>> loglik_fn = likelihoods.categorical(apply_fn(model))
    >>> x, y = jax.numpy.zeros((4, 784)), jax.numpy.zeros(4, dtype=int)
    >>> loglik_fn(params, (x, y)).shape, logprior_fn(prior)(params).shape
    ((4,), ())
"""

from sgrld.bnn import adapters, convolutions, dropout, likelihoods, models, priors, resnet
from sgrld.bnn.models import CNN, MLP, apply_fn, init_params, regression_mlp
from sgrld.bnn.priors import Prior, logprior_fn
from sgrld.bnn.resnet import ResNet20

__all__ = [
    "CNN",
    "MLP",
    "Prior",
    "ResNet20",
    "adapters",
    "apply_fn",
    "convolutions",
    "dropout",
    "init_params",
    "likelihoods",
    "logprior_fn",
    "models",
    "priors",
    "regression_mlp",
    "resnet",
]
