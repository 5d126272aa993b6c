"""Files of a results folder: ``metrics.jsonl``, ``summary.json`` and the saved samples.

JSON is strict (no NaN: a non-finite float is written as ``null``). Every file but ``metrics.jsonl``
(appended line by line) is written atomically (:mod:`sgrld.samples.atomic`). Samples are written one
``samples/epoch_EEEE.npz`` per epoch, holding the global ``step`` of each sample ``[S]``, its
``valid`` mask ``[S, chains]``, one array ``params/NAME`` ``[S, chains, ...]`` per parameter leaf
and one array ``stats/FIELD`` ``[S, chains]`` per field of the sampler's ``info`` at the kept step
and per evaluation set ``NAME``: ``stats/NAME_log_likelihood``, the draw's own mean log-likelihood
on that set (:func:`sgrld_app.scoring.score_function`). ``samples/params.json`` names the leaves by
their pytree paths, so :func:`load_samples` rebuilds the parameters with no template.

Why one file per epoch and not one Zarr store appended to: the writer already streams (the engine
hands over one epoch's samples, which are written and dropped), each file is whole or absent after a
kill (:mod:`sgrld.samples.atomic`), and a resume cuts later epochs back by deleting their files
(:func:`sgrld_app.run_folder.cut_back`). A Zarr append resizes the array's metadata and writes chunk
files separately, so a kill between them leaves draws that read back as fill values, and cutting
back means resizing the store. So the writer's memory does not grow with the run's length; what
grows is on the reading side, which is therefore streamed: :func:`iter_samples` reads one epoch at a
time, :func:`load_samples` copies the epochs into arrays of the run's size (its peak is the samples
plus one epoch), and :func:`sgrld.samples.arviz_export.export` appends epoch by epoch to a Zarr
store that xarray opens lazily. The peaks of each are in ``benchmarks/RESULTS.md`` (§18,
``benchmarks/sample_memory.py``).
"""

from __future__ import annotations

import json
import math
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np

from sgrld.chains.engine import Chunk
from sgrld.chains.summaries import ENGINE_FIELDS
from sgrld.numerics.pytrees import PyTree
from sgrld.samples import atomic

KeyPath = tuple[str | int, ...]
ROOT_NAME = "params"
"""The name of a parameter pytree that is a single array (its path is empty)."""


class ResultsError(ValueError):
    """A folder that is not a results folder, or whose sample files are missing or unreadable."""


class RunSamples(NamedTuple):
    """The samples of a run, as :func:`load_samples` reads them.

    Attributes:
      step: the global step of each draw ``[draws]``.
      valid: ``[chains, draws]``, False for the copies of a diverged chain's last finite state
        (not samples; they were not added to the ensemble).
      params: the parameter pytree rebuilt as nested dicts, leaves ``[chains, draws, ...]``
        (a bare array if the parameters are one array).
      stats: the sampler's ``info`` at each kept step, by field, ``[chains, draws]``
        (``potential``, ``grad_norm``, ``learning_rate``, ``gamma_norm``, ``drift_fallback``,
        ``metric_fallbacks`` for SGRLD), and each draw's mean log-likelihood on every
        evaluation set ``NAME`` (``NAME_log_likelihood``: ``test_log_likelihood``, ...).
      names: the parameter leaves' names (their pytree paths joined by ``.``), in leaf order.
    """

    step: np.ndarray
    valid: np.ndarray
    params: PyTree
    stats: dict[str, np.ndarray]
    names: list[str]


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
    """Write ``value`` as indented JSON, with non-finite floats as ``null`` (atomically)."""
    atomic.write_text(path, json.dumps(json_safe(value), indent=2, allow_nan=False) + "\n")


def record_line(record: Mapping[str, Any]) -> str:
    """``record`` as one line of ``metrics.jsonl``.

    Example:
        >>> record_line({"epoch": 1, "test_ece": float("nan")})
        '{"epoch": 1, "test_ece": null}\\n'
    """
    return json.dumps(json_safe(dict(record)), allow_nan=False) + "\n"


