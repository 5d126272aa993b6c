"""Multi-process runs: :func:`initialize` joins one (``jax.distributed.initialize``, which finds the
coordinator, the number of processes and this process's id itself on SLURM, Open MPI and TPU
pods, or takes them explicitly); :func:`multi_process` and :func:`is_writer` say what this process
is. sgrld adds no launcher and no communication of its own (:mod:`sgrld.chains.devices`).

Example:
    >>> multi_process(), is_writer()
    (False, True)
"""

from __future__ import annotations

import socket
import time

import jax


class DistributedError(RuntimeError):
    """A multi-process run that could not start: a coordinator not reached in time, bad flags."""


def multi_process() -> bool:
    """Whether this is one process of several (:func:`initialize` was called with more than one).

    Example:
        >>> multi_process()
        False
    """
    return jax.process_count() > 1


def is_writer() -> bool:
    """Whether this process writes results: process 0, the only process of a one-process run.

    Example:
        >>> is_writer()
        True
    """
    return jax.process_index() == 0


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    timeout_s: int = 300,
    heartbeat_s: int = 100,
) -> None:
    """Join a multi-process run (``jax.distributed.initialize``) before any computation.

    With no arguments JAX finds the coordinator, the number of processes and this process's id
    on SLURM, Open MPI and Cloud TPU pods; otherwise give all three. A process other than 0 first
    waits up to ``timeout_s`` seconds for the coordinator's port to accept a connection and raises
    a :class:`DistributedError` naming the address if it does not (JAX itself would abort the
    process). Once joined, a process that dies is noticed by the others within ``heartbeat_s``
    seconds (earlier, by a collective that fails), and they stop with JAX's error.

    Args:
        coordinator: ``HOST:PORT`` of process 0 (it listens there).
        num_processes: the number of processes.
        process_id: this process's id, ``0 .. num_processes − 1``.
        timeout_s: seconds to wait for the coordinator and for every process to join.
        heartbeat_s: seconds without a heartbeat after which a process counts as dead.

    Raises:
        DistributedError: the coordinator was not reached within ``timeout_s`` seconds, or the
            arguments are inconsistent.
    """
    given = [v is not None for v in (coordinator, num_processes, process_id)]
    if any(given) and not all(given):
        raise DistributedError(
            "give all of coordinator, num_processes and process_id, or none of them (then JAX "
            "finds them on SLURM, Open MPI or a TPU pod)"
        )
    if coordinator is not None:
        host, port = _address(coordinator)
        if not 0 <= process_id < num_processes:
            raise DistributedError(
                f"process_id = {process_id} is not one of 0 .. {num_processes - 1} "
                f"(num_processes = {num_processes})"
            )
        if process_id != 0:
            _wait_for(host, port, timeout_s)
    jax.distributed.initialize(
        coordinator,
        num_processes,
        process_id,
        initialization_timeout=int(timeout_s),
        heartbeat_timeout_seconds=int(heartbeat_s),
        shutdown_timeout_seconds=int(heartbeat_s),
    )


def _address(coordinator: str) -> tuple[str, int]:
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit():
        raise DistributedError(f"coordinator {coordinator!r}: expected HOST:PORT")
    return host, int(port)


def _wait_for(host: str, port: int, timeout_s: float) -> None:
    """Wait until ``host:port`` accepts a TCP connection, or raise after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise DistributedError(
                    f"could not reach the coordinator at {host}:{port} within {timeout_s} s "
                    f"({err}); is process 0 running, and is the address reachable from here?"
                ) from None
        time.sleep(0.2)
