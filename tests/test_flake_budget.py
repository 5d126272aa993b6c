"""The flake-budget sweep (benchmarks/flake_budget.py) and the ``stat_seed`` fixture."""

import importlib.util
from pathlib import Path

import pytest

from tests.conftest import stated_budget, sweep_seeds

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "flake_budget.py"


def load_flake_budget():
    spec = importlib.util.spec_from_file_location("sgrld_benchmarks_flake_budget", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


flake_budget = load_flake_budget()


def test_seed_is_split_from_the_case():
    split = flake_budget.split_seed
    assert split("t.py::test_x[seed1003]") == ("t.py::test_x", 1003)
    assert split("t.py::test_x[monge-seed1003]") == ("t.py::test_x[monge]", 1003)
    assert split("t.py::test_x[seed1000-correlated-matrix]") == (
        "t.py::test_x[correlated-matrix]",
        1000,
    )
    assert split("t.py::test_x[0.9]") == ("t.py::test_x[0.9]", -1)


def test_flags():
    assert flake_budget.flag(1e-5, 0, 50) == ""
    assert "INCOMPATIBLE" in flake_budget.flag(1e-4, 1, 50)  # P(≥ 1) = 0.005
    assert flake_budget.flag(1e-2, 1, 50) == "budget > 0.001"  # P(≥ 1) = 0.39: compatible
    assert "INCOMPATIBLE" in flake_budget.flag(1e-2, 3, 50)  # P(≥ 3) = 0.014


def test_stated_budget_is_read_from_the_docstring():
    def documented():
        """Text.

        False-failure probability: ≤ 2.6e-5 per metric (45 entries at 5σ).
        """

    assert stated_budget(documented) == pytest.approx(2.6e-5)
    assert stated_budget(lambda: None) is None


def test_sweep_seeds(monkeypatch):
    monkeypatch.delenv("SGRLD_SEED_SWEEP", raising=False)
    assert list(sweep_seeds()) == []
    monkeypatch.setenv("SGRLD_SEED_SWEEP", "3")
    assert list(sweep_seeds()) == [1000, 1001, 1002]


@pytest.mark.statistical(seed=17)
def test_stat_seed_is_the_markers_default(stat_seed):
    """False-failure probability: ≤ 0 (no random draw: the fixture's own test)."""
    assert stat_seed == 17 or stat_seed in sweep_seeds()
