"""One run of Marceau-Caron & Ollivier's (2017) MNIST experiment: a method (Table 1's rows) at one
step size η, trained on the experiment runner and scored on the validation, test and training sets.

Used by ``sgrld reproduce natural-langevin`` (:mod:`sgrld_reproductions.natural_langevin`, which
describes the experiment). The network is the 784-400-400-10 ReLU MLP of :class:`sgrld.bnn.MLP`
initialised with N(0, 1/fan-in) weights and zero biases; the prior is N(0, σ² = 0.1) on every
parameter. An SGLD method gives two predictors: the **ensemble** (the predictive average of the
kept samples, scored online by :mod:`sgrld_app.runner`) and the **posterior mean** (the network at
the mean of the kept samples, accumulated along the chain by :func:`averaged`).
"""

from __future__ import annotations

import math
import time
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld import bnn, evaluation
from sgrld.bnn.priors.prior import gaussian_leaf
from sgrld.chains.engine import is_kept
from sgrld.data import DataError
from sgrld.numerics.pytrees import PyTree
from sgrld_app import api as app
from sgrld_app.api import ConfigError, finite
from sgrld_reproductions.natural_langevin import baselines
from sgrld_reproductions.scaffolding import RunSpec, halving

SIGMA2 = 0.1
"""The prior variance of every parameter (Table 1's σ²)."""
WIDTHS = (400, 400)
BATCH_SIZE = 100
EPS = 1e-4
"""ε of the Fisher metrics (and RMSProp), the authors'."""
GAMMA_KICK_LIMIT = 1.0
"""The Γ rows' ``gamma_kick_limit``: Γ̂'s kick tamed to one noise sd per coordinate. Untamed at the
authors' ε, Γ ∝ J′/(J + ε)² is stiff where the Fisher J is nearly 0: Euler's step drifted the
weights outward (mean θ²/σ² of the large kernels 1.34-1.46 after 3,000 updates against 1.00
without Γ; 1.005-1.013 tamed) and the Γ rows ended 1.0-3.4 points below the uncorrected ones
(RESULTS §29)."""
GRID_EUCLIDEAN = (0.001, 0.01, 0.1, 1.0)
GRID_OTHERS = (0.0001, 0.001, 0.01, 0.1)
Scores = dict[str, dict[str, float | None]]
"""``{set: {"nll": mean −log p(y|x), "accuracy": %}}`` of one predictor."""


class Method(NamedTuple):
    """One method of Table 1.

    Attributes:
      key: its name on the command line.
      name: its name in the table.
      kind: ``"sgld"`` (a metric and the prior, T = 1), ``"sgd"`` (identity, no prior, T = 0) or
        ``"dropout"`` (:mod:`~sgrld_reproductions.natural_langevin.baselines`).
      grid: the step sizes η tried.
      quick_lr: the one η of ``--quick``.
      metric: ``partial`` of a :mod:`sgrld.metrics` factory with its hyperparameters.
      correction: the Γ correction of the sampler.
      gamma_kick_limit: the sampler's ``gamma_kick_limit`` (``None``: Γ̂ untamed).
    """

    key: str
    name: str
    kind: str
    grid: tuple[float, ...]
    quick_lr: float
    metric: partial | None = None
    correction: str = "none"
    gamma_kick_limit: float | None = None

    def hyperparameters(self) -> dict[str, Any]:
        """The method's settings, for the JSON file."""
        metric = {} if self.metric is None else {"metric": self.metric.func.__name__}
        keywords = {} if self.metric is None else self.metric.keywords
        correction = {"correction": self.correction}
        if self.gamma_kick_limit is not None:
            correction["gamma_kick_limit"] = self.gamma_kick_limit
        return {"kind": self.kind, "grid": self.grid, **metric, **keywords, **correction}

    def with_eps(self, eps: float) -> Method:
        """The method with its metric's ε replaced (benchmarks' variants)."""
        return self._replace(metric=partial(self.metric, eps=eps))


