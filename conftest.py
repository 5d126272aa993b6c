"""How the test suite compiles: one shared compilation cache, and XLA's CPU backend made fast.

The suite is compile-bound (most tests run a few steps of many distinct programs). The whole suite
(``PYTEST_ADDOPTS=--durations=0 make test``, before the longest tests moved to ``-m slow``) took
30.0 min without the first two settings and 22.6 min with them on this project's 2-core machine,
one run after the other on idle cores, 2026-11-27. The third cut a compile-bound subset
(``tests/samplers/test_sampler.py tests/parts/test_correction.py`` and one frozen-metric test, one
core, ``-n 0``) from 274 s to 159 s the same day, and left runtime-bound statistical tests as they
were:

- ``JAX_COMPILATION_CACHE_DIR``: a fresh cache for this session, shared by the xdist workers and
  by the ``sgrld`` processes the tests start, so a program compiled by one test is read back by
  the next one that builds the same program. Removed when the session ends. A killed session
  cannot remove its cache, so each session holds a lock on a file in its cache while it runs, and
  the next session removes every cache whose lock nobody holds. A cache directory already in the
  environment is used as it is and kept.
- ``XLA_FLAGS``: LLVM at -O0 without its expensive passes. Fast-math stays off, but reductions
  may be vectorised differently, so float32 results can differ from an optimised build's in the
  last bit (as between two CPUs): bit-for-bit tests compare two programs compiled alike, and
  seeded statistical tests hold by their stated budgets, not by one realisation.
- ``XLA_FLAGS`` also: XLA's older loop emitters for fusions
  (``--xla_cpu_use_fusion_emitters=false``) and one LLVM module a program
  (``--xla_cpu_parallel_codegen_split_count=1``): a Shampoo step with Γ compiled in 0.9 s instead
  of 3.7 s at -O0. An XLA that no longer knows a flag would abort every process, so a subprocess
  tries the flags once a session; if it fails, the suite falls back to the -O0 flags alone, or to
  none, and its header says which it uses.

``SGRLD_TEST_FULL_OPTIMISATION=1`` compiles as a user's run does. All of this is set here, before
any test imports jax, because XLA reads it once per process.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
CACHE_PREFIX = "sgrld-test-jax-cache-"
OWNER_LOCK = ".owner.lock"  # held (flock) by the session that made the cache, while it runs
OPTIMISATION_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"
EMITTER_FLAGS = "--xla_cpu_use_fusion_emitters=false --xla_cpu_parallel_codegen_split_count=1"
CHOSEN_VARIABLE = "SGRLD_TEST_COMPILE_FLAGS"  # the flags the session chose; workers inherit them
PROBE = "import jax.numpy as jnp; jnp.arange(3.0).sum().block_until_ready()"


def fast_compile_flags(inherited: str) -> str:
    """The fastest-compiling flags this XLA accepts, tried in a subprocess (about 2 s)."""
    for flags in (f"{OPTIMISATION_FLAGS} {EMITTER_FLAGS}", OPTIMISATION_FLAGS):
        env = {**os.environ, "XLA_FLAGS": f"{inherited} {flags}", "JAX_PLATFORMS": "cpu"}
        try:
            probe = subprocess.run(
                [sys.executable, "-c", PROBE], env=env, capture_output=True, timeout=120
            )
        except subprocess.TimeoutExpired:
            continue
        if probe.returncode == 0:
            return flags
    return ""


def make_owned_cache(parent: str) -> tuple[str, int | None]:
    """A new cache folder under ``parent`` and an open file descriptor that holds its owner lock
    (``None`` where the file system refuses the lock, or without ``fcntl``: Windows).

    The lock file is locked under a temporary name and then renamed, so that no other session
    ever sees an owner lock that is not held.
    """
    cache = tempfile.mkdtemp(prefix=CACHE_PREFIX, dir=parent)
    if fcntl is None:  # no flock (Windows): a killed session's cache stays behind
        return cache, None
    pending = os.path.join(cache, OWNER_LOCK + ".pending")
    lock = os.open(pending, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # a file system without flock: no owner lock; later sessions leave it alone
        os.close(lock)
        os.remove(pending)
        return cache, None
    os.rename(pending, os.path.join(cache, OWNER_LOCK))
    return cache, lock


def remove_orphaned_caches(parent: str) -> list[str]:
    """Remove the caches under ``parent`` whose owner lock nobody holds; return their paths.

    A folder without an owner lock (a session still making it, or one of another layout) is
    left alone, and so is any folder this process cannot open or lock.
    """
    if fcntl is None:
        return []
    removed = []
    for cache in glob.glob(os.path.join(parent, CACHE_PREFIX + "*")):
        try:
            lock = os.open(os.path.join(cache, OWNER_LOCK), os.O_RDWR)
        except OSError:
            continue
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # its session is running
        finally:
            os.close(lock)  # also releases a lock just taken
        shutil.rmtree(cache, ignore_errors=True)
        removed.append(cache)
    return removed


# The process that makes the cache owns it. xdist workers, and any process a test starts, inherit
# the variable and so own nothing: only the session that made the cache removes it.
owned_cache = owner_lock = None
if CACHE_VARIABLE not in os.environ:
    remove_orphaned_caches(tempfile.gettempdir())
    owned_cache, owner_lock = make_owned_cache(tempfile.gettempdir())
    os.environ[CACHE_VARIABLE] = owned_cache
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
full_optimisation = os.environ.get("SGRLD_TEST_FULL_OPTIMISATION", "0")
if full_optimisation not in ("0", "1"):
    raise pytest.UsageError(f"SGRLD_TEST_FULL_OPTIMISATION={full_optimisation!r}: set it to 1 or 0")
if CHOSEN_VARIABLE not in os.environ:  # the session's first process; xdist workers skip this
    chosen = ""
    if full_optimisation == "0":
        chosen = fast_compile_flags(os.environ.get("XLA_FLAGS", ""))
    os.environ[CHOSEN_VARIABLE] = chosen
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {chosen}".strip()


def pytest_collection_modifyitems(items):
    """Tests marked ``long`` first, the others in their order. ``make test``'s two xdist workers
    then end together: each runs its share in order and steals the other's last tests, so a long
    test collected late (``tests/test_gpu_script.py``'s smoke run) ran alone at the end, the other
    worker idle. Mark a whole module whose module-scoped fixture its tests share."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)


def pytest_configure(config):
    """The xdist controller imports ``sgrld`` once, in its main thread. It rebuilds each warning a
    worker reports by importing the warning class's module, on execnet's receiving threads: two
    workers' warnings of an sgrld class arriving together made two threads import ``sgrld`` for
    the first time at once, and one of them met the other's partly run modules (a circular
    ``ImportError`` in ``sgrld.chains.typical_set``, an INTERNALERROR that ended the session).
    The workers (``config.workerinput``) import it themselves."""
    if not hasattr(config, "workerinput"):
        import sgrld  # noqa: F401, PLC0415


def pytest_report_header(config):
    return f"XLA flags for compile speed (conftest.py): {os.environ[CHOSEN_VARIABLE] or 'none'}"


def pytest_unconfigure(config):
    """The session that made the cache removes it."""
    if owned_cache is not None:
        shutil.rmtree(owned_cache, ignore_errors=True)
    if owner_lock is not None:
        os.close(owner_lock)
