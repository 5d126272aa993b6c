"""Issues 37's and 50's GPU evidence in one command: chains against BlackJAX, the engine against
the bare step, step and Γ costs, MNIST rows.

Runs the existing benchmark scripts and the ``sgrld`` CLI as child processes, one after the other,
most important first, each with a time budget taken from the whole run's (``--budget``):

1. **chains** (``chain_throughput.py``): chain-steps per second of Identity, RMSprop, Monge,
   Shampoo, DOP, QDOP and SGHMC at 1, 8, 64 and 512 chains, beside BlackJAX's SGLD and SGHMC
   vmapped the same way (MNIST MLP 784-400-400-10, batch 100, scans of 200 gradient evaluations;
   BlackJAX's SGHMC with 10 integration steps a call, compared per gradient evaluation, and its
   compiled program searched for the gradient's matrix products), and beside the engine rows of
   ``--bare-samplers`` (Identity, RMSprop, Shampoo) the same step in a bare ``lax.scan``
   (issue 50: the engine at least 0.95× the bare scan);
2. **steps** (``step_throughput.py --scan only``, ``fisher_step.py``): one chain's step of every
   metric against Identity's, and each Γ (Hutchinson) against the uncorrected step;
3. **mnist** (``sgrld reproduce mnist-mlp --replicates 10``): Yu et al.'s rows with 10 replicates
   as one sweep per metric: Shampoo with the horseshoe prior at W = 400, then the Gaussian prior
   at W = 400 (Identity, Wenzel, RMSprop, Shampoo), 400 epochs as the paper, as far as the budget
   goes. A sweep cut by its budget is stopped with SIGTERM, which ends it after the epoch in
   flight with a checkpoint, and its table says how many epochs it reached; ``--resume`` continues
   the sweeps in ``--work`` from their checkpoints.

A job over its budget is stopped (SIGTERM to its process group, SIGKILL after a grace period)
and its part's file says it was cut and after how long. Every part writes
``<part>_<card>.md`` in ``--out`` (``card``: h100, h200, ..., or cpu) with the machine, driver and
versions, the tables in the form of ``benchmarks/RESULTS.md`` and each job's full output; then
``summary_<card>.md`` lists every target of the issue with the measured value, hit or miss, and
``results_<card>.json`` holds every number. Nothing is written deeper than ``--out`` itself but
the MNIST curves (``curves_*.png``), so that eight files come back from a device machine.

``--smoke`` runs the same jobs at tiny sizes (a few steps, two chains, tiny generated MNIST files,
a budget of about a minute) on the CPU: the fast test suite runs it (``tests/test_gpu_script.py``),
so the script cannot rot between GPU runs. Its sweep runs 2,000 epochs on purpose, so that its
budget cuts it.

What it costs (H200, 2026-11-28, ``benchmarks/gpu/issue37_*_h200.md``): compiling is most of
it. Part 1 compiles 13 programs per chain count in 36-41 s on eight threads (Shampoo's about
30 s), after about 25 s of start-up and the gradient check; 1 and 64 chains took 150 s with
their timing, and its 185 s budget ended before the 512-chain programs (compiled in 41 s) were
timed: give part 1 about 240 s for 1, 64 and 512 chains. Part 2 took 81 s (51 s and 30 s).
Part 3's Shampoo sweep (ten chains, horseshoe, W = 400) samples an epoch in 0.35 s and reached
epoch 345 of 400 in 172 s; the Gaussian sweep's four metrics need about 160 s each (RESULTS
§4). A whole run of every part is therefore about 12 minutes: more than one command's limit,
so run ``--parts chains steps`` and ``--parts mnist`` as two commands. A device machine starts
in about 35 s.

The driver imports neither JAX nor sgrld (a process that initialises the GPU would hold its memory
while the jobs run); it needs the Python that runs the jobs (``--python``, default this one) to
import them.

Usage::

    python benchmarks/gpu/run.py --out OUT [--budget 480] [--work DIR] [--resume]
    python benchmarks/gpu/run.py --smoke --out OUT
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import json
import math
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = REPO / "benchmarks"
MNIST_FILES = {
    "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
}
"""SHA-256 of the official MNIST files, uncompressed (``shared/data/mnist/SHA256SUMS``): the
``.gz`` copies carried to a device machine are checked against them once decompressed, since the
data loader checks only the files whose exact name has a known checksum."""
PAPER = {
    ("horseshoe", "shampoo"): ((-0.0641, 0.0009), (0.9820, 0.0006)),
    ("gaussian", "identity"): ((-0.1310, 0.0004), (0.9685, 0.0005)),
    ("gaussian", "wenzel"): ((-0.1315, 0.0002), (0.9686, 0.0003)),
    ("gaussian", "rmsprop"): ((-0.1307, 0.0005), (0.9689, 0.0004)),
    ("gaussian", "shampoo"): ((-0.1286, 0.0003), (0.9689, 0.0004)),
}
"""Yu et al. (TMLR 2023) Tables 1-2 at W = 400, 10 runs: (log p(y|X), accuracy), mean and std
(``sgrld_reproductions.mnist_mlp.PAPER``)."""
LABELS = {
    "identity": "Identity",
    "rmsprop": "RMSprop",
    "wenzel": "Wenzel",
    "monge": "Monge",
    "shampoo": "Shampoo",
    "dop": "DOP",
    "qdop": "QDOP",
    "sghmc": "SGHMC",
    "fisher_diag": "DOP",
    "fisher_qdiag": "QDOP",
}
PREFLIGHT = """
import importlib, jax, jax.numpy as jnp
import sgrld, sgrld.bnn, sgrld_reproductions.mnist_mlp
for name in ("jax", "flax", "optax", "blackjax"):
    try:
        print(name, importlib.import_module(name).__version__)
    except ImportError as err:
        print(name, "not importable:", err)
