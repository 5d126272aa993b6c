"""Samples for ArviZ: ``sgrld.load_samples`` with no template, ``sgrld.to_arviz``, split R-hat of
mixed and unmixed chains, and the ``sgrld export`` / ``sgrld diagnose`` commands."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import sgrld
import sgrld_app
from sgrld.samples import diagnostics
from sgrld_app import cli, from_config
from sgrld_app.launch import run_config

TINY = [
    "data.name=digits",
    "data.batch_size=64",
    "model.widths=[8]",
    "prior.kind=gaussian",
    "sampler.learning_rate=0.1",
    "run.epochs=2",
    "run.burn_in=0",
    "run.thin=1",
    "run.chains=2",
    "run.save_samples=true",
]
"""19 steps per epoch, every step a sample: 38 draws of 2 chains, the last the final state."""
NAMES = ["net.Dense_0.bias", "net.Dense_0.kernel", "net.Dense_1.bias", "net.Dense_1.kernel"]
STATS = ["potential", "grad_norm", "learning_rate", "gamma_norm", "drift_fallback"]
DRAW_LL = ["test_log_likelihood", "val_log_likelihood"]
"""Each draw's own mean log-likelihood on digits' evaluation sets, stored by the run."""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A real run with saved samples, and its result."""
    out = tmp_path_factory.mktemp("tiny")
    result = run_config(sgrld_app.config.load_config(None, TINY), out=out)
    assert result.status == "completed"
    return out, result


def blr_sampler():
    """The README quickstart: Bayesian linear regression, N = 100, posterior sd about 0.05."""
    x = jax.random.normal(jax.random.key(0), (100,))
    y = 2.0 * x + 0.5 * jax.random.normal(jax.random.key(1), (100,))
    loglik = lambda w, batch: -0.5 * ((batch[1] - w * batch[0]) / 0.5) ** 2
    potential = sgrld.potential(loglik, lambda w: -0.5 * w**2, num_data=100)
    sampler = sgrld.sgrld(
        potential,
        sgrld.metrics.monge(alpha2=1.0),
        learning_rate=0.02,
        num_data=100,
        correction="hutchinson",
    )
    return sampler, sgrld.minibatch_fn((x, y), batch_size=20)


def r_hats(samples: sgrld.Samples) -> dict[str, float]:
    rows = diagnostics.convergence(diagnostics.traces(samples, num_params=1))
    return {row["trace"]: row["r_hat"] for row in rows}


def test_load_samples_needs_no_template_and_round_trips(tiny_run):
    out, result = tiny_run
    samples = sgrld.load_samples(out)
    assert samples.names == NAMES
    assert samples.step.tolist() == list(range(38))
    assert samples.valid.shape == (2, 38) and samples.valid.all()
    assert jax.tree.structure(samples.params) == jax.tree.structure(result.state.params)
    assert samples.params["net"]["Dense_0"]["kernel"].shape == (2, 38, 64, 8)
    final = jax.tree.map(lambda x: x[:, -1], samples.params)  # the last draw is the final state
    jax.tree.map(
        np.testing.assert_array_equal, final, jax.tree.map(np.asarray, result.state.params)
    )
    assert set(STATS) <= set(samples.stats) and samples.stats["potential"].shape == (2, 38)
    assert samples.stats["learning_rate"] == pytest.approx(0.1)


def test_samples_stream_epoch_by_epoch_and_join_bit_for_bit(tiny_run):
    """``iter_samples`` yields each epoch file as written; ``load_samples`` joins them exactly."""
    out, _ = tiny_run
    files = sorted((out / "samples").glob("epoch_*.npz"))
    epochs = list(sgrld.samples.results.iter_samples(out))
    assert len(epochs) == len(files) == 2 and sgrld.samples.results.draws_per_epoch(out) == [19, 19]
    whole = sgrld.load_samples(out)
    for i, (path, epoch) in enumerate(zip(files, epochs, strict=True)):
        with np.load(path) as written:
            kernel = written["params/net.Dense_0.kernel"]
            np.testing.assert_array_equal(epoch.step, written["step"])
        got = epoch.params["net"]["Dense_0"]["kernel"]
        assert got.dtype == kernel.dtype and np.array_equal(got, np.swapaxes(kernel, 0, 1))
        draws = slice(19 * i, 19 * (i + 1))
        for a, b in zip(jax.tree.leaves(epoch[:4]), jax.tree.leaves(whole[:4]), strict=True):
            assert a.dtype == b.dtype and np.array_equal(
                a, b[draws] if b.ndim == 1 else b[:, draws]
            )


