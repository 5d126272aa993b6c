"""``sampler.learning_rate = "auto"`` in runs: chosen before the run, stated with the guarantee,
the same from the same seed, read back on ``--resume`` (never searched again), and the newcomer's
command on the digits completes for every metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sgrld_app import auto_rate, cli, launch
from sgrld_app.config import load_config
from tests.helpers import digits_toml

pytestmark = pytest.mark.long  # each runs a search and a run: 10-30 s

TINY = digits_toml(64, 8, learning_rate=None, epochs=10, burn_in=128, thin=10, chains=2)
"""19 steps per epoch, a burn-in of 128 steps: a pilot of 64 (the halving's half burn-in)."""


def _config(tmp_path: Path, *overrides: str):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    return load_config(path, [f"out.folder={json.dumps(str(tmp_path / 'out'))}", *overrides])


def test_auto_is_the_default_and_is_stated_with_the_guarantee(tmp_path):
    config = _config(tmp_path)
    assert config.sampler.sampler_options()["learning_rate"] == "auto"  # unset: the default
    result = launch.run_config(config)
    meta = json.loads((tmp_path / "out" / "summary.json").read_text())["meta"]
    choice = meta[auto_rate.META_KEY]
    assert result.status == "completed"
    assert choice["learning_rate"] in choice["candidates"] and len(choice["candidates"]) == 7
    assert choice["criterion"].startswith("validation log-likelihood")  # digits has a val split
    assert f"lr {choice['learning_rate']:.3g} chosen by the validation" in meta["guarantee"]
    rates = {round(r["learning_rate"], 6) for r in result.records}
    assert rates == {round(choice["learning_rate"], 6)}  # every step ran at the chosen rate


def test_the_same_seed_makes_the_same_choice_and_resume_reads_it_back(tmp_path, monkeypatch):
    config = _config(tmp_path, "run.checkpoint_every=1", "run.checkpoint_seconds=0")
    first = launch.run_config(config)
    chosen = first.summary["meta"][auto_rate.META_KEY]
    again = launch.run_config(config, out=tmp_path / "again")
    assert again.summary["meta"][auto_rate.META_KEY] == chosen

    def no_search(*args, **kwargs):
        raise AssertionError("a resumed run must not search again")

    monkeypatch.setattr(auto_rate, "search_rate", no_search)
    resumed = launch.run_config(config, existing="resume")
    assert resumed.summary["meta"][auto_rate.META_KEY] == chosen


def test_a_number_is_used_as_it_is(tmp_path):
    result = launch.run_config(_config(tmp_path, "sampler.learning_rate=0.05"))
    assert auto_rate.META_KEY not in result.summary["meta"]
    assert {round(r["learning_rate"], 6) for r in result.records} == {0.05}


@pytest.mark.parametrize("command", [[], ["--grid", "sampler.temperature=[1.0, 0.5]"]])
def test_auto_with_a_burn_in_too_short_names_it(command, tmp_path, capsys):
    """``sgrld run`` and ``sgrld sweep`` (whose settings each search their rate)."""
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    verb = "sweep" if command else "run"
    args = [verb, str(path), *command, "--set", "run.burn_in=60", "--out", str(tmp_path / "o")]
    assert cli.main(args) != 0
    out, err = capsys.readouterr()
    assert "run.burn_in = 60: sampler.learning_rate = 'auto' (the default)" in err
    assert "Traceback" not in err and not out and not (tmp_path / "o").exists()


NEWCOMER_METRICS = ["identity", "rmsprop", "wenzel", "monge", "shampoo", "fisher_diag"]


@pytest.mark.slow
@pytest.mark.parametrize("metric", [*NEWCOMER_METRICS, "fisher_qdiag"])
def test_the_newcomers_command_completes_on_the_digits(metric, tmp_path, capsys):
    """``sgrld run --set data.name=digits --set sampler.metric=M``, nothing else set: the 400
    epochs of the default complete with samples and no divergence (issue 49's first row)."""
    out = tmp_path / metric
    args = ["run", "--set", "data.name=digits", "--set", f"sampler.metric={metric}"]
    assert cli.main([*args, "--out", str(out)]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final"]["samples"] > 0


def test_a_sweep_searches_each_setting_and_shows_its_rate(tmp_path):
    from sgrld_app.sweep import parse_grid, run_sweep

    config = _config(tmp_path)
    grid = parse_grid("sampler.temperature=[1.0, 0.5]", config)
    sweep = run_sweep(config, [grid], replicates=1, out=tmp_path / "sweep")
    choices = sweep.result.summary["meta"][auto_rate.META_KEY]
    assert len(choices) == 2  # one search per setting
    assert [row["lr"] for row in sweep.rows] == [format(c["learning_rate"], "g") for c in choices]


def test_a_search_where_every_rate_diverges_is_one_line(tmp_path, capsys, monkeypatch):
    def diverged(*args, **kwargs):
        raise FloatingPointError('learning_rate="auto": every rate tried diverged (1, 0.3)')

    monkeypatch.setattr(auto_rate, "search_rate", diverged)
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "o"
    assert cli.main(["run", str(path), "--out", str(out)]) != 0
    err = capsys.readouterr().err
    assert "sampler.learning_rate = 'auto': " in err and "every rate tried diverged" in err
    assert "Traceback" not in err and not (out / "summary.json").exists()


@pytest.mark.parametrize(
    "stored, many",
    [
        ({"learning_rate": 0.1}, False),
        ({"learning_rate": "x"}, False),
        ({}, True),
        ([1], True),
        (  # Monge's α² row without its score
            {
                "learning_rate": 0.1,
                "candidates": [0.1],
                "scores": [0.2],
                "pilot_steps": 8,
                "at_edge": False,
                "option": "alpha2",
                "option_value": 0.1,
                "options": [[0.1, 0.1]],
            },
            False,
        ),
    ],
)
def test_a_corrupt_stored_choice_is_one_line(stored, many):
    """A hand-edited ``meta.learning_rate_search`` (a key missing, a value of the wrong kind, a
    sweep's list that is not one) is named in one line, not a traceback from ``--resume``."""
    with pytest.raises(auto_rate.ResultsError, match="learning_rate_search cannot be read") as e:
        auto_rate.stored_choices(stored, many)
    assert "\n" not in str(e.value)


def test_a_stored_choice_reads_back():
    choice = auto_rate.RateChoice(0.1, (0.3, 0.1), (0.2, 0.01), 64, False, (0.01, 0.01))
    assert auto_rate.stored_choices(choice.to_dict(), False) == [choice]


def test_without_a_validation_split_the_search_holds_out_training_rows(tmp_path):
    """The digits without their validation split: the search scores on 10 % of the training rows
    held out (stated in the criterion and the guarantee), and the run steps over every row."""
    result = launch.run_config(_config(tmp_path, "data.validation_size=0", "run.epochs=7"))
    choice = result.summary["meta"][auto_rate.META_KEY]
    assert result.status == "completed"
    assert "training rows held out" in choice["criterion"]
    assert "training rows held out" in result.summary["meta"]["guarantee"]
    held = int(choice["criterion"].split(" on ")[1].split(" ")[0])  # 10 % of the n rows
    every_row = {
        (10 * held + extra) // 64 for extra in range(10)
    }  # n // batch, n in 10·held + [0, 10)
    assert result.records[0]["steps"] in every_row and held >= 100


def test_too_few_rows_to_hold_out_are_searched_by_the_virial_for_the_run(tmp_path, monkeypatch):
    """150 training rows and no validation split hold out too few rows (15 < 20): the Stein
    virial chooses, told the run's length (10 epochs of 15 steps less the burn-in of 128)."""
    told = []
    choose = auto_rate.choose_learning_rate
    monkeypatch.setattr(
        auto_rate,
        "choose_learning_rate",
        lambda *a, **kw: told.append(kw["run_steps"]) or choose(*a, **kw),
    )
    config = _config(
        tmp_path, "data.validation_size=0", "data.train_size=150", "data.batch_size=10"
    )
    result = launch.run_config(config)
    assert result.status == "completed"
    assert "Stein virial" in result.summary["meta"][auto_rate.META_KEY]["criterion"]
    assert told == [10 * 15 - 128]


def test_monges_alpha2_not_given_is_chosen_beside_the_rate_and_read_back(tmp_path, monkeypatch):
    """Monge with α² not given: the search halves the rates at each α² of
    :data:`~sgrld.metrics.monge.SEARCHED_ALPHA2` and keeps the α² whose chosen rate scores best
    on validation; the run steps at that α² (its chains' first step equals a run given that α²
    and rate by hand), states it, and ``--resume`` reads both back."""
    from sgrld.metrics.monge import SEARCHED_ALPHA2

    config = _config(
        tmp_path, "sampler.metric=monge", "run.checkpoint_every=1", "run.checkpoint_seconds=0"
    )
    result = launch.run_config(config)
    choice = result.summary["meta"][auto_rate.META_KEY]
    assert result.status == "completed" and choice["option"] == "alpha2"
    assert [row[0] for row in choice["options"]] == list(SEARCHED_ALPHA2)
    best = min(choice["options"], key=lambda row: row[2])
    assert (choice["option_value"], choice["learning_rate"]) == (best[0], best[1])
    assert f"α² {choice['option_value']:.3g} and lr" in result.summary["meta"]["guarantee"]
    by_hand = launch.run_config(
        _config(
            tmp_path,
            "sampler.metric=monge",
            f"sampler.metric_params.alpha2={choice['option_value']}",
            f"sampler.learning_rate={choice['learning_rate']}",
        ),
        out=tmp_path / "by_hand",
    )
    assert by_hand.records[0]["potential"] == result.records[0]["potential"]
    assert result.summary["meta"]["guarantee"].startswith(by_hand.summary["meta"]["guarantee"])
    monkeypatch.setattr(auto_rate, "search_rate", lambda *a, **k: pytest.fail("searched again"))
    resumed = launch.run_config(config, existing="resume")
    assert resumed.summary["meta"][auto_rate.META_KEY] == choice
