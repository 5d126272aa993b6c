"""``sgrld sweep``: settings x replicates as the chains of one program (sgrld_app.sweep)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import sgrld
from sgrld_app import cli
from sgrld_app.config import ConfigError, load_config
from sgrld_app.launch import run_config
from sgrld_app.sweep import Grid, parse_grid, run_sweep

TINY = [
    "data.name=digits",
    "data.batch_size=64",
    "model.widths=[8]",
    "prior.kind=gaussian",
    "sampler.learning_rate=0.1",  # a number: "auto" needs a burn-in (tests/run/test_auto_rate.py)
    "run.epochs=2",
    "run.burn_in=0",
    "run.thin=5",
]
"""A tiny digits run: 19 steps per epoch, 7 samples in 2 epochs."""
LRS = [0.05, 0.2]
REPLICATES = 2
CHUNK, SCORE = "jit(run)", "jit(score)"
"""The names under which jax reports the compilation of the engine's chunk and the scorer."""


@pytest.fixture(scope="module")
def sweep_run(tmp_path_factory):
    """``sgrld sweep`` of 2 learning rates x 2 replicates with saved samples, and the number of
    XLA compilations of each jitted function while it ran (jax.monitoring events)."""
    out = tmp_path_factory.mktemp("sweep") / "out"
    compiled: dict[str, int] = {}

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            name = kwargs.get("fun_name", "")
            compiled[name] = compiled.get(name, 0) + 1

    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        argv = ["sweep", "--grid", f"sampler.learning_rate={LRS}", "--replicates", "2"]
        argv += [arg for t in [*TINY, "run.save_samples=true"] for arg in ("--set", t)]
        code = cli.main([*argv, "--out", str(out)])
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    return code, out, compiled


def test_sweep_compiles_once(sweep_run):
    """4 chains (2 learning rates x 2 replicates) are one chunk program and one scorer; four
    `sgrld run` processes would compile four of each."""
    code, _, compiled = sweep_run
    assert code == 0
    assert compiled[CHUNK] == 1
    assert compiled[SCORE] == 1


def test_sweep_chain_is_the_run_of_its_learning_rate_and_seed(sweep_run, tmp_path):
    """Chain (lr, replicate r) has the samples and the ensemble scores of `sgrld run` with that
    learning rate and run.seed = r, up to float rounding (bit for bit on the CPU for these 4
    identity chains; allclose guards other backends). A program of more chains may round
    differently, which a chaotic chain (RMSprop's) amplifies: docs/cli.md#sweeps."""
    _, out, _ = sweep_run
    swept = sgrld.load_samples(out)
    summary = json.loads((out / "summary.json").read_text())["sweep"]
    for i, r in [(0, 1), (1, 0)]:  # both axes: another learning rate, another seed
        folder = tmp_path / f"run{i}{r}"
        config = load_config(
            None,
            [*TINY, f"sampler.learning_rate={LRS[i]}", f"run.seed={r}", "run.save_samples=true"],
        )
        result = run_config(config, folder)
        alone = sgrld.load_samples(folder)
        chain = i * REPLICATES + r
        for a, b in zip(jax.tree.leaves(alone.params), jax.tree.leaves(swept.params), strict=True):
            np.testing.assert_allclose(a[0], b[chain], rtol=1e-5, atol=1e-6)
        final = result.records[-1]
        for score in ("val_log_likelihood", "test_accuracy"):
            got = summary["scores"][i][score][r]
            np.testing.assert_allclose(got, final[score], rtol=1e-5)


