"""Configuration: TOML loading, overrides, errors that name the bad key, writing back."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

import sgrld_app
from sgrld_app.config import (
    Config,
    ConfigError,
    from_dict,
    load_config,
    parse_override,
    to_toml,
    with_overrides,
    write_config,
)

EXAMPLE = """
[data]
name = "digits"
batch_size = 32

[model]
widths = [16]

[sampler]
metric = "monge"
learning_rate = 0.1
[sampler.metric_params]
alpha2 = 0.5

[run]
epochs = 3
"""


@pytest.fixture
def example(tmp_path: Path) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(EXAMPLE)
    return path


def test_file_values_and_defaults(example):
    c = load_config(example)
    assert (c.data.name, c.data.batch_size, c.data.validation_size) == ("digits", 32, None)
    assert c.model.widths == (16,) and c.model.kind == "mlp"
    assert c.sampler.metric_params == {"alpha2": 0.5} and c.sampler.learning_rate == 0.1
    assert (c.run.epochs, c.run.burn_in, c.run.thin) == (3, "auto", 100)


def test_overrides_apply_in_order_and_parse_toml_literals(example):
    c = load_config(
        example,
        [
            "run.epochs=5",
            "run.epochs=7",
            "model.widths=[8, 8]",
            "sampler.metric_params.decay=0.8",
            "sampler.correction=hutchinson",  # bare word: taken as a string
            'out.folder="a b/c"',
            "run.save_samples=true",
        ],
    )
    assert c.run.epochs == 7 and c.model.widths == (8, 8) and c.run.save_samples is True
    assert c.sampler.metric_params == {"alpha2": 0.5, "decay": 0.8}
    assert c.sampler.correction == "hutchinson" and c.out.folder == "a b/c"


def test_int_is_accepted_for_float():
    c = load_config(None, ["sampler.learning_rate=1"])
    assert c.sampler.learning_rate == 1.0 and isinstance(c.sampler.learning_rate, float)


@pytest.mark.parametrize("decay", ["0.9", "inverse_sqrt"])
@pytest.mark.parametrize(
    "metric", ["fisher_diag", "fisher_qdiag", "rmsprop", "monge", "wenzel", "shampoo"]
)
def test_a_parameter_of_either_type_takes_both(metric, decay):
    """Every moving-average metric's ``decay: float | str``: a number or the name of the 1/√t
    schedule, which the library takes (RMSprop's and Monge's refused it on the command line)."""
    c = load_config(None, [f"sampler.metric={metric}", f"sampler.metric_params.decay={decay}"])
    assert c.sampler.metric_params == {"decay": 0.9 if decay == "0.9" else decay}


@pytest.mark.parametrize(
    "overrides, words",
    [
        ("sampler.learnig_rate=0.1", ["sampler.learnig_rate", "did you mean 'learning_rate'"]),
        ("sampler.metric=monge sampler.metric_params.alph2=1", ["alph2", "'alpha2'", "decay"]),
        ("trainer.epochs=1", ["'trainer'", "valid keys", "run"]),
        ("run.epochs=2.5", ["run.epochs", "expected int", "float"]),
        ("run.save_samples=1", ["run.save_samples", "expected bool"]),
        ("model.widths=[10,'x']", ["model.widths[1]", "expected int"]),
        ("sampler.learning_rate=-0.1", ["sampler.learning_rate", "> 0", "-0.1"]),
        ("sampler.learning_rate=nan", ["sampler.learning_rate", "finite"]),
        ("run.thin=0", ["run.thin", ">= 1"]),
        ("run.burn_in=soon", ["run.burn_in", "'auto'", "'soon'"]),
        ("run.burn_in=-3", ["run.burn_in", ">= 0"]),
        ("run.checkpoint_seconds=-1", ["run.checkpoint_seconds", ">= 0"]),
        ("sampler.metric=mongee", ["sampler.metric", "did you mean 'monge'"]),
        ("data.name=minst", ["data.name", "did you mean 'mnist'"]),
        ("sampler.metric=monge sampler.metric_params.decay=1.5", ["metric_params", "[0, 1)"]),
        ("sampler.metric=shampoo sampler.metric_params.update_every=1.5", ["update_every"]),
        ("prior.params.weight_scale=-1", ["prior.params", "weight_scale"]),
        ("run.epochs=1 run.epochs.x=1", ["run.epochs", "not a table"]),
        ("sampler.metric_params.decay=0.9", ["of identity(): none"]),
        ("run.epochs", ["key=value"]),
        ("sampler.metric=fisher_diag sampler.metric_params.decay=true", ["float or str"]),
        ("sampler.metric=fisher_diag sampler.metric_params.examples=2.5", ["expected int"]),
    ],
)
def test_errors_name_the_bad_key(overrides, words):
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides.split(" "))
    for word in words:
        assert word in str(err.value)


def test_file_errors_name_the_file(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[run\nepochs = 1")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_config(bad)
    misspelt = tmp_path / "misspelt.toml"
    misspelt.write_text("[run]\nepoks = 3\n")
    with pytest.raises(ConfigError, match="unknown key 'run.epoks' \\(did you mean 'epochs'\\?\\)"):
        load_config(misspelt)


def test_parse_override():
    assert parse_override(" run.epochs = 3 ") == ("run.epochs", 3)
    assert parse_override("sampler.metric_params={alpha2 = 1.0}") == (
        "sampler.metric_params",
        {"alpha2": 1.0},
    )


def test_written_config_round_trips(example, tmp_path: Path):
    c = load_config(example, ["data.validation_size=100", "sampler.adapt_until=50"])
    toml_path, json_path = write_config(c, tmp_path / "out")
    assert load_config(toml_path) == c
    assert from_dict(json.loads(json_path.read_text())) == c
    text = to_toml(Config())
    assert "# data_dir is not set" in text and from_dict(tomllib.loads(text)) == Config()


def test_with_overrides_validates():
    assert with_overrides(Config(), ["run.chains=2"]).run.chains == 2
    with pytest.raises(ConfigError, match="run.chains"):
        with_overrides(Config(), ["run.chains=0"])


def test_sampler_section_holds_every_option_of_every_kind():
    """[sampler] and the samplers can never drift apart: the keys after metric_params are the
    union of the keyword options of sgrld, sghmc, sgnht and isgd; sgrld's with its defaults."""
    import dataclasses
    import inspect

    import sgrld
    from sgrld_app.config import SAMPLERS, SamplerConfig

    assert list(SAMPLERS) == ["sgrld", "sghmc", "sgnht", "isgd"]
    keywords = {}
    for kind in SAMPLERS:
        signature = inspect.signature(getattr(sgrld, kind)).parameters
        keywords[kind] = {
            name: p.default
            for name, p in signature.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY and name not in ("num_data", "metric")
        }
    fields = {f.name: f.default for f in dataclasses.fields(SamplerConfig)}
    assert [fields.pop(k) for k in ("kind", "metric", "metric_params")][:2] == ["sgrld", "identity"]
    assert set(fields) == set().union(*(set(k) for k in keywords.values()))
    options = keywords["sgrld"]
    differs = {k for k in options if fields[k] != options[k]}
    assert differs == {"learning_rate"}  # no default in sgrld(); "auto" in the config
    assert all(fields[k] is None for k in set(fields) - set(options))  # the sampler's default
    assert set(SamplerConfig().sampler_options()) == set(options)
    for kind in SAMPLERS:
        assert set(SamplerConfig(kind=kind).sampler_options()) <= set(keywords[kind])
    assert not hasattr(sgrld_app.config, "CORRECTIONS")  # one list: sgrld.parts.correction.MODES


