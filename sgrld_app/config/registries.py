"""The names a configuration may use for a sampler, a metric, a prior and a model, and their
factories.

A :class:`Registry` knows its names without loading anything, and loads the module that holds
the factories on the first lookup: validating ``prior.kind`` needs no Flax, and ``sgrld.bnn``
(whose models import Flax) loads only when a prior is built or its ``params`` are checked. Each
module is imported by an ``import`` statement (in a function, where it must wait), so that the
architecture test sees every module the application reaches.

Example:
    >>> "horseshoe" in PRIORS, sorted(METRICS)[:4]
    (True, ['fisher_diag', 'fisher_full', 'fisher_qdiag', 'identity'])
    >>> METRICS["monge"].__name__
    'monge'
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import Any

import sgrld
from sgrld import metrics


class Registry(Mapping[str, Callable[..., Any]]):
    """Factories of one module by name, the module loaded on the first lookup.

    Args:
        load: returns the module holding the factories (e.g. ``lambda: sgrld.metrics``).
        names: the factories' names in that module, in the order they are listed to users.
    """

    def __init__(self, load: Callable[[], ModuleType], names: tuple[str, ...]) -> None:
        self.load = load
        self.names = names

    def __getitem__(self, name: str) -> Callable[..., Any]:
        if name not in self.names:
            raise KeyError(name)
        return getattr(self.load(), name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __repr__(self) -> str:
        return f"Registry({self.names!r})"


def _priors() -> ModuleType:
    """:mod:`sgrld.bnn.priors`, imported on the first lookup of a prior (its models import Flax)."""
    from sgrld.bnn import priors

    return priors


METRICS = Registry(
    lambda: metrics,
    (
        "identity",
        "rmsprop",
        "wenzel",
        "monge",
        "shampoo",
        "fisher_diag",
        "fisher_qdiag",
        "fisher_full",
    ),
)
"""``sampler.metric``: the metric factories of :mod:`sgrld.metrics`."""

PRIORS = Registry(
    _priors,
    ("gaussian", "laplace", "student_t", "horseshoe", "horseshoe_per_weight", "conv_correlated"),
)
"""``prior.kind``: the prior factories of :mod:`sgrld.bnn.priors`."""

SAMPLERS = Registry(lambda: sgrld, ("sgrld", "sghmc", "sgnht", "isgd"))
"""``sampler.kind``: the sampler factories of the library's API (:mod:`sgrld`)."""


def sampler_keywords(kind: str) -> dict[str, Any]:
    """The keyword options of the sampler ``kind`` that ``[sampler]`` sets, with their defaults
    (all but ``num_data``, the training-set size, and ``metric``, built from its name).

    Example:
        >>> sorted(sampler_keywords("sgnht"))
        ['diffusion', 'learning_rate', 'temperature']
    """
    signature = inspect.signature(SAMPLERS[kind]).parameters
    return {
        name: p.default
        for name, p in signature.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("num_data", "metric")
    }


def sampler_bounds(kind: str) -> dict[str, Any]:
    """The ranges (:class:`sgrld.numerics.checks.Bound`) of the numeric options of the sampler
    ``kind``, as its module declares and its factory checks them (``BOUNDS``).

    Example:
        >>> sampler_bounds("sgnht")["diffusion"].text()
        'in (0, 1]'
    """
    return inspect.getmodule(SAMPLERS[kind]).BOUNDS


MODEL_KINDS = ("mlp", "cnn", "regression_mlp", "resnet20", "logistic_regression")
"""``model.kind``: built by :mod:`sgrld_app.from_config`."""

CONVOLUTIONS = ("auto", "xla", "im2col")
"""``model.conv``: :data:`sgrld.bnn.convolutions.CONVOLUTIONS`, named here without importing
Flax."""
