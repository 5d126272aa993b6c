"""Chain-steps per second against the number of chains: sgrld's samplers beside BlackJAX's.

The MNIST MLP 784-400-400-10 (``sgrld.bnn.MLP``, Flax Dense layers, so that the Fisher metrics take
their per-example fast path; the weights of :func:`mlp.init_mlp`, 478,410 parameters), an N(0, 1)
prior, minibatches of 100 drawn with replacement from the 60,000 MNIST training images
(``--data-dir``, default ``../shared/data`` beside the repository; random data of that shape if
the files are not there), N = the images used. For each number of chains K, the candidates:

* ``sgrld <sampler>`` for each of ``--samplers``: the chain engine
  (:class:`sgrld.chains.engine.Engine`, as ``sgrld.sample`` and the runner run it): ``--steps``
  steps per jitted chunk, a ``jax.lax.scan`` over steps of the ``jax.vmap``-ed step, each chain
  drawing its own minibatch from its own key, the chunk's last state kept as a sample, its
  diagnostics summarised. Samplers: ``sgrld.sgrld`` with the metrics Identity, RMSprop, Monge,
  Shampoo, DOP and QDOP (``sgrld.metrics.fisher_diag`` / ``fisher_qdiag``), and ``sgrld.sghmc`` (one
  gradient a step);
* ``sgrld <sampler>, bare scan`` for each of ``--bare-samplers`` (default Identity): the same step
  in the plain scan the BlackJAX rows use (no engine: no sample buffer, no summaries, no divergence
  bookkeeping), to show what the engine costs beside the step (issue 50: its step loop is the
  bare step, its bookkeeping at every ``thin``-th step); beside them (``--no-bare`` drops these
  three) ``sgrld identity, bare scan + info``, that scan folding each step's ``info`` into the
  engine's summaries and divergence marks (what computing the diagnostics costs, without the
  engine's sample buffer), and ``sgrld identity, info as before``, the engine row with the
  diagnostics of
  :func:`legacy_step_info` (a reduction per leaf for each check, which XLA fused with the
  update; RESULTS §23) and ``sgrld identity, rbg keys``, the engine row with chain keys of
  JAX's ``rbg`` PRNG (``jax.random.key(seed, impl="rbg")``) instead of the default threefry;
* ``blackjax sgld``: ``blackjax.sgld`` with ``blackjax.sgmcmc.gradients.grad_estimator`` of the
  same log-likelihood and prior, vmapped over chains the same way, ``--steps`` steps per jitted
  ``jax.lax.scan``;
* ``blackjax sghmc``: ``blackjax.sghmc`` with ``num_integration_steps = L``
  (``--sghmc-integration-steps``, default 10), ``--steps / L`` kernel calls per scan, so that
  every candidate evaluates ``--steps`` gradients per call: SGHMC is compared per gradient
  evaluation. BlackJAX's kernel redraws the momentum at every call and returns only the position,
  so with L = 1 the gradient feeds only the discarded momentum and XLA removes it (the step
  becomes a random walk). With ``--check-gradient`` (the default) the compiled programs of
  BlackJAX's SGLD, of its SGHMC at L and of its SGHMC at L = 1 are searched for matrix products
  (HLO ``dot`` ops and cuBLAS calls): the SGHMC row counts only if its program has at least as
  many as SGLD's.

The BlackJAX rows are skipped if ``import blackjax`` fails. Each rate record carries
``kernels``, the fusions, library calls and conditionals of its compiled program (on a GPU, about
the kernels a step launches: what bounds one chain's step); ``--hlo-dir`` writes each program's
compiled text there at the first number of chains.

Timing (``timing.py``): each candidate is compiled ahead of time (``--compile-workers`` at a
time), run once untimed, then R interleaved rounds of one call per candidate; reported are the
medians over rounds of chain-steps per second (K x gradient evaluations / seconds), ratios paired
by round (sgrld Identity / BlackJAX SGLD, sgrld SGHMC / BlackJAX SGHMC, each metric / Identity),
and the scaling of each candidate against its own smallest K. A candidate whose untimed call took
longer than ``--max-call-s`` is not run again: its row is that one call (marked); one whose
call at the previous number of chains, scaled by the ratio of chains, would take longer than
``--skip-call-s`` is skipped (said so). ``--round-seconds`` lowers the rounds (to 2 at least)
where R rounds would take longer, by the untimed calls.
``--json PATH`` appends one JSON object a line as each K finishes (the driver
``benchmarks/gpu/run.py`` reads them).

Usage::

    python benchmarks/chain_throughput.py                      # chains 1 8 64, all samplers
    python benchmarks/chain_throughput.py --chains 1 8 64 512 --steps 200 --rounds 5
    python benchmarks/chain_throughput.py --samplers identity --no-bare --chains 1 64
    python benchmarks/chain_throughput.py --quick              # smoke run (tiny)
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import re
import statistics
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jax
import jax.numpy as jnp
import mlp
import numpy as np
from timing import Spread, environment, fmt_ratio, fmt_spread, interleave, paired, spread, table

import sgrld
from sgrld.chains import engine, summaries

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
"""``../shared/data`` of the repository, where the MNIST files may be."""
SAMPLERS = ("identity", "rmsprop", "monge", "shampoo", "dop", "qdop", "sghmc")
LABELS = {
    "identity": "Identity",
    "rmsprop": "RMSprop",
    "monge": "Monge",
    "shampoo": "Shampoo",
    "dop": "DOP",
    "qdop": "QDOP",
    "sghmc": "SGHMC",
}
LEARNING_RATE = {**mlp.LEARNING_RATE, "dop": 1e-3, "qdop": 1e-3, "sghmc": 1e-3}
"""lr = h·N per sampler (``mlp.py``'s, ``fisher_step.py``'s, ``momentum_step.py``'s). Timing does
not depend on them; they keep the chains finite."""
BLACKJAX_LR = mlp.LEARNING_RATE["identity"]
MATMUL = re.compile(r"\bdot\(|custom_call_target=\"__cublas")
KERNEL = re.compile(r"= \S+ (?:fusion|custom-call|conditional)\(")
"""An instruction that launches work in compiled HLO text: a fusion, a library call or a
conditional (on a GPU, a kernel launch or a host round trip each)."""
"""A matrix product in compiled HLO text: a ``dot`` op (CPU, fused GPU kernels) or a cuBLAS call."""


def training_set(data_dir: Path, size: int) -> tuple[tuple[jax.Array, jax.Array], str]:
    """The first ``size`` MNIST training images (flattened, in [0, 1]) and labels, or random data
    of the shape."""
    try:
        ds = sgrld.data.load_dataset("mnist", data_dir, validation_size=0)
        x, y = ds.x_train[:size], ds.y_train[:size]
        x = x.reshape(len(x), -1)
        return (jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.int32)), f"MNIST from {data_dir}"
    except (sgrld.data.DataError, OSError, ValueError) as err:
        kx, ky = jax.random.split(jax.random.key(1))
        x = jax.random.uniform(kx, (size, mlp.LAYERS[0]), jnp.float32)
        y = jax.random.randint(ky, (size,), 0, mlp.LAYERS[-1], jnp.int32)
        return (x, y), f"random data of MNIST's shape ({err})"


def model():
    """The Flax MLP, its parameters ``{"net": ...}`` (:func:`mlp.init_mlp`'s weights) and the
    per-example log-likelihood ``(params, (x, y)) -> [B]``."""
    net = sgrld.bnn.MLP(features=mlp.LAYERS[1:-1], num_outputs=mlp.LAYERS[-1])
    flat = mlp.init_mlp(jax.random.key(0))
    layers = len(mlp.LAYERS) - 1
    params = {f"Dense_{i}": {"kernel": flat[f"w{i}"], "bias": flat[f"b{i}"]} for i in range(layers)}
    return {"net": params}, sgrld.bnn.likelihoods.categorical(sgrld.bnn.apply_fn(net))


def minibatch(data, key):
    """``mlp.BATCH`` rows of ``data`` drawn uniformly with replacement."""
    idx = jax.random.randint(key, (mlp.BATCH,), 0, data[1].shape[0])
    return jax.tree.map(lambda a: a[idx], data)


SOURCE = engine.Source(
    lambda data, key, start, n: jnp.zeros((n, 0), jnp.int32),
    lambda data, x, key: minibatch(data, key),
)
"""The engine's per-step minibatch: drawn from ``data``, passed as an argument (not a constant
of the compiled program)."""


def make_sampler(name: str, loglik, num_data: int) -> sgrld.Sampler:
    """The sgrld sampler of a row (Shampoo, Monge as in ``mlp.py``; DOP, QDOP with the data's
    labels; SGHMC with friction 0.1, as ``momentum_step.py``)."""
    potential = sgrld.potential(loglik, mlp.logprior, num_data)
    lr = LEARNING_RATE[name]
    if name == "sghmc":
        return sgrld.sghmc(potential, learning_rate=lr, num_data=num_data, friction=0.1)
    metric = {
        "dop": sgrld.metrics.fisher_diag,
        "qdop": sgrld.metrics.fisher_qdiag,
    }.get(name, lambda: mlp.make_metric(name))()
    return sgrld.sgrld(potential, metric, learning_rate=lr, num_data=num_data)


class Candidate:
    """One timed row: ``compile()`` (thread-safe, ahead of time), ``__call__()`` (one chunk of
    ``grads`` gradient evaluations per chain, blocking), ``finite()``."""

    name: str
    family: str
    grads: int
    compiled = None
    compile_s = float("nan")

    def matmuls(self) -> int:
        """Matrix products in the compiled program (:data:`MATMUL`)."""
        return len(MATMUL.findall(self.compiled.as_text()))

    def kernels(self) -> int:
        """Fusions, library calls and conditionals in the compiled program (:data:`KERNEL`)."""
        return len(KERNEL.findall(self.compiled.as_text()))


class SgrldChains(Candidate):
    """K chains of an sgrld sampler on the engine, ``steps`` steps a call."""

    serial = False

    def __init__(
        self, name, data, loglik, params, chains: int, steps: int, legacy=False, prng=None
    ):
        self.name, self.family, self.metric, self.grads = f"sgrld {name}", "sgrld", name, steps
        sampler = make_sampler(name, loglik, len(data[1]))
        self.engine = engine.Engine(sampler, SOURCE, burn_in=0, thin=steps)
        if legacy:  # traced with the previous diagnostics: compiled alone, see compile_all
            self.name, self.family, self.serial = f"sgrld {name}, info as before", "variant", True
        if prng is not None:  # keys of another PRNG implementation (jax.random.key's impl)
            self.name, self.family = f"sgrld {name}, {prng} keys", "variant"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", sgrld.numerics.per_example.FallbackWarning)
            state = sampler.init(params)
        self.carry = self.engine.init(state, num_chains=chains)
        self.keys = engine.chain_keys(jax.random.key(2, impl=prng), chains)
        self.data, self.steps, self.start = data, steps, 0

    def compile(self) -> None:
        t0 = time.perf_counter()
        with legacy_info() if self.serial else contextlib.nullcontext():
            self.compiled = self.engine.compile(
                self.carry,
                self.keys,
                self.data,
                num_steps=self.steps,
                slots=self.engine.slots(self.steps),
                freeze=False,
            )
        self.compile_s = time.perf_counter() - t0

    def __call__(self) -> None:
        self.carry, _, _ = self.engine.run_chunk(
            self.carry,
            self.keys,
            self.data,
            start=self.start,
            num_steps=self.steps,
            exact_slots=False,
        )
        self.start += self.steps

    def finite(self) -> bool:
        return bool(np.all(np.asarray(self.carry.diverged_step) < 0))


class ScanChains(Candidate):
    """K chains of ``step(key, state, batch) -> state`` vmapped, ``calls`` calls a jitted
    ``lax.scan``, each chain its own minibatch from its own key."""

    def __init__(self, name, family, step, states, data, chains: int, calls: int, grads: int):
        self.name, self.family, self.metric, self.grads = name, family, None, grads

        def one(key, state, data):
            batch_key, step_key = jax.random.split(key)
            return step(step_key, state, minibatch(data, batch_key))

        def run(states, keys, start, data):
            def body(s, t):
                step_keys = jax.vmap(lambda k: jax.random.fold_in(k, t))(keys)
                return jax.vmap(one, (0, 0, None))(step_keys, s, data), None

            return jax.lax.scan(body, states, start + jnp.arange(calls))[0]

        self.states, self.data, self.calls, self.start = states, data, calls, 0
        self.keys = jax.random.split(jax.random.key(2), chains)
        self.fn = jax.jit(run)

    def compile(self) -> None:
        t0 = time.perf_counter()
        args = (self.states, self.keys, jnp.int32(0), self.data)
        self.compiled = self.fn.lower(*args).compile()
        self.compile_s = time.perf_counter() - t0

    def __call__(self) -> None:
        args = (self.states, self.keys, jnp.int32(self.start), self.data)
        self.states = jax.block_until_ready(self.compiled(*args))
        self.start += self.calls

    def finite(self) -> bool:
        return all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(self.states))


def stacked(tree, chains: int):
    return jax.tree.map(lambda x: jnp.stack([x] * chains), tree)


def bare_scan(name: str, data, loglik, params, chains: int, steps: int) -> ScanChains:
    """sgrld's step of sampler ``name`` in the plain scan of the BlackJAX rows."""
    sampler = make_sampler(name, loglik, len(data[1]))
    step = lambda key, state, batch: sampler.step(key, state, batch)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sgrld.numerics.per_example.FallbackWarning)
        states = jax.vmap(sampler.init)(stacked(params, chains))
    label = f"sgrld {name}, bare scan"
    return ScanChains(label, "bare", step, states, data, chains, steps, steps)


