"""The benchmarks' timing harness (benchmarks/timing.py): paired ratios, rotation, workers."""

import doctest
import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load_timing():
    """benchmarks/timing.py as a module, without putting benchmarks/ on sys.path."""
    name = "sgrld_benchmarks_timing"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / "timing.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


timing = load_timing()


def test_doctests():
    assert doctest.testmod(timing).failed == 0


def test_paired_ratios_are_per_round():
    # The ratio of the medians (2.0 / 2.0) hides that "new" was 10% slower in every round.
    new, old = [1.1, 2.2, 3.3], [1.0, 2.0, 3.0]
    s = timing.paired(new, old)
    assert s.median == pytest.approx(1.1) and s.low == pytest.approx(1.1)
    with pytest.raises(ValueError):
        timing.paired([1.0], [1.0, 2.0])


def test_interleave_rotates_the_order():
    calls = []
    cands = {name: (lambda name=name: calls.append(name)) for name in "abc"}
    times = timing.interleave(cands, 3)
    assert calls == list("abcbcacab")
    assert all(len(t) == 3 for t in times.values())


def test_candidate_rates_and_step_time():
    c = timing.Candidate("x", lambda: None, steps=10, times=[1.0, 2.0, 4.0])
    assert c.step_s == pytest.approx(0.2)
    assert c.rates == timing.Spread(5.0, 2.5, 10.0)


def test_workers_alternate_rounds(tmp_path):
    (tmp_path / "worker.py").write_text(
        "import sys\n"
        "from timing import serve\n"
        "print('noise on stdout is passed through')\n"
        "serve({'tree': sys.argv[1]}, lambda r: {'round': r['round'], 'tree': sys.argv[1]})\n"
    )
    workers = {
        name: timing.Worker(BENCHMARKS, [sys.executable, str(tmp_path / "worker.py"), name])
        for name in ("this", "other")
    }
    try:
        assert workers["other"].ready == {"tree": "other"}
        replies = timing.alternate(workers, 3)
    finally:
        for w in workers.values():
            w.close()
    assert [r["round"] for r in replies["this"]] == [0, 1, 2]
    assert {r["tree"] for r in replies["other"]} == {"other"}
    assert all(w.process.returncode == 0 for w in workers.values())


def load_benchmark(name: str):
    """benchmarks/NAME.py as a module, with benchmarks/ on sys.path while it imports its
    neighbours (mlp, timing, fisher_step, ...)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.fixture(scope="module")
def shampoo_floor():
    """benchmarks/shampoo_floor.py as a module."""
    return load_benchmark("shampoo_floor")


def test_shampoo_floor_counts_match_xla(shampoo_floor):
    sf = shampoo_floor
    assert doctest.testmod(sf).failed == 0
    params = sf.mlp.init_mlp(sf.jax.random.key(0))
    forward = sf.mlp_products(sf.mlp.LAYERS, sf.mlp.BATCH)
    blocked = sf.shampoo_products(params, sf.BLOCK)
    # RESULTS §12's counts: 224 MFLOP forward and backward, 594 MFLOP of blocked products.
    assert sum(p.count * p.flops for p in forward) == 223_840_000
    assert sum(p.count * p.flops for p in blocked) == 593_939_700
    for p in forward + blocked:
        assert sf.xla_flops(p.fn, *p.operands) == pytest.approx(p.flops, rel=1e-3), p.name


def test_shampoo_floor_report(shampoo_floor, capsys):
    """The report's arithmetic on made-up times: every product at 100 GFLOP/s, the refresh 0."""
    sf = shampoo_floor
    params = sf.mlp.init_mlp(sf.jax.random.key(0))
    products = sf.mlp_products(sf.mlp.LAYERS, sf.mlp.BATCH) + sf.shampoo_products(params, 128)
    reps = {p.name: 1 for p in products}
    cands = [sf.Candidate(p.name, None, 1, times=[p.flops / 1e11]) for p in products]
    flops = sum(p.count * p.flops for p in products)
    step_s = 1.2 * flops / 1e11  # 1.2x the floor: within 1.25x
    identity_s = sum(p.count * p.flops for p in products if p.part == "forward+backward") / 1e11
    cands += [
        sf.Candidate(sf.SHAMPOO, None, 10, times=[10 * step_s]),
        sf.Candidate(sf.NO_REFRESH, None, 10, times=[10 * step_s]),
        sf.Candidate(sf.IDENTITY, None, 10, times=[10 * identity_s]),  # no elementwise work
        sf.Candidate(sf.REFRESH, None, 1, times=[0.0]),
    ]
    assert sf.report(sf.Setup(cands, products, reps, (0, 0))) == 0
    out = capsys.readouterr().out
    assert "peak GEMM rate:    100.0 GFLOP/s" in out
    assert "no refresh / its floor at shapes: 1.20x" in out
    assert "no refresh / (shapes + elementwise): 1.20x" in out
    assert "[PASS] Shampoo step / its FLOP floor at peak: 1.20x (target <= 1.25x)" in out


