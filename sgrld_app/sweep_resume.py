"""Resuming a sweep: the grid and replicates stored with a sweep's run, and the refusal to resume
it with others (:func:`sgrld_app.sweep.run_sweep` with ``existing="resume"``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sgrld_app import checkpoint
from sgrld_app.config import ConfigError


def stored_sweep(folder: Path) -> dict[str, Any] | None:
    """The grid and replicates of the sweep in ``folder``, ``{"grid": {key: values},
    "replicates": R}``, from the run's ``meta`` in its ``summary.json`` (written when a run
    starts, resumed or not) or else in its newest checkpoint.

    Returns:
        ``None`` if there is neither: the sweep stopped before its run started, so resuming
        starts it over.

    Raises:
        ConfigError: the run in ``folder`` is not a sweep.

    Example:
        >>> import tempfile
        >>> stored_sweep(Path(tempfile.mkdtemp())) is None
        True
    """
    try:
        meta = json.loads((folder / "summary.json").read_text()).get("meta", {})
    except FileNotFoundError:
        saved = checkpoint.latest(folder)
        if saved is None:
            return None
        meta = saved.info["meta"]
    if "sweep" not in meta:
        raise ConfigError(
            f"--resume {folder}: the run there is not a sweep (sgrld run --resume continues it)"
        )
    return meta["sweep"]


def check_resumable_grid(folder: Path, grid: Mapping[str, list[float]], replicates: int) -> None:
    """Refuse to resume the sweep in ``folder`` with another grid or number of replicates (the
    configuration is checked by :func:`sgrld_app.launch.check_resumable`).

    Raises:
        ConfigError: naming each ``--grid`` key and ``--replicates`` that differ.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> sweep = {"grid": {"sampler.learning_rate": [0.1, 0.2]}, "replicates": 2}
        >>> _ = (folder / "summary.json").write_text(json.dumps({"meta": {"sweep": sweep}}))
        >>> check_resumable_grid(folder, {"sampler.learning_rate": [0.1, 0.2]}, 2)
        >>> check_resumable_grid(folder, {"sampler.learning_rate": [0.1, 0.3]}, 2)
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: --resume ...: the sweep there has another grid:
        --grid sampler.learning_rate (was [0.1, 0.2], now [0.1, 0.3]). Resume with ...
    """
    before = stored_sweep(folder)
    if before is None:
        return
    now = {"grid": dict(grid), "replicates": replicates}
    differ = [
        f"--{d}" if d.startswith("replicates") else f"--grid {d.removeprefix('grid.')}"
        for d in checkpoint.differences(before, now)
    ]
    if differ:
        raise ConfigError(
            f"--resume {folder}: the sweep there has another grid: {'; '.join(differ)}. Resume "
            "with its --grid and --replicates (give none: they are used), or start afresh with "
            "--overwrite"
        )
