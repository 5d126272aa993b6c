"""``sgrld reproduce cifar-resnet``: Tables 3, 7 and 9 of Yu et al. on stub runs, end to end
with --quick on synthetic CIFAR-10 files in the official format, and its bad input."""

import argparse
import importlib.metadata
import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sgrld_app import cli
from sgrld_reproductions import cifar_resnet
from tests.data.test_data import write_cifar

pytestmark = [pytest.mark.reproduction, pytest.mark.long]


def stub_result(cfg, seconds: float, epochs: int = 4):
    """A stand-in for a run: log p(y|X) improves by 0.01 an epoch from a level set by lr."""
    level = -0.5 + cfg.sampler.learning_rate
    records = [
        {
            "epoch": e + 1,
            "samples": 4 * (e + 1),
            "test_log_likelihood": level + 0.01 * e,
            "test_accuracy": 0.85 + 0.001 * e,
            "test_ece": 0.09,
            "val_log_likelihood": math.nan,
        }
        for e in range(epochs)
    ]
    summary = {"sampler_seconds_per_epoch": seconds, "eval_seconds_per_epoch": 0.5}
    return SimpleNamespace(
        status="completed", message="done", records=records, summary=summary, compile_s=1.0
    )


def parse(argv):
    parser = argparse.ArgumentParser()
    cifar_resnet.REPRODUCTION.add_arguments(parser)
    return parser.parse_args(argv)


def test_tables_on_stub_runs(tmp_path: Path, monkeypatch):
    seconds = {"identity": 2.0, "wenzel": 1.0, "rmsprop": 2.0, "shampoo": 3.0}
    calls = []

    def run_config(cfg, **kw):
        calls.append((cfg.prior.kind, cfg.sampler.metric, cfg.sampler.learning_rate, cfg.run.seed))
        return stub_result(cfg, seconds[cfg.sampler.metric])

    monkeypatch.setattr(cifar_resnet, "run_config", run_config)
    args = parse(["--epochs", "4", "--replicates", "2", "--seed", "3", "--out", str(tmp_path)])
    assert cifar_resnet.REPRODUCTION.run(args) == 0
    # Table 3 at Table 5's rates, then Table 7's re-chosen rates for RMSprop and Shampoo only.
    gaussian = [c[1:] for c in calls if c[0] == "gaussian"]
    assert gaussian == [
        ("identity", 0.1, 3), ("identity", 0.1, 4), ("wenzel", 0.5, 3), ("wenzel", 0.5, 4),
        ("rmsprop", 0.0005, 3), ("rmsprop", 0.0005, 4), ("shampoo", 0.01, 3),
        ("shampoo", 0.01, 4), ("rmsprop", 0.00075, 3), ("rmsprop", 0.00075, 4),
        ("shampoo", 0.025, 3), ("shampoo", 0.025, 4),
    ]  # fmt: skip
    assert {c[0] for c in calls} == {"gaussian", "conv_correlated"}
    rows = json.loads((tmp_path / "cifar_resnet.json").read_text())["rows"]
    table = {(r["table"], r["prior"], r["metric"]): r for r in rows}
    assert len(rows) == 2 * 2 * 5
    identity = table[("3 & 9", "gaussian", "Identity")]
    assert identity["log p(y|X)"] == "-0.3700 ± 0.0000"  # -0.5 + 0.1 + 3 epochs x 0.01
    assert identity["paper log p"] == "-0.4627 ± 0.0039" and identity["paper ECE"].startswith(
        "0.09"
    )
    wenzel = table[("3 & 9", "gaussian", "Wenzel")]
    assert wenzel["log p(y|X)"] == "0.0300 ± 0.0000"
    # Equal time: Wenzel's 4 epochs of 1 s are the budget; Identity and RMSprop get 2 epochs,
    # Shampoo 1, each at its Table 7 learning rate.
    seven = {r["metric"]: r for r in rows if r["table"] == "7" and r["prior"] == "gaussian"}
    assert [seven[m]["epochs"] for m in ("Identity", "Wenzel", "RMSprop", "Shampoo")] == [
        "2", "4", "2", "1"
    ]  # fmt: skip
    assert (
        seven["Shampoo"]["lr"] == "0.025" and seven["Shampoo"]["log p(y|X)"] == "-0.4750 ± 0.0000"
    )
    assert seven["RMSprop"]["paper log p"] == "-0.4828 ± 0.0041"
    assert table[("7", "correlated", "Monge")]["status"] == "not run"
    assert (tmp_path / "curves_correlated.png").stat().st_size > 0
    assert (tmp_path / "cifar_resnet.md").read_text().count("\n| 7 |") == 10


def synthetic_cifar(directory: Path, per_batch: int = 220) -> Path:
    """Six files in the official python-pickle layout: 1 100 training and 220 test images."""
    rng = np.random.default_rng(0)
    batches = [
        (
            rng.integers(0, 256, (per_batch, 32, 32, 3), dtype=np.uint8),
            rng.integers(0, 10, per_batch).tolist(),
        )
        for _ in range(6)
    ]
    return write_cifar(directory, batches)


@pytest.fixture(scope="module")
def cifar_dir(tmp_path_factory) -> Path:
    return synthetic_cifar(tmp_path_factory.mktemp("cifar") / "cifar-10-batches-py")


def test_quick_runs_end_to_end_on_synthetic_cifar_files(cifar_dir: Path, tmp_path: Path):
    argv = ["reproduce", "cifar-resnet", "--quick", "--metrics", "identity", "--prior"]
    argv += ["correlated", "--data-dir", str(cifar_dir), "--validation-size", "100"]
    argv += ["--no-verify-checksums", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    rows = json.loads((tmp_path / "cifar_resnet.json").read_text())["rows"]
    assert [(r["table"], r["metric"], r["status"]) for r in rows] == [
        ("3 & 9", "Identity", "completed"),
        ("7", "Identity", "completed"),
    ]
    assert rows[0]["log p(y|X)"] == rows[1]["log p(y|X)"] and rows[1]["epochs"] == "1"
    assert -3.0 < float(rows[0]["log p(y|X)"].split()[0]) < -1.5  # random labels: about log 1/10
    folder = tmp_path / "correlated" / "identity"
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["samples"] == 2  # steps 14 and 19 of 20
    config = (folder / "config.toml").read_text()
    assert 'kind = "resnet20"' in config and 'kind = "conv_correlated"' in config


def test_bad_input(cifar_dir: Path, tmp_path: Path, capsys):
    base = ["reproduce", "cifar-resnet", "--quick", "--data-dir", str(cifar_dir)]
    with pytest.raises(SystemExit) as info:
        cli.main([*base, "--replicates", "0"])
    assert info.value.code == 2 and "--replicates: must be a positive integer" in (
        capsys.readouterr().err
    )
    argv = [*base, "--validation-size", "100", "--out", str(tmp_path)]
    assert cli.main(argv) == 2  # the synthetic files fail the official MD5s
    err = capsys.readouterr().err
    assert f"{cifar_dir / 'data_batch_1'}: MD5 mismatch" in " ".join(err.split())


def test_registered_as_a_reproduction():
    (entry,) = importlib.metadata.entry_points(group="sgrld.reproductions", name="cifar-resnet")
    assert entry.module == "sgrld_reproductions.cifar_resnet"
    assert entry.load() is cifar_resnet.REPRODUCTION
    assert cifar_resnet.REPRODUCTION.out == "results/cifar-resnet"
    assert cifar_resnet.REPRODUCTION.stem == "cifar_resnet"
