"""Online ensemble scoring of a run's samples: every kept sample predicts the evaluation sets and
is folded into the per-chain ensembles of :mod:`sgrld.evaluation`.

:func:`score_function` builds the jitted half of an epoch that follows the sampling chunk
(:class:`sgrld.chains.engine.Chunk`): one slot of the chunk's sample buffer after the other, all
chains at once, unused slots skipped, diverged chains' slots not added. The same predictions give
each kept draw's own mean log-likelihood on every evaluation set (``NAME_log_likelihood``, saved
with the samples by :func:`sgrld.samples.results.write_samples`): no second forward pass.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld import evaluation
from sgrld.chains.engine import Chunk
from sgrld.numerics.pytrees import PyTree

Kind = Literal["classification", "regression"]
ECE_BINS = 30
EVAL_BATCH = 2048


class Scores(NamedTuple):
    """The scoring state, every leaf with a leading chain axis.

    Attributes:
        ensembles: per evaluation set, the chain's online ensemble.
        samples: samples taken by the chain (before any divergence).
        curvature_sum: sum over the chain's samples of the mean input-space curvature.
    """

    ensembles: dict[str, Any]
    samples: jax.Array
    curvature_sum: jax.Array


class Ensemble(NamedTuple):
    """The operations of an ensemble kind (classification or regression)."""

    init: Callable[[int], Any]
    update: Callable[[Any, Any, jax.Array], Any]
    scores: Callable[[Any, jax.Array], dict[str, jax.Array]]
    merge: Callable[[Any], Any]
    log_likelihood: Callable[[Any, jax.Array], jax.Array]
    """One sample's mean log-likelihood ``(1/n) Σ_i log p(y_i | x_i, θ)`` from its predictions."""


def _classification_log_likelihood(logits: jax.Array, y: jax.Array) -> jax.Array:
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    return jnp.mean(jnp.take_along_axis(log_probs, y[:, None], axis=-1))


def _regression_log_likelihood(pred: tuple[jax.Array, jax.Array], y: jax.Array) -> jax.Array:
    mean, std = (a.astype(jnp.float32) for a in pred)
    return jnp.mean(jax.scipy.stats.norm.logpdf(y.astype(jnp.float32), mean, std))


def ensemble_ops(kind: Kind, num_classes: int | None) -> Ensemble:
    """The :class:`Ensemble` of ``kind``."""
    if kind == "classification":
        return Ensemble(
            lambda n: evaluation.init_classification(n, num_classes),
            lambda ens, logits, y: evaluation.update_classification(ens, logits),
            lambda ens, y: evaluation.classification_scores(ens, y, ECE_BINS),
            evaluation.merge_classification,
            _classification_log_likelihood,
        )
    return Ensemble(
        evaluation.init_regression,
        lambda ens, pred, y: evaluation.update_regression(ens, pred[0], pred[1], y),
        lambda ens, y: evaluation.regression_scores(ens, y),
        evaluation.merge_regression,
        _regression_log_likelihood,
    )


def init_scores(ensemble: Ensemble, eval_sets: dict[str, tuple[Any, Any]], k: int) -> Scores:
    """Empty ensembles for ``k`` chains and every evaluation set."""
    return Scores(
        ensembles={
            name: jax.vmap(lambda _, n=x.shape[0]: ensemble.init(n))(jnp.arange(k))
            for name, (x, _) in eval_sets.items()
        },
        samples=jnp.zeros((k,), jnp.int32),
        curvature_sum=jnp.zeros((k,), jnp.float32),
    )


def chunked(fn: Callable[[jax.Array], Any], x: jax.Array, size: int) -> Any:
    """``fn(x)`` evaluated on chunks of at most ``size`` rows (bounded activation memory)."""
    n = x.shape[0]
    if n <= size:
        return fn(x)
    chunks = math.ceil(n / size)
    padded = jnp.pad(x, [(0, chunks * size - n)] + [(0, 0)] * (x.ndim - 1))
    out = jax.lax.map(fn, padded.reshape(chunks, size, *x.shape[1:]))
    return jax.tree.map(lambda a: a.reshape(chunks * size, *a.shape[2:])[:n], out)


