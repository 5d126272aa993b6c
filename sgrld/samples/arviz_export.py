"""Samples as an ArviZ ``DataTree`` (the ``InferenceData`` of ArviZ ≥ 1.0), and its files.

:func:`to_arviz` takes what :func:`sgrld.sample` returns, a results folder, or what
:func:`sgrld.load_samples` returns, and builds two groups with dims ``(chain, draw)``:

* ``posterior``: one variable per parameter leaf, named by its pytree path joined by ``.``
  (``net.Dense_0.kernel``; ``params`` when the parameters are one array), its own dims
  ``NAME_dim_0, ...`` after ``chain, draw``.
* ``sample_stats``: the sampler's ``info`` at the step that produced each draw (not a per-epoch
  mean), for SGRLD: ``potential`` (Û(θ)/N on that step's minibatch), ``grad_norm``,
  ``gamma_norm``, ``learning_rate``, ``drift_fallback`` (bool) and ``metric_fallbacks`` (the
  chain's cumulative count), plus ``diverging`` (bool): True where the draw is no sample because
  its chain had produced a NaN/inf (a results folder: ``not valid``; :func:`sgrld.sample`'s
  output: from the first kept step whose update was not finite on). A results folder adds, per
  evaluation set ``NAME``, ``NAME_log_likelihood``: the draw's own mean log-likelihood
  ``(1/n) Σ_i log p(y_i | x_i, θ)`` on that set (``test_log_likelihood``, ...), in the units of
  the run's ensemble scores. It belongs here and not in ArviZ's ``log_likelihood`` group, which
  holds one value per draw *and observation* (``[chain, draw, obs]``, what ``loo``/``waic``
  need); a mean over the observations is a per-draw statistic like the potential, and the run
  does not keep the pointwise values (n of them per draw).
* ``observed_data`` (regression runs): ``y``, the training targets in their own units, dim
  ``y_dim_0``. For a results folder they are not stored with the samples but rebuilt from its
  ``config.toml`` by loading the data set (:func:`sgrld_app.from_config.training_targets`; a data
  set that cannot be found there is a warning and no group); :func:`sgrld.sample`'s output has them
  only when given (``observed_data={"y": y}``).

:func:`export` writes a results folder's samples as Zarr or netCDF (h5netcdf) **streamed**: one
epoch file at a time (:func:`sgrld.samples.results.iter_samples`) is appended along ``draw`` to a
Zarr store, chunked by epoch, so memory holds about one epoch whatever the run's length (against
:func:`to_arviz`, which holds every draw); a netCDF export is then copied from that store one
variable at a time, so its peak grows with the largest variable (the peaks are in
``benchmarks/RESULTS.md`` §18). The export is written beside its target and renamed into place
when whole. It replaces only what an export wrote: an existing target that is not an earlier sgrld
export (:func:`earlier_export`) is refused unless ``overwrite`` (``sgrld export --overwrite``), and
a folder that is not a Zarr store is never replaced (:func:`check_target`).
``xarray.open_datatree(PATH, engine="zarr")`` opens a Zarr export lazily: only what is indexed is
read. ArviZ is imported on first use, so ``import sgrld`` stays light.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any, Literal

import jax
import numpy as np

from sgrld.chains.sampling import Samples
from sgrld.chains.summaries import ENGINE_FIELDS
from sgrld.samples.results import (
    ResultsError,
    RunSamples,
    draws_per_epoch,
    iter_samples,
    leaf_paths,
    load_samples,
    path_name,
)

Format = Literal["netcdf", "zarr"]
SUFFIXES = {"netcdf": ".nc", "zarr": ".zarr"}
"""The file suffix of each export format."""
STEM = "inference_data"
"""The name (without suffix) of an export in its results folder."""
GROUPS = ("posterior", "sample_stats")
"""The groups of :func:`to_arviz`, in the order an export writes them."""
CHAINS_OVER_DRAWS = "Found chain dimension to be longer than draw dimension"
"""ArviZ's warning that a variable has more chains than draws, which an export checks once on
all of its draws instead of on every epoch's few."""


def _from_samples(samples: Samples) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Posterior and sample_stats variables ``[chain, draw, ...]`` of :func:`sgrld.sample`'s
    output (a chain axis added for a single chain)."""
    single = np.ndim(samples.diverged_at) == 0
    chains = (lambda x: np.asarray(x)[None]) if single else np.asarray
    leaves = jax.tree.leaves(samples.params)
    names = [path_name(p) for p in leaf_paths(samples.params)]
    posterior = {n: chains(x) for n, x in zip(names, leaves, strict=True)}
    info = samples.info._asdict()
    stats = {k: chains(v) for k, v in info.items() if k not in ENGINE_FIELDS}
    stats["diverging"] = np.logical_or.accumulate(~chains(info["is_finite"]), axis=1)
    return posterior, stats


def _from_run(run: RunSamples) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Posterior and sample_stats variables of the samples of a results folder."""
    posterior = dict(zip(run.names, jax.tree.leaves(run.params), strict=True))
    return posterior, {**run.stats, "diverging": ~run.valid}