from sgrld_app.arguments import reproductions
print("reproductions", ", ".join(reproductions()) or "none: sgrld reproduce will fail")
print("devices", jax.devices())
print("sum", float(jnp.arange(10.0).sum()))
print(jax.default_backend())
"""
"""The preflight: the jobs' imports and one computation on the device; its last line is the
backend."""
CHAIN_SAMPLERS = ("identity", "rmsprop", "monge", "shampoo", "dop", "qdop", "sghmc")


# --------------------------------------------------------------------------------------------------
# Jobs with budgets


@dataclass
class Job:
    """A child process of a part.

    Attributes:
      name: short name (the file names and the log's prefix).
      argv: the command.
      cap: seconds at most; ``None``: all the time left. A callable gets the seconds left and
        returns the cap (a share of what is left).
      floor: seconds below which the job is not started (``skipped``).
      grace: seconds between SIGTERM and SIGKILL. A graceful job (the CLI's runs stop after the
        epoch in flight on SIGTERM, with a checkpoint) gets SIGTERM ``grace`` seconds before its
        budget ends; another gets it at the end of its budget.
      graceful: see ``grace``.
      outputs: files the job writes that its part reads.
    """

    name: str
    argv: list[str]
    cap: float | Callable[[float], float] | None
    floor: float = 5.0
    grace: float = 5.0
    graceful: bool = False
    outputs: dict[str, Path] = field(default_factory=dict)


@dataclass
class Outcome:
    """What became of a job: ``status`` is completed, cut, failed or skipped."""

    name: str
    argv: list[str]
    budget: float
    seconds: float
    status: str
    returncode: int | None
    output: str
    note: str = ""

    def line(self) -> str:
        """One line for the results files."""
        what = {
            "completed": "completed",
            "cut": "**cut by its budget**",
            "failed": f"**failed** (exit {self.returncode})",
            "skipped": "skipped (too little time left)",
        }[self.status]
        note = f"; {self.note}" if self.note else ""
        spent = f"after {self.seconds:.0f} s of a {self.budget:.0f} s budget"
        return f"`{self.name}`: {what} {spent}{note}"


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """Send ``sig`` to the job's own process group (it was started in a new session)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_job(
    job: Job,
    budget: float,
    *,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
    echo: Callable[[str], None] = lambda line: print(line, end="", flush=True),
    clock: Callable[[], float] = time.monotonic,
) -> Outcome:
    """Run ``job`` for at most ``budget`` seconds; its output is echoed line by line, prefixed.

    A graceful job gets SIGTERM at ``budget - grace`` and SIGKILL at ``budget``; another gets
    SIGTERM at ``budget`` and SIGKILL ``grace`` seconds later. A job stopped either way is
    ``cut``; one that ended by itself is ``completed`` (exit 0) or ``failed``.
    """
    if budget < job.floor - 1.0:  # a second of slack: the floors are reserved to the second
        return Outcome(job.name, job.argv, budget, 0.0, "skipped", None, "")
    lines: list[str] = []
    start = clock()
    process = subprocess.Popen(
        job.argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        bufsize=1,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )

    def read():
        for line in process.stdout:
            lines.append(line)
            echo(f"[{job.name}] {line}")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    term_at = budget - job.grace if job.graceful else budget
    kill_at = budget if job.graceful else budget + job.grace
    cut, note = False, ""
    try:
        process.wait(timeout=max(0.0, term_at))
    except subprocess.TimeoutExpired:
        cut = True
        _signal_group(process, signal.SIGTERM)
        note = f"SIGTERM after {clock() - start:.0f} s"
        try:
            process.wait(timeout=max(0.0, kill_at - (clock() - start)))
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            process.wait()
            note += f", SIGKILL after {clock() - start:.0f} s"
    reader.join(timeout=10)
    seconds = clock() - start
    rc = process.returncode
    status = "cut" if cut else ("completed" if rc == 0 else "failed")
    return Outcome(job.name, job.argv, budget, seconds, status, rc, "".join(lines), note)


class Clock:
    """The whole run's deadline."""

    def __init__(self, budget: float):
        self.start, self.budget = time.monotonic(), budget

    def left(self) -> float:
        return self.budget - (time.monotonic() - self.start)


def job_budget(job: Job, later: Sequence[Job], left: float) -> float:
    """The job's seconds: its cap, within what is left after the later jobs' floors."""
    room = left - sum(j.floor for j in later)
    cap = job.cap(left) if callable(job.cap) else job.cap
    return max(0.0, room if cap is None else min(cap, room))


# --------------------------------------------------------------------------------------------------
# Tables