def legacy_step_info(value, grads, lr, new_params, **kwargs):
    """``sgrld.samplers.info.step_info`` as it was before RESULTS §23: ‖g‖² and the checks
    of θ' and g for NaN/inf as three reductions per leaf, which XLA fused with the update (the
    current step_info's own checks are unused, and XLA removes them)."""
    from sgrld.numerics.pytrees import tree_vdot

    bad = [~jnp.all(jnp.isfinite(x)) for t in (new_params, grads) for x in jax.tree.leaves(t)]
    per_leaf = jnp.any(jnp.stack(bad).reshape(2, -1), axis=0)
    bad_leaf = jnp.where(jnp.any(per_leaf), jnp.argmax(per_leaf), -1).astype(jnp.int32)
    info = CURRENT_STEP_INFO(value, grads, lr, new_params, **kwargs)
    norm = jnp.sqrt(tree_vdot(grads, grads))
    return info._replace(grad_norm=norm, is_finite=bad_leaf < 0, nonfinite_leaf=bad_leaf)


CURRENT_STEP_INFO = sgrld.samplers.info.step_info


@contextlib.contextmanager
def legacy_info():
    """SGRLD's steps traced with :func:`legacy_step_info` (one candidate at a time)."""
    module = sgrld.samplers.sampler
    current, module.step_info = module.step_info, legacy_step_info
    try:
        yield
    finally:
        module.step_info = current


