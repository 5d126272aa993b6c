"""Experiment b: Bayesian logistic regression on australian against NUTS, every variant side by
side.

The problem, reference and errors of ``tests/blr_reference.py`` / ``benchmarks/fisher_blr.py``
(15 parameters, prior N(0, 10²I); whitened mean error ‖L⁻¹(μ̂ − μ)‖₂ and covariance error
‖L⁻¹Σ̂L⁻ᵀ − I‖₂). Chains start at the NUTS mean; ``--burn-in`` steps, then ``--steps`` kept every
10th and pooled. Per (metric, decay, batch) one program runs the variants on the same keys:

* ``c=0`` (uncorrected), ``c=1`` (the library's Γ), ``auto`` (share.py's ĉ over 20 memories of
  the metric; ``auto-w100`` over 100; ``auto2`` the quadratic feature);
* ``freeze``: adapt during the burn-in only, Γ = 0 throughout: exactly ``fisher_blr.py``'s
  "frozen", the library's ``adapt_until=burn_in`` with ``correction="none"``;
* ``freeze-avg``: the same, frozen at the plain average of the statistic over the burn-in's
  second half (Stan's windowed warm-up) instead of at its last moving average.

Metrics: DOP (``fisher_diag``) and QDOP (``fisher_qdiag``) at lr 0.02, RMSprop (eps 1e-8) at
0.01, Monge (α² = ``--alpha2``) at 0.5 (fisher_blr's identity lr; G⁻¹ ⪯ I). ``--batch 32`` draws
32 rows without replacement per step (num_data stays 690). ``--lag`` preconditions each step
with the metric before it folds in that step's statistic (S_{t−1}; share.py's ``lag``).

    python benchmarks/right_by_default/exp_blr.py [--chains 256] [--steps 16000] [--burn-in 1000]
        [--metrics dop qdop rmsprop monge] [--decays 0.9 0.99 inverse_sqrt] [--batch 0 32]
        [--data PATH_TO_australian] [--lag]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))  # the tests package
from runner import configs, simulate  # noqa: E402
from share import make_step  # noqa: E402

import sgrld  # noqa: E402
from tests.blr_reference import (  # noqa: E402
    DATA_FILE,
    REFERENCE,
    THIN,
    as_params,
    as_vector,
    load_problem,
    loglik_fn,
    logprior_fn,
    whitened_errors,
)

M = sgrld.metrics
METRICS = {
    "dop": (lambda d, a: M.fisher_diag(decay=d), 0.02),
    "qdop": (lambda d, a: M.fisher_qdiag(decay=d), 0.02),
    "rmsprop": (lambda d, a: M.rmsprop(decay=d), 0.01),
    "monge": (lambda d, a: M.monge(alpha2=a, decay=d), 0.5),
}


def variants(burn_in: int, batch: int) -> list[tuple[str, dict]]:
    out = [
        ("c=0", {"scale": 0.0}),
        ("c=1", {"scale": 1.0}),
        ("auto", {"auto": True}),
        ("auto-w100", {"auto": True, "window": 100.0}),
        ("auto2", {"auto": True, "order": 2}),
    ]
    out += [
        ("freeze", {"scale": 0.0, "freeze_at": burn_in}),
        ("freeze-avg", {"scale": 0.0, "freeze_at": burn_in, "freeze_average": True}),
        ("freeze-avg-Γ", {"scale": 1.0, "freeze_at": burn_in, "freeze_average": True}),
    ]
    return out


def run(name, decay, batch, args, problem, ref):
    make, lr = METRICS[name]
    metric = make(decay, args.alpha2)
    x = jnp.asarray(problem.x, jnp.float32)
    y = jnp.asarray(problem.y, jnp.float32)
    n = len(problem.y)
    u = sgrld.potential(loglik_fn, logprior_fn, n)
    init, step = make_step(
        u,
        metric,
        decay=decay,
        learning_rate=lr * args.lr_scale,
        num_data=n,
        window=args.window,
        order=args.order,
        lag=args.lag,
    )
    if batch:

        def batch_fn(k):
            idx = jax.random.choice(k, n, (batch,), replace=False)
            return x[idx], y[idx]
    else:
        batch_fn = lambda k: (x, y)
    names, cfg = configs(variants(args.burn_in, batch))
    rec = lambda p, info, s: (as_vector_jax(p), info.share_mean)
    (draws, share), wall = simulate(
        init,
        step,
        cfg,
        as_params(ref["mean"]),
        jax.random.key(args.seed),
        chains=args.chains,
        burn_in=args.burn_in,
        num_samples=args.steps // THIN,
        thin=THIN,
        batch_fn=batch_fn,
        record=rec,
    )
    rows = []
    for i, v in enumerate(names):
        d = draws[i].astype(np.float64)
        ok = np.all(np.isfinite(d), axis=(1, 2))
        flat = d[ok].reshape(-1, d.shape[-1])
        if len(flat) < 2:
            me = ce = float("nan")
        else:
            me, ce = whitened_errors(
                flat.mean(0), np.cov(flat, rowvar=False), ref["mean"], ref["cov"]
            )
        rows.append(
            {
                "metric": name,
                "decay": str(decay),
                "batch": batch or "full",
                "lr": lr * args.lr_scale,
                "variant": v,
                "mean_error": me,
                "cov_error": ce,
                "share": float(np.mean(share[i][ok][:, -1])) if ok.any() else float("nan"),
                "share_run": float(np.mean(share[i][ok])) if ok.any() else float("nan"),
                "diverged": int((~ok).sum()),
                "wall": wall,
            }
        )
    return rows


def as_vector_jax(params):
    return jnp.concatenate([params["kernel"][..., 0], params["bias"]], axis=-1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--steps", type=int, default=16_000)
    parser.add_argument("--burn-in", type=int, default=1_000)
    parser.add_argument("--metrics", nargs="+", default=list(METRICS))
    parser.add_argument("--decays", nargs="+", default=["0.9", "0.99", "inverse_sqrt"])
    parser.add_argument("--batch", type=int, nargs="+", default=[0, 32], help="0: full batch")
    parser.add_argument("--alpha2", type=float, default=100.0)
    parser.add_argument("--lr-scale", type=float, default=1.0)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--order", type=int, default=1)
    parser.add_argument(
        "--lag",
        action="store_true",
        help="precondition with the metric before the step's statistic (S_t−1)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=DATA_FILE)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    problem, ref = load_problem(args.data), np.load(REFERENCE)
    assert as_vector  # the reference's layout: (w_1..w_14, b), as as_vector_jax
    print(
        f"jax {jax.__version__} {jax.devices()[0].device_kind}; {args.chains} chains x "
        f"{args.steps} steps after {args.burn_in}, thinned by {THIN}; Monge α² {args.alpha2}; "
        f"share window {args.window}, order {args.order}, lagged metric {args.lag}"
    )
    print(
        "| metric | decay | batch | lr | variant | mean err | cov err | ĉ end / run | "
        "diverged | wall s |"
    )
    print("|" + "---|" * 10)
    out = []
    for b in args.batch:
        for name in args.metrics:
            for dec in args.decays:
                decay = dec if dec == "inverse_sqrt" else float(dec)
                for r in run(name, decay, b, args, problem, ref):
                    print(
                        f"| {r['metric']} | {r['decay']} | {r['batch']} | {r['lr']:g} | "
                        f"{r['variant']} | {r['mean_error']:.3f} | {r['cov_error']:.3f} | "
                        f"{r['share']:.2f} / {r['share_run']:.2f} | {r['diverged']} | "
                        f"{r['wall']:.0f} |",
                        flush=True,
                    )
                    out.append(r)
                if args.json:
                    args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
