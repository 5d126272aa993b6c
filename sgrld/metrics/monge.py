"""The rank-one Monge metric of Hartmann et al. (2022), as used for SGRLD by Yu et al. (2023)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from sgrld.metrics.identity import identity
from sgrld.metrics.metric import Metric, check_decay, check_nonnegative, ema_metric
from sgrld.numerics.checks import is_traced
from sgrld.numerics.pytrees import tree_vdot

AUTO = "auto"
"""``alpha2="auto"``, the default: chosen beside a ``learning_rate="auto"`` (else 1)."""
PUBLISHED_ALPHA2 = 1.0
"""Yu et al.'s α², the metric's with a number for the learning rate."""
SEARCHED_ALPHA2 = (0.1, 0.0)
"""The α² a ``learning_rate="auto"`` search tries where α² is not given: a tenth of the published
1, and 0, the identity metric, which Yu et al. found best on the easier posteriors. The published
1 was searched too at first and lost every comparison measured (``sgrld run``: the digits at
three seeds, UCI concrete, australian, MNIST; RESULTS §33): far from the mode a large gradient
shrinks its step along itself, and a metric frozen there keeps it so (conjugate regression on
UCI concrete, σ = 1, batch 32, 8 chains from 0: whitened mean error 1,235 at α² = 1 against 11
for the identity)."""


def monge(alpha2: float | str = AUTO, decay: float | str = 0.9) -> Metric:
    """Monge metric ``G = I + α² m mᵀ`` with ``m`` the EMA of the gradient.

    ``m ← decay·m + (1 − decay)·g`` from ``m₀ = 0``; inner products run over all leaves. By
    Sherman–Morrison, with ``a = α²‖m‖²``::

        G⁻¹ v      = v − α² / (1 + a) · m ⟨m, v⟩                     (Yu et al. Eq. 5, f₋₁)
        G^{-1/2} ξ = ξ − α² / (√(1+a) (1 + √(1+a))) · m ⟨m, ξ⟩        (f₋½, rewritten)

    The second form equals the paper's ``(1/‖m‖²)((1+a)^{-1/2} − 1)`` but never divides by ‖m‖²,
    so the ‖m‖ → 0 safeguard (the value −α²/2 the authors suggest) is exact and needs no branch.
    The other safeguard, the identity-metric fallback when ‖G⁻¹g‖ is too large, is the sampler's
    ``max_drift_norm`` option.

    Args:
      alpha2: α² ≥ 0. At 0 (a number, not a traced value) the metric is the identity's,
        :func:`sgrld.metrics.identity`: no statistic to average, nothing to freeze, and Γ = 0 is
        not computed under ``correction="auto"``. ``"auto"`` (the default): chosen among
        :data:`SEARCHED_ALPHA2` beside a ``learning_rate="auto"``
        (:attr:`~sgrld.metrics.metric.Metric.searched_option`), else :data:`PUBLISHED_ALPHA2`.
      decay: EMA decay λ, in [0, 1), or :data:`~sgrld.metrics.metric.INVERSE_SQRT` (the t-th
        statistic weighted 1/√t).

    Returns:
      The metric; its statistic is ``s(g) = g`` (α² = 0: the identity, no statistic).

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.monge(alpha2=1.0, decay=0.0)
      >>> s = m.update(m.init(jnp.zeros(2)), jnp.array([1.0, 0.0]))
      >>> m.inv(s, jnp.array([1.0, 1.0])).tolist()
      [0.5, 1.0]
      >>> sgrld.metrics.monge().searched_option[:2]  # α² not given: chosen beside an "auto" rate
      ('alpha2', (0.1, 0.0))

    References:
      Hartmann, Girolami & Klami (AISTATS 2022); Yu et al. (TMLR 2023), Sec. 3.1, Eq. 5.
    """
    if isinstance(alpha2, str):
        if alpha2 != AUTO:
            raise ValueError(f'alpha2 must be a number >= 0 or "auto", got {alpha2!r}')
        searched = ("alpha2", SEARCHED_ALPHA2, partial(monge, decay=decay))
        return monge(PUBLISHED_ALPHA2, decay)._replace(searched_option=searched)
    alpha2 = check_nonnegative(alpha2, "alpha2")
    check_decay(decay)
    if not is_traced(alpha2) and alpha2 == 0.0:
        return identity()

    def rank_one(coefficient):
        def fn(stat, cache, v):
            a = alpha2 * tree_vdot(stat, stat)
            c = coefficient(a) * tree_vdot(stat, v)
            return jax.tree.map(lambda x, m: x + (c * m).astype(x.dtype), v, stat)

        return fn

    return ema_metric(
        statistic=lambda g: g,
        init_stat=lambda params: jax.tree.map(jnp.zeros_like, params),
        decay=decay,
        inv=rank_one(lambda a: -alpha2 / (1.0 + a)),
        inv_sqrt=rank_one(lambda a: -alpha2 / (jnp.sqrt(1.0 + a) * (1.0 + jnp.sqrt(1.0 + a)))),
    )
