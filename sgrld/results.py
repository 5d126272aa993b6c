"""Files of a results folder: ``metrics.jsonl``, ``summary.json`` and the saved samples.

JSON is strict (no NaN: a non-finite float is written as ``null``). Samples are written one
``samples/epoch_EEEE.npz`` per epoch, with the global ``step`` of each sample, its ``valid`` mask
``[S, chains]`` and one array ``param{i}`` ``[S, chains, ...]`` per leaf of the parameters.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import jax
import numpy as np

from sgrld.engine import Chunk

PyTree = Any


def json_safe(value: Any) -> Any:
    """Floats that are not finite become ``None`` (JSON has no NaN).

    Example:
        >>> json_safe({"a": [1.0, float("nan")]})
        {'a': [1.0, None]}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str | Path, value: Any) -> None:
    """Write ``value`` as indented JSON, with non-finite floats as ``null``."""
    Path(path).write_text(json.dumps(json_safe(value), indent=2, allow_nan=False) + "\n")


def append_record(path: str | Path, record: dict[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``path`` (``metrics.jsonl``)."""
    with Path(path).open("a") as f:
        f.write(json.dumps(json_safe(record), allow_nan=False) + "\n")


def write_samples(folder: Path, epoch: int, chunk: Chunk) -> None:
    """Write one epoch's kept samples to ``folder/epoch_EEEE.npz`` (nothing if it kept none)."""
    steps = np.asarray(chunk.steps)
    used = steps >= 0
    if not used.any():
        return
    folder.mkdir(parents=True, exist_ok=True)
    leaves = jax.tree.leaves(chunk.params)
    np.savez(
        folder / f"epoch_{epoch:04d}.npz",
        step=steps[used],
        valid=np.asarray(chunk.valid)[used],
        **{f"param{i}": np.asarray(x)[used] for i, x in enumerate(leaves)},
    )


def load_samples(folder: str | Path, template: PyTree) -> tuple[np.ndarray, np.ndarray, PyTree]:
    """Read the samples that ``save_samples=True`` wrote, in step order.

    Args:
        folder: the results folder (holding ``samples/``).
        template: a pytree with the structure of one chain's parameters.

    Returns:
        ``(steps [S], valid [S, chains], params)``, the leaves of ``params`` shaped
        ``[S, chains, ...]``; ``valid`` is False for the copies of a diverged chain's state, which
        were not added to the ensemble.
    """
    files = sorted((Path(folder) / "samples").glob("epoch_*.npz"))
    if not files:
        raise FileNotFoundError(f"no samples in {Path(folder) / 'samples'}")
    loaded = [np.load(f) for f in files]
    treedef = jax.tree.structure(template)
    leaves = [np.concatenate([z[f"param{i}"] for z in loaded]) for i in range(treedef.num_leaves)]
    steps = np.concatenate([z["step"] for z in loaded])
    valid = np.concatenate([z["valid"] for z in loaded])
    return steps, valid, treedef.unflatten(leaves)
