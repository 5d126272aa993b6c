"""How the test suite compiles: one shared compilation cache, and XLA's CPU backend at -O0.

The suite is compile-bound (most tests run a few steps of many distinct programs). Two settings cut
its time by a quarter: the whole suite (``PYTEST_ADDOPTS=--durations=0 make test``, before the
longest tests moved to ``-m slow``) took 30.0 min without them and 22.6 min with them on this
project's 2-core machine, one run after the other on idle cores, 2026-11-27:

- ``JAX_COMPILATION_CACHE_DIR``: a fresh cache for this session, shared by the xdist workers and
  by the ``sgrld`` processes the tests start, so a program compiled by one test is read back by
  the next one that builds the same program. Removed when the session ends. A cache directory
  already in the environment is used as it is and kept.
- ``XLA_FLAGS``: LLVM at -O0 without its expensive passes. Fast-math stays off, but reductions
  may be vectorised differently, so float32 results can differ from an optimised build's in the
  last bit (as between two CPUs): bit-for-bit tests compare two programs compiled alike, and
  seeded statistical tests hold by their stated budgets, not by one realisation.
  ``SGRLD_TEST_FULL_OPTIMISATION=1`` compiles as a user's run does.

Both are set here, before any test imports jax, because XLA reads them once per process.
"""

from __future__ import annotations

import os
import shutil
import tempfile

CACHE_VARIABLE = "JAX_COMPILATION_CACHE_DIR"
FAST_COMPILE_FLAGS = "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"

# The process that makes the cache owns it. xdist workers, and any process a test starts, inherit
# the variable and so own nothing: only the session that made the cache removes it.
owned_cache = None
if CACHE_VARIABLE not in os.environ:
    owned_cache = os.environ[CACHE_VARIABLE] = tempfile.mkdtemp(prefix="sgrld-test-jax-cache-")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")
xla_flags = os.environ.get("XLA_FLAGS", "")
if os.environ.get("SGRLD_TEST_FULL_OPTIMISATION") != "1" and FAST_COMPILE_FLAGS not in xla_flags:
    os.environ["XLA_FLAGS"] = f"{xla_flags} {FAST_COMPILE_FLAGS}".strip()  # workers inherit it


def pytest_unconfigure(config):
    """The session that made the cache removes it."""
    if owned_cache is not None:
        shutil.rmtree(owned_cache, ignore_errors=True)
