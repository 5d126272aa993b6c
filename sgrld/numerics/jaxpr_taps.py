"""Where the per-example gradients are cheap: the products and shifts of parameters in the traced
log-likelihood, and each one's inputs and output signals δ from one forward and backward pass.

The log-likelihood ``loglik_fn(params, batch) -> [B]`` is traced to a jaxpr (calls to jitted
functions inlined) and read as a flat program (:class:`Program`). A leaf of ``params`` is on the
fast path (a :class:`Tap`) when it reaches, through reshapes, transposes and dtype conversions
only, exactly one use of one of these kinds, whose other operand carries the examples:

* ``"dot"``: an operand of a ``dot_general`` with no batch dimensions (a dense layer, at one or
  several positions of each example; an im2col convolution);
* ``"conv"``: the kernel of a ``conv_general_dilated``, undilated and ungrouped;
* ``"add"``, ``"mul"``: an operand of an addition or product with an input of the examples,
  broadcast to it (possibly by one ``broadcast_in_dim``): a bias, a scale.

Every other leaf is used otherwise (twice, through a gather, a scan, a custom derivative, ...)
and keeps :mod:`sgrld.numerics.per_example`'s ``vmap(grad)`` fallback.

Which axis of a value indexes the examples is found by following the batch's leading axis
through the program (:func:`example_axes`): an axis whose size is ``B·k`` with the example as
its outer factor. A value reduced over the examples (batch normalisation's statistics) has no
such axis; the taps' inputs and outputs must have one.

:func:`signals` evaluates the program with a zero perturbation added to each tap's output (or
reuses that of the product a bias is added to), so that the gradient with respect to the
perturbation is the output's cotangent: the minibatch gradient, every tap's input ``a`` and δ come
from one pass. In a model whose layers couple the examples (batch normalisation over the
minibatch, as :class:`sgrld.bnn.ResNet20`), δᵢ is the gradient of the minibatch's summed
log-likelihood at example i's output, so the statistics include the coupling; the fallback
instead differentiates each example alone. Neither is the gradient of an independent example's
log-likelihood, which such a model does not have.

Example:
  >>> import jax.numpy as jnp
  >>> loglik = lambda p, b: -((b[0] @ p["w"] + p["b"])[:, 0] - b[1]) ** 2
  >>> params = {"b": jnp.zeros(1), "w": jnp.ones((2, 1))}  # leaves 0 and 1
  >>> program = trace(loglik, params, (jnp.ones((3, 2)), jnp.zeros(3)))
  >>> [(t.leaf, t.kind) for t in find_taps(program, num_params=2, size=3)]
  [(1, 'dot'), (0, 'add')]
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.jaxpr_program import (
    Const,
    Program,
    inner_jaxpr,
    program_of,
    run,
    shape_of,
)
from sgrld.numerics.jaxpr_program import trace as trace  # the taps' users trace here

UNKNOWN = "unknown"
"""The layout of a value that depends on the examples along no single axis."""
_CUSTOM = ("custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr")
BIJECTIVE = ("reshape", "transpose", "convert_element_type", "squeeze", "copy", "copy_p")
_AXES_PARAMS = ("axis", "axes", "dimension", "dimensions")


class Tap(NamedTuple):
    """A leaf on the fast path.

    Attributes:
      leaf: its index among the leaves of ``params``.
      kind: ``"dot"``, ``"conv"``, ``"add"`` or ``"mul"``.
      node: the index of the node that uses it.
      pos: its operand position in that node.
      chain: the nodes of reshapes, transposes and conversions from the leaf to the node.
      broadcast: the ``broadcast_in_dim`` node between the chain and the node (``None``: none).
      delta: the node whose perturbed output's cotangent is the node's δ.
      axes: the example axes of the node's other operand and of its output.
    """

    leaf: int
    kind: str
    node: int
    pos: int
    chain: tuple[int, ...]
    broadcast: int | None
    delta: int
    axes: tuple[int, int]


def example_axes(program: Program, num_params: int, size: int) -> dict:
    """The example axis of every value: an int, ``None`` (no axis: the same for every example)
    or :data:`UNKNOWN`. The batch's inputs have it first."""
    layout: dict = {k: (None if i < num_params else 0) for i, k in enumerate(program.ins)}
    return _propagate(program, layout, size)


