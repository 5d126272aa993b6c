"""``observed_data`` in the ArviZ export: a regression run's training targets, rebuilt from its
results folder's config.toml (``observed_targets``); none for classification; a warning when the
data are gone."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import sgrld
import sgrld_app
from sgrld_app.from_config import observed_targets
from sgrld_app.launch import run_config
from tests.data.test_uci import FEATURES, SPLITS, TABLE, TARGET
from tests.helpers import write_uci


@pytest.fixture(scope="module")
def uci_run(tmp_path_factory):
    """A tiny regression run on the 8 training rows of the small UCI-format set of test_uci."""
    base = tmp_path_factory.mktemp("data")
    write_uci(base / "uci" / "yacht", TABLE, FEATURES, TARGET, SPLITS)
    overrides = [
        "data.name=uci_yacht",
        f"data.data_dir={str(base)!r}",
        "data.verify_checksums=false",
        "data.batch_size=4",
        "model.kind=regression_mlp",
        "model.widths=[3]",
        "prior.kind=gaussian",
        "sampler.metric=identity",
        "sampler.learning_rate=0.01",
        "run.epochs=2",
        "run.burn_in=0",
        "run.thin=1",
        "run.chains=2",
        "run.save_samples=true",
    ]
    out = tmp_path_factory.mktemp("run")
    assert run_config(sgrld_app.config.load_config(None, overrides), out=out).status == "completed"
    return out, base


def test_a_regression_run_has_its_training_targets_in_their_units(uci_run):
    out, _ = uci_run
    idata = sgrld.to_arviz(out, observed_data=observed_targets(out))
    y = idata.observed_data["y"]
    assert y.dims == ("y_dim_0",)
    np.testing.assert_allclose(y.values, TABLE[SPLITS[0][0], TARGET], rtol=1e-6)
    assert dict(idata.posterior.sizes)["chain"] == 2


def test_observed_data_can_be_given_and_is_left_out_without_data(uci_run, tmp_path):
    out, base = uci_run
    given = sgrld.to_arviz(sgrld.load_samples(out), observed_data={"y": np.arange(3.0)})
    assert given.observed_data["y"].values.tolist() == [0.0, 1.0, 2.0]
    assert "observed_data" not in sgrld.to_arviz(sgrld.load_samples(out)).children
    moved = tmp_path / "run"
    shutil.copytree(out, moved)
    (moved / "config.toml").write_text(
        (out / "config.toml").read_text().replace(str(base), str(tmp_path / "gone"))
    )
    with pytest.warns(UserWarning, match="observed_data left out: .*yacht"):
        observed = observed_targets(moved)
    assert observed == {}
    assert "observed_data" not in sgrld.to_arviz(moved, observed_data=observed).children
    assert "observed_data" not in sgrld.to_arviz(out).children  # only what is given
