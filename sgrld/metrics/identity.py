"""The identity metric: plain SGLD (Welling & Teh, 2011)."""

from __future__ import annotations

import jax.numpy as jnp

from sgrld.metrics.metric import Metric, MetricState


def identity() -> Metric:
    """The Euclidean metric ``G = I``: SGRLD with it is SGLD.

    ``G⁻¹ v = v`` and ``G^{-1/2} ξ = ξ``; the metric does not depend on θ, so Γ = 0.

    Returns:
      A :class:`~sgrld.metrics.Metric` with an empty statistic.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.identity()
      >>> s = m.init({"w": jnp.ones(3)})
      >>> m.inv(s, {"w": jnp.arange(3.0)})["w"].tolist()
      [0.0, 1.0, 2.0]

    References:
      Yu et al. (TMLR 2023), Eq. 4.
    """
    zero = jnp.zeros((), jnp.int32)
    return Metric(
        init=lambda params: MetricState(zero, (), (), zero),
        update=lambda state, grads: state._replace(count=state.count + 1),
        inv=lambda state, v: v,
        inv_sqrt=lambda state, xi: xi,
        statistic=None,
    )