M = sgrld.metrics
_DECAY = {"eps": EPS, "decay": "inverse_sqrt"}
METHODS = (
    Method("sgd", "SGD", "sgd", GRID_EUCLIDEAN, 0.1, partial(M.identity)),
    Method("dropout", "Dropout", "dropout", GRID_EUCLIDEAN, 0.1),
    Method("euclidean", "Euclidean", "sgld", GRID_EUCLIDEAN, 0.1, partial(M.identity)),
    Method("rmsprop", "RMSProp", "sgld", GRID_OTHERS, 0.001, partial(M.rmsprop, **_DECAY)),
    Method("dop", "DOP", "sgld", GRID_OTHERS, 0.001, partial(M.fisher_diag, **_DECAY)),
    Method("qdop", "QDOP", "sgld", GRID_OTHERS, 0.001, partial(M.fisher_qdiag, **_DECAY)),
    Method(
        "dop-gamma", "DOP + Γ", "sgld", GRID_OTHERS, 0.001, partial(M.fisher_diag, **_DECAY),
        "hutchinson", GAMMA_KICK_LIMIT,
    ),
    Method(
        "qdop-gamma", "QDOP + Γ", "sgld", GRID_OTHERS, 0.001, partial(M.fisher_qdiag, **_DECAY),
        "hutchinson", GAMMA_KICK_LIMIT,
    ),
)  # fmt: skip
"""Table 1's methods, plus the Γ-corrected Fisher metrics (no paper has them)."""


class Plan(NamedTuple):
    """How long every run trains and which of its states it keeps.

    Attributes:
      epochs: passes over the training set (``steps`` updates each).
      burn_in: updates before the first kept sample.
      thin: a sample every ``thin`` updates.
      seed: seed of the initialisation, shuffling and noise.
    """

    epochs: int
    burn_in: int
    thin: int
    seed: int


class Data(NamedTuple):
    """The training set and the sets scored: ``val``, ``test`` and ``train`` (a subset)."""

    train: tuple[np.ndarray, np.ndarray]
    eval_sets: dict[str, tuple[np.ndarray, np.ndarray]]


def load_data(
    data_dir: str | None, validation_size: int, train_size: int | None, train_eval_size: int
) -> Data:
    """MNIST as the paper: pixels in [0, 1]; the official training set less ``validation_size``
    held-out images (:func:`sgrld.data.load_dataset`; 10 000, leaving N = 50 000) and the test set.

    Args:
      data_dir: the folder with the four IDX files (None: the default places).
      validation_size: training images held out for validation.
      train_size: train on the first ``train_size`` training images only (None: all).
      train_eval_size: the training-set scores use its first ``train_eval_size`` images.

    Returns:
      The :class:`Data`; an empty evaluation set is left out.

    Raises:
      sgrld_app.api.ConfigError: for a ``validation_size`` the files do not allow.
      sgrld.data.DataError: for missing or corrupt files.
    """
    if train_eval_size < 0:
        raise ConfigError(f"--train-eval-size must be >= 0, got {train_eval_size}")
    try:
        ds = sgrld.data.load_dataset("mnist", data_dir, validation_size=validation_size)
    except DataError:
        raise
    except ValueError as err:
        raise ConfigError(f"--validation-size: {err}") from None
    x, y = ds.x_train[:train_size], ds.y_train[:train_size]
    sets = {"val": (ds.x_val, ds.y_val), "test": (ds.x_test, ds.y_test)}
    sets["train"] = (x[:train_eval_size], y[:train_eval_size])
    return Data((x, y), {name: s for name, s in sets.items() if len(s[0])})


def log_prior(params: PyTree) -> jax.Array:
    """``log N(θ; 0, σ² I)`` with σ² = :data:`SIGMA2` over every parameter of ``params["net"]``."""
    return sum(gaussian_leaf(w, math.sqrt(SIGMA2)) for w in jax.tree.leaves(params["net"]))


class AveragedState(NamedTuple):
    """A chain's state with the running mean of its kept samples.

    Attributes:
      inner: the sampler's state (with ``step`` and ``params``).
      mean: the mean θ̄ of the samples kept so far (0 before the first).
      count: how many samples it averages.
    """

    inner: Any
    mean: PyTree
    count: jax.Array

    @property
    def params(self) -> PyTree:
        """The current sample θ_t, where the engine reads it."""
        return self.inner.params


