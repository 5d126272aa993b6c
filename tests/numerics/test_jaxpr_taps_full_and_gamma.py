"""Issue 51's exactness list, the cases ``test_jaxpr_taps.py`` leaves out.

* The full statistic of each framework's MLP and CNN (Flax Linen and NNX, Equinox, Haiku), with
  the data's labels and with the model's, against ``vmap(grad)``: every leaf's per-example
  gradients from the traced taps (no leaf falls back).
* Γ of DOP, QDOP and the full Fisher on the traced path (no leaf falls back) against
  ``jax.jacfwd`` of the dense G⁻¹(θ) built from ``vmap(grad)`` statistics, for a strided SAME
  convolution and each framework's MLP, to rounding: 1e-10 of Γ's largest entry in float64, 1e-6
  in float32 (NNX and Linen keep their parameters float32 for DOP and QDOP; the full Fisher's
  cases run in float64). ``test_jaxpr_taps.py`` checks Γ on a
  layer at several positions, to 2e-3.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sgrld
from sgrld.bnn import likelihoods
from sgrld.numerics.per_example import FallbackWarning
from tests.helpers import exact_gamma_against_jacfwd
from tests.numerics.test_jaxpr_taps import FISHER, FRAMEWORKS, KINDS, B, check, normal, reference

FRAMEWORK_LIBRARIES = {"equinox": "equinox", "haiku": "haiku", "linen": "flax", "nnx": "flax"}


@pytest.fixture(autouse=True)
def float64():
    with jax.enable_x64(True):
        yield


def models(framework: str):
    """The framework's MLP and CNN, ``(apply, net, x)`` each; skipped without its library."""
    pytest.importorskip(FRAMEWORK_LIBRARIES[framework])  # an optional extra; CI installs it
    return FRAMEWORKS[framework]()


@pytest.mark.parametrize("labels", ["empirical", "model"])
@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_each_frameworks_mlp_and_cnn_full_statistic(framework, labels):
    for apply, net, x in models(framework):
        check("full", labels, apply, net, x)


def strided_conv(p, x):
    """A 3×3 convolution, SAME, strides (2, 1), channels last, its bias (named as Haiku's, so
    QDOP pairs them), a dense output."""
    spec = ("NHWC", "HWIO", "NHWC")
    h = jax.lax.conv_general_dilated(x, p["conv"]["w"], (2, 1), "SAME", dimension_numbers=spec)
    h = jnp.tanh(h + p["conv"]["b"])
    return h.reshape(h.shape[0], -1) @ p["out"]


def conv_case():
    net = {"conv": {"w": normal(1, 3, 3, 1, 2), "b": normal(2, 2)}, "out": normal(3, 12, 3)}
    return strided_conv, net, normal(0, B, 4, 3, 1)


CASES = {
    "conv": conv_case,
    **{f"{name}-mlp": (lambda name=name: models(name)[0]) for name in sorted(FRAMEWORKS)},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_gamma_on_the_traced_path_equals_jacfwd(case, kind):
    apply, net, x = CASES[case]()
    if kind == "full":  # its Cholesky scales float32 rounding by cond(G), about 100 here (7e-6)
        net = jax.tree.map(lambda a: a.astype(jnp.float64), net)
    metric = FISHER[kind](eps=0.05, decay=0.0)
    loglik = likelihoods.categorical(apply)
    potential = sgrld.potential(loglik, None, num_data=10)
    params, batch = {"net": net}, (x, jnp.arange(B) % 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)  # every leaf on the traced path
        expected, got = exact_gamma_against_jacfwd(
            metric, potential, params, batch, lambda p: reference(kind, loglik, p, batch)
        )
    largest = float(jnp.abs(expected).max())
    assert largest > 1.0  # Γ is not trivially zero here
    tolerance = 1e-10 if got.dtype == jnp.float64 else 1e-6
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance * largest)