def md_table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table as RESULTS writes them.

    Example:
      >>> print(md_table(["a", "b"], [[1, "x|y"]]))
      | a | b |
      |---|---|
      | 1 | x\\|y |
    """
    cell = lambda v: str(v).replace("|", "\\|")
    lines = ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def parse_md_tables(text: str) -> list[list[dict[str, str]]]:
    """Every markdown table in ``text``: a list of rows, each a dict by the header's cells.

    Example:
      >>> parse_md_tables("x\\n| a | b |\\n|---|---|\\n| 1 | x\\\\|y |\\n")
      [[{'a': '1', 'b': 'x|y'}]]
    """
    tables, lines = [], text.splitlines()
    i = 0
    split = lambda line: [
        c.strip().replace("\\|", "|")
        for c in line.strip().strip("|").replace("\\|", "\0").split("|")
    ]
    while i < len(lines) - 1:
        if lines[i].startswith("|") and set(lines[i + 1].replace("|", "").strip()) <= {"-", ":"}:
            head = [h.replace("\0", "|") for h in split(lines[i])]
            rows, i = [], i + 2
            while i < len(lines) and lines[i].startswith("|"):
                cells = [c.replace("\0", "|") for c in split(lines[i])]
                rows.append(dict(zip(head, cells, strict=False)))
                i += 1
            tables.append(rows)
        else:
            i += 1
    return tables


def ratio_text(r: dict | None, digits: int = 2) -> str:
    if not r:
        return "—"
    return f"{r['median']:.{digits}f}× [{r['low']:.{digits}f}–{r['high']:.{digits}f}]"


def paired(times: Sequence[float], reference: Sequence[float]) -> dict[str, float]:
    """Median and range of the per-round ratios ``times[r] / reference[r]`` (``timing.paired``)."""
    ratios = [a / b for a, b in zip(times, reference, strict=True)]
    return {"median": statistics.median(ratios), "low": min(ratios), "high": max(ratios)}


# --------------------------------------------------------------------------------------------------
# The machine


def run_quiet(argv: Sequence[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def machine(args) -> dict[str, Any]:
    """Device, driver, versions and commit, without initialising a backend."""
    smi = run_quiet(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]
    )
    gpu = [c.strip() for c in smi.splitlines()[0].split(",")] if smi else []
    versions = {}
    probe = (
        "import json, platform\nfrom importlib import metadata\nv = {'python': "
        "platform.python_version()}\nfor n in ('jax', 'jaxlib', 'flax', 'optax', 'numpy', "
        "'blackjax', 'jax-cuda13-plugin', 'jax-cuda12-plugin'):\n    try:\n        v[n] = "
        "metadata.version(n)\n    except metadata.PackageNotFoundError:\n        pass\n"
        "print(json.dumps(v))"
    )
    out = run_quiet([args.python, "-c", probe])
    if out:
        versions = json.loads(out.splitlines()[-1])
    commit = args.commit or run_quiet(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"])
    dirty = run_quiet(
        ["git", "-C", str(REPO), "status", "--porcelain", "--", "sgrld", "benchmarks"]
    )
    name = gpu[0] if gpu else f"CPU ({platform.processor() or platform.machine()})"
    card = next((c for c in ("h100", "h200", "a100", "l4", "v100") if c in name.lower()), None)
    return {
        "device": name,
        "driver": gpu[1] if len(gpu) > 1 else None,
        "memory": gpu[2] if len(gpu) > 2 else None,
        "card": card or ("gpu" if gpu else "cpu"),
        "cores": os.cpu_count(),
        "versions": versions,
        "commit": (commit or "unknown") + (" + changes" if dirty and not args.commit else ""),
        "date": datetime.date.today().isoformat(),
        "command": " ".join([os.path.relpath(sys.executable), *sys.argv]),
    }


def header(title: str, info: dict[str, Any]) -> str:
    v = info["versions"]
    versions = ", ".join(f"{k} {x}" for k, x in v.items())
    driver = f", driver {info['driver']}" if info["driver"] else ""
    memory = f", {info['memory']}" if info["memory"] else ""
    return (
        f"# {title}\n\n"
        f"{info['date']}; {info['device']}{driver}{memory}, {info['cores']} CPU cores; {versions}; "
        f"code of {info['commit']}.\n\nCommand: `{info['command']}`\n"
    )


# --------------------------------------------------------------------------------------------------
# The parts


@dataclass
class Part:
    name: str
    title: str
    jobs: list[Job]
    render: Callable[[list[Outcome]], tuple[str, dict[str, Any]]]


def entry_point_site(work: Path) -> Path:
    """A folder holding a ``dist-info`` with this checkout's entry points (``pyproject.toml``),
    for ``PYTHONPATH``: ``sgrld reproduce`` finds the reproductions through them, which a checkout
    that is not installed (a GPU machine's copy) does not have."""
    import tomllib

    groups = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    info = work / "site" / "sgrld_checkout_entry_points-0.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sgrld-checkout-entry-points\n")
    text = "".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in points.items()) + "\n"
        for group, points in groups.items()
    )
    (info / "entry_points.txt").write_text(text)
    return info.parent


def python_job(args, script: str, *extra: str) -> list[str]:
    return [args.python, str(BENCHMARKS / script), *extra]


def chains_part(args) -> Part:
    out = args.work / "chains.jsonl"
    if args.smoke:  # Identity alone, beside the bare scan and BlackJAX where it is installed
        extra = ["--chains", "1", "2", "--steps", "2", "--rounds", "1", "--train-size", "1000"]
        extra += ["--samplers", "identity", "--sghmc-integration-steps", "2"]
        extra += ["--bare-samplers", "identity"]
        cap, grace = 60.0, 3.0
    else:
        extra = ["--chains", *map(str, args.chains), "--steps", "200", "--rounds", "5"]
        extra += ["--bare-samplers", *args.bare_samplers]
        extra += ["--compile-workers", "8", "--max-call-s", "6", "--round-seconds", "12"]
        cap, grace = args.caps.get("chains", 200.0), 5.0
    extra += ["--data-dir", str(args.data_dir), "--json", str(out)]
    extra += ["--hlo-dir", str(args.work / "hlo")] if args.hlo else []
    job = Job("chains", python_job(args, "chain_throughput.py", *extra), cap, 20.0, grace)
    job.outputs["json"] = out

    def render(outcomes: list[Outcome]) -> tuple[str, dict[str, Any]]:
        records = read_jsonl(out)
        return chains_tables(records), {"records": records}

    return Part(
        "chains", "Part 1: chain-steps per second against chains, sgrld and BlackJAX", [job], render
    )


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut off by a kill
            pass
    return rows


