"""Self-checks of the share estimator and the adaptive step (share.py); prints one line per check.

    .venv/bin/python benchmarks/right_by_default/selfcheck.py

1. decay 0 (the metric is a function of θ): ĉ = 1 exactly.
2. decay → 1 (a frozen average): ĉ → 0.
3. AR(1) chains with lag-1 correlation ρ: ĉ ≈ Σ_k (1−β)β^k ρ^k = (1−β)/(1−βρ) (order 1) and
   (1−β)/(1−βρ²) (order 2, the quadratic feature of a Gaussian chain; Mehler).
4. With a fixed share the step equals the library's Hutchinson step with ``correction_scale``
   (same keys): the share in the probe is the share of Γ.
5. Contract: jit without recompilation, vmap over chains, state type invariant under scan.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from share import Config, adaptive_sgrld, make_step, share_init, share_update, share_value  # noqa: E402

import sgrld  # noqa: E402

FAILED = []


def check(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name} {detail}")
    if not ok:
        FAILED.append(name)


def ar1(key, rho, steps, chains):
    """Stationary AR(1) paths x_t = ρx_{t−1} + √(1−ρ²)ε_t, [steps, chains]."""
    eps = jax.random.normal(key, (steps, chains))
    x0 = jax.random.normal(jax.random.fold_in(key, 1), (chains,))

    def body(x, e):
        x = rho * x + jnp.sqrt(1 - rho**2) * e
        return x, x

    return jax.lax.scan(body, x0, eps)[1]


def estimate(path, decay, window=20.0, order=1):
    def body(s, x):
        return share_update(s, x, decay=decay, window=window, order=order), None

    s = jax.lax.scan(body, share_init(path[0]), path)[0]
    return share_value(s)


def main() -> int:
    key = jax.random.key(0)
    path = ar1(key, 0.95, 20_000, 64)
    c = estimate(path, 0.0)
    check("decay 0 gives c = 1", bool(jnp.all(c == 1.0)), f"(min {float(c.min()):.6f})")
    c = estimate(path, 1 - 1e-7)
    check("frozen average gives c ~ 0", float(c.mean()) < 0.02, f"(mean {float(c.mean()):.4f})")
    for beta, rho in [(0.9, 0.98), (0.99, 0.98), (0.99, 0.995), (0.9, 0.5)]:
        path = ar1(jax.random.fold_in(key, int(1000 * rho + beta * 100)), rho, 60_000, 64)
        for order in (1, 2):
            want = (1 - beta) / (1 - beta * rho**order)
            c = estimate(path, beta, window=50.0, order=order)
            got = float(jnp.mean(c))
            check(
                f"AR(1) rho {rho} decay {beta} order {order}",
                abs(got - want) < 0.1 * want + 0.02,
                f"(c {got:.3f} ± {float(jnp.std(c)):.3f} per chain, predicted {want:.3f})",
            )
    # 4. fixed share equals the library's correction_scale (Monge: a non-diagonal metric).
    u = sgrld.potential(
        lambda w, b: -0.5 * jnp.sum((b[:, None] - w) ** 2 * jnp.array([1.0, 4.0]), axis=1),
        lambda w: -0.5 * jnp.sum(w**2),
        8,
    )
    batch = jnp.linspace(-1.0, 1.0, 8)
    for scale in (1.0, 0.3):
        metric = sgrld.metrics.monge(alpha2=2.0, decay=0.5)
        lib = sgrld.sgrld(
            u,
            metric,
            learning_rate=0.05,
            num_data=8,
            correction="hutchinson",
            correction_scale=scale,
            correction_warmup=0,
        )
        init, step = make_step(u, metric, decay=0.5, learning_rate=0.05, num_data=8, warmup=0)
        cfg = Config(scale=jnp.float32(scale), auto=jnp.bool_(False))
        a, b = lib.init(jnp.array([0.3, -0.2])), init(jnp.array([0.3, -0.2]))
        worst = 0.0
        for i in range(20):
            k = jax.random.key(i)
            a, _ = jax.jit(lib.step)(k, a, batch)
            b, _ = jax.jit(step)(cfg, k, b, batch)
            worst = max(worst, float(jnp.max(jnp.abs(a.params - b.params))))
        check(
            f"fixed share {scale} equals the library's Hutchinson step",
            worst < 1e-5,
            f"(max |Δθ| over 20 steps {worst:.1e})",
        )
    # 5. contract.
    s = adaptive_sgrld(
        u, sgrld.metrics.rmsprop(decay=0.9), decay=0.9, learning_rate=0.05, num_data=8
    )
    traces = []

    def counted(k, st, bt):
        traces.append(1)
        return s.step(k, st, bt)

    jstep = jax.jit(counted)
    st = s.init(jnp.array([0.3, -0.2]))
    st1, _ = jstep(jax.random.key(1), st, batch)
    st2, _ = jstep(jax.random.key(2), st1, batch)
    check("jit compiles once", len(traces) == 1, f"({len(traces)} traces)")
    same = jax.tree.map(lambda x, y: x.shape == y.shape and x.dtype == y.dtype, st, st2)
    check("state type invariant", all(jax.tree.leaves(same)))
    keys = jax.random.split(jax.random.key(3), 5)
    sts = jax.vmap(s.init)(jnp.zeros((5, 2)) + 0.1)
    sts, info = jax.vmap(s.step, in_axes=(0, 0, None))(keys, sts, batch)
    check("vmap over chains", sts.params.shape == (5, 2) and bool(jnp.all(info.is_finite)))

    def body(carry, k):
        return s.step(k, carry, batch)[0], None

    out = jax.lax.scan(body, st, jax.random.split(jax.random.key(4), 200))[0]
    check(
        "scan of 200 steps finite",
        bool(jnp.all(jnp.isfinite(out.params))),
        f"(mean share {float(jnp.mean(share_value(out.share))):.3f})",
    )
    print("all passed" if not FAILED else f"{len(FAILED)} failed: {FAILED}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
