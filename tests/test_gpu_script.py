"""``benchmarks/gpu/run.py`` (issue 37): the one-command GPU evidence script cannot rot between
GPU runs. Its budgets stop a job that overruns and say so; its smoke mode runs every part's
command at tiny sizes on the CPU and writes result files whose tables parse."""

from __future__ import annotations

import doctest
import importlib.util
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import cpu_env

RUN = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu" / "run.py"


def load_run():
    """benchmarks/gpu/run.py as a module (it imports neither JAX nor sgrld)."""
    name = "sgrld_benchmarks_gpu_run"
    spec = importlib.util.spec_from_file_location(name, RUN)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


run = load_run()


def child(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_doctests():
    assert doctest.testmod(run).failed == 0


def test_tables_round_trip():
    text = "before\n" + run.md_table(["a", "log p(y|X)"], [[1, "x"], ["2", "y|z"]]) + "\nafter"
    assert run.parse_md_tables(text) == [
        [{"a": "1", "log p(y|X)": "x"}, {"a": "2", "log p(y|X)": "y|z"}]
    ]


def test_a_job_that_ends_in_time_is_completed_or_failed():
    ok = run.run_job(run.Job("ok", child("print('hi')"), 10.0), 10.0, echo=lambda line: None)
    assert (ok.status, ok.returncode, ok.output) == ("completed", 0, "hi\n")
    bad = run.run_job(run.Job("bad", child("raise SystemExit(4)"), 10.0), 10.0, echo=print)
    assert (bad.status, bad.returncode) == ("failed", 4)
    assert "failed** (exit 4)" in bad.line()


def test_a_job_over_its_budget_is_cut_and_says_so():
    code = "import time; print('started', flush=True); time.sleep(60)"
    job = run.Job("sleeper", child(code), 1.0, floor=0.0, grace=2.0)
    t0 = time.monotonic()
    out = run.run_job(job, 1.0, echo=lambda line: None)
    assert time.monotonic() - t0 < 10
    assert out.status == "cut" and out.output == "started\n"
    assert out.note.startswith("SIGTERM after 1 s") and "SIGKILL" not in out.note
    assert "**cut by its budget** after 1 s of a 1 s budget; SIGTERM after 1 s" in out.line()


def test_a_job_that_ignores_sigterm_is_killed_after_its_grace():
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('deaf', flush=True); time.sleep(60)"
    )
    job = run.Job("deaf", child(code), 1.0, floor=0.0, grace=1.0)
    t0 = time.monotonic()
    out = run.run_job(job, 1.0, echo=lambda line: None)
    assert time.monotonic() - t0 < 10
    assert out.status == "cut" and "SIGKILL after 2 s" in out.note


def test_a_graceful_job_gets_sigterm_its_grace_before_the_budget_ends():
    # as `sgrld reproduce` does: finish the epoch in flight, write the table, exit 130
    code = (
        "import signal, sys, time\n"
        "def stop(*_):\n    print('stopping at the end of the epoch', flush=True)\n"
        "    sys.exit(130)\n"
        "signal.signal(signal.SIGTERM, stop)\nprint('epoch 1', flush=True)\ntime.sleep(60)\n"
    )
    job = run.Job("sweep", child(code), 4.0, floor=0.0, grace=3.0, graceful=True)
    out = run.run_job(job, 4.0, echo=lambda line: None)
    assert out.status == "cut" and out.returncode == 130
    assert out.seconds < 3.5 and out.note.startswith("SIGTERM after 1 s")
    assert out.output.splitlines() == ["epoch 1", "stopping at the end of the epoch"]


def test_budgets_leave_the_later_jobs_their_floors_and_skip_what_does_not_fit():
    later = [run.Job("b", [], None, floor=30.0), run.Job("c", [], None, floor=20.0)]
    assert run.job_budget(run.Job("a", [], 200.0), later, 120.0) == 70.0
    assert run.job_budget(run.Job("a", [], 60.0), later, 300.0) == 60.0
    assert run.job_budget(run.Job("a", [], lambda left: left / 2), [], 100.0) == 50.0
    skipped = run.run_job(run.Job("d", child("print(1)"), 10.0, floor=5.0), 3.0)
    assert skipped.status == "skipped" and skipped.output == ""


def test_targets_say_hit_miss_or_not_measured():
    pair = lambda a, b, k, m: {
        "kind": "paired",
        "a": a,
        "b": b,
        "chains": k,
        "median": m,
        "low": m,
        "high": m,
    }
    rate = lambda k, m: {"kind": "rate", "name": "sgrld identity", "chains": k, "median": m}
    results = {
        "chains": {
            "records": [
                pair("sgrld identity", "blackjax sgld", 1, 1.3),
                pair("sgrld identity", "blackjax sgld", 64, 1.4),
                rate(1, 100.0),
                rate(64, 2500.0),
            ]
        },
        "steps": {"to_identity": {"Shampoo": {"median": 2.5, "low": 2.4, "high": 2.6}}},
    }
    rows = {r[0]: r[1:] for r in run.targets(results)}
    assert rows["sgrld ≥ 1.2× BlackJAX SGLD at 1 chain"][1] == "hit"
    assert rows["sgrld ≥ 1.5× BlackJAX SGLD at 64 chains"][1] == "**miss**"
    assert rows["sgrld identity: 64 chains ≥ 20× the chain-steps/s of 1"] == ["25.0×", "hit"]
    assert rows["Shampoo ≤ 2.0× Identity per step (one chain)"][1] == "**miss**"
    assert rows["QDOP + Γ ≤ 2× the uncorrected step"] == ["not measured", "—"]