@pytest.mark.parametrize(
    "kind,overrides,expected",
    [
        ("sgrld", [], {"learning_rate": "auto", "correction": "auto"}),
        ("sghmc", ["sampler.friction=0.5", "sampler.gradient_noise=per_example"],
         {"friction": 0.5, "gradient_noise": "per_example", "correction": "auto"}),
        ("sgnht", ["sampler.diffusion=0.2"], {"diffusion": 0.2, "temperature": 1.0}),
        ("isgd", ["sampler.learning_rate=rule", "sampler.warmup=20", "sampler.margin=3"],
         {"warmup": 20, "margin": 3.0, "temperature": 1.0}),
    ],
)  # fmt: skip
def test_each_kind_gets_its_options(kind, overrides, expected):
    cfg = load_config(None, [f"sampler.kind={kind}", *overrides])
    options = cfg.sampler.sampler_options()
    assert expected.items() <= options.items()
    assert ("learning_rate" in options) == ("sampler.learning_rate=rule" not in overrides)


@pytest.mark.parametrize(
    "overrides,words",
    [
        (["sampler.kind=hmc"], ["sampler.kind", "did you mean 'sghmc'"]),
        (["sampler.friction=0.5"], ["sampler.friction", "'sgrld' does not take it", "sghmc"]),
        (["sampler.kind=sgnht", "sampler.metric=monge"], ["sampler.metric", "sgrld, sghmc"]),
        (["sampler.kind=isgd", "sampler.correction=exact"], ["sampler.correction"]),
        (["sampler.kind=sghmc", "sampler.warmup=3"], ["sampler.warmup", "only isgd"]),
        (["sampler.learning_rate=rule"], ["sampler.learning_rate", "isgd"]),
        (["sampler.kind=isgd", "sampler.learning_rate=fast"], ["sampler.learning_rate"]),
        (["sampler.kind=sghmc", "sampler.friction=1.5"], ["sampler.friction", "(0, 1]"]),
        (["sampler.kind=sghmc", "sampler.friction=0"], ["sampler.friction", "> 0"]),
        (["sampler.kind=sgnht", "sampler.diffusion=-1"], ["sampler.diffusion"]),
        (["sampler.kind=sghmc", "sampler.gradient_noise=square"], ["per_example"]),
        (["sampler.kind=sghmc", "sampler.noise_decay=1"], ["sampler.noise_decay", "[0, 1)"]),
        (["sampler.kind=isgd", "sampler.warmup=0"], ["sampler.warmup", ">= 1"]),
        (["sampler.kind=isgd", "sampler.noise_window=0"], ["sampler.noise_window", ">= 1"]),
        (["sampler.kind=isgd", "sampler.margin=0.5"], ["sampler.margin", ">= 1"]),
        (["sampler.kind=isgd", "sampler.learning_rate=rule", "sampler.temperature=0"],
         ["sampler.temperature", "rule"]),
    ],
)  # fmt: skip
def test_bad_sampler_kind_options_name_the_key(overrides, words):
    with pytest.raises(ConfigError) as err:
        load_config(None, overrides)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