def run_guarantee(folder: str | Path) -> str | None:
    """The guarantee a run's ``summary.json`` records (:mod:`sgrld.samplers.guarantee`), or
    ``None`` (no summary, or one written before runs recorded it)."""
    path = Path(folder) / "summary.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("meta", {}).get("guarantee")


def to_arviz(
    source: Samples | RunSamples | str | Path,
    observed_data: dict[str, Any] | None = None,
    guarantee: str | None = None,
) -> Any:
    """The samples as an ArviZ ``xarray.DataTree`` with ``posterior`` and ``sample_stats`` (and
    ``observed_data`` for a regression run).

    Args:
        source: the output of :func:`sgrld.sample`, a results folder of a run with
            ``run.save_samples = true``, or :func:`sgrld.load_samples` of one.
        observed_data: the variables of the ``observed_data`` group; ``None``: no group (a
            regression run's training targets, rebuilt from its folder's ``config.toml``, are
            :func:`sgrld_app.from_config.observed_targets`, which ``sgrld export`` adds).
        guarantee: the run's guarantee (:func:`sgrld.samplers.guarantee.guarantee`), put in
            every group's attributes as ``guarantee``; ``None``: the source's own (a results
            folder's, from its ``summary.json``; :func:`sgrld.sample`'s ``Samples.guarantee``).

    Returns:
        An ``xarray.DataTree`` as ``arviz_base.from_dict`` builds it; the groups and variables
        are listed in the module docstring.

    Raises:
        sgrld.samples.results.ResultsError: a folder that holds no samples.

    Example:
        >>> import jax, sgrld
        >>> t = sgrld.samples.targets.standard_normal()
        >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
        >>> out = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn, num_samples=50)
        >>> idata = to_arviz(out)  # one chain: a chain axis of size 1
        >>> dict(idata.posterior.sizes), sorted(idata.sample_stats.data_vars)[:3]
        ({'chain': 1, 'draw': 50}, ['diverging', 'drift_fallback', 'gamma_norm'])
        >>> idata.posterior.attrs["guarantee"]
        'exact: constant metric (not adaptive)'
    """
    import arviz_base

    if observed_data is None:
        observed_data = {}
    if isinstance(source, str | Path):
        guarantee = guarantee or run_guarantee(source)
        source = load_samples(source)
    guarantee = guarantee or getattr(source, "guarantee", None)
    posterior, stats = (
        _from_run(source) if isinstance(source, RunSamples) else _from_samples(source)
    )
    groups = {"posterior": posterior, "sample_stats": stats}
    if observed_data:
        groups["observed_data"] = {k: np.asarray(v) for k, v in observed_data.items()}
    about = {"inference_library": "sgrld"} | ({"guarantee": guarantee} if guarantee else {})
    attrs = {group: dict(about) for group in groups}
    return arviz_base.from_dict(groups, attrs=attrs)


def target(folder: str | Path, fmt: Format = "netcdf", to: str | Path | None = None) -> Path:
    """Where :func:`export` writes: ``to``, else ``folder/inference_data.nc`` or ``.zarr``.

    Raises:
        ValueError: an unknown format.

    Example:
        >>> str(target("results/a", "zarr")), str(target("results/a", "netcdf", to="a.nc"))
        ('results/a/inference_data.zarr', 'a.nc')
    """
    if fmt not in SUFFIXES:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {sorted(SUFFIXES)}")
    return Path(to) if to is not None else Path(folder) / f"{STEM}{SUFFIXES[fmt]}"


def zarr_store(path: str | Path) -> bool:
    """Whether ``path`` is a folder holding a Zarr store's root (``zarr.json`` or ``.zgroup``)."""
    path = Path(path)
    return path.is_dir() and any((path / name).is_file() for name in ("zarr.json", ".zgroup"))


def earlier_export(path: str | Path) -> bool:
    """Whether ``path`` is what an export wrote: a netCDF file or a Zarr store whose
    ``posterior`` group says ``inference_library = "sgrld"`` (only metadata is read).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "notes.nc"
        >>> _ = path.write_text("my notes")
        >>> earlier_export(path), earlier_export(path.parent)
        (False, False)
    """
    path = Path(path)
    try:
        if zarr_store(path):
            import zarr

            attrs = dict(zarr.open_group(str(path), mode="r")["posterior"].attrs)
        elif path.is_file():
            import h5netcdf

            with h5netcdf.File(path, mode="r") as f:
                attrs = dict(f["posterior"].attrs)
        else:
            return False
    except Exception:  # noqa: BLE001 - not HDF5, not Zarr, no posterior group: not an export
        return False
    return attrs.get("inference_library") == "sgrld"


