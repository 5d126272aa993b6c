"""A network named by ``"package.module:function"``, built by the function, of any library.

The function (the *factory*) is called with the keyword arguments it names among ``key`` (a PRNG
key), ``num_outputs`` (classes, or 1 for regression) and ``input_shape`` (one example's), and
returns one of:

* a Flax Linen module (initialised by :func:`sgrld.bnn.init_params`, He or its own initialisers);
* a Flax NNX module or an Equinox model (:func:`sgrld.bnn.adapters.nnx`,
  :func:`~sgrld.bnn.adapters.equinox`), built from ``key``;
* a Haiku transform, ``hk.transform(forward)`` (:func:`sgrld.bnn.adapters.haiku`);
* a pair ``(init, apply)`` of plain functions: ``init(key) -> net_params`` and
  ``apply(net_params, x) -> outputs`` on a minibatch.

Each chain's parameters come from its own key: a factory that names ``key`` is called again with it
for an NNX module and an Equinox model (otherwise every chain starts from the same parameters).
:func:`import_factory` imports the function, from the working directory (put first on
``sys.path``, as ``python -m`` does) or the environment; :func:`network_of` builds the network and
checks its outputs on a minibatch. Every problem is a :class:`FactoryError` of one line naming
the factory.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.bnn import adapters
from sgrld.bnn.models import apply_fn, init_params
from sgrld.numerics.pytrees import PyTree

__all__ = ["FACTORY_ARGUMENTS", "FactoryError", "Network", "import_factory", "network_of"]

FACTORY_ARGUMENTS = ("key", "num_outputs", "input_shape")
"""The keyword arguments a factory may name."""


class FactoryError(ValueError):
    """A factory that cannot be imported, called, or does not build a network of the data."""


class Network(NamedTuple):
    """A network as the sampler needs it.

    Attributes:
        init: ``key -> net_params`` of one chain.
        apply: ``(net_params, x) -> outputs`` on a minibatch.
        kind: ``"linen"``, ``"nnx"``, ``"equinox"``, ``"haiku"`` or ``"function"``.
    """

    init: Callable[[jax.Array], PyTree]
    apply: adapters.ApplyFn
    kind: str


def import_factory(spec: str, cwd: str | os.PathLike[str] | None = None) -> Callable[..., Any]:
    """The function ``spec = "package.module:function"`` names, imported as ``python -m`` would.

    Args:
        spec: ``"module:attribute"``; the attribute may be dotted (``"models:Nets.small"``).
        cwd: The folder put first on ``sys.path`` (if absent); ``None``: the working directory.

    Returns:
        The function.

    Raises:
        FactoryError: If ``spec`` is malformed, its module cannot be imported, it has no such
            attribute or the attribute is not callable.

    Example:
        >>> import_factory("sgrld.bnn.models:regression_mlp")().features
        (50,)
        >>> import_factory("sgrld.bnn.models:mlp_of_mine")
        Traceback (most recent call last):
        ...
        sgrld.bnn.factory.FactoryError: model.factory = 'sgrld.bnn.models:mlp_of_mine': ...
    """
    name, colon, attribute = spec.partition(":")
    where = f"model.factory = {spec!r}"
    if not (colon and name and attribute):
        raise FactoryError(f"{where}: not of the form 'package.module:function'")
    folder = str(Path(os.getcwd() if cwd is None else cwd).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    importlib.invalidate_caches()  # a module written since the last import is found
    try:
        found: Any = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if err.name and (name == err.name or name.startswith(f"{err.name}.")):
            raise FactoryError(
                f"{where}: no module named {err.name!r} in {folder} or the environment"
            ) from None
        raise FactoryError(f"{where}: importing {name} failed: {err}") from None
    except Exception as err:  # the user's module failed: say how, in one line
        raise FactoryError(f"{where}: importing {name} failed: {_line(err)}") from None
    for part in attribute.split("."):
        if not hasattr(found, part):
            raise FactoryError(
                f"{where}: {getattr(found, '__file__', None) or name} has no {part!r}"
            )
        found = getattr(found, part)
    if not callable(found):
        raise FactoryError(f"{where}: {attribute} is a {type(found).__name__}, not a function")
    return found


def network_of(
    factory: Callable[..., Any],
    *,
    input_shape: Sequence[int],
    num_outputs: int,
    name: str | None = None,
) -> Network:
    """Build the network of a factory and check that it maps ``input_shape`` to ``num_outputs``.

    Args:
        factory: The factory (see the module docstring).
        input_shape: One example's shape, e.g. ``(13,)`` or ``(28, 28, 1)``.
        num_outputs: The outputs a minibatch row must have (classes, or 1 for regression).
        name: How messages name the factory (default: its qualified name).

    Returns:
        The :class:`Network`.

    Raises:
        FactoryError: If the factory takes other arguments, fails, returns no network, or its
            network fails on a minibatch or gives other outputs than ``(batch, num_outputs)``.

    Example:
        >>> import jax, sgrld
        >>> net = network_of(lambda num_outputs: sgrld.bnn.MLP((8,), num_outputs),
        ...                  input_shape=(5,), num_outputs=3)
        >>> net.kind, net.apply(net.init(jax.random.key(0)), jnp.ones((4, 5))).shape
        ('linen', (4, 3))
    """
    where = f"model.factory = {name or getattr(factory, '__qualname__', repr(factory))!r}"
    shape = tuple(int(d) for d in input_shape)
    arguments = {"num_outputs": num_outputs, "input_shape": shape}
    call, takes_key = _caller(factory, where, arguments)
    built = call(jax.random.key(0))
    network = _network(built, call if takes_key else None, shape, where)
    _check_outputs(network, shape, num_outputs, where)
    return network


def _caller(
    factory: Callable[..., Any], where: str, arguments: dict[str, Any]
) -> tuple[Callable[[jax.Array], Any], bool]:
    """``key -> factory(**the arguments it names)`` (a failure in it one :class:`FactoryError`),
    and whether it names ``key``."""
    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: call it bare
        parameters = []
    if any(p.kind == p.VAR_KEYWORD for p in parameters):
        named = set(FACTORY_ARGUMENTS)
    else:
        named = {p.name for p in parameters if p.name in FACTORY_ARGUMENTS}
    others = [
        p.name
        for p in parameters
        if p.name not in named
        and p.default is p.empty
        and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    if others:
        raise FactoryError(
            f"{where}: it takes {', '.join(others)}, but a factory is called with the keyword "
            f"arguments it names among {', '.join(FACTORY_ARGUMENTS)}"
        )

    def call(key: jax.Array) -> Any:
        values = {**arguments, "key": key}
        try:
            return factory(**{k: values[k] for k in named})
        except Exception as err:  # the user's factory failed: say how, in one line
            raise FactoryError(f"{where}: the factory failed: {_line(err)}") from None

    return call, "key" in named


def _network(
    built: Any, rebuild: Callable[[jax.Array], Any] | None, shape: tuple, where: str
) -> Network:
    """The :class:`Network` of what the factory returned, or a :class:`FactoryError`;
    ``rebuild(key)`` calls a factory that takes a key again."""
    from flax import linen, nnx  # Flax is the library's own; NNX is part of it

    example = jnp.zeros((1, *shape), jnp.float32)
    haiku = sys.modules.get("haiku")  # a Haiku transform or an Equinox model: it is imported
    eqx_module = getattr(sys.modules.get("equinox"), "Module", None)
    if isinstance(built, linen.Module):
        return Network(lambda key: init_params(built, key, example.shape), apply_fn(built), "linen")
    if haiku is not None and isinstance(built, haiku.Transformed):
        return Network(
            lambda key: adapters.haiku(built, key, example)[0],
            adapters.haiku(built, jax.random.key(0), example)[1],
            "haiku",
        )
    kind, adapt = None, None
    if isinstance(built, nnx.Module):
        kind, adapt = "nnx", adapters.nnx
    elif eqx_module is not None and isinstance(built, eqx_module):
        kind, adapt = "equinox", adapters.equinox
    if adapt is not None:
        net, apply = adapt(built)
        init = (lambda key: net) if rebuild is None else (lambda key: adapt(rebuild(key))[0])
        return Network(init, apply, kind)
    if isinstance(built, tuple) and len(built) == 2 and all(map(callable, built)):
        return Network(built[0], built[1], "function")
    raise FactoryError(
        f"{where}: it returned a {type(built).__module__}.{type(built).__qualname__}, not a Flax "
        "Linen or NNX module, an Equinox model, a Haiku transform or a pair (init, apply) of "
        "functions"
    )


def _check_outputs(network: Network, shape: tuple, num_outputs: int, where: str) -> None:
    """Refuse a network that fails on a minibatch of two or gives other than ``(2, outputs)``."""
    x = jax.ShapeDtypeStruct((2, *shape), jnp.float32)
    try:
        net = jax.eval_shape(network.init, jax.random.key(0))
        out = jax.eval_shape(network.apply, net, x)
    except FactoryError:
        raise
    except Exception as err:  # the user's network failed: say how, in one line
        raise FactoryError(
            f"{where}: its {network.kind} network fails on a minibatch of shape {x.shape}: "
            f"{_line(err)}"
        ) from None
    if getattr(out, "shape", None) != (2, num_outputs):
        got = getattr(out, "shape", type(out).__name__)
        raise FactoryError(
            f"{where}: its {network.kind} network maps a minibatch of shape {x.shape} to {got}, "
            f"not (2, {num_outputs}) ({num_outputs} outputs per example: the data's "
            f"{'classes' if num_outputs > 1 else 'target'})"
        )


def _line(err: BaseException) -> str:
    """``err`` as one line: its type and its message's first line."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")
