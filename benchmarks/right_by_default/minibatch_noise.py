"""How much of a natural-Langevin step's noise is the minibatch's, not Langevin's (RESULTS §29).

For DOP (``runs.sampler`` of ``natural-langevin``: 784-400-400-10, N(0, 0.1) prior, batch
B = 100, N = 50,000, γ_t = 1/√t, η halved every 10,000 updates), one chain per step size η runs
``--updates`` updates from the same initialisation and minibatches, for each of ``--variants``
(``mnist_gamma_drift.py``'s: ``none`` is the paper's row, ``"ĉ, tamed"`` the reproduction's
DOP + Γ). At its last state, with the
metric held, the gradient of ``--batches`` fresh minibatches gives each coordinate's ratio of the
step's minibatch-noise variance to the injected Langevin variance (README "Conventions"):

    r_i = lr²·Var_b[(G⁻¹g̃_b)_i] / (2·lr/N·G⁻¹_ii) = lr·N·Var_b[g̃_b,i] / (2·(J_i + ε)),

lr the step's η after its halvings. SGLD samples its target only where r ≪ 1: there the
injected noise dominates. For coordinates the data inform (J_i ≫ ε, the per-example second moment
of the gradient) r_i ≈ lr·N/(2B)·(1 − ḡ_i²/J_i) ≤ lr·N/(2B), which is 25 at the grid's η = 0.1:
the chain there is SGD with noise, whatever drift correction Γ (a function of θ, not of the
minibatch) it carries. The table gives per η the quantiles of r over the coordinates with
J_i > ε and their share with r > 1, beside lr·N/(2B), the training NLL and θ²/σ² of the large
kernels::

    python benchmarks/right_by_default/minibatch_noise.py --data-dir ../shared/data/mnist \\
        [--lrs 0.001 0.01 0.1] [--updates 2000] [--batches 32] [--variants none "ĉ, tamed"]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py
sys.path.insert(0, str(Path(__file__).resolve().parent))  # mnist_gamma_drift.py
from mnist_gamma_drift import VARIANTS, method_of, run_chain, summary  # noqa: E402
from timing import environment, table  # noqa: E402

import sgrld  # noqa: E402
from sgrld import bnn  # noqa: E402
from sgrld.parts.gradients import gradient_fn  # noqa: E402
from sgrld_reproductions.natural_langevin import runs  # noqa: E402


def noise_ratio(method, state, x, y, lr, batches, seed) -> np.ndarray:
    """``r_i`` (module docstring) of every coordinate with ``J_i > ε``, pooled over the leaves."""
    n = x.shape[0]
    metric = method.metric()
    eps = method.metric.keywords["eps"]
    loglik = bnn.likelihoods.categorical(bnn.apply_fn(runs.model()))
    grads = gradient_fn(sgrld.potential(loglik, runs.log_prior, n), False, metric)

    @jax.jit
    def one_batch(key):
        idx = jax.random.choice(key, n, (runs.BATCH_SIZE,), replace=False)
        return grads(state.params, (x[idx], y[idx]), jax.random.fold_in(key, 7))[1]

    keys = jax.random.split(jax.random.key(seed + 10_000), batches)
    g = [jax.tree.leaves(one_batch(k)) for k in keys]
    out = []
    for b, j in enumerate(jax.tree.leaves(state.metric_state.stat)):
        var = np.var(np.stack([np.asarray(gb[b], np.float64) for gb in g]), axis=0, ddof=1)
        j = np.asarray(j, np.float64)
        r = lr * n * var / (2 * (j + eps))
        out.append(r[j > eps])
    return np.concatenate(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/mnist")
    parser.add_argument("--lrs", type=float, nargs="+", default=[0.001, 0.01, 0.1])
    parser.add_argument("--updates", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=["none"])
    args = parser.parse_args()
    if args.updates < 500 or args.updates % 500:
        parser.error(f"--updates must be a positive multiple of 500, got {args.updates}")
    if args.batches < 2:
        parser.error(f"--batches must be >= 2, got {args.batches}")
    if not all(lr > 0 for lr in args.lrs):
        parser.error(f"every --lrs must be > 0, got {args.lrs}")
    print(environment())
    data = runs.load_data(args.data_dir, 10_000, None, 0)
    x, y = (jnp.asarray(a) for a in data.train)
    n = x.shape[0]
    rows = []
    for name, eta in ((name, eta) for name in args.variants for eta in args.lrs):
        corrected, options, factor, eps = VARIANTS[name]
        if factor != 1.0:
            parser.error(f"variant {name!r} changes the step; give the step in --lrs instead")
        method = method_of("dop", corrected, eps)
        start = time.perf_counter()
        state, _, finite = run_chain(method, eta, options, x, y, args.updates, args.seed)
        lr = float(runs.halving(eta)(args.updates - 1))
        r = noise_ratio(method, state, x, y, lr, args.batches, args.seed)
        s = summary(state, x, y)
        print(f"  {name}, η = {eta:g}: {time.perf_counter() - start:.0f} s, finite {finite}, {s}")
        bound = lr * n / (2 * runs.BATCH_SIZE)
        if finite:
            quantiles = [f"{v:.3g}" for v in np.quantile(r, [0.5, 0.9, 0.99])]
            cells = [str(r.size), *quantiles, f"{np.mean(r > 1):.1%}"]
            cells += [f"{v:.3f}" for v in s.values()]
        else:  # the chain's NaN/inf: nothing to measure at its end
            cells = ["diverged"] + ["—"] * 7
        rows.append([name, f"{eta:g}", f"{lr:g}", f"{bound:.3g}", *cells])
    head = ["variant", "η", "lr now", "lr·N/(2B)", "coords J > ε", "r median", "r q90", "r q99"]
    head.append("r > 1")
    print(table([*head, "train NLL", "θ²/σ² Dense_0", "θ²/σ² Dense_1"], rows))


if __name__ == "__main__":
    main()
