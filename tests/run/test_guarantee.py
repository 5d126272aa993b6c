"""Every run states its guarantee (issue 36): the three strings, where they appear (summary.json
through the runner's meta, the run table's row, ``sgrld diagnose``'s line, the ArviZ attributes),
and the one-time warnings of the combinations known to be biased."""

from __future__ import annotations

import warnings

import jax
import pytest

import sgrld
from sgrld.samplers import guarantee as g
from sgrld_app.config import ConfigError, load_config
from sgrld_app.sampler_from_config import guarantee_of, sampler_of

T = sgrld.samples.targets.standard_normal()


def about(metric, adapt_until=None, correction="none", scale=1.0, averaged=False):
    return g.Adaptation(metric, adapt_until, averaged, correction, scale)


def test_the_three_guarantees():
    m = sgrld.metrics.monge()
    assert g.guarantee(about(m, 250)) == "exact: metric frozen at step 250"
    assert g.guarantee(about(m, "auto")).startswith("exact: metric frozen at 3/4 of the burn-in")
    assert g.guarantee(about(sgrld.metrics.identity())) == "exact: constant metric (not adaptive)"
    assert g.guarantee(about(m)) == (
        "uncorrected: stationary density p·G^{1−c}, c = 0 (Rensmeyer & Niggemann)"
    )
    assert g.guarantee(about(m, None, "hutchinson", 0.5)) == (
        "corrected: Γ with share c = 0.5 (fixed)"
    )
    text = g.guarantee(about(m, None, "hutchinson", "auto"), [[0.3, 0.5], [0.4, 0.6]])
    assert text == "corrected: Γ with share ĉ (mean 0.45, range 0.30–0.60)"
    tamed = about(m, None, "hutchinson", "auto")._replace(gamma_kick_limit=1.0)
    assert (
        g.guarantee(tamed) == "corrected: Γ with share ĉ estimated online, kick tamed to 1 noise sd"
    )


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(g, "_WARNED", set())


def caught(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in seen if issubclass(w.category, g.BiasWarning)]


@pytest.mark.parametrize("decay", [0.99, "inverse_sqrt"])
def test_full_gamma_under_a_lagging_average_warns_once_naming_auto(fresh_warnings, decay):
    make = lambda: sgrld.sgrld(T.potential, sgrld.metrics.monge(decay=decay), learning_rate=0.1,
                               num_data=1, correction="hutchinson", correction_scale=1.0,
                               adapt_until=None)  # fmt: skip
    first, second = caught(make), caught(make)
    assert len(first) == 1 and "correction_scale='auto'" in first[0] and second == []


def test_gamma_with_a_vanishing_statistic_warns_naming_the_freeze(fresh_warnings):
    make = lambda: sgrld.sgrld(T.potential, sgrld.metrics.rmsprop(decay=0.9), learning_rate=0.1,
                               num_data=1, correction="hutchinson", correction_scale="auto",
                               adapt_until=None)  # fmt: skip
    (message,) = caught(make)
    assert "adapt_until" in message and "Fisher metric" in message


def test_the_right_settings_do_not_warn(fresh_warnings):
    m = sgrld.metrics.monge(decay=0.99)
    options = dict(learning_rate=0.1, num_data=1, correction="hutchinson")
    assert caught(lambda: sgrld.sgrld(T.potential, m, correction_scale="auto", **options)) == []
    made = []  # the default share, ĉ: no warning
    make = lambda: made.append(sgrld.sgrld(T.potential, m, adapt_until=None, **options))
    assert caught(make) == [] and made[0].adaptation.scale == "auto"
    auto = sgrld.sgrld(T.potential, sgrld.metrics.rmsprop(), **options)  # frozen after burn-in
    assert caught(lambda: auto.adaptation.resolve(1000, 0)) == []


def test_adapting_throughout_on_minibatches_warns_once_naming_the_freeze(fresh_warnings):
    m = sgrld.metrics.fisher_diag(decay=0.9)
    warn = lambda a, batch: caught(lambda: g.warn_if_adapting_on_minibatches(a, batch, 690))
    for frozen in (about(m, 300), about(sgrld.metrics.identity())):
        assert warn(frozen, 32) == []
    assert warn(about(m, None, "hutchinson", "auto"), 690) == []  # full batch
    (message,) = warn(about(m, None, "hutchinson", "auto"), 32)
    assert "minibatches of 32 of 690" in message and "adapt_until" in message
    assert warn(about(m), 32) == []  # once a process