def test_epoch_files_that_disagree_are_a_results_error(tmp_path: Path):
    samples = tmp_path / "samples"
    samples.mkdir()
    (samples / "params.json").write_text('{"paths": [["w"]], "empty": []}')
    one = {"step": np.arange(2), "valid": np.ones((2, 1), bool), "params/w": np.zeros((2, 1, 3))}
    np.savez(samples / "epoch_0001.npz", **one)
    np.savez(samples / "epoch_0002.npz", **{**one, "params/w": np.zeros((2, 1, 4))})
    with pytest.raises(
        sgrld.samples.results.ResultsError, match="epoch_0002.npz: params/w has shape"
    ):
        sgrld.load_samples(tmp_path)
    np.savez(samples / "epoch_0002.npz", **{**one, "stats/potential": np.zeros((2, 1))})
    with pytest.raises(sgrld.samples.results.ResultsError, match="holds other arrays"):
        sgrld.load_samples(tmp_path)


def test_to_arviz_of_a_results_folder(tiny_run):
    out, _ = tiny_run
    idata = sgrld.to_arviz(out)
    assert sorted(idata.posterior.data_vars) == NAMES
    kernel = idata.posterior["net.Dense_0.kernel"]
    assert kernel.dims[:2] == ("chain", "draw") and kernel.shape == (2, 38, 64, 8)
    assert set(STATS + DRAW_LL) | {"diverging", "metric_fallbacks"} == set(
        idata.sample_stats.data_vars
    )
    assert idata.sample_stats["test_log_likelihood"].dims == ("chain", "draw")
    assert idata.sample_stats["diverging"].dtype == bool
    assert not idata.sample_stats["diverging"].values.any()


def test_each_draw_stores_its_own_test_log_likelihood(tiny_run):
    """``stats/test_log_likelihood`` of a draw is that sample's mean log p(y|x, θ) on the test set
    (not the ensemble's), computed again here from the saved parameters for a few draws."""
    out, _ = tiny_run
    samples = sgrld.load_samples(out)
    stored = samples.stats["test_log_likelihood"]
    assert stored.shape == (2, 38) and stored.dtype == np.float32 and np.isfinite(stored).all()
    with np.load(out / "samples" / "epoch_0002.npz") as epoch:
        np.testing.assert_array_equal(epoch["stats/test_log_likelihood"].T, stored[:, 19:])
    experiment = from_config.build_experiment(sgrld_app.config.load_config(None, TINY))
    x, y = experiment.eval_sets["test"]
    for chain, draw in [(0, 0), (1, 20), (0, 37)]:
        params = jax.tree.map(lambda a, c=chain, d=draw: a[c, d], samples.params)
        log_probs = jax.nn.log_softmax(experiment.predict_fn(params, jnp.asarray(x)))
        direct = jnp.mean(jnp.take_along_axis(log_probs, jnp.asarray(y)[:, None], axis=-1))
        assert stored[chain, draw] == pytest.approx(float(direct), rel=1e-5, abs=1e-6)
    assert not np.allclose(stored[0], stored[1])  # the chains' own values, not a shared score


def test_to_arviz_of_sample_output_single_chain_and_root_leaf():
    t = sgrld.samples.targets.standard_normal()
    s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
    out = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=20)
    idata = sgrld.to_arviz(out)
    name = sgrld.samples.results.path_name(sgrld.samples.results.leaf_paths(t.init_params)[0])
    assert idata.posterior[name].shape[:2] == (1, 20)
    assert idata.sample_stats["potential"].shape == (1, 20)


