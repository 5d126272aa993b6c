"""The benchmark problem: a 784-400-400-10 ReLU MLP (478,410 parameters) on an MNIST-shaped batch.

Shared by the step benchmarks (``step_throughput.py``, ``draws.py``, ``shampoo_gamma.py``): the
model, one random minibatch of 100, the potential with N = 50,000, each metric at the settings the
benchmarks time, and the timed candidates (:class:`timing.Candidate`) built on them: a sampler's
steps run ``n`` at a time inside one jitted ``jax.lax.scan`` (:class:`ScanChain`, how
``sgrld.sample`` and the runner sample) or in a Python loop over the jitted step (:func:`looped`),
the state carried from call to call, and the reference steps (:func:`reference_candidates`).

Samplers are built with ``sgrld.sgrld(potential, metric, learning_rate=..., num_data=...,
correction=...)``, keywords only, which every version of the library since the first accepts, so
that ``step_throughput.py --against`` can run the same code on an older tree.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import jax.numpy as jnp
from timing import Candidate

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
    # The full Γ's step; what the default share ĉ adds: right_by_default/share_cost.py.
    extra = {"correction": "hutchinson", "correction_scale": 1.0} if corrected else {}
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
    construction and is timed as ``compile_s``, unless ``warm`` is false: then :func:`prepare`
    compiles several chains at once. ``finite`` says whether every step so far gave
    ``info.is_finite``.
    """

    def __init__(self, sampler, params, batch, steps: int, seed: int = 2, warm: bool = True):
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
        self.compile_s = first_call_s(self) if warm else 0.0

    def compile(self) -> None:
        """Compile ahead of time (thread-safe: no computation runs); adds to ``compile_s``."""
        t0 = time.perf_counter()
        self.fn = self.fn.lower(self.state, self.keys, self.batch).compile()
        self.compile_s += time.perf_counter() - t0

    def __call__(self) -> None:
        self.state, ok = jax.block_until_ready(self.fn(self.state, self.keys, self.batch))
        self.finite &= bool(ok)


def prepare(chains: list[ScanChain], workers: int) -> None:
    """Compile chains made with ``warm=False``, ``workers`` at a time (threads), then run each
    once, one after the other; ``compile_s`` is the compile and that first call."""
    with ThreadPoolExecutor(max(1, workers)) as pool:
        list(pool.map(lambda c: c.compile(), chains))
    for c in chains:
        c.compile_s += first_call_s(c)


def first_call_s(fn) -> float:
    """Seconds of ``fn()``, blocking: the first call of a jitted function includes compilation."""
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def looped(name: str, fn, state, batch, chunk: int, threaded: bool = True, **info) -> Candidate:
    """``fn(key, state, batch)`` ``chunk`` times per call in a Python loop, keys pre-split.

    With ``threaded`` the result is the next state; otherwise the state stays and the last result
    is waited for.
    """
    keys = list(jax.random.split(jax.random.key(1), chunk))
    held = {"state": state}

    def run():
        s, out = held["state"], None
        for k in keys:
            out = fn(k, s, batch)
            s = out if threaded else s
        jax.block_until_ready(out)
        held["state"] = s

    def finite():
        return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(held["state"]))

    c = Candidate(name, run, chunk, finite=finite, **info)
    c.compile_s = first_call_s(lambda: fn(keys[0], state, batch))
    return c


def floor_candidate(params, batch, potential, chunk: int) -> Candidate:
    """The floor: value and gradient plus one normal of the full parameter size, all returned."""

    @jax.jit
    def floor(key, p, b):
        value, grad = jax.value_and_grad(potential)(p, b)
        return value, grad, jax.random.normal(key, (NUM_PARAMS,), jnp.float32)

    name = "floor: value_and_grad + normal"
    return looped(name, floor, params, batch, chunk, threaded=False, group="floor")


def reference_candidates(params, batch, potential, chunk: int) -> list[Candidate]:
    """The floor, the noiseless gradient step and SGLD written by hand, for scale."""
    lr = LEARNING_RATE["identity"]

    @jax.jit
    def grad_step(key, p, b):
        return jax.tree.map(lambda x, d: x - lr * d, p, jax.grad(potential)(p, b))

    @jax.jit
    def hand_sgld(key, p, b):
        g = jax.grad(potential)(p, b)
        leaves, treedef = jax.tree.flatten(p)
        keys = jax.random.split(key, len(leaves))
        xi = [jax.random.normal(k, x.shape, x.dtype) for k, x in zip(keys, leaves, strict=True)]
        s = math.sqrt(2.0 * lr / NUM_DATA)
        return jax.tree.map(lambda x, d, e: x - lr * d + s * e, p, g, treedef.unflatten(xi))

    return [
        floor_candidate(params, batch, potential, chunk),
        looped("ref: grad step p - lr*g", grad_step, params, batch, chunk, group="floor"),
        looped("ref: SGLD by hand", hand_sgld, params, batch, chunk, group="floor"),
    ]


def library_candidates(
    params,
    batch,
    potential,
    variants,
    chunk: int,
    scan=lambda metric, corrected: True,
    loop: bool = True,
    workers: int = 1,
) -> list[Candidate]:
    """Each ``(metric, corrected)`` step in a Python loop (unless ``loop`` is false), and in a
    scan where ``scan`` says so; with ``workers`` > 1 the scans are compiled that many at a
    time (:func:`prepare`)."""
    cands, deferred = [], []
    for metric, corrected in variants:
        sampler = make_sampler(potential, metric, corrected)
        label = LABELS[metric] + (" + Hutchinson" if corrected else "")
        info = {"metric": metric, "corrected": corrected}
        step = jax.jit(sampler.step)
        if loop:
            looped_step = lambda k, s, b, step=step: step(k, s, b)[0]
            state = sampler.init(params)
            cands.append(looped(label, looped_step, state, batch, chunk, group="loop", **info))
        if scan(metric, corrected):
            chain = ScanChain(sampler, params, batch, chunk, warm=workers <= 1)
            deferred += [] if workers <= 1 else [chain]
            cands.append(
                Candidate(
                    label + " [scan]",
                    chain,
                    chunk,
                    "scan",
                    finite=lambda c=chain: c.finite,
                    compile_s=chain.compile_s,
                    **info,
                )
            )
    if deferred:
        prepare(deferred, workers)
        for c in cands:
            c.compile_s = getattr(c.run, "compile_s", c.compile_s)
    return cands