def test_the_mnist_table_reads_the_sweeps_records(tmp_path):
    folder = tmp_path / "horseshoe-400" / "shampoo"
    folder.mkdir(parents=True)
    records = [
        {"epoch": 1, "sample_s": 0.5, "groups": {"test_log_likelihood": [None, None]}},
        {
            "epoch": 2,
            "sample_s": 0.7,
            "divergences": 0,
            "groups": {"test_log_likelihood": [-0.064, -0.066], "test_accuracy": [0.98, 0.99]},
        },
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = run.sweep_rows(tmp_path)
    assert rows[0]["epochs"] == 2 and rows[0]["status"] == "stopped" and rows[0]["sample_s"] == 0.6
    (folder / "summary.json").write_text(json.dumps({"status": "interrupted"}))
    rows = run.sweep_rows(tmp_path)
    (table,) = run.parse_md_tables(run.mnist_table(rows))
    assert table[0]["epochs reached"] == "2 (interrupted)"
    assert table[0]["log p(y|X)"] == "-0.0650 ± 0.0014 ✓"
    assert table[0]["paper log p"] == "-0.0641 ± 0.0009"
    assert table[0]["acc."] == "0.9850 ± 0.0071 ✓"


def number(cell: str) -> float:
    return float(cell.split()[0].rstrip("×").replace(",", ""))


@pytest.mark.long
def test_smoke_run_writes_every_part_and_its_budget_cuts_the_sweep(tmp_path):
    """The whole script at tiny sizes (about 30 s on an idle 2-core CPU): every part's file, its
    tables parse with numbers in them, and the MNIST sweep of 2,000 epochs is cut by its budget."""
    out, work = tmp_path / "out", tmp_path / "work"
    argv = [sys.executable, str(RUN), "--smoke", "--out", str(out), "--work", str(work)]
    done = subprocess.run(argv, env=cpu_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (results_file,) = out.glob("results_*.json")
    card = results_file.stem.split("_", 1)[1]
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8, files  # what comes back from a device machine
    for part in ("chains", "steps", "mnist", "summary"):
        assert f"{part}_{card}.md" in files, files
    results = json.loads(results_file.read_text())
    jobs = {j["name"]: j for p in results["parts"].values() for j in p["jobs"]}
    assert set(jobs) == {"chains", "step_throughput", "fisher_step", "mnist_horseshoe"}
    assert all(jobs[n]["status"] == "completed" for n in ("chains", "step_throughput")), jobs

    chains = run.parse_md_tables((out / f"chains_{card}.md").read_text())
    by_name = {row["candidate"]: row for row in chains[0]}
    assert number(by_name["sgrld identity"]["1 chain"]) > 0
    assert number(by_name["sgrld identity, bare scan"]["2 chains"]) > 0

    steps = run.parse_md_tables((out / f"steps_{card}.md").read_text())
    rows = {row["candidate"]: row for table in steps for row in table if "candidate" in row}
    assert number(rows["RMSprop + Hutchinson [scan]"]["/ uncorrected [range]"]) > 0
    assert number(rows["linen-mlp: DOP + Γ (Hutchinson)"]["/ Identity [range]"]) > 0

    mnist = (out / f"mnist_{card}.md").read_text()
    assert jobs["mnist_horseshoe"]["status"] == "cut"
    assert "`mnist_horseshoe`: **cut by its budget**" in mnist and "SIGTERM after" in mnist

    summary = (out / f"summary_{card}.md").read_text()
    (targets,) = run.parse_md_tables(summary)
    assert len(targets) >= 12
    assert {row["verdict"] for row in targets} <= {"hit", "**miss**", "—"}
    assert "Smoke run" in summary


@pytest.mark.parametrize("resume", [False, True])
def test_runs_left_in_work_need_resume(tmp_path, resume):
    (tmp_path / "work" / "runs" / "horseshoe" / "x").mkdir(parents=True)
    argv = ["--smoke", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")]
    argv += ["--parts", "mnist", "--budget", "0"] + (["--resume"] if resume else [])
    done = subprocess.run(
        [sys.executable, str(RUN), *argv], env=cpu_env(), capture_output=True, text=True
    )
    if resume:  # no time: every job skipped, the files written all the same
        assert done.returncode == 0, done.stderr
        (mnist,) = (tmp_path / "out").glob("mnist_*.md")
        assert "`mnist_horseshoe`: skipped (too little time left)" in mnist.read_text()
    else:
        assert done.returncode == 2 and "pass --resume to continue them" in done.stderr


def test_entry_point_site_lists_every_reproduction_of_pyproject(tmp_path: Path):
    """On a GPU machine the checkout is not pip-installed: the dist-info that run.py puts on
    PYTHONPATH must declare the same reproductions as pyproject.toml."""
    import importlib.metadata
    import tomllib

    site = run.entry_point_site(tmp_path)
    (dist,) = importlib.metadata.distributions(path=[str(site)])
    found = {ep.name: ep.value for ep in dist.entry_points if ep.group == "sgrld.reproductions"}
    project = tomllib.loads((RUN.parents[2] / "pyproject.toml").read_text())["project"]
    assert found == project["entry-points"]["sgrld.reproductions"] and "mnist-mlp" in found
