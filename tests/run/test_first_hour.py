"""What a new user meets in the command line and around it (issue 53): the run's one line and
table, ``--help``'s defaults and units, the keys a saved configuration writes, one export
warning, a warning when a run's chains disagree, a data set's repr and ``dir(sgrld)``."""

from __future__ import annotations

import dataclasses
import json
import re
import tomllib
import warnings
from pathlib import Path

import jax
import pytest

import sgrld
import sgrld_app
from sgrld.chains.dispersion import ChainsDisagreeWarning
from sgrld.samples import arviz_export
from sgrld_app import cli, runner
from sgrld_app.config import load_config, to_toml
from tests.run.test_runner import SCHEDULE, logistic_experiment

SETTINGS = [
    "data.name=digits",
    "data.batch_size=128",
    "model.widths=[8]",
    "prior.kind=gaussian",
    "sampler.learning_rate=0.05",
    "run.chains=4",
    "run.epochs=3",
    "run.burn_in=0",
    "run.thin=4",
    "run.save_samples=true",
]
"""9 steps per epoch, about 2 draws per epoch of 4 chains: 6 draws in all."""


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``sgrld run`` with ten settings changed, its output, then ``sgrld export`` of it."""
    out = tmp_path_factory.mktemp("first_hour") / "run"
    args = ["run", *(a for s in SETTINGS for a in ("--set", s)), "--out", str(out)]
    with pytest.MonkeyPatch.context() as mp:
        lines: list[str] = []
        mp.setattr("rich.console.Console.print", lambda self, x="", **kw: lines.append(str(x)))
        assert cli.main(args) == 0
        printed = [line if isinstance(line, str) else "" for line in lines]
    return out, printed


def test_run_says_what_it_runs(cli_run, capsys):
    out, printed = cli_run
    assert printed[0] == (
        "Running digits, identity, lr 0.05, 4 chains; 10 settings changed from the defaults -> "
        f"{out}"
    )
    assert not any("default configuration" in line for line in printed)


def test_run_table_shows_the_rate_the_run_used(tmp_path: Path, capsys):
    args = ["run", *(a for s in SETTINGS[:-1] for a in ("--set", s)), "--set", "run.epochs=1"]
    assert cli.main([*args, "--set", "run.chains=1", "--out", str(tmp_path / "r")]) == 0
    text = capsys.readouterr().out
    caption = "digits, identity, lr 0.05, 1 chain; 8 settings changed from the defaults after 1"
    assert caption in text
    header = next(line for line in text.splitlines() if "test log p(y|X)" in line)
    row = text.splitlines()[text.splitlines().index(header) + 2]
    assert re.split(r"\s{2,}", header.strip())[:2] == ["metric", "lr"]
    assert row.split()[:2] == ["identity", "0.05"]


def test_help_gives_every_default_and_the_schedules_units(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    assert "(its default)" not in text
    assert "# learning_rate is not set: " in text
    assert re.search(r'burn_in = "auto"  # minibatch steps .*not epochs.*"auto": 1000', text)
    assert "thin = 100  # a sample every thin minibatch steps" in text
    assert "epochs = 400  # passes over the training set" in text


@pytest.mark.parametrize(
    "kind, widths, data, keys",
    [
        ("mlp", "[8]", "mnist", {"kind", "widths"}),
        ("logistic_regression", "[400, 400]", "australian", {"kind"}),
        ("cnn", "[8]", "cifar10", {"kind", "widths", "conv"}),
        ("resnet20", "[4]", "cifar10", {"kind", "widths", "depth", "conv"}),
    ],
)
def test_saved_config_writes_the_model_keys_of_its_kind(kind, widths, data, keys):
    config = load_config(
        None, [f"model.kind={kind}", f"model.widths={widths}", f"data.name={data}"]
    )
    text = to_toml(config)
    assert set(tomllib.loads(text)["model"]) == keys
    assert sgrld_app.config.from_dict(tomllib.loads(text)) == config


def test_a_resnets_depth_is_written():
    config = load_config(
        None, ["model.kind=resnet20", "model.widths=[4]", "model.depth=8", "data.name=cifar10"]
    )
    assert tomllib.loads(to_toml(config))["model"]["depth"] == 8


def test_export_does_not_warn_of_chains_over_draws_for_each_epoch(cli_run, capsys):
    out, _ = cli_run
    assert cli.main(["export", str(out), "--format", "netcdf"]) == 0
    assert "longer than draw" not in capsys.readouterr().err


def test_export_of_fewer_draws_than_chains_warns_once(cli_run, tmp_path: Path):
    out, _ = cli_run
    short = tmp_path / "short"
    (short / "samples").mkdir(parents=True)
    for name in ("config.toml", "summary.json"):
        (short / name).write_bytes((out / name).read_bytes())
    for name in ("epoch_0001.npz", "params.json"):  # the first epoch's 2 draws
        (short / "samples" / name).write_bytes((out / "samples" / name).read_bytes())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        arviz_export.export(short, "zarr")
    found = [w for w in caught if "longer than draw" in str(w.message)]
    assert len(found) == 1 and "4 chains of 2 draws" in str(found[0].message)


def far_apart(key):
    """A start far from the posterior and from the other chains' (a uniform draw on ±300)."""
    start = logistic_experiment().init_fn(key)
    return jax.tree.map(lambda x: x + jax.random.uniform(key, (), minval=-300, maxval=300), start)


