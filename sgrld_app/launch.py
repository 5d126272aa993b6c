"""A configuration's run, end to end (:func:`run_config`, which ``sgrld run``, ``sgrld demo``,
sweeps and reproductions use): the results folder checked and cleared, or the run to resume there
checked against the configuration (:func:`check_resumable`); the device mesh (:func:`mesh_of`);
the experiment built (:mod:`sgrld_app.from_config`) and its schedule checked; the learning rate
searched where it is ``"auto"`` (:mod:`sgrld_app.auto_rate`); the configuration written; and the
runner (:func:`sgrld_app.runner.run`).

Example:
    >>> from sgrld_app.config import load_config
    >>> cfg = load_config(None, ["data.name=digits", "data.batch_size=32",
    ...     "model.widths=[16]", "prior.kind=gaussian", "sampler.learning_rate=0.05",
    ...     "run.epochs=1", "run.burn_in=0", "run.thin=13"])
    >>> result = run_config(cfg, out=None)
    >>> result.status, result.records[0]["samples"]
    ('completed', 3)
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import jax

from sgrld.chains import devices
from sgrld.samplers.guarantee import identity_clause
from sgrld.samples.results import ResultsError
from sgrld_app import auto_rate, checkpoint, data_and_model, from_config, run_folder
from sgrld_app.config import Config, ConfigError, write_config
from sgrld_app.experiment import Experiment, Result, RunPlan
from sgrld_app.runner import run

RESUME_IGNORES = ("out.folder", "run.checkpoint_every", "run.checkpoint_seconds", "run.devices")
"""Keys that may differ between a run and its resumption (they change no result: chains sharded
over other devices give the same samples bit for bit)."""


def check_resumable(config: Config, folder: Path) -> checkpoint.Saved | None:
    """The checkpoint to resume the run in ``folder`` from (``None``: it has none yet, so the run
    starts over), after checking that ``config`` is the run's configuration.

    Raises:
        sgrld.samples.results.ResultsError: ``folder`` holds no run, or no checkpoint that verifies.
        ConfigError: the run's configuration differs, naming the keys.
    """
    saved = checkpoint.latest(folder)
    if saved is not None:
        before = saved.info["meta"].get("config", {})
    elif (folder / "config.json").is_file():
        before = json.loads((folder / "config.json").read_text())
    else:
        raise ResultsError(f"--resume {folder}: no run to resume there (no config.json)")
    now = config.to_dict()
    for tree in (before, now):
        for key in RESUME_IGNORES:
            section, name = key.split(".")
            tree.get(section, {}).pop(name, None)
    differ = checkpoint.differences(before, now)
    if differ:
        raise ConfigError(
            f"--resume {folder}: the run there has another configuration: {'; '.join(differ)}. "
            "Resume it with its own (`sgrld run --resume` without a file reads its config.toml; "
            "`sgrld reproduce` needs the options it was started with), or start it afresh "
            "(`sgrld run --overwrite`, or remove the folder)"
        )
    return saved


def run_config(
    config: Config,
    out: str | Path | None | Literal["config"] = "config",
    *,
    existing: Literal["refuse", "overwrite", "resume"] = "overwrite",
    progress: bool = False,
    label: str | None = None,
    build: Callable[[Config], tuple[Experiment, RunPlan]] | None = None,
    resolve: Callable[[Experiment, RunPlan, Any], Experiment] = auto_rate.resolve,
    checked: Callable[[], object] | None = None,
    stop_on_divergence: bool = True,
    mesh: jax.sharding.Mesh | None | Literal["config"] = "config",
) -> Result:
    """Build and run the experiment of a configuration.

    Writes the resolved configuration (``config.toml``, ``config.json``) and the files of
    :func:`run` into the results folder.

    Args:
        config: a validated configuration.
        out: the results folder; ``"config"`` uses ``config.out.folder``; ``None`` writes nothing
            (then ``run.save_samples`` must be false).
        existing: an earlier run in the folder is refused (``"refuse"``), replaced
            (``"overwrite"``: its files are removed first) or continued from its newest
            checkpoint (``"resume"``, :func:`check_resumable`).
        progress: show a progress bar.
        label: the progress bar's description (default: the metric's name).
        build: ``config -> (experiment, schedule)`` in place of :func:`build_experiment` and
            :func:`run_plan_of` (a sweep's chains, :func:`sgrld_app.sweep.sweep_experiment`).
        resolve: ``(experiment, schedule, checkpoint or None) -> experiment`` with its learning
            rate chosen, run once the input is checked (a sweep's: one rate per setting).
        checked: called once the input is read and checked (the data set, the model, a resumed
            run's data file, the schedule), before the learning rate is chosen and anything is
            written: ``sgrld run`` and ``sgrld sweep`` print their header there, so that bad
            input is the error's one line alone.
        stop_on_divergence: see :func:`sgrld_app.runner.run`.
        mesh: the device mesh (``"config"``: :func:`mesh_of` the configuration; a sweep's chains
            are not ``run.chains``, :func:`sgrld_app.sweep.sweep_mesh`).

    Returns:
        The :class:`Result` of :func:`run`.
    """
    folder = Path(config.out.folder) if out == "config" else out
    folder = None if folder is None else Path(folder)
    writer = devices.is_writer()  # process 0 of a multi-process run; the others write nothing
    if folder is not None and writer:
        run_folder.check_writable(folder)
    saved, files = None, run_folder.RUN_FILES + run_folder.CONFIG_FILES
    if existing == "resume" and folder is not None:
        saved = check_resumable(config, folder)
    elif existing == "refuse" and folder is not None and writer:
        run_folder.clear(folder, existing, files)  # before the data loads; it removes nothing
    mesh = mesh_of(config) if isinstance(mesh, str) else mesh
    experiment, schedule = (build or _build)(config)
    if saved is not None:
        data_and_model.check_same_data(saved.info["meta"], experiment.meta, folder)
    from_config.check_schedule(config, len(experiment.train[0]))
    if getattr(experiment.sampler, "rate_search", None) is not None:
        auto_rate.check_burn_in(schedule)  # learning_rate = "auto" searches in the burn-in
    if checked is not None:
        checked()
    experiment = resolve(experiment, schedule, saved)  # learning_rate = "auto"
    if folder is not None and existing != "resume" and writer:
        folder.mkdir(parents=True, exist_ok=True)
        run_folder.clear(folder, existing, files)
        write_config(config, folder)
    result = run(
        experiment,
        schedule,
        out=folder,
        save_samples=config.run.save_samples,
        curvature=config.run.curvature,
        progress=progress,
        label=label or config.sampler.metric,
        existing="refuse" if existing == "refuse" else "overwrite",
        resume=saved,
        checkpoint_every=config.run.checkpoint_every,
        checkpoint_seconds=config.run.checkpoint_seconds,
        stop_on_divergence=stop_on_divergence,
        mesh=mesh,
    )
    _warn_if_frozen_identity(experiment.sampler, result.state)
    return result


def _warn_if_frozen_identity(sampler: Any, state: Any) -> None:
    """A warning where the run's frozen metric is the identity (Monge at stationarity)."""
    adaptation = getattr(sampler, "adaptation", None)
    frozen = adaptation is not None and isinstance(adaptation.adapt_until, int)
    if frozen and state is not None and hasattr(state, "metric_state"):
        identity_clause(adaptation.metric, state.metric_state, state.params)


def mesh_of(config: Config) -> jax.sharding.Mesh | None:
    """The device mesh of ``run.devices`` and ``run.data_parallel`` (``None`` without
    ``run.devices``), checked against ``run.chains`` and ``data.batch_size``.

    Example:
        >>> from sgrld_app.config import load_config
        >>> cfg = load_config(None, ["run.devices=1", "run.chains=3"])
        >>> dict(mesh_of(cfg).shape)
        {'chains': 1, 'data': 1}

    Raises:
        ConfigError: more ``run.data_parallel`` or ``run.devices`` than there are devices, or
            chains or a batch size that the mesh does not divide, naming the keys.
    """
    r = config.run
    if r.devices is None:
        return None
    keys = f"run.devices = {r.devices!r}, run.data_parallel = {r.data_parallel}"
    try:
        mesh = devices.make_mesh(r.devices, r.data_parallel)
        devices.check_mesh(mesh, r.chains, config.data.batch_size)
    except ValueError as err:
        raise ConfigError(
            f"{keys}, run.chains = {r.chains}, data.batch_size = {config.data.batch_size}: {err}"
        ) from None
    return mesh


def _build(config: Config) -> tuple[Experiment, RunPlan]:
    experiment = from_config.build_experiment(config)
    return experiment, from_config.run_plan_of(config, len(experiment.train[0]))