def point_log_likelihoods(kind: Kind, ens: Any, y: jax.Array) -> jax.Array:
    """``[n]``: each point's log predictive density under the ensemble ``ens`` (its samples'
    predictive averaged): ``log p̄(y_i | x_i)``, whose mean is the ensemble's log-likelihood.

    Example:
      >>> import jax.numpy as jnp
      >>> ops = ensemble_ops("classification", 2)
      >>> ens = ops.update(ops.init(2), jnp.log(jnp.array([[0.9, 0.1], [0.4, 0.6]])), None)
      >>> point_log_likelihoods("classification", ens, jnp.array([0, 0])).round(3).tolist()
      [-0.105, -0.916]
    """
    log_count = jnp.log(ens.count.astype(jnp.float32))
    if kind == "classification":
        labels = y[:, None].astype(jnp.int32)
        return jnp.take_along_axis(ens.log_prob_sum, labels, 1)[:, 0] - log_count
    return ens.log_density_sum - log_count


def per_point(kind: Kind, predict_fn: Callable) -> Callable[[PyTree, jax.Array], Any]:
    """``predict_fn`` with a regression's scalar standard deviation broadcast to every point."""
    if kind == "classification":
        return predict_fn

    def predict(params, x):
        mean, std = predict_fn(params, x)
        return mean, jnp.broadcast_to(jnp.asarray(std, mean.dtype), mean.shape)

    return predict


def nll_fn(kind: Kind, predict_fn: Callable) -> Callable[[PyTree, jax.Array, jax.Array], Any]:
    """``(params, x_i, y_i) -> −log p(y_i | x_i, θ)`` of one example, for the curvature."""

    def nll(params, x, y):
        out = predict_fn(params, x[None])
        if kind == "classification":
            return -jax.nn.log_softmax(out[0])[y]
        mean, std = out
        return -jax.scipy.stats.norm.logpdf(y, mean[0], std[0])

    return nll


def _select(mask: jax.Array, new: PyTree, old: PyTree) -> PyTree:
    return jax.tree.map(
        lambda n, o: jnp.where(mask.reshape(mask.shape + (1,) * (n.ndim - 1)), n, o), new, old
    )


def score_function(
    kind: Kind, predict_fn: Callable, ensemble: Ensemble, curvature: bool, curvature_points: int
) -> Callable[[Scores, Chunk, jax.Array, dict], tuple[Scores, dict, dict]]:
    """``(scores, chunk, curvature_keys, eval_sets) -> (scores, {set_score: value}, draws)``.

    Folds the chunk's valid samples into the ensembles and returns the ensemble scores so far;
    with ``curvature``, also the mean input-space curvature of each sample on the first
    ``curvature_points`` test points (:func:`sgrld.evaluation.curvature`). ``draws`` holds, for
    every evaluation set ``NAME``, ``NAME_log_likelihood`` ``[slots, chains]``: each buffered
    draw's own mean log-likelihood on that set (:attr:`Ensemble.log_likelihood`, in the units of
    the ensemble's scores; NaN in unused slots), from the predictions the ensemble is fed.
    """
    predict = per_point(kind, predict_fn)
    nll = nll_fn(kind, predict)

    def score_sample(params, ensembles, key, eval_sets):
        new, lls = {}, {}
        for name, (x, y) in eval_sets.items():
            pred = chunked(partial(predict, params), x, EVAL_BATCH)
            new[name] = ensemble.update(ensembles[name], pred, y)
            lls[f"{name}_log_likelihood"] = ensemble.log_likelihood(pred, y)
        if not curvature:
            return new, jnp.zeros((), jnp.float32), lls
        x, y = (a[:curvature_points] for a in eval_sets["test"])
        c = jnp.mean(evaluation.curvature(key, partial(nll, params), x, y))
        return new, c.astype(jnp.float32), lls

    def fold(curvature_keys, eval_sets, scores, slot):
        params, s, valid = slot
        keys = jax.vmap(jax.random.fold_in, (0, None))(curvature_keys, s)
        ensembles, c, lls = jax.vmap(score_sample, (0, 0, 0, None))(
            params, scores.ensembles, keys, eval_sets
        )
        return Scores(
            _select(valid, ensembles, scores.ensembles),
            scores.samples + valid.astype(jnp.int32),
            scores.curvature_sum + jnp.where(valid, c, 0.0),
        ), lls

    def score(scores, chunk, curvature_keys, eval_sets):
        unused = {
            f"{name}_log_likelihood": jnp.full(chunk.valid.shape[1:], jnp.nan, jnp.float32)
            for name in eval_sets
        }

        def body(scores, slot):  # the predicate is per slot, not per chain: a real branch
            run = partial(fold, curvature_keys, eval_sets)
            return jax.lax.cond(slot[1] >= 0, run, lambda c, _: (c, unused), scores, slot)

        scores, draws = jax.lax.scan(body, scores, (chunk.params, chunk.steps, chunk.valid))
        values = {
            f"{name}_{score}": value
            for name, (_, y) in eval_sets.items()
            for score, value in ensemble.scores(ensemble.merge(scores.ensembles[name]), y).items()
        }
        return scores, values, draws

    return score


