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
  output: from the first kept step whose update was not finite on).
* ``observed_data`` (regression runs): ``y``, the training targets in their own units, dim
  ``y_dim_0``. For a results folder they are not stored with the samples but rebuilt from its
  ``config.toml`` by loading the data set (:func:`sgrld.from_config.training_targets`; a data set
  that cannot be found there is a warning and no group); :func:`sgrld.sample`'s output has them
  only when given (``observed_data={"y": y}``).

:func:`export` writes it as netCDF (h5netcdf) or Zarr. ArviZ is imported on first use, so
``import sgrld`` stays light.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Literal

import jax
import numpy as np

from sgrld.results import RunSamples, leaf_paths, load_samples, path_name
from sgrld.sampling import Samples
from sgrld.summaries import ENGINE_FIELDS

Format = Literal["netcdf", "zarr"]
SUFFIXES = {"netcdf": ".nc", "zarr": ".zarr"}
"""The file suffix of each export format."""
STEM = "inference_data"
"""The name (without suffix) of an export in its results folder."""


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


def observed_targets(folder: str | Path) -> dict[str, np.ndarray]:
    """``{"y": the training targets}`` of the regression run in ``folder``, rebuilt from its
    ``config.toml`` (:func:`sgrld.from_config.training_targets`); ``{}`` for a classification
    run or a folder with no ``config.toml``, and, with a warning, when the data set cannot be
    loaded."""
    path = Path(folder) / "config.toml"
    if not path.is_file():
        return {}
    from sgrld.config import ConfigError, load_config
    from sgrld.data import DataError
    from sgrld.from_config import training_targets

    try:
        y = training_targets(load_config(path))
    except (ConfigError, DataError) as err:
        warnings.warn(f"observed_data left out: {err}", UserWarning, stacklevel=3)
        return {}
    return {} if y is None else {"y": y}


def to_arviz(
    source: Samples | RunSamples | str | Path, observed_data: dict[str, Any] | None = None
) -> Any:
    """The samples as an ArviZ ``xarray.DataTree`` with ``posterior`` and ``sample_stats`` (and
    ``observed_data`` for a regression run).

    Args:
        source: the output of :func:`sgrld.sample`, a results folder of a run with
            ``run.save_samples = true``, or :func:`sgrld.load_samples` of one.
        observed_data: the variables of the ``observed_data`` group; ``None``: for a results
            folder, its training targets if it is a regression run (:func:`observed_targets`),
            else no group.

    Returns:
        An ``xarray.DataTree`` as ``arviz_base.from_dict`` builds it; the groups and variables
        are listed in the module docstring.

    Raises:
        sgrld.results.ResultsError: a folder that holds no samples.

    Example:
        >>> import jax, sgrld
        >>> t = sgrld.targets.standard_normal()
        >>> s = sgrld.sgrld(t.potential, sgrld.metrics.identity(), learning_rate=0.1, num_data=1)
        >>> out = sgrld.sample(jax.random.key(0), s, t.init_params, t.batch_fn,
        ...                    num_samples=50, thin=5, num_chains=2)
        >>> idata = to_arviz(out)
        >>> dict(idata.posterior.sizes), sorted(idata.sample_stats.data_vars)[:3]
        ({'chain': 2, 'draw': 50}, ['diverging', 'drift_fallback', 'gamma_norm'])
    """
    import arviz_base

    if observed_data is None:
        observed_data = observed_targets(source) if isinstance(source, str | Path) else {}
    if isinstance(source, str | Path):
        source = load_samples(source)
    posterior, stats = (
        _from_run(source) if isinstance(source, RunSamples) else _from_samples(source)
    )
    groups = {"posterior": posterior, "sample_stats": stats}
    if observed_data:
        groups["observed_data"] = {k: np.asarray(v) for k, v in observed_data.items()}
    attrs = {group: {"inference_library": "sgrld"} for group in groups}
    return arviz_base.from_dict(groups, attrs=attrs)


def export(folder: str | Path, fmt: Format = "netcdf", to: str | Path | None = None) -> Path:
    """Write :func:`to_arviz` of a results folder as netCDF or Zarr.

    Args:
        folder: the results folder of a run with ``run.save_samples = true``.
        fmt: ``"netcdf"`` (one file, read back with ``xarray.open_datatree``) or ``"zarr"``
            (a folder).
        to: where to write it (default: ``folder/inference_data.nc`` or ``.zarr``).

    Returns:
        The path written (an existing one is replaced).

    Raises:
        ValueError: an unknown format.
        sgrld.results.ResultsError: a folder that holds no samples.
    """
    if fmt not in SUFFIXES:
        raise ValueError(f"unknown export format {fmt!r}; choose one of {sorted(SUFFIXES)}")
    path = Path(to) if to is not None else Path(folder) / f"{STEM}{SUFFIXES[fmt]}"
    tree = to_arviz(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "netcdf":
        tree.to_netcdf(path, engine="h5netcdf")
    else:  # consolidated, so that readers need not list the store; zarr 3 warns that it may
        with warnings.catch_warnings():  # not be part of its format (xarray reads it)
            warnings.filterwarnings("ignore", "Consolidated metadata", UserWarning)
            tree.to_zarr(path, mode="w")
    return path