def test_sample_adapting_on_minibatches_warns(fresh_warnings):
    """The library path: ``sgrld.sample`` with :func:`sgrld.minibatch_fn` knows the batch size."""
    data = jax.random.normal(jax.random.key(0), (64,))
    potential = sgrld.potential(lambda p, x: -0.5 * (x - p) ** 2, lambda p: -0.5 * p**2, 64)

    def run(adapt_until, batch_size):
        s = sgrld.sgrld(
            potential,
            sgrld.metrics.rmsprop(decay=0.9),
            learning_rate=0.01,
            num_data=64,
            adapt_until=adapt_until,
        )
        fn = sgrld.minibatch_fn(data, batch_size)
        return caught(lambda: sgrld.sample(jax.random.key(1), s, 0.0, fn, num_samples=2, burn_in=8))

    assert run("auto", 8) == []  # the default freezes after the burn-in
    assert run(None, 64) == []  # full batch
    (message,) = run(None, 8)
    assert "minibatches of 8 of 64" in message


def test_a_configured_run_adapting_on_minibatches_warns(fresh_warnings):
    from sgrld_app.from_config import build_experiment

    base = ["data.name=digits", "data.batch_size=64", "sampler.metric=rmsprop", "run.burn_in=40"]
    cfg = lambda *o: load_config(None, [*base, *o])
    assert caught(lambda: build_experiment(cfg())) == []  # the default freezes
    (message,) = caught(lambda: build_experiment(cfg("sampler.adapt_until=never")))
    assert "minibatches of 64" in message


def test_a_fisher_step_whose_minibatch_noise_dominates_warns_once(fresh_warnings):
    """ρ = lr·N/(2B) > 1 with a Fisher metric, frozen or not; at ρ <= 1, on the full batch, for a
    metric without a per-example statistic, or with the learning rate unknown: silent."""
    fisher = sgrld.metrics.fisher_diag()
    warn = lambda a, batch, n=50_000: caught(
        lambda: g.warn_if_minibatch_noise_dominates(a, batch, n)
    )
    with_lr = lambda m, lr, until=None: about(m, until)._replace(learning_rate=lr)
    assert warn(with_lr(fisher, 0.004), 100) == []  # ρ = 1
    assert warn(with_lr(fisher, 0.1), 50_000) == []  # full batch
    assert warn(with_lr(sgrld.metrics.rmsprop(), 0.1), 100) == []
    assert warn(about(fisher), 100) == []  # learning rate not known
    (message,) = warn(with_lr(fisher, lambda step: 0.1 / (1 + step), 300), 100)  # lr(0), frozen
    assert "= 25 with a Fisher metric" in message and "learning_rate <= 2·batch_size/N = 0.004" in (
        message
    )
    assert warn(with_lr(sgrld.metrics.fisher_qdiag(), 0.1), 100) == []  # once a process


def test_sample_and_a_configured_run_warn_of_minibatch_noise(fresh_warnings):
    """Both paths know lr, B and N: ``sgrld.sample`` with :func:`sgrld.minibatch_fn`, and the
    configured run (digits: N = 1,258 at batch 64, so lr = 0.25 gives ρ = 2.46)."""
    from sgrld_app.from_config import build_experiment

    data = jax.random.normal(jax.random.key(0), (64,))
    potential = sgrld.potential(lambda p, x: -0.5 * (x - p) ** 2, lambda p: -0.5 * p**2, 64)
    s = sgrld.sgrld(potential, sgrld.metrics.fisher_diag(), learning_rate=0.5, num_data=64)
    fn = sgrld.minibatch_fn(data, 8)
    run = lambda: sgrld.sample(jax.random.key(1), s, 0.0, fn, num_samples=2, burn_in=8)
    (message,) = caught(run)
    assert "learning_rate·N/(2·batch_size) = 2 " in message
    g._WARNED.discard("minibatch-noise")
    base = [
        "data.name=digits",
        "data.batch_size=64",
        "sampler.metric=fisher_diag",
        "sampler.learning_rate=0.25",
        "run.burn_in=40",
    ]
    cfg = lambda *o: load_config(None, [*base, *o])
    (message,) = caught(lambda: build_experiment(cfg()))
    assert "= 2.46 with a Fisher metric" in message
    g._WARNED.discard("minibatch-noise")
    assert caught(lambda: build_experiment(cfg("sampler.learning_rate=0.05"))) == []


