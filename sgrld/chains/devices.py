"""Devices and hosts: the mesh that spreads chains and minibatches, and multi-process runs.

A run on several devices uses JAX's own sharding and multi-controller runtime; sgrld adds no
launcher and no communication of its own.

* **The mesh** (:func:`make_mesh`) has two axes, :data:`CHAINS` and :data:`DATA`, of sizes ``devices
  / data_parallel`` and ``data_parallel``. The chain engine (:class:`sgrld.chains.engine.Engine`)
  compiles its chunk with every leaf of the carry and the chain keys sharded over ``chains`` (their
  leading axis) and each step's minibatch, ``[K, B, ...]``, constrained to ``P("chains", "data")``:
  a chain's ``B`` examples are split over the ``data`` devices of its group, and XLA sums the
  gradient's partial sums over them (an all-reduce). The chain's noise is drawn once from its own
  key, the same on every device of its group whatever the mesh, so chains sharded over ``chains``
  alone give the unsharded run's samples bit for bit, and ``data_parallel > 1`` differs from it only
  by the order of the minibatch sums (float rounding).
* **Multi-process** (:mod:`sgrld.chains.processes`, whose functions this module also exports):
  the mesh then spans every process's devices; each process places only its own rows of the
  training set on its devices (:func:`place_rows`), all processes run the same program, and only
  process 0 (:func:`~sgrld.chains.processes.is_writer`) writes results.

Example:
    >>> mesh = make_mesh(devices=1)
    >>> dict(mesh.shape)
    {'chains': 1, 'data': 1}
    >>> check_mesh(mesh, num_chains=4, batch_size=32)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax
import numpy as np
import threadpoolctl
from jax.sharding import AxisType, Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

# the multi-process functions, also here, their former home, where the application imports them
from sgrld.chains.processes import DistributedError as DistributedError
from sgrld.chains.processes import initialize as initialize
from sgrld.chains.processes import is_writer as is_writer
from sgrld.chains.processes import multi_process as multi_process
from sgrld.numerics.pytrees import PyTree

CHAINS = "chains"
"""The mesh axis the chains are sharded over."""
DATA = "data"
"""The mesh axis a chain's minibatch is split over."""