def test_a_run_whose_chains_disagree_warns_once_naming_them():
    experiment = dataclasses.replace(logistic_experiment(lr=1e-5), init_fn=far_apart)
    schedule = dataclasses.replace(SCHEDULE, chains=4)
    with pytest.warns(ChainsDisagreeWarning, match="split R-hat") as caught:
        runner.run(experiment, schedule)
    assert len([w for w in caught if w.category is ChainsDisagreeWarning]) == 1
    assert re.search(r"chain|chains", str(caught[0].message))


def test_a_run_whose_chains_agree_does_not_warn():
    schedule = dataclasses.replace(SCHEDULE, epochs=200, burn_in=300, thin=10, chains=3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ChainsDisagreeWarning)
        runner.run(logistic_experiment(lr=0.05), schedule)


def test_dataset_repr_shows_shapes_not_arrays():
    ds = sgrld.data.load_dataset("digits")
    text = repr(ds)
    assert text.startswith("Dataset('digits', 10 classes, train x (1258, 64) float32")
    assert len(text) < 300


def test_dir_of_sgrld_lists_the_api_only():
    names = {n for n in dir(sgrld) if not n.startswith("__")}
    assert names == set(sgrld.__all__)  # the application is sgrld_app, not an attribute
    assert not {"os", "sys", "importlib", "Any"} & set(dir(sgrld))


def test_the_default_burn_in_keeps_samples_in_a_short_run(tmp_path: Path, capsys):
    """``run.burn_in = "auto"`` (the default) is 1,000 steps, or half a run shorter than 2,000:
    a small file's run of 200 steps keeps samples where 1,000 kept none (UCI yacht's default
    run, 800 steps, was refused before); the run folder records the steps and keeps "auto"."""
    from tests.run.test_user_files import _write

    path = _write(tmp_path, ".csv", classes=False)  # 42 training rows: 2 steps of 16 an epoch
    settings = [f"data.path={str(path)!r}", "model.widths=[8]", "prior.kind=gaussian"]
    settings += ["data.batch_size=16", "sampler.learning_rate=0.05", "run.epochs=100"]
    settings += ["run.thin=20", "sampler.metric=rmsprop"]
    args = lambda out, *more: [  # noqa: E731
        "run", *(a for s in [*settings, *more] for a in ("--set", s)), "--out", str(out)
    ]
    assert cli.main(args(tmp_path / "given", "run.burn_in=1000")) != 0
    assert re.search("run.burn_in = 1000.*keep no sample", capsys.readouterr().err)
    assert cli.main(args(tmp_path / "auto")) == 0
    summary = json.loads((tmp_path / "auto" / "summary.json").read_text())
    assert summary["schedule"]["burn_in"] == 100  # half of 100 epochs of 2 steps
    assert summary["final"]["samples"] == 5  # steps 119, 139, ..., 199
    assert summary["meta"]["guarantee"].startswith("exact: metric frozen at step 75")
    saved = tomllib.loads((tmp_path / "auto" / "config.toml").read_text())
    assert saved["run"]["burn_in"] == "auto"
    assert cli.main(["run", "--resume", str(tmp_path / "auto")]) == 0  # resumes its own "auto"
