"""The per-example statistics of the taps (:mod:`sgrld.numerics.jaxpr_taps`) from their inputs
``a`` and output signals δ.

* **A product at one position per example** (a dense layer on ``[B, in]``): ``gᵢ[W] = aᵢ δᵢᵀ``,
  so DOP's diagonal is ``(a²)ᵀ(δ²)/B`` and, with the bias added to its output, QDOP's bias–weight
  row ``aᵀ(δ²)/B``: one product of the size of the weight gradient each.
* **A product at several positions** (a dense layer on ``[B, *positions, in]``, a convolution,
  on its patches: :func:`sgrld.numerics.im2col.im2col_patches`): ``gᵢ[W] = Σₚ aᵢₚ δᵢₚᵀ``, whose
  cross terms count, so the per-example kernel gradients ``[B, *kernel.shape]`` are formed, in
  one product of the weight gradient's FLOPs.
* **The full statistic** ``(1/B) Σᵢ gᵢ gᵢᵀ`` takes every example's whole gradient: each tap's
  ``[B, *leaf]`` per-example gradients (:func:`tap_grads`), ``aᵢ δᵢᵀ`` summed over positions.
* **A shift or scale** (``out = x + b``, ``out = x·s``, ``b`` and ``s`` broadcast): ``gᵢ[b]`` sums
  δᵢ over the axes ``b`` is broadcast along, ``gᵢ[s]`` sums ``xᵢ·δᵢ``.

Each product is put in a canonical form first: ``a`` as ``[B, positions, K]`` (K the contracted
axes) and δ as ``[B, positions, F]`` (F the parameter's free axes), whatever the axes' order; a
statistic in ``[K, F]`` goes back to the leaf's shape by undoing the reshapes and transposes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.im2col import im2col_patches
from sgrld.numerics.jaxpr_program import shape_of
from sgrld.numerics.jaxpr_taps import BIJECTIVE, Program, Signals, Tap, uses_of
from sgrld.numerics.pytrees import PyTree

_KERNEL = re.compile(r"(kernel|weight|w)(.*)", re.IGNORECASE)
_BIAS = re.compile(r"(bias|b)(.*)", re.IGNORECASE)


def bias_pairs(tree: PyTree) -> tuple[tuple[int, int, int], ...]:
    """QDOP's slots: ``(kernel, bias, axis)`` leaf indices of every kernel and bias of one layer
    by their names, ``axis`` the kernel's axis of output units, with as many units as the bias
    has elements. Siblings named ``kernel``/``w`` (Flax, Haiku, plain JAX: ``[..., out]``) or
    ``weight`` (Equinox, PyTorch: ``[out, ...]``) and ``bias``/``b``, with the same suffix
    (``w0``/``b0``). The traced log-likelihood confirms each pair (:func:`bias_units`).

    Example:
      >>> import jax.numpy as jnp
      >>> bias_pairs({"Dense_0": {"bias": jnp.zeros(3), "kernel": jnp.zeros((2, 3))}, "s": 1.0})
      ((1, 0, 1),)
      >>> bias_pairs({"b0": jnp.zeros(3), "weight0": jnp.zeros((3, 2))})
      ((1, 0, 0),)
    """
    flat = jax.tree_util.tree_flatten_with_path(tree)[0]
    biases = {}
    for j, (path, leaf) in enumerate(flat):
        if path and (m := _BIAS.fullmatch(_key_name(path[-1]))):
            biases[(tuple(path[:-1]), m[2])] = (j, jnp.shape(leaf))
    pairs = []
    for i, (path, leaf) in enumerate(flat):
        m = _KERNEL.fullmatch(_key_name(path[-1])) if path else None
        j, bias = biases.get((tuple(path[:-1]), m[2]), (None, ())) if m else (None, ())
        kernel = jnp.shape(leaf)
        axis = 0 if m and m[1].lower() == "weight" else len(kernel) - 1
        one_axis = len(bias) >= 1 and sum(n > 1 for n in bias) <= 1  # [out], [out, 1, 1]
        if j is not None and len(kernel) >= 2 and one_axis and math.prod(bias) == kernel[axis]:
            pairs.append((i, j, axis))
    return tuple(pairs)


def _key_name(key) -> str:
    """A path entry's name: a dict key's or an attribute's (``""`` for others)."""
    name = getattr(key, "key", getattr(key, "name", ""))
    return name if isinstance(name, str) else ""


