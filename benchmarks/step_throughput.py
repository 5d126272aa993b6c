"""Steady-state steps/s of one SGRLD step on a 784-400-400-10 MLP (478,410 parameters), per metric.

Candidates (each compiled and warmed up first; compile time is reported separately):

* ``floor``: ``jax.value_and_grad(potential)`` plus one ``jax.random.normal(key, (478410,))``, both
  returned; the least work any SGLD step must do.
* ``grad step``: the noiseless ``params - lr * grad`` (state threaded), for reference.
* ``SGLD by hand``: ``params - lr * grad + sqrt(2 lr / N) * noise`` per leaf (state threaded), for
  reference: the identity step without the library's diagnostics.
* one ``sgrld.sgrld(..., correction=None)`` step per metric, and one with
  ``correction="hutchinson"`` per adaptive metric;
* the same steps run 'chunk' at a time inside one jitted ``jax.lax.scan`` (how ``sgrld.sample`` runs
  an epoch);
* eager PyTorch SGLD and pSGLD (RMSprop) steps of the same model, if ``import torch`` works.

Timing: R interleaved rounds; in each round every candidate runs one chunk of steps (a Python
loop over the jitted step with pre-split keys and ``block_until_ready`` at the end of the chunk; the
state is carried across chunks and rounds). The candidate order rotates from round to round.
Reported: the median over rounds of steps/s and ratios of median time per step.

Usage::

    python benchmarks/step_throughput.py                  # full run (7 rounds of 200 steps)
    python benchmarks/step_throughput.py --quick          # smoke run
    python benchmarks/step_throughput.py --metrics identity shampoo --no-torch --rounds 5
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

try:
    import sgrld
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
# Learning rates (lr = h·N). Timing does not depend on them; they must keep the chains finite.
LEARNING_RATE = {"identity": 1e-4, "rmsprop": 1e-5, "wenzel": 1e-4, "monge": 1e-4, "shampoo": 1e-5}
TORCH_HINT = "pip install torch==2.13.0  (a CPU wheel from local disk)"


# --------------------------------------------------------------------------------------------------
# The model


def init_mlp(key: jax.Array) -> dict[str, jax.Array]:
    """He-scaled weights and N(0, 0.1²) biases of the 784-400-400-10 MLP, as a flat dict of arrays.

    The biases are not zero: with zero biases, a ReLU unit dead on the whole batch has an exactly
    zero gradient, RMSprop's statistic is 0 there and its Hutchinson Γ is NaN (see RESULTS.md).
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


def problem() -> tuple[dict[str, jax.Array], tuple[jax.Array, jax.Array], sgrld.Potential]:
    """The benchmark's MLP parameters, one MNIST-shaped random minibatch and the potential."""
    k_param, k_x, k_y = jax.random.split(jax.random.key(0), 3)
    params = init_mlp(k_param)
    assert sum(x.size for x in jax.tree.leaves(params)) == NUM_PARAMS
    x = jax.random.uniform(k_x, (BATCH, LAYERS[0]), jnp.float32)
    y = jax.random.randint(k_y, (BATCH,), 0, LAYERS[-1], jnp.int32)
    return params, (x, y), sgrld.potential(loglik, logprior, NUM_DATA)


def median_scan_ms(
    samplers: dict[str, sgrld.Sampler], params, batch, rounds: int, steps: int
) -> dict[str, float]:
    """Median ms per step of each sampler, ``steps`` steps per jitted ``lax.scan``, interleaved.

    Each sampler is compiled and run once before timing; then every round runs each scan once,
    the state carried over.
    """
    runs = {}
    for name, sampler in samplers.items():

        def scan(state, keys, sampler=sampler):
            step = lambda carry, k: (sampler.step(k, carry, batch)[0], None)
            return jax.lax.scan(step, state, keys)[0]

        fn = jax.jit(scan)
        keys = jax.random.split(jax.random.key(3), steps)
        runs[name] = [fn, keys, jax.block_until_ready(fn(sampler.init(params), keys)), []]
    for _ in range(rounds):
        for run in runs.values():
            fn, keys, state, ms = run
            start = time.perf_counter()
            run[2] = jax.block_until_ready(fn(state, keys))
            ms.append((time.perf_counter() - start) / steps * 1e3)
    return {name: statistics.median(run[3]) for name, run in runs.items()}


SHAMPOO_EVERY = 100


def make_metric(name: str, corrected: bool = False) -> sgrld.metrics.Metric:
    """The metric of a row; corrected Shampoo uses eps 1e-4 (its Γ at 1e-8 overflows, see docs)."""
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