def bare_identity_info(data, loglik, params, chains: int, steps: int) -> ScanChains:
    """The bare scan with the engine's bookkeeping of ``info``: summaries and divergence marks."""
    sampler = make_sampler("identity", loglik, len(data[1]))

    def step(key, carry, batch):
        state, acc, diverged = carry
        state, info = sampler.step(key, state, batch)
        alive = diverged < 0
        ok = alive & info.is_finite
        diverged = jnp.where(alive & ~info.is_finite, state.step, diverged)
        return state, summaries.summary_update(acc, info, ok), diverged

    state = sampler.init(params)
    batch = minibatch(data, jax.random.key(0))
    info = jax.eval_shape(sampler.step, jax.random.key(0), state, batch)[1]
    carry = (state, summaries.summary_init(info), jnp.int32(-1))
    name = "sgrld identity, bare scan + info"
    return ScanChains(name, "bare", step, stacked(carry, chains), data, chains, steps, steps)


def blackjax_chains(kind, data, loglik, params, chains: int, steps: int, integration: int):
    """BlackJAX's SGLD, or its SGHMC with ``integration`` integration steps a call."""
    import blackjax
    from blackjax.sgmcmc.gradients import grad_estimator

    n = len(data[1])
    per_datum = lambda p, datum: loglik(p, jax.tree.map(lambda a: a[None], datum))[0]
    estimator = grad_estimator(mlp.logprior, per_datum, n)
    step_size = BLACKJAX_LR / n
    if kind == "sgld":
        kernel, calls, name = blackjax.sgld(estimator), steps, "blackjax sgld"
    else:
        if steps % integration:
            raise ValueError(f"--steps {steps} is not a multiple of L = {integration}")
        kernel = blackjax.sghmc(estimator, num_integration_steps=integration)
        calls, name = steps // integration, f"blackjax sghmc L={integration}"
    step = lambda key, position, batch: kernel.step(key, position, batch, step_size)
    return ScanChains(name, "blackjax", step, stacked(params, chains), data, chains, calls, steps)


