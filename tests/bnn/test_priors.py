"""Priors: exact log densities against scipy.stats, the horseshoe Jacobian, the conv kernel."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special, stats

from sgrld.bnn import priors

WEIGHT_SCALE, BIAS_SCALE = 1.3, 0.7
SCALES = {"weight_scale": WEIGHT_SCALE, "bias_scale": BIAS_SCALE}


def random_net(seed: int = 0) -> dict:
    """Small float64 pytree: a 3x3 conv, a 1x1 conv, a dense layer, their biases, a scalar."""
    rng = np.random.default_rng(seed)
    shapes = {
        "conv": {"kernel": (3, 3, 2, 4), "bias": (4,)},
        "shortcut": {"kernel": (1, 1, 4, 3)},
        "dense": {"kernel": (5, 3), "bias": (3,)},
        "scalar": (),
    }
    return jax.tree.map(
        lambda s: jnp.asarray(rng.normal(size=s) * 0.3),
        shapes,
        is_leaf=lambda s: isinstance(s, tuple),
    )


def scale_of(leaf, conv_fan_in="full"):
    if leaf.ndim < 2:
        return BIAS_SCALE
    fan_in = leaf.shape[-2] if conv_fan_in == "channels" else math.prod(leaf.shape[:-1])
    return WEIGHT_SCALE / math.sqrt(fan_in)


def iid_reference(net, logpdf, conv_fan_in="full"):
    return sum(logpdf(np.asarray(w), scale_of(w, conv_fan_in)).sum() for w in jax.tree.leaves(net))


IID_CASES = {
    "gaussian": (priors.gaussian, {}, lambda x, s: stats.norm.logpdf(x, 0, s)),
    "laplace": (priors.laplace, {}, lambda x, s: stats.laplace.logpdf(x, 0, s)),
    "student_t": (priors.student_t, {"df": 2.5}, lambda x, s: stats.t.logpdf(x, 2.5, 0, s)),
}


@pytest.mark.parametrize("name", IID_CASES)
@pytest.mark.parametrize("conv_fan_in", ["full", "channels"])
def test_iid_priors_match_scipy(name, conv_fan_in):
    factory, kwargs, reference = IID_CASES[name]
    prior = factory(
        weight_scale=WEIGHT_SCALE, bias_scale=BIAS_SCALE, conv_fan_in=conv_fan_in, **kwargs
    )
    with jax.enable_x64(True):
        net = random_net()
        assert prior.init(net) == {}
        got = jax.jit(prior.log_prob)(net, {})
        assert got.dtype == jnp.float64
        np.testing.assert_allclose(got, iid_reference(net, reference, conv_fan_in), rtol=1e-12)


def test_float32_matches_float64():
    prior = priors.gaussian(weight_scale=WEIGHT_SCALE, bias_scale=BIAS_SCALE)
    net32 = jax.tree.map(lambda w: w.astype(jnp.float32), random_net())
    expected = iid_reference(net32, lambda x, s: stats.norm.logpdf(x.astype(np.float64), 0, s))
    got = jax.jit(prior.log_prob)(net32, {})
    assert got.dtype == jnp.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_logprior_fn_reads_net_and_prior():
    prior = priors.horseshoe()
    net = random_net()
    params = {"net": net, "prior": prior.init(net), "likelihood": {"log_noise": 0.0}}
    got = jax.jit(priors.logprior_fn(prior))(params)
    np.testing.assert_allclose(got, jax.jit(prior.log_prob)(net, params["prior"]), rtol=1e-6)


def half_cauchy_logpdf(x, scale):
    return stats.halfcauchy.logpdf(x, scale=scale)


def log_jacobian(rho, multiplier):
    return np.log(special.expit(rho)) + np.log(multiplier)


@pytest.mark.parametrize("include_jacobian", [True, False])
def test_horseshoe_matches_scipy(include_jacobian):
    hyperscale = 0.8
    prior = priors.horseshoe(hyperscale=hyperscale, include_jacobian=include_jacobian, **SCALES)
    with jax.enable_x64(True):
        net = random_net()
        rng = np.random.default_rng(1)
        rhos = jax.tree.map(lambda r: r + rng.normal(), prior.init(net))
        expected = 0.0
        for w, rho in zip(jax.tree.leaves(net), jax.tree.leaves(rhos), strict=True):
            rho, m = float(rho), scale_of(w)
            sigma = np.logaddexp(rho, 0.0) * m
            expected += stats.norm.logpdf(np.asarray(w), 0, sigma).sum()
            expected += half_cauchy_logpdf(sigma, hyperscale)
            expected += log_jacobian(rho, m) if include_jacobian else 0.0
        got = jax.jit(prior.log_prob)(net, rhos)
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_horseshoe_init_one_scalar_per_tensor_at_multiplier():
    net = random_net()
    rhos = priors.horseshoe(weight_scale=WEIGHT_SCALE).init(net)
    assert jax.tree.structure(rhos) == jax.tree.structure(net)
    for rho in jax.tree.leaves(rhos):
        assert rho.shape == () and rho.dtype == jnp.float32 and not rho.weak_type
        np.testing.assert_allclose(jax.nn.softplus(rho), 1.0, rtol=1e-6)


@pytest.mark.parametrize("factory", [priors.horseshoe, priors.horseshoe_per_weight])
def test_horseshoe_rejects_mismatched_prior_params(factory):
    with pytest.raises(ValueError, match="prior.init"):
        factory().log_prob({"kernel": jnp.ones((2, 2))}, {})


def test_horseshoe_without_biases_uses_gaussian_biases():
    prior = priors.horseshoe(weight_scale=WEIGHT_SCALE, bias_scale=BIAS_SCALE, on_biases=False)
    with jax.enable_x64(True):
        net = random_net()
        rhos = prior.init(net)
        assert rhos["conv"]["bias"] is None and rhos["scalar"] is None
        assert len(jax.tree.leaves(rhos)) == 3  # the three kernels
        leaves = jax.tree.leaves(net)
        biases = [w for w in leaves if w.ndim < 2]
        kernels = [w for w in leaves if w.ndim >= 2]
        hs_kernels = priors.horseshoe(weight_scale=WEIGHT_SCALE)
        expected = iid_reference(biases, lambda x, s: stats.norm.logpdf(x, 0, s))
        expected += jax.jit(hs_kernels.log_prob)(kernels, hs_kernels.init(kernels))
        np.testing.assert_allclose(jax.jit(prior.log_prob)(net, rhos), expected, rtol=1e-12)


# The scale part of the horseshoe density alone: a (fan_in, 0) kernel has fan_in = 4 but no
# elements, so its log_prob is exactly the log density of its scale parameter rho.
EMPTY_KERNEL = {"kernel": np.zeros((4, 0))}
EMPTY_MULTIPLIER = WEIGHT_SCALE / 2.0


def scale_log_density(include_jacobian, hyperscale=1.0):
    prior = priors.horseshoe(
        weight_scale=WEIGHT_SCALE, hyperscale=hyperscale, include_jacobian=include_jacobian
    )
    return jax.jit(lambda rho: prior.log_prob(EMPTY_KERNEL, {"kernel": rho}))


@pytest.mark.parametrize("hyperscale", [1.0, 0.05])
def test_horseshoe_jacobian_gives_a_normalised_density_on_rho(hyperscale):
    with jax.enable_x64(True):
        log_density = scale_log_density(True, hyperscale)
        mass, _ = integrate.quad(
            lambda r: math.exp(log_density(r)), -np.inf, np.inf, epsabs=1e-11, epsrel=1e-11
        )
    assert mass == pytest.approx(1.0, abs=1e-8)


def test_horseshoe_without_jacobian_is_improper_on_rho():
    with jax.enable_x64(True):
        log_density = scale_log_density(False)
        # exp(log_density) -> 2/pi as rho -> -inf, so the mass grows linearly with the range.
        mass, _ = integrate.quad(lambda r: math.exp(log_density(r)), -200.0, 50.0, limit=200)
    assert mass > 100.0


def test_horseshoe_jacobian_difference():
    rho = np.linspace(-30.0, 30.0, 13)
    with jax.enable_x64(True):
        diff = jax.vmap(scale_log_density(True))(rho) - jax.vmap(scale_log_density(False))(rho)
        np.testing.assert_allclose(diff, log_jacobian(rho, EMPTY_MULTIPLIER), rtol=1e-12)


@pytest.mark.parametrize("include_jacobian", [True, False])
def test_horseshoe_per_weight_matches_scipy(include_jacobian):
    hyperscale, local_scale = 0.8, 1.5
    prior = priors.horseshoe_per_weight(
        hyperscale=hyperscale, local_scale=local_scale, include_jacobian=include_jacobian, **SCALES
    )
    with jax.enable_x64(True):
        net = random_net()
        rng = np.random.default_rng(2)
        scales = jax.tree.map(lambda r: r + rng.normal(size=r.shape), prior.init(net))
        expected = 0.0
        rho_leaves = jax.tree.leaves(scales)  # (global, local) per tensor, in leaf order
        pairs = zip(jax.tree.leaves(net), rho_leaves[::2], rho_leaves[1::2], strict=True)
        for w, rho_g, rho_l in pairs:
            w, rho_g, rho_l, m = np.asarray(w), float(rho_g), np.asarray(rho_l), scale_of(w)
            tau, lam = np.logaddexp(rho_g, 0.0) * m, np.logaddexp(rho_l, 0.0)
            expected += stats.norm.logpdf(w, 0, tau * lam).sum()
            expected += half_cauchy_logpdf(tau, hyperscale)
            expected += half_cauchy_logpdf(lam, local_scale).sum()
            if include_jacobian:
                expected += log_jacobian(rho_g, m) + log_jacobian(rho_l, 1.0).sum()
        got = jax.jit(prior.log_prob)(net, scales)
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_horseshoe_per_weight_init_structure():
    net = random_net()
    scales = priors.horseshoe_per_weight(on_biases=False).init(net)
    kernel = scales["conv"]["kernel"]
    assert isinstance(kernel, priors.HorseshoeScales)
    assert kernel.global_rho.shape == () and kernel.local_rho.shape == (3, 3, 2, 4)
    assert scales["conv"]["bias"] is None
    np.testing.assert_allclose(jax.nn.softplus(kernel.local_rho), 1.0, rtol=1e-6)


def exponential_kernel(kh, kw, lengthscale):
    """Reference kernel matrix, built independently of the library (explicit double loop)."""
    positions = [(i, j) for i in range(kh) for j in range(kw)]
    return np.array(
        [[math.exp(-math.dist(p, q) / lengthscale) for q in positions] for p in positions]
    )


@pytest.mark.parametrize("spatial", [(3, 3), (2, 5), (1, 1)])
def test_exponential_kernel_cholesky_reproduces_kernel(spatial):
    chol, log_det = priors.exponential_kernel_cholesky(spatial, 1.7)
    kernel = exponential_kernel(*spatial, 1.7)
    np.testing.assert_allclose(chol @ chol.T, kernel, rtol=1e-12, atol=1e-14)
    assert np.allclose(chol, np.tril(chol))
    assert log_det == pytest.approx(0.5 * np.linalg.slogdet(kernel)[1], rel=1e-12)


def test_conv_cholesky_computed_once_per_shape():
    prior = priors.conv_correlated(lengthscale=2.3)
    net = {"a": np.zeros((3, 3, 1, 2)), "b": np.zeros((3, 3, 2, 2)), "c": np.zeros((2, 2, 1, 1))}
    jax.make_jaxpr(lambda n: prior.log_prob(n, {}))(net)
    info = priors.exponential_kernel_cholesky.cache_info()
    jax.make_jaxpr(lambda n: prior.log_prob(n, {}))(net)  # a new function: traced again
    after = priors.exponential_kernel_cholesky.cache_info()
    assert after.misses == info.misses and after.hits == info.hits + 3


@pytest.mark.parametrize("conv_fan_in", ["full", "channels"])
def test_conv_correlated_matches_scipy_multivariate_normal(conv_fan_in):
    lengthscale = 1.7
    prior = priors.conv_correlated(lengthscale=lengthscale, conv_fan_in=conv_fan_in, **SCALES)
    with jax.enable_x64(True):
        net = random_net()
        got = jax.jit(prior.log_prob)(net, prior.init(net))
    expected = 0.0
    for w in jax.tree.leaves(net):
        w, scale = np.asarray(w), scale_of(w, conv_fan_in)
        if w.ndim < 4:
            expected += stats.norm.logpdf(w, 0, scale).sum()
            continue
        kh, kw, cin, cout = w.shape
        mvn = stats.multivariate_normal(
            np.zeros(kh * kw), scale**2 * exponential_kernel(kh, kw, lengthscale)
        )
        expected += sum(
            mvn.logpdf(w[:, :, c, d].reshape(-1)) for c in range(cin) for d in range(cout)
        )
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_conv_correlated_1x1_kernel_is_gaussian():
    with jax.enable_x64(True):  # float64 weights (made inside), so rtol=1e-12 is meaningful
        net = {"kernel": random_net()["shortcut"]["kernel"]}
        correlated = jax.jit(priors.conv_correlated(weight_scale=WEIGHT_SCALE).log_prob)(net, {})
        independent = jax.jit(priors.gaussian(weight_scale=WEIGHT_SCALE).log_prob)(net, {})
    np.testing.assert_allclose(correlated, independent, rtol=1e-12)


ALL_PRIORS = {
    "gaussian": priors.gaussian(),
    "laplace": priors.laplace(),
    "student_t": priors.student_t(),
    "horseshoe": priors.horseshoe(),
    "horseshoe_per_weight": priors.horseshoe_per_weight(),
    "conv_correlated": priors.conv_correlated(),
}


@pytest.mark.parametrize("name", ALL_PRIORS)
def test_jit_and_grad(name):
    prior = ALL_PRIORS[name]
    net = jax.tree.map(lambda w: w.astype(jnp.float32), random_net())
    params = {"net": net, "prior": prior.init(net)}
    logprior = priors.logprior_fn(prior)
    value, grads = jax.jit(jax.value_and_grad(logprior))(params)
    assert value.shape == () and bool(jnp.isfinite(value))
    assert jax.tree.structure(grads) == jax.tree.structure(params)
    assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree.leaves(grads))


def test_gaussian_gradient_is_minus_precision_times_weight():
    net = jax.tree.map(lambda w: w.astype(jnp.float32), random_net())
    prior = priors.gaussian(weight_scale=WEIGHT_SCALE, bias_scale=BIAS_SCALE)
    grads = jax.jit(jax.grad(prior.log_prob))(net, {})
    for g, w in zip(jax.tree.leaves(grads), jax.tree.leaves(net), strict=True):
        np.testing.assert_allclose(g, -w / scale_of(w) ** 2, rtol=1e-5)


@pytest.mark.parametrize(
    "make",
    [
        lambda: priors.gaussian(weight_scale=0.0),
        lambda: priors.laplace(bias_scale=-1.0),
        lambda: priors.student_t(df=0.0),
        lambda: priors.horseshoe(hyperscale=0.0),
        lambda: priors.horseshoe_per_weight(local_scale=-1.0),
        lambda: priors.conv_correlated(lengthscale=0.0),
        lambda: priors.gaussian(conv_fan_in="in_channels"),
    ],
)
def test_bad_configs_raise(make):
    with pytest.raises(ValueError):
        make()
