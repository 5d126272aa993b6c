"""Fisher metrics of natural Langevin dynamics (Marceau-Caron & Ollivier, 2017): full, DOP, QDOP.

Each averages per-example outer products of the log-likelihood's gradient
(:mod:`sgrld.numerics.per_example`),

    J ← (1 − γ_t)·J + γ_t·(1/B) Σᵢ gᵢ gᵢᵀ,     gᵢ = ∇_θ log p(ỹᵢ|xᵢ, θ),

from ``J₀ = I`` (the paper's initialisation), with ``γ_t = 1/√t`` (``decay="inverse_sqrt"``, the
paper) or ``γ_t = 1 − decay``, and ỹ the data's labels (``labels="empirical"``, the OP variant) or
drawn from the model (``"model"``, the true Fisher). The metric is ``G = J + εI`` in the full case,
and its diagonal (DOP) or quasi-diagonal (QDOP) approximation otherwise. Unlike RMSprop's squared
*mean* gradient, the per-example average does not vanish at the mode of the posterior, and it is
the natural-gradient preconditioner.

The statistic is of the likelihood only (the prior never enters, as in the authors' code), and the
potential must come from :func:`sgrld.potential`. Γ is available through the usual corrections: the
probe's tangent of the per-example statistic is one forward-over-reverse pass through the same
computation (for Dense layers, products of ``a``, ``δ`` and their tangents). Γ ∝ ∂J/(J + ε)² is
stiff where J ≪ ε: with Γ, tame its kick (:func:`sgrld.sgrld`'s ``gamma_kick_limit=1``) or take ε
larger than the authors' 1e-4 (docs/metrics.md, "Fisher metrics": on MNIST the untamed Γ at
1e-4 drifted the weights outward, the tamed one did not). A minibatch whose
statistic is not finite leaves the average unchanged and is counted in ``state.fallbacks``
(``info.metric_fallbacks``).

References:
  Marceau-Caron & Ollivier, Natural Langevin Dynamics for Neural Networks (GSI 2017), Alg. 1–4;
  Ollivier, Riemannian metrics for neural networks I (2015) for the quasi-diagonal metric.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from sgrld.metrics.metric import (
    INVERSE_SQRT,
    Metric,
    cached,
    check_nonnegative,
    ema_metric,
    leaf_mean_floor,
)
from sgrld.numerics import per_example
from sgrld.numerics.linalg import one_matrix_at_a_time
from sgrld.numerics.tap_statistics import along

_TINY = 1e-12  # the authors' floor on QDOP's Schur complement J_ii − J_0i²/J_00


def _metric(kind, labels, eps, decay, examples, init_stat, inv, inv_sqrt, **extra) -> Metric:
    """A Fisher metric of ``kind`` on the observation of :mod:`sgrld.numerics.per_example`."""
    if labels not in per_example.LABELS:
        raise ValueError(f"labels must be one of {per_example.LABELS}, got {labels!r}")
    eps = check_nonnegative(eps, "eps")
    if extra.get("whiten") is not None:
        whiten = extra["whiten"]
        extra["whiten"] = lambda stat, cache, v: whiten(eps, stat, cache, v)
    return ema_metric(
        statistic=lambda observation: observation,
        init_stat=init_stat,
        decay=decay,
        inv=lambda stat, cache, v: inv(eps, stat, cache, v),
        inv_sqrt=lambda stat, cache, xi: inv_sqrt(eps, stat, cache, xi),
        observation_fn=per_example.observation_fn(kind, labels, examples),
        skip_nonfinite=True,
        **extra,
    )


def _ones_like(params):
    return jax.tree.map(jnp.ones_like, params)


def fisher_diag(
    labels: str = "empirical",
    eps: float = 1e-4,
    decay: float | str = INVERSE_SQRT,
    examples: int | None = None,
) -> Metric:
    """Diagonal outer-product Fisher metric (DOP): ``G = diag(J) + εI``.

    ``J`` averages ``(1/B) Σᵢ gᵢ ⊙ gᵢ`` (module docstring), so ``G⁻¹v = v / (J + ε)`` and
    ``G^{-1/2}ξ = ξ / √(J + ε)``.

    Args:
      labels: ``"empirical"`` (ỹ = y) or ``"model"`` (ỹ ~ p_θ(ỹ|x), the true Fisher's diagonal).
      eps: ε ≥ 0 added to the diagonal.
      decay: a constant EMA decay in [0, 1), or ``"inverse_sqrt"`` (γ_t = 1/√t).
      examples: J averages the outer products of each minibatch's first ``examples`` examples
        only (``None``: all): an unbiased, cheaper, noisier statistic (the drift still uses the
        whole minibatch's gradient).

    Returns:
      The metric.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.fisher_diag(eps=0.0)
      >>> j = jnp.array([4.0, 0.25])  # a minibatch's (1/B) Σ gᵢ ⊙ gᵢ
      >>> state = m.update(m.init(jnp.zeros(2)), j)  # γ_1 = 1: J = j
      >>> m.inv_sqrt(state, jnp.ones(2)).tolist()  # ξ / √J
      [0.5, 2.0]

    References:
      Marceau-Caron & Ollivier (2017), Alg. 3 with the diagonal of J.
    """

    def inv(eps, stat, cache, v):
        return jax.tree.map(lambda j, x: x / (j + eps), stat, v)

    def inv_sqrt(eps, stat, cache, xi):
        return jax.tree.map(lambda j, x: x * jax.lax.rsqrt(j + eps), stat, xi)

    return _metric(
        "diag", labels, eps, decay, examples, _ones_like, inv, inv_sqrt, floor=leaf_mean_floor
    )


def _qd_init(params) -> per_example.QuasiDiagonal:
    leaves = jax.tree.leaves(params)
    cross = tuple(jnp.zeros_like(leaves[k]) for k, _, _ in per_example.bias_pairs(params))
    return per_example.QuasiDiagonal(_ones_like(params), cross)


def _qd_blocks(eps, stat, v):
    """Per bias–kernel pair: ``(k, b, units, 1/M_00, u, A_ii)`` with ``M = J + εI`` on the
    diagonal, ``u = M_0i/M_00`` and ``A_ii = r^{-1/2}``, ``r = max(M_ii − M_0i·u, tiny)`` QDOP's
    Schur complement (Alg. 4); ``units(x)``: a bias-shaped ``x`` broadcast along the kernel's
    output units, ``units.sum(y)``: a kernel-shaped ``y`` summed over each unit's weights. One
    reciprocal square root per weight serves both operators."""
    diag = jax.tree.leaves(stat.diag)
    for (k, b, axis), m0i in zip(per_example.bias_pairs(v), stat.cross, strict=True):
        units = _Units(m0i.ndim, axis, jnp.shape(diag[b]))
        inv_m00 = 1.0 / (diag[b] + eps)
        u = m0i * units(inv_m00)
        a_ii = jax.lax.rsqrt(jnp.maximum(diag[k] + eps - m0i * u, _TINY))
        yield k, b, units, inv_m00, u, a_ii


class _Units(NamedTuple):
    """A kernel's output units: ``axis`` of ``ndim``, as many as its bias's ``shape`` holds."""

    ndim: int
    axis: int
    shape: tuple[int, ...]

    def __call__(self, x):
        return along(x, 0, self.ndim, self.axis)

    def sum(self, y):
        return jnp.sum(y, axis=tuple(i for i in range(self.ndim) if i != self.axis)).reshape(
            self.shape
        )


def _qd_inv(eps, stat, cache, v):
    """``G⁻¹v = A Aᵀ v``: the authors' ``convertGradient`` in closed form, per output unit::

    w̃ = (g_w − u·g_b) / r,       b̃ = g_b / M_00 − Σ_i u_i·w̃_i.
    """
    leaves = jax.tree.leaves(v)
    out = [x / (j + eps) for j, x in zip(jax.tree.leaves(stat.diag), leaves, strict=True)]
    for k, b, units, inv_m00, u, a_ii in _qd_blocks(eps, stat, v):
        gw, gb = leaves[k], leaves[b]
        w = (gw - u * units(gb)) * jnp.square(a_ii)
        out[k], out[b] = w, gb * inv_m00 - units.sum(u * w)
    return jax.tree.unflatten(jax.tree.structure(v), out)


def _qd_inv_sqrt(eps, stat, cache, xi):
    """``A ξ`` with Alg. 4's sparse factor: ``A_00 = M_00^{-1/2}``, ``A_ii = r^{-1/2}``,
    ``A_0i = −A_00²·A_ii·M_0i = −A_ii·u``; weight noise ``A_ii ξ_i``, bias noise
    ``A_00 ξ_0 + Σ_i A_0i ξ_i``."""
    leaves = jax.tree.leaves(xi)
    diag = jax.tree.leaves(stat.diag)
    out = [x * jax.lax.rsqrt(j + eps) for j, x in zip(diag, leaves, strict=True)]
    for k, b, units, inv_m00, u, a_ii in _qd_blocks(eps, stat, xi):
        noise = a_ii * leaves[k]
        out[k] = noise
        out[b] = jnp.sqrt(inv_m00) * leaves[b] - units.sum(u * noise)
    return jax.tree.unflatten(jax.tree.structure(xi), out)


def _qd_whiten(eps, stat, cache, v):
    """``Aᵀv`` for :func:`_qd_inv_sqrt`'s factor A (:attr:`~sgrld.metrics.Metric.whiten`):
    ``A_ii·(v_i − u_i·v_0)`` for a weight, ``A_00·v_0`` for its bias; ``A(Aᵀv)`` is
    :func:`_qd_inv`'s ``G⁻¹v``."""
    leaves = jax.tree.leaves(v)
    diag = jax.tree.leaves(stat.diag)
    out = [x * jax.lax.rsqrt(j + eps) for j, x in zip(diag, leaves, strict=True)]
    for k, b, units, inv_m00, u, a_ii in _qd_blocks(eps, stat, v):
        out[k] = (leaves[k] - u * units(leaves[b])) * a_ii
        out[b] = jnp.sqrt(inv_m00) * leaves[b]
    return jax.tree.unflatten(jax.tree.structure(v), out)


def fisher_qdiag(
    labels: str = "empirical",
    eps: float = 1e-4,
    decay: float | str = INVERSE_SQRT,
    examples: int | None = None,
) -> Metric:
    """Quasi-diagonal outer-product Fisher metric (QDOP).

    For each output unit j of a layer whose bias the model adds to its kernel's product (the
    pairs of :func:`sgrld.numerics.per_example.bias_pairs`: a ``kernel`` ``[..., out]`` and a
    ``bias`` ``[out]`` as Flax's Dense and Conv, ``w0``/``b0``, Equinox's ``weight [out, ...]``),
    the block ``(b_j, kernel[..., j])`` keeps J's diagonal and its first
    row ``J_0i = (1/B) Σ g_{b_j} g_{w_ij}``; the preconditioner ``C = A Aᵀ`` uses the sparse
    Cholesky factor ``A`` of Alg. 4, whose ``C⁻¹`` has the diagonal and first row of ``J + εI``.
    Every other parameter gets DOP's diagonal.

    Args:
      labels, eps, decay, examples: as for :func:`fisher_diag`.

    Returns:
      The metric; its statistic is a :class:`sgrld.numerics.per_example.QuasiDiagonal`.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.fisher_qdiag(eps=0.0)
      >>> params = {"bias": jnp.zeros(1), "kernel": jnp.zeros((1, 1))}
      >>> state = m.init(params)._replace(stat=sgrld.numerics.per_example.QuasiDiagonal(
      ...     {"bias": jnp.ones(1), "kernel": jnp.full((1, 1), 2.0)}, (jnp.ones((1, 1)),)))
      >>> g = m.inv(state, {"bias": jnp.ones(1), "kernel": jnp.ones((1, 1))})  # [[1, 1], [1, 2]]⁻¹
      >>> g["bias"].tolist(), g["kernel"].tolist()
      ([1.0], [[0.0]])

    References:
      Marceau-Caron & Ollivier (2017), Alg. 4; Ollivier (2015); the authors' ``metriclinear.lua``.
    """
    return _metric(
        "qdiag",
        labels,
        eps,
        decay,
        examples,
        _qd_init,
        _qd_inv,
        _qd_inv_sqrt,
        floor=_qd_floor,
        whiten=_qd_whiten,
    )


def _qd_floor(stat, share):
    """QDOP's :attr:`~sgrld.metrics.Metric.floor`: its diagonal's (the block rows keep theirs,
    so each 2×2 block's Schur complement only grows)."""
    return stat._replace(diag=leaf_mean_floor(stat.diag, share))


# The factorisation and solves of one matrix at a time under vmap over chains: vmapped, a step's
# G⁻¹g and G^{-1/2}ξ are two batched trsm calls that nothing orders, and XLA's CPU runtime ran them
# at once and deadlocked on two cores (``sgrld run`` with ``chains = 2``).
_cholesky = one_matrix_at_a_time(jnp.linalg.cholesky)
_cho_solve = one_matrix_at_a_time(lambda low, b: jax.scipy.linalg.cho_solve((low, True), b))
_solve_lower_transposed = one_matrix_at_a_time(
    lambda low, b: jax.scipy.linalg.solve_triangular(low, b, lower=True, trans="T")
)
_solve_lower = one_matrix_at_a_time(
    lambda low, b: jax.scipy.linalg.solve_triangular(low, b, lower=True)
)


def _ridged_cholesky(eps, stat):
    return _cholesky(stat + eps * jnp.eye(stat.shape[0], dtype=stat.dtype))


def fisher_full(
    labels: str = "empirical",
    eps: float = 1e-4,
    decay: float | str = INVERSE_SQRT,
    examples: int | None = None,
) -> Metric:
    """The full Fisher metric ``G = J + εI`` over the flattened parameters (Alg. 3): small models.

    ``G⁻¹v`` and ``G^{-1/2}ξ = L⁻ᵀξ`` come from the Cholesky factor ``L Lᵀ = J + εI``, computed at
    every update; a factorisation that is not finite keeps the previous one and is counted in
    ``state.fallbacks``. Memory is D² and each update costs O(D³) and B per-example gradients.
    Over vmapped chains the factorisation and the solves run one chain at a time
    (:func:`sgrld.numerics.linalg.one_matrix_at_a_time`): batched, they deadlock XLA's CPU runtime
    on two cores.

    Args:
      labels, eps, decay, examples: as for :func:`fisher_diag`.

    Returns:
      The metric; its statistic is the [D, D] matrix J.

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> m = sgrld.metrics.fisher_full(eps=0.0)
      >>> state = m.init(jnp.zeros(2))
      >>> state = m.update(state, jnp.array([[2.0, 1.0], [1.0, 2.0]]))  # γ_1 = 1
      >>> m.inv(state, jnp.array([3.0, 3.0])).tolist()
      [1.0, 1.0]

    References:
      Marceau-Caron & Ollivier (2017), Alg. 3; Ahn, Korattikara & Welling (2012).
    """

    def factor(eps, stat, cache):
        return cached(lambda s: _ridged_cholesky(eps, s))(stat, cache)

    def inv(eps, stat, cache, v):
        flat, unravel = ravel_pytree(v)
        solved = _cho_solve(factor(eps, stat, cache), flat.astype(stat.dtype))
        return unravel(solved.astype(flat.dtype))

    def inv_sqrt(eps, stat, cache, xi):
        flat, unravel = ravel_pytree(xi)
        low = factor(eps, stat, cache)
        out = _solve_lower_transposed(low, flat.astype(stat.dtype))
        return unravel(out.astype(flat.dtype))

    def whiten(eps, stat, cache, v):  # Aᵀv = L⁻¹v for A = L⁻ᵀ
        flat, unravel = ravel_pytree(v)
        out = _solve_lower(factor(eps, stat, cache), flat.astype(stat.dtype))
        return unravel(out.astype(flat.dtype))

    def init_stat(params):
        size = ravel_pytree(params)[0].size
        return jnp.eye(size, dtype=per_example.full_dtype(params))

    eps_value = check_nonnegative(eps, "eps")

    def refresh(stat, old):
        new = _ridged_cholesky(eps_value, stat)
        ok = jnp.all(jnp.isfinite(new))
        return jnp.where(ok, new, old), jnp.where(ok, 0, 1).astype(jnp.int32)

    def init_cache(params):
        return _ridged_cholesky(eps_value, init_stat(params))

    return _metric(
        "full",
        labels,
        eps,
        decay,
        examples,
        init_stat,
        inv,
        inv_sqrt,
        init_cache=init_cache,
        refresh=refresh,
        floor=_full_floor,
        whiten=whiten,
    )


def _full_floor(stat, share):
    """The full Fisher's :attr:`~sgrld.metrics.Metric.floor`: a ridge of ``share`` times the mean
    of J's diagonal (every eigenvalue raised by it)."""
    ridge = share * jnp.mean(jnp.diagonal(stat))
    return stat + (ridge * jnp.eye(stat.shape[0])).astype(stat.dtype)
