"""Why the MNIST Γ rows of ``natural-langevin`` fall behind: their chains side by side, and the
parts of Γ̂'s kick (RESULTS §29).

Each variant is one chain of the reproduction's sampler (``runs.sampler``: 784-400-400-10, N(0, 0.1)
prior, batch 100, γ_t = 1/√t, η halved every 10,000 updates) from the same initialisation and
minibatches, run for ``--time`` units of η·steps. Per variant the table gives the final Û/N, the
training NLL on 2,000 images, the mean θ²/σ² of the two large kernels (1 for weights that sample
the prior) and the largest ‖Γ̂‖ of the run. Variants (``--variants``):

* ``none``: the uncorrected metric (the paper's row); ``ĉ``: Γ with the default share, untamed
  (the reproduction's Γ rows before they were tamed);
* ``c=1`` / ``c=0.3``: Γ with a fixed share; ``ĉ, lr/2``: Γ at half the step, twice the steps;
* ``none, ε=1e-3`` / ``ĉ, ε=1e-3``: the metric with ε = 1e-3 instead of the paper's 1e-4;
* ``ĉ, tamed`` / ``c=1, tamed``: Γ with its kick tamed to one noise sd per coordinate
  (``gamma_kick_limit=1``);
* ``default``: ``sgrld.sgrld``'s default (``adapt_until="auto"``: adapt, then freeze at the
  statistic's window average, no Γ) with a burn-in of a fifth of the run (frozen at 3/20).

With ``--noise``, at the end of the ``ĉ`` chain the one-probe Γ̂ of ``--batches`` minibatches ×
``--probes`` probes is split per coordinate into its signal (the grand mean), its minibatch noise
(the spread of the per-batch means) and its probe noise (the spread over probes, Hutchinson's
off-diagonal terms), each as the kick ``(lr/N)·Γ̂`` over the step's noise ``√(2·lr/N)·G^{-1/2}``
per coordinate (with ``--method qdop``, G's diagonal J + ε stands for G)::

    python benchmarks/right_by_default/mnist_gamma_drift.py --data-dir ../shared/data/mnist \\
        [--method dop] [--time 3] [--variants none ĉ ...] [--noise]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py
from timing import environment, table  # noqa: E402

import sgrld  # noqa: E402
from sgrld import bnn  # noqa: E402
from sgrld.parts import correction as corrections  # noqa: E402
from sgrld.parts.gradients import gradient_fn  # noqa: E402
from sgrld_reproductions.natural_langevin import runs  # noqa: E402

LR = 0.001
"""The Γ rows' η (RESULTS §17's pilot)."""
VARIANTS = {
    # name: (corrected, sgrld.sgrld options, step factor, ε)
    "none": (False, {}, 1.0, runs.EPS),
    "ĉ": (True, {}, 1.0, runs.EPS),
    "c=1": (True, {"correction_scale": 1.0}, 1.0, runs.EPS),
    "c=0.3": (True, {"correction_scale": 0.3}, 1.0, runs.EPS),
    "ĉ, lr/2": (True, {}, 0.5, runs.EPS),
    "none, ε=1e-3": (False, {}, 1.0, 1e-3),
    "ĉ, ε=1e-3": (True, {}, 1.0, 1e-3),
    "ĉ, tamed": (True, {"gamma_kick_limit": 1.0}, 1.0, runs.EPS),
    "c=1, tamed": (True, {"correction_scale": 1.0, "gamma_kick_limit": 1.0}, 1.0, runs.EPS),
    "default": (False, {"adapt_until": "auto"}, 1.0, runs.EPS),
}
CHUNK = 500
"""Updates per compiled scan."""


def method_of(name: str, corrected: bool, eps: float) -> runs.Method:
    """The reproduction's method at ``eps``, untamed (a variant's options may tame it)."""
    key = f"{name}-gamma" if corrected else name
    method = next(m for m in runs.METHODS if m.key == key)
    return method.with_eps(eps)._replace(gamma_kick_limit=None)


def chunks(sampler, x, y, steps, seed):
    """The state and the ``info`` of each step after each :data:`CHUNK` of ``steps`` updates of
    one chain of ``sampler`` from the reproduction's initialisation, with the same minibatches for
    every sampler at a seed."""
    n = x.shape[0]
    key = jax.random.key(seed)
    state = sampler.init({"net": runs.init_net(key, x.shape[1])})

    @jax.jit
    def advance(state, keys):
        def one(state, key):
            idx = jax.random.choice(key, n, (runs.BATCH_SIZE,), replace=False)
            return sampler.step(jax.random.fold_in(key, 1), state, (x[idx], y[idx]))

        return jax.lax.scan(one, state, keys)

    keys = jax.random.split(jax.random.fold_in(key, 100), steps)  # the same batches per variant
    for start in range(0, steps, CHUNK):
        state, infos = advance(state, keys[start : start + CHUNK])
        yield state, infos


def run_chain(method, lr, options, x, y, steps, seed):
    """``(state, max ‖Γ̂‖, finite)`` after ``steps`` updates of one chain."""
    sampler = runs.sampler(method, lr, x.shape[0], **options)
    if options.get("adapt_until") == "auto":  # resolved as a run of burn-in steps/5 would
        sampler = sampler.adaptation.resolve(steps // 5)
    gamma_max, finite = 0.0, True
    for chunk_end, infos in chunks(sampler, x, y, steps, seed):
        state = chunk_end
        gamma_max = max(gamma_max, float(jnp.nanmax(infos.gamma_norm)))
        finite = finite and bool(infos.is_finite.all())
    return state, gamma_max, finite


def summary(state, x, y) -> dict[str, float]:
    """Training NLL on 2,000 images and the mean θ²/σ² of the two large kernels."""
    logits = bnn.apply_fn(runs.model())(state.params["net"], x[:2000])
    nll = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:2000, None], 1))
    net = state.params["net"]
    spread = {
        f"θ²/σ² {layer}": float(jnp.mean(net[layer]["kernel"] ** 2) / runs.SIGMA2)
        for layer in ("Dense_0", "Dense_1")
    }
    return {"train NLL": float(nll), **spread}


def noise_parts(method, state, x, y, lr, batches, probes, seed):
    """Rows ``(leaf, part, median, q99, max)`` of the kick over the noise, per coordinate."""
    n = x.shape[0]
    metric = method.metric()
    loglik = bnn.likelihoods.categorical(bnn.apply_fn(runs.model()))
    grads = gradient_fn(sgrld.potential(loglik, runs.log_prior, n), False, metric)
    probe = corrections.hutchinson(1, scale=1.0)
    h = lr / n

    @jax.jit
    def one_batch(key):
        idx = jax.random.choice(key, n, (runs.BATCH_SIZE,), replace=False)
        fn = partial(grads, batch=(x[idx], y[idx]), key=jax.random.fold_in(key, 7))

        def one_probe(k):
            est = probe.estimate(k, fn, state.params, metric, state.metric_state)
            return est.gamma, est.metric_state.stat

        return jax.vmap(one_probe)(jax.random.split(jax.random.fold_in(key, 3), probes))

    out = [one_batch(jax.random.key(seed * 1000 + b)) for b in range(batches)]
    gammas = jax.tree.map(lambda *a: np.stack(a).astype(np.float64), *[g for g, _ in out])
    stat = out[0][1]
    diag = jax.tree.leaves(stat.diag if hasattr(stat, "diag") else stat)
    rows = []
    for (path, g), j in zip(jax.tree_util.tree_leaves_with_path(gammas), diag, strict=True):
        sigma = np.sqrt(2 * h / (np.asarray(j[0], np.float64) + method.metric.keywords["eps"]))
        per_batch = g.mean(axis=1)
        parts = {
            "one probe": np.sqrt((g**2).mean(axis=(0, 1))),
            "signal": np.abs(per_batch.mean(axis=0)),
            "minibatch": per_batch.std(axis=0),
            "probe": np.sqrt(g.var(axis=1).mean(axis=0)),
        }
        for part, v in parts.items():
            r = h * v / sigma
            med, q99 = np.quantile(r, [0.5, 0.99])
            rows.append(
                [jax.tree_util.keystr(path), part, f"{med:.3g}", f"{q99:.3g}", f"{r.max():.3g}"]
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/mnist")
    parser.add_argument("--method", default="dop", choices=("dop", "qdop"))
    parser.add_argument("--time", type=float, default=3.0, help="η·steps of each chain")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--noise", action="store_true", help="split the ĉ chain's Γ̂ at its end")
    parser.add_argument("--batches", type=int, default=16)
    parser.add_argument("--probes", type=int, default=16)
    args = parser.parse_args()
    for name in ("time", "batches", "probes"):
        if not getattr(args, name) > 0:
            parser.error(f"--{name} must be > 0, got {getattr(args, name)}")
    print(environment())
    data = runs.load_data(args.data_dir, 10_000, None, 0)
    x, y = (jnp.asarray(a) for a in data.train)
    rows, ends = [], {}
    for name in args.variants:
        corrected, options, factor, eps = VARIANTS[name]
        lr = LR * factor
        steps = CHUNK * math.ceil(args.time / lr / CHUNK)
        method = method_of(args.method, corrected, eps)
        start = time.perf_counter()
        state, gamma_max, finite = run_chain(method, lr, options, x, y, steps, args.seed)
        seconds = time.perf_counter() - start
        ends[name] = (method, state, float(runs.halving(lr)(steps - 1)))
        s = summary(state, x, y)
        print(f"  {name}: {steps} steps, {seconds:.0f} s, finite {finite}, {s}", flush=True)
        rows.append(
            [name, f"{lr:g}", str(steps), "yes" if finite else "no"]
            + [f"{v:.3f}" for v in s.values()]
            + [f"{gamma_max:.2g}"]
        )
    head = ["variant", "η", "steps", "finite", "train NLL", "θ²/σ² Dense_0", "θ²/σ² Dense_1"]
    print(table([*head, "max ‖Γ̂‖"], rows))
    if args.noise and "ĉ" in ends:
        method, state, lr = ends["ĉ"]
        parts = noise_parts(method, state, x, y, lr, args.batches, args.probes, args.seed)
        print(table(["leaf", "part", "median", "q99", "max"], parts))


if __name__ == "__main__":
    main()
