"""``sgrld reproduce psgld``: the experiments of Li, Chen, Carlson & Carin (AAAI 2016),
"Preconditioned stochastic gradient Langevin dynamics for deep neural networks", SGLD beside pSGLD
(:mod:`sgrld_reproductions.psgld.runs`), with the correct noise, with the authors' code's, and
without noise (the optimisers SGD and RMSprop the paper compares with).

Parts (``--parts``):

* ``blr``: Bayesian logistic regression on **a9a** (Table 1: N = 32,561, the 16,281 rows of
  ``a9a.t`` as the test set, d = 123 binary features and an intercept; σ² = 10, minibatches of
  50, 15,000 iterations, burn-in 500, thinning 50, ε = 0.05 for both samplers) and on
  **australian** (Fig. 2: d = 14 standardised features and an intercept, σ² = 100, minibatches
  of 5, 5,000 iterations, ε = 1e-4, the largest of the paper's range 1e-7 … 1e-4). Test error and
  test log-likelihood of each chain's averaged predictive (mean ± std over chains), time per
  iteration of one chain, the smallest ESS over θ's coordinates per second (the paper's "time
  per minimum ESS", inverted), and θ's posterior spread.
* ``gaussian``: the 2-D Gaussian N(0, diag(0.16, 1)) with exact gradients at step sizes ε ∈
  {0.01, 0.03, 0.1, 0.3, 0.5}, 2×10⁵ draws each (4 chains of 50,000 after 1,000 burn-in): the
  covariance reconstruction error, the integrated autocorrelation time and ESS per second (Fig.
  1a); the figure ``psgld_gaussian.png`` shows the first 600 draws at ε = 0.3 (Fig. 1b) and the
  autocorrelations.
* ``fnn``: MNIST 784-W-W-10 ReLU networks (Table 2: W = 400, 800, 1200), all 60,000 training
  images, minibatches of 100, 100 epochs with the step size halved every 20, burn-in 300 and
  thinning 100 iterations; pSGLD (ε = 5e-4) with σ² = 1 and σ² = 100, SGLD (ε = 0.5) with σ² = 1;
  RMSprop and SGD (``none``, below).
* ``cnn``: Li et al.'s CNN (Table 3, :class:`sgrld.bnn.CNN`), 20 epochs, the step size halved
  every 10, σ² = 1; the paper gives no CNN step sizes, so the FNN's are used.

The ``bug`` rows (``--noise``) rerun each setting with the noise of the authors' public code,
variance 2η/N² instead of 2η/N (:func:`sgrld_reproductions.psgld.samplers.temperature`:
T = 1/N). The 2-D Gaussian has N = 1, so it has none. The ``none`` rows (FNN and CNN only) run the
same updates at T = 0, SGD (SGLD's step size) and RMSprop (pSGLD's), and score their last iterate:
Tables 2 and 3's optimiser rows.

Each FNN and CNN run writes its folder ``<out>/<part>/<arch>-<method>-var<σ²>-<noise>/``
(:mod:`sgrld_app.runner`, a checkpoint every epoch). ``--resume`` continues a stopped command: each
of these runs from its newest checkpoint (a finished one is read back), while the BLR and
Gaussian parts, which take minutes, are run again.

**Settings the text does not give, and our choices.**

* The step size ε. Li et al.'s Eq. 2 writes ``Δθ = ε/2·∇log p + N(0, ε)``, i.e. h = ε/2 on U
  (``lr = εN/2``); their MATLAB code writes ``θ ← θ − ε·G⁻¹ḡ + …`` on the per-datum gradient ḡ,
  i.e. ``lr = ε`` (h = ε/N). The FNN's ε = 0.5 (SGLD) and 5e-4 (pSGLD) and a9a's ε = 0.05 only
  make sense in the code's convention: on a9a, h = ε/2 = 0.025 on U is far beyond the stable
  step (N·max eig of the per-datum Hessian ≈ 32,561·0.25·14 ≈ 10⁵). We take ``lr = ε`` there.
  australian's range 1e-7 … 1e-4 only moves the chains in 5,000 iterations in the paper's Eq. 2
  convention (``lr = εN/2``, N·h·λ_min ≪ 1 otherwise); we take that one there. The 2-D Gaussian
  (N = 1) uses Eq. 2's, h = ε/2.
* australian has no test set: 138 rows (20 %, seeded) are held out, N = 552. Burn-in 1,000 and
  thinning 1 (not given); 50 chains, as the paper's 50 runs. a9a: 10 chains (the paper: one).
* pSGLD: V₀ = 0 (Algorithm 1; the code starts from the first ḡ²), α = 0.99, λ = 1e-5, the prior
  in the metric's statistic (as the code), the Γ term dropped (the paper's practical pSGLD).
* Initialisation: θ = 0 for BLR, at the mean for the Gaussian, He-normal for the networks.
* The prior N(0, σ²I) covers every parameter, biases included.
* The networks' ensembles average probabilities (the code averages log-softmax outputs).
* The optimisers (``none``): the paper gives their step sizes (SGD ε = 0.5, RMSprop 5e-4, the
  samplers') but not their loss; we minimise the samplers' potential at σ² = 1 (the prior as
  weight decay) with the same halving, and score the last iterate.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import jax

from sgrld_app import api as app
from sgrld_app.api import ConfigError
from sgrld_reproductions.psgld import figure, runs
from sgrld_reproductions.psgld.figure import FIGURE_STEP
from sgrld_reproductions.psgld.table import (
    ARCHS,
    COLUMNS,  # noqa: F401 - read by Reproduction.from_module, as NOTES
    LR,
    NOTES,  # noqa: F401
    blr_row,
    gaussian_row,
    network_row,
    paper_error,
)
from sgrld_reproductions.scaffolding import (
    OnResult,
    Reproduction,
    Results,
    RunSpec,
    choices_option,
    data_dir_option,
    exit_code_of,
    positive_int,
    progress_line,
    quick_note,
)

PARTS = ("blr", "gaussian", "fnn", "cnn")
GAUSSIAN_STEPS = (0.01, 0.03, 0.1, 0.3, 0.5)
GAUSSIAN = runs.GaussianSettings(chains=4, draws=50_000, burn_in=1_000)
FNN_EPOCHS, FNN_HALVE = 100, 20
CNN_EPOCHS, CNN_HALVE = 20, 10
BURN_IN, THIN = 300, 100

FNN_CASES = (("psgld", 100.0), ("psgld", 1.0), ("sgld", 1.0))
"""Table 2's sampler rows, in its order; the bug and noise-free rows use σ² = 1."""

