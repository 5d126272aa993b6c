"""Shared test utilities: dense matrices of metric operators, small parameter trees."""

from __future__ import annotations

import os
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

import sgrld
from sgrld.parts.gradients import gradient_fn

METRICS = {
    "identity": lambda: sgrld.metrics.identity(),
    "rmsprop": lambda: sgrld.metrics.rmsprop(decay=0.9, eps=1e-3),
    "wenzel": lambda: sgrld.metrics.wenzel(decay=0.9, eps=1e-3, update_every=2),
    "monge": lambda: sgrld.metrics.monge(alpha2=0.7, decay=0.8),
    "shampoo": lambda: sgrld.metrics.shampoo(decay=0.9, eps=1e-3, update_every=1, block_size=3),
}


def small_params():
    """A pytree with a matrix, a vector and a scalar leaf (D = 6 + 2 + 1 = 9)."""
    return {
        "w": jnp.zeros((2, 3), jnp.float32),
        "b": jnp.zeros((2,), jnp.float32),
        "s": jnp.zeros((), jnp.float32),
    }


def dense(op, params):
    """Dense matrix of a linear operator on pytrees shaped like ``params`` (flattened order)."""
    flat, unravel = ravel_pytree(params)
    cols = jax.jit(jax.vmap(lambda e: ravel_pytree(op(unravel(e)))[0]))(
        jnp.eye(flat.size, dtype=flat.dtype)
    )
    return np.asarray(cols, np.float64).T


def random_tree(key, params, scale=1.0):
    flat, unravel = ravel_pytree(params)
    return unravel(scale * jax.random.normal(key, flat.shape, flat.dtype))


def adapted_state(metric, params, num_updates=5, seed=0, scale=1.0):
    """A metric state after ``num_updates`` random gradients, and the gradients used."""
    state = metric.init(params)
    update = jax.jit(metric.update)  # one compilation, not dispatched op by op
    grads = []
    for k in jax.random.split(jax.random.key(seed), num_updates):
        g = random_tree(k, params, scale)
        grads.append(g)
        state = update(state, g)
    return state, grads


def write_uci(folder, table, features, target, splits):
    """Write a UCI regression set in the published layout (whitespace text, 0-based indices).

    Args:
      folder: where to write (created).
      table: rows of numbers (``data.txt``).
      features: feature columns; target: the target column.
      splits: ``[(train_rows, test_rows), ...]``, one pair per split.
    """
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lines = lambda values: "".join(f"{v}\n" for v in values)
    (folder / "data.txt").write_text("".join(" ".join(map(str, row)) + "\n" for row in table))
    (folder / "index_features.txt").write_text(lines(features))
    (folder / "index_target.txt").write_text(lines([target]))
    (folder / "n_splits.txt").write_text(f"{len(splits)}\n")
    for k, (train, test) in enumerate(splits):
        (folder / f"index_train_{k}.txt").write_text(lines(train))
        (folder / f"index_test_{k}.txt").write_text(lines(test))
    return folder


def assert_vmap_equals_single_chains(sampler, params, batch, steps=2):
    """``steps`` steps of three chains (``params`` shifted by 0, 0.1, −0.2) under ``jax.vmap``
    equal each chain stepped alone (the whole state, to float tolerance)."""
    states = jax.vmap(sampler.init)(
        jax.tree.map(lambda x: jnp.stack([x, x + 0.1, x - 0.2]), params)
    )
    keys = jax.random.split(jax.random.key(0), 3)
    step = jax.jit(sampler.step)
    for _ in range(steps):
        batched, _ = jax.vmap(step, in_axes=(0, 0, None))(keys, states, batch)
        for c in range(3):
            single, _ = step(keys[c], jax.tree.map(lambda x, c=c: x[c], states), batch)
            for a, b in zip(jax.tree.leaves(single), jax.tree.leaves(batched), strict=True):
                np.testing.assert_allclose(a, b[c], rtol=1e-5, atol=1e-6)
        states = batched


def cpu_env(devices: int | None = None) -> dict[str, str]:
    """The suite's environment (its compilation cache and XLA flags, see conftest.py) on the CPU,
    with ``devices`` CPU devices when given (XLA takes the last of repeated flags), for the
    subprocesses tests start."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if devices is not None:
        flags = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={devices}"
        env["XLA_FLAGS"] = flags.strip()
    return env


def digits_toml(batch_size: int = 64, width: int = 8, learning_rate: float | None = 0.1, **run):
    """A TOML configuration of a small run on the digits data: an MLP of one hidden layer of
    ``width``, a Gaussian prior, ``[run]`` keys as given (``save_samples=True`` and the like)."""
    lines = ["[data]", 'name = "digits"', f"batch_size = {batch_size}", "", "[model]"]
    lines += [f"widths = [{width}]", "", "[prior]", 'kind = "gaussian"', ""]
    if learning_rate is not None:
        lines += ["[sampler]", f"learning_rate = {learning_rate}", ""]
    lines += [
        "[run]",
        *(f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in run.items()),
    ]
    return "\n" + "\n".join(lines) + "\n"


def exact_gamma_against_jacfwd(metric, potential, params, batch, statistic_at):
    """``(expected, got)``: Γ as ``jax.jacfwd`` of the dense G⁻¹(θ) whose statistic is
    ``statistic_at(params)`` (an independent reference), and Γ of ``correction.exact`` on the
    sampler's own gradient and observation, both flat."""
    flat, unravel = ravel_pytree(params)

    def reference_inv(flat):
        p = unravel(flat)
        state = metric.update(metric.init(p), statistic_at(p))
        eye = jnp.eye(flat.size)
        return jax.vmap(lambda e: ravel_pytree(metric.inv(state, unravel(e)))[0])(eye).T

    expected = jnp.einsum("ijj->i", jax.jit(jax.jacfwd(reference_inv))(flat))
    grad_fn = partial(gradient_fn(potential, True, metric), batch=batch, key=None)
    correction = sgrld.parts.correction.exact(warmup=0)
    estimate = jax.jit(lambda p, state: correction.estimate(None, grad_fn, p, metric, state))
    return expected, ravel_pytree(estimate(params, metric.init(params)).gamma)[0]
