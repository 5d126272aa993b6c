"""Tests of sgrld.evaluation against hand-worked answers and numpy/scipy references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import log_softmax, logsumexp
from scipy.stats import norm

from sgrld.evaluation import (
    ClassificationEnsemble,
    classification_scores,
    curvature,
    ensemble_log_likelihood,
    expected_calibration_error,
    init_classification,
    init_regression,
    merge_classification,
    merge_regression,
    regression_predictive,
    regression_scores,
    update_classification,
    update_regression,
)

# Tests run each function under jax.jit: one compilation per test instead of one per eager op.
scores_jit = jax.jit(classification_scores, static_argnames="num_bins")
ece_jit = jax.jit(expected_calibration_error, static_argnames="num_bins")


@jax.jit
def accumulate(logits):
    """Classification ensemble of the samples stacked along axis 0, by lax.scan."""

    def body(state, sample_logits):
        return update_classification(state, sample_logits), None

    state = init_classification(logits.shape[1], logits.shape[2])
    return jax.lax.scan(body, state, logits)[0]


def ensemble_of_probs(probs):
    """Ensemble whose samples have the given probabilities (logits = log probs)."""
    return accumulate(jnp.log(jnp.asarray(probs, jnp.float32)))


# --- ECE --------------------------------------------------------------------------------------


def test_ece_hand_worked_with_points_on_bin_edges():
    # B = 4: bins (0, .25], (.25, .5], (.5, .75], (.75, 1]; 0.5 and 0.75 are exact in float32.
    probs = [
        [0.5, 0.3, 0.2],  # conf 0.5 on an edge -> bin 1, correct
        [0.4, 0.35, 0.25],  # conf 0.4 -> bin 1, wrong
        [0.1, 0.8, 0.1],  # conf 0.8 -> bin 3, correct
        [0.7, 0.2, 0.1],  # conf 0.7 -> bin 2, wrong
        [0.25, 0.75, 0.0],  # conf 0.75 on an edge -> bin 2, correct
    ]
    labels = [0, 1, 1, 2, 1]
    bin1 = 2 / 5 * abs(1 / 2 - (0.5 + 0.4) / 2)
    bin2 = 2 / 5 * abs(1 / 2 - (0.7 + 0.75) / 2)
    bin3 = 1 / 5 * abs(1 - 0.8)
    expected = bin1 + bin2 + bin3  # 0.02 + 0.09 + 0.04
    assert expected == pytest.approx(0.15)
    ece = ece_jit(jnp.array(probs), jnp.array(labels), num_bins=4)
    assert float(ece) == pytest.approx(expected, abs=1e-6)
    # Edges belonging to the upper bin instead would give 0.13 (0.5) or 0.25 (0.75).


def test_ece_confidence_zero_is_in_first_bin_and_one_in_last():
    # B = 4. Bin 0 holds conf 0 and 0.2 (both correct): 2/4 |1 - 0.1| = 0.45.
    # Bin 3 holds conf 1.0 (wrong) and 0.8 (correct): 2/4 |1/2 - 0.9| = 0.2.
    # Losing the conf-0 point would give 0.4; losing the conf-1 point, 0.5.
    probs = jnp.array([[0.0, 0.0], [0.2, 0.1], [1.0, 0.0], [0.8, 0.2]])
    ece = ece_jit(probs, jnp.array([0, 0, 1, 0]), num_bins=4)
    assert float(ece) == pytest.approx(0.45 + 0.2, abs=1e-6)


def test_ece_edge_at_float32_rounded_tenth():
    # float32(0.1) equals the float32 edge 1/10, so it lies in bin 0 with the other point.
    probs = jnp.array([[0.1] * 10, [0.05] * 10])
    ece = ece_jit(probs, jnp.array([0, 1]), num_bins=10)
    assert float(ece) == pytest.approx(abs(1 / 2 - 0.075), abs=1e-6)


# --- log-likelihood and accuracy ----------------------------------------------------------------


def test_log_likelihood_is_log_of_mean_probability_not_mean_of_logs():
    # Two samples, two points, two classes; labels [0, 1].
    probs = np.array(
        [
            [[0.9, 0.1], [0.3, 0.7]],
            [[0.1, 0.9], [0.3, 0.7]],
        ]
    )
    labels = np.array([0, 1])
    expected = (np.log((0.9 + 0.1) / 2) + np.log((0.7 + 0.7) / 2)) / 2
    mean_of_logs = (np.log(0.9) + np.log(0.1) + 2 * np.log(0.7)) / 4
    assert abs(expected - mean_of_logs) > 0.2  # the two definitions really differ here

    state = ensemble_of_probs(probs)
    scores = scores_jit(state, jnp.array(labels))
    assert float(scores["log_likelihood"]) == pytest.approx(expected, abs=1e-6)

    per_sample = np.log(probs[:, [0, 1], labels])  # [S, n] log p(y_i | x_i, theta_s)
    assert float(jax.jit(ensemble_log_likelihood)(per_sample)) == pytest.approx(expected, abs=1e-6)


def test_accuracy_uses_argmax_of_mean_probability():
    # Sample 1 votes for class 0, sample 2 for class 2; the mean (.275, .45, .275) picks class 1.
    probs = [[[0.5, 0.45, 0.05]], [[0.05, 0.45, 0.5]]]
    state = ensemble_of_probs(probs)
    assert float(scores_jit(state, jnp.array([1]))["accuracy"]) == 1.0
    assert float(scores_jit(state, jnp.array([0]))["accuracy"]) == 0.0


# --- online accumulation, scan, vmap and merge --------------------------------------------------


def batch_scores(logits, labels, num_bins):
    """Reference scores from all samples at once, in float64 numpy."""
    log_probs = log_softmax(np.asarray(logits, np.float64), axis=-1)
    log_mean = logsumexp(log_probs, axis=0) - np.log(len(log_probs))
    mean_probs = np.exp(log_mean)
    confidence = mean_probs.max(axis=-1)
    correct = mean_probs.argmax(axis=-1) == labels
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    bins = np.clip(np.digitize(confidence, edges[1:], right=True), 0, num_bins - 1)
    ece = sum(
        np.sum(bins == b)
        / len(labels)
        * abs(correct[bins == b].mean() - confidence[bins == b].mean())
        for b in range(num_bins)
        if np.any(bins == b)
    )
    return {
        "log_likelihood": np.mean(log_mean[np.arange(len(labels)), labels]),
        "accuracy": np.mean(correct),
        "ece": ece,
        "confidence": np.mean(confidence),
    }


def test_online_accumulation_equals_batch_computation():
    num_samples, num_points, num_classes = 7, 50, 4
    rng = np.random.default_rng(0)
    logits = 2.0 * rng.normal(size=(num_samples, num_points, num_classes)).astype(np.float32)
    labels = rng.integers(0, num_classes, size=num_points)

    state = accumulate(logits)
    assert state.count.dtype == jnp.int32 and int(state.count) == num_samples
    assert state.log_prob_sum.dtype == jnp.float32

    expected = batch_scores(np.asarray(logits), np.asarray(labels), num_bins=10)
    scores = scores_jit(state, labels, num_bins=10)
    for name in ("log_likelihood", "accuracy", "ece", "confidence"):
        assert float(scores[name]) == pytest.approx(expected[name], abs=1e-5), name

    per_sample = log_softmax(logits, axis=-1)[:, np.arange(num_points), labels]
    assert float(jax.jit(ensemble_log_likelihood)(per_sample)) == pytest.approx(
        expected["log_likelihood"], abs=1e-5
    )


def test_update_keeps_state_type_and_casts_logits():
    state = init_classification(3, 2)
    new = jax.jit(update_classification)(state, jnp.zeros((3, 2), jnp.bfloat16))
    assert jax.tree.structure(new) == jax.tree.structure(state)
    assert [(a.shape, a.dtype) for a in new] == [(a.shape, a.dtype) for a in state]
    assert isinstance(new, ClassificationEnsemble)


def test_vmap_over_chains_then_merge_equals_flat_ensemble():
    num_chains, num_samples, num_points, num_classes = 3, 7, 20, 5
    shape = (num_chains, num_samples, num_points, num_classes)
    logits = np.random.default_rng(1).normal(size=shape).astype(np.float32)
    labels = np.arange(num_points) % num_classes

    chains = jax.vmap(accumulate)(logits)
    assert chains.count.shape == (num_chains,)
    merged = jax.jit(merge_classification)(chains)
    flat = accumulate(logits.reshape(num_chains * num_samples, num_points, num_classes))

    assert int(merged.count) == int(flat.count) == 21
    np.testing.assert_allclose(merged.log_prob_sum, flat.log_prob_sum, rtol=1e-5, atol=1e-5)
    merged_scores = scores_jit(merged, labels)
    flat_scores = scores_jit(flat, labels)
    for name in ("log_likelihood", "accuracy", "ece"):
        assert float(merged_scores[name]) == pytest.approx(float(flat_scores[name]), abs=1e-5)

    per_chain = jax.vmap(scores_jit, (0, None))(chains, labels)
    assert per_chain["log_likelihood"].shape == (num_chains,)
    last_chain = scores_jit(jax.tree.map(lambda a: a[-1], chains), labels)
    for name in ("log_likelihood", "accuracy", "ece"):
        assert float(per_chain[name][-1]) == pytest.approx(float(last_chain[name]), abs=1e-6)


def test_merge_keeps_empty_chains_empty():
    chains = jax.tree.map(lambda a: jnp.stack([a, a]), init_classification(2, 3))
    merged = jax.jit(merge_classification)(chains)
    assert int(merged.count) == 0
    assert bool(jnp.all(merged.log_prob_sum == -jnp.inf))


# --- regression -------------------------------------------------------------------------------
# All regression tests use S = 6 samples at n = 8 points, so accumulate_regression compiles once.
NUM_SAMPLES, NUM_POINTS = 6, 8


def regression_samples(seed):
    """Predictive means [S, n], standard deviations [S, n] and targets [n], in float64."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(NUM_SAMPLES, NUM_POINTS))
    stds = rng.uniform(0.5, 1.5, size=(NUM_SAMPLES, NUM_POINTS))
    return means, stds, rng.normal(size=NUM_POINTS)


