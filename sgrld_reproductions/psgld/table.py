"""The table of ``sgrld reproduce psgld``: the paper's settings and numbers (Li et al., 2016,
Tables 1-3), the columns, and one row per run of :mod:`sgrld_reproductions.psgld.runs` beside the
paper's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sgrld_app import api as app
from sgrld_reproductions.psgld import runs

ARCHS = ("400-400", "800-800", "1200-1200")
"""Table 2's architectures (hidden widths), the FNNs run by default."""
LR = {"sgld": 0.5, "psgld": 5e-4}
"""The FNN's step sizes ε (= our lr), used for the CNN too."""

PAPER_FNN = {
    ("psgld", 100.0): (1.40, 1.26, 1.14),
    ("psgld", 1.0): (1.45, 1.32, 1.24),
    ("sgld", 1.0): (1.64, 1.41, 1.40),
}
"""Table 2: test error (%) at 400-400, 800-800, 1200-1200, by (method, σ²)."""
PAPER_CNN = {"psgld": 0.45, "sgld": 0.71}
"""Table 3: test error (%)."""
PAPER_OPTIMISERS = {
    "fnn": {"psgld": (1.59, 1.43, 1.39), "sgld": (1.72, 1.47, 1.47)},
    "cnn": {"psgld": (0.65,), "sgld": (0.82,)},
}
"""Tables 2 and 3: test error (%) of RMSprop (``psgld`` without noise) and SGD (``sgld``)."""

COLUMNS = app.columns("""
    part       part
    data       data
    method     method
    noise      noise
    lr         lr
    error      test err. %      {:>}
    paper      paper            {:>}
    loglik     test log-lik.    {:>}
    ms         ms/iter          {:.3g}
    ess        min ESS/s        {:.3g}
    spread     post. std        {:.3g}
    cov_error  cov. err.        {:.3f}
    iat        IAT              {:.1f}
    status     status
""")
"""The table's columns: ours beside the paper's test error."""

NOTES = (
    "lr: our learning_rate = h·N (θ ← θ − lr·G⁻¹∇Û/N + √(2·lr·T/N)·G^{-1/2}ξ); the paper's ε is "
    "lr on a9a and MNIST (its code's convention), 2·lr/N on australian and 2·lr on the Gaussian "
    "(its Eq. 2). noise: correct (T = 1), bug (the public code's variance 2η/N², T = 1/N) or "
    "none (T = 0: SGD and RMSprop, the paper's optimisers, at their last iterate). test "
    "err. %, test log-lik.: of the averaged predictive (BLR: each chain's own, mean ± std over "
    "chains; MNIST: one run's ensemble of the samples after burn-in 300, every 100th iteration); "
    "log-lik. is the mean over test points of log p̄(y|x). paper: Li et al. (2016) Tables 1-3 "
    "(australian and the Gaussian: figures only, no numbers). ms/iter: one chain's time per "
    "iteration, compilation excluded (BLR, Gaussian: a scan of up to 2,000 iterations; MNIST: the "
    "median epoch's sampling time per iteration). min ESS/s: the smallest bulk ESS (ArviZ) over "
    "θ's coordinates, per chain, per second of one chain's iterations (burn-in included). post. "
    "std: the median over θ's coordinates of their std across the chains' last draws (all chains "
    "start at θ = 0). cov. err.: "
    "‖Σ̂ − Σ‖_F/‖Σ‖_F. IAT: draws per effective sample (the worse coordinate). —: not measured, "
    "not in the paper, or diverged."
)


def _spread(values: list[float | None], fmt: str) -> str:
    """``mean ± std`` (ddof 0) of the values, the value alone for one, or —."""
    values = [v for v in values if v is not None]
    if not values:
        return app.MISSING
    mean = fmt.format(float(np.mean(values)))
    return mean if len(values) < 2 else f"{mean} ± {fmt.format(float(np.std(values)))}"


def _paper(value: float | None) -> str:
    return app.MISSING if value is None else f"{value:.2f}"