def averaged(sampler: sgrld.Sampler, burn_in: int, thin: int) -> sgrld.Sampler:
    """``sampler`` that also keeps the mean θ̄ of the states the runner keeps.

    ``θ̄ ← θ̄ + (θ_{t+1} − θ̄)/n`` after the update from global step ``t`` whenever that state is
    kept (:func:`sgrld_app.api.sample_steps`), ``n`` the samples so far: the posterior-mean
    network of Marceau-Caron & Ollivier (2017, Alg. 1), averaged over the ensemble's samples.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> walk = sgrld.Sampler(lambda p: sgrld.SGRLDState(jnp.int32(0), p, None),
      ...     lambda k, s, b: (s._replace(step=s.step + 1, params=s.params + 1.0), None))
      >>> s = averaged(walk, burn_in=2, thin=2)
      >>> state = s.init(jnp.float32(0.0))
      >>> for _ in range(7):
      ...     state, _ = s.step(None, state, None)
      >>> state.count.item(), state.mean.item()  # kept after updates 4 and 6
      (2, 5.0)
    """
    first = app.first_kept_window(burn_in, thin)

    def init(params):
        zeros = jax.tree.map(jnp.zeros_like, params)
        return AveragedState(sampler.init(params), zeros, jnp.zeros((), jnp.int32))

    def step(key, state, batch):
        inner, info = sampler.step(key, state.inner, batch)
        kept = is_kept(state.inner.step, first, thin)
        count = state.count + kept.astype(jnp.int32)
        weight = jnp.where(kept, 1.0 / jnp.maximum(count, 1), 0.0)
        mean = jax.tree.map(
            lambda m, p: m + weight.astype(m.dtype) * (p - m), state.mean, inner.params
        )
        return AveragedState(inner, mean, count), info

    return sgrld.Sampler(init, step)


def model() -> bnn.MLP:
    """The 784-400-400-10 ReLU network."""
    return bnn.MLP(features=WIDTHS, num_outputs=10)


def init_net(key: jax.Array, num_inputs: int) -> PyTree:
    """N(0, 1/fan-in) weights and zero biases: the He-normal initialisation divided by √2."""
    net = bnn.init_params(model(), key, (1, num_inputs))
    return jax.tree.map(lambda w: w / math.sqrt(2.0) if w.ndim > 1 else w, net)


def sampler(method: Method, learning_rate: float, num_data: int, **options) -> sgrld.Sampler:
    """The sampler of an SGLD or SGD method at step size η (halved every 10 000 updates).

    SGLD: the potential ``mean NLL − log p(θ)/N``, the prior outside the metric's statistic (as
    the authors' code), T = 1. SGD: the mean NLL alone, the identity metric, T = 0. ``options``
    replace :func:`sgrld.sgrld`'s keyword arguments (benchmarks' variants, e.g. ``adapt_until``).
    """
    sgd = method.kind == "sgd"
    loglik = bnn.likelihoods.categorical(bnn.apply_fn(model()))
    potential = sgrld.potential(loglik, None if sgd else log_prior, num_data)
    settings = dict(
        learning_rate=halving(learning_rate),
        num_data=num_data,
        temperature=0.0 if sgd else 1.0,
        correction=method.correction,
        correction_scale="auto",  # the library's default share of Γ (issue 36)
        gamma_kick_limit=method.gamma_kick_limit,
        prior_in_metric=False,
        adapt_until=None,  # the paper's setting: the metric adapts throughout
    )
    return sgrld.sgrld(potential, method.metric(), **{**settings, **options})


def network_scores(predict, net: PyTree, eval_sets: dict[str, tuple]) -> Scores:
    """The NLL and accuracy (%) of one network on each set."""

    @jax.jit
    def scores(net, x, y):
        logits = app.chunked(partial(predict, net), x, app.EVAL_BATCH)
        state = evaluation.update_classification(
            evaluation.init_classification(x.shape[0], logits.shape[-1]), logits
        )
        return evaluation.classification_scores(state, y)

    out = {name: scores(net, jnp.asarray(x), jnp.asarray(y)) for name, (x, y) in eval_sets.items()}
    return {name: _scores(s["log_likelihood"], s["accuracy"]) for name, s in out.items()}


def _scores(log_likelihood: Any, accuracy: Any) -> dict[str, float | None]:
    nll, acc = finite(-float(log_likelihood)), finite(100.0 * float(accuracy))
    return {"nll": nll, "accuracy": acc}