def test_psgld_gamma_runs_both_samplers():
    """benchmarks/psgld_gamma.py (RESULTS §26) on a few draws: a finite 2×2 covariance each way."""
    psgld_gamma = load_benchmark("psgld_gamma")
    args = psgld_gamma.argparse.Namespace(chains=2, draws=200, burn_in=50, seed=0)
    for correction in ("none", "hutchinson"):
        c = psgld_gamma.covariance(0.3, correction, args)
        assert c.shape == (2, 2) and psgld_gamma.np.all(psgld_gamma.np.isfinite(c)), correction
        assert c[0, 0] > 0 and c[1, 1] > 0


@pytest.mark.parametrize(
    "model",
    ["mlp", pytest.param("cnn", marks=pytest.mark.slow)],  # the CNN compiles for ~50 s
)
@pytest.mark.slow
def test_momentum_step_times_every_row(model, capsys):
    """benchmarks/momentum_step.py (RESULTS §19) at one round of two steps: every sampler's row,
    its chain finite (the exit code), and on the MLP the issue's targets reported."""
    momentum_step = load_benchmark("momentum_step")
    assert momentum_step.main(["--model", model, "--rounds", "1", "--chunk", "2"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    for row in ("SGLD", "SGHMC", "SGHMC + B̂ (per example)", "SGNHT", "i-SGD"):
        assert any(line.startswith(f"{row}  ") for line in lines), row
    assert ("✓ SGHMC / SGLD" in out or "✗ SGHMC / SGLD" in out) == (model == "mlp")


@pytest.mark.slow
@pytest.mark.filterwarnings(
    "ignore::sgrld.numerics.per_example.FallbackWarning"
)  # i-SGD's log σ leaf
def test_isgd_noise_reports_every_layer(tmp_path, capsys):
    """benchmarks/isgd_noise.py (RESULTS §22) on small boston-shaped files: the rule's rate and
    the probed noise of every layer, finite, and the clipping share after the warm-up."""
    from tests.reproductions.test_isgd_uci import write_boston_like

    isgd_noise = load_benchmark("isgd_noise")
    data = write_boston_like(tmp_path)
    argv = ["--data-dir", str(data), "--dataset", "uci_boston", "--steps", "200", "--every", "100"]
    assert isgd_noise.main([*argv, "--no-verify-checksums"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("['")]
    assert len(rows) == 5, out  # log σ, and the kernel and bias of both Dense layers
    values = [float(v) for row in rows for v in row[1:]]
    assert len(values) == 5 * 4 and all(0 < v < float("inf") for v in values), out
    assert "clipped share after the warm-up" in out and "test RMSE" in out


@pytest.mark.long
def test_minibatch_noise_ratio_matches_the_sampling_variance():
    """benchmarks/right_by_default/minibatch_noise.py (RESULTS §29): with DOP's J set to the data's
    per-example second moment, r_i is lr·N·σ_i²·(N − B)/((N − 1)·B) / (2·(J_i + ε)), σ_i² the
    per-example gradients' variance (minibatches of B drawn without replacement). 400 minibatches
    give each r_i a relative sd of √(2/399) = 0.07, so the median ratio lies within 0.03 of 1 and
    the 10 %–90 % range within 0.8–1.2 unless the estimator is wrong."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    sys.path.insert(0, str(BENCHMARKS / "right_by_default"))
    try:
        mn = importlib.import_module("minibatch_noise")
    finally:
        sys.path.remove(str(BENCHMARKS / "right_by_default"))
    runs, bnn = mn.runs, mn.bnn
    n, lr = 200, 0.05
    x = jax.random.normal(jax.random.key(0), (n, 5))
    y = jax.random.randint(jax.random.key(1), (n,), 0, 10)
    method = mn.method_of("dop", False, runs.EPS)
    state = runs.sampler(method, lr, n).init({"net": runs.init_net(jax.random.key(2), 5)})
    loglik = bnn.likelihoods.categorical(bnn.apply_fn(runs.model()))
    per_example = jax.vmap(
        lambda xi, yi: jax.grad(lambda p: loglik(p, (xi[None], yi[None])).sum())(state.params)
    )(x, y)
    j = jax.tree.map(lambda g: jnp.mean(g**2, axis=0), per_example)
    state = state._replace(metric_state=state.metric_state._replace(stat=j))
    r = mn.noise_ratio(method, state, x, y, lr, 400, 0)
    b, eps = runs.BATCH_SIZE, runs.EPS
    expected = []
    for g, ji in zip(jax.tree.leaves(per_example), jax.tree.leaves(j), strict=True):
        g, ji = np.asarray(g, np.float64), np.asarray(ji, np.float64)
        var = g.var(axis=0) / b * (n - b) / (n - 1)
        expected.append((lr * n * var / (2 * (ji + eps)))[ji > eps])
    ratio = r / np.concatenate(expected)
    assert ratio.size > 1000
    assert abs(np.median(ratio) - 1) < 0.03
    low, high = np.quantile(ratio, [0.1, 0.9])
    assert 0.8 < low and high < 1.2, (low, high)


def test_auto_wall_without_data_says_so_and_measures_nothing(tmp_path):
    """benchmarks/right_by_default/auto_wall.py (RESULTS §33) on a folder with no data sets."""
    import subprocess

    script = BENCHMARKS / "right_by_default" / "auto_wall.py"
    missing = tmp_path / "no-data"
    done = subprocess.run(
        [sys.executable, str(script), "--data-dir", str(missing)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"no data in {missing}: nothing measured (give --data-dir)\n"