@jax.jit
def accumulate_regression(means, stds, y):
    def body(state, sample):
        return update_regression(state, *sample, y), None

    return jax.lax.scan(body, init_regression(y.shape[0]), (means, stds))[0]


def mixture_nll(means, stds, y):
    log_mixture = logsumexp(norm.logpdf(y, means, stds), axis=0) - np.log(len(means))
    return -np.mean(log_mixture)


def test_regression_scores_match_scipy():
    means, stds, y = regression_samples(0)
    state = accumulate_regression(means, stds, y)
    assert state.count.dtype == jnp.int32 and int(state.count) == NUM_SAMPLES

    scores = jax.jit(regression_scores)(state, y)
    rmse = np.sqrt(np.mean((means.mean(axis=0) - y) ** 2))
    assert float(scores["rmse"]) == pytest.approx(rmse, rel=1e-5)
    assert float(scores["nll"]) == pytest.approx(mixture_nll(means, stds, y), rel=1e-5)
    # The mixture NLL is not the mean of the per-sample NLLs.
    mean_sample_nll = -np.mean(norm.logpdf(y, means, stds))
    assert abs(mean_sample_nll - mixture_nll(means, stds, y)) > 1e-2

    mean, variance = jax.jit(regression_predictive)(state)
    np.testing.assert_allclose(mean, means.mean(axis=0), rtol=1e-5, atol=1e-6)
    expected_variance = np.mean(stds**2, axis=0) + np.var(means, axis=0)
    np.testing.assert_allclose(variance, expected_variance, rtol=1e-5, atol=1e-6)