def chains_tables(records: list[dict]) -> str:
    """The rate table (rows: candidates; columns: chain counts), the paired ratios, the check."""
    rates = [r for r in records if r["kind"] == "rate"]
    if not rates:
        return "No chain count finished.\n"
    ks = sorted({r["chains"] for r in rates})
    names = list(dict.fromkeys(r["name"] for r in rates))
    by = {(r["name"], r["chains"]): r for r in rates}
    rows = []
    for name in names:
        row = [name]
        for k in ks:
            r = by.get((name, k))
            if r is None:
                row.append("—")
                continue
            mark = "" if r["finite"] else " (non-finite)"
            mark += " (1 call)" if r["one_call"] else ""
            row.append(f"{r['median']:,.0f}{mark}")
        first = next((by[name, k] for k in ks if (name, k) in by), None)
        for k in ks[1:]:
            r = by.get((name, k))
            row.append(f"{r['median'] / first['median']:.1f}×" if r and first else "—")
        rows.append(row)
    head = ["candidate", *(f"{k} chain{'s' * (k > 1)}" for k in ks)]
    head += [f"{k} / {ks[0]}" for k in ks[1:]]
    text = (
        "Chain-steps per second (chains × gradient evaluations per second, median over rounds):\n\n"
    )
    text += md_table(head, rows) + "\n\n"
    pairs = [r for r in records if r["kind"] == "paired"]
    if pairs:
        rows = [[f"{p['a']} / {p['b']}", p["chains"], ratio_text(p)] for p in pairs]
        text += "Chain-steps/s of the first over the second, paired by round (median [range]):\n\n"
        text += md_table(["ratio", "chains", "median [range]"], rows) + "\n\n"
    errors = [r for r in records if r["kind"] == "error"]
    if errors:
        rows = [[e["name"], e["chains"], e["when"], e["error"]] for e in errors]
        text += "Rows not measured (skipped or failed; the others were measured without them):\n\n"
        text += md_table(["candidate", "chains", "while", "error"], rows) + "\n\n"
    checks = [r for r in records if r["kind"] == "hlo"]
    if checks:
        rows = [[c["name"], c["matmuls"], "yes" if c["gradient"] else "no"] for c in checks]
        text += "Matrix products in BlackJAX's compiled programs (one chain, L steps):\n\n"
        text += md_table(["program", "matrix products", "gradient in it"], rows) + "\n\n"
    setup = next((r for r in records if r["kind"] == "setup"), None)
    if setup:
        text += (
            f"{setup['steps']} gradient evaluations per chain per timed call, {setup['rounds']} "
            f"interleaved rounds at most; data: {setup['data']}. compile s and first-call s per "
            "row are in the JSON.\n"
        )
    return text


def steps_part(args) -> Part:
    step_json, fisher_json = args.work / "steps.json", args.work / "fisher.json"
    if args.smoke:
        a = ["--rounds", "1", "--chunk", "2", "--metrics", "identity", "rmsprop"]
        b = ["--rounds", "1", "--chunk", "2", "--metrics", "identity", "fisher_diag"]
        caps = (40.0, 40.0)
    else:
        a = ["--rounds", "5", "--chunk", "200", "--metrics", *args.step_metrics]
        b = ["--rounds", "5", "--chunk", "200", "--metrics", *args.fisher_metrics]
        a, b = a + ["--compile-workers", "8"], b + ["--compile-workers", "8"]
        caps = (args.caps.get("step_throughput", 90.0), args.caps.get("fisher_step", 55.0))
    a += ["--no-torch", "--scan", "only", "--json", str(step_json)]
    b += ["--json", str(fisher_json)]
    jobs = [
        Job("step_throughput", python_job(args, "step_throughput.py", *a), caps[0], 15.0),
        Job("fisher_step", python_job(args, "fisher_step.py", *b), caps[1], 15.0),
    ]

    def render(outcomes: list[Outcome]) -> tuple[str, dict[str, Any]]:
        data = {}
        for key, path in (("sgrld", step_json), ("fisher", fisher_json)):
            data[key] = json.loads(path.read_text())["candidates"] if path.exists() else []
        return steps_tables(data), step_figures(data)

    return Part("steps", "Part 2: one chain's step of every metric, and Γ's cost", jobs, render)


def _per_step(c: dict) -> list[float]:
    return [t / c["steps"] for t in c["times"]]


def step_figures(data: dict[str, list[dict]]) -> dict[str, Any]:
    """Paired ratios of every step to Identity's (same script) and of Γ to the uncorrected step."""
    figures: dict[str, Any] = {"to_identity": {}, "gamma": {}, "ms": {}}
    for cands in data.values():
        scan = [c for c in cands if c["group"] != "floor" and c["metric"]]
        ident = next((c for c in scan if c["metric"] == "identity" and not c["corrected"]), None)
        plain = {c["metric"]: c for c in scan if not c["corrected"] and c["group"] != "fallback"}
        for c in scan:
            label = LABELS.get(c["metric"], c["metric"])
            if c["group"] == "fallback":
                label = "DOP, vmap(grad) fallback"
            label += " + Γ" if c["corrected"] else ""
            figures["ms"][label] = 1e3 * statistics.median(_per_step(c))
            if ident is not None and c is not ident and c["group"] != "fallback":
                figures["to_identity"][label] = paired(_per_step(c), _per_step(ident))
            if c["corrected"] and c["metric"] in plain:
                base = LABELS.get(c["metric"], c["metric"])
                figures["gamma"][base] = paired(_per_step(c), _per_step(plain[c["metric"]]))
    return figures