def make_mesh(devices: int | str = "all", data_parallel: int = 1) -> Mesh:
    """A device mesh with axes ``("chains", "data")`` of shape ``(devices / D, D)``.

    Chains are sharded over ``chains`` and each chain's minibatch over ``data`` (``D`` devices per
    chain group); the run's number of chains must be a multiple of ``devices / D`` and its batch
    size a multiple of ``D`` (:func:`check_mesh`). In a multi-process run (:func:`initialize`)
    ``"all"`` means every device of every process.

    Args:
        devices: ``"all"`` (``jax.devices()``) or the number ``N`` of devices to use (the first
            ``N``).
        data_parallel: devices ``D`` that share one chain group's minibatch; ``N`` must be a
            multiple of it.

    Returns:
        A :class:`jax.sharding.Mesh` (axis types ``Auto``: XLA propagates the shardings).

    Raises:
        ValueError: ``devices`` or ``data_parallel`` is not a positive integer, exceeds the
            devices there are, or ``data_parallel`` does not divide ``devices``.

    Example:
        >>> mesh = make_mesh("all", data_parallel=1)
        >>> mesh.axis_names, mesh.devices.size == len(jax.devices())
        (('chains', 'data'), True)
    """
    available = jax.devices()
    if devices == "all":
        n = len(available)
    elif isinstance(devices, bool) or not isinstance(devices, int | np.integer) or devices < 1:
        raise ValueError(f'devices must be "all" or an integer >= 1, got {devices!r}')
    else:
        n = int(devices)
    if n > len(available):
        raise ValueError(
            f"devices = {n}, but there are {len(available)} {jax.default_backend()} device(s)"
        )
    if isinstance(data_parallel, bool) or not isinstance(data_parallel, int | np.integer):
        raise ValueError(f"data_parallel must be an integer >= 1, got {data_parallel!r}")
    if not 1 <= data_parallel <= n:
        raise ValueError(
            f"data_parallel = {data_parallel} is more than the {n} device(s) of the mesh"
        )
    if n % data_parallel:
        raise ValueError(
            f"data_parallel = {data_parallel} does not divide the {n} devices of the mesh"
        )
    shape = (n // data_parallel, int(data_parallel))
    return jax.make_mesh(
        shape, (CHAINS, DATA), (AxisType.Auto, AxisType.Auto), devices=available[:n]
    )


def check_mesh(mesh: Mesh, num_chains: int, batch_size: int | None = None) -> None:
    """Refuse chains that the mesh's ``chains`` axis does not divide, and a batch size that its
    ``data`` axis does not divide.

    Raises:
        ValueError: naming the numbers.

    Example:
        >>> check_mesh(make_mesh(1), num_chains=3, batch_size=7)
    """
    groups, parallel = mesh.shape[CHAINS], mesh.shape[DATA]
    if num_chains % groups:
        raise ValueError(
            f"{num_chains} chain(s) cannot be spread evenly over the mesh's {groups} chain groups "
            f"(devices / data_parallel = {mesh.devices.size} / {parallel}); use a multiple of "
            f"{groups} chains"
        )
    if batch_size is not None and batch_size % parallel:
        raise ValueError(
            f"batch size {batch_size} cannot be split evenly over data_parallel = {parallel} "
            f"devices; use a multiple of {parallel}"
        )


def chains_per_device(mesh: Mesh | None, num_chains: int) -> int:
    """How many chains each device runs (all of them without a mesh).

    Example:
        >>> chains_per_device(None, 8), chains_per_device(make_mesh(1), 8)
        (8, 8)
    """
    return num_chains if mesh is None else num_chains // mesh.shape[CHAINS]


def chain_sharding(mesh: Mesh, axis: int = 0) -> NamedSharding:
    """Arrays whose axis ``axis`` is the chain axis, sharded over :data:`CHAINS`.

    Example:
        >>> chain_sharding(make_mesh(1), axis=1).spec
        P(None, 'chains')
    """
    return NamedSharding(mesh, P(*(None,) * axis, CHAINS))


def replicated(mesh: Mesh) -> NamedSharding:
    """A copy on every device of the mesh.

    Example:
        >>> replicated(make_mesh(1)).spec
        P()
    """
    return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """A step's minibatches, ``[K, B, ...]``: chains over :data:`CHAINS`, examples over
    :data:`DATA`.

    Example:
        >>> batch_sharding(make_mesh(1)).spec
        P('chains', 'data')
    """
    return NamedSharding(mesh, P(CHAINS, DATA))


def constrain(mesh: Mesh | None) -> Callable[[PyTree], PyTree]:
    """``batch -> batch`` placing minibatches ``[K, B, ...]`` over the mesh's chains and data
    axes (leaves ``[K]``: over the chains), inside a jitted function; the identity without a
    mesh."""
    if mesh is None:
        return lambda batch: batch
    parallel = mesh.shape[DATA]

    def put(x):
        if x.ndim < 2:
            return jax.lax.with_sharding_constraint(x, chain_sharding(mesh))
        if x.shape[1] % parallel:
            raise ValueError(
                f"a minibatch of {x.shape[1]} examples cannot be split evenly over "
                f"data_parallel = {parallel} devices; use a multiple of {parallel}"
            )
        return jax.lax.with_sharding_constraint(x, batch_sharding(mesh))

    return lambda batch: jax.tree.map(put, batch)


def place(tree: PyTree, sharding: NamedSharding) -> PyTree:
    """Every leaf of ``tree`` (the same value on every process) put on the devices of
    ``sharding``; a leaf that already has that sharding is kept as it is. Typed PRNG keys keep
    their type. Works in a multi-process run, where ``jax.device_put`` of a host value cannot
    reach the other processes' devices.

    Example:
        >>> import jax.numpy as jnp
        >>> x = place({"w": jnp.ones((4, 2))}, chain_sharding(make_mesh(1)))["w"]
        >>> x.sharding.spec, x.shape
        (P('chains',), (4, 2))
    """

    def put(x):
        if isinstance(x, jax.Array) and x.sharding == sharding:
            return x
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            return jax.device_put(x, sharding)  # a global array: resharded on the devices
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            data = place(jax.random.key_data(x), sharding)
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
        host = np.asarray(x)
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(put, tree)


def place_rows(mesh: Mesh, data: PyTree) -> PyTree:
    """The training set on the mesh: a copy on every device in a one-process run; in a
    multi-process run its rows are split over all the devices, so that each process puts only its
    own rows on its devices (the rows are padded with zeros to a multiple of the device count; the
    engine never draws a padded row).

    Example:
        >>> import numpy as np
        >>> x, y = place_rows(make_mesh(1), (np.zeros((5, 3)), np.arange(5)))
        >>> x.shape, y.sharding.spec
        ((5, 3), P())
    """
    if not multi_process():
        return place(data, replicated(mesh))
    sharding = NamedSharding(mesh, P((CHAINS, DATA)))
    size = mesh.devices.size

    def put(x):
        host = np.asarray(x)
        rows = -(-host.shape[0] // size) * size
        shape = (rows, *host.shape[1:])

        def rows_of(index):
            part = host[index]
            want = index[0].indices(rows)
            missing = len(range(*want)) - part.shape[0]
            return np.concatenate([part, np.zeros((missing, *part.shape[1:]), host.dtype)])

        return jax.make_array_from_callback(shape, sharding, rows_of)

    return jax.tree.map(put, data)


def compiled_bytes(compiled: Any) -> int | None:
    """Device memory one device needs to run ``compiled`` (a ``jax.stages.Compiled``), from XLA's
    ``memory_analysis()``: arguments + outputs + temporaries − outputs aliased to arguments;
    ``None`` where the backend does not report it.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> compiled = jax.jit(lambda x: x * 2).lower(jnp.zeros(1000)).compile()
        >>> compiled_bytes(compiled) >= 8000  # the argument and the result, 4 kB each
        True
    """
    stats = compiled.memory_analysis()
    if stats is None:
        return None
    return int(
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )


def describe(mesh: Mesh | None) -> dict[str, Any]:
    """What a run's summary says of its devices.

    Example:
        >>> describe(None)["devices"]
        1
    """
    if mesh is None:
        return {"devices": 1, "chain_groups": 1, "data_parallel": 1, "processes": 1}
    return {
        "devices": int(mesh.devices.size),
        "chain_groups": int(mesh.shape[CHAINS]),
        "data_parallel": int(mesh.shape[DATA]),
        "processes": jax.process_count(),
        "platform": mesh.devices.flat[0].platform,
    }


@contextlib.contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Limit BLAS/LAPACK (OpenBLAS) to one thread while XLA runs on the CPU.

    XLA's CPU runtime already uses every core; a LAPACK call inside a jitted function (Shampoo's
    ``eigh``) that starts its own OpenBLAS threads oversubscribes the cores and runs up to 20x
    slower. On other backends this does nothing.
    """
    if jax.default_backend() != "cpu":
        yield
        return
    with threadpoolctl.threadpool_limits(1, user_api="blas"):
        yield
