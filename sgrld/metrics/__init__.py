"""Riemannian metrics for SGRLD: each a :class:`Metric` built from an EMA of a gradient
statistic."""

from sgrld.metrics.base import Metric, MetricState, inv_tangent
from sgrld.metrics.identity import identity
from sgrld.metrics.monge import monge
from sgrld.metrics.rmsprop import rmsprop
from sgrld.metrics.shampoo import shampoo
from sgrld.metrics.wenzel import wenzel

__all__ = [
    "Metric",
    "MetricState",
    "identity",
    "inv_tangent",
    "monge",
    "rmsprop",
    "shampoo",
    "wenzel",
]