@pytest.mark.parametrize(
    "kind,extra",
    [("sghmc", ["sampler.friction=0.5"]), ("isgd", ["sampler.learning_rate=rule"])],
)
def test_sgrld_run_with_another_sampler_kind(tmp_path: Path, kind, extra):
    from sgrld_app import cli
    from tests.run.test_cli import TINY

    config = tmp_path / "tiny.toml"
    config.write_text(TINY)
    sets = [f"--set={s}" for s in ["run.epochs=1", f"sampler.kind={kind}", *extra]]
    assert cli.main(["run", str(config), *sets, "--out", str(tmp_path / "out")]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    resolved = json.loads((tmp_path / "out" / "config.json").read_text())
    assert summary["status"] == "completed" and resolved["sampler"]["kind"] == kind


def test_correction_modes_are_those_of_sgrld_correction():
    import sgrld

    for mode in sgrld.parts.correction.MODES:
        assert load_config(None, [f"sampler.correction={mode}"]).sampler.correction == mode
    with pytest.raises(ConfigError, match="none, hutchinson, exact"):
        load_config(None, ["sampler.correction=approximate"])


def test_registries_name_the_factories_of_their_modules():
    import sgrld
    from sgrld_app.config import METRICS, PRIORS

    for registry, module in ((METRICS, sgrld.metrics), (PRIORS, sgrld.bnn.priors)):
        assert all(registry[name] is getattr(module, name) for name in registry)
    with pytest.raises(KeyError):
        METRICS["adam"]
    with pytest.raises(ConfigError, match="prior.kind.*did you mean 'horseshoe'"):
        load_config(None, ["prior.kind=horsehoe"])


def test_every_sampler_option_can_be_set():
    from sgrld_app.config import load_config

    cfg = load_config(
        None,
        [
            "sampler.correction=hutchinson",
            "sampler.num_probes=3",
            "sampler.correction_warmup=7",
            "sampler.prior_in_metric=false",
            "sampler.gamma_kick_limit=0.5",
        ],
    )
    options = cfg.sampler.sampler_options()
    assert options["num_probes"] == 3 and options["correction_warmup"] == 7
    assert options["prior_in_metric"] is False and options["gamma_kick_limit"] == 0.5
    for bad, key in (
        ("sampler.num_probes=0", "num_probes"),
        ("sampler.correction=hutch", "correction"),
        ("sampler.gamma_kick_limit=0", "gamma_kick_limit: must be > 0"),
        ("sampler.gamma_kick_limit=1", "gamma_kick_limit tames .* needs sampler.correction"),
    ):
        with pytest.raises(ConfigError, match=key):
            load_config(None, [bad])


def test_sampler_ranges_are_the_factories():
    """Every range [sampler] checks is one its kind's factory declares (its module's BOUNDS) and
    checks itself: a value outside it fails in both, with the key named in the configuration."""
    import sgrld
    from sgrld_app.config import SAMPLERS
    from sgrld_app.config.registries import sampler_bounds, sampler_keywords

    u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, num_data=4)
    for kind in SAMPLERS:
        bounds = sampler_bounds(kind)
        assert set(bounds) <= set(sampler_keywords(kind)), kind
        for name, bound in bounds.items():
            bad = bound.low - 1 if not bound.open_low else bound.low
            kw = {"learning_rate": 0.1} | (
                {"metric": sgrld.metrics.identity()} if kind == "sgrld" else {}
            )
            with pytest.raises(ValueError, match=name):
                SAMPLERS[kind](u, num_data=4, **(kw | {name: bad}))
            with pytest.raises(ConfigError, match=f"sampler.{name}: must be"):
                load_config(None, [f"sampler.kind={kind}", f"sampler.{name}={bad}"])


@pytest.mark.parametrize("bad", ['sampler.adapt_until="atuo"', 'sampler.correction_scale="atuo"'])
def test_a_misspelt_name_of_a_numeric_option_is_refused_at_load(bad):
    """``adapt_until`` and ``correction_scale`` take a number or a name ("auto", "never"): a
    misspelt name is refused when the configuration loads, before any data is read."""
    with pytest.raises(ConfigError, match=bad.split("=")[0] + ".*atuo"):
        load_config(None, [bad])