def steps_tables(data: dict[str, list[dict]]) -> str:
    figures = step_figures(data)
    text = ""
    titles = {
        "sgrld": "`step_throughput.py`: the MLP of `mlp.py` (N(0, 1) prior, N = 50,000), one "
        "random minibatch of 100, every step in a jitted `lax.scan`",
        "fisher": "`fisher_step.py`: the Flax MLP (Dense fast path), N(0, 0.1) prior, N = 50,000, "
        "one random minibatch of 100, every step in a jitted `lax.scan`",
    }
    for key, cands in data.items():
        if not cands:
            text += f"{titles[key]}: no result (see the job's output).\n\n"
            continue
        ident = next((c for c in cands if c["metric"] == "identity" and not c["corrected"]), None)
        plain = {
            c["metric"]: c
            for c in cands
            if c["metric"] and not c["corrected"] and c["group"] != "fallback"
        }
        rows = []
        for c in cands:
            ms = 1e3 * statistics.median(_per_step(c))
            to_ident = paired(_per_step(c), _per_step(ident)) if ident else None
            to_plain = None
            if c["corrected"] and c["metric"] in plain:
                to_plain = paired(_per_step(c), _per_step(plain[c["metric"]]))
            rows.append(
                [
                    c["name"],
                    f"{ms:.3f}",
                    f"{1e3 / ms:,.0f}",
                    ratio_text(to_ident) if c is not ident else "1.00×",
                    ratio_text(to_plain) if to_plain else "",
                    f"{c['compile_s']:.1f}",
                    "yes" if c["finite"] else "NO",
                ]
            )
        head = ["candidate", "ms/step", "steps/s", "/ Identity [range]", "/ uncorrected [range]"]
        text += f"{titles[key]}; ratios paired by round, median [range]:\n\n"
        text += md_table([*head, "compile s", "finite"], rows) + "\n\n"
    if not figures["gamma"]:
        return text
    rows = [[m, ratio_text(r)] for m, r in figures["gamma"].items()]
    text += "Γ (Hutchinson) against the uncorrected step of the same metric:\n\n"
    text += md_table(["metric", "+ Γ / uncorrected"], rows) + "\n"
    return text


def mnist_part(args) -> Part:
    runs = args.work / "runs"
    base = [args.python, "-m", "sgrld", "reproduce", "mnist-mlp", "--width", "400"]
    base += ["--data-dir", str(args.data_dir / "mnist")] + (["--resume"] if args.resume else [])
    sweeps = {  # prior: (metrics, cap as a function of the seconds left)
        "horseshoe": (["shampoo"], lambda left: 0.55 * left),
        "gaussian": (["identity", "wenzel", "rmsprop", "shampoo"], lambda left: left),
    }
    sweeps = {prior: sweeps[prior] for prior in args.priors}
    if len(sweeps) == 1:  # the one sweep takes all that is left
        sweeps = {prior: (metrics, lambda left: left) for prior, (metrics, _) in sweeps.items()}
    floor, grace = 60.0, 25.0
    if args.smoke:  # one sweep of Identity, 2,000 epochs of 5 steps: its budget cuts it (SIGTERM
        # at 17 - 8 = 9 s, within its first epochs; on a loaded machine, before the first ends)
        base += ["--replicates", "2", "--quick", "--train-size", "500", "--validation-size", "100"]
        base += ["--no-verify-checksums"]
        sweeps = {"horseshoe": (["identity"], lambda left: min(17.0, left))}
        epochs = {"horseshoe": ["--epochs", "2000"]}
        floor, grace = 5.0, 8.0
    else:
        base += ["--replicates", "10"]
        epochs = {"horseshoe": [], "gaussian": []}
    jobs = []
    for prior, (metrics, cap) in sweeps.items():
        folder = runs / prior
        argv = [
            *base,
            *epochs[prior],
            "--prior",
            prior,
            "--metrics",
            *metrics,
            "--out",
            str(folder),
        ]
        job = Job(f"mnist_{prior}", argv, cap, floor, grace, graceful=True)
        job.outputs["folder"] = folder
        jobs.append(job)

    def render(outcomes: list[Outcome]) -> tuple[str, dict[str, Any]]:
        text, rows = "", []
        for job in jobs:
            folder = job.outputs["folder"]
            got = sweep_rows(folder)
            rows += got
            text += f"**{job.name}** (`--out {folder.name}`):\n\n"
            if got:
                text += mnist_table(got) + "\n\n"
            else:
                text += "No epoch finished.\n\n"
            table = folder / "mnist_mlp.md"
            if table.exists():
                text += "The command's own table (`mnist_mlp.md`):\n\n" + table.read_text() + "\n"
            for png in sorted(folder.glob("curves_*.png")):
                target = args.out / f"{png.stem}_{args.card}.png"
                shutil.copyfile(png, target)
                text += f"Curves: `{target.name}`.\n\n"
        return text, {"rows": rows}

    return Part("mnist", "Part 3: MNIST MLP, 10 replicates as one sweep per metric", jobs, render)


