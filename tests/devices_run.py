"""Runs for tests/chains/test_devices.py, each in its own process (the suite's process has one
device).

``python -m tests.devices_run CASE ARGS...``; the parent sets ``XLA_FLAGS`` (more CPU devices) and
reads what the case prints as its last line (JSON) or writes into its results folder.

* ``mesh OUT``: sharded and unsharded samples of :func:`sgrld.sample` (a Gaussian target and a
  tiny MLP, chains sharded and ``data_parallel = 2``, minibatches and full-batch epochs) and the
  mesh's bad inputs, as JSON.
* ``run OUT [PROCESS_ID NUM_PROCESSES PORT [DIE_AFTER_EPOCH]]``: ``sgrld run`` of a tiny digits
  run with its samples saved, in one process or as one process of a multi-process run (which
  may die after an epoch, to test what the others do); exits with the command's code.
"""

from __future__ import annotations

import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import sgrld
from sgrld.chains import engine


def tiny_mlp() -> tuple:
    """A 64-16-10 classifier on 256 random examples: (sampler, initial params, data)."""
    x = jax.random.normal(jax.random.key(1), (256, 64))
    y = jax.random.randint(jax.random.key(2), (256,), 0, 10)

    def loglik(p, batch):
        xb, yb = batch
        logits = jnp.tanh(xb @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return jnp.take_along_axis(jax.nn.log_softmax(logits), yb[:, None], 1)[:, 0]

    logprior = lambda p: -0.5 * sum(jnp.sum(v**2) for v in jax.tree.leaves(p))
    u = sgrld.potential(loglik, logprior, 256)
    k1, k2 = jax.random.split(jax.random.key(3))
    params = {
        "w1": jax.random.normal(k1, (64, 16)) / 8,
        "b1": jnp.zeros(16),
        "w2": jax.random.normal(k2, (16, 10)) / 4,
        "b2": jnp.zeros(10),
    }
    return (
        sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate=0.05, num_data=256),
        params,
        (x, y),
    )


def mlp_engine(mesh) -> tuple:
    """An engine of the tiny MLP on ``mesh`` and its initial state."""
    sampler, params, data = tiny_mlp()
    batches = engine.random_batches(sgrld.minibatch_fn(data, 32))
    return engine.Engine(sampler, batches, mesh=mesh), sampler.init(params)


def chunk(run: tuple, keys: jax.Array) -> np.ndarray:
    """20 steps of the chains of ``keys`` on ``run = mlp_engine(...)``, every step kept: the
    samples of w1."""
    e, state = run
    carry = e.init(state, num_chains=keys.shape[0])
    return np.asarray(e.run_chunk(carry, keys, None, start=0, num_steps=20)[1].params["w1"])


def full_batch(mesh, keys: jax.Array) -> np.ndarray:
    """w1 of the tiny MLP's chains of ``keys`` after 10 full-batch epochs (one step each) of
    :func:`sgrld.chains.engine.epochs` on ``mesh``."""
    sampler, params, data = tiny_mlp()
    e = engine.Engine(sampler, engine.epochs(256, 256), mesh=mesh)
    carry = e.init(sampler.init(params), num_chains=keys.shape[0])
    for epoch in range(10):
        carry = e.run_chunk(carry, keys, data, start=epoch, num_steps=1)[0]
    return np.asarray(carry.state.params["w1"])


def error(fn) -> str | None:
    try:
        fn()
    except ValueError as err:
        return str(err)
    return None


