"""Dependencies: what sgrld and sgrld_app import is declared, what is declared is imported, and
``import sgrld`` stays light (no Flax, no scikit-learn) while the lazy submodules still work."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMPORT_NAMES = {"scikit-learn": "sklearn", "arviz-base": "arviz_base", "arviz-stats": "arviz_stats"}
"""Distribution name -> module name, where they differ."""
FILE_ENGINES = {"h5py", "pyarrow"}
"""Declared, never imported: h5netcdf's backend, which xarray loads by name to write netCDF (sgrld
export; h5netcdf itself is imported to read an earlier export's attributes), and pandas's Parquet
engine (``sgrld.data.load_file``)."""


def third_party_imports() -> set[str]:
    stdlib = set(sys.stdlib_module_names)
    found = set()
    for path in [*(ROOT / "sgrld").rglob("*.py"), *(ROOT / "sgrld_app").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            found |= {n.split(".")[0] for n in names}
    return {n for n in found if n not in stdlib and n not in ("sgrld", "sgrld_app", "__future__")}


ADAPTER_EXTRAS = ("equinox", "files")
"""Optional extras imported lazily: an adapter's (``sgrld.bnn.adapters``; Haiku's adapter takes a
transformed function and imports nothing) and the table readers' (``sgrld.data.load_file``)."""


def declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = [d for e in ADAPTER_EXTRAS for d in project["optional-dependencies"][e]]
    names = {re.split(r"[<>=!~\[ ;]", d)[0] for d in [*project["dependencies"], *extras]}
    return {IMPORT_NAMES.get(n, n) for n in names} - FILE_ENGINES


def test_imported_equals_declared():
    assert third_party_imports() == declared()


def run(code: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()


def test_import_sgrld_loads_no_flax_or_scikit_learn_and_the_digits_need_none():
    code = (
        "import sys, sgrld\n"
        "heavy = ('flax', 'sklearn', 'matplotlib', 'arviz_base', 'arviz_stats', 'xarray')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
        "sgrld.bnn.MLP, sgrld.data.DATASETS, sgrld.evaluation.curvature\n"
        "print('flax' in sys.modules)\n"
        "sgrld.data.load_dataset('digits')\n"  # read from scikit-learn's file, not its import
        "print('sklearn' in sys.modules)"
    )
    assert run(code).splitlines() == ["[]", "True", "False"]


def test_config_loads_no_flax_until_a_prior_is_built():
    code = (
        "import sys\n"
        "from sgrld_app.config import PRIORS, Config, load_config, to_toml\n"
        "to_toml(Config()), load_config(None, ['prior.kind=horseshoe']), 'laplace' in PRIORS\n"
        "print('flax' in sys.modules)\n"
        "PRIORS['laplace']\n"
        "print('flax' in sys.modules)"
    )
    assert run(code).splitlines() == ["False", "True"]


def test_python_dash_m_sgrld():
    out = subprocess.run(
        [sys.executable, "-m", "sgrld", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert out.returncode == 0 and "reproduce" in out.stdout