def _propagate(program: Program, layout: dict, size: int) -> dict:
    """``layout`` (the inputs' axes) completed node by node."""
    for node in program.nodes:
        ins = [None if isinstance(k, Const) else layout[k] for k in node.ins]
        shapes = [shape_of(program, k) for k in node.ins]
        outs = [program.avals[k].shape for k in node.outs]
        for k, axis in zip(node.outs, _rule(node, ins, shapes, outs, size), strict=True):
            layout[k] = axis
    return layout


def _rule(node, ins, shapes, outs, size) -> list:
    """The example axes of a node's outputs from its inputs'."""
    name, p = node.primitive.name, node.params
    if all(a is None for a in ins):
        return [None] * len(outs)
    if UNKNOWN in ins:
        return [UNKNOWN] * len(outs)
    d = next(a for a in ins if a is not None)
    if name == "broadcast_in_dim":
        j = p["broadcast_dimensions"][d]
        return [j if shapes[0][d] == outs[0][j] else UNKNOWN]
    if name == "reshape":
        return [_reshaped(shapes[0], outs[0], d, size)]
    if name == "transpose":
        return [list(p["permutation"]).index(d)]
    if name == "squeeze":
        return [d - sum(1 for i in p["dimensions"] if i < d)]
    if name in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin"):
        axes = p["axes"]
        return [None if d in axes else d - sum(1 for i in axes if i < d)]
    if name == "dot_general":
        return [_dot_axis(p["dimension_numbers"], ins, shapes)]
    if name == "conv_general_dilated":
        lhs, _, out = p["dimension_numbers"]
        return [out[0] if ins[0] == lhs[0] and ins[1] is None else UNKNOWN]
    if name == "gather":
        return [_gather_axis(p["dimension_numbers"], ins, shapes, outs)]
    if name.startswith(("reduce_window", "cum")):
        return [d if _window_keeps(p, d) else UNKNOWN] * len(outs)
    if name in ("slice", "pad", "dynamic_slice", "concatenate", "split"):
        return [d if _keeps(name, p, ins, shapes, outs, d) else UNKNOWN] * len(outs)
    if name in _CUSTOM:
        return _custom_axes(p, ins, size)
    return _elementwise(p, ins, shapes, outs)


def _reshaped(shape, out, d, size):
    """Where a reshape puts the example axis ``d``: the output axis with the same elements from
    it on and a size that ``size`` divides."""
    tail = math.prod(shape[d:])
    for j in range(len(out)):
        if math.prod(out[j:]) == tail and out[j] % size == 0:
            return j
    return UNKNOWN


def _dot_axis(dims, ins, shapes):
    """The example axis of a ``dot_general``'s output (free axes: lhs's, then rhs's)."""
    (lc, rc), (lb, rb) = dims
    found = []
    for side, (contract, batch) in enumerate(((lc, lb), (rc, rb))):
        d = ins[side]
        if d is None:
            continue
        if d in contract:
            found.append(None)
            continue
        if d in batch:
            found.append(list(batch).index(d))
            continue
        free = [i for i in range(len(shapes[side])) if i not in contract and i not in batch]
        offset = len(lb) + (0 if side == 0 else len(shapes[0]) - len(lc) - len(lb))
        found.append(offset + free.index(d))
    if len(found) == 2 and found[0] != found[1]:
        return UNKNOWN
    return found[0]


