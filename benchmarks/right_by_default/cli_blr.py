"""Issue 36's BLR bar measured through the command line: ``sgrld run`` on australian with the
CLI's default sampler settings, the saved samples scored against NUTS, for DOP, QDOP, RMSprop and
Monge at decay 0.9, 0.99 and 1/√t.

Each row writes a configuration and runs it as ``python -m sgrld run CONFIG`` in a child process
(the CLI's entry point; its wall time, start-up and compilation included, is the row's time), then
reads ``samples/`` back (:func:`sgrld.load_samples`) and scores the pooled draws with
``tests/blr_reference.py``'s whitened mean and covariance errors against
``tests/data/australian_blr_nuts.npz``. The configuration sets only the problem, the metric, the
learning rate and the run length:

* ``[data]``: australian, every row for training (``test_size = 0``, as the NUTS reference, no
  test scores), full-batch gradients (``batch_size = 690``: an epoch is one step) or
  ``--batch-size`` rows a step;
* ``[model]`` ``logistic_regression``; ``[prior]`` ``gaussian`` with ``weight_scale = 10·√14``
  and ``bias_scale = 10``, i.e. N(0, 10² I) on the 15 parameters (checked before the first row:
  the run's log posterior minus the reference's is constant);
* ``[sampler]``: the metric, its decay (and RMSprop's ``eps = 1e-8``, Monge's ``alpha2 = 100``) and
  ``learning_rate``: 0.02 (DOP, QDOP), 0.01 (RMSprop), 0.5 (Monge), as RESULTS §29's library
  table. Variant ``default``: nothing else (``adapt_until = "auto"``, no Γ); variant ``Γ``:
  ``correction = "hutchinson"`` adapting throughout (``adapt_until = "never"``), the share at its
  default ``correction_scale = "auto"``; variant ``frozen``: the metric adapts through the whole
  burn-in and is frozen after it (``adapt_until`` = the burn-in), the reference of the issue's
  minibatch bar; ``none``: adapting throughout without Γ; ``full Γ``: adapting throughout with
  ``correction_scale = 1``;
* ``[run]``: ``--chains`` chains from the CLI's own initialisation (He-normal weights, zero
  bias, not the NUTS mean), ``--burn-in`` steps, then ``--steps`` kept every 10th.

The data are read from ``../shared/data`` (``--data-dir``); without them the script says so and
exits 0.

    python benchmarks/right_by_default/cli_blr.py [--chains 256] [--steps 16000] [--burn-in 1000]
        [--decays 0.9 0.99 inverse_sqrt] [--only fisher_qdiag ...] [--variants default Γ frozen]
        [--batch-size 690]
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the tests package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # timing.py

import numpy as np  # noqa: E402
from timing import environment, table  # noqa: E402

DATA_DIR = ROOT.parent / "shared" / "data"
METRICS = {
    "fisher_diag": ("DOP", 0.02, {}),
    "fisher_qdiag": ("QDOP", 0.02, {}),
    "rmsprop": ("RMSprop", 0.01, {"eps": 1e-8}),
    "monge": ("Monge", 0.5, {"alpha2": 100.0}),
}
"""``sampler.metric`` -> (its name in the table, learning rate, other ``metric_params``)."""
VARIANTS = {
    "default": lambda burn_in: "",
    "Γ": lambda burn_in: 'correction = "hutchinson"\nadapt_until = "never"\n',
    "frozen": lambda burn_in: f"adapt_until = {burn_in}\n",
    "none": lambda burn_in: 'adapt_until = "never"\n',
    "full Γ": lambda burn_in: (
        'correction = "hutchinson"\nadapt_until = "never"\ncorrection_scale = 1.0\n'
    ),
}
"""Variant -> the ``[sampler]`` lines it adds, given the burn-in."""
PRIOR_SCALE = 10.0
FEATURES, ROWS = 14, 690


def config_text(metric: str, decay: str, variant: str, args, folder: Path) -> str:
    """The TOML of one row."""
    _, lr, extra = METRICS[metric]
    params = {"decay": decay if decay == "inverse_sqrt" else float(decay), **extra}
    inline = ", ".join(
        f'{k} = "{v}"' if isinstance(v, str) else f"{k} = {v!r}" for k, v in params.items()
    )
    epochs = math.ceil((args.burn_in + args.steps) / (ROWS // args.batch_size))
    weight_scale = PRIOR_SCALE * math.sqrt(FEATURES)  # the prior scales weights by 1/√fan-in
    return (
        f'[data]\nname = "australian"\ndata_dir = "{args.data_dir}"\ntest_size = 0\n'
        f"batch_size = {args.batch_size}\n\n"
        '[model]\nkind = "logistic_regression"\n\n'
        f'[prior]\nkind = "gaussian"\nparams = {{ weight_scale = {weight_scale!r}, '
        f"bias_scale = {PRIOR_SCALE} }}\n\n"
        f'[sampler]\nmetric = "{metric}"\nmetric_params = {{ {inline} }}\nlearning_rate = {lr}\n'
        f"{VARIANTS[variant](args.burn_in)}\n"
        f"[run]\nepochs = {epochs}\nburn_in = {args.burn_in}\nthin = 10\nchains = {args.chains}\n"
        f"seed = {args.seed}\nsave_samples = true\n\n"
        f'[out]\nfolder = "{folder}"\n'
    )


def check_posterior(config: Path) -> float:
    """The spread over random θ of the run's log posterior minus the reference's (0 up to float32
    rounding: same data, labels, likelihood and prior, up to a constant)."""
    import jax
    import jax.numpy as jnp

    from sgrld_app.config import load_config
    from sgrld_app.from_config import log_posterior
    from tests import blr_reference as ref

    problem = ref.load_problem(
        Path(load_config(config).data.data_dir) / "libsvm_australian" / "australian"
    )
    batch = (jnp.asarray(problem.x, jnp.float32), jnp.asarray(problem.y, jnp.float32))
    ours = log_posterior(load_config(config))
    diffs = []
    for seed in range(4):
        theta = np.random.default_rng(seed).normal(size=FEATURES + 1)
        params = ref.as_params(theta)
        theirs = jnp.sum(ref.loglik_fn(params, batch)) + ref.logprior_fn(params)
        diffs.append(float(ours({"net": params, "prior": {}})) - float(theirs))
    jax.clear_caches()
    return max(diffs) - min(diffs)


def run_row(metric: str, decay: str, variant: str, args, work: Path) -> tuple[float, float, float]:
    """``(mean error, covariance error, seconds)`` of one row."""
    from sgrld import load_samples
    from tests import blr_reference as ref

    folder = work / f"{metric}-{decay}-{variant}"
    config = work / f"{metric}-{decay}-{variant}.toml"
    config.write_text(config_text(metric, decay, variant, args, folder))
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "sgrld", "run", str(config), "--overwrite"],
        capture_output=True,
        text=True,
    )
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{config}: sgrld run exited {done.returncode}\n{done.stderr[-3000:]}")
    draws = ref.as_vector(load_samples(folder).params["net"]).astype(np.float64)
    draws = draws.reshape(-1, FEATURES + 1)
    reference = np.load(ref.REFERENCE)
    mean, cov = draws.mean(axis=0), np.cov(draws, rowvar=False)
    return (*ref.whitened_errors(mean, cov, reference["mean"], reference["cov"]), seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=256)
    parser.add_argument("--steps", type=int, default=16_000, help="steps after the burn-in")
    parser.add_argument("--burn-in", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=ROWS, help="rows a step (690: full)")
    parser.add_argument("--decays", nargs="+", default=["0.9", "0.99", "inverse_sqrt"])
    parser.add_argument("--only", nargs="+", choices=sorted(METRICS), help="metrics to run")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--work", type=Path, help="folder for the runs (default: a temporary one)")
    args = parser.parse_args()
    if not 1 <= args.batch_size <= ROWS:
        parser.error(f"--batch-size must be 1 to {ROWS}, got {args.batch_size}")
    if not (args.data_dir / "libsvm_australian" / "australian").is_file():
        print(f"skipped: no {args.data_dir}/libsvm_australian/australian (--data-dir)")
        return 0
    print(environment())
    print(
        f"sgrld run: {args.chains} chains x {args.steps} steps after {args.burn_in}, thin 10, "
        f"batch {args.batch_size}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        probe = work / "probe.toml"
        probe.write_text(config_text("fisher_qdiag", "0.9", "default", args, work / "probe"))
        print(f"log posterior - reference's, spread over 4 random θ: {check_posterior(probe):.2e}")
        rows = []
        for metric in args.only or METRICS:
            for decay in args.decays:
                for variant in args.variants:
                    mean_err, cov_err, seconds = run_row(metric, decay, variant, args, work)
                    ok = "yes" if max(mean_err, cov_err) <= 0.1 else "no"
                    name = "1/√t" if decay == "inverse_sqrt" else decay
                    rows.append(
                        [
                            METRICS[metric][0],
                            name,
                            variant,
                            f"{mean_err:.3f} / {cov_err:.3f}",
                            ok,
                            f"{seconds:.0f}",
                        ]
                    )
                    print("  " + " | ".join(rows[-1]), flush=True)
    print(table(["metric", "decay", "variant", "mean / cov err", "≤ 0.1", "wall s"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
