"""Symmetric matrix powers from an eigendecomposition, and their derivative (Daleckii–Krein).

Shampoo needs ``(H + ridge)^p`` for p = −1/(2k) and −1/(4k) of positive semi-definite statistics H,
and the Γ correction needs the derivative of that map. Both are computed from one cached
eigendecomposition ``H = Q diag(λ) Qᵀ``:

    f(H)        = Q diag(f(λ)) Qᵀ,
    D f(H)[E]   = Q (K ∘ (Qᵀ E Q)) Qᵀ,
    K_ij        = (f(λ_i) − f(λ_j)) / (λ_i − λ_j)   (f′(λ_i) if λ_i ≈ λ_j),

the Daleckii–Krein formula, which, unlike differentiating ``jnp.linalg.eigh``, is finite for
repeated eigenvalues.

The module also keeps batched LAPACK calls from running at once, which deadlocks XLA's CPU runtime
on two cores: :func:`one_after_another` orders one function's calls (Shampoo's decompositions),
:func:`one_matrix_at_a_time` splits a vmapped call into calls on one matrix each on the CPU (the
full Fisher metric's Cholesky factorisation and solves over chains), and batches them elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp

from sgrld.numerics.pytrees import PyTree


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


def one_after_another(fn: Callable[..., PyTree], inputs: Sequence[tuple]) -> list[PyTree]:
    """``[fn(*args) for args in inputs]``, each call made to wait for the one before it.

    Each call's last argument gets ``0·|t|`` subtracted, ``t`` a finite number taken from the
    previous call's output: exact (``x − (+0) = x`` for every float, the sign of a zero kept), but
    a data dependency XLA keeps (it folds ``x·0`` only for integers, because of NaN), so it never
    runs two of the calls at once. On CPU this is required, not an optimisation, for calls of
    jaxlib's batched LAPACK kernels (``eigh``, ``potrf``, ``trsm``): each spreads its batch over
    XLA's intra-op thread pool and blocks its thread until the batch is done; two or more running
    concurrently on a machine with two cores can occupy every pool thread, and the program
    deadlocks (seen with jaxlib 0.10.2 on 2 cores, with any setting of ``OPENBLAS_NUM_THREADS``
    and of XLA's scheduler; an ``optimization_barrier`` does not help, XLA removes it before
    scheduling).

    Args:
      fn: a function of arrays whose first output leaf holds floats.
      inputs: the argument tuples of the calls, in order; each last argument a float array.

    Returns:
      The outputs, in the order of ``inputs``.

    Example:
      >>> import jax.numpy as jnp
      >>> calls = [(jnp.eye(2), jnp.ones(2)), (jnp.eye(1), -jnp.ones(1))]
      >>> one_after_another(lambda a, b: a @ b, calls)
      [Array([1., 1.], dtype=float32), Array([-1.], dtype=float32)]
    """
    out, token = [], None
    for args in inputs:
        *rest, last = args
        if token is not None:
            last = last - 0 * jnp.abs(token).astype(last.dtype)
        result = fn(*rest, last)
        first = jax.tree.leaves(result)[0].ravel()[0]
        token = jnp.where(jnp.isfinite(first), first, 0)
        out.append(result)
    return out


def ridged_eighs(mats: list[jax.Array], eps: float) -> list[tuple[jax.Array, jax.Array, jax.Array]]:
    """:func:`ridged_eigh` of several batches of matrices, one after the other
    (:func:`one_after_another`).

    Shampoo refreshes the roots of many factors in one step: run at once, their batched ``eigh``
    calls deadlock XLA's CPU runtime on two cores. Each batched call still uses every core, so the
    cost of the order is small.

    Example:
      >>> import jax.numpy as jnp
      >>> [(q.shape, bool(ok)) for q, _, ok in ridged_eighs([jnp.eye(2), jnp.eye(3)], eps=0.0)]
      [((2, 2), True), ((3, 3), True)]
    """
    return one_after_another(lambda mat: ridged_eigh(mat, eps), [(mat,) for mat in mats])


def one_matrix_at_a_time(fn: Callable[..., PyTree]) -> Callable[..., PyTree]:
    """``fn``, whose first argument is a matrix, such that ``jax.vmap`` over matrices makes one
    call per matrix, one after the other (:func:`one_after_another`), not one batched LAPACK call,
    on the CPU; on other backends (GPU, TPU), whose solvers do not share XLA's CPU thread pool,
    ``vmap`` batches the matrices as it would batch ``fn`` (``jax.lax.platform_dependent``).

    :func:`one_after_another` orders calls that one function makes; it cannot order calls that
    nothing connects, such as a sampler's ``G⁻¹g`` and ``G^{-1/2}ξ``, two solves with the same
    Cholesky factor. Vmapped over chains, those are two batched ``trsm`` calls XLA runs at once,
    and on two cores they deadlock its CPU thread pool like Shampoo's ``eigh`` calls. A call on
    one matrix does not block a pool thread (one chain does not deadlock), so neither do these
    calls. ``vmap`` over the other arguments only (several right-hand sides of one factor) keeps
    ``fn``'s own batching, which makes no batch of matrices either. Nested ``vmap`` is handled
    level by level, and ``jax.jvp`` (the Γ correction's derivative in the statistic) by the same
    wrapping of ``fn``'s JVP, so a tangent never reaches LAPACK batched over matrices; reverse mode
    is not supported (``custom_vmap`` has no transpose). Without ``vmap`` it is ``fn``.

    Args:
      fn: a function of arrays whose first argument is a matrix ``[n, n]`` (the one LAPACK
        would batch over); the last must be a float array. Under ``vmap`` each output is taken to
        depend on every argument: mapped wherever one argument is.

    Returns:
      The wrapped function (positional array arguments only).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> chol = one_matrix_at_a_time(jnp.linalg.cholesky)
      >>> jax.vmap(chol)(jnp.stack([4.0 * jnp.eye(2), jnp.eye(2)]))[:, 0, 0].tolist()
      [2.0, 1.0]
    """

    @jax.custom_jvp
    def call(*args):
        return batched(*args)

    @jax.custom_batching.custom_vmap
    def batched(*args):
        return fn(*args)

    @batched.def_vmap
    def rule(axis_size, in_batched, *args):
        if not in_batched[0]:  # right-hand sides only: fn's own batching, guarded at outer levels
            in_axes = tuple(0 if b else None for b in in_batched)
            out = one_matrix_at_a_time(jax.vmap(fn, in_axes=in_axes))(*args)
        else:  # one LAPACK call per matrix on the CPU; elsewhere fn's own batched call
            in_axes = tuple(0 if b else None for b in in_batched)

            def unrolled(*args):
                per_matrix = [
                    tuple(x[i] if b else x for x, b in zip(args, in_batched, strict=True))
                    for i in range(axis_size)
                ]
                return jax.tree.map(lambda *xs: jnp.stack(xs), *one_after_another(call, per_matrix))

            out = jax.lax.platform_dependent(*args, cpu=unrolled, default=jax.vmap(fn, in_axes))
        return out, jax.tree.map(lambda _: True, out)

    @call.defjvp
    def call_jvp(primals, tangents):
        # The tangent on its own, so that where only tangents are mapped (jax.jacfwd) the primal
        # stays unmapped; a primal nobody uses (the Γ correction's) is dropped by XLA.
        n = len(primals)
        tangent = one_matrix_at_a_time(lambda *pt: jax.jvp(fn, pt[:n], pt[n:])[1])
        return call(*primals), tangent(*primals, *tangents)

    return call


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
