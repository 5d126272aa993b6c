"""Checkpoints of an earlier state layout resume: those written before every sampler kept its
integrator's state whole in the field ``integrator`` (SGNHT's momentum and thermostat were two
fields of its state, Adam-SGLD's state had no such field, SGHMC's was named ``momentum``)."""

from __future__ import annotations

import collections
import dataclasses
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import sgrld
from sgrld.bnn import likelihoods
from sgrld_app import checkpoint, runner
from tests.run.test_checkpoint import TIMING
from tests.run.test_runner import N_TRAIN, SCHEDULE, apply, logistic_experiment

# The states' layouts before the change, as that code declared them.
SGNHT_BEFORE = collections.namedtuple("SGNHTState", "step params momentum thermostat")
ADAM_SGLD_BEFORE = collections.namedtuple("AdamSGLDState", "step params momentum second_moment")
SGHMC_BEFORE = collections.namedtuple(
    "SGHMCState", "step params momentum metric_state noise_variance"
)


def _before(tree):
    """``tree`` with its sampler states in the layout written before the change."""

    def old(x):
        if isinstance(x, sgrld.SGNHTState):
            return SGNHT_BEFORE(x.step, x.params, x.momentum, x.thermostat)
        if isinstance(x, sgrld.AdamSGLDState):
            return ADAM_SGLD_BEFORE(x.step, x.params, x.momentum, x.second_moment)
        if isinstance(x, sgrld.SGHMCState):
            return SGHMC_BEFORE(x.step, x.params, x.momentum, x.metric_state, x.noise_variance)
        return x

    states = (sgrld.SGNHTState, sgrld.AdamSGLDState, sgrld.SGHMCState)
    return jax.tree.map(old, tree, is_leaf=lambda x: isinstance(x, states))


SAMPLERS = {
    "sgnht": lambda u: sgrld.sgnht(u, learning_rate=0.01, num_data=N_TRAIN),
    "adam_sgld": lambda u: sgrld.adam_sgld(u, 0.01, num_data=N_TRAIN),
    "sghmc": lambda u: sgrld.sghmc(u, learning_rate=0.01, num_data=N_TRAIN, friction=0.2),
}


def _metrics(out: Path) -> list[dict]:
    lines = (out / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING} for line in lines]


@pytest.mark.long
@pytest.mark.filterwarnings("ignore::sgrld.chains.dispersion.ChainsDisagreeWarning")
@pytest.mark.parametrize("name", sorted(SAMPLERS))
def test_a_checkpoint_in_the_layout_before_one_integrator_field_resumes(
    tmp_path, monkeypatch, name
):
    """A run whose checkpoints are written in the earlier layout, resumed from its epoch 2 by
    this code, ends as it did uninterrupted; without :data:`checkpoint.EARLIER_LAYOUTS` the same
    checkpoint of SGNHT or Adam-SGLD is refused (its structure differs; SGHMC's does not)."""
    prior = lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p))
    u = sgrld.potential(likelihoods.categorical(apply), prior, N_TRAIN)
    experiment = dataclasses.replace(logistic_experiment(), sampler=SAMPLERS[name](u))
    real = checkpoint.save
    monkeypatch.setattr(
        checkpoint,
        "save",
        lambda out, epoch, trees, info: real(out, epoch, _before(trees), info),
    )
    whole = runner.run(experiment, SCHEDULE, out=tmp_path, checkpoint_seconds=0.0)
    assert whole.status == "completed"
    before = _metrics(tmp_path)
    monkeypatch.setattr(checkpoint, "save", real)
    saved = checkpoint.load(checkpoint.path_of(tmp_path, 2))
    with monkeypatch.context() as m:
        m.setattr(checkpoint, "EARLIER_LAYOUTS", ())
        if name == "sghmc":
            runner.run(experiment, SCHEDULE, out=tmp_path / "x", resume=saved)
        else:
            with pytest.raises(checkpoint.CheckpointError, match="another structure"):
                runner.run(experiment, SCHEDULE, out=tmp_path / "x", resume=saved)
    resumed = runner.run(experiment, SCHEDULE, out=tmp_path, resume=saved)
    assert resumed.status == "completed" and len(before) == 3
    assert _metrics(tmp_path) == before
