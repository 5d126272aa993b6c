"""The figure of ``sgrld reproduce psgld`` (:mod:`sgrld_reproductions.psgld`): the paper's Fig. 1,
SGLD and pSGLD on the 2-D Gaussian.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sgrld_app import api as app
from sgrld_reproductions.psgld import runs
from sgrld_reproductions.scaffolding import Results

FIGURE_STEP = 0.3
"""The step size of the figure's draws (the paper's Fig. 1b)."""
FIGURE_DRAWS, FIGURE_LAGS = 600, 60


def autocorrelation(x: np.ndarray, max_lag: int) -> np.ndarray:
    """The sample autocorrelation of a series at lags 0 … ``max_lag`` (FFT, biased estimator).

    Example:
      >>> autocorrelation(np.array([1.0, -1.0, 1.0, -1.0]), 2).round(2).tolist()
      [1.0, -0.75, 0.5]
    """
    x = np.asarray(x, np.float64) - np.mean(x)
    n = len(x)
    f = np.fft.rfft(x, 2 * n)
    acov = np.fft.irfft(f * np.conj(f))[: max_lag + 1]
    return acov / acov[0]


def plot(results: Results, out: Path) -> list[Path]:
    """``psgld_gaussian.png`` (the paper's Fig. 1): the covariance error and IAT of SGLD and pSGLD
    against ε; the first 600 draws of each at ε = 0.3 over the target's 1- and 2-σ ellipses; the
    autocorrelations of both coordinates at ε = 0.3 (nothing without the Gaussian part)."""
    draws = results["figure"]
    if not draws:
        return []
    plt = app.pyplot()
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8), constrained_layout=True)
    error, axes = axes[0], axes[1:]
    twin = error.twinx()
    for name, color in zip(draws, ("C0", "C1"), strict=False):
        rows = [r for r in results["rows"] if r["part"] == "gaussian" and r["method"] == name]
        rows = [r for r in rows if r["cov_error"] is not None]
        steps = [2 * float(r["lr"]) for r in rows]
        error.loglog(steps, [r["cov_error"] for r in rows], "o-", color=color, label=name)
        twin.loglog(steps, [r["iat"] for r in rows], "s:", color=color)
    error.set(title="cov. error (—) and IAT (⋯)", xlabel="ε", ylabel="‖Σ̂ − Σ‖_F/‖Σ‖_F")
    twin.set_ylabel("IAT")
    error.legend(fontsize=8, loc="upper center")
    angle = np.linspace(0, 2 * math.pi, 200)
    sd = np.sqrt(np.diag(runs.GAUSSIAN_COV))
    for ax, (name, x) in zip(axes[:2], draws.items(), strict=False):
        for k in (1, 2):
            ax.plot(k * sd[0] * np.cos(angle), k * sd[1] * np.sin(angle), "k--", lw=0.7)
        ax.plot(x[:FIGURE_DRAWS, 0], x[:FIGURE_DRAWS, 1], ".-", ms=3, lw=0.3)
        ax.set(title=f"{name}, ε = {FIGURE_STEP:g}: first {FIGURE_DRAWS} draws", xlabel="θ₁")
        ax.set(ylabel="θ₂", xlim=(-3, 3), ylim=(-3, 3))
    for name, x in draws.items():
        for dim, style in ((0, "-"), (1, "--")):
            acf = autocorrelation(x[:, dim], FIGURE_LAGS)
            axes[2].plot(acf, style, label=f"{name}, θ{dim + 1}")
    axes[2].set(title="autocorrelation", xlabel="lag", ylim=(-0.1, 1.0))
    axes[2].legend(fontsize=8)
    return [app.save_figure(fig, out / "psgld_gaussian.png", dpi=100)]