def _gather_axis(dims, ins, shapes, outs):
    """A gather of a table by indices of the examples (an embedding): the output's axis of the
    indices' example axis."""
    if ins[0] is not None or ins[1] in (None, len(shapes[1]) - 1):
        return UNKNOWN
    batch = [i for i in range(len(outs[0])) if i not in dims.offset_dims]
    return batch[ins[1]] if len(batch) == len(shapes[1]) - 1 else UNKNOWN


def _keeps(name, p, ins, shapes, outs, d) -> bool:
    """Whether a slice, pad, concatenation or split leaves the example axis ``d`` whole."""
    if name != "concatenate" and ins[0] != d:  # the examples in a pad value or an index
        return False
    if name == "slice":
        strides = p["strides"] or (1,) * len(shapes[0])
        full = p["start_indices"][d] == 0 and p["limit_indices"][d] == shapes[0][d]
        return full and strides[d] == 1
    if name == "pad":
        return tuple(p["padding_config"][d]) == (0, 0, 0)
    if name == "dynamic_slice":
        return p["slice_sizes"][d] == shapes[0][d]
    if name == "concatenate":
        return p["dimension"] != d and all(a in (None, d) for a in ins)
    return p["axis"] != d  # split


def _window_keeps(p, d) -> bool:
    """Whether a windowed reduction (pooling) or a cumulative one runs along other axes than
    ``d``."""
    if "axis" in p:
        return p["axis"] != d
    one = all(p[k][d] == 1 for k in ("window_dimensions", "window_strides"))
    one &= all(p.get(k, (1,) * (d + 1))[d] == 1 for k in ("base_dilation", "window_dilation"))
    return one and tuple(p["padding"][d]) == (0, 0)


def _custom_axes(params, ins, size):
    """A custom-derivative call's outputs' axes, from its primal function's program."""
    program = program_of(*inner_jaxpr(params))
    layout = _propagate(program, dict(zip(program.ins, ins, strict=True)), size)
    return [None if isinstance(k, Const) else layout[k] for k in program.outs]


def _elementwise(p, ins, shapes, outs):
    """An elementwise primitive (inputs broadcast to one output shape, nothing along an axis
    parameter) keeps the common example axis; anything else loses it."""
    if any(key in p for key in _AXES_PARAMS) or len({tuple(o) for o in outs}) != 1:
        return [UNKNOWN] * len(outs)
    out = outs[0]
    fits = all(
        len(s) == 0
        or (len(s) == len(out) and all(a in (1, b) for a, b in zip(s, out, strict=True)))
        for s in shapes
    )
    axes = {a for a, s in zip(ins, shapes, strict=True) if a is not None}
    if not fits or len(axes) != 1:
        return [UNKNOWN] * len(outs)
    d = axes.pop()
    return [d] * len(outs)


def find_taps(program: Program, num_params: int, size: int) -> list[Tap]:
    """The leaves on the fast path, by node (module docstring), each with the node whose
    perturbed output gives its δ: its own, or, for a bias added to the only use of another
    tap's output, that tap's."""
    layout = example_axes(program, num_params, size)
    uses = uses_of(program)
    found = [_tap(program, layout, uses, leaf, program.ins[leaf]) for leaf in range(num_params)]
    taps = sorted((t for t in found if t is not None), key=lambda t: t.node)
    delta_of_output: dict = {}  # a tap's output -> the node whose perturbation gives its δ
    for n, t in enumerate(taps):
        other = program.nodes[t.node].ins[1 - t.pos]
        if t.kind == "add" and other in delta_of_output and len(uses[other]) == 1:
            taps[n] = t._replace(delta=delta_of_output[other])
        delta_of_output[program.nodes[t.node].outs[0]] = taps[n].delta
    return taps


def uses_of(program: Program) -> dict:
    """Each value's uses ``(node, operand position)``; the program's outputs as node ``-1``."""
    uses: dict = {}
    for i, node in enumerate(program.nodes):
        for pos, k in enumerate(node.ins):
            if not isinstance(k, Const):
                uses.setdefault(k, []).append((i, pos))
    for k in program.outs:
        uses.setdefault(k, []).append((-1, 0))
    return uses