def test_sweep_table_and_best_setting(sweep_run):
    """sweep.md / sweep.json / summary.json: mean ± std over replicates; the best learning rate is
    the one of the highest mean validation log-likelihood."""
    _, out, _ = sweep_run
    data = json.loads((out / "sweep.json").read_text())
    assert data == json.loads((out / "summary.json").read_text())["sweep"]
    means = [np.mean(s["val_log_likelihood"]) for s in data["scores"]]
    assert data["best"] == int(np.argmax(means))
    assert data["best_setting"] == {"sampler.learning_rate": LRS[data["best"]]}
    for row, s in zip(data["rows"], data["scores"], strict=True):
        ll = s["test_log_likelihood"]
        assert row["test log p(y|X)"] == f"{np.mean(ll):.4f} ± {np.std(ll, ddof=1):.4f}"
        assert row["samples"] == "7" and row["diverged"] == "0"
    table = (out / "sweep.md").read_text()
    assert "◀ best" in table and "| lr |" in table


def test_monge_alpha2_and_learning_rate_grid():
    """Two grids (lr x α²) give every combination; chain (lr, α², r) is the run with those values
    (Monge's α² enters the step traced, one per chain)."""
    monge = [*TINY[:-3], "run.epochs=1", "run.burn_in=0", "run.thin=19", "sampler.metric=monge"]
    config = load_config(None, monge)
    texts = ("sampler.learning_rate=[0.1]", "sampler.metric_params.alpha2=[0.25, 1.0]")
    out = run_sweep(config, [parse_grid(t, config) for t in texts], replicates=1, out=None)
    assert [(row["lr"], row["α²"]) for row in out.rows] == [("0.1", "0.25"), ("0.1", "1")]
    values = ["sampler.learning_rate=0.1", "sampler.metric_params.alpha2=1.0"]
    alone = run_config(load_config(None, [*monge, *values]), out=None)
    for a, b in zip(
        jax.tree.leaves(alone.state.params), jax.tree.leaves(out.result.state.params), strict=True
    ):
        np.testing.assert_allclose(a[0], b[1], rtol=1e-5, atol=1e-6)


def test_temperature_grid_equals_separate_runs():
    """A sweep of two temperatures: chain T is the run with sampler.temperature = T (the
    temperature enters the step traced, one per chain), samples and validation scores."""
    short = [*TINY[:-3], "run.epochs=1", "run.burn_in=0", "run.thin=19"]
    config = load_config(None, short)
    grid = parse_grid("sampler.temperature=[0.5, 1.0]", config)
    out = run_sweep(config, [grid], replicates=1, out=None)
    assert [row["T"] for row in out.rows] == ["0.5", "1"]
    for chain, t in enumerate(grid.values):
        alone = run_config(load_config(None, [*short, f"sampler.temperature={t}"]), out=None)
        for a, b in zip(
            jax.tree.leaves(alone.state.params),
            jax.tree.leaves(out.result.state.params),
            strict=True,
        ):
            np.testing.assert_allclose(a[0], b[chain], rtol=1e-5, atol=1e-6)
        got = out.scores[chain]["val_log_likelihood"][0]
        np.testing.assert_allclose(got, alone.records[-1]["val_log_likelihood"], rtol=1e-5)


def test_temperature_cannot_be_swept_for_isgd():
    config = load_config(None, [*TINY, "sampler.kind=isgd"])
    with pytest.raises(ConfigError, match="sampler.kind 'isgd' takes it as one fixed number"):
        parse_grid("sampler.temperature=[0.5, 1.0]", config)


def test_diverged_setting_does_not_stop_the_others():
    """A learning rate that diverges is counted and never chosen; the other chains go on."""
    config = load_config(None, [*TINY[:-3], "run.epochs=1", "run.burn_in=0", "run.thin=19"])
    out = run_sweep(config, [Grid("sampler.learning_rate", (0.05, 1e12))], 1, out=None)
    assert out.result.status == "completed"
    assert "1 chain(s) diverged" in out.result.message
    assert [s["diverged"] for s in out.scores] == [0, 1]
    assert out.best == 0
    assert np.isfinite(out.scores[0]["test_log_likelihood"]).all()