def build(
    args, data, loglik, params, chains: int, skip: dict[str, str]
) -> tuple[list[Candidate], list[dict]]:
    """The candidates at ``chains`` chains, in the order they are timed, but those named in
    ``skip`` (name: why), and an error record for each that was skipped or could not be built."""
    L = args.sghmc_integration_steps
    makers = [
        (
            f"sgrld {name}",
            lambda name=name: SgrldChains(name, data, loglik, params, chains, args.steps),
        )
        for name in args.samplers
    ]
    if args.bare:
        makers += [
            (
                "sgrld identity, info as before",
                lambda: SgrldChains("identity", data, loglik, params, chains, args.steps, True),
            ),
            (
                "sgrld identity, rbg keys",
                lambda: SgrldChains(
                    "identity", data, loglik, params, chains, args.steps, prng="rbg"
                ),
            ),
            (
                "sgrld identity, bare scan + info",
                lambda: bare_identity_info(data, loglik, params, chains, args.steps),
            ),
        ]
    makers += [
        (
            f"sgrld {name}, bare scan",
            lambda name=name: bare_scan(name, data, loglik, params, chains, args.steps),
        )
        for name in args.bare_samplers
    ]
    for kind in args.blackjax:
        makers.append(
            (
                "blackjax sgld" if kind == "sgld" else f"blackjax sghmc L={L}",
                lambda kind=kind: blackjax_chains(
                    kind, data, loglik, params, chains, args.steps, L
                ),
            )
        )
    cands, errors = [], []
    for name, make in makers:
        if name in skip:
            print(f"{name} at {chains} chains skipped: {skip[name]}", flush=True)
            errors.append({"kind": "error", "chains": chains, "name": name, "when": "skipped"})
            errors[-1]["error"] = skip[name]
            continue
        try:
            cands.append(make())
        except Exception as err:  # one broken row must not cost the others
            errors.append(error_record(name, chains, "building", err))
    return cands, errors