def test_the_guarantee_of_a_chosen_alpha2():
    """Monge's α² chosen by the search (``values``): at 0 the metric is the identity, so the run
    states a constant metric, not Monge's freeze and Γ; at 0.1 Monge's."""
    cfg = load_config(None, ["sampler.metric=monge", "run.burn_in=400"])
    at = lambda v: guarantee_of(cfg, values={"metric_params.alpha2": v})  # noqa: E731
    assert at(0.0) == "exact: constant metric (not adaptive)"
    assert at(0.1) == guarantee_of(cfg) == (
        "exact: metric frozen at step 300 (window average of the statistic); Γ only before the "
        "freeze"
    )


def test_config_guarantees_and_never():
    cfg = lambda *o: load_config(None, ["sampler.metric=monge", "run.burn_in=400", *o])
    frozen = "exact: metric frozen at step 300 (window average of the statistic)"
    assert guarantee_of(cfg()) == f"{frozen}; Γ only before the freeze"  # Monge: Γ by default
    assert guarantee_of(cfg("sampler.correction=none")) == frozen
    assert guarantee_of(cfg("sampler.metric=rmsprop")) == frozen  # "auto": no Γ but Monge's
    assert guarantee_of(cfg("sampler.adapt_until=never")).startswith("uncorrected:")
    assert guarantee_of(cfg("sampler.adapt_until=100", "sampler.correction=none")) == (
        "exact: metric frozen at step 100"
    )
    frozen_gamma = guarantee_of(cfg("sampler.correction=hutchinson"))  # Γ of a frozen metric is 0
    assert frozen_gamma.startswith("exact: metric frozen at step 300")
    assert frozen_gamma.endswith("; Γ only before the freeze")
    corrected = cfg("sampler.adapt_until=never", "sampler.correction=hutchinson")
    assert guarantee_of(corrected) == "corrected: Γ with share ĉ estimated online"  # the default
    fixed = cfg("sampler.adapt_until=never", "sampler.correction=hutchinson",
                "sampler.correction_scale=1")  # fmt: skip
    assert guarantee_of(fixed) == "corrected: Γ with share c = 1 (fixed)"
    tamed = cfg("sampler.adapt_until=never", "sampler.correction=hutchinson",
                "sampler.correction_scale=1", "sampler.gamma_kick_limit=0.5")  # fmt: skip
    assert guarantee_of(tamed) == (
        "corrected: Γ with share c = 1 (fixed), kick tamed to 0.5 noise sd"
    )


def test_config_adapt_until_after_the_burn_in_is_refused():
    cfg = load_config(None, ["sampler.metric=monge", "run.burn_in=400", "sampler.adapt_until=500"])
    u = sgrld.potential(lambda p, b: -0.5 * (p - b) ** 2, lambda p: 0.0 * p, num_data=4)
    with pytest.raises(ConfigError, match="sampler.adapt_until = 500 is after run.burn_in = 400"):
        sampler_of(cfg.sampler, u, 4, burn_in=cfg.run.burn_in)


def test_arviz_attributes_carry_the_guarantee():
    s = sgrld.sgrld(T.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
    out = sgrld.sample(jax.random.key(0), s, T.init_params, T.batch_fn, num_samples=5)
    text = g.guarantee(s.adaptation)
    tree = sgrld.to_arviz(out, guarantee=text)
    assert tree.posterior.attrs["guarantee"] == text == tree.sample_stats.attrs["guarantee"]


def test_summary_and_diagnose_line(tmp_path):
    from sgrld.samples.diagnostics import guarantee_line
    from sgrld_app.launch import run_config

    overrides = [
        "data.name=digits", "model.widths=[8]", "prior.kind=gaussian", "run.epochs=4",
        "run.burn_in=20", "run.thin=5", "sampler.metric=rmsprop", "sampler.learning_rate=0.05",
        "run.save_samples=true", f"out.folder={str(tmp_path / 'run')!r}",
    ]  # fmt: skip
    result = run_config(load_config(None, overrides))
    assert result.summary["meta"]["guarantee"] == (
        "exact: metric frozen at step 15 (window average of the statistic)"
    )
    assert guarantee_line(tmp_path / "run").endswith("frozen at step 15 (window average of the "
                                                     "statistic)")  # fmt: skip
    assert sgrld.to_arviz(tmp_path / "run").posterior.attrs["guarantee"].startswith("exact")
