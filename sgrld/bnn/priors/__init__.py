"""Priors over Bayesian-neural-network parameters.

A prior is a :class:`Prior` ``(init, log_prob)``:

* ``init(net_params) -> prior_params`` builds the extra parameters that the prior samples jointly
  with the network (horseshoe scales), or ``{}`` when there are none;
* ``log_prob(net_params, prior_params) -> scalar`` is the exact log density (normalising constants
  included) of the whole pytree, summed over leaves.

The sampled pytree is ``params = {"net": net_params, "prior": prior_params}`` and
:func:`logprior_fn` turns a prior into the ``logprior_fn(params)`` that the samplers take.

Leaves are classified by rank, so any Flax module or hand-written parameter pytree works:

* a **weight** has ``ndim >= 2``: a Dense kernel ``(in, out)``, a convolution kernel
  ``(*spatial, in, out)`` (Flax layout, e.g. ``(kh, kw, in, out)``);
* a **bias** has ``ndim <= 1`` (Dense/conv biases, and any other vector or scalar leaf).

Weights are scaled by their fan-in, ``scale = weight_scale / sqrt(fan_in)``, as in BNNpriors
(Fortuin et al., 2021) and Yu et al. (2023). With ``conv_fan_in="full"`` (default) the fan-in is
``prod(shape[:-1])``, i.e. ``kh·kw·in`` for a convolution; ``conv_fan_in="channels"`` uses ``in``
only, which reproduces the authors' code (``bnn_priors`` ``Conv2dPrior``) and its known bug: the
prior variance of a k×k kernel is then k² times too large. For Dense kernels both are ``in``.

The families live in one module each (:mod:`~sgrld.bnn.priors.factorised`,
:mod:`~sgrld.bnn.priors.horseshoe`, :mod:`~sgrld.bnn.priors.correlated`) over the shared
interface and fan-in scaling of :mod:`~sgrld.bnn.priors.prior`; all are importable from here.

References:
    Yu, Hartmann, Williams, Klami. Scalable Stochastic Gradient Riemannian Langevin Dynamics in
    Non-Diagonal Metrics. TMLR 2023, Sec. 4.3-4.4 and App. B.
    Fortuin et al. Bayesian Neural Network Priors Revisited. ICLR 2022.
"""

from sgrld.bnn.priors.correlated import conv_correlated, exponential_kernel_cholesky
from sgrld.bnn.priors.factorised import gaussian, laplace, student_t
from sgrld.bnn.priors.horseshoe import HorseshoeScales, horseshoe, horseshoe_per_weight
from sgrld.bnn.priors.prior import ConvFanIn, Prior, logprior_fn

__all__ = [
    "ConvFanIn",
    "HorseshoeScales",
    "Prior",
    "conv_correlated",
    "exponential_kernel_cholesky",
    "gaussian",
    "horseshoe",
    "horseshoe_per_weight",
    "laplace",
    "logprior_fn",
    "student_t",
]