QUICK_BLR = {"chains": 2, "steps": 600, "burn_in": 100}
QUICK_GAUSSIAN = runs.GaussianSettings(chains=2, draws=2_000, burn_in=100)
QUICK_STEPS = (0.1, FIGURE_STEP)
QUICK_NETWORK = {"train_size": 500, "epochs": 2, "burn_in": 4, "thin": 2}
"""``--quick``: short chains, and the networks on 500 images for 2 epochs, 400-400 only."""


def arch(text: str) -> str:
    """An ``--archs`` entry: hidden widths joined by ``-``, each a positive integer.

    Example:
      >>> arch("400-400")
      '400-400'
    """
    parts = text.split("-")
    if not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected hidden widths joined by '-', e.g. 400-400"
        )
    return text


def options(parser: argparse.ArgumentParser) -> None:
    parts = f"the experiments to run (default: all): {', '.join(PARTS)}"
    choices_option(parser, "--parts", PARTS, parts, metavar="PART")
    keys = [m.key for m in runs.METHODS]
    methods = f"samplers to run (default: both): {', '.join(keys)} (without noise: SGD, RMSprop)"
    choices_option(parser, "--methods", keys, methods, metavar="METHOD")
    noise = (
        "correct (variance 2η/N), bug (the public code's 2η/N²) and/or none (T = 0: SGD "
        "and RMSprop, the paper's optimisers; FNN and CNN only) (default: all three)"
    )
    choices_option(parser, "--noise", runs.NOISES, noise, metavar="NOISE")
    parser.add_argument(
        "--archs",
        nargs="+",
        type=arch,
        metavar="W-W",
        help=f"FNN hidden widths (default: {' '.join(ARCHS)}; {ARCHS[0]} with --quick)",
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        help=f"FNN and CNN epochs (default {FNN_EPOCHS} and {CNN_EPOCHS}); the step size is "
        "halved after every fifth (FNN) or half (CNN) of them, as the paper's L",
    )
    parser.add_argument(
        "--train-size",
        type=positive_int,
        help="FNN and CNN: the first N training images (default: all 60,000)",
    )
    data_dir_option(parser, "base folder with libsvm_a9a/, libsvm_australian/ and mnist/")