@pytest.mark.parametrize(
    "text, match",
    [
        ("sampler.learning_rate=[]", "non-empty list"),
        ("sampler.learning_rate=0.1", "non-empty list"),
        ("run.epochs=[1, 2]", "sweepable keys: sampler.learning_rate"),
        ("model.widths=[8]", "not a key a sweep can vary"),
        ('sampler.learning_rate=[0.1, "fast"]', "'fast' is not a number"),
        ("sampler.learning_rate=[0.1, true]", "True is not a number"),
        ("sampler.learning_rate=[0.1, 0.1]", "repeated"),
        ("sampler.learning_rate=[0.1, -1.0]", "must be > 0"),
        ("sampler.metric_params.alpha2=[1.0]", "sampler.metric is 'identity'"),
        ("sampler.learning_rate", "key=value"),
    ],
)
def test_bad_grid_is_refused_naming_the_key(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_grid(text, load_config(None, TINY))


@pytest.mark.parametrize("replicates", [0, -1])
def test_replicates_below_one_are_refused(replicates, capsys, tmp_path):
    argv = ["sweep", "--grid", "sampler.learning_rate=[0.1]", "--replicates", str(replicates)]
    with pytest.raises(SystemExit) as stop:  # the parser's usage error, before anything runs
        cli.main([*argv, "--out", str(tmp_path / "x"), *("--set", TINY[0])])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --replicates: must be an integer >= 1, got '{replicates}'" in err
    assert not (tmp_path / "x").exists()


def test_cli_bad_grid_and_no_validation_split_exit_2(capsys, tmp_path):
    base = ["sweep", "--out", str(tmp_path / "x"), *(a for t in TINY for a in ("--set", t))]
    assert cli.main([*base, "--grid", "sampler.learning_rate=[]"]) == 2
    assert "--grid sampler.learning_rate: expected a non-empty list" in capsys.readouterr().err
    assert cli.main([*base, "--set", "data.validation_size=0"]) == 2
    assert "set data.validation_size > 0" in capsys.readouterr().err
    twice = ["--grid", "sampler.learning_rate=[0.1]"] * 2
    assert cli.main([*base, *twice]) == 2
    assert "given twice" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_mnist_mlp_replicates_run_as_one_sweep(tmp_path, monkeypatch):
    """`sgrld reproduce mnist-mlp --replicates 3`: each cell is one sweep of 3 replicates (no
    grid) from --seed, and its row gives our mean ± std beside the paper's."""
    import argparse
    from types import SimpleNamespace

    from sgrld_reproductions import mnist_mlp
    from sgrld_reproductions.scaffolding import yu_mnist
    from tests.reproductions.test_reproduction import _result

    calls = []

    def fake_sweep(config, grids, replicates, **kwargs):
        calls.append((config.sampler.metric, config.run.seed, grids, replicates))
        over = {"test_log_likelihood": np.array([-0.060, -0.062, -0.064])}
        over |= {"test_accuracy": np.array([0.983, 0.984, 0.985]), "test_ece": np.ones(3) / 100}
        return SimpleNamespace(result=_result(), scores=[over])

    monkeypatch.setattr(yu_mnist, "run_sweep", fake_sweep)
    parser = argparse.ArgumentParser()
    mnist_mlp.REPRODUCTION.add_arguments(parser)
    argv = ["--metrics", "identity", "--replicates", "3", "--seed", "5", "--out", str(tmp_path)]
    assert mnist_mlp.REPRODUCTION.run(parser.parse_args(argv)) == 0
    assert calls == [("identity", 5, [], 3)]
    row = json.loads((tmp_path / "mnist_mlp.json").read_text())["rows"][0]
    assert row["log p(y|X)"] == "-0.0620 ± 0.0020" and row["acc."] == "0.9840 ± 0.0010"
    assert row["ECE"] == "0.0100 ± 0.0000" and row["paper log p"] == "-0.0750 ± 0.0004"