def _ensemble_scores(result: app.Result, sets) -> Scores:
    """The runner's ensemble scores after its last epoch (None without records or samples)."""
    final = result.records[-1] if result.records else {}
    nan = float("nan")
    return {
        name: _scores(final.get(f"{name}_log_likelihood", nan), final.get(f"{name}_accuracy", nan))
        for name in sets
    }


def _run_chain(method, learning_rate, data: Data, plan: Plan, spec: RunSpec) -> dict[str, Any]:
    """An SGLD or SGD method on the runner: its status and predictors' scores."""
    num_data, num_inputs = data.train[0].shape[0], data.train[0].shape[1]
    steps = plan.epochs * (num_data // BATCH_SIZE)
    # SGD keeps only its last state; SGLD keeps every thin-th state after burn_in.
    burn_in, thin = (0, steps) if method.kind == "sgd" else (plan.burn_in, plan.thin)
    chain = averaged(sampler(method, learning_rate, num_data), burn_in, thin)
    apply = bnn.apply_fn(model())
    experiment = app.Experiment(
        sampler=chain,
        init_fn=lambda key: {"net": init_net(key, num_inputs)},
        predict_fn=lambda params, x: apply(params["net"], x),
        train=data.train,
        eval_sets=data.eval_sets,
        meta={
            "method": method.name,
            "learning_rate": learning_rate,
            "num_data": num_data,
            **method.hyperparameters(),
        },
    )
    schedule = app.RunPlan(plan.epochs, BATCH_SIZE, burn_in, thin, 1, plan.seed)
    result = spec.run(experiment, schedule, label=f"{method.name} η={learning_rate:g}")
    ensemble = _ensemble_scores(result, data.eval_sets)
    views = {"final": ensemble} if method.kind == "sgd" else {"ensemble": ensemble}
    if method.kind == "sgld" and result.state is not None and int(result.state.count[0]) > 0:
        mean = jax.tree.map(lambda a: a[0], result.state.mean)
        views["postmean"] = network_scores(experiment.predict_fn, mean, data.eval_sets)
    return {"status": result.status, "message": result.message, "scores": views}


def _run_dropout(learning_rate, data: Data, plan: Plan) -> dict[str, Any]:
    """The dropout baseline (plain SGD with dropout on the hidden layers)."""
    key = jax.random.key(plan.seed)
    try:
        net, ok = baselines.train_dropout(
            jax.random.fold_in(key, 1),
            init_net(key, data.train[0].shape[1]),
            data.train,
            learning_rate=halving(learning_rate),
            epochs=plan.epochs,
            batch_size=BATCH_SIZE,
            widths=WIDTHS,
        )
    except KeyboardInterrupt:
        return {"status": "interrupted", "message": "interrupted", "scores": {}}
    if not ok:
        return {"status": "diverged", "message": "NaN/inf in the parameters", "scores": {}}
    scores = network_scores(bnn.apply_fn(model()), net, data.eval_sets)
    return {"status": "completed", "message": "completed", "scores": {"final": scores}}


def run(
    method: Method, learning_rate: float, data: Data, plan: Plan, spec: RunSpec
) -> dict[str, Any]:
    """Train ``method`` at step size η and score its predictors. An SGLD or SGD run keeps its
    files as ``spec`` says (with ``spec.resume``, it continues the run in ``spec.out``: the same
    method, η, hyperparameters and training set, else ``CheckpointError``); dropout, which writes
    no folder, runs again.

    Returns:
      A JSON-ready dict: ``method``, ``learning_rate``, ``status`` (``"completed"``,
      ``"diverged"`` or ``"interrupted"``), ``message``, ``seconds`` (wall time, compilation
      included) and ``scores``, by predictor (``"ensemble"`` and ``"postmean"`` for SGLD,
      ``"final"`` for SGD and dropout) the :data:`Scores` on ``val``, ``test`` and ``train``.
    """
    start = time.perf_counter()
    if method.kind == "dropout":
        outcome = _run_dropout(learning_rate, data, plan)
    else:
        outcome = _run_chain(method, learning_rate, data, plan, spec)
    seconds = time.perf_counter() - start
    return {"method": method.name, "learning_rate": learning_rate, **outcome, "seconds": seconds}
