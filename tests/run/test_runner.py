"""The experiment runner: schedule, online ensemble, chains, divergence and interruption."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_softmax, logsumexp
from scipy.stats import norm

import sgrld
import sgrld_app
from sgrld import evaluation
from sgrld.bnn import likelihoods
from sgrld_app import from_config, report, runner
from sgrld_app.experiment import Experiment, RunPlan, sample_steps
from tests.helpers import write_uci

N_TRAIN, BATCH, DIM, CLASSES = 40, 4, 3, 3  # 10 steps per epoch


def apply(net, x):
    return x @ net["w"] + net["b"]


def predict(params, x):
    return apply(params["net"], x)


def logistic_experiment(lr: float = 0.05, kind: str = "classification") -> Experiment:
    """Softmax regression (or linear regression) on fixed synthetic data, N(0, 1) prior."""
    rng = np.random.default_rng(0)
    w_true = rng.normal(size=(DIM, CLASSES)) * 2
    x = rng.normal(size=(N_TRAIN + 30, DIM)).astype(np.float32)
    if kind == "classification":
        y = np.argmax(x @ w_true + rng.gumbel(size=(len(x), CLASSES)), axis=1).astype(np.int32)
        loglik = likelihoods.categorical(apply)
        predict_fn = predict
    else:
        y = (x @ w_true[:, 0] + 0.3 * rng.normal(size=len(x))).astype(np.float32)
        loglik = likelihoods.gaussian(lambda net, x: apply(net, x)[:, 0], noise_std=0.3)
        predict_fn = lambda params, x: (predict(params, x)[:, 0], 0.3)
    potential = sgrld.potential(
        loglik,
        lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p)),
        N_TRAIN,
    )
    sampler = sgrld.sgrld(potential, sgrld.metrics.identity(), learning_rate=lr, num_data=N_TRAIN)

    def init_fn(key):
        return {
            "net": {
                "w": 0.1 * jax.random.normal(key, (DIM, CLASSES)),
                "b": jnp.zeros(CLASSES),
            }
        }

    return Experiment(
        sampler=sampler,
        init_fn=init_fn,
        predict_fn=predict_fn,
        train=(x[:N_TRAIN], y[:N_TRAIN]),
        eval_sets={"test": (x[N_TRAIN:], y[N_TRAIN:]), "val": (x[:10], y[:10])},
        kind=kind,
    )


SCHEDULE = RunPlan(epochs=3, batch_size=BATCH, burn_in=7, thin=4, chains=2, seed=3)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """3 epochs of 10 steps, burn-in 7, thin 4, two chains, samples saved."""
    out = tmp_path_factory.mktemp("saved")
    return runner.run(logistic_experiment(), SCHEDULE, out=out, save_samples=True), out


def test_sample_steps_rule():
    np.testing.assert_array_equal(sample_steps(30, 7, 4), [7, 11, 15, 19, 23, 27])
    np.testing.assert_array_equal(sample_steps(10, 0, 1), np.arange(10))
    assert sample_steps(1100, 1000, 100).tolist() == [1099]


def test_burn_in_and_thinning_take_exactly_the_right_steps(saved):
    result, out = saved
    assert result.status == "completed"
    # Samples at global steps 7 | 11, 15, 19 | 23, 27 of epochs 1 | 2 | 3, for each of 2 chains.
    assert [r["samples_in_epoch"] for r in result.records] == [2, 6, 4]
    assert [r["samples"] for r in result.records] == [2, 8, 12]
    assert [r["steps"] for r in result.records] == [10, 20, 30]
    samples = sgrld.load_samples(out)
    assert samples.step.tolist() == [7, 11, 15, 19, 23, 27]
    assert samples.valid.shape == (2, 6) and samples.valid.all()
    assert samples.params["net"]["w"].shape == (2, 6, DIM, CLASSES)
    assert samples.names == ["net.b", "net.w"]
    assert samples.stats["potential"].shape == (2, 6)
    assert [p.name for p in sorted((out / "samples").iterdir())] == [
        "epoch_0001.npz",
        "epoch_0002.npz",
        "epoch_0003.npz",
        "params.json",
    ]


def test_online_ensemble_equals_offline_computation_from_the_saved_samples(saved):
    result, out = saved
    params = sgrld.load_samples(out).params
    w = params["net"]["w"].reshape(-1, DIM, CLASSES).astype(np.float64)  # both chains' samples
    b = params["net"]["b"].reshape(-1, CLASSES).astype(np.float64)
    final = result.records[-1]
    for name, (x, y) in logistic_experiment().eval_sets.items():
        log_probs = log_softmax(np.einsum("nd,sdc->snc", x, w) + b[:, None, :], axis=-1)
        per_sample = np.take_along_axis(log_probs, y[None, :, None], axis=-1)[..., 0]
        mean_probs = np.exp(log_probs).mean(axis=0)
        log_lik = np.mean(logsumexp(per_sample, axis=0) - np.log(len(w)))
        assert final[f"{name}_log_likelihood"] == pytest.approx(log_lik, rel=1e-5)
        assert final[f"{name}_accuracy"] == pytest.approx(np.mean(mean_probs.argmax(-1) == y))
        ece = evaluation.expected_calibration_error(mean_probs, y, 30)
        assert final[f"{name}_ece"] == pytest.approx(float(ece), abs=1e-5)


def test_chains_have_their_own_init_and_noise(saved):
    result, out = saved
    w = sgrld.load_samples(out).params["net"]["w"]
    assert not np.allclose(w[0], w[1])
    assert np.all(np.isfinite(w))
    assert np.asarray(result.state.step).tolist() == [30, 30]


def test_outputs_on_disk(saved):
    result, out = saved
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert lines == json.loads(json.dumps(result.records))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["epochs_completed"] == 3
    assert summary["compile_s"] > 0 and summary["seconds_per_epoch"] > 0
    assert 0 < summary["sampler_seconds_per_epoch"] < summary["seconds_per_epoch"]
    assert 0 < summary["eval_seconds_per_epoch"] < summary["seconds_per_epoch"]
    for line in lines:
        assert line["epoch_s"] == pytest.approx(line["sample_s"] + line["eval_s"])
    for key in ("potential", "grad_norm", "test_log_likelihood", "val_accuracy", "epoch_s"):
        assert np.isfinite(lines[-1][key]), key


def test_same_seed_same_run_with_or_without_saving(saved):
    result, _ = saved
    again = runner.run(logistic_experiment(), SCHEDULE)
    for a, b in zip(result.records, again.records, strict=True):
        timing = ("epoch_s", "sample_s", "eval_s", "epoch_cpu_s")
        assert {k: v for k, v in a.items() if k not in timing} == {
            k: v for k, v in b.items() if k not in timing
        }


def test_divergence_stops_with_a_clear_message_and_keeps_results(tmp_path: Path):
    # lr/N = 2.5e4: the prior's pull alone multiplies θ by ≈ −2.5e4 per step, overflowing float32.
    schedule = RunPlan(epochs=5, batch_size=BATCH, burn_in=0, thin=1, chains=1)
    result = runner.run(logistic_experiment(lr=1e6), schedule, out=tmp_path)
    assert result.status == "diverged"
    m = re.search(
        r"chain 0 diverged at epoch (\d+), step (\d+) \(step (\d+) of the epoch\)", result.message
    )
    assert m, result.message
    epoch, step, in_epoch = map(int, m.groups())
    assert epoch == step // 10 + 1 and in_epoch == step % 10
    assert "parameter ['net']" in result.message and str(tmp_path) in result.message
    assert "learning rate" in result.message
    assert len(result.records) == epoch < 5  # stopped after the epoch of the divergence
    assert result.records[-1]["samples"] == step  # samples only before the divergence
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == epoch
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "diverged" and summary["message"] == result.message
    assert all(np.all(np.isfinite(x)) for x in jax.tree.leaves(result.state.params))


@pytest.mark.parametrize("call", [3, 4], ids=["while-sampling", "while-scoring"])
def test_ctrl_c_in_the_second_epoch_keeps_the_first(tmp_path: Path, monkeypatch, call):
    # Each epoch blocks twice: after its sampling scan and after scoring its samples.
    calls = {"n": 0}
    real = jax.block_until_ready

    def interrupted_in_the_second_epoch(x):
        calls["n"] += 1
        if calls["n"] == call:
            raise KeyboardInterrupt
        return real(x)

    monkeypatch.setattr(jax, "block_until_ready", interrupted_in_the_second_epoch)
    result = runner.run(logistic_experiment(), SCHEDULE, out=tmp_path)
    assert result.status == "interrupted"
    assert result.message == f"interrupted after epoch 1; partial results in {tmp_path}"
    assert len(result.records) == 1
    assert len((tmp_path / "metrics.jsonl").read_text().splitlines()) == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "interrupted" and summary["final"]["epoch"] == 1


def test_regression_ensemble():
    schedule = RunPlan(epochs=2, batch_size=BATCH, burn_in=0, thin=2)
    result = runner.run(logistic_experiment(lr=0.02, kind="regression"), schedule)
    final = result.records[-1]
    assert result.status == "completed" and final["samples"] == 10
    assert 0 < final["test_rmse"] < 3 and np.isfinite(final["test_nll"])


def test_bad_arguments():
    exp = logistic_experiment()
    with pytest.raises(ValueError, match="larger than the training set"):
        runner.run(exp, RunPlan(epochs=1, batch_size=N_TRAIN + 1))
    with pytest.raises(ValueError, match="needs an out folder"):
        runner.run(exp, SCHEDULE, save_samples=True)
    with pytest.raises(ValueError, match="thin must be"):
        RunPlan(epochs=1, batch_size=1, thin=0)


def test_a_large_sample_buffer_is_warned_about(monkeypatch):
    monkeypatch.setattr(runner, "BUFFER_WARN_BYTES", 100)
    schedule = RunPlan(epochs=1, batch_size=BATCH, burn_in=0, thin=1)
    pattern = r"sample buffer takes .*\(10 slots x 1 chain.*larger run.thin"
    with pytest.warns(UserWarning, match=pattern):
        result = runner.run(logistic_experiment(), schedule)
    assert result.status == "completed" and result.records[0]["samples"] == 10


def test_plot_curves_before_and_after_the_first_sample(tmp_path: Path):
    import warnings

    no_sample = [{"epoch": 1, "test_log_likelihood": float("nan"), "test_accuracy": float("nan")}]
    sampled = [{"epoch": 1, "test_log_likelihood": -0.3, "test_accuracy": 0.9}]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns when a legend has no lines
        empty = report.plot_curves({"Identity": no_sample}, tmp_path / "empty.png")
        full = report.plot_curves({"Identity": sampled, "Monge": sampled}, tmp_path / "full.png")
    assert empty.stat().st_size > 0 and full.stat().st_size > empty.stat().st_size


def uci_config(tmp_path: Path, *overrides: str):
    """A regression configuration on a small UCI-format set: y = 1000 + 50·x₀ − 20·x₁ + noise."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 2)) * [3.0, 0.5] + [10.0, -2.0]
    y = 1000.0 + 50.0 * x[:, 0] - 20.0 * x[:, 1] + rng.normal(scale=5.0, size=60)
    table = np.column_stack([x[:, 0], y, x[:, 1]]).round(6)  # target in the middle column
    write_uci(tmp_path / "uci" / "yacht", table, [0, 2], 1, [(range(50), range(50, 60))])
    return sgrld_app.config.load_config(None, [
        "data.name=uci_yacht", f"data.data_dir={str(tmp_path)!r}", "data.verify_checksums=false",
        "data.batch_size=10", "model.kind=regression_mlp", "model.widths=[8]",
        "prior.kind=gaussian", "sampler.learning_rate=0.01", "run.epochs=3", "run.burn_in=0",
        "run.thin=5", *overrides,
    ])  # fmt: skip