def sweep_rows(folder: Path) -> list[dict[str, Any]]:
    """Per run folder ``<prior>-<W>/<metric>/``: the epochs reached and the replicates' test
    log p(y|X) and accuracy after the last of them (``metrics.jsonl``'s ``groups``)."""
    rows = []
    for metrics in sorted(folder.glob("*-*/*/metrics.jsonl")):
        records = read_jsonl(metrics)
        if not records:
            continue
        last = records[-1]
        prior, width = metrics.parent.parent.name.split("-")
        groups = last.get("groups", {})
        ll = [v for v in groups.get("test_log_likelihood", [last.get("test_log_likelihood")])]
        acc = [v for v in groups.get("test_accuracy", [last.get("test_accuracy")])]
        sample_s = [r["sample_s"] for r in records if r.get("sample_s") is not None]
        rows.append(
            {
                "prior": prior,
                "width": int(width),
                "metric": metrics.parent.name,
                "epochs": last.get("epoch"),
                "replicates": len(ll),
                "log_lik": ll,
                "accuracy": acc,
                "divergences": last.get("divergences"),
                "sample_s": statistics.median(sample_s) if sample_s else None,
                "status": run_status(metrics.parent / "summary.json"),
            }
        )
    return rows


def run_status(summary: Path) -> str:
    """The run's ``summary.json`` status (completed, interrupted, ...), or ``stopped`` without
    one (a run killed before it could write it)."""
    try:
        return str(json.loads(summary.read_text()).get("status", "stopped"))
    except (OSError, json.JSONDecodeError):
        return "stopped"


def mean_std(values: Sequence[float | None]) -> tuple[float, float, int]:
    """Mean and std (ddof = 1) of the finite values, and their number.

    Example:
      >>> mean_std([1.0, 3.0, None, float("nan")])
      (2.0, 1.4142135623730951, 2)
    """
    ok = [v for v in values if v is not None and math.isfinite(v)]
    if not ok:
        return math.nan, math.nan, 0
    return statistics.fmean(ok), statistics.stdev(ok) if len(ok) > 1 else math.nan, len(ok)


def mnist_table(rows: list[dict[str, Any]]) -> str:
    """Ours (mean ± std over the replicates scored) beside the paper's, with the epochs reached;
    ✓ within the paper's mean ± 2 std or above it, ▼ below."""
    out = []
    for r in rows:
        paper = PAPER.get((r["prior"], r["metric"]))
        cells = []
        for i, key in enumerate(("log_lik", "accuracy")):
            m, s, n = mean_std(r[key])
            paper_cell = f"{paper[i][0]:.4f} ± {paper[i][1]:.4f}" if paper else "—"
            if n == 0:
                cells += ["—", paper_cell]
                continue
            mark = ""
            if paper is not None:
                mark = " ✓" if m >= paper[i][0] - 2 * paper[i][1] else " ▼"
            cells.append(f"{m:.4f} ± {s:.4f}{mark}" if n > 1 else f"{m:.4f}{mark}")
            cells.append(paper_cell)
        n_scored = mean_std(r["log_lik"])[2]
        sample = f"{r['sample_s']:.2f}" if r["sample_s"] is not None else "—"
        state = r["status"]
        out.append(
            [
                r["prior"],
                r["width"],
                LABELS.get(r["metric"], r["metric"]),
                f"{r['epochs']} ({state})",
                f"{n_scored} of {r['replicates']}",
                *cells,
                r["divergences"],
                sample,
            ]
        )
    head = ["prior", "W", "metric", "epochs reached", "replicates scored", "log p(y\\|X)"]
    head += ["paper log p", "acc.", "paper acc.", "diverged chains", "sample s/epoch"]
    note = (
        "\n\nTest scores of each replicate's ensemble after the last epoch reached, mean ± std "
        "(ddof = 1) over the replicates; ✓: within or above the paper's mean − 2 std (its 400 "
        "epochs), ▼: below. A row short of 400 epochs is not the paper's experiment: its chains "
        "ran fewer epochs; `--resume` continues it. sample s/epoch: the median epoch's "
        "sampling time of the sweep's chains together."
    )
    return md_table([h.replace("\\|", "|") for h in head], out) + note


# --------------------------------------------------------------------------------------------------
# Targets


