"""Tests of ``sgrld reproduce isgd-uci`` (Franzese et al. 2021, App. C.1): the command end to end on
small UCI-format files, the paper's numbers, the per-split choice of the learning rate and the
rows, and i-SGD's default learning rate (its λ rule) in a configuration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

from sgrld_app import cli
from sgrld_app.config import ConfigError, load_config
from sgrld_reproductions import isgd_uci
from sgrld_reproductions.scaffolding import ISGD_METHODS
from tests.helpers import write_uci

pytestmark = pytest.mark.reproduction


def write_boston_like(base: Path, rows: int = 400, seed: int = 0) -> Path:
    """A learnable regression set (y = x·w + noise, 5 features) in bostonHousing's published
    layout, two 90/10 splits."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 5))
    y = x @ np.array([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.3 * rng.normal(size=rows)
    splits = []
    for _ in range(2):
        order = rng.permutation(rows)
        splits.append((order[: rows * 9 // 10].tolist(), order[rows * 9 // 10 :].tolist()))
    write_uci(base / "bostonHousing", np.column_stack([x, y]), range(5), 5, splits)
    return base


@pytest.mark.filterwarnings(
    "ignore::sgrld.numerics.per_example.FallbackWarning"
)  # i-SGD's log σ leaf
def test_command_end_to_end_on_small_uci_files(tmp_path: Path):
    """--quick on boston-shaped files: i-SGD (its rule) and SWAG learn the linear target (test
    RMSE well below the targets' std, about 3.8), the paper's cells beside ours."""
    data, out = write_boston_like(tmp_path / "data"), tmp_path / "out"
    argv = [
        "reproduce",
        "isgd-uci",
        "--quick",
        "--no-verify-checksums",
        "--methods",
        "isgd",
        "swag",
    ]
    code = cli.main([*argv, "--data-dir", str(data), "--out", str(out)])
    assert code == 0
    payload = json.loads((out / "isgd_uci.json").read_text())
    rows = {row["method"]: row for row in payload["rows"]}
    assert list(rows) == ["i-SGD", "SWAG"]
    assert payload["config"]["grids"] == {"isgd": [None], "swag": [0.01]}
    for row in rows.values():
        chosen = row["per_split"]["0"]
        assert row["splits"] == "1/1" and chosen["samples"] == 20, row
        assert 0 < chosen["test_rmse"] < 1.5 and np.isfinite(chosen["test_nll"]), row
    assert rows["i-SGD"]["lr"] == "rule" and rows["i-SGD"]["paper_rmse"] == "3.703 ± 1.19"
    assert rows["SWAG"]["paper_rmse"] == "—" and rows["SWAG"]["within"] == "—"
    assert rows["i-SGD"]["within"] == "yes"
    assert "Franzese" in (out / "isgd_uci.md").read_text()


def test_paper_tables_hold_the_issue_numbers():
    rmse = isgd_uci.PAPER_RMSE
    assert rmse["i-sgd", "uci_boston"] == isgd_uci.Paper(3.703, 1.19)
    assert rmse["sghmc", "uci_boston"] == isgd_uci.Paper(3.659, 1.24)
    assert rmse["drop", "uci_boston"] == isgd_uci.Paper(3.803, 1.26)
    assert rmse["sgld", "uci_boston"] == isgd_uci.Paper(9.602, 2.06)
    assert rmse["i-sgd", "uci_protein"].mean == 4.699 and rmse["sghmc", "uci_protein"].mean == 4.712
    assert rmse["sgld", "uci_naval"].failed == 6 and rmse["vsgd", "uci_boston"].failed == 1
    assert isgd_uci.PAPER_NLL["sghmc", "uci_naval"] == isgd_uci.Paper(-2.763, 1.33, 2)
    assert len(rmse) == len(isgd_uci.PAPER_NLL) == 6 * 6


def _run(split, lr, val_rmse, test_rmse, status="completed"):
    return {
        "dataset": "uci_boston", "split": split, "method": "sgld", "lr": lr, "status": status,
        "message": "", "seconds": 2.0, "samples": 100, "test_rmse": test_rmse, "test_nll": 2.5,
        "val_rmse": val_rmse, "val_nll": 2.6,
    }  # fmt: skip


def test_rows_choose_each_split_s_learning_rate_on_validation():
    """Per split the completed run of lowest validation RMSE counts (a diverged one never);
    mean ± std (ddof = 1) of the chosen test RMSEs; 'within' against the paper's mean + std."""
    grid = [
        _run(0, 0.003, 3.0, 5.0), _run(0, 0.01, 2.0, 4.0), _run(0, 0.03, 1.0, 0.1, "diverged"),
        _run(1, 0.003, 1.5, 2.0), _run(1, 0.01, 2.5, 9.0),
    ]  # fmt: skip
    row = isgd_uci.table_row("uci_boston", ISGD_METHODS[0], grid)
    assert [row["per_split"][k]["lr"] for k in ("0", "1")] == [0.01, 0.003]
    assert row["rmse"] == f"3.000 ± {np.std([4.0, 2.0], ddof=1):.3f}" and row["lr"] == "0.003, 0.01"
    assert row["paper_rmse"] == "9.602 ± 2.06" and row["within"] == "yes"  # 3.0 ≤ 11.66
    assert row["splits"] == "2/2" and row["seconds"] == 10
    failed = isgd_uci.table_row(
        "uci_boston", ISGD_METHODS[0], [_run(0, 0.01, 1.0, 1.0, "diverged")]
    )
    assert failed["splits"] == "0/1" and failed["rmse"] == "—" and failed["per_split"]["0"] is None
    assert isgd_uci.exit_code({"config": {"datasets": ["uci_boston"], "methods": ["sgld"]},
                               "runs": [_run(0, 0.01, 1.0, 1.0, "diverged")]}) == 1  # fmt: skip


def test_isgd_in_a_configuration_defaults_to_its_lambda_rule():
    """``sampler.kind = "isgd"`` alone uses the λ rule (no ``learning_rate`` passed on); the
    other kinds keep theirs, ``"auto"``; T = 0 with the rule is refused, naming the key."""
    assert "learning_rate" not in load_config(None, ["sampler.kind=isgd"]).sampler.sampler_options()
    sghmc = load_config(None, ["sampler.kind=sghmc"]).sampler.sampler_options()
    assert sghmc["learning_rate"] == "auto"
    with pytest.raises(ConfigError, match="sampler.temperature"):
        load_config(None, ["sampler.kind=isgd", "sampler.temperature=0"])


@pytest.mark.parametrize(
    "argv",
    [["--samples", "10"], ["--methods", "hmc"], ["--splits", "0"], ["--lr", "isgd=0.1"],
     ["--lr", "sgld=-1"], ["--lr", "0.1"]],
)  # fmt: skip
def test_bad_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["reproduce", "isgd-uci", "--quick", *argv])
    assert exit_info.value.code == 2


def test_fewer_updates_than_the_ensemble_size_is_refused_naming_the_options(tmp_path, capsys):
    """A run keeps S states of its second half: --steps below --samples is refused before any
    run, naming the options (it used to surface as run.burn_in < 0)."""
    argv = ["reproduce", "isgd-uci", "--data-dir", str(tmp_path), "--steps", "10"]
    assert cli.main([*argv, "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "--steps 10 is below the ensemble size S = 100 (--samples)" in err, err


def test_header_names_the_learning_rates_fixed_by_lr():
    parser = argparse.ArgumentParser()
    isgd_uci.REPRODUCTION.add_arguments(parser)
    args = parser.parse_args(["--lr", "sgld=0.03", "swag=0.01", "--splits", "2"])
    assert "2 split(s)" in isgd_uci.header(args)
    assert "learning rates of --lr: sgld=0.03, swag=0.01" in isgd_uci.header(args)


def test_slow_data_sets_get_longer_runs_unless_steps_is_given():
    parser = argparse.ArgumentParser()
    isgd_uci.REPRODUCTION.add_arguments(parser)
    args = parser.parse_args(["--datasets", "uci_boston", "uci_naval", "uci_kin8nm"])
    assert [isgd_uci.steps_of(d, args) for d in args.datasets] == [10_000, 40_000, 40_000]
    assert "40,000 updates a run (10,000 for boston)" in isgd_uci.header(args)
    fixed = parser.parse_args(["--datasets", "uci_boston", "uci_naval", "--steps", "500"])
    assert {isgd_uci.steps_of(d, fixed) for d in fixed.datasets} == {500}
    assert "500 updates a run," in isgd_uci.header(fixed)
    quick = parser.parse_args(["--quick", "--datasets", "uci_naval"])
    assert isgd_uci.steps_of("uci_naval", quick) == isgd_uci.QUICK["steps"]