@pytest.mark.parametrize("noise", [None, 40.0])
def test_regression_config_scores_in_the_targets_units(tmp_path: Path, noise):
    """The potential sees standardised targets; predictions and scores are in the file's units."""
    extra = [] if noise is None else [f"likelihood.noise_std={noise}"]
    config = uci_config(tmp_path, *extra)
    experiment = from_config.build_experiment(config)
    ds = sgrld.data.load_dataset("uci_yacht", tmp_path, verify=False)
    raw = np.loadtxt(tmp_path / "uci" / "yacht" / "data.txt")
    assert experiment.kind == "regression"
    np.testing.assert_allclose(experiment.eval_sets["test"][1], raw[50:, 1], rtol=1e-6)
    np.testing.assert_allclose(np.std(experiment.train[1]), 1.0, rtol=1e-5)  # standardised
    # the training rows a search holds out are scored in the file's units (auto_rate.held_out)
    np.testing.assert_allclose(experiment.eval_units(experiment.train[1]), raw[:50, 1], rtol=1e-6)

    params = experiment.init_fn(jax.random.key(0))
    assert ("likelihood" in params) == (noise is None)
    mean, std = experiment.predict_fn(params, jnp.asarray(ds.x_test))
    net_out = bnn_apply(config, params, ds.x_test)
    np.testing.assert_allclose(mean, net_out * ds.target_std + ds.target_mean, rtol=1e-5)
    np.testing.assert_allclose(std, noise if noise is not None else ds.target_std, rtol=1e-5)

    # The potential's likelihood term: Gaussian on the standardised targets, σ in those units.
    batch = (jnp.asarray(ds.x_train[:10]), jnp.asarray(ds.y_train[:10]))
    sigma = (noise if noise is not None else ds.target_std) / ds.target_std
    logprior = sgrld.bnn.logprior_fn(sgrld.bnn.priors.gaussian())(params)
    expected = (
        -np.mean(norm.logpdf(ds.y_train[:10], bnn_apply(config, params, ds.x_train[:10]), sigma))
        - float(logprior) / 50
    )
    potential = float(runner_potential(experiment, params, batch))
    np.testing.assert_allclose(potential, expected, rtol=1e-5)

    result = runner.run(experiment, from_config.run_plan_of(config))
    assert result.status == "completed"
    final = result.records[-1]
    assert set(final) >= {"test_rmse", "test_nll"} and "test_accuracy" not in final
    assert 0 < final["test_rmse"] < 10 * np.std(raw[50:, 1])  # original units (std ≈ 160)


