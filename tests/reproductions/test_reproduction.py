"""The shared table renderer (:mod:`sgrld_app.report`) and the reproductions' skeleton
(:mod:`sgrld_reproductions.scaffolding.driver`), with the MNIST reproduction's table on stub
runs."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from sgrld_app import report
from sgrld_reproductions import mnist_mlp
from sgrld_reproductions.scaffolding import Reproduction, yu_mnist

pytestmark = pytest.mark.reproduction


def _result(status="completed", log_lik=-0.07, seconds=2.0):
    """A stand-in for :class:`sgrld_app.experiment.Result` with one epoch record."""
    record = {"epoch": 1, "samples": 5, "test_log_likelihood": log_lik, "test_accuracy": 0.98}
    record |= {"test_ece": 0.01, "val_log_likelihood": math.nan}
    summary = {"sampler_seconds_per_epoch": seconds, "eval_seconds_per_epoch": 0.5}
    return SimpleNamespace(
        status=status, message=f"run {status}", records=[record], summary=summary, compile_s=1.25
    )


def test_columns_cells_and_markdown():
    cols = report.columns(
        """
        name      log p(y|X)
        value     value  {:.2f}
        """
    )
    assert cols == (("name", "log p(y|X)", "{}"), ("value", "value", "{:.2f}"))
    rows = [{"name": "a|b", "value": 1.0}, {"name": "c", "value": math.nan}]
    assert report.cells(rows[1], cols) == ["c", report.MISSING]
    md = report.markdown_table("caption", cols, rows)
    assert md.splitlines() == [
        "caption",
        "",
        "| log p(y\\|X) | value |",
        "|---|---|",
        "| a\\|b | 1.00 |",
        f"| c | {report.MISSING} |",
    ]
    table = report.rich_table("caption", cols, rows)
    assert [c.justify for c in table.columns] == ["left", "right"]


def test_summary_row_and_columns():
    row = report.summary_row(_result(), metric="Monge", lr="0.25")
    cols = report.summary_columns(row)
    assert list(row)[:3] == ["metric", "lr", "test log p(y|X)"]
    cells = dict(zip(row, report.cells(row, cols), strict=True))
    assert cells["test log p(y|X)"] == "-0.0700" and cells["val log p(y|X)"] == report.MISSING
    assert (
        cells["samples"] == "5" and cells["compile s"] == "1.2" and cells["status"] == "completed"
    )


def _toy(**overrides) -> Reproduction:
    """A reproduction of two rows whose second run ends with exit code 3."""

    def compute(args, on_result):
        results = {"config": {"seed": args.seed, "scale": args.scale}, "rows": []}
        for i in range(2):
            results["rows"].append({"name": f"row{i}", "x": args.scale * i})
            on_result(results)
        return results

    parts = dict(
        summary="a toy",
        stem="toy",
        options=lambda p: p.add_argument("--scale", type=float, default=1.0),
        quick_help="a small run",
        seed=7,
        out="results/toy",
        header=lambda args: f"toy, seed {args.seed}",
        compute=compute,
        progress=lambda results: f"done {results['rows'][-1]['name']}",
        columns=report.columns("name  name\nx  x  {:.1f}"),
        rows=lambda results: results["rows"],
        caption=lambda results: f"Toy, scale {results['config']['scale']:g}",
        notes="x: the value.",
        exit_code=lambda results: 3,
    )
    return Reproduction(**(parts | overrides))


def test_skeleton_options_run_and_files(tmp_path: Path, capsys):
    def plot(results, out):
        return [out / "a.png", out / "b.png"]

    toy = _toy(plot=plot)
    parser = argparse.ArgumentParser()
    toy.add_arguments(parser)
    defaults = parser.parse_args([])
    assert (defaults.quick, defaults.seed, defaults.out, defaults.scale) == (
        False,
        7,
        "results/toy",
        1.0,
    )
    args = parser.parse_args(["--scale", "2", "--out", str(tmp_path)])
    assert toy.run(args) == 3
    text = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert text.index("toy, seed 7") < text.index("done row0") < text.index("done row1")
    wrote = f"Wrote {tmp_path / 'a.png'}, {tmp_path / 'b.png'}, {tmp_path / 'toy.md'} and"
    assert f"{wrote} {tmp_path / 'toy.json'}" in text
    payload = json.loads((tmp_path / "toy.json").read_text())
    assert payload == {"config": {"seed": 7, "scale": 2.0}, "rows": [
        {"name": "row0", "x": 0.0}, {"name": "row1", "x": 2.0}]}  # fmt: skip
    md = (tmp_path / "toy.md").read_text()
    assert md.startswith("Toy, scale 2\n") and "| row1 | 2.0 |" in md and md.endswith("value.\n")


def test_from_module_takes_the_parts_by_name():
    toy = _toy()
    names = {"COLUMNS": toy.columns, "NOTES": toy.notes, "caption": toy.caption}
    names |= {"table_rows": toy.rows, "options": toy.options, "header": toy.header}
    names |= {"compute": toy.compute, "progress": toy.progress, "unrelated": 1}
    built = Reproduction.from_module(
        names, summary="a toy", stem="toy", quick_help="", out="results/toy"
    )
    assert built.rows is toy.rows and built.plot is None and built.exit_code(None) == 0


def test_mnist_table_on_stub_runs(tmp_path: Path, monkeypatch, capsys):
    statuses = iter(["completed", "diverged"])
    monkeypatch.setattr(
        yu_mnist, "run_config", lambda cfg, **kw: _result(next(statuses), log_lik=-0.2)
    )
    parser = argparse.ArgumentParser()
    mnist_mlp.REPRODUCTION.add_arguments(parser)
    argv = ["--prior", "gaussian", "--metrics", "identity", "monge", "shampoo"]
    assert mnist_mlp.REPRODUCTION.run(parser.parse_args([*argv, "--out", str(tmp_path)])) == 1
    rows = json.loads((tmp_path / "mnist_mlp.json").read_text())["rows"]
    assert [(r["metric"], r["status"]) for r in rows] == [
        ("Identity", "completed"),
        ("Monge", "not run"),
        ("Shampoo", "diverged"),
    ]
    assert rows[0]["log p(y|X)"] == "-0.2000 ▼" and rows[0]["paper log p"] == "-0.1310 ± 0.0004"
    assert rows[1]["ECE"] == report.MISSING
    assert (tmp_path / "curves_gaussian-400.png").stat().st_size > 0
    assert "run diverged" in capsys.readouterr().out
    assert "log p(y\\|X)" in (tmp_path / "mnist_mlp.md").read_text()


@pytest.mark.parametrize(
    "name", ["funnel", "mnist-mlp", "natural-langevin", "stationary-1d", "stationary-nd"]
)
def test_every_reproduction_has_the_skeleton(name):
    (entry,) = importlib.metadata.entry_points(group="sgrld.reproductions", name=name)
    module = __import__(entry.module, fromlist=["REPRODUCTION"])
    assert isinstance(module.REPRODUCTION, Reproduction)
    assert module.REPRODUCTION.out == f"results/{name}"
