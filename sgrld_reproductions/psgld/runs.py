"""The runs of ``sgrld reproduce psgld`` (Li, Chen, Carlson & Carin, AAAI 2016): SGLD and pSGLD on
Bayesian logistic regression, the 2-D Gaussian and MNIST networks, with the correct noise or the
authors' code's.

Used by :mod:`sgrld_reproductions.psgld`, which describes the experiments and the settings chosen.
The two samplers, their noises and measures are in :mod:`sgrld_reproductions.psgld.samplers`.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld.bnn.priors.prior import gaussian_leaf
from sgrld.data import DATA_DIR_ENV, MissingDataError, train_validation_split
from sgrld.data.libsvm import load_libsvm
from sgrld.data.registry import DEFAULT_DATA_DIR
from sgrld.evaluation import ensemble_log_likelihood
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.guarantee import guarantee
from sgrld_app.api import build_experiment, finite, load_config, run_plan_of
from sgrld_reproductions.psgld.samplers import (  # DECAY, ... also read as runs.DECAY, ...
    DECAY,  # noqa: F401
    LAMBDA,  # noqa: F401
    METHODS,  # noqa: F401
    NOISES,  # noqa: F401
    Method,
    min_ess,
    sampler,
    step_seconds,
    temperature,  # noqa: F401
)
from sgrld_reproductions.scaffolding import RunSpec, data_overrides, halving, sample_timed

# --- Bayesian logistic regression ----------------------------------------------------------------


class BLRSettings(NamedTuple):
    """One data set's logistic regression run (all chains alike).

    Attributes:
      folder, train_file, test_file: the LIBSVM files (``test_file`` None: a held-out split).
      num_features: d.
      standardize: standardise the features on the training rows.
      prior_var: σ² of the prior N(0, σ²I) on the weights and the intercept.
      batch_size, steps, burn_in, thin: minibatch size B and the chain's length and thinning.
      learning_rate: ``lr = h·N`` of both samplers.
      chains: independent chains (vmapped), each scored on its own.
      paper_error: the paper's test error (%), or None.
    """

    folder: str
    train_file: str
    test_file: str | None
    num_features: int
    standardize: bool
    prior_var: float
    batch_size: int
    steps: int
    burn_in: int
    thin: int
    learning_rate: float
    chains: int
    paper_error: float | None = None


AUSTRALIAN_TEST = 138
"""australian: rows held out as the test set (20 %, seeded)."""
AUSTRALIAN_TRAIN = 690 - AUSTRALIAN_TEST
BLR = {
    "a9a": BLRSettings(
        "libsvm_a9a", "a9a", "a9a.t", 123, False, 10.0, 50, 15_000, 500, 50, 0.05, 10, 14.85
    ),
    "australian": BLRSettings(
        "libsvm_australian", "australian", None, 14, True, 100.0, 5, 5_000, 1_000, 1,
        AUSTRALIAN_TRAIN * 1e-4 / 2, 50,
    ),
}  # fmt: skip
"""The paper's BLR problems (the settings its text leaves out: :mod:`sgrld_reproductions.psgld`)."""


def libsvm_file(data_dir: str | Path | None, folder: str, name: str) -> Path:
    """``<base>/<folder>/<name>`` or ``<base>/<name>``, the base folder being ``data_dir``, else
    ``$SGRLD_DATA_DIR``, else ``~/.cache/sgrld/data`` (as :mod:`sgrld.data.registry`).

    Raises:
      sgrld.data.MissingDataError: naming both places, if the file is in neither.
    """
    base = Path(data_dir or os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR).expanduser()
    for path in (base / folder / name, base / name):
        if path.is_file():
            return path
    raise MissingDataError(
        f"LIBSVM file {name!r} not found in {base / folder} or {base}; pass --data-dir with the "
        f"folder holding {folder}/{name} (e.g. the LIBSVM binary data sets)"
    )


class BLRData(NamedTuple):
    """Features ``[n, d]`` (float32) and labels in {0, 1} (float32) of both sets."""

    train: tuple[np.ndarray, np.ndarray]
    test: tuple[np.ndarray, np.ndarray]


