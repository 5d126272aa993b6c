"""The benchmark problem: a 784-400-400-10 ReLU MLP (478,410 parameters) on an MNIST-shaped batch.

Shared by the step benchmarks (``step_throughput.py``, ``draws.py``, ``shampoo_gamma.py``): the
model, one random minibatch of 100, the potential with N = 50,000, each metric at the settings the
benchmarks time, and a sampler's steps run ``n`` at a time inside one jitted ``jax.lax.scan`` (how
``sgrld.sample`` and the runner sample), with the state carried from call to call.

Samplers are built with ``sgrld.sgrld(potential, metric, learning_rate=..., num_data=...,
correction=...)``, keywords only, which every version of the library since the first accepts, so
that ``step_throughput.py --against`` can run the same code on an older tree.
"""

from __future__ import annotations

import math
import time
from typing import Any

import jax
import jax.numpy as jnp

import sgrld

LAYERS = (784, 400, 400, 10)
NUM_PARAMS = 478_410
BATCH = 100
NUM_DATA = 50_000
METRICS = ("identity", "rmsprop", "wenzel", "monge", "shampoo")
ADAPTIVE = ("rmsprop", "wenzel", "monge", "shampoo")
LABELS = {
    "identity": "Identity",
    "rmsprop": "RMSprop",
    "wenzel": "Wenzel",
    "monge": "Monge",
    "shampoo": "Shampoo",
}
LEARNING_RATE = {"identity": 1e-4, "rmsprop": 1e-5, "wenzel": 1e-4, "monge": 1e-4, "shampoo": 1e-5}
"""lr = h·N per metric. Timing does not depend on them; they keep the chains finite."""
SHAMPOO_EVERY = 100


def init_mlp(key: jax.Array) -> dict[str, jax.Array]:
    """He-scaled weights and N(0, 0.1²) biases of the MLP, as a flat dict of arrays.

    The biases are not zero: with zero biases, a ReLU unit dead on the whole batch has an exactly
    zero gradient, RMSprop's statistic is 0 there and its Hutchinson Γ is NaN.
    """
    params = {}
    keys = jax.random.split(key, 2 * (len(LAYERS) - 1))
    for i, (n_in, n_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:], strict=True)):
        w = jax.random.normal(keys[2 * i], (n_in, n_out), jnp.float32) * math.sqrt(2.0 / n_in)
        params[f"w{i}"] = w
        params[f"b{i}"] = 0.1 * jax.random.normal(keys[2 * i + 1], (n_out,), jnp.float32)
    return params


def apply_mlp(params: dict[str, jax.Array], x: jax.Array) -> jax.Array:
    """Logits of the ReLU MLP."""
    n = len(LAYERS) - 1
    for i in range(n):
        x = x @ params[f"w{i}"] + params[f"b{i}"]
        if i < n - 1:
            x = jax.nn.relu(x)
    return x


def loglik(params, batch):
    """Per-example categorical log-likelihood ``log softmax(f(x))[y]``."""
    x, y = batch
    logp = jax.nn.log_softmax(apply_mlp(params, x))
    return jnp.take_along_axis(logp, y[:, None], axis=1)[:, 0]


def logprior(params):
    """N(0, 1) on every parameter (up to a constant)."""
    return -0.5 * sum(jnp.sum(jnp.square(x)) for x in jax.tree.leaves(params))


def problem() -> tuple[dict[str, jax.Array], tuple[jax.Array, jax.Array], Any]:
    """The MLP's parameters, one MNIST-shaped random minibatch and the potential ``Û/N``."""
    k_param, k_x, k_y = jax.random.split(jax.random.key(0), 3)
    params = init_mlp(k_param)
    assert sum(x.size for x in jax.tree.leaves(params)) == NUM_PARAMS
    x = jax.random.uniform(k_x, (BATCH, LAYERS[0]), jnp.float32)
    y = jax.random.randint(k_y, (BATCH,), 0, LAYERS[-1], jnp.int32)
    return params, (x, y), sgrld.potential(loglik, logprior, NUM_DATA)


def make_metric(name: str, corrected: bool = False):
    """The metric of a row; corrected Shampoo uses eps 1e-4 (its Γ at 1e-8 overflows)."""
    shampoo_eps = 1e-4 if corrected else 1e-8
    return {
        "identity": sgrld.metrics.identity,
        "rmsprop": sgrld.metrics.rmsprop,
        "wenzel": lambda: sgrld.metrics.wenzel(update_every=500),
        "monge": lambda: sgrld.metrics.monge(alpha2=1.0, decay=0.9),
        "shampoo": lambda: sgrld.metrics.shampoo(
            eps=shampoo_eps, update_every=SHAMPOO_EVERY, block_size=128
        ),
    }[name]()


def make_sampler(potential, name: str, corrected: bool = False):
    """``sgrld.sgrld`` with the metric ``name``, uncorrected or with the Hutchinson Γ."""
    extra = {"correction": "hutchinson"} if corrected else {}
    return sgrld.sgrld(
        potential,
        make_metric(name, corrected),
        learning_rate=LEARNING_RATE[name],
        num_data=NUM_DATA,
        **extra,
    )


def over_chains(sampler, chains: int | None):
    """``sampler`` on ``chains`` vmapped chains sharing the minibatch, as the runner steps them.

    ``None`` leaves the sampler as it is (one chain, no vmap).
    """
    if chains is None:
        return sampler

    def init(params):
        return jax.vmap(sampler.init)(jax.tree.map(lambda x: jnp.stack([x] * chains), params))

    def step(key, state, batch):
        return jax.vmap(sampler.step, (0, 0, None))(jax.random.split(key, chains), state, batch)

    return sampler._replace(init=init, step=step)


class ScanChain:
    """A sampler's chain advanced ``steps`` steps per call, inside one jitted ``lax.scan``.

    The state is carried from call to call; the first call (compilation included) happens at
    construction and is timed as ``compile_s``. ``finite`` says whether every step so far gave
    ``info.is_finite``.
    """

    def __init__(self, sampler, params, batch, steps: int, seed: int = 2):
        def scan(state, keys, batch):
            def body(s, k):
                s, info = sampler.step(k, s, batch)
                return s, jnp.all(info.is_finite)

            state, ok = jax.lax.scan(body, state, keys)
            return state, jnp.all(ok)

        self.steps = steps
        self.fn = jax.jit(scan)
        self.batch = batch
        self.keys = jax.random.split(jax.random.key(seed), steps)
        self.state = sampler.init(params)
        self.finite = True
        t0 = time.perf_counter()
        self()
        self.compile_s = time.perf_counter() - t0

    def __call__(self) -> None:
        self.state, ok = jax.block_until_ready(self.fn(self.state, self.keys, self.batch))
        self.finite &= bool(ok)