@pytest.mark.statistical(seed=2)
def test_r_hat_of_four_mixed_chains_of_the_conjugate_model_is_at_most_1_01(stat_seed):
    """Four chains of the quickstart's conjugate linear regression, 1000 draws each, thin 20.

    Failure budget: the draws are nearly independent (bulk ESS of w about 2,300 of 4,000 over
    seeds 2-7, max R-hat 1.004). Split R-hat uses m = 8 half-chains with an ESS of about 290 each;
    R-hat² ≈ 1 + (χ²₇/7)/290, so R-hat > 1.01 needs χ²₇ > 41, probability about 3e-6 per trace
    (doubled for the rank-normalised and the folded statistics), well under 1e-4 for both traces.
    False-failure probability: ≤ 1.2e-5 (2 traces × 2 statistics at 3e-6).
    """
    sampler, batches = blr_sampler()
    out = sgrld.sample(
        jax.random.key(stat_seed),
        sampler,
        jnp.zeros(()),
        batches,
        num_samples=1000,
        thin=20,
        burn_in=500,
        num_chains=4,
    )
    r = r_hats(out)
    assert set(r) == {"potential", "params"}
    assert max(r.values()) <= 1.01, r


@pytest.mark.statistical(seed=2)
def test_r_hat_of_chains_started_apart_and_run_briefly_is_at_least_1_1(stat_seed):
    """Four chains started at w = -2, 0, 4, 6 (the posterior: 2.0 ± 0.05) for 20 steps.

    Each step contracts the distance to the mode by about h·U'' = 0.08, so after 20 steps the
    chains are still 40 posterior sds apart: R-hat is far above 1.1 for any seed.
    False-failure probability: ≤ 1e-9 (the injected noise, √(2h·20) ≈ 0.09 or 2 posterior sds
    over the 20 steps, would have to close gaps of 40 sds).
    """
    sampler, batches = blr_sampler()
    starts = jax.vmap(sampler.init)(jnp.array([-2.0, 0.0, 4.0, 6.0]))
    key = jax.random.key(stat_seed)
    out = sgrld.sample(key, sampler, None, batches, num_samples=20, num_chains=4, state=starts)
    assert r_hats(out)["params"] >= 1.1


def test_traces_pick_the_same_scalar_parameters_for_the_same_seed(tiny_run):
    out, _ = tiny_run
    first = diagnostics.traces(out, num_params=5, seed=3)
    again = diagnostics.traces(out, num_params=5, seed=3)
    assert list(first) == list(again) and len(first) == 8
    assert list(first)[:3] == ["potential", *DRAW_LL]
    assert all(x.shape == (2, 38) for x in first.values())
    assert list(diagnostics.traces(out, num_params=5, seed=4)) != list(first)


@pytest.mark.parametrize("fmt, suffix", [("netcdf", ".nc"), ("zarr", ".zarr")])
def test_export_command_writes_what_xarray_reads(tiny_run, fmt, suffix, capsys):
    out, _ = tiny_run
    assert cli.main(["export", str(out), "--format", fmt]) == 0
    path = out / f"inference_data{suffix}"
    assert str(path) in capsys.readouterr().out.replace("\n", "")
    tree = xr.open_datatree(path, engine="h5netcdf" if fmt == "netcdf" else "zarr")
    assert sorted(tree.posterior.data_vars) == NAMES
    assert tree.posterior["net.Dense_1.bias"].dims == ("chain", "draw", "net.Dense_1.bias_dim_0")
    assert dict(tree.sample_stats.sizes) == {"chain": 2, "draw": 38}
    whole = sgrld.to_arviz(out)  # streamed epoch by epoch, the same as built in memory
    assert sorted(tree.children) == sorted(whole.children)
    for group in ("posterior", "sample_stats"):
        assert sorted(tree[group].data_vars) == sorted(whole[group].data_vars)
        for name, want in whole[group].data_vars.items():
            got = tree[group][name]
            assert got.dims == want.dims and got.dtype == want.dtype, name
            assert np.array_equal(got.values, want.values), name
        np.testing.assert_array_equal(tree[group]["draw"], np.arange(38))
    if fmt == "zarr":  # chunked by epoch
        assert tree.posterior["net.Dense_0.kernel"].encoding["chunks"] == (2, 19, 64, 8)
    tree.close()
    assert cli.main(["export", str(out), "--format", fmt]) == 0  # replaces it
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_netcdf_export_has_the_layout_that_arviz_from_netcdf_reads(tiny_run, tmp_path: Path):
    """Classic ArviZ (0.x) ``from_netcdf`` lists the root's groups with h5netcdf and opens each
    with ``xarray.open_dataset(path, group=...)``: the groups must sit at the root and their
    variables carry ``chain, draw`` first."""
    import h5netcdf

    out, _ = tiny_run
    path = sgrld.samples.arviz_export.export(out, "netcdf", to=tmp_path / "run.nc")
    with h5netcdf.File(path, mode="r") as f:
        assert sorted(f.groups) == ["posterior", "sample_stats"]
    for group, sizes in [("posterior", (2, 38, 64, 8)), ("sample_stats", (2, 38))]:
        with xr.open_dataset(path, group=f"/{group}", engine="h5netcdf") as data:
            var = data["net.Dense_0.kernel" if group == "posterior" else "test_log_likelihood"]
            assert var.dims[:2] == ("chain", "draw") and var.shape == sizes