# --------------------------------------------------------------------------------------------------
# Candidates


@dataclass
class Candidate:
    """One thing to time: ``run(n)`` runs n steps (or one scan of n steps) and blocks at the end."""

    name: str
    group: str  # "floor", "loop", "scan", "torch"
    run: Callable[[int], None]
    check: Callable[[], bool] = lambda: True  # True if the chain is still finite
    metric: str | None = None
    corrected: bool = False
    compile_s: float = float("nan")
    chunk_s: list[float] = field(default_factory=list)
    chunk_n: int = 0

    @property
    def median_rate(self) -> float:
        return self.chunk_n / statistics.median(self.chunk_s)

    @property
    def median_step_s(self) -> float:
        return statistics.median(self.chunk_s) / self.chunk_n


def first_call_seconds(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - t0


def jax_candidates(args, params, batch, potential) -> list[Candidate]:
    chunk = args.chunk
    key_list = list(jax.random.split(jax.random.key(1), chunk))  # pre-split, reused every chunk
    key_stack = jax.random.split(jax.random.key(2), chunk)
    cands: list[Candidate] = []

    # (a) the floor: gradient + one normal draw of the full parameter size, both returned.
    @jax.jit
    def floor_fn(p, b, k):
        value, grad = jax.value_and_grad(potential)(p, b)
        return value, grad, jax.random.normal(k, (NUM_PARAMS,), jnp.float32)

    def run_floor(n):
        out = None
        for i in range(n):
            out = floor_fn(params, batch, key_list[i % chunk])
        jax.block_until_ready(out)

    c = Candidate("floor: value_and_grad + normal", "floor", run_floor)
    c.compile_s = first_call_seconds(lambda: floor_fn(params, batch, key_list[0]))
    cands.append(c)

    lr0 = LEARNING_RATE["identity"]

    @jax.jit
    def grad_step(p, b):
        g = jax.grad(potential)(p, b)
        return jax.tree.map(lambda x, d: x - lr0 * d, p, g)

    @jax.jit
    def hand_sgld(k, p, b):
        g = jax.grad(potential)(p, b)
        leaves, treedef = jax.tree.flatten(p)
        keys = jax.random.split(k, len(leaves))
        xi = treedef.unflatten(
            [jax.random.normal(kk, x.shape, x.dtype) for kk, x in zip(keys, leaves, strict=True)]
        )
        s = math.sqrt(2.0 * lr0 / NUM_DATA)
        return jax.tree.map(lambda x, d, e: x - lr0 * d + s * e, p, g, xi)

    holder = {"gd": params, "hand": params}

    def run_gd(n):
        p = holder["gd"]
        for _ in range(n):
            p = grad_step(p, batch)
        holder["gd"] = jax.block_until_ready(p)

    def run_hand(n):
        p = holder["hand"]
        for i in range(n):
            p = hand_sgld(key_list[i % chunk], p, batch)
        holder["hand"] = jax.block_until_ready(p)

    def finite(name):
        return lambda: all(bool(jnp.all(jnp.isfinite(x))) for x in jax.tree.leaves(holder[name]))

    c = Candidate("ref: grad step p - lr*g", "floor", run_gd, finite("gd"))
    c.compile_s = first_call_seconds(lambda: grad_step(params, batch))
    cands.append(c)
    c = Candidate("ref: SGLD by hand", "floor", run_hand, finite("hand"))
    c.compile_s = first_call_seconds(lambda: hand_sgld(key_list[0], params, batch))
    cands.append(c)

    # (b), (c): the library's step, Python loop and scan.
    variants = [(m, None) for m in args.metrics]
    if not args.no_hutchinson:
        variants += [(m, "hutchinson") for m in args.metrics if m in ADAPTIVE]
    for metric_name, correction in variants:
        sampler = sgrld.sgrld(
            potential,
            make_metric(metric_name, bool(correction)),
            LEARNING_RATE[metric_name],
            NUM_DATA,
            correction=correction,
        )
        label = LABELS[metric_name] + (" + Hutchinson" if correction else "")
        step = jax.jit(sampler.step)
        state0 = sampler.init(params)

        st = {"state": state0, "ok": True}

        def run_loop(n, st=st, step=step):
            state, info = st["state"], None
            for i in range(n):
                state, info = step(key_list[i % chunk], state, batch)
            jax.block_until_ready((state, info))
            st["state"] = state
            st["ok"] &= bool(info.is_finite)

        def first(st=st, step=step):
            st["state"], info = step(key_list[0], st["state"], batch)
            return st["state"], info

        c = Candidate(
            label, "loop", run_loop, lambda st=st: st["ok"], metric_name, bool(correction)
        )
        c.compile_s = first_call_seconds(first)
        cands.append(c)

        if not (
            args.scan == "all"
            or (args.scan == "uncorrected" and not correction)
            or (args.scan == "some" and not correction and metric_name in ("identity", "shampoo"))
        ):
            continue

        def scan_fn(state, keys, b, step_fn=sampler.step):
            def body(s, k):
                s, info = step_fn(k, s, b)
                return s, info.is_finite

            state, finite_flags = jax.lax.scan(body, state, keys)
            return state, jnp.all(finite_flags)

        scan = jax.jit(scan_fn)
        ss = {"state": state0, "ok": True}

        def run_scan(n, ss=ss, scan=scan):
            if n != chunk:
                raise ValueError("scan candidates run exactly one chunk per call")
            state, ok = jax.block_until_ready(scan(ss["state"], key_stack, batch))
            ss["state"] = state
            ss["ok"] &= bool(ok)

        def first_scan(ss=ss, scan=scan):
            out = scan(ss["state"], key_stack, batch)
            ss["state"] = out[0]
            return out

        c = Candidate(
            label + " [scan]",
            "scan",
            run_scan,
            lambda ss=ss: ss["ok"],
            metric_name,
            bool(correction),
        )
        c.compile_s = first_call_seconds(first_scan)
        cands.append(c)
    return cands


def torch_candidates(args, x_np, y_np) -> tuple[list[Candidate], str | None]:
    """Eager PyTorch SGLD and pSGLD of the same model; ([], None) if torch is not importable."""
    try:
        import torch
    except ImportError:
        return [], None
    import torch.nn.functional as F

    torch.manual_seed(0)
    x = torch.from_numpy(np.array(x_np, np.float32))
    y = torch.from_numpy(np.array(y_np, np.int64))
    lr = LEARNING_RATE["identity"]
    noise = math.sqrt(2.0 * lr / NUM_DATA)
    cands = []

    def build():
        layers = []
        for i, (n_in, n_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:], strict=True)):
            layers.append(torch.nn.Linear(n_in, n_out))
            if i < len(LAYERS) - 2:
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers)
        assert sum(p.numel() for p in model.parameters()) == NUM_PARAMS
        return model

    def grads(model):
        for p in model.parameters():
            p.grad = None
        loss = F.cross_entropy(model(x), y)
        prior = 0.5 * sum(p.square().sum() for p in model.parameters()) / NUM_DATA
        (loss + prior).backward()

    sgld_model = build()

    def run_sgld(n):
        for _ in range(n):
            grads(sgld_model)
            with torch.no_grad():
                for p in sgld_model.parameters():
                    p.add_(p.grad, alpha=-lr)
                    p.add_(torch.randn_like(p), alpha=noise)

    psgld_model = build()
    plr = LEARNING_RATE["rmsprop"]
    pnoise = math.sqrt(2.0 * plr / NUM_DATA)
    sq = [torch.zeros_like(p) for p in psgld_model.parameters()]

    def run_psgld(n):
        for _ in range(n):
            grads(psgld_model)
            with torch.no_grad():
                for p, v in zip(psgld_model.parameters(), sq, strict=True):
                    v.mul_(0.99).addcmul_(p.grad, p.grad, value=0.01)
                    g_diag = v.sqrt().add_(1e-8)
                    p.addcdiv_(p.grad, g_diag, value=-plr)
                    p.add_(torch.randn_like(p).div_(g_diag.sqrt_()), alpha=pnoise)

    def finite(model):
        return lambda: all(bool(torch.isfinite(p).all()) for p in model.parameters())

    default_threads = torch.get_num_threads()

    def one_thread(run):
        def fn(n):
            torch.set_num_threads(1)
            try:
                run(n)
            finally:
                torch.set_num_threads(default_threads)

        return fn

    for name, run, model, metric in (
        ("torch SGLD (eager)", run_sgld, sgld_model, "identity"),
        ("torch pSGLD (eager)", run_psgld, psgld_model, "rmsprop"),
    ):
        c = Candidate(name, "torch", run, finite(model), metric, chunk_n=args.torch_chunk)
        t0 = time.perf_counter()
        run(1)
        c.compile_s = time.perf_counter() - t0
        cands.append(c)
    if args.torch_one_thread and default_threads != 1:
        for name, run, model in (
            ("ref: torch SGLD, 1 thread", run_sgld, sgld_model),
            ("ref: torch pSGLD, 1 thread", run_psgld, psgld_model),
        ):
            c = Candidate(name, "torch1", one_thread(run), finite(model), chunk_n=args.chunk)
            c.compile_s = 0.0
            cands.append(c)
    return cands, f"{torch.__version__} (default threads: {default_threads})"


