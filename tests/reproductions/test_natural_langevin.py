"""Tests of ``sgrld reproduce natural-langevin`` (Marceau-Caron & Ollivier 2017, Table 1): the
command end to end on tiny synthetic IDX files, the table and the step-size selection on stub runs,
the halving schedule, the posterior-mean average and the dropout baseline."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
import sgrld_app
from sgrld.bnn import MLP, apply_fn, dropout, init_params
from sgrld_app import cli, report
from sgrld_app.experiment import sample_steps
from sgrld_reproductions import natural_langevin as nl
from sgrld_reproductions.natural_langevin import baselines, runs
from sgrld_reproductions.scaffolding import halving
from tests.data.test_data import REAL_MNIST, write_mnist

pytestmark = pytest.mark.reproduction


def easy_mnist(n_train: int, n_test: int, seed: int = 0) -> dict[str, np.ndarray]:
    """28×28 uint8 images whose class c lights up row block c (plus noise): easy to learn."""
    rng = np.random.default_rng(seed)

    def images(n):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        x = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for c in range(10):
            x[labels == c, 2 * c + 4 : 2 * c + 6, 4:24] = 250
        return x, labels

    (xtr, ytr), (xte, yte) = images(n_train), images(n_test)
    return {"train-images": xtr, "train-labels": ytr, "t10k-images": xte, "t10k-labels": yte}


def _command(tmp_path: Path, *argv: str) -> tuple[int, dict[str, dict]]:
    """Run the command on tiny easy IDX files (--quick, 13 epochs of 10 updates); its rows."""
    # gzipped files: the built-in SHA-256 table only knows the raw names.
    data = write_mnist(tmp_path / "mnist", easy_mnist(1100, 200), gz=True)
    out = tmp_path / "out"
    args = ["reproduce", "natural-langevin", "--quick", "--epochs", "13", "--validation-size"]
    args += ["100", "--train-eval-size", "300", "--data-dir", str(data), "--out", str(out)]
    code = cli.main([*args, *argv])
    payload = json.loads((out / "natural_langevin.json").read_text())
    assert payload["config"]["train_size"] == 1000 and payload["config"]["thin"] == 25
    assert [row["row"] for row in payload["rows"]] == [row.label for row in nl.table_layout()]
    return code, {row["row"]: row for row in payload["rows"]}


def _learned(row: dict) -> None:
    assert row["status"] == "1/1 completed", row
    assert row["test_acc"] > 50 and 0 < row["test_nll"] < 2.3, row  # chance: 10 %, log 10


@pytest.mark.long
def test_command_end_to_end_on_tiny_idx_files(tmp_path: Path, capsys):
    code, rows = _command(tmp_path, "--methods", "dropout", "euclidean")
    assert code == 0 and len(rows) == 14
    for label in ("Dropout", "Ensemble, Euclidean", "PostMean, Euclidean"):
        _learned(rows[label])
        assert rows[label]["lr"] == "0.1" and rows[label]["train_acc"] is not None
    assert rows["Ensemble, DOP"]["status"] == "not run" and rows["Ensemble, DOP"]["lr"] == "—"
    assert rows["Ensemble, DOP"]["paper_test_nll"] == 0.066
    # 130 updates, burn-in 100, thin 25: one sample, the state after update 125 (step 124)
    summary = json.loads((tmp_path / "out/euclidean/lr-0.1/summary.json").read_text())
    assert summary["final"]["samples"] == 1 and summary["status"] == "completed"
    text = capsys.readouterr().out
    assert "PostMean, QDOP + Γ" in text and "smoke test" in text


@pytest.mark.slow
@pytest.mark.skipif(not REAL_MNIST.is_dir(), reason="needs the MNIST IDX files")
def test_quick_on_mnist_learns_with_every_method(tmp_path: Path):
    # About 5 minutes on 2 CPU cores. Tiny synthetic sets do not suit the Fisher metrics: with
    # N = 1000 and pixels constant within a class, QDOP and Γ blow up even at η = 0.001.
    out = tmp_path / "out"
    argv = ["reproduce", "natural-langevin", "--quick", "--data-dir", str(REAL_MNIST)]
    assert cli.main([*argv, "--out", str(out)]) == 0
    rows = json.loads((out / "natural_langevin.json").read_text())["rows"]
    # 500 updates on 10 000 images: far from the paper, far above chance (10 %). The Γ rows too:
    # untamed at ε = 1e-4 their Γ was so stiff that QDOP + Γ's ensemble fell to 59.8 % here
    # (RESULTS §17, §29) and this test reported them as an expected failure; with the kick tamed
    # the same command gives 94.23 % and 94.59 %, beside 94.34 % and 94.68 % without Γ.
    assert all(row["status"] == "1/1 completed" for row in rows), rows
    for row in rows:
        assert row["test_acc"] > 80, row


def _stub_run(accuracy):
    """A stub of ``runs.run``: val accuracy ``accuracy(method, lr, view)``; NaN means diverged."""

    def run(method, lr, data, plan, spec):
        views = ("final",) if method.kind != "sgld" else ("ensemble", "postmean")
        accs = {view: accuracy(method.name, lr, view) for view in views}
        if any(np.isnan(a) for a in accs.values()):
            return {"method": method.name, "learning_rate": lr, "status": "diverged",
                    "message": "", "scores": {}, "seconds": 1.0}  # fmt: skip
        scores = {
            view: {s: {"nll": 1.0 / acc, "accuracy": acc} for s in ("val", "test", "train")}
            for view, acc in accs.items()
        }
        return {"method": method.name, "learning_rate": lr, "status": "completed",
                "message": "", "scores": scores, "seconds": 2.0}  # fmt: skip

    return run


def _run_stubbed(tmp_path, monkeypatch, accuracy, *argv) -> tuple[int, dict]:
    monkeypatch.setattr(runs, "run", _stub_run(accuracy))
    monkeypatch.setattr(runs, "load_data", lambda *a: runs.Data((np.zeros((7, 2)), None), {}))
    parser = argparse.ArgumentParser()
    nl.REPRODUCTION.add_arguments(parser)
    code = nl.REPRODUCTION.run(parser.parse_args([*argv, "--out", str(tmp_path)]))
    rows = json.loads((tmp_path / "natural_langevin.json").read_text())["rows"]
    return code, {row["row"]: row for row in rows}


def test_table_and_selection_by_validation_accuracy_on_stub_runs(tmp_path, monkeypatch):
    def accuracy(name, lr, view):
        if name == "Euclidean" and lr == 1.0:
            return float("nan")  # the largest η diverges: not selectable
        best = {"ensemble": 0.01, "postmean": 0.001, "final": 0.1}[view]
        return 99.0 - abs(np.log10(lr) - np.log10(best)) - (0.5 if name == "DOP" else 0.0)

    code, rows = _run_stubbed(tmp_path, monkeypatch, accuracy, "--methods", "euclidean", "dop")
    assert code == 0
    ens, post = rows["Ensemble, Euclidean"], rows["PostMean, DOP"]
    assert (ens["lr"], ens["val_acc"], ens["status"]) == ("0.01", 99.0, "3/4 completed")
    assert (post["lr"], post["val_acc"], post["test_nll"]) == ("0.001", 98.5, 1 / 98.5)
    assert [g["learning_rate"] for g in ens["grid"]] == list(runs.GRID_EUCLIDEAN)
    assert rows["Ensemble, DOP"]["grid"][0]["val_accuracy"] == 99 - 2 - 0.5  # η = 1e-4
    assert rows["SGD"]["status"] == "not run" and rows["SGD"]["paper_test_acc"] == 98.24
    assert rows["PostMean, DOP + Γ"]["paper_test_nll"] is None
    md = (tmp_path / "natural_langevin.md").read_text()
    titles = [title for _, title, _ in nl.COLUMNS]
    assert "| " + " | ".join(titles) + " |" in md
    assert "| Ensemble, Euclidean | 0.01 | 0.0101 | 0.0357 | 99.00 | 99.63 |" in md
    assert "| SGD | — | — | 0.0003 | — | 100.00 | — | 0.0584 |" in md
    assert md.count("\n| ") == 1 + len(nl.table_layout())


def test_a_method_whose_every_step_size_diverged_exits_1(tmp_path, monkeypatch):
    code, rows = _run_stubbed(
        tmp_path, monkeypatch, lambda *a: float("nan"), "--methods", "rmsprop", "--lr", "0.1"
    )
    assert code == 1 and rows["Ensemble, RMSProp"]["status"] == "0/1 completed"
    assert rows["Ensemble, RMSProp"]["lr"] == report.MISSING


def test_per_method_step_sizes_override_the_shared_ones(tmp_path, monkeypatch):
    code, rows = _run_stubbed(
        tmp_path, monkeypatch, lambda *a: 98.0, "--methods", "euclidean", "dop", "qdop",
        "--lr", "0.05", "dop=0.002", "dop=0.003",
    )  # fmt: skip
    assert code == 0
    grids = {name: [g["learning_rate"] for g in rows[f"Ensemble, {name}"]["grid"]]
             for name in ("Euclidean", "DOP", "QDOP")}  # fmt: skip
    assert grids == {"Euclidean": [0.05], "DOP": [0.002, 0.003], "QDOP": [0.05]}


@pytest.mark.parametrize("entry", ["adam=0.1", "dop=-1", "dop=nan", "x"])
def test_bad_step_sizes_are_refused_by_name(entry, capsys):
    parser = argparse.ArgumentParser()
    nl.REPRODUCTION.add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--lr", entry])
    assert repr(entry) in capsys.readouterr().err


def test_halving_schedule():
    lr = halving(0.1)
    steps = jnp.array([0, 9_999, 10_000, 19_999, 20_000, 45_000], jnp.int32)
    expected = [0.1, 0.1, 0.05, 0.05, 0.025, 0.1 / 16]
    np.testing.assert_allclose(jax.jit(lr)(steps), expected, rtol=1e-7)
    assert jax.jit(lr)(steps).dtype == jnp.float32
    with pytest.raises(ValueError, match="learning_rate"):
        halving(0.0)
    with pytest.raises(ValueError, match="every"):
        halving(0.1, every=0)


def test_sampler_uses_the_schedule_and_sgd_is_noiseless():
    x = jax.random.uniform(jax.random.key(0), (4, 784))
    batch = (x, jnp.arange(4, dtype=jnp.int32))
    params = {"net": runs.init_net(jax.random.key(1), 784)}
    sgd = runs.sampler(runs.METHODS[0], 0.1, num_data=4)
    state, step = sgd.init(params)._replace(step=jnp.int32(10_000)), jax.jit(sgd.step)
    a, info = step(jax.random.key(2), state, batch)
    b, _ = step(jax.random.key(3), state, batch)
    assert float(info.learning_rate) == pytest.approx(0.05)
    assert all(jax.tree.leaves(jax.tree.map(jnp.array_equal, a.params, b.params)))


def test_sampler_options_replace_the_paper_settings():
    """A benchmark's variant: ``options`` replace ``sgrld.sgrld``'s arguments, the rest stay."""
    dop_gamma = next(m for m in runs.METHODS if m.key == "dop-gamma")
    paper = runs.sampler(dop_gamma, 0.001, num_data=4).adaptation
    variant = runs.sampler(dop_gamma, 0.001, num_data=4, adapt_until=7).adaptation
    assert paper.adapt_until is None and paper.scale == "auto"
    assert variant.adapt_until == 7 and variant.scale == "auto"


def test_gamma_rows_are_tamed_at_the_authors_eps_and_with_eps_reaches_the_metric():
    """Every Fisher row has the authors' EPS; only the Γ rows tame Γ̂'s kick, and their samplers
    get it; ``with_eps`` replaces ε in the metric itself: G = J + ε with J₀ = 1 gives
    G⁻¹v = v/(1 + ε)."""
    by_key = {m.key: m for m in runs.METHODS}
    for key in ("dop", "qdop", "dop-gamma", "qdop-gamma"):
        assert by_key[key].metric.keywords["eps"] == runs.EPS == 1e-4
        tamed = key.endswith("-gamma")
        assert by_key[key].gamma_kick_limit == (runs.GAMMA_KICK_LIMIT if tamed else None)
        assert ("gamma_kick_limit" in by_key[key].hyperparameters()) == tamed
    assert runs.GAMMA_KICK_LIMIT == 1.0
    with pytest.raises(ValueError, match="gamma_kick_limit"):  # it reaches sgrld.sgrld
        runs.sampler(by_key["dop-gamma"], 0.001, num_data=4, correction="none")
    variant = by_key["dop-gamma"].with_eps(0.5)
    assert variant.metric.keywords == {"eps": 0.5, "decay": "inverse_sqrt"}
    metric = variant.metric()
    got = metric.inv(metric.init(jnp.zeros(3)), jnp.full(3, 3.0))
    np.testing.assert_allclose(got, 2.0)


@pytest.mark.statistical(seed=0)
def test_init_is_normal_with_variance_one_over_fan_in(stat_seed):
    """The 400 × 400 kernel: 160,000 draws of N(0, 1/400), so 400·var has standard error 0.0035.

    False-failure probability: ≤ 1.1e-8 (1 normal statistic at 5.7σ).
    """
    net = runs.init_net(jax.random.key(stat_seed), 784)
    kernel = net["Dense_1"]["kernel"]
    assert float(jnp.var(kernel) * 400) == pytest.approx(1.0, abs=0.02)
    assert not any(float(jnp.abs(net[k]["bias"]).max()) for k in net)


def test_posterior_mean_averages_exactly_the_samples_the_runner_keeps():
    t = sgrld.samples.targets.standard_normal()
    base = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
    burn_in, thin, n = 7, 4, 40
    chain = runs.averaged(base, burn_in, thin)
    engine = sgrld.chains.engine.Engine(
        chain, sgrld.chains.engine.random_batches(t.batch_fn),
        burn_in=sgrld_app.experiment.first_kept_window(burn_in, thin), thin=thin,
    )  # fmt: skip
    carry = engine.init(chain.init(t.init_params), num_chains=2)
    keys = sgrld.chains.engine.chain_keys(jax.random.key(0), 2)
    carry, chunk, _ = engine.run_chunk(carry, keys, None, start=0, num_steps=n)
    np.testing.assert_array_equal(chunk.steps, sample_steps(n, burn_in, thin))
    np.testing.assert_allclose(carry.state.mean, chunk.params.mean(axis=0), rtol=1e-6)
    assert carry.state.count.tolist() == [len(chunk.steps)] * 2


def test_dropout_baseline_learns_an_easy_problem():
    key_x, key_init, key_train = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(key_x, (1200, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(jnp.int32)  # XOR of the signs: no linear rule
    net = init_params(MLP((64, 64), 2), key_init, (1, 2))
    accuracy = lambda net, i: float(
        jnp.mean(jnp.argmax(apply_fn(MLP((64, 64), 2))(net, x[i]), -1) == y[i])
    )
    trained, finite = baselines.train_dropout(
        key_train, net, (x[:1000], y[:1000]), learning_rate=lambda t: 0.5, epochs=30,
        batch_size=50, widths=(64, 64),
    )  # fmt: skip
    held_out = slice(1000, None)
    assert finite and accuracy(trained, held_out) > 0.9 > accuracy(net, held_out) + 0.2


def test_dropout_is_random_in_training_and_off_at_test_time():
    model = dropout.DropoutMLP(features=(32,), num_outputs=3)
    net = init_params(MLP((32,), 3), jax.random.key(0), (1, 5))
    x = jnp.ones((2, 5))
    train = lambda k: model.apply(
        {"params": net}, x, train=True, rngs={"dropout": jax.random.key(k)}
    )
    assert not jnp.allclose(train(1), train(2))
    np.testing.assert_array_equal(
        model.apply({"params": net}, x, train=False), MLP((32,), 3).apply({"params": net}, x)
    )
    with pytest.raises(ValueError, match="rate"):
        baselines.train_dropout(
            jax.random.key(0), net, (x, jnp.zeros(2, jnp.int32)), learning_rate=lambda t: 0.1,
            epochs=1, batch_size=1, widths=(32,), rate=1.0,
        )  # fmt: skip


def test_registered_with_the_skeleton():
    (entry,) = importlib.metadata.entry_points(group="sgrld.reproductions", name="natural-langevin")
    assert entry.module == nl.__name__
    assert nl.REPRODUCTION.out == "results/natural-langevin"
    assert set(nl.PAPER) <= {row.label for row in nl.table_layout()} and len(nl.PAPER) == 10
