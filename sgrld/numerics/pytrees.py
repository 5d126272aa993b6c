"""The one type alias of a pytree: any nesting of tuples, lists, dicts and registered nodes with
arrays at its leaves (JAX's pytrees)."""

from typing import Any

PyTree = Any
