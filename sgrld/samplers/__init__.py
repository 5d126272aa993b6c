"""Layer 3, samplers: ``init`` / ``step(key, state, batch) -> (state, info)`` for every sampler.

SGRLD and its :class:`~sgrld.samplers.contract.Sampler` contract, SGHMC, SGNHT, i-SGD,
Adam-SGLD and the approximate-inference baselines.
"""

from sgrld.samplers import (
    adam_sgld,
    assembly,
    baselines,
    isgd,
    momentum,
    sampler,
    sghmc,
    sgnht,
    swept,
)

__all__ = [
    "adam_sgld",
    "assembly",
    "baselines",
    "isgd",
    "momentum",
    "sampler",
    "sghmc",
    "sgnht",
    "swept",
]