def load_blr(settings: BLRSettings, data_dir: str | Path | None, seed: int = 0) -> BLRData:
    """The training and test sets of a BLR problem, labels ±1 mapped to {0, 1}; without a test
    file, :data:`AUSTRALIAN_TEST` seeded rows held out; features standardised if the settings say
    so (on the training rows' mean and std)."""
    read = lambda name: load_libsvm(
        libsvm_file(data_dir, settings.folder, name), settings.num_features
    )
    x, y = read(settings.train_file)
    if settings.test_file is None:
        x, y, xt, yt = train_validation_split(x, y, min(AUSTRALIAN_TEST, len(x) - 1), seed)
    else:
        xt, yt = read(settings.test_file)
    if settings.standardize:
        mean, std = x.mean(axis=0), x.std(axis=0)
        std = np.where(std > 0, std, 1.0)
        x, xt = (x - mean) / std, (xt - mean) / std
    label = lambda v: (v > 0).astype(np.float32)
    return BLRData((x.astype(np.float32), label(y)), (xt.astype(np.float32), label(yt)))


def blr_loglik(params: PyTree, batch: tuple[jax.Array, jax.Array]) -> jax.Array:
    """``log p(y|x, θ) = y·z − softplus(z)``, ``z = xᵀw + b``, per example.

    Example:
      >>> p = {"w": jnp.zeros(2), "b": jnp.zeros(())}
      >>> blr_loglik(p, (jnp.ones((3, 2)), jnp.ones(3))).round(4).tolist()  # log ½
      [-0.6931, -0.6931, -0.6931]
    """
    x, y = batch
    z = x @ params["w"] + params["b"]
    return y * z - jax.nn.softplus(z)


def blr_scores(samples: PyTree, test: tuple[np.ndarray, np.ndarray]) -> tuple[float, float]:
    """Test error (%) of the averaged predictive ``p̄ = mean_s σ(z_s)`` and its log-likelihood
    (mean over points of ``log mean_s p(y|x, θ_s)``) for one chain's samples ``[S, ...]``."""
    x, y = (jnp.asarray(a) for a in test)
    loglik = jax.vmap(lambda p: blr_loglik(p, (x, y)))(samples)
    z = jax.vmap(lambda p: x @ p["w"] + p["b"])(samples)
    p_bar = jnp.mean(jax.nn.sigmoid(z), axis=0)
    error = 100.0 * jnp.mean((p_bar > 0.5) != (y > 0.5))
    return float(error), float(ensemble_log_likelihood(loglik))


def blr_run(
    key: jax.Array, method: Method, noise: str, settings: BLRSettings, data: BLRData
) -> dict[str, Any]:
    """``settings.chains`` chains of ``method`` from θ = 0, scored chain by chain.

    Returns:
      A JSON-ready dict: ``status`` (``"completed"``, or ``"diverged"`` if a chain produced a
      NaN/inf: its samples before it are scored), per-chain ``errors`` (%) and
      ``log_likelihoods``, ``step_seconds`` (one chain, :func:`step_seconds`), ``min_ess_per_s``
      (the smallest bulk ESS over θ's coordinates per chain, per second of one chain's sampling),
      ``posterior_std`` (the median over θ's coordinates of their std across the chains' last
      draws: chains from the same start spread as the posterior when they mix, and √N times less
      under the bug) and ``seconds`` (the whole run, compilation included).
    """
    x, y = (jnp.asarray(a) for a in data.train)
    n, d = x.shape
    log_prior = lambda p: -0.5 * (jnp.sum(p["w"] ** 2) + p["b"] ** 2) / settings.prior_var
    u = sgrld.potential(blr_loglik, log_prior, n)
    chain = sampler(method, u, settings.learning_rate, noise, n)
    init = {"w": jnp.zeros(d, jnp.float32), "b": jnp.zeros((), jnp.float32)}
    batch_fn = sgrld.minibatch_fn((x, y), settings.batch_size)
    sample_key, time_key = jax.random.split(key)
    kept = (settings.steps - settings.burn_in) // settings.thin
    out, seconds = sample_timed(
        sample_key, chain, init, batch_fn, num_samples=kept, thin=settings.thin,
        burn_in=settings.burn_in, num_chains=settings.chains, init="shared",  # as published
    )  # fmt: skip
    per_step = step_seconds(time_key, chain, init, batch_fn, min(settings.steps, 2_000))
    theta = np.concatenate(
        [np.asarray(out.params["w"]), np.asarray(out.params["b"])[..., None]], -1
    )
    valid = np.all(np.isfinite(theta), axis=(1, 2))
    scores = [
        blr_scores(jax.tree.map(lambda a, c=c: a[c], out.params), data.test)
        for c in range(settings.chains)
        if valid[c]
    ]
    row = {"status": "completed" if valid.all() else "diverged", "seconds": seconds}
    row["errors"] = [finite(e) for e, _ in scores]
    row["log_likelihoods"] = [finite(ll) for _, ll in scores]
    row["step_seconds"] = per_step
    good = theta[valid]
    ess = min_ess(good) / len(good) if len(good) else math.nan
    row["min_ess_per_s"] = finite(ess / (settings.steps * per_step))
    spread = good[:, -1].std(axis=0) if len(good) > 1 else np.full(d + 1, np.nan)
    row["posterior_std"] = finite(float(np.median(spread)))
    return row