def mesh_case() -> dict:
    out = {}
    target = sgrld.samples.targets.anisotropic_gaussian()
    s = sgrld.sgrld(target.potential, sgrld.metrics.rmsprop(), learning_rate=0.1, num_data=1)
    kw = dict(num_samples=30, thin=3, burn_in=5, num_chains=16, init="shared")
    one = sgrld.sample(jax.random.key(0), s, target.init_params, target.batch_fn, **kw)
    eight = sgrld.sample(
        jax.random.key(0), s, target.init_params, target.batch_fn, mesh=sgrld.make_mesh(8), **kw
    )
    out["gaussian_identical"] = bool(np.array_equal(one.params, eight.params))
    out["gaussian_sharding"] = str(eight.params.sharding.spec)

    keys = jax.random.split(jax.random.key(0), 16)
    sharded = chunk(mlp_engine(sgrld.make_mesh(8)), keys)
    one = mlp_engine(None)
    per_device = np.concatenate([chunk(one, keys[2 * d : 2 * d + 2]) for d in range(8)], axis=1)
    whole = chunk(mlp_engine(None), keys)
    out["mlp_identical_per_device"] = bool(np.array_equal(sharded, per_device))
    out["mlp_vs_whole"] = float(np.abs(sharded - whole).max())
    chains_only = chunk(mlp_engine(sgrld.make_mesh(4, 1)), keys)
    split = chunk(mlp_engine(sgrld.make_mesh(8, data_parallel=2)), keys)
    out["data_parallel_max_abs"] = float(np.abs(split - chains_only).max())
    out["data_parallel_scale"] = float(np.abs(chains_only).max())

    whole = full_batch(None, keys)
    out["full_batch_chains_max_abs"] = float(
        np.abs(full_batch(sgrld.make_mesh(8), keys) - whole).max()
    )
    out["full_batch_data_parallel_max_abs"] = float(
        np.abs(full_batch(sgrld.make_mesh(8, data_parallel=2), keys) - whole).max()
    )
    out["full_batch_scale"] = float(np.abs(whole).max())

    out["too_many"] = error(lambda: sgrld.make_mesh(8, data_parallel=16))
    out["too_many_devices"] = error(lambda: sgrld.make_mesh(9))
    out["chains"] = error(lambda: chunk(mlp_engine(sgrld.make_mesh(8)), keys[:12]))
    sampler, params, data = tiny_mlp()
    out["batch"] = error(
        lambda: sgrld.sample(
            jax.random.key(0),
            sampler,
            params,
            sgrld.minibatch_fn(data, 31),
            num_samples=2,
            num_chains=4,
            mesh=sgrld.make_mesh(8, data_parallel=2),
        )
    )
    return out


RUN = [
    "data.name=digits",
    "data.train_size=128",
    "data.batch_size=32",
    "model.widths=[8]",
    "prior.kind=gaussian",
    "sampler.learning_rate=0.25",
    "run.epochs=2",
    "run.burn_in=0",
    "run.thin=2",
    "run.chains=4",
    "run.save_samples=true",
]
"""The tiny run: 4 steps an epoch, 2 epochs, a sample every 2 steps."""


def run_case(out: str, process: list[str]) -> int:
    """``sgrld run`` of :data:`RUN` into ``out``, as one process or one of several."""
    from sgrld_app import cli

    flags = [a for key in RUN for a in ("--set", key)] + ["--out", out, "--overwrite"]
    if process:
        pid, count, port = process[:3]
        flags += ["--coordinator", f"localhost:{port}", "--num-processes", count]
        flags += ["--process-id", pid, "--devices", "all", "--init-timeout", "60"]
        if len(process) > 3:
            _die_after(int(process[3]))
    return cli.main(["run", *flags])


def _die_after(epoch: int) -> None:
    """Make this process exit at once after ``epoch`` epochs (a test of a process that dies)."""
    from sgrld_app import epoch_writer

    call = epoch_writer.EpochWriter.__call__

    def dying(self, index, *args):
        stop = call(self, index, *args)
        if index + 1 == epoch:
            os._exit(3)
        return stop

    epoch_writer.EpochWriter.__call__ = dying


if __name__ == "__main__":
    case, folder, *rest = sys.argv[1:]
    if case == "mesh":
        print(json.dumps(mesh_case()), flush=True)
    else:
        sys.exit(run_case(folder, rest))