def test_regression_y_scale_reports_raw_units():
    means, stds, y = regression_samples(1)
    shift, scale = 3.0, 2.5
    raw_means, raw_stds, raw_y = means * scale + shift, stds * scale, y * scale + shift

    scores = jax.jit(regression_scores)(accumulate_regression(means, stds, y), y, y_scale=scale)
    rmse = np.sqrt(np.mean((raw_means.mean(axis=0) - raw_y) ** 2))
    assert float(scores["rmse"]) == pytest.approx(rmse, rel=1e-5)
    assert float(scores["nll"]) == pytest.approx(mixture_nll(raw_means, raw_stds, raw_y), rel=1e-5)


def test_regression_vmap_then_merge_equals_flat():
    means, stds, y = regression_samples(2)
    stacked = [a.reshape(3, 2, NUM_POINTS) for a in (means, stds)]
    chains = jax.vmap(accumulate_regression, (0, 0, None))(*stacked, y)
    merged, flat = jax.jit(merge_regression)(chains), accumulate_regression(means, stds, y)
    assert int(merged.count) == int(flat.count) == NUM_SAMPLES
    for merged_leaf, flat_leaf in zip(merged, flat, strict=True):
        np.testing.assert_allclose(merged_leaf, flat_leaf, rtol=1e-5, atol=1e-6)