def _network_plan(args: argparse.Namespace, part: str) -> runs.NetworkPlan:
    """The epochs, halving, burn-in, thinning and images of the FNN or CNN runs."""
    paper_epochs, paper_halve = (
        (FNN_EPOCHS, FNN_HALVE) if part == "fnn" else (CNN_EPOCHS, CNN_HALVE)
    )
    q = QUICK_NETWORK if args.quick else {}
    epochs = args.epochs or q.get("epochs", paper_epochs)
    halve = max(1, round(epochs * paper_halve / paper_epochs))
    train_size = args.train_size or q.get("train_size")
    burn_in, thin = q.get("burn_in", BURN_IN), q.get("thin", THIN)
    return runs.NetworkPlan(epochs, halve, burn_in, thin, train_size, args.data_dir, args.seed)


def _blr_settings(args: argparse.Namespace, data: str) -> runs.BLRSettings:
    settings = runs.BLR[data]
    if args.quick:
        settings = settings._replace(**QUICK_BLR)
    return settings


def header(args: argparse.Namespace) -> str:
    return (
        f"pSGLD (Li et al. 2016): {', '.join(args.parts)}; {', '.join(args.methods)}; noise "
        f"{', '.join(args.noise)}{quick_note(args)}"
    )


def _methods(args: argparse.Namespace) -> list[runs.Method]:
    return [m for m in runs.METHODS if m.key in args.methods]


def _blr(args: argparse.Namespace, results: Results, on_result: OnResult) -> None:
    for data in runs.BLR:
        settings = _blr_settings(args, data)
        problem = runs.load_blr(settings, args.data_dir, args.seed)
        for noise in (n for n in args.noise if n != "none"):  # Table 1 has no optimisers
            for method in _methods(args):
                key = jax.random.fold_in(jax.random.key(args.seed), runs.METHODS.index(method))
                run = runs.blr_run(key, method, noise, settings, problem)
                results["rows"].append(blr_row(data, method, noise, run))
                on_result(results)


def _gaussian(args: argparse.Namespace, results: Results, on_result: OnResult) -> None:
    settings = QUICK_GAUSSIAN if args.quick else GAUSSIAN
    for step in QUICK_STEPS if args.quick else GAUSSIAN_STEPS:
        for method in _methods(args):
            key = jax.random.fold_in(jax.random.key(args.seed), runs.METHODS.index(method))
            run, draws = runs.gaussian_run(key, method, step, settings)
            if step == FIGURE_STEP:
                results["figure"][method.name] = draws[0]
            results["rows"].append(gaussian_row(method, step, run))
            on_result(results)


