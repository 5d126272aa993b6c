"""Symmetric matrix powers from an eigendecomposition, and their derivative (Daleckii–Krein).

Shampoo needs ``(H + ridge)^p`` for p = −1/(2k) and −1/(4k) of positive semi-definite statistics H,
and the Γ correction needs the derivative of that map. Both are computed from one cached
eigendecomposition ``H = Q diag(λ) Qᵀ``:

    f(H)        = Q diag(f(λ)) Qᵀ,
    D f(H)[E]   = Q (K ∘ (Qᵀ E Q)) Qᵀ,
    K_ij        = (f(λ_i) − f(λ_j)) / (λ_i − λ_j)   (f′(λ_i) if λ_i ≈ λ_j),

the Daleckii–Krein formula, which, unlike differentiating ``jnp.linalg.eigh``, is finite for
repeated eigenvalues.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def ridged_eigh(mat: jax.Array, eps: float) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Eigendecomposition of a batch of symmetric PSD matrices with a relative ridge.

    Eigenvalues are clipped at 0 and raised by ``eps·λ_max + tiny`` (``tiny`` the smallest normal
    number of the dtype, so an all-zero block stays finite).

    Args:
      mat: ``[..., n, n]`` symmetric matrices.
      eps: ridge relative to the largest eigenvalue of each matrix.

    Returns:
      ``(Q, lam, ok)``: eigenvectors ``[..., n, n]`` (columns), ridged eigenvalues ``[..., n]`` and
      a boolean ``[...]`` that is False where the decomposition is not finite.

    Example:
      >>> import jax.numpy as jnp
      >>> q, lam, ok = ridged_eigh(jnp.diag(jnp.array([4.0, 1.0])), eps=0.0)
      >>> sorted(lam.tolist()), bool(ok)
      ([1.0, 4.0], True)
    """
    sym = 0.5 * (mat + jnp.swapaxes(mat, -1, -2))
    lam, q = jnp.linalg.eigh(sym)
    top = jnp.maximum(lam[..., -1:], 0.0)
    lam = jnp.maximum(lam, 0.0) + eps * top + jnp.finfo(lam.dtype).tiny
    ok = jnp.all(jnp.isfinite(lam), axis=-1) & jnp.all(jnp.isfinite(q), axis=(-2, -1))
    return q, lam, ok


def ridged_eighs(mats: list[jax.Array], eps: float) -> list[tuple[jax.Array, jax.Array, jax.Array]]:
    """:func:`ridged_eigh` of several batches of matrices, one after the other.

    Each decomposition's input gets ``0·t`` added, ``t`` a finite number taken from the previous
    decomposition's output: exact (``0·t = 0``), but a data dependency XLA keeps (it folds
    ``x·0`` only for integers, because of NaN), so it never runs two decompositions at once. On
    CPU this is required, not an optimisation: jaxlib's batched ``eigh`` spreads its batch over
    XLA's intra-op thread pool and blocks its thread until the batch is done; two or more running
    concurrently on a machine with two cores (Shampoo refreshes the roots of many factors in one
    step) can occupy every pool thread, and the step deadlocks (seen with jaxlib 0.10.2 on 2
    cores, with any setting of ``OPENBLAS_NUM_THREADS`` and of XLA's scheduler; an
    ``optimization_barrier`` does not help, XLA removes it before scheduling). Each batched call
    still uses every core, so the cost is small.

    Example:
      >>> import jax.numpy as jnp
      >>> [(q.shape, bool(ok)) for q, _, ok in ridged_eighs([jnp.eye(2), jnp.eye(3)], eps=0.0)]
      [((2, 2), True), ((3, 3), True)]
    """
    out, token = [], None
    for mat in mats:
        if token is not None:
            mat = mat + 0 * token.astype(mat.dtype)
        q, lam, ok = ridged_eigh(mat, eps)
        first = lam.ravel()[0]
        token = jnp.where(jnp.isfinite(first), first, 0)
        out.append((q, lam, ok))
    return out


def power_from_eigh(q: jax.Array, lam: jax.Array, p: float) -> jax.Array:
    """``Q diag(λ^p) Qᵀ`` for a batch of decompositions."""
    return (q * (lam**p)[..., None, :]) @ jnp.swapaxes(q, -1, -2)


def power_tangent(
    q: jax.Array, lam: jax.Array, p: float, dmat: jax.Array, eps: float = 0.0
) -> jax.Array:
    """Directional derivative of ``H ↦ (H + eps·λ_max(H)·I)^p`` at ``H = Q diag(λ) Qᵀ`` along
    ``dmat``.

    ``lam`` are the ridged eigenvalues; the ridge's own derivative ``eps·q_maxᵀ dmat q_max`` is
    included (eigenvalues sorted ascending, as ``eigh`` returns them).

    Example:
      >>> import jax.numpy as jnp
      >>> q, lam = jnp.eye(2), jnp.array([4.0, 4.0])
      >>> power_tangent(q, lam, -0.5, jnp.eye(2)).tolist()  # d/dt (4+t)^(-1/2) = -1/16
      [[-0.0625, 0.0], [0.0, -0.0625]]
    """
    qt = jnp.swapaxes(q, -1, -2)
    inner = qt @ (0.5 * (dmat + jnp.swapaxes(dmat, -1, -2))) @ q
    return q @ power_tangent_in_eigenbasis(lam, p, inner, eps) @ qt


def power_tangent_in_eigenbasis(
    lam: jax.Array, p: float, inner: jax.Array, eps: float = 0.0
) -> jax.Array:
    """:func:`power_tangent` in the eigenbasis: ``Qᵀ D[E] Q`` from ``inner = Qᵀ E Q`` (symmetric).

    ``K ∘ (inner + eps·inner[-1, -1]·I)``, with ``K`` the Daleckii–Krein kernel of ``λ ↦ λ^p`` at
    the ridged eigenvalues ``lam`` (ascending) and the second term the ridge's derivative.

    Example:
      >>> import jax.numpy as jnp
      >>> power_tangent_in_eigenbasis(jnp.array([1.0, 4.0]), -0.5, jnp.ones((2, 2))).tolist()
      [[-0.5, -0.1666666716337204], [-0.1666666716337204, -0.0625]]
    """
    # Powers of the n eigenvalues, not of the n² pairs: the kernel is then arithmetic only.
    f, df = lam**p, p * lam ** (p - 1.0)
    li, lj = lam[..., :, None], lam[..., None, :]
    diff = li - lj
    close = jnp.abs(diff) <= 1e-6 * jnp.maximum(li, lj)
    secant = (f[..., :, None] - f[..., None, :]) / jnp.where(close, 1.0, diff)
    kernel = jnp.where(close, 0.5 * (df[..., :, None] + df[..., None, :]), secant)
    ridge = eps * inner[..., -1, -1]
    inner = inner + ridge[..., None, None] * jnp.eye(inner.shape[-1], dtype=inner.dtype)
    return kernel * inner