def bias_units(program: Program, taps) -> set[tuple[int, int, int]]:
    """``(kernel, bias, axis)`` of every shift tap added to a product tap's output (through
    reshapes and transposes) along the output units that the kernel leaf's ``axis`` indexes:
    QDOP's bias–weight pairs, as the model computes them. A bias of one unit pairs with every
    kernel axis of one unit that reaches the output."""
    uses, adds = uses_of(program), {t.node: t for t in taps if t.kind == "add"}
    found = set()
    for k in (t for t in taps if t.kind in ("dot", "conv")):
        key, units = program.nodes[k.node].outs[0], _unit_axes(program, k)
        while units and len(uses.get(key, ())) == 1 and uses[key][0][0] >= 0:
            n, pos = uses[key][0]
            node = program.nodes[n]
            if n in adds and adds[n].pos == 1 - pos:
                b = adds[n]
                shape = program.avals[program.ins[b.leaf]].shape
                if math.prod(shape) == 1:
                    out = program.avals[node.outs[0]].shape
                    found.update((k.leaf, b.leaf, a) for j, a in units.items() if out[j] == 1)
                elif (j := _bias_axis(program, b, shape)) in units:
                    found.add((k.leaf, b.leaf, units[j]))
                break
            if node.primitive.name not in BIJECTIVE:
                break
            units = {m: a for j, a in units.items() if (m := _moved(program, node, j)) is not None}
            key = node.outs[0]
    return found


def _moved(program: Program, node, j: int) -> int | None:
    """Where axis ``j`` of a reshape's, transpose's, conversion's or broadcast's first operand
    is in its output (``None``: merged or split)."""
    name, p = node.primitive.name, node.params
    shape, out = shape_of(program, node.ins[0]), program.avals[node.outs[0]].shape
    if name == "transpose":
        return list(p["permutation"]).index(j)
    if name == "broadcast_in_dim":
        m = p["broadcast_dimensions"][j]
        return m if out[m] == shape[j] else None
    if name in ("reshape", "squeeze"):
        before = math.prod(shape[:j])
        return next(
            (m for m in range(len(out)) if out[m] == shape[j] and math.prod(out[:m]) == before),
            None,
        )
    return j


def _unit_axes(program: Program, tap: Tap) -> dict:
    """``{output axis: kernel leaf axis}`` of a product tap's output units (its parameter's free
    axes; a convolution's output features)."""
    node = program.nodes[tap.node]
    shape = program.avals[program.ins[tap.leaf]].shape
    operand = {}
    for a in range(len(shape)):
        j = a
        for n in tap.chain:
            j = None if j is None else _moved(program, program.nodes[n], j)
        if j is not None:
            operand[j] = a
    if tap.kind == "conv":
        _, rhs, out = node.params["dimension_numbers"]
        return {out[1]: operand[rhs[0]]} if rhs[0] in operand else {}
    (lc, rc), _ = node.params["dimension_numbers"]
    contract = (lc, rc)[tap.pos]
    free = [i for i in range(len(shape_of(program, node.ins[tap.pos]))) if i not in contract]
    offset = 0 if tap.pos == 0 else len(shape_of(program, node.ins[0])) - len(lc)
    return {offset + free.index(j): a for j, a in operand.items() if j in free}


def _bias_axis(program: Program, tap: Tap, shape) -> int | None:
    """The axis of a shift tap's output along which its leaf's one axis longer than 1 runs."""
    long = [a for a, n in enumerate(shape) if n > 1]
    j = long[0] if len(long) == 1 else None
    for n in (*tap.chain, *(() if tap.broadcast is None else (tap.broadcast,))):
        j = None if j is None else _moved(program, program.nodes[n], j)
    return j