def error_record(name: str, chains: int, when: str, err: BaseException) -> dict:
    print(f"{name} at {chains} chains failed while {when}: {err!r}", flush=True)
    return {"kind": "error", "chains": chains, "name": name, "when": when, "error": repr(err)[:500]}


def compile_all(cands: list[Candidate], workers: int) -> tuple[float, list[dict]]:
    """Compile every candidate, ``workers`` at a time; the wall seconds and an error record for
    each that failed (removed from ``cands``)."""

    def one(c):
        try:
            c.compile()
        except Exception as err:
            return err
        return None

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sgrld.numerics.per_example.FallbackWarning)
        # the first alone (its matrix products are autotuned without contention), then those
        # traced under a patch (SgrldChains.serial), then the others `workers` at a time
        alone = cands[:1] + [c for c in cands[1:] if getattr(c, "serial", False)]
        rest = [c for c in cands if c not in alone]
        done = {id(c): one(c) for c in alone}
        with ThreadPoolExecutor(max(workers, 1)) as pool:
            done |= dict(zip(map(id, rest), pool.map(one, rest), strict=True))
        failed = [done[id(c)] for c in cands]
    errors = []
    for c, err in zip(list(cands), failed, strict=True):
        if err is not None:
            errors.append(error_record(c.name, len(c.keys), "compiling", err))
            cands.remove(c)
    return time.perf_counter() - t0, errors


