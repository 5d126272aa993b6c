"""The benchmarks' timing harness (benchmarks/timing.py): paired ratios, rotation, workers."""

import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_timing():
    """benchmarks/timing.py as a module, without putting benchmarks/ on sys.path."""
    name = "sgrld_benchmarks_timing"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "timing.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


timing = load_timing()


def test_doctests():
    assert doctest.testmod(timing).failed == 0


def test_paired_ratios_are_per_round():
    # The ratio of the medians (2.0 / 2.0) hides that "new" was 10% slower in every round.
    new, old = [1.1, 2.2, 3.3], [1.0, 2.0, 3.0]
    s = timing.paired(new, old)
    assert s.median == pytest.approx(1.1) and s.low == pytest.approx(1.1)
    with pytest.raises(ValueError):
        timing.paired([1.0], [1.0, 2.0])


def test_interleave_rotates_the_order():
    calls = []
    cands = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = timing.interleave(cands, 3)
    assert calls == list("abcbcacab")
    assert all(len(t) == 3 for t in times.values())


def test_candidate_rates_and_step_time():
    c = timing.Candidate("x", lambda: None, steps=10, times=[1.0, 2.0, 4.0])
    assert c.step_s == pytest.approx(0.2)
    assert c.rates == timing.Spread(5.0, 2.5, 10.0)


def test_workers_alternate_rounds(tmp_path):
    (tmp_path / "worker.py").write_text(
        "import sys\n"
        "from timing import serve\n"
        "print('noise on stdout is passed through')\n"
        "serve({'tree': sys.argv[1]}, lambda r: {'round': r['round'], 'tree': sys.argv[1]})\n"
    )
    workers = {
        name: timing.Worker(BENCHMARKS, [sys.executable, str(tmp_path / "worker.py"), name])
        for name in ("this", "other")
    }
    try:
        assert workers["other"].ready == {"tree": "other"}
        replies = timing.alternate(workers, 3)
    finally:
        for w in workers.values():
            w.close()
    assert [r["round"] for r in replies["this"]] == [0, 1, 2]
    assert {r["tree"] for r in replies["other"]} == {"other"}
    assert all(w.process.returncode == 0 for w in workers.values())