def blr_row(data: str, method: runs.Method, noise: str, run: dict[str, Any]) -> dict[str, Any]:
    """A BLR table row from :func:`~sgrld_reproductions.psgld.runs.blr_run`'s result.

    Example:
      >>> run = {"status": "completed", "errors": [14.8, 15.0], "log_likelihoods": [-0.3, -0.3],
      ...        "step_seconds": 2e-5, "min_ess_per_s": 5.0, "posterior_std": 0.1, "seconds": 9}
      >>> row = blr_row("a9a", runs.METHODS[1], "correct", run)
      >>> row["error"], row["paper"], row["method"], row["ms"]
      ('14.90 ± 0.10', '14.85', 'pSGLD', 0.02)
    """
    settings = runs.BLR[data]
    return {
        "part": "blr",
        "data": data,
        "method": method.name,
        "noise": noise,
        "lr": f"{settings.learning_rate:.3g}",
        "error": _spread(run["errors"], "{:.2f}"),
        "paper": _paper(settings.paper_error if noise == "correct" else None),
        "loglik": _spread(run["log_likelihoods"], "{:.4f}"),
        "ms": 1e3 * run["step_seconds"],
        "ess": run["min_ess_per_s"],
        "spread": run["posterior_std"],
        "cov_error": None,
        "iat": None,
        "status": run["status"],
        "run": run,
    }


def gaussian_row(method: runs.Method, step: float, run: dict[str, Any]) -> dict[str, Any]:
    """A 2-D Gaussian table row from :func:`~sgrld_reproductions.psgld.runs.gaussian_run`'s row.

    Example:
      >>> run = {"status": "completed", "step_seconds": 2e-6, "cov_error": 0.1, "iat": 12.0,
      ...        "min_ess_per_s": 3e4, "seconds": 9.0}
      >>> row = gaussian_row(runs.METHODS[1], 0.3, run)
      >>> row["data"], row["lr"], row["cov_error"], row["error"]
      ('2-D Gaussian, ε = 0.3', '0.15', 0.1, '—')
    """
    return {
        "part": "gaussian",
        "data": f"2-D Gaussian, ε = {step:g}",
        "method": method.name,
        "noise": "correct",
        "lr": f"{step / 2:g}",
        "error": app.MISSING,
        "paper": app.MISSING,
        "loglik": app.MISSING,
        "ms": 1e3 * run["step_seconds"],
        "ess": run.get("min_ess_per_s"),
        "spread": None,
        "cov_error": run.get("cov_error"),
        "iat": run.get("iat"),
        "status": run["status"],
        "run": run,
    }


def paper_error(part: str, key: str, prior_var: float, noise: str, arch: str) -> float | None:
    """The paper's test error (%) beside a network row: the sampler's with the correct noise,
    the optimiser's (Tables 2, 3) without noise, none for the bug or an architecture not in
    Table 2.

    Example:
      >>> paper_error("fnn", "psgld", 1.0, "correct", "800-800")
      1.32
      >>> paper_error("fnn", "psgld", 1.0, "none", "800-800")
      1.43
      >>> paper_error("cnn", "sgld", 1.0, "none", "CNN")
      0.82
      >>> paper_error("fnn", "sgld", 1, "bug", "400-400"), paper_error("fnn", "sgld", 1, "none", "")
      (None, None)
    """
    if noise == "bug" or (part == "fnn" and arch not in ARCHS):
        return None
    index = ARCHS.index(arch) if part == "fnn" else 0
    if noise == "none":
        return PAPER_OPTIMISERS[part][key][index]
    return PAPER_FNN[key, prior_var][index] if part == "fnn" else PAPER_CNN[key]


def network_row(
    part: str, label: str, method: runs.Method, prior_var: float, noise: str, paper: float | None,
    run: dict[str, Any],
) -> dict[str, Any]:  # fmt: skip
    """An MNIST table row from :func:`~sgrld_reproductions.psgld.runs.network_run`'s result.

    Example:
      >>> run = {"status": "completed", "error": 1.5, "log_likelihood": -0.05, "samples": 3,
      ...        "step_seconds": 0.012, "seconds": 700.0, "message": ""}
      >>> row = network_row("fnn", "400-400", runs.METHODS[0], 1.0, "correct", 1.64, run)
      >>> row["data"], row["lr"], row["error"], row["paper"], row["ms"]
      ('400-400, σ² = 1', '0.5', '1.50', '1.64', 12.0)
      >>> network_row("fnn", "400-400", runs.METHODS[0], 1.0, "none", 1.72, run)["method"]
      'SGD'
    """
    fmt = lambda v, f: app.MISSING if v is None else f.format(v)
    return {
        "part": part,
        "data": f"{label}, σ² = {prior_var:g}",
        "method": method.label(noise),
        "noise": noise,
        "lr": f"{LR[method.key]:g}",
        "error": fmt(run["error"], "{:.2f}"),
        "paper": _paper(paper),
        "loglik": fmt(run["log_likelihood"], "{:.4f}"),
        "ms": None if run["step_seconds"] is None else 1e3 * run["step_seconds"],
        "ess": None,
        "spread": None,
        "cov_error": None,
        "iat": None,
        "status": run["status"],
        "run": run,
    }
