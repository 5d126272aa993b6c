"""Flops of Shampoo's blocked products per step against the MLP's forward and backward pass.

Counts multiply-adds as 2 flops on the 784-400-400-10 MLP of ``step_throughput.py`` (batch 100),
with the block plan Shampoo uses (``sgrld.metrics.shampoo.block_plan``). Each step runs three
kinds of blocked product, each over every Kronecker factor of every leaf: the statistics'
update ``G_(i) G_(i)ᵀ``, ``G⁻¹g`` and ``G^{-1/2}ξ``.

    python benchmarks/shampoo_flops.py [--block-size 128]
"""

from __future__ import annotations

import argparse
import math

from sgrld.metrics.shampoo import block_plan

LAYERS = ((784, 400), (400, 400), (400, 10))
BATCH = 100


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--block-size", type=int, default=128)
    args = parser.parse_args()
    per_kind = 0
    for shape in LAYERS:
        plan = block_plan(shape, args.block_size)
        padded = math.prod(n * b for n, b in zip(plan.num_blocks, plan.block, strict=True))
        per_kind += sum(2 * padded * b for b in plan.block)
    forward = 2 * BATCH * sum(a * b for a, b in LAYERS)
    backward = 2 * forward - 2 * BATCH * LAYERS[0][0] * LAYERS[0][1]  # no input gradient
    mlp = forward + backward
    print(f"block size {args.block_size}: one kind of blocked product {per_kind / 1e6:.0f} MFLOP, "
          f"three kinds {3 * per_kind / 1e6:.0f} MFLOP; MLP forward + backward (weights only) "
          f"{mlp / 1e6:.0f} MFLOP; ratio {3 * per_kind / mlp:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