# --- The 2-D Gaussian ----------------------------------------------------------------------------

GAUSSIAN_COV = ((0.16, 0.0), (0.0, 1.0))
"""The target N(0, diag(0.16, 1)) of the paper's simulation."""


class GaussianSettings(NamedTuple):
    """The simulation: ``chains`` chains of ``draws`` kept steps (thin 1) after ``burn_in``."""

    chains: int
    draws: int
    burn_in: int


def gaussian_run(
    key: jax.Array, method: Method, step_size: float, settings: GaussianSettings
) -> tuple[dict[str, Any], np.ndarray]:
    """SGLD or pSGLD on the 2-D Gaussian with exact gradients, at the paper's step size ε (the
    variance of its noise, so ``lr = h = ε/2`` with N = 1; the bug's 1/N is then 1).

    Returns:
      ``(row, draws)``: the row (``status``; ``cov_error``, ‖Σ̂ − Σ‖_F/‖Σ‖_F of the pooled
      draws; ``iat``, the draws per effective sample of the worse coordinate; ``min_ess_per_s``
      as :func:`blr_run`'s; ``step_seconds``; ``seconds``) and the draws ``[chains, draws, 2]``.
    """
    target = sgrld.samples.targets.gaussian([0.0, 0.0], GAUSSIAN_COV)
    chain = sampler(method, target.potential, step_size / 2, "correct", 1)
    sample_key, time_key, init_key = jax.random.split(key, 3)
    init = target.sample(init_key, 1)[0]  # V₀ = 0 and ∇U(mean) = 0 would give G⁻¹ = 1/λ
    out, seconds = sample_timed(
        sample_key, chain, init, target.batch_fn, num_samples=settings.draws,
        burn_in=settings.burn_in, num_chains=settings.chains, init="shared",  # as published
    )  # fmt: skip
    draws = np.asarray(out.params, np.float64)
    per_step = step_seconds(time_key, chain, init, target.batch_fn, 2_000)
    if not np.all(np.isfinite(draws)):
        return {"status": "diverged", "seconds": seconds, "step_seconds": per_step}, draws
    cov = np.asarray(GAUSSIAN_COV)
    pooled = draws.reshape(-1, 2)
    ess = min_ess(draws)
    row = {
        "status": "completed",
        "seconds": seconds,
        "step_seconds": per_step,
        "cov_error": float(np.linalg.norm(np.cov(pooled.T) - cov) / np.linalg.norm(cov)),
        "iat": float(len(pooled) / ess),
        "min_ess_per_s": float(
            ess / settings.chains / ((settings.draws + settings.burn_in) * per_step)
        ),
    }
    return row, draws


# --- MNIST networks ------------------------------------------------------------------------------


class Network(NamedTuple):
    """An MNIST network of the paper: ``kind`` ``"mlp"`` (hidden ``widths``) or ``"cnn"`` (Li et
    al.'s CNN, :class:`sgrld.bnn.CNN`, ``widths`` its dense layers)."""

    label: str
    kind: str
    widths: tuple[int, ...]


class NetworkPlan(NamedTuple):
    """How a network run trains.

    Attributes:
      epochs: passes over the training images.
      halve_every: epochs between halvings of the step size (the paper's L).
      burn_in, thin: iterations before the first sample, iterations per sample.
      train_size: the first this many training images (None: all 60,000).
      data_dir: the base data folder (None: the default).
      seed: seed of the initialisation, shuffling and noise.
    """

    epochs: int
    halve_every: int
    burn_in: int
    thin: int
    train_size: int | None
    data_dir: str | None
    seed: int