def _tap(program, layout, uses, leaf, key) -> Tap | None:
    """The :class:`Tap` of the leaf at ``key``, or ``None`` when it is used otherwise."""
    chain, broadcast = [], None
    while True:
        if len(uses.get(key, ())) != 1 or uses[key][0][0] < 0:
            return None
        n, pos = uses[key][0]
        node = program.nodes[n]
        name = node.primitive.name
        size_kept = math.prod(program.avals[node.outs[0]].shape) == math.prod(
            shape_of(program, key)
        )
        if broadcast is None and pos == 0 and (name in BIJECTIVE or name == "broadcast_in_dim"):
            if name in BIJECTIVE or size_kept:
                chain.append(n)
            else:
                broadcast = n
            key = node.outs[0]
            continue
        break
    kind = _kind(program, layout, node, pos, key, broadcast)
    if kind is None:
        return None
    axes = (layout[node.ins[1 - pos]], layout[node.outs[0]])
    return Tap(leaf, kind, n, pos, tuple(chain), broadcast, n, axes)


def _kind(program, layout, node, pos, key, broadcast) -> str | None:
    """What a leaf's use is (:class:`Tap`'s ``kind``), if it is on the fast path."""
    name, p = node.primitive.name, node.params
    if len(node.ins) != 2 or not isinstance(layout.get(node.outs[0]), int):
        return None
    other = node.ins[1 - pos]
    d = None if isinstance(other, Const) else layout[other]
    if not isinstance(d, int):
        return None
    if name == "dot_general" and broadcast is None:
        (lc, rc), (lb, rb) = p["dimension_numbers"]
        return "dot" if not lb and not rb and d not in (rc if pos == 0 else lc) else None
    if name == "conv_general_dilated" and broadcast is None and pos == 1:
        plain = p["feature_group_count"] == 1 and p["batch_group_count"] == 1
        plain &= all(x == 1 for x in (*p["lhs_dilation"], *p["rhs_dilation"]))
        return "conv" if plain and d == p["dimension_numbers"][0][0] else None
    if name in ("add", "mul") and program.avals[node.outs[0]].shape == shape_of(program, other):
        shape = shape_of(program, key)
        if broadcast is None:
            return name if shape == () or shape[d] == 1 else None
        source = program.avals[program.nodes[broadcast].ins[0]].shape
        dims = program.nodes[broadcast].params["broadcast_dimensions"]
        return name if all(dims[k] != d or n == 1 for k, n in enumerate(source)) else None
    return None


class Signals(NamedTuple):
    """What one pass yields: each tap's other operand by node (``a`` of a product, the factor of
    a scale), δ by perturbed node (per example: scaled to the example's own log-likelihood),
    and the per-example log-likelihoods."""

    inputs: dict
    deltas: dict
    loglik: jax.Array


def signals(program, taps, prior_term, params, batch, with_grad):
    """One forward and backward pass through the taps: ``(Û/N, ∇Û/N or None, Signals)``."""
    size = jax.tree.leaves(batch)[0].shape[0]
    outs = {t.delta: program.avals[program.nodes[t.delta].outs[0]] for t in taps}
    zeros = {n: jnp.zeros(aval.shape, aval.dtype) for n, aval in outs.items()}
    record = {t.node: 1 - t.pos for t in taps if t.kind != "add"}

    def objective(p, perturbations):
        args = [*jax.tree.leaves(p), *jax.tree.leaves(batch)]
        (ll,), inputs = run(program, args, perturbations, record)
        return -jnp.mean(ll) + prior_term(p), (ll, inputs)

    argnums = (0, 1) if with_grad else 1
    (value, (ll, inputs)), grads = jax.value_and_grad(objective, argnums, has_aux=True)(
        params, zeros
    )
    g, dperts = grads if with_grad else (None, grads)
    deltas = {n: -size * d for n, d in dperts.items()}
    return value, g, Signals(inputs, deltas, ll)
