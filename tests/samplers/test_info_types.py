"""The ``info`` types are declared classes a type checker sees (issue 52): mypy accepts a read of
each type's own field and rejects a read of a field the type does not have."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

READS_FIELDS = """\
from sgrld import ISGDInfo, MomentumInfo, StepInfo
from sgrld.samplers.info import SGRLDShareInfo


def fields(a: StepInfo, b: SGRLDShareInfo, c: MomentumInfo, d: ISGDInfo) -> tuple[object, ...]:
    return a.grad_norm, b.share_mean, b.is_finite, c.kinetic, c.thermostat, d.warming_up
"""

READS_MISSING = """\
from sgrld import StepInfo
from sgrld.samplers.info import SGRLDShareInfo


def fields(a: StepInfo, b: SGRLDShareInfo) -> tuple[object, ...]:
    return a.share_mean, b.kinetic
"""


@pytest.mark.long
def test_mypy_knows_every_info_field(tmp_path):
    (tmp_path / "reads_fields.py").write_text(READS_FIELDS)
    (tmp_path / "reads_missing.py").write_text(READS_MISSING)
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    command = [sys.executable, "-m", "mypy", "--cache-dir", os.devnull, "--follow-imports=silent"]
    out = subprocess.run(
        [*command, "reads_fields.py", "reads_missing.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'reads_missing.py:6: error: "StepInfo" has no attribute "share_mean"  [attr-defined]',
        'reads_missing.py:6: error: "SGRLDShareInfo" has no attribute "kinetic"  [attr-defined]',
    ], out.stdout + out.stderr