def at_least_float32(x: jax.Array) -> jax.Array:
    """``x`` in at least float32: bfloat16, float16 and integers become float32, float64 stays.

    Example:
      >>> import jax.numpy as jnp
      >>> at_least_float32(jnp.ones(2, jnp.bfloat16)).dtype, at_least_float32(jnp.arange(2)).dtype
      (dtype('float32'), dtype('float32'))
    """
    return jnp.asarray(x, jnp.promote_types(x.dtype, jnp.float32))


def _split(x: jax.Array, axis: int, size: int) -> tuple[jax.Array, Callable[[int], int]]:
    """``x`` with its example axis ``axis`` (of ``size·r``) split in ``(size, r)`` in place, and
    where each old axis went (the example axis: to its remainder ``r``, after ``size``)."""
    x = x.reshape(*x.shape[:axis], size, x.shape[axis] // size, *x.shape[axis + 1 :])
    return x, lambda i: i + (i >= axis)


def _canonical_dot(program: Program, tap: Tap, a, delta, size):
    """``(a [B, P, K], δ [B, P, F], to_param)`` of a ``dot_general`` tap; ``to_param(x, lead)``
    lays ``x [*lead, K, F]`` out as the parameter operand ``[*lead, *shape]``."""
    node = program.nodes[tap.node]
    (lc, rc), _ = node.params["dimension_numbers"]
    a_contract, p_contract = (rc, lc) if tap.pos == 0 else (lc, rc)
    p_shape = program.avals[node.ins[tap.pos]].shape
    a_free = [i for i in range(a.ndim) if i not in a_contract]
    p_free = [i for i in range(len(p_shape)) if i not in p_contract]
    d, o = tap.axes
    a, at = _split(a, d, size)
    order = [d, *(at(i) for i in a_free), *(at(i) for i in a_contract)]
    a = jnp.transpose(a, order).reshape(size, -1, _prod(p_shape, p_contract))
    first = len(p_free) if tap.pos == 0 else 0
    out_a = range(first, first + len(a_free))
    out_p = [j for j in range(delta.ndim) if j not in out_a]
    delta, dt = _split(delta, o, size)
    order = [o, *(dt(j) for j in out_a), *(dt(j) for j in out_p)]
    delta = jnp.transpose(delta, order).reshape(size, a.shape[1], -1)
    dims = [*p_contract, *p_free]
    return a, delta, _Layout(tuple(p_shape[i] for i in dims), _inverse(dims))


def _canonical_conv(program: Program, tap: Tap, a, delta, size):
    """:func:`_canonical_dot` of a convolution's kernel, on the patches of its input."""
    node = program.nodes[tap.node]
    p = node.params
    lhs, rhs, out = p["dimension_numbers"]
    k_shape = program.avals[node.ins[1]].shape
    window = [k_shape[i] for i in rhs[2:]]
    a = jnp.transpose(a, (lhs[0], *lhs[2:], lhs[1]))
    a = im2col_patches(a, window, p["window_strides"], p["padding"])
    a = a.reshape(size, -1, a.shape[-1])
    delta = jnp.transpose(delta, (out[0], *out[2:], out[1])).reshape(size, a.shape[1], -1)
    dims = [*rhs[2:], rhs[1], rhs[0]]
    return a, delta, _Layout((*window, k_shape[rhs[1]], k_shape[rhs[0]]), _inverse(dims))


def _inverse(dims: list[int]) -> tuple[int, ...]:
    """The permutation that puts axes laid out in the order ``dims`` back in order 0, 1, …"""
    return tuple(dims.index(i) for i in range(len(dims)))


class _Layout(NamedTuple):
    """``to_param(x, lead)``: ``x [*lead, K, F]`` laid out as the parameter operand
    ``[*lead, *shape]``, reshaped to ``shape`` (the operand's axes in the order contracted, then
    free) and transposed by ``perm``."""

    shape: tuple[int, ...]
    perm: tuple[int, ...]

    def __call__(self, x: jax.Array, lead: int) -> jax.Array:
        x = x.reshape(*x.shape[:lead], *self.shape)
        return jnp.transpose(x, [*range(lead), *(lead + i for i in self.perm)])

    def outer(self, x: jax.Array, y: jax.Array) -> jax.Array:
        """``Σ_b x_b y_bᵀ`` (``x [B, K]``, ``y [B, F]``) in the parameter's layout; a weight
        ``[F, K]`` (Equinox's ``[out, in]``) gets its product in that order from the dot itself,
        not transposed after it (a strided copy in every reader of it)."""
        if self.perm == (1, 0):
            return jnp.einsum("bk,bf->fk", x, y)
        return self(jnp.einsum("bk,bf->kf", x, y), 0)


def _prod(shape, dims) -> int:
    out = 1
    for i in dims:
        out *= shape[i]
    return out


def pull(program: Program, chain, x: jax.Array, lead: int) -> jax.Array:
    """``x [*lead, *operand]``, laid out as a node's operand, back in its leaf's shape through
    the reshapes and transposes of ``chain`` (conversions keep ``x``'s dtype)."""
    for n in reversed(chain):
        node = program.nodes[n]
        if node.primitive.name == "transpose":
            perm = node.params["permutation"]
            inverse = [perm.index(i) for i in range(len(perm))]
            x = jnp.transpose(x, [*range(lead), *(lead + i for i in inverse)])
        else:
            x = x.reshape(*x.shape[:lead], *program.avals[node.ins[0]].shape)
    return x


def _operand_grads(program: Program, tap: Tap, sig: Signals, size: int) -> jax.Array:
    """``[B, *leaf]``: the per-example gradients of a shift's or scale's leaf."""
    node = program.nodes[tap.node]
    g = at_least_float32(sig.deltas[tap.delta])
    if tap.kind == "mul":
        g = g * at_least_float32(sig.inputs[tap.node])
    g, _ = _split(g, tap.axes[1], size)
    g = jnp.moveaxis(g, tap.axes[1], 0)
    shape = program.avals[node.ins[tap.pos]].shape
    if not shape:
        return pull(program, tap.chain, g.sum(axis=tuple(range(1, g.ndim))), 1)
    keep = [j for j in range(len(shape)) if shape[j] == 1 and g.shape[1 + j] != 1]
    g = g.sum(axis=tuple(1 + j for j in keep), keepdims=True)
    if tap.broadcast is not None:
        b = program.nodes[tap.broadcast]
        source, dims = program.avals[b.ins[0]].shape, b.params["broadcast_dimensions"]
        kept = [dims[k] for k in range(len(source)) if source[k] == g.shape[1 + dims[k]]]
        g = g.sum(axis=tuple(1 + j for j in range(len(shape)) if j not in kept))
        g = g.reshape(size, *source)
    return pull(program, tap.chain, g, 1)


def _canonical(program: Program, tap: Tap, sig: Signals, size: int, cut: int):
    """``(a [cut, P, K], δ [cut, P, F], to_param)`` of a ``dot``/``conv`` tap (the first ``cut``
    of the minibatch's ``size`` examples), in at least float32."""
    canonical = _canonical_conv if tap.kind == "conv" else _canonical_dot
    a, d, to_param = canonical(program, tap, sig.inputs[tap.node], sig.deltas[tap.delta], size)
    return at_least_float32(a[:cut]), at_least_float32(d[:cut]), to_param


def _product_grads(program: Program, tap: Tap, a, d, to_param) -> jax.Array:
    """``[B, *leaf]``: the per-example gradients ``gᵢ = Σₚ aᵢₚ δᵢₚᵀ`` of a product's leaf."""
    return pull(program, tap.chain, to_param(jnp.einsum("bpk,bpf->bkf", a, d), 1), 1)


def tap_grads(program: Program, taps, sig: Signals, size: int, cut: int) -> dict:
    """``[cut, *leaf]``: the per-example gradients of every tap's leaf, by leaf index, for the
    first ``cut`` of the minibatch's ``size`` examples (the full statistic's columns)."""
    grads = {}
    for t in taps:
        if t.kind in ("dot", "conv"):
            grads[t.leaf] = _product_grads(program, t, *_canonical(program, t, sig, size, cut))
        else:
            grads[t.leaf] = _operand_grads(program, t, sig, size)[:cut]
    return grads


def _product_terms(program, tap, sig, w, size, cut, cross):
    """``(diag, per-example grads or None, cross row or None)`` of a ``dot``/``conv`` tap: DOP's
    diagonal of its leaf; its ``[B, *leaf]`` gradients at several positions or for
    ``cross="grads"``; the bias–weight row ``aᵀ(δ²)`` at one position for ``cross="fast"``. The
    first ``cut`` of the minibatch's ``size`` examples enter the statistic."""
    a, d, to_param = _canonical(program, tap, sig, size, cut)
    if a.shape[1] == 1 and cross != "grads":  # one position: products of squares
        a, d2 = a[:, 0], w[:, None] * jnp.square(d[:, 0])
        diag = pull(program, tap.chain, to_param.outer(a * a, d2) / cut, 0)
        row = to_param.outer(a, d2) / cut if cross == "fast" else None
        return diag, None, row
    g = _product_grads(program, tap, a, d, to_param)
    return _mean(w, jnp.square(g)), g, None


def _fast_cross(program: Program, kernel: Tap) -> bool:
    """Whether a bias–kernel pair's row is ``aᵀ(δ²)``: the kernel, itself a leaf, is a dense
    layer's with one axis of output units (``[*in, out]``, ``[out, *in]``)."""
    if kernel.kind != "dot" or kernel.chain:
        return False
    node = program.nodes[kernel.node]
    contract = node.params["dimension_numbers"][0][kernel.pos]
    return len(program.avals[node.ins[kernel.pos]].shape) == len(contract) + 1


def along(x: jax.Array, lead: int, ndim: int, axis: int) -> jax.Array:
    """A bias ``x [*lead, *bias]`` (one unit per element) as ``[*lead, 1, …, units, …, 1]``, its
    units on the kernel's ``axis`` of ``ndim``, to broadcast against the kernel."""
    shape = [1] * ndim
    shape[axis] = -1
    return x.reshape(*x.shape[:lead], *shape)


def tap_terms(qdiag: bool, program, taps, sig, w, size, cut, pairs):
    """Diagonal entries by leaf index and (``qdiag``) bias–weight rows by ``(kernel, bias,
    axis)`` pair of ``pairs`` whose leaves are both taps (pairs of :func:`bias_units`)."""
    by_leaf = {t.leaf: t for t in taps}
    pairs = [p for p in pairs if qdiag and p[0] in by_leaf and p[1] in by_leaf]
    mode = {p[0]: "fast" if _fast_cross(program, by_leaf[p[0]]) else "grads" for p in pairs}
    diag, grads, rows = {}, {}, {}
    for t in taps:
        if t.kind in ("dot", "conv"):
            diag[t.leaf], grads[t.leaf], rows[t.leaf] = _product_terms(
                program, t, sig, w, size, cut, mode.get(t.leaf)
            )
        else:
            grads.update(tap_grads(program, [t], sig, size, cut))
            diag[t.leaf] = _mean(w, jnp.square(grads[t.leaf]))
    cross = {}
    for k, b, axis in pairs:
        if rows[k] is not None:
            cross[(k, b, axis)] = rows[k]
        else:
            gk = grads[k]
            cross[(k, b, axis)] = _mean(w, gk * along(grads[b], 1, gk.ndim - 1, axis))
    return diag, cross


def _mean(w, a):
    """``(1/B) Σᵢ wᵢ aᵢ`` over the leading axis."""
    return jnp.einsum("b,b...->...", w, a) / a.shape[0]