@partial(jax.jit, static_argnums=(0, 3))
def _group_values(kind: Kind, ensembles: dict, labels: dict, groups: int) -> dict[str, jax.Array]:
    ops = ensemble_ops(kind, None)  # merge and scores need no class count

    def regroup(x):
        return x.reshape(groups, x.shape[0] // groups, *x.shape[1:])

    out = {}
    for name, ensemble in ensembles.items():
        pooled = jax.vmap(ops.merge)(jax.tree.map(regroup, ensemble))
        values = jax.vmap(ops.scores, (0, None))(pooled, labels[name])
        out |= {f"{name}_{score}": value for score, value in values.items()}
    return out


def group_scores(
    kind: Kind, scores: Scores, labels: dict[str, Any], groups: int
) -> dict[str, np.ndarray]:
    """The scores of the ensemble of each of ``groups`` groups of consecutive chains (each group's
    chains pooled as a run pools its chains), ``NAME_SCORE -> [groups]``, NaN for a group without
    samples; ``"samples"``: each group's sample count. The replicates of a sweep
    (:mod:`sgrld_app.sweep`) are such groups.

    Args:
        kind: the ensembles' kind.
        scores: the scoring state of ``groups · k`` chains.
        labels: per evaluation set of ``scores.ensembles``, its targets.
        groups: the number of groups; it must divide the chains.

    Returns:
        ``NAME_SCORE -> float64 array [groups]`` and ``"samples" -> int array [groups]``.

    Example:
        >>> ens = ensemble_ops("classification", 2)
        >>> s = init_scores(ens, {"test": (jnp.zeros((2, 1)), None)}, k=2)
        >>> logits = jnp.log(jnp.array([[[0.9, 0.1], [0.2, 0.8]], [[0.4, 0.6], [0.2, 0.8]]]))
        >>> s = s._replace(ensembles={"test": jax.vmap(ens.update, (0, 0, None))(
        ...     s.ensembles["test"], logits, None)}, samples=jnp.array([1, 1]))
        >>> out = group_scores("classification", s, {"test": jnp.array([0, 1])}, groups=2)
        >>> out["samples"].tolist(), out["test_accuracy"].tolist()
        ([1, 1], [1.0, 0.5])
    """
    samples = np.asarray(scores.samples).reshape(groups, -1).sum(axis=1)
    values = _group_values(kind, scores.ensembles, {n: labels[n] for n in scores.ensembles}, groups)
    return {"samples": samples} | {
        name: np.where(samples > 0, np.asarray(value, np.float64), np.nan)
        for name, value in values.items()
    }