def gradient_check(args, data, loglik, params) -> list[dict]:
    """Matrix products in the compiled programs of BlackJAX's SGLD and SGHMC at L and at L = 1
    (one chain, ``L`` steps); whether SGHMC's gradient is in its program."""
    L = args.sghmc_integration_steps
    progs = {
        "blackjax sgld": blackjax_chains("sgld", data, loglik, params, 1, L, L),
        f"blackjax sghmc L={L}": blackjax_chains("sghmc", data, loglik, params, 1, L, L),
        "blackjax sghmc L=1": blackjax_chains("sghmc", data, loglik, params, 1, L, 1),
    }
    for c in progs.values():
        c.compile()
    counts = {name: c.matmuls() for name, c in progs.items()}
    sgld = counts["blackjax sgld"]
    return [
        {"kind": "hlo", "name": name, "matmuls": n, "gradient": n >= sgld > 0}
        for name, n in counts.items()
    ]


def measure(args, cands: list[Candidate], chains: int) -> list[dict]:
    """Warm every candidate, time the rounds; one record per candidate and per paired ratio."""
    warm, records = {}, []
    for c in list(cands):
        t0 = time.perf_counter()
        try:
            c()
        except Exception as err:
            records.append(error_record(c.name, chains, "running", err))
            cands.remove(c)
            continue
        warm[c.name] = time.perf_counter() - t0
    slow = {c.name for c in cands if warm[c.name] > args.max_call_s}
    timed = {c.name: c for c in cands if c.name not in slow}
    rounds = args.rounds
    if args.round_seconds is not None and timed:
        fit = math.floor(args.round_seconds / sum(warm[name] for name in timed))
        rounds = min(rounds, max(2, fit))
    times = interleave(timed, rounds) if timed else {}
    for name in slow:
        times[name] = [warm[name]]
    for c in cands:
        rate = spread(chains * c.grads / t for t in times[c.name])
        records.append(
            {
                "kind": "rate",
                "chains": chains,
                "name": c.name,
                "family": c.family,
                "metric": c.metric,
                "grads_per_call": c.grads,
                "median": rate.median,
                "low": rate.low,
                "high": rate.high,
                "rounds": len(times[c.name]),
                "one_call": c.name in slow,
                "compile_s": c.compile_s,
                "first_call_s": warm[c.name],
                "ms_per_call": 1e3 * statistics.median(times[c.name]),
                "kernels": c.kernels(),
                "finite": c.finite(),
            }
        )
    pairs = [("sgrld identity", "blackjax sgld")]
    pairs += [(f"sgrld {m}", f"sgrld {m}, bare scan") for m in args.bare_samplers]
    pairs += [("sgrld identity", "sgrld identity, info as before")]
    pairs += [("sgrld identity, rbg keys", "sgrld identity")]
    pairs += [("sgrld identity, bare scan + info", "sgrld identity, bare scan")]
    pairs += [("sgrld sghmc", f"blackjax sghmc L={args.sghmc_integration_steps}")]
    pairs += [(f"sgrld {m}", "sgrld identity") for m in args.samplers if m != "identity"]
    for a, b in pairs:
        if a in timed and b in timed:
            # a's chain-steps/s over b's: b's time over a's, per round (above 1: a faster)
            s = paired(times[b], times[a])
            ratio = {"median": s.median, "low": s.low, "high": s.high}
            records.append({"kind": "paired", "chains": chains, "a": a, "b": b, **ratio})
    return records


