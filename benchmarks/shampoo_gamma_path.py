"""The corrected Shampoo step with Γ's derivative in the eigenbasis, against the composed one.

Shampoo's Γ needs the derivative of ``F(S)·z`` along the statistic's change ``D s(g)[H z]``. The
generic route (``correction.gamma_from_probes`` without a metric hook) differentiates the
statistic and then ``inv`` through the cached roots (Daleckii–Krein per factor: 8k blocked
products for a k-factor block); Shampoo's ``inv_grad_tangent`` does the same in the eigenbases of
its factors (6k). This times, on the MLP of ``step_throughput.py`` (784-400-400-10, batch 100), the
uncorrected Shampoo step and the corrected one by both routes, each ``--steps`` steps inside one
jitted ``lax.scan``, in interleaved rounds, and prints the median ms per step and the ratios to
the uncorrected step (issue 3: the correction at most 2.5×).

    python benchmarks/shampoo_gamma_path.py [--rounds 7] [--steps 100]
"""

from __future__ import annotations

import argparse
import os
import sys

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from step_throughput import make_metric, median_scan_ms, problem  # noqa: E402

import sgrld  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds")
    parser.add_argument("--steps", type=int, default=100, help="steps per timed scan")
    args = parser.parse_args()
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be >= 1")
    print(f"command: {' '.join([os.path.relpath(sys.executable), *sys.argv])}")
    print(f"{jax.default_backend()}, jax {jax.__version__}, os.cpu_count() {os.cpu_count()}")
    params, batch, potential = problem()
    metric = make_metric("shampoo", corrected=True)
    composed = metric._replace(inv_grad_tangent=None)
    lr, n = 1e-4, 50_000
    samplers = {
        "uncorrected": sgrld.sgrld(potential, metric, lr, num_data=n),
        "Γ, eigenbasis": sgrld.sgrld(potential, metric, lr, num_data=n, correction="hutchinson"),
        "Γ, composed": sgrld.sgrld(potential, composed, lr, num_data=n, correction="hutchinson"),
    }
    ms = median_scan_ms(samplers, params, batch, args.rounds, args.steps)
    print(f"Shampoo (update_every 100, block 128), {args.rounds} rounds x {args.steps} steps")
    for name, t in ms.items():
        print(f"  {name:15s} {t:8.2f} ms/step  {t / ms['uncorrected']:5.2f}x uncorrected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