def check_target(path: str | Path, overwrite: bool = False) -> None:
    """Refuse to write an export to ``path`` where that would destroy what an export did not write.

    A missing ``path`` or an earlier sgrld export (:func:`earlier_export`) may be replaced; any
    other file or Zarr store only with ``overwrite``; a folder that is not a Zarr store never (it
    may hold anything).

    Raises:
        sgrld.samples.results.ResultsError: naming ``path`` and what to do instead.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "afile"
        >>> _ = path.write_text("mine")
        >>> check_target(path)
        Traceback (most recent call last):
        ...
        sgrld.samples.results.ResultsError: the export target ... already exists and is not an
        earlier sgrld export: choose another --to, or replace it with --overwrite
        >>> check_target(path, overwrite=True)
    """
    path = Path(path)
    if not os.path.lexists(path) or earlier_export(path):
        return
    if path.is_dir() and not path.is_symlink() and not zarr_store(path):
        raise ResultsError(
            f"the export target {path} is a folder and not a Zarr store: choose another --to (an "
            "export replaces a file or a Zarr store, never another folder)"
        )
    if not overwrite:
        raise ResultsError(
            f"the export target {path} already exists and is not an earlier sgrld export: choose "
            "another --to, or replace it with --overwrite"
        )


def export(
    folder: str | Path,
    fmt: Format = "netcdf",
    to: str | Path | None = None,
    observed_data: dict[str, Any] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write :func:`to_arviz` of a results folder as netCDF or Zarr, streamed epoch by epoch.

    Args:
        folder: the results folder of a run with ``run.save_samples = true``.
        fmt: ``"netcdf"`` (one file, read back with ``xarray.open_datatree``) or ``"zarr"``
            (a folder).
        to: where to write it (default: ``folder/inference_data.nc`` or ``.zarr``).
        observed_data: the variables of its ``observed_data`` group (none: no group).
        overwrite: replace an existing file or Zarr store at ``to`` that is not an earlier
            export (without it such a target is refused; an earlier export is replaced either
            way, a folder that is not a Zarr store never: :func:`check_target`).

    Returns:
        The path written.

    Raises:
        ValueError: an unknown format.
        sgrld.samples.results.ResultsError: a folder that does not exist or holds no samples, or
            a target that :func:`check_target` refuses (checked before anything is written).
    """
    import xarray

    path = target(folder, fmt, to)
    draws = draws_per_epoch(folder)  # the folder and its samples, before anything is created
    check_target(path, overwrite)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=f".{path.name}.") as tmp:
        store = Path(tmp) / f"{STEM}.zarr"
        _stream_zarr(folder, store, observed_data or {}, max(draws))
        if fmt == "netcdf":
            written = Path(tmp) / f"{STEM}.nc"
            with xarray.open_datatree(store, engine="zarr") as tree:
                tree.to_netcdf(written, engine="h5netcdf")
        else:
            written = store
        check_target(path, overwrite)  # again: something may have appeared there meanwhile
        if path.is_symlink() or (path.is_file() and written.is_dir()):
            path.unlink()  # a link, not what it points to; a file that a store replaces
        elif path.is_dir():
            shutil.rmtree(path)
        os.replace(written, path)
    return path


def _stream_zarr(folder: str | Path, store: Path, observed: dict[str, Any], per_chunk: int) -> None:
    """Append the samples of ``folder`` to a new Zarr ``store`` one epoch file at a time, the
    ``draw`` axis chunked by ``per_chunk`` (the largest epoch); then ``observed`` as its
    ``observed_data`` group, and consolidate its metadata."""
    import arviz_base
    import zarr

    first, chains = 0, 0
    for epoch in iter_samples(folder):
        draws, chains = epoch.step.shape[0], epoch.valid.shape[0]
        with warnings.catch_warnings():  # ArviZ's check of the dims' names, true or not of one
            warnings.filterwarnings("ignore", CHAINS_OVER_DRAWS, UserWarning)  # epoch: below
            tree = to_arviz(epoch, observed_data={}, guarantee=run_guarantee(folder))
        for group in GROUPS:
            data = tree[group].to_dataset().assign_coords(draw=np.arange(first, first + draws))
            if first:
                data.to_zarr(store, group=group, append_dim="draw", consolidated=False)
                continue
            chunks = {n: {"chunks": (v.shape[0], per_chunk, *v.shape[2:])} for n, v in data.items()}
            data.to_zarr(store, group=group, mode="a", encoding=chunks, consolidated=False)
        first += draws
    if chains > first:  # ArviZ's check, once, on the whole export
        warnings.warn(
            f"the export holds {chains} chains of {first} draws: Found chain dimension to be "
            "longer than draw dimension (the dims are named correctly; the run kept few draws)",
            UserWarning,
            stacklevel=3,
        )
    if observed:
        attrs = {"observed_data": {"inference_library": "sgrld"}}
        tree = arviz_base.from_dict({"observed_data": observed}, attrs=attrs)
        data = tree["observed_data"].to_dataset()
        data.to_zarr(store, group="observed_data", mode="a", consolidated=False)
    with warnings.catch_warnings():  # zarr 3 warns that consolidated metadata may not be part of
        warnings.filterwarnings("ignore", "Consolidated metadata", UserWarning)  # its format
        zarr.consolidate_metadata(store)