def targets(results: dict[str, Any]) -> list[list[str]]:
    """Each of the issue's targets: the measured value, hit, miss or not measured."""
    rows = []

    def add(target: str, value: float | None, ok: Callable[[float], bool], shown: str = ""):
        if value is None:
            rows.append([target, "not measured", "—"])
        else:
            rows.append([target, shown or f"{value:.2f}×", "hit" if ok(value) else "**miss**"])

    records = results.get("chains", {}).get("records", [])
    pair = {(r["a"], r["b"], r["chains"]): r for r in records if r["kind"] == "paired"}
    rate = {(r["name"], r["chains"]): r for r in records if r["kind"] == "rate"}
    for k, limit in ((1, 1.2), (8, 1.0), (64, 1.5)):
        r = pair.get(("sgrld identity", "blackjax sgld", k))
        shown = ratio_text(r) if r else ""
        add(
            f"sgrld ≥ {limit}× BlackJAX SGLD at {k} chain{'s' * (k > 1)}",
            r and r["median"],
            lambda v, limit=limit: v >= limit,
            shown,
        )
    engine_rows(add, pair, rate)
    for name in [f"sgrld {s}" for s in CHAIN_SAMPLERS] + ["blackjax sgld"]:
        one, many = rate.get((name, 1)), rate.get((name, 64))
        value = many["median"] / one["median"] if one and many else None
        if name == "sgrld identity" or value is not None:
            add(
                f"{name}: 64 chains ≥ 20× the chain-steps/s of 1",
                value,
                lambda v: v >= 20,
                f"{value:.1f}×" if value is not None else "",
            )
    r = pair.get(("sgrld sghmc", "blackjax sghmc L=10", 1))
    checks = {c["name"]: c for c in records if c["kind"] == "hlo"}
    if r:
        grad = checks.get("blackjax sghmc L=10", {}).get("gradient")
        rows.append(
            [
                "(no target) sgrld SGHMC / BlackJAX SGHMC (L = 10) per gradient, 1 chain",
                ratio_text(r),
                "gradient in BlackJAX's program" if grad else "BlackJAX's gradient NOT found",
            ]
        )
    figures = results.get("steps", {})
    to_ident, gamma = figures.get("to_identity", {}), figures.get("gamma", {})
    for label, limit in (("Shampoo", 2.0), ("DOP", 1.3), ("QDOP", 1.5)):
        r = to_ident.get(label)
        add(
            f"{label} ≤ {limit}× Identity per step (one chain)",
            r and r["median"],
            lambda v, limit=limit: v <= limit,
            ratio_text(r) if r else "",
        )
    for name, label, limit in (
        ("shampoo", "Shampoo", 2.0),
        ("dop", "DOP", 1.3),
        ("qdop", "QDOP", 1.5),
    ):
        r = pair.get((f"sgrld {name}", "sgrld identity", 1))
        inverse = r and {"median": 1 / r["median"], "low": 1 / r["high"], "high": 1 / r["low"]}
        add(
            f"{label} ≤ {limit}× Identity per step, part 1's engine rows at 1 chain",
            inverse and inverse["median"],
            lambda v, limit=limit: v <= limit,
            ratio_text(inverse) if inverse else "",
        )
    for label in ("RMSprop", "Wenzel", "Monge", "Shampoo", "DOP", "QDOP"):
        r = gamma.get(label)
        add(
            f"{label} + Γ ≤ 2× the uncorrected step",
            r and r["median"],
            lambda v: v <= 2.0,
            ratio_text(r) if r else "",
        )
    return rows


def engine_rows(add: Callable, pair: dict, rate: dict) -> None:
    """Issue 50's targets from part 1: each engine row at least 0.95× its bare scan at 1, 8 and
    64 chains, and 512 chains timed."""
    names = sorted({a for a, b, _ in pair if b == f"{a}, bare scan"})
    for name in names or ["sgrld identity"]:
        for k in (1, 8, 64):
            r = pair.get((name, f"{name}, bare scan", k))
            add(
                f"{name} through the engine ≥ 0.95× its bare scan at {k} chain{'s' * (k > 1)}",
                r and r["median"],
                lambda v: v >= 0.95,
                ratio_text(r) if r else "",
            )
    r = rate.get(("sgrld identity", 512))
    add(
        "sgrld identity timed at 512 chains",
        r and r["median"],
        lambda v: v > 0,
        f"{r['median']:,.0f} chain-steps/s" if r else "",
    )


# --------------------------------------------------------------------------------------------------
# Smoke data and the MNIST check


def write_tiny_mnist(folder: Path, n_train: int = 600, n_test: int = 100) -> None:
    """Random MNIST-shaped IDX files, gzipped (the smoke run's data)."""
    import numpy as np

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    for stem, n in (("train", n_train), ("t10k", n_test)):
        for kind, shape in (("images", (n, 28, 28)), ("labels", (n,))):
            array = rng.integers(0, 256 if kind == "images" else 10, shape, dtype=np.uint8)
            head = bytes([0, 0, 8, array.ndim]) + b"".join(d.to_bytes(4, "big") for d in shape)
            name = f"{stem}-{kind}-idx{3 if kind == 'images' else 1}-ubyte.gz"
            (folder / name).write_bytes(gzip.compress(head + array.tobytes(), mtime=0))


def check_mnist(folder: Path) -> str | None:
    """``None`` if the four files (raw or ``.gz``) are the official ones, else what is wrong."""
    for name, expected in MNIST_FILES.items():
        raw, packed = folder / name, folder / f"{name}.gz"
        if raw.exists():
            data = raw.read_bytes()
        elif packed.exists():
            data = gzip.decompress(packed.read_bytes())
        else:
            return f"{name}(.gz) not in {folder}"
        if hashlib.sha256(data).hexdigest() != expected:
            return f"{name}: SHA-256 is not the official file's"
    return None