def _networks(args: argparse.Namespace, part: str, results: Results, on_result: OnResult) -> bool:
    """Run the FNN or CNN rows; False if a run was interrupted."""
    plan = _network_plan(args, part)
    if part == "fnn":
        archs = args.archs or (ARCHS[:1] if args.quick else ARCHS)
        nets = [runs.Network(a, "mlp", tuple(int(w) for w in a.split("-"))) for a in archs]
    else:
        nets = [runs.Network("CNN", "cnn", (200, 200))]
    methods = {m.key: m for m in runs.METHODS}
    for net in nets:
        for noise in args.noise:
            cases = FNN_CASES if part == "fnn" else (("psgld", 1.0), ("sgld", 1.0))
            for key, prior_var in cases:
                if (noise != "correct" and prior_var != 1.0) or key not in args.methods:
                    continue
                paper = paper_error(part, key, prior_var, noise, net.label)
                method = methods[key]
                folder = Path(args.out) / part / f"{net.label}-{key}-var{prior_var:g}-{noise}"
                spec = RunSpec(folder, progress=True, resume=args.resume)
                run = runs.network_run(method, net, prior_var, noise, LR[key], plan, spec)
                row = network_row(part, net.label, method, prior_var, noise, paper, run)
                results["rows"].append(row)
                on_result(results)
                if run["status"] == "interrupted":
                    return False
    return True


def compute(args: argparse.Namespace, on_result: OnResult) -> Results:
    """Run the parts asked for, in :data:`PARTS` order (``ConfigError`` if that is nothing)."""
    if set(args.parts) == {"blr"} and set(args.noise) == {"none"}:
        raise ConfigError(
            "--noise none runs the optimisers of the fnn and cnn parts (Li et al.'s Tables 2 "
            "and 3) and BLR has none: nothing to run with --parts blr"
        )
    config: dict[str, Any] = {"title": header(args), "quick": args.quick, "seed": args.seed}
    config |= {"parts": args.parts, "methods": args.methods, "noise": args.noise}
    parts = [p for p in PARTS if p in args.parts]
    if "blr" in parts:
        config["blr"] = {d: _blr_settings(args, d)._asdict() for d in runs.BLR}
    if "gaussian" in parts:
        config["gaussian"] = (QUICK_GAUSSIAN if args.quick else GAUSSIAN)._asdict()
    for part in ("fnn", "cnn"):
        if part in parts:
            config[part] = _network_plan(args, part)._asdict()
    results: Results = {"config": config, "rows": [], "figure": {}}
    for part in parts:
        if part == "blr":
            _blr(args, results, on_result)
        elif part == "gaussian":
            _gaussian(args, results, on_result)
        elif not _networks(args, part, results, on_result):
            break
    return results


def progress(results: Results) -> str:
    """The last row in a line."""
    row, fmt = results["rows"][-1], app.format_value
    scores = [f"test err. {row['error']}", f"log-lik. {row['loglik']}"]
    scores += [f"{fmt(row['ms'], '{:.3g}')} ms/iter", f"min ESS/s {fmt(row['ess'], '{:.3g}')}"]
    head = f"{row['data']} {row['method']} ({row['noise']} noise)"
    return progress_line(head, scores, row["run"])


def caption(results: Results) -> str:
    return f"{results['config']['title']}. Ours beside the paper's test error (paper)."


def exit_code(results: Results) -> int:
    """130 if a run was interrupted, 1 if one diverged, else 0.

    Example:
      >>> exit_code({"rows": [{"status": "completed"}, {"status": "diverged"}]})
      1
    """
    rows = results["rows"]
    return exit_code_of(rows, any(row["status"] == "diverged" for row in rows))


REPRODUCTION = Reproduction.from_module(
    globals(),
    plot=figure.plot,
    summary="Li et al. (2016): SGLD and pSGLD on BLR, a 2-D Gaussian, MNIST FNNs and the CNN",
    quick_help="a smoke test: short BLR chains, 2 step sizes of the Gaussian, the networks on "
    f"{QUICK_NETWORK['train_size']} images for {QUICK_NETWORK['epochs']} epochs",
    resumable=True,
)