def iid_log_prior(prior_var: float, params: PyTree) -> jax.Array:
    """``log N(θ; 0, σ²I)`` over every leaf of ``params["net"]`` (the paper's prior).

    Example:
      >>> p = {"net": {"kernel": jnp.zeros((2, 2)), "bias": jnp.zeros(2)}}
      >>> round(float(iid_log_prior(1.0, p)), 4)  # 6 · log N(0; 0, 1)
      -5.5136
    """
    scale = math.sqrt(prior_var)
    return sum(gaussian_leaf(w, scale) for w in jax.tree.leaves(params["net"]))


def network_run(
    method: Method,
    network: Network,
    prior_var: float,
    noise: str,
    learning_rate: float,
    plan: NetworkPlan,
    spec: RunSpec,
) -> dict[str, Any]:
    """Train ``network`` with ``method`` on MNIST (:func:`sgrld_app.api.build_experiment`,
    minibatches of 100, no validation split), the step size halved every ``plan.halve_every``
    epochs, and score the online ensemble (:mod:`sgrld_app.runner`, its files kept as ``spec``
    says) on the 10,000 test images. With ``noise="none"`` (the optimiser) the "ensemble" is the
    last iterate alone, as the paper's optimiser rows. With ``spec.resume``, the run in
    ``spec.out`` continues from its newest checkpoint: it must have the same configuration,
    method, noise, prior variance and step size, else ``CheckpointError``.

    Returns:
      A JSON-ready dict: ``status`` (``"completed"``, ``"diverged"``, ``"interrupted"``),
      ``message``, ``error`` (test error %), ``log_likelihood`` (mean test log-likelihood of the
      ensemble), ``samples``, ``step_seconds`` (median sampling time of an epoch per step) and
      ``seconds`` (the whole run).
    """
    start = time.perf_counter()
    overrides = [
        "data.name=mnist", "data.validation_size=0", "data.batch_size=100",
        f"model.kind={network.kind}", f"model.widths={list(network.widths)}",
        f"run.epochs={plan.epochs}", f"run.burn_in={plan.burn_in}", f"run.thin={plan.thin}",
        f"run.seed={plan.seed}",
    ]  # fmt: skip
    config = load_config(None, overrides + data_overrides(plan.data_dir, plan.train_size))

    def build(potential: sgrld.Potential, n: int) -> sgrld.Sampler:
        every = plan.halve_every * (n // 100)
        u = sgrld.potential(potential.loglik_fn, partial(iid_log_prior, prior_var), n)
        return sampler(method, u, halving(learning_rate, every), noise, n)

    experiment = build_experiment(config, sampler=build)
    sampler_meta = {"method": method.key, "noise": noise, "prior_var": prior_var}
    sampler_meta |= {"learning_rate": learning_rate, "halve_every": plan.halve_every}
    about = guarantee(experiment.sampler.adaptation)  # the paper's sampler, not the config's
    meta = {**experiment.meta, "sampler": sampler_meta, "guarantee": about}
    experiment = dataclasses.replace(experiment, meta=meta)
    schedule = run_plan_of(config, len(experiment.train[1]))
    if noise == "none":  # keep the state after the last step alone
        total = plan.epochs * (len(experiment.train[1]) // schedule.batch_size)
        schedule = dataclasses.replace(schedule, burn_in=0, thin=total)
    label = f"{network.label} {method.label(noise)} σ²={prior_var:g} {noise}"
    result = spec.run(experiment, schedule, label)
    final = result.records[-1] if result.records else {}
    steps = result.summary["steps_per_epoch"]
    per_epoch = result.summary["sampler_seconds_per_epoch"]
    accuracy = final.get("test_accuracy", math.nan)
    return {
        "status": result.status,
        "message": result.message,
        "error": finite(100.0 * (1.0 - accuracy)),
        "log_likelihood": finite(final.get("test_log_likelihood", math.nan)),
        "samples": final.get("samples", 0),
        "step_seconds": None if per_epoch is None else per_epoch / steps,
        "seconds": time.perf_counter() - start,
    }