def bnn_apply(config, params, x):
    model = sgrld.bnn.MLP(features=config.model.widths, num_outputs=1)
    return np.asarray(sgrld.bnn.apply_fn(model)(params["net"], jnp.asarray(x)))[:, 0]


def runner_potential(experiment, params, batch):
    """The per-datum potential Û/N the experiment's sampler steps on."""
    state = experiment.sampler.init(params)
    _, info = experiment.sampler.step(jax.random.key(0), state, batch)
    return info.potential


def test_regression_config_errors(tmp_path: Path):
    with pytest.raises(sgrld_app.config.ConfigError, match="data.split"):
        uci_config(tmp_path, "data.split=-1")
    with pytest.raises(
        sgrld_app.config.ConfigError, match=r"\[data\]: uci_yacht has splits 0 to 0"
    ):
        from_config.build_experiment(uci_config(tmp_path, "data.split=1"))
    with pytest.raises(sgrld_app.config.ConfigError, match=r"\[data\]: cannot hold out 60"):
        from_config.build_experiment(uci_config(tmp_path, "data.validation_size=60"))
    with pytest.raises(sgrld_app.config.ConfigError, match="model.kind"):
        uci_config(tmp_path, "model.kind=cnn")


def _nan_init_experiment(poisoned: bool) -> Experiment:
    """The logistic experiment; with ``poisoned``, a chain whose init key says so starts at NaN."""
    base = logistic_experiment()

    def init_fn(key):
        params = base.init_fn(key)
        bad = poisoned & (jax.random.uniform(jax.random.fold_in(key, 1)) < 0.5)
        return jax.tree.map(lambda x: jnp.where(bad, jnp.nan, x), params)

    return Experiment(base.sampler, init_fn, base.predict_fn, base.train, base.eval_sets, base.kind)


def test_a_diverged_chain_leaves_the_others_as_they_would_be():
    # Epochs run without keeping diverged chains' states; an epoch in which one diverged runs
    # again with them kept. The healthy chain must come out as in a run where nothing diverged.
    schedule = RunPlan(epochs=2, batch_size=BATCH, burn_in=0, thin=2, chains=2, seed=3)
    poisoned = runner.run(_nan_init_experiment(True), schedule)
    clean = runner.run(_nan_init_experiment(False), dataclasses.replace(schedule, epochs=1))
    assert poisoned.status == "diverged", poisoned.message  # seed 3 poisons one chain of two
    assert "chains diverged" not in poisoned.message
    bad = int(re.search(r"chain (\d+) diverged at epoch 1, step 0 ", poisoned.message).group(1))
    good = 1 - bad
    for p, c in zip(jax.tree.leaves(poisoned.state), jax.tree.leaves(clean.state), strict=True):
        np.testing.assert_array_equal(np.asarray(p)[good], np.asarray(c)[good])
    assert all(np.all(np.isnan(np.asarray(x)[bad])) for x in jax.tree.leaves(poisoned.state.params))
    assert poisoned.records[0]["samples"] * 2 == clean.records[0]["samples"]