def report(records: list[dict], chains: list[int], rounds: int) -> None:
    """The human-readable table of every rate, and the paired ratios."""
    rates = [r for r in records if r["kind"] == "rate"]
    names = list(dict.fromkeys(r["name"] for r in rates))
    by = {(r["name"], r["chains"]): r for r in rates}
    head = ["candidate", *(f"K={k}" for k in chains), "largest K / smallest"]
    lines = []
    for name in names:
        row = [name]
        for k in chains:
            r = by.get((name, k))
            mark = "" if r is None or r["finite"] else " NONFINITE"
            mark += " (1 call)" if r is not None and r["one_call"] else ""
            row.append("" if r is None else f"{r['median']:,.0f}{mark}")
        got = [by[name, k]["median"] for k in chains if (name, k) in by]
        row.append(fmt_ratio(got[-1] / got[0]) if len(got) > 1 else "")
        lines.append(row)
    print(table(head, lines))
    print(
        f"chain-steps/s (chains x gradient evaluations per second): median over {rounds} "
        "interleaved rounds; (1 call): a candidate too slow for rounds, timed by one call"
    )
    pairs = [r for r in records if r["kind"] == "paired"]
    if pairs:
        lines = [
            [f"{p['a']} / {p['b']}", str(p["chains"]), fmt_spread(Spread(*ratio(p)), 2)]
            for p in pairs
        ]
        print(table(["chain-steps/s ratio, paired by round", "K", "median [range]"], lines))


def ratio(record: dict) -> tuple[float, float, float]:
    return record["median"], record["low"], record["high"]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--chains", type=int, nargs="+", default=[1, 8, 64])
    add("--steps", type=int, default=200, help="gradient evaluations per chain per timed call")
    add("--rounds", type=int, default=3)
    add("--samplers", nargs="*", choices=SAMPLERS, default=list(SAMPLERS))
    add("--no-bare", dest="bare", action="store_false", help="skip the Identity variants' rows")
    add(
        "--bare-samplers",
        nargs="*",
        choices=SAMPLERS,
        default=["identity"],
        help="samplers with a bare-scan row beside their engine row",
    )
    add("--hlo-dir", type=Path, help="write each compiled program's text here (first K)")
    add(
        "--blackjax",
        nargs="*",
        choices=("sgld", "sghmc"),
        default=None,
        help="BlackJAX rows (default: both, if blackjax imports)",
    )
    add("--sghmc-integration-steps", type=int, default=10, help="BlackJAX SGHMC's L")
    add("--no-check-gradient", dest="check_gradient", action="store_false")
    add("--max-call-s", type=float, default=10.0, help="slower first calls are not repeated")
    add(
        "--skip-call-s",
        type=float,
        default=30.0,
        help="skip a candidate whose call would take longer, by its call at the previous chains",
    )
    add(
        "--round-seconds",
        type=float,
        help="fewer rounds (at least 2) where --rounds would take longer, by the first calls",
    )
    add("--compile-workers", type=int, default=1, help="candidates compiled at a time")
    add("--data-dir", type=Path, default=SHARED_DATA)
    add("--train-size", type=int, default=60_000, help="training images drawn from")
    add("--json", type=Path, help="append the records here, one JSON object a line")
    add("--quick", action="store_true", help="chains 2, 2 steps (L = 2), 1 round, 1,000 images")
    args = parser.parse_args(argv)
    if args.quick:
        args.chains, args.steps, args.rounds, args.train_size = [2], 2, 1, 1000
        args.sghmc_integration_steps = 2
    if min(args.chains) < 1 or args.steps < 1 or args.rounds < 1:
        parser.error("--chains, --steps and --rounds must be >= 1")
    return args