def test_arviz_from_netcdf_reads_the_export(tiny_run, tmp_path: Path):
    """Run where ``arviz`` is importable (it is no dependency; checked with arviz 0.23.4)."""
    arviz = pytest.importorskip("arviz")
    out, _ = tiny_run
    idata = arviz.from_netcdf(
        sgrld.samples.arviz_export.export(out, "netcdf", to=tmp_path / "run.nc")
    )
    assert idata.posterior["net.Dense_0.kernel"].dims[:2] == ("chain", "draw")
    assert idata.sample_stats["test_log_likelihood"].shape == (2, 38)


def test_export_to_a_chosen_path(tiny_run, tmp_path: Path):
    out, _ = tiny_run
    assert cli.main(["export", str(out), "--to", str(tmp_path / "a" / "run.nc")]) == 0
    assert (tmp_path / "a" / "run.nc").stat().st_size > 0


def test_diagnose_command_prints_the_table_and_plots(tiny_run, capsys):
    out, _ = tiny_run
    assert cli.main(["diagnose", str(out), "--params", "3"]) == 0
    text = capsys.readouterr().out
    words = ("split R-hat", "bulk ESS", "tail ESS", "potential", "test_log_likelihood")
    for word in (*words, "2 chain(s) x 38 draws"):
        assert word in text
    assert ("split R-hat above 1.01 for" in text) != ("split R-hat at most 1.01" in text)
    assert (out / "diagnose.png").stat().st_size > 0


def test_diagnose_verdict_says_whether_r_hat_was_computed_and_what_it_found():
    """The line under the table is a verdict on the traces, not the threshold's rule: a single
    chain has no split R-hat (arviz_stats gives NaN), and it must not read as "not mixed"."""
    rng = np.random.default_rng(0)
    mixed = diagnostics.convergence({"potential": rng.normal(size=(4, 500))})
    apart = {"potential": rng.normal(size=(4, 500)) + np.arange(4)[:, None]}
    apart = diagnostics.convergence(apart | {"w": rng.normal(size=(4, 500))})
    single = diagnostics.convergence({"potential": rng.normal(size=(1, 500))})
    constant = diagnostics.convergence({"learning_rate": np.ones((4, 500))})
    verdict = diagnostics.mixing_verdict
    assert (
        verdict(mixed, 4) == "split R-hat at most 1.01 for all 1 trace: no sign of unmixed chains"
    )
    assert verdict(apart, 4).startswith("split R-hat above 1.01 for 1 of 2 traces (potential)")
    assert verdict(single, 1).startswith("split R-hat needs at least 2 chains: not run")
    assert verdict(constant, 4).startswith("split R-hat could not be computed for any trace")


