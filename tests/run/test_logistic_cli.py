"""Bayesian logistic regression as a CLI run: the Bernoulli likelihood against a hand computation,
the config names it adds, and ``sgrld run`` end to end on a tiny LIBSVM file the test writes."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.bnn import likelihoods, models
from sgrld.samples.results import load_samples
from sgrld_app import cli
from sgrld_app.config import ConfigError, load_config


def test_bernoulli_by_hand():
    w, b = 0.5, -1.0
    x, y = np.array([[2.0], [-1.0], [0.0]]), np.array([1, 0, 0])
    z = x[:, 0] * w + b  # 0, -1.5, -1
    sigma = 1 / (1 + np.exp(-z))
    expected = np.where(y == 1, np.log(sigma), np.log(1 - sigma))
    params = {"net": {"kernel": jnp.full((1, 1), w), "bias": jnp.full((1,), b)}}
    apply = models.apply_fn(models.logistic_regression())
    got = jax.jit(likelihoods.bernoulli(apply))(params, (jnp.asarray(x), jnp.asarray(y)))
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert math.isclose(float(got[0]), -math.log(2), rel_tol=1e-6)
    labels = likelihoods.bernoulli(apply).sample(jax.random.key(0), params, jnp.zeros((500, 1)))
    assert labels.dtype == jnp.int32 and 0.2 < float(labels.mean()) < 0.33  # σ(−1) = 0.27


def test_bernoulli_refuses_more_than_one_logit():
    loglik = likelihoods.bernoulli(lambda net, x: x)
    with pytest.raises(ValueError, match="bernoulli likelihood expects logits"):
        loglik({"net": None}, (jnp.zeros((3, 2)), jnp.zeros(3)))


BLR = ["data.name=australian", "model.kind=logistic_regression", "prior.kind=gaussian"]


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        (["data.name=digits", "model.kind=logistic_regression"], "needs a binary data set"),
        (["data.name=uci_boston", "model.kind=logistic_regression"], "real-valued targets"),
        ([*BLR, "model.widths=[4]"], "has no hidden layers"),
        (["data.name=a9a", "data.test_size=10"], "data.test_size: only a data set without"),
        (["data.name=australian", "data.test_size=-1"], "data.test_size: must be >= 0"),
        (["model.kind=logistic"], "model.kind"),
        ([*BLR, "likelihood.noise_std=0.5"], r"likelihood \(Bernoulli\) has no noise"),
        (["data.name=digits", "likelihood.noise_std=0.5"], r"likelihood \(categorical\)"),
    ],
)
def test_config_refuses_bad_combinations(overrides, words):
    with pytest.raises(ConfigError, match=words):
        load_config(None, overrides)


def test_config_accepts_blr():
    cfg = load_config(None, [*BLR, "data.test_size=0"])
    assert cfg.model.kind == "logistic_regression" and cfg.data.test_size == 0


def test_sgrld_run_end_to_end(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 14))
    y = np.where(x[:, 0] + 0.1 * rng.normal(size=40) > 0, "+1", "-1")
    lines = (" ".join([y[i], *(f"{j + 1}:{x[i, j]:.4f}" for j in range(14))]) for i in range(40))
    (tmp_path / "australian").write_text("\n".join(lines) + "\n")
    config = tmp_path / "blr.toml"
    config.write_text(
        f'[data]\nname = "australian"\ndata_dir = "{tmp_path}"\nverify_checksums = false\n'
        "test_size = 10\nbatch_size = 10\n\n"
        '[model]\nkind = "logistic_regression"\n\n'
        '[prior]\nkind = "gaussian"\nparams = { weight_scale = 37.4, bias_scale = 10.0 }\n\n'
        '[sampler]\nmetric = "fisher_qdiag"\nlearning_rate = 0.5\n\n'
        "[run]\nepochs = 40\nburn_in = 60\nthin = 15\nchains = 2\nsave_samples = true\n"
    )
    out = tmp_path / "out"
    assert cli.main(["run", str(config), "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    last = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert last["test_accuracy"] >= 0.8 and -0.5 < last["test_log_likelihood"] < 0
    samples = load_samples(out)
    kernel = samples.params["net"]["kernel"]
    assert kernel.shape == (2, 4, 14, 1) and samples.params["net"]["bias"].shape == (2, 4, 1)
    assert float(np.mean(kernel[..., 0, 0])) > 0  # the first feature predicts the label
