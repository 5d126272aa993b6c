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

The classification and regression ensembles, the scores of stacked predictions and the curvature
live in :mod:`~sgrld.evaluation.classification`, :mod:`~sgrld.evaluation.regression`,
:mod:`~sgrld.evaluation.scores` and :mod:`~sgrld.evaluation.smoothness`; all are importable from
here.

References:
    H. Yu, M. Hartmann, B. Williams, A. Klami. Scalable Stochastic Gradient Riemannian Langevin
    Dynamics in Non-Diagonal Metrics. TMLR 2023 (Sec. 4.1; App. A.7 for the ECE).
    S. Srinivas, K. Matoba, H. Lakkaraju, F. Fleuret. Efficient Training of Low-Curvature Neural
    Networks. NeurIPS 2022.
    M. P. Naeini, G. Cooper, M. Hauskrecht. Obtaining Well Calibrated Probabilities Using
    Bayesian Binning. AAAI 2015.
"""

from sgrld.evaluation.classification import (
    ClassificationEnsemble,
    classification_scores,
    init_classification,
    merge_classification,
    update_classification,
)
from sgrld.evaluation.regression import (
    RegressionEnsemble,
    init_regression,
    merge_regression,
    regression_predictive,
    regression_scores,
    update_regression,
)
from sgrld.evaluation.scores import ensemble_log_likelihood, expected_calibration_error
from sgrld.evaluation.smoothness import curvature

__all__ = [
    "ClassificationEnsemble",
    "RegressionEnsemble",
    "classification_scores",
    "curvature",
    "ensemble_log_likelihood",
    "expected_calibration_error",
    "init_classification",
    "init_regression",
    "merge_classification",
    "merge_regression",
    "regression_predictive",
    "regression_scores",
    "update_classification",
    "update_regression",
]