# --------------------------------------------------------------------------------------------------
# Reporting


def fmt_ratio(x: float | None) -> str:
    return "" if x is None or not math.isfinite(x) else f"{x:.2f}x"


def print_table(cands: list[Candidate]) -> None:
    by = {(c.group, c.metric, c.corrected): c for c in cands if c.metric}
    floor = next(c for c in cands if c.group == "floor")
    rows = []
    for c in cands:
        group = "scan" if c.group == "scan" else "loop"
        ident = by.get((group, "identity", False))
        to_floor = c.median_step_s / floor.median_step_s
        to_ident = c.median_step_s / ident.median_step_s if ident else None
        to_plain = None
        if c.corrected and (c.group, c.metric, False) in by:
            to_plain = c.median_step_s / by[(c.group, c.metric, False)].median_step_s
        rates = [c.chunk_n / t for t in c.chunk_s]
        rows.append(
            [
                c.name,
                f"{c.median_rate:8.1f}",
                f"{min(rates):.1f}-{max(rates):.1f}",
                f"{1e3 * c.median_step_s:.2f}",
                fmt_ratio(to_floor),
                fmt_ratio(to_ident),
                fmt_ratio(to_plain),
                f"{c.compile_s:.2f}",
                "yes" if c.check() else "NO",
            ]
        )
    head = [
        "candidate",
        "steps/s",
        "range",
        "ms/step",
        "/floor",
        "/Identity",
        "/uncorr.",
        "compile s",
        "finite",
    ]
    try:
        from rich import box
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        table = Table(box=box.SIMPLE_HEAD, title=None)
        for i, h in enumerate(head):
            table.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            table.add_row(*(escape(v) for v in r))
        Console(width=140, force_terminal=False, color_system=None).print(table)
    except ImportError:
        widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
        print(
            "  ".join(
                h.ljust(w) if i == 0 else h.rjust(w)
                for i, (h, w) in enumerate(zip(head, widths, strict=True))
            )
        )
        for r in rows:
            print(
                "  ".join(
                    v.ljust(w) if i == 0 else v.rjust(w)
                    for i, (v, w) in enumerate(zip(r, widths, strict=True))
                )
            )
    print(
        "steps/s: median over rounds; range: min-max over rounds; ratios: median time per step "
        "of this row / that of the reference (floor / Identity of the same kind, loop or scan / "
        "the same metric uncorrected); compile s: first call incl. tracing and compilation "
        "(torch: first eager step)."
    )


