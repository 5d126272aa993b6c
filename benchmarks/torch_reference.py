"""Eager PyTorch SGLD and pSGLD steps of the benchmark MLP, the reference ``step_throughput.py``
compares the library's steps with (when ``import torch`` works).

Both use the potential of :mod:`mlp` (mean cross-entropy plus the N(0, 1) prior over N) and its
learning rates: SGLD ``p ← p − lr·g + √(2·lr/N)·ξ``, pSGLD with RMSprop's ``V ← 0.99·V + 0.01·g²``,
``G^{-1} = 1/(√V + 1e-8)``.
"""

from __future__ import annotations

import math
import time

import numpy as np
from mlp import LAYERS, LEARNING_RATE, NUM_DATA, NUM_PARAMS
from timing import Candidate

HINT = "pip install torch==2.13.0  (a CPU wheel from local disk)"


def _model(torch):
    layers = []
    for i, (n_in, n_out) in enumerate(zip(LAYERS[:-1], LAYERS[1:], strict=True)):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(LAYERS) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    assert sum(p.numel() for p in model.parameters()) == NUM_PARAMS
    return model


def _steps(torch, x, y):
    """The SGLD and pSGLD step functions ``run(n)`` and their models."""
    import torch.nn.functional as F

    def grads(model):
        for p in model.parameters():
            p.grad = None
        loss = F.cross_entropy(model(x), y)
        prior = 0.5 * sum(p.square().sum() for p in model.parameters()) / NUM_DATA
        (loss + prior).backward()

    sgld, psgld = _model(torch), _model(torch)
    lr, plr = LEARNING_RATE["identity"], LEARNING_RATE["rmsprop"]
    sq = [torch.zeros_like(p) for p in psgld.parameters()]

    def run_sgld(n):
        for _ in range(n):
            grads(sgld)
            with torch.no_grad():
                for p in sgld.parameters():
                    p.add_(p.grad, alpha=-lr)
                    p.add_(torch.randn_like(p), alpha=math.sqrt(2.0 * lr / NUM_DATA))

    def run_psgld(n):
        for _ in range(n):
            grads(psgld)
            with torch.no_grad():
                for p, v in zip(psgld.parameters(), sq, strict=True):
                    v.mul_(0.99).addcmul_(p.grad, p.grad, value=0.01)
                    g_diag = v.sqrt().add_(1e-8)
                    p.addcdiv_(p.grad, g_diag, value=-plr)
                    noise = torch.randn_like(p).div_(g_diag.sqrt_())
                    p.add_(noise, alpha=math.sqrt(2.0 * plr / NUM_DATA))

    return (run_sgld, sgld), (run_psgld, psgld)


def one_thread(torch, run):
    """``run`` with ``torch.set_num_threads(1)`` while it runs."""
    threads = torch.get_num_threads()

    def fn(k):
        torch.set_num_threads(1)
        try:
            run(k)
        finally:
            torch.set_num_threads(threads)

    return fn


def candidates(
    batch, chunk: int, torch_chunk: int, with_one_thread: bool
) -> tuple[list[Candidate], str | None]:
    """The eager torch steps as candidates; ``([], None)`` without torch.

    The default-thread steps run ``torch_chunk`` steps per round (they can be very slow: OpenMP
    spin-waiting on a few shared cores); with ``with_one_thread``, two more rows run ``chunk``
    steps with ``torch.set_num_threads(1)``. Returns the candidates and torch's version.
    """
    try:
        import torch
    except ImportError:
        return [], None
    torch.manual_seed(0)
    x = torch.from_numpy(np.array(batch[0], np.float32))
    y = torch.from_numpy(np.array(batch[1], np.int64))
    (run_sgld, sgld), (run_psgld, psgld) = _steps(torch, x, y)
    threads = torch.get_num_threads()
    rows = [
        ("torch SGLD (eager)", run_sgld, sgld, "identity", "torch", torch_chunk),
        ("torch pSGLD (eager)", run_psgld, psgld, "rmsprop", "torch", torch_chunk),
    ]
    if with_one_thread and threads != 1:
        rows += [
            (
                "ref: torch SGLD, 1 thread",
                one_thread(torch, run_sgld),
                sgld,
                "identity",
                "torch1",
                chunk,
            ),
            (
                "ref: torch pSGLD, 1 thread",
                one_thread(torch, run_psgld),
                psgld,
                "rmsprop",
                "torch1",
                chunk,
            ),
        ]
    cands = []
    for name, run, model, metric, group, steps in rows:
        t0 = time.perf_counter()
        run(1)
        finite = lambda m=model: all(bool(torch.isfinite(p).all()) for p in m.parameters())
        c = Candidate(name, lambda r=run, n=steps: r(n), steps, group, metric, finite=finite)
        c.compile_s = time.perf_counter() - t0
        cands.append(c)
    return cands, f"{torch.__version__} (default threads: {threads})"