# --- curvature --------------------------------------------------------------------------------


def jit_curvature(key, loss_fn, x, y, num_iterations=20):
    """curvature under jax.jit (loss_fn and num_iterations are closed over)."""
    return jax.jit(lambda k, x, y: curvature(k, loss_fn, x, y, num_iterations))(key, x, y)


def test_curvature_of_quadratic_matches_spectrum():
    # A = Q diag(-3, 2, 1, 0.5) Q^T: sigma_max = 3 comes from a negative eigenvalue.
    rng = np.random.default_rng(3)
    q, _ = np.linalg.qr(rng.normal(size=(4, 4)))
    a = q @ np.diag([-3.0, 2.0, 1.0, 0.5]) @ q.T
    b = np.array([0.3, -1.0, 0.5, 2.0])
    x = rng.normal(size=(5, 4))

    def loss_fn(x_i, y_i):
        return 0.5 * x_i @ jnp.asarray(a, jnp.float32) @ x_i + jnp.asarray(b, jnp.float32) @ x_i

    c = jit_curvature(jax.random.key(0), loss_fn, jnp.asarray(x, jnp.float32), jnp.zeros(5))
    expected = 3.0 / (np.linalg.norm(x @ a + b, axis=1) + 1e-6)  # gradient A x + b
    np.testing.assert_allclose(c, expected, rtol=1e-4)


def test_curvature_is_per_point_with_multidimensional_inputs():
    # Point i: loss 0.5 sum(w_i x^2) + sum(x) on a [2, 3] input, so H_i = diag(w_i) differs
    # per point, with the largest |w| at a different position and of either sign.
    rng = np.random.default_rng(4)
    spectrum = np.array([-4.0, 2.0, 1.0, 0.5, 0.2, 0.1])
    weights = np.stack([rng.permutation(spectrum * (1 + i) * (-1) ** i) for i in range(6)])
    weights = weights.reshape(6, 2, 3)
    x = rng.normal(size=(6, 2, 3))

    def loss_fn(x_i, w_i):
        return 0.5 * jnp.sum(w_i * x_i**2) + jnp.sum(x_i)

    c = jit_curvature(
        jax.random.key(1), loss_fn, jnp.asarray(x, jnp.float32), jnp.asarray(weights, jnp.float32)
    )
    grad_norm = np.linalg.norm((weights * x + 1.0).reshape(6, -1), axis=1)
    expected = 4.0 * np.arange(1, 7) / (grad_norm + 1e-6)
    np.testing.assert_allclose(c, expected, rtol=1e-4)


def test_curvature_of_softmax_nll_matches_closed_form():
    # loss = -log softmax(W^T x)_y: grad = W (p - e_y), Hessian = W (diag p - p p^T) W^T.
    rng = np.random.default_rng(5)
    w = rng.normal(size=(3, 4))
    x = rng.normal(size=(5, 3))
    labels = np.array([0, 1, 2, 3, 0])

    def loss_fn(x_i, y_i):
        return -jax.nn.log_softmax(x_i @ jnp.asarray(w, jnp.float32))[y_i]

    c = jit_curvature(
        jax.random.key(2), loss_fn, jnp.asarray(x, jnp.float32), labels, num_iterations=100
    )
    expected = []
    for x_i, y_i in zip(x, labels, strict=True):
        p = np.exp(log_softmax(x_i @ w))
        hessian = w @ (np.diag(p) - np.outer(p, p)) @ w.T
        eigenvalues = np.sort(np.abs(np.linalg.eigvalsh(hessian)))
        assert eigenvalues[-2] < 0.9 * eigenvalues[-1]  # 100 steps converge to < 1e-9
        expected.append(eigenvalues[-1] / (np.linalg.norm(w @ (p - np.eye(4)[y_i])) + 1e-6))
    np.testing.assert_allclose(c, expected, rtol=1e-4)


def test_curvature_of_linear_loss_is_zero_not_nan():
    ones = jnp.ones((2, 3))
    c = jit_curvature(jax.random.key(3), lambda x_i, y_i: jnp.sum(y_i * x_i), ones, ones)
    np.testing.assert_array_equal(c, np.zeros(2))