# --------------------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add("--out", type=Path, required=True, help="the results files (at most 8 files)")
    add("--work", type=Path, help="job outputs and the MNIST sweeps' folders (default OUT/work)")
    add("--budget", type=float, help="seconds for the whole run (default 480; --smoke 150)")
    add("--smoke", action="store_true", help="tiny sizes in seconds, on any machine")
    add("--parts", nargs="+", choices=("chains", "steps", "mnist"), default=None)
    add(
        "--data-dir",
        type=Path,
        help="folder holding mnist/ (default: .gpu_data, else ../shared/data; --smoke: tiny "
        "generated files in WORK)",
    )
    add("--resume", action="store_true", help="continue the MNIST sweeps in WORK/runs")
    add("--hlo", action="store_true", help="part 1's compiled programs' text into WORK/hlo")
    add(
        "--priors",
        nargs="+",
        choices=("horseshoe", "gaussian"),
        default=["horseshoe", "gaussian"],
        help="part 3's sweeps, in this order (horseshoe: Shampoo; gaussian: four metrics)",
    )
    add("--commit", help="the commit measured (default: git rev-parse HEAD of this tree)")
    add("--python", default=sys.executable, help="the interpreter of the jobs")
    add("--require-gpu", action="store_true", help="run nothing unless JAX's backend is gpu")
    add(
        "--chains",
        type=int,
        nargs="+",
        default=[1, 64, 8, 512],
        help="part 1's chain counts, in the order they are run (the targets' first)",
    )
    add(
        "--bare-samplers",
        nargs="+",
        default=["identity", "rmsprop", "shampoo"],
        help="part 1's samplers timed in a bare scan beside the engine (issue 50)",
    )
    add("--step-metrics", nargs="+", default=["identity", "rmsprop", "wenzel", "monge", "shampoo"])
    add(
        "--fisher-metrics",
        nargs="+",
        default=["identity", "rmsprop", "fisher_diag", "fisher_qdiag"],
    )
    add(
        "--cap",
        action="append",
        default=[],
        metavar="JOB=SECONDS",
        help="a job's budget at most (chains, step_throughput, fisher_step), for a shorter run",
    )
    args = parser.parse_args(argv)
    args.parts = args.parts or ["chains", "steps", "mnist"]
    try:
        args.caps = {k: float(v) for k, v in (c.split("=", 1) for c in args.cap)}
    except ValueError:
        parser.error(f"--cap takes JOB=SECONDS, got {args.cap}")
    if args.budget is None:
        args.budget = 150.0 if args.smoke else 480.0
    args.work = args.work or args.out / "work"
    if args.data_dir is None and not args.smoke:
        local = REPO / ".gpu_data"
        args.data_dir = local if (local / "mnist").exists() else REPO.parent / "shared" / "data"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    clock = Clock(args.budget)
    runs = args.work / "runs"
    if "mnist" in args.parts and not args.resume and any(runs.glob("*/*")):
        print(f"{runs} holds runs: pass --resume to continue them, or remove it", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    for stale in ("chains.jsonl", "steps.json", "fisher.json"):
        (args.work / stale).unlink(missing_ok=True)
    if args.smoke:
        args.data_dir = args.work / "data"
        write_tiny_mnist(args.data_dir / "mnist")
    info = machine(args)
    args.card = info["card"]
    print(header("issues 37 and 50: GPU evidence", info), flush=True)
    env = dict(os.environ)
    paths = [str(REPO), str(entry_point_site(args.work)), env.get("PYTHONPATH")]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    env["PYTHONUNBUFFERED"] = "1"

    parts = [
        make(args)
        for name, make in (("chains", chains_part), ("steps", steps_part), ("mnist", mnist_part))
        if name in args.parts
    ]
    results: dict[str, Any] = {"machine": info, "budget_s": args.budget, "parts": {}}
    if "mnist" in args.parts and not args.smoke:
        problem = check_mnist(args.data_dir / "mnist")
        print(f"MNIST files in {args.data_dir / 'mnist'}: {problem or 'the official ones'}")
        if problem:
            parts = [p for p in parts if p.name != "mnist"]
            results["mnist_data"] = problem
    pre = run_job(Job("preflight", [args.python, "-c", PREFLIGHT], 90.0, 0.0), 90.0, env=env)
    backend = pre.output.strip().splitlines()[-1] if pre.output.strip() else ""
    if pre.status != "completed" or (args.require_gpu and backend != "gpu"):
        why = pre.line() if pre.status != "completed" else f"JAX's backend is {backend!r}"
        print(f"preflight failed, nothing run: {why}", file=sys.stderr, flush=True)
        return 3
    all_jobs = [j for p in parts for j in p.jobs]
    lines = []
    for part in parts:
        outcomes = []
        for job in part.jobs:
            later = all_jobs[all_jobs.index(job) + 1 :]
            budget = job_budget(job, later, clock.left() - 5.0)
            print(f"== {job.name}: budget {budget:.0f} s ({clock.left():.0f} s left)", flush=True)
            outcome = run_job(job, budget, env=env)
            print(f"== {outcome.line()}", flush=True)
            outcomes.append(outcome)
        try:
            text, figures = part.render(outcomes)
        except Exception as err:  # a table that cannot be made must not lose the others
            text, figures = f"The tables could not be made: {err!r}\n", {}
        results["parts"][part.name] = {
            "jobs": [{k: v for k, v in vars(o).items() if k != "output"} for o in outcomes]
        }
        results[part.name] = figures
        body = header(part.title, info) + "\n" + "\n".join(f"* {o.line()}" for o in outcomes)
        body += "\n\n" + text + "\n## Output of each job\n"
        for o in outcomes:
            body += f"\n`{' '.join(o.argv)}`\n\n```\n{o.output.rstrip()}\n```\n"
        (args.out / f"{part.name}_{args.card}.md").write_text(body)
        lines += [o.line() for o in outcomes]
    summary = header("issues 37 and 50: the targets", info)
    if args.smoke:
        summary += "\nSmoke run: tiny sizes on purpose; its figures test the script, not sgrld.\n"
    summary += (
        f"\nWhole run: {args.budget - clock.left():.0f} s of a {args.budget:.0f} s budget.\n\n"
    )
    summary += "\n".join(f"* {line}" for line in lines) + "\n\n"
    if "mnist_data" in results:
        summary += f"MNIST part not run: {results['mnist_data']}.\n\n"
    summary += md_table(["target", "measured", "verdict"], targets(results)) + "\n"
    (args.out / f"summary_{args.card}.md").write_text(summary)
    (args.out / f"results_{args.card}.json").write_text(json.dumps(results, indent=1, default=str))
    print(summary, flush=True)
    failed = [o for p in results["parts"].values() for o in p["jobs"] if o["status"] == "failed"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