def emit(path: Path | None, records: list[dict]) -> None:
    if path is not None:
        with path.open("a") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


def main(argv=None) -> int:
    args = parse_args(argv)
    print(environment())
    print(f"backend {jax.default_backend()}, device {jax.devices()[0].device_kind}")
    data, source = training_set(args.data_dir, args.train_size)
    print(f"data: {source}; {len(data[1])} examples, minibatches of {mlp.BATCH}")
    try:
        import blackjax

        print(f"blackjax {blackjax.__version__}")
        args.blackjax = ["sgld", "sghmc"] if args.blackjax is None else args.blackjax
    except ImportError:
        print("blackjax not importable: its rows are skipped")
        args.blackjax = []
    emit(
        args.json,
        [
            {
                "kind": "setup",
                "data": source,
                "blackjax": args.blackjax,
                **{
                    k: v
                    for k, v in vars(args).items()
                    if k in ("steps", "rounds", "samplers", "chains")
                },
            }
        ],
    )
    params, loglik = model()
    records = []
    if "sghmc" in args.blackjax and args.check_gradient:
        try:
            checks = gradient_check(args, data, loglik, params)
        except Exception as err:
            checks = [error_record("gradient check", 1, "compiling", err)]
        for r in checks:
            if r["kind"] == "hlo":
                print(f"compiled {r['name']}: {r['matmuls']} matrix products", flush=True)
        emit(args.json, checks)
        records += checks
    last_call: dict[str, tuple[int, float]] = {}  # name: (chains, seconds of its first call)
    for k in args.chains:
        skip = {
            name: f"its {k0}-chain call took {s:.1f} s, so {k} chains would take about "
            f"{s * k / k0:.0f} s a call (--skip-call-s {args.skip_call_s:g})"
            for name, (k0, s) in last_call.items()
            if s * k / k0 > args.skip_call_s
        }
        cands, errors = build(args, data, loglik, params, k, skip)
        wall, failed = compile_all(cands, args.compile_workers)
        print(f"{k} chains: compiled {len(cands)} candidates in {wall:.1f} s", flush=True)
        if args.hlo_dir is not None and k == args.chains[0]:
            args.hlo_dir.mkdir(parents=True, exist_ok=True)
            for c in cands:
                slug = re.sub(r"[^a-z0-9]+", "_", c.name.lower()).strip("_")
                (args.hlo_dir / f"{slug}_{k}.hlo").write_text(c.compiled.as_text())
        got = errors + failed + measure(args, cands, k)
        emit(args.json, got)
        records += got
        last_call |= {r["name"]: (k, r["first_call_s"]) for r in got if r["kind"] == "rate"}
        done = ", ".join(f"{r['name']} {r['median']:,.0f}" for r in got if r["kind"] == "rate")
        print(f"{k} chains: chain-steps/s {done}", flush=True)
        del cands
        gc.collect()
    report(records, args.chains, args.rounds)
    rates = [r for r in records if r["kind"] == "rate"]
    bad = [f"{r['name']} at {r['chains']}" for r in rates if not r["finite"]]
    if bad:
        print("NON-FINITE chains:", ", ".join(bad))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