def check_targets(cands: list[Candidate]) -> None:
    by = {(c.group, c.metric, c.corrected): c for c in cands if c.metric}
    floor = next(c for c in cands if c.group == "floor")
    lines = []

    def target(desc, value, limit, ok):
        lines.append(f"  [{'PASS' if ok else 'MISS'}] {desc}: {value:.2f}x (target {limit})")

    for group in ("loop", "scan"):
        ident = by.get((group, "identity", False))
        tag = "Python loop" if group == "loop" else "scan"
        if ident and group == "loop":
            r = ident.median_step_s / floor.median_step_s
            target(f"Identity / floor ({tag})", r, "<= 1.15x", r <= 1.15)
        for m in ("rmsprop", "wenzel", "monge", "shampoo"):
            c = by.get((group, m, False))
            if c and ident:
                r = c.median_step_s / ident.median_step_s
                limit = 1.6 if m == "shampoo" else 1.15
                target(f"{LABELS[m]} / Identity ({tag})", r, f"<= {limit}x", r <= limit)
        for m in ADAPTIVE:
            c, p = by.get((group, m, True)), by.get((group, m, False))
            if c and p:
                r = c.median_step_s / p.median_step_s
                desc = f"{LABELS[m]} + Hutchinson / {LABELS[m]} ({tag})"
                target(desc, r, "<= 2.5x", r <= 2.5)
        t = by.get(("torch", "identity", False))
        if t and ident:
            r = ident.median_rate / t.median_rate
            target(f"Identity ({tag}) steps/s / torch SGLD steps/s", r, ">= 1.5x", r >= 1.5)
        t1 = next((c for c in cands if c.group == "torch1" and "pSGLD" not in c.name), None)
        if t1 and ident:
            lines.append(
                f"  [info] Identity ({tag}) steps/s / torch SGLD (1 thread) steps/s: "
                f"{ident.median_rate / t1.median_rate:.2f}x"
            )
        tp = by.get(("torch", "rmsprop", False))
        rp = by.get((group, "rmsprop", False))
        if tp and rp:
            lines.append(
                f"  [info] RMSprop ({tag}) steps/s / torch pSGLD steps/s: "
                f"{rp.median_rate / tp.median_rate:.2f}x"
            )
    print("Targets:")
    print("\n".join(lines) if lines else "  (none measurable with the selected candidates)")


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--chunk", type=int, default=200, help="steps per candidate per round")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 2 rounds of 50 steps, no scan rows"
    )
    parser.add_argument(
        "--metrics",
        nargs="+",
        choices=METRICS,
        default=None,
        help="metrics to time (default: all; with --quick: identity shampoo)",
    )
    parser.add_argument("--no-torch", action="store_true", help="skip the PyTorch comparison")
    parser.add_argument(
        "--torch-chunk",
        type=int,
        default=None,
        help="steps per chunk of the default-thread torch steps (default: chunk/10; they can be "
        "very slow: OpenMP spin-waiting on 2 shared cores)",
    )
    parser.add_argument(
        "--no-torch-one-thread",
        dest="torch_one_thread",
        action="store_false",
        help="skip the extra torch rows with torch.set_num_threads(1)",
    )
    parser.add_argument("--no-hutchinson", action="store_true", help="skip the corrected steps")
    parser.add_argument(
        "--scan",
        choices=("none", "some", "uncorrected", "all"),
        default="some",
        help="which steps also run as one jitted lax.scan per chunk (some: identity and shampoo)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.chunk, args.scan = 2, 50, "none"
        args.metrics = args.metrics or ["identity", "shampoo"]
    args.metrics = args.metrics or list(METRICS)
    args.torch_chunk = args.torch_chunk or max(1, args.chunk // 10)
    if args.rounds < 1 or args.chunk < 1:
        parser.error("--rounds and --chunk must be >= 1")

    print("command:", " ".join([os.path.relpath(sys.executable), *sys.argv]))
    print(
        f"python {platform.python_version()}, jax {jax.__version__}, devices {jax.devices()}, "
        f"os.cpu_count() {os.cpu_count()}, sched_getaffinity "
        f"{len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}"
    )
    print(
        f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', '(unset)')}, "
        f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    )
    print(
        f"model 784-400-400-10 ReLU MLP ({NUM_PARAMS:,} params), batch {BATCH}, N {NUM_DATA:,}; "
        f"{args.rounds} rounds x {args.chunk} steps per candidate"
    )
    if "shampoo" in args.metrics and args.chunk % 100:
        print(
            "note: chunk is not a multiple of Shampoo's update_every=100: the root refreshes "
            "fall unevenly across chunks"
        )

    params, batch, potential = problem()

    t0 = time.perf_counter()
    cands = jax_candidates(args, params, batch, potential)
    torch_version = None
    if args.no_torch:
        print("torch: skipped (--no-torch)")
    else:
        tc, torch_version = torch_candidates(args, *(np.asarray(a) for a in batch))
        if torch_version is None:
            print(f"torch: not installed, comparison skipped; to enable it: {TORCH_HINT}")
        else:
            print(f"torch {torch_version}")
        cands += tc
    print(f"compile/warm-up of {len(cands)} candidates: {time.perf_counter() - t0:.1f} s")

    for c in cands:
        c.chunk_n = c.chunk_n or args.chunk
    for c in cands:  # a few untimed steps more (a scan has run a whole chunk to compile)
        if c.group != "scan":
            c.run(min(5, c.chunk_n))

    t0 = time.perf_counter()
    for r in range(args.rounds):
        shift = r % len(cands)
        for c in cands[shift:] + cands[:shift]:
            start = time.perf_counter()
            c.run(c.chunk_n)
            c.chunk_s.append(time.perf_counter() - start)
    print(f"timing: {time.perf_counter() - t0:.1f} s\n")

    print_table(cands)
    print()
    check_targets(cands)
    bad = [c.name for c in cands if not c.check()]
    if bad:
        print("NON-FINITE chains (see benchmarks/RESULTS.md):", ", ".join(bad))
    return 0


if __name__ == "__main__":
    sys.exit(main())