def append_record(path: str | Path, record: Mapping[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``path`` (``metrics.jsonl``)."""
    with atomic.appending(path) as f:
        f.write(record_line(record))


def leaf_paths(params: PyTree, empty: bool = False) -> list[KeyPath]:
    """The pytree path of each leaf of ``params`` as plain keys, in ``jax.tree.leaves`` order
    (with ``empty``: the paths of its empty containers instead, which have no leaves).

    Example:
        >>> tree = {"net": {"w": 0.0, "b": [1.0, 2.0]}, "prior": {}}
        >>> leaf_paths(tree), leaf_paths(tree, empty=True)
        ([('net', 'b', 0), ('net', 'b', 1), ('net', 'w')], [('prior',)])
    """
    plain = lambda k: next(getattr(k, a) for a in ("key", "idx", "name") if hasattr(k, a))
    hollow = lambda x: isinstance(x, dict | list | tuple) and not x
    flat = jax.tree_util.tree_flatten_with_path(params, is_leaf=hollow)[0]
    return [tuple(plain(k) for k in path) for path, x in flat if hollow(x) == empty]


def path_name(path: KeyPath) -> str:
    """A leaf's name: its path joined by ``.`` (:data:`ROOT_NAME` for the root).

    Example:
        >>> path_name(("net", "Dense_0", "kernel")), path_name(())
        ('net.Dense_0.kernel', 'params')
    """
    return ".".join(str(k) for k in path) or ROOT_NAME


def write_samples(
    folder: Path, epoch: int, chunk: Chunk, draws: Mapping[str, Any] | None = None
) -> None:
    """Write one epoch's kept samples to ``folder/epoch_EEEE.npz`` (nothing if it kept none),
    and the leaves' paths to ``folder/params.json``, each atomically (:mod:`sgrld.samples.atomic`).

    ``draws`` are further per-draw stats ``[slots, chains]`` (the scoring's log-likelihoods),
    stored beside the sampler's ``info`` as ``stats/NAME``."""
    steps = np.asarray(chunk.steps)
    used = steps >= 0
    if not used.any():
        return
    folder.mkdir(parents=True, exist_ok=True)
    paths = leaf_paths(chunk.params)
    names = [path_name(p) for p in paths]
    if len(set(names)) < len(names):
        raise ValueError(f"two parameter leaves share a name: {names}")
    leaves = dict(zip(names, jax.tree.leaves(chunk.params), strict=True))
    stats = {k: v for k, v in chunk.info._asdict().items() if k not in ENGINE_FIELDS}
    stats.update(draws or {})
    empty = [list(p) for p in leaf_paths(chunk.params, empty=True)]
    write_json(folder / "params.json", {"paths": [list(p) for p in paths], "empty": empty})
    with atomic.replacing(folder / f"epoch_{epoch:04d}.npz") as f:
        np.savez(
            f,
            step=steps[used],
            valid=np.asarray(chunk.valid)[used],
            **{f"params/{n}": np.asarray(x)[used] for n, x in leaves.items()},
            **{f"stats/{k}": np.asarray(v)[used] for k, v in stats.items()},
        )


def nested(paths: list[KeyPath], leaves: list[Any], empty: list[KeyPath] = ()) -> PyTree:
    """Nested dicts with ``leaves`` at ``paths`` and ``{}`` at ``empty`` (the bare leaf for the
    root path).

    Example:
        >>> nested([("net", "b"), ("net", "w")], [1, 2], [("prior",)])
        {'net': {'b': 1, 'w': 2}, 'prior': {}}
    """
    if paths == [()]:
        return leaves[0]
    tree: dict = {}
    for path, leaf in [*zip(paths, leaves, strict=True), *((p, {}) for p in empty)]:
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = leaf
    return tree


def check_folder(folder: str | Path) -> None:
    """Check that the results folder ``folder`` exists and is a folder, before its files are read.

    Raises:
        ResultsError: ``folder`` does not exist, or is a file.

    Example:
        >>> check_folder("no/such/folder")
        Traceback (most recent call last):
        ...
        sgrld.samples.results.ResultsError: the results folder no/such/folder does not exist
    """
    if not Path(folder).is_dir():
        what = "is a file, not a folder" if Path(folder).exists() else "does not exist"
        raise ResultsError(f"the results folder {folder} {what}")


def _index(folder: str | Path) -> tuple[Path, list[Path], list[KeyPath], list[KeyPath]]:
    """The ``samples/`` folder of ``folder``, its epoch files in order, and the leaves' paths."""
    check_folder(folder)
    samples = Path(folder) / "samples"
    files = sorted(samples.glob("epoch_*.npz"))
    if not files or not (samples / "params.json").is_file():
        raise ResultsError(
            f"no samples in {samples}: not a results folder of a run with run.save_samples = true"
        )
    try:
        tree = json.loads((samples / "params.json").read_text())
        paths, empty = ([tuple(p) for p in tree[k]] for k in ("paths", "empty"))
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ResultsError(f"cannot read the samples in {samples}: {err}") from err
    return samples, files, paths, empty


def _read_epoch(path: Path) -> dict[str, np.ndarray]:
    """The arrays of one epoch file by name, chains first (``step`` stays ``[draws]``)."""
    try:
        with np.load(path) as z:
            arrays = {k: z[k] if k == "step" else np.swapaxes(z[k], 0, 1) for k in z.files}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
        raise ResultsError(f"cannot read the samples in {path}: {err}") from err
    return arrays


def _as_run(arrays: Mapping[str, np.ndarray], paths: list[KeyPath], empty: list[KeyPath]):
    """The :class:`RunSamples` of ``arrays`` (named as in an epoch file)."""
    names = [path_name(p) for p in paths]
    try:
        return RunSamples(
            step=arrays["step"],
            valid=arrays["valid"],
            params=nested(paths, [arrays[f"params/{n}"] for n in names], empty),
            stats={k[len("stats/") :]: v for k, v in arrays.items() if k.startswith("stats/")},
            names=names,
        )
    except KeyError as err:
        raise ResultsError(f"the samples lack the array {err}") from None


def iter_samples(folder: str | Path) -> Iterator[RunSamples]:
    """The samples of a run one epoch at a time, in step order: memory holds one epoch.

    Each item is a :class:`RunSamples` of that epoch's draws (as :func:`load_samples` returns
    for the whole run), read only when the iteration reaches it.

    Raises:
        ResultsError: ``folder`` does not exist, holds no samples, or they cannot be read.
    """
    _, files, paths, empty = _index(folder)
    for path in files:
        yield _as_run(_read_epoch(path), paths, empty)


def load_samples(folder: str | Path) -> RunSamples:
    """Read the samples that a run with ``save_samples`` wrote, in step order, with no template.

    The epochs are copied one at a time into arrays of the run's size, so memory peaks at the
    samples plus one epoch (:func:`iter_samples` holds one epoch only).

    Args:
        folder: the results folder (holding ``samples/``).

    Returns:
        :class:`RunSamples`, arrays with the chains first: ``[chains, draws, ...]``.

    Raises:
        ResultsError: ``folder`` does not exist, holds no samples, or they cannot be read.

    Example:
        >>> import tempfile
        >>> load_samples(tempfile.mkdtemp())
        Traceback (most recent call last):
        ...
        sgrld.samples.results.ResultsError: no samples in .../samples: not a results folder ...
    """
    _, files, paths, empty = _index(folder)
    return _as_run(_concatenate(files, draws_per_epoch(folder)), paths, empty)


def draws_per_epoch(folder: str | Path) -> list[int]:
    """The number of draws in each epoch file of ``folder``, in order (reading only their steps).

    Raises:
        ResultsError: ``folder`` does not exist, holds no samples, or they cannot be read.
    """
    samples, files, _, _ = _index(folder)
    draws = []
    for path in files:
        try:
            with np.load(path) as z:
                draws.append(z["step"].shape[0])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as err:
            raise ResultsError(f"cannot read the samples in {path}: {err}") from err
    return draws


def _concatenate(files: list[Path], draws: list[int]) -> dict[str, np.ndarray]:
    """The arrays of ``files`` (``draws[i]`` draws each) joined along the draw axis, each file
    copied into place as it is read."""
    ends = np.cumsum([0, *draws]).tolist()
    whole: dict[str, np.ndarray] = {}
    for i, path in enumerate(files):
        arrays = _read_epoch(path)
        if whole and arrays.keys() != whole.keys():
            raise ResultsError(f"{path} holds other arrays than {files[0]}")
        for name, x in arrays.items():
            axis = 0 if name == "step" else 1
            if name not in whole:
                shape = (*x.shape[:axis], ends[-1], *x.shape[axis + 1 :])
                whole[name] = np.empty(shape, x.dtype)
            target = whole[name][(slice(None),) * axis + (slice(ends[i], ends[i + 1]),)]
            if target.shape != x.shape:
                raise ResultsError(f"{path}: {name} has shape {x.shape}, expected {target.shape}")
            target[...] = x
    return whole
