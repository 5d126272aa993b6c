"""The seed of the statistical tests, injectable for the flake-budget sweep.

A statistical test (its pass or fail depends on random draws) is marked
``@pytest.mark.statistical(seed=S)``, takes its seed from the ``stat_seed`` fixture, and states
its false-failure probability in its docstring on a line ``False-failure probability: ≤ p (...)``
(collection refuses a marked test without one). By default ``stat_seed`` is ``S``, so the test
runs exactly as it always did. With ``SGRLD_SEED_SWEEP=K`` in the environment every such test runs
once per seed ``1000, ..., 1000 + K - 1`` instead (``benchmarks/flake_budget.py`` counts the
failures).
"""

from __future__ import annotations

import os
import re

import pytest

SWEEP_VARIABLE = "SGRLD_SEED_SWEEP"
SWEEP_FIRST_SEED = 1000
BUDGET = re.compile(r"False-failure probability: ≤ ([0-9.]+(?:e-?[0-9]+)?)")


def stated_budget(function) -> float | None:
    """The false-failure probability a test's docstring states, or None."""
    found = BUDGET.search(function.__doc__ or "")
    return float(found.group(1)) if found else None


def sweep_seeds() -> range:
    """The seeds of ``SGRLD_SEED_SWEEP=K`` (empty when it is unset or 0)."""
    count = int(os.environ.get(SWEEP_VARIABLE) or 0)
    return range(SWEEP_FIRST_SEED, SWEEP_FIRST_SEED + count)


def pytest_generate_tests(metafunc):
    seeds = sweep_seeds()
    if seeds and "stat_seed" in metafunc.fixturenames:
        metafunc.parametrize("stat_seed", seeds, ids=lambda seed: f"seed{seed}")


def pytest_collection_modifyitems(items):
    for item in items:
        marker = item.get_closest_marker("statistical")
        if marker is None:
            continue
        if "seed" not in marker.kwargs or "stat_seed" not in item.fixturenames:
            raise pytest.UsageError(f"{item.nodeid}: statistical(seed=...) and stat_seed needed")
        if stated_budget(item.function) is None:
            raise pytest.UsageError(f"{item.nodeid}: no 'False-failure probability: ≤ p' line")


@pytest.fixture
def stat_seed(request) -> int:
    """The seed of a ``statistical`` test: its marker's fixed default (or a sweep seed)."""
    return request.node.get_closest_marker("statistical").kwargs["seed"]
