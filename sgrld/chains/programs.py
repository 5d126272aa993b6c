"""Programs built once per caller's objects: :func:`kept` keeps what a builder of jitted
functions returns, so that ``sgrld.sample`` with ``learning_rate="auto"``, called again with the
same sampler and batch function, compiles its search again no more than its run (``jax.jit``
keys its compilations by function object, and a builder makes a new one at every call)."""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from typing import Any

KEPT = 8
"""How many argument tuples each builder keeps its program for (least recently used first out)."""

_VALUES = (bool, int, float, str, type(None))


def kept(builder: Callable[..., Any]) -> Callable[..., Any]:
    """``builder`` whose result is kept for the last :data:`KEPT` argument tuples: numbers and
    strings compared by value, every other argument by identity (as ``jax.jit`` compares
    functions), and held, so that an identity is never another object's.

    Example:
      >>> calls = []
      >>> @kept
      ... def build(fn, n):
      ...     calls.append(n)
      ...     return lambda x: fn(x) * n
      >>> f = abs
      >>> build(f, 2) is build(f, 2), build(f, 2) is build(f, 3), calls
      (True, False, [2, 3])
    """
    programs: collections.OrderedDict[tuple, tuple[tuple, Any]] = collections.OrderedDict()

    @functools.wraps(builder)
    def build(*args: Any) -> Any:
        key = tuple((type(a), a) if isinstance(a, _VALUES) else id(a) for a in args)
        held = programs.get(key)
        if held is not None and all(
            a is b for a, b in zip(held[0], args, strict=True) if not isinstance(a, _VALUES)
        ):
            programs.move_to_end(key)
            return held[1]
        program = builder(*args)
        programs[key] = (args, program)
        while len(programs) > KEPT:
            programs.popitem(last=False)
        return program

    return build
