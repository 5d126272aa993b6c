"""A traced log-likelihood as a flat program: :func:`trace` reads ``loglik_fn(params, batch)``'s
jaxpr, calls to jitted functions inlined, into a :class:`Program` of primitive applications
(:class:`Node`), and :func:`run` evaluates it, with chosen nodes' outputs shifted and operands
recorded. :mod:`sgrld.numerics.jaxpr_taps` finds the per-example fast path on it.

Example:
  >>> import jax.numpy as jnp
  >>> program = trace(lambda p, b: b * p, jnp.ones(()), jnp.arange(3.0))
  >>> [node.primitive.name for node in program.nodes]
  ['mul']
  >>> run(program, [jnp.float32(2.0), jnp.arange(3.0)], {}, {})[0][0].tolist()
  [0.0, 2.0, 4.0]
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.extend.core import Literal

_INLINED = ("pjit", "jit", "closed_call", "core_call", "checkpoint", "remat")
"""Call primitives whose body is inlined into the program."""


class Const(NamedTuple):
    """A literal or a closed-over constant of the traced program."""

    value: Any


class Node(NamedTuple):
    """One primitive application: its inputs (value keys or :class:`Const`) and output keys."""

    primitive: Any
    params: dict
    ins: tuple
    outs: tuple


class Program(NamedTuple):
    """A traced log-likelihood: its nodes, its inputs' and outputs' keys, every value's aval."""

    nodes: tuple[Node, ...]
    ins: tuple[int, ...]
    outs: tuple
    avals: dict


def trace(loglik_fn, params, batch) -> Program:
    """The flat :class:`Program` of ``loglik_fn(params, batch)``: its inputs are the leaves of
    ``params`` and then those of ``batch``."""
    closed = jax.make_jaxpr(loglik_fn)(params, batch)
    return program_of(closed.jaxpr, closed.consts)


def program_of(jaxpr, consts) -> Program:
    """The flat :class:`Program` of ``jaxpr`` with its constants ``consts``."""
    avals: dict = {}
    counter = itertools.count()
    ins = tuple(next(counter) for _ in jaxpr.invars)
    for k, v in zip(ins, jaxpr.invars, strict=True):
        avals[k] = v.aval
    nodes: list[Node] = []
    outs = _flatten(jaxpr, [Const(c) for c in consts], list(ins), nodes, avals, counter)
    return Program(tuple(nodes), ins, tuple(outs), avals)


def inner_jaxpr(params):
    """The jaxpr and constants of an inlined call's parameters."""
    inner = params.get("jaxpr", params.get("call_jaxpr", params.get("fun_jaxpr")))
    return (inner.jaxpr, inner.consts) if hasattr(inner, "consts") else (inner, ())


def _flatten(jaxpr, consts, ins, nodes, avals, counter):
    """Append ``jaxpr``'s equations to ``nodes`` (calls inlined); return its outputs' keys."""
    env = dict(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, ins, strict=True))
    read = lambda v: Const(v.val) if isinstance(v, Literal) else env[v]
    for eqn in jaxpr.eqns:
        args = [read(v) for v in eqn.invars]
        if eqn.primitive.name in _INLINED:
            inner, inner_consts = inner_jaxpr(eqn.params)
            outs = _flatten(inner, [Const(c) for c in inner_consts], args, nodes, avals, counter)
        else:
            outs = [next(counter) for _ in eqn.outvars]
            for k, v in zip(outs, eqn.outvars, strict=True):
                avals[k] = v.aval
            nodes.append(Node(eqn.primitive, dict(eqn.params), tuple(args), tuple(outs)))
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def shape_of(program: Program, key) -> tuple[int, ...]:
    """The shape of the value ``key`` (a key of ``program.avals`` or a :class:`Const`)."""
    return tuple(jnp.shape(key.value)) if isinstance(key, Const) else program.avals[key].shape


def run(program: Program, args, perturbations: dict, record: dict):
    """The program's outputs on the flat ``args``, each node of ``perturbations`` with its
    output shifted by it, and the operand ``record[i]`` of each node ``i`` of ``record``."""
    env = dict(zip(program.ins, args, strict=True))
    read = lambda k: k.value if isinstance(k, Const) else env[k]
    recorded = {}
    for i, node in enumerate(program.nodes):
        vals = [read(k) for k in node.ins]
        if i in record:
            recorded[i] = vals[record[i]]
        out = node.primitive.bind(*vals, **node.primitive.get_bind_params(node.params))
        out = list(out) if node.primitive.multiple_results else [out]
        if i in perturbations:
            out[0] = out[0] + perturbations[i]
        env.update(zip(node.outs, out, strict=True))
    return [read(k) for k in program.outs], recorded