@pytest.mark.parametrize("command", ["export", "diagnose"])
def test_a_folder_without_samples_is_a_one_line_error(command, tmp_path: Path, capsys):
    assert cli.main([command, str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sgrld: error: no samples in") and "run.save_samples" in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unreadable_samples_are_a_one_line_error(tmp_path: Path, capsys):
    (tmp_path / "samples").mkdir()
    (tmp_path / "samples" / "params.json").write_text('{"paths": [["w"]], "empty": []}')
    (tmp_path / "samples" / "epoch_0001.npz").write_bytes(b"not a zip file")
    assert cli.main(["diagnose", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sgrld: error: cannot read the samples in") and "Traceback" not in err


def test_unknown_export_format_is_a_usage_error(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["export", str(tmp_path), "--format", "csv"])
    assert exit_.value.code == 2
    assert "invalid choice: 'csv'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown export format 'csv'"):
        sgrld.samples.arviz_export.export(tmp_path, "csv")


def test_diagnose_prints_the_kernel_stein_discrepancy_of_a_small_run(tiny_run, capsys):
    out, _ = tiny_run  # D = 64·8 + 8 + 8·10 + 10 = 610 parameters
    assert cli.main(["diagnose", str(out), "--params", "2"]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("kernel Stein discrepancy (IMQ): "))
    value = float(line.split(": ")[1].split()[0])
    assert np.isfinite(value) and value > 0
    assert "over 76 draws (D = 610)" in line and "exact draws" in text


def test_diagnose_skips_the_kernel_stein_discrepancy_and_says_why(
    tiny_run, tmp_path: Path, monkeypatch, capsys
):
    out, _ = tiny_run
    monkeypatch.setattr(cli, "KSD_MAX_DIM", 100)
    assert cli.main(["diagnose", str(out), "--params", "2"]) == 0
    text = capsys.readouterr().out
    assert "kernel Stein discrepancy skipped: D = 610 parameters, above the limit of 100" in text
    monkeypatch.setattr(cli, "KSD_MAX_DIM", 1000)
    (tmp_path / "samples").symlink_to(out / "samples")  # the draws, without config.toml
    assert cli.ksd_line(tmp_path).startswith("kernel Stein discrepancy skipped: the run's ")
    assert cli.main(["diagnose", str(out), "--params", "2", "--no-ksd"]) == 0
    assert "kernel Stein discrepancy" not in capsys.readouterr().out


def test_diagnose_computes_the_ksd_on_random_coordinates_of_a_larger_run(
    tiny_run, monkeypatch, capsys
):
    out, _ = tiny_run
    monkeypatch.setattr(cli, "KSD_MAX_DIM", 100)  # D = 610 is now "large"
    args = ["diagnose", str(out), "--params", "2", "--ksd-coordinates", "50", "--ksd-draws", "40"]
    assert cli.main(args) == 0
    line = next(
        x for x in capsys.readouterr().out.splitlines() if x.startswith("kernel Stein discrepancy")
    )
    assert "over 40 draws (50 random coordinates of D = 610)" in line
    assert np.isfinite(float(line.split(": ")[1].split()[0]))
    with pytest.raises(SystemExit) as stop:  # the parser's usage error, before anything runs
        cli.main(["diagnose", str(out), "--ksd-coordinates", "0"])
    assert stop.value.code == 2
    assert "argument --ksd-coordinates: must be an integer >= 1, got '0'" in capsys.readouterr().err


def test_log_posterior_gradient_is_minus_n_times_the_full_batch_potential_gradient(monkeypatch):
    built = []
    make = from_config.make_potential
    monkeypatch.setattr(
        from_config, "make_potential", lambda *a: built.append(make(*a)) or built[-1]
    )
    config = sgrld_app.config.load_config(None, TINY)
    experiment = from_config.build_experiment(config)  # the potential its sampler steps on
    potential = built[0]
    params = experiment.init_fn(jax.random.key(1))
    x, y = (jnp.asarray(a) for a in experiment.train)
    n = len(x)
    assert potential.num_data == n
    full = jax.jit(jax.grad(lambda p: -n * potential(p, (x, y))))(params)
    # the same from two unequal minibatches: Σ_b |b|·Û_b(θ) = U(θ) when the batches cover D
    k = n // 3
    halves = jax.jit(
        jax.grad(
            lambda p: -k * potential(p, (x[:k], y[:k])) - (n - k) * potential(p, (x[k:], y[k:]))
        )
    )(params)
    got = jax.jit(jax.grad(from_config.log_posterior(config)))(params)
    for g, w, h in zip(*(jax.tree.leaves(t) for t in (got, full, halves)), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-3)
