"""A frozen metric that is the identity says so (issue 49, item 5): Monge's statistic, the mean
gradient, is about 0 at stationarity."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import sgrld
from sgrld.samplers.guarantee import FrozenIdentityWarning


def _sample(metric):
    """A 100-D standard normal from its mode: Monge's rank-one shrink ``α²|ḡ|²/(1 + α²|ḡ|²)``
    along its window-averaged gradient (``|ḡ|² ≈ 10``) moves a sign pattern ``r`` by about
    0.1 % of ``‖r‖`` at α² = 0.001. (At α² = 1 from jittered starts the chains drift outward:
    Monge shrinks the restoring drift along a large gradient, not the noise across it.)"""
    t = sgrld.samples.targets.gaussian(np.zeros(100), np.eye(100))
    s = sgrld.sgrld(t.potential, metric, learning_rate=0.1, num_data=1)
    kw = dict(num_samples=50, thin=4, burn_in=800, num_chains=4, init="shared")
    return sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, **kw)


def test_frozen_monge_is_stated_as_the_identity():
    with pytest.warns(FrozenIdentityWarning, match="the frozen metric is the identity to"):
        out = _sample(sgrld.metrics.monge(alpha2=0.001))
    assert "; the frozen metric is the identity to" in out.guarantee and "(SGLD)" in out.guarantee


def test_frozen_rmsprop_is_not():
    """RMSprop's g² does not vanish (its noise's variance stays), so its frozen G⁻¹ ≠ I."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FrozenIdentityWarning)
        out = _sample(sgrld.metrics.rmsprop())
    assert "identity" not in out.guarantee
