"""Riemannian metrics for SGRLD: each a :class:`Metric` built from an EMA of a gradient
statistic."""

from sgrld.metrics.fisher import fisher_diag, fisher_full, fisher_qdiag
from sgrld.metrics.identity import identity
from sgrld.metrics.metric import INVERSE_SQRT, Metric, MetricState, inv_tangent
from sgrld.metrics.monge import monge
from sgrld.metrics.rmsprop import rmsprop
from sgrld.metrics.shampoo import shampoo
from sgrld.metrics.wenzel import wenzel

__all__ = [
    "INVERSE_SQRT",
    "Metric",
    "MetricState",
    "fisher_diag",
    "fisher_full",
    "fisher_qdiag",
    "identity",
    "inv_tangent",
    "monge",
    "rmsprop",
    "shampoo",
    "wenzel",
]
