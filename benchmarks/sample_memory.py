"""Peak memory of ``sgrld run`` with ``save_samples`` against run length, and of reading samples.

Runs a tiny ``sgrld run`` (digits, one hidden layer, ``save_samples = true``) for ``E`` and
``10·E`` epochs, each in a fresh subprocess, and reports each one's peak resident memory (the
child's own ``ru_maxrss`` from ``os.wait4``) and their ratio: the issue's acceptance is a ratio
within 1.10. The two runs alternate over ``--rounds`` rounds (the harness's rotation,
:func:`timing.rotated`); reported are each round's peaks and the median and range of the
per-round ratios (:func:`timing.paired`). Then, in fresh subprocesses on each run's folder,
the peak memory of reading its samples: :func:`sgrld.load_samples`, one epoch at a time with
:func:`sgrld.samples.results.iter_samples`, :func:`sgrld.to_arviz`, and
:func:`sgrld.samples.arviz_export.export` to Zarr and to netCDF, against the size of the samples on
disk and the memory of the imports.

Usage::

    .venv/bin/python benchmarks/sample_memory.py            # E = 5, 2 rounds: ~2 minutes
    .venv/bin/python benchmarks/sample_memory.py --epochs 3 --width 50
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import environment, fmt_spread, paired, rotated, table  # noqa: E402

READERS = {
    "import sgrld only": "",
    "import sgrld, xarray, zarr, arviz_base": "import xarray, zarr, arviz_base",
    "load_samples": "sgrld.load_samples(out)",
    "iter_samples (one epoch at a time)": "[None for _ in sgrld.samples.results.iter_samples(out)]",
    "to_arviz": "sgrld.to_arviz(out)",
    "export zarr": "sgrld.samples.arviz_export.export(out, 'zarr', to=tmp / 'a.zarr')",
    "export netcdf": "sgrld.samples.arviz_export.export(out, 'netcdf', to=tmp / 'a.nc')",
}
"""What each reading subprocess does after ``import sgrld`` (``out``: a run's folder)."""
READER = (
    "import pathlib, sgrld, sgrld.samples.arviz_export\n"
    "out, tmp = {out!r}, pathlib.Path({tmp!r})\n{code}"
)
"""The reading subprocess's script."""


def peak_mib(argv: list[str], env: dict[str, str]) -> float:
    """Run ``argv`` to its end; its own peak RSS in MiB (Linux reports KiB)."""
    with tempfile.TemporaryFile("w+") as stderr:
        child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            stderr.seek(0)
            raise RuntimeError(f"{argv[:4]} failed ({child.returncode}): {stderr.read()}")
    return usage.ru_maxrss / 1024


def run_args(out: Path, epochs: int, args: argparse.Namespace) -> list[str]:
    """The ``sgrld run`` command of a run of ``epochs`` epochs into ``out``."""
    sets = {
        "data.name": '"digits"',
        "data.batch_size": "32",
        "model.widths": f"[{args.width}]",
        "prior.kind": '"gaussian"',
        "sampler.learning_rate": "0.1",
        "run.epochs": str(epochs),
        "run.burn_in": "0",
        "run.thin": str(args.thin),
        "run.chains": str(args.chains),
        "run.save_samples": "true",
    }
    cmd = [sys.executable, "-m", "sgrld", "run", "--out", str(out), "--overwrite"]
    return cmd + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]


def disk_mib(folder: Path) -> float:
    """The size of the files under ``folder`` in MiB."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=5, help="E: the short run's epochs")
    parser.add_argument("--width", type=int, default=100, help="hidden units")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--thin", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="runs of each length, alternating")
    args = parser.parse_args()
    print(environment())
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    lengths = (args.epochs, 10 * args.epochs)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        peaks: dict[int, list[float]] = {epochs: [] for epochs in lengths}
        for r in range(args.rounds):
            for epochs in rotated(lengths, r):
                peaks[epochs].append(peak_mib(run_args(tmp / f"e{epochs}", epochs, args), env))
        rows = [
            ["sgrld run (each round)", *(" ".join(f"{v:.0f}" for v in peaks[e]) for e in lengths)]
        ]
        for name, code in READERS.items():
            row = [name]
            for epochs in lengths:
                script = READER.format(out=str(tmp / f"e{epochs}"), tmp=str(tmp), code=code)
                row.append(f"{peak_mib([sys.executable, '-c', script], env):.0f}")
            rows.append(row)
        disk = [f"{disk_mib(tmp / f'e{e}' / 'samples'):.1f}" for e in lengths]
    ratio = paired(peaks[lengths[1]], peaks[lengths[0]])
    print(f"digits, widths [{args.width}], {args.chains} chains, thin {args.thin}")
    print(table(["peak RSS MiB", *(f"{e} epochs" for e in lengths)], rows))
    print(f"samples on disk, MiB: {disk[0]} and {disk[1]}")
    print(f"sgrld run peak RSS, {lengths[1]} / {lengths[0]} epochs, per round: {fmt_spread(ratio)}")
    print("(acceptance: <= 1.10)")
    print(
        "@@json "
        + json.dumps({"ratio": ratio._asdict(), "peaks": peaks, "rows": rows, "disk": disk})
    )


if __name__ == "__main__":
    main()
