"""Sweeps: every (setting, replicate) pair of a grid of hyperparameters as chains of one program.

Yu et al. choose each metric's learning rate on the validation log-likelihood and report the mean
± std of the test scores over 10 runs: a grid of learning rates × replicates, each formerly its own
process and compilation. ``sgrld sweep`` runs all of them as the chains of one compiled program:

* **per-chain hyperparameters**: :func:`swept` wraps a sampler whose state carries the chain's
  hyperparameters (:class:`sgrld.samplers.swept.SweptState`); its step builds the inner sampler from
  those (traced) values, so the engine's ``jax.vmap`` over chains gives every chain its own learning
  rate (or Monge α², or temperature: :data:`SWEEPABLE`) in one program. The samplers accept a traced
  value (:func:`sgrld.numerics.checks.is_traced`); the value is checked here instead, as the
  configuration it comes from (:func:`parse_grid`);
* **replicates**: replicate ``r`` of every setting has the seed ``run.seed + r``: its chains get the
  initialisations, keys and minibatches of ``sgrld run`` with that seed
  (:attr:`sgrld_app.experiment.RunPlan.seeds`), so chain (setting, replicate) computes what the
  chain of ``sgrld run --set KEY=VALUE --set run.seed=SEED`` computes, up to float rounding (a test
  checks it on a few chains): a program of more chains may round differently, and a chaotic chain
  (RMSprop's, say) can amplify that into another trajectory from the same sampler;
* **chains**: setting ``i``, replicate ``r`` and chain ``k`` of ``run.chains = K`` is chain
  ``(i·R + r)·K + k``; a chain that diverges stops sampling and the others go on;
* **scores**: each replicate's ensemble (its K chains pooled, as ``sgrld run`` pools them) is scored
  on every evaluation set; the table gives per setting the mean ± std (``ddof = 1``) over the
  replicates, and marks the best setting: the highest mean validation log-likelihood
  (classification; the lowest validation NLL for regression) among settings none of whose chains
  diverged. A configuration without a validation split is refused.

The results folder is that of ``sgrld run`` (config, ``metrics.jsonl``, ``summary.json``, optional
samples of all chains; the records of ``metrics.jsonl`` pool every chain, so they mix the
settings, and give under ``"groups"`` each (setting, replicate)'s scores so far, in chain order),
plus ``sweep.md`` and ``sweep.json`` (the table and the per-replicate scores), also
stored in ``summary.json`` under ``"sweep"``. A sweep stopped part way continues from its newest
checkpoint (``existing="resume"``, ``sgrld sweep --resume OUT``) with the same configuration, grid
and replicates (:func:`check_resumable_grid`); its chains, all settings and replicates, can be
sharded over a device mesh (:func:`sweep_mesh`).

Example:
    >>> from sgrld_app.config import load_config
    >>> cfg = load_config(None, ["data.name=digits", "data.batch_size=64",
    ...     "model.widths=[8]", "prior.kind=gaussian", "run.epochs=1", "run.burn_in=0",
    ...     "run.thin=5"])
    >>> grid = parse_grid("sampler.learning_rate=[0.05, 0.1]", cfg)
    >>> out = run_sweep(cfg, [grid], replicates=2, out=None)
    >>> [row["lr"] for row in out.rows], out.result.state.hyper["learning_rate"].round(2).tolist()
    (['0.05', '0.1'], [0.05, 0.05, 0.1, 0.1])
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

import jax
import numpy as np

from sgrld.chains.devices import check_mesh, make_mesh
from sgrld.samplers.swept import swept
from sgrld_app import auto_rate, sweep_rates, sweep_table
from sgrld_app.config import Config, ConfigError, with_overrides
from sgrld_app.config.toml_io import parse_override
from sgrld_app.config.validation import MAX_SEED
from sgrld_app.experiment import Experiment, RunPlan
from sgrld_app.from_config import build_experiment, check_schedule, run_plan_of
from sgrld_app.launch import run_config
from sgrld_app.sampler_from_config import sampler_of
from sgrld_app.sweep_resume import check_resumable_grid
from sgrld_app.sweep_table import SweepResult

SWEEPABLE: dict[str, tuple[str, str | None]] = {
    "sampler.learning_rate": ("lr", None),
    "sampler.metric_params.alpha2": ("α²", "monge"),
    "sampler.temperature": ("T", None),
}
"""The keys a grid may sweep: key -> (its column title, the metric it needs or ``None``). Each is
a scalar that only enters the step's arithmetic, so every chain can hold its own value."""
TITLES = {key: title for key, (title, _) in SWEEPABLE.items()}
"""Each sweepable key's column title in the sweep's table."""

FIXED_IN: dict[str, tuple[str, ...]] = {"sampler.temperature": ("isgd",)}
"""Sampler kinds that check a sweepable key's value as a number when they are built (i-SGD its
temperature), so that it cannot be one value per chain."""


class Grid(NamedTuple):
    """One swept key and its values (:func:`parse_grid`)."""

    key: str
    values: tuple[float, ...]


def parse_grid(text: str, config: Config) -> Grid:
    """Read ``KEY=[v1, v2, ...]`` (a TOML list of numbers) and check it against ``config``.

    Every value is checked as ``sgrld run --set KEY=v`` would check it (the configuration's
    validation: a learning rate > 0, α² ≥ 0, ...), since the samplers take it traced, unchecked.

    Raises:
        ConfigError: the key cannot be swept (naming those that can), the metric lacks it, the
            sampler kind needs it fixed (:data:`FIXED_IN`), the list is empty, has a non-number
            or a repeated value, or a value fails validation.

    Example:
        >>> from sgrld_app.config import Config
        >>> parse_grid("sampler.learning_rate=[1e-3, 0.003]", Config())
        Grid(key='sampler.learning_rate', values=(0.001, 0.003))
        >>> parse_grid("run.epochs=[1, 2]", Config())
        Traceback (most recent call last):
        ...
        sgrld_app.config.key_checks.ConfigError: --grid run.epochs: not a key a sweep can vary ...
    """
    key, values = parse_override(text)
    if key not in SWEEPABLE:
        sweepable = ", ".join(
            key + (f" (metric {metric})" if metric else "")
            for key, (_, metric) in SWEEPABLE.items()
        )
        raise ConfigError(
            f"--grid {key}: not a key a sweep can vary per chain; sweepable keys: {sweepable}"
        )
    metric = SWEEPABLE[key][1]
    if metric is not None and config.sampler.metric != metric:
        raise ConfigError(
            f"--grid {key}: sampler.metric is {config.sampler.metric!r}, which has no such "
            f"parameter (it is {metric!r}'s)"
        )
    if config.sampler.kind in FIXED_IN.get(key, ()):
        raise ConfigError(
            f"--grid {key}: sampler.kind {config.sampler.kind!r} takes it as one fixed number, "
            "not one per chain"
        )
    if not isinstance(values, list) or not values:
        raise ConfigError(f"--grid {key}: expected a non-empty list of numbers, e.g. [0.1, 0.3]")
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"--grid {key}: {value!r} is not a number")
    if len(set(values)) < len(values):
        raise ConfigError(f"--grid {key}: a value is repeated in {values}")
    for value in values:
        try:
            with_overrides(config, [f"{key}={value!r}"])
        except ConfigError as err:
            raise ConfigError(f"--grid {key}={value!r}: {err}") from None
    return Grid(key, tuple(float(v) for v in values))


def settings(grids: Sequence[Grid]) -> list[dict[str, float]]:
    """Every combination of the grids' values (the first grid varies slowest), key -> value.

    Example:
        >>> settings([Grid("a", (1.0, 2.0)), Grid("b", (0.5,))])
        [{'a': 1.0, 'b': 0.5}, {'a': 2.0, 'b': 0.5}]
    """
    keys = [g.key for g in grids]
    combos = itertools.product(*(g.values for g in grids))
    return [dict(zip(keys, combo, strict=True)) for combo in combos]


def sweep_experiment(
    config: Config, grids: Sequence[Grid], replicates: int
) -> tuple[Experiment, RunPlan]:
    """The experiment and schedule of a sweep: ``S·R·K`` chains for ``S`` settings, ``R``
    replicates and ``K = run.chains`` (chain order and seeds: the module docstring); the swept
    values are ``experiment.chain_args[0]``, one per chain (where ``learning_rate = "auto"``,
    :func:`run_sweep` adds each setting's, :mod:`sgrld_app.sweep_rates`).

    Example:
        >>> from sgrld_app.config import load_config
        >>> cfg = load_config(None, ["data.name=digits", "model.widths=[8]"])
        >>> grid = Grid("sampler.learning_rate", (0.1, 0.2))
        >>> experiment, schedule = sweep_experiment(cfg, [grid], replicates=3)
        >>> hyper = experiment.chain_args[0]["learning_rate"]
        >>> schedule.chains, schedule.seeds, hyper.astype(float).round(3).tolist()
        (6, (0, 1, 2, 0, 1, 2), [0.1, 0.1, 0.1, 0.2, 0.2, 0.2])
    """
    points, k = settings(grids), config.run.chains
    per_setting = replicates * k
    hyper = {
        key.removeprefix("sampler."): np.repeat(
            np.array([p[key] for p in points], np.float32), per_setting
        )
        for key in (g.key for g in grids)
    }
    build_sampler = lambda potential, n: swept(
        lambda h: sampler_of(
            config.sampler,
            potential,
            n,
            h,
            schedule=config.schedule,
            num_steps=config.num_steps(n),
            burn_in=config.burn_in_steps(n),
        )
    )
    experiment = build_experiment(config, sampler=build_sampler)
    experiment = dataclasses.replace(experiment, chain_args=(hyper,))
    seeds = tuple(config.run.seed + r for _ in points for r in range(replicates))
    chains = len(points) * per_setting
    plan = run_plan_of(config, len(experiment.train[0]))
    schedule = dataclasses.replace(plan, chains=chains, seeds=seeds)
    return experiment, schedule


def _check_sweep(config: Config, grids: Sequence[Grid], replicates: int) -> None:
    """Refuse replicates below 1, a key swept twice, or a data set without a validation split."""
    if isinstance(replicates, bool) or int(replicates) != replicates or replicates < 1:
        raise ConfigError(f"--replicates must be an integer >= 1, got {replicates!r}")
    if config.run.seed + replicates - 1 > MAX_SEED:
        raise ConfigError(
            f"--replicates {replicates} with run.seed = {config.run.seed}: the last replicate's "
            f"seed would pass {MAX_SEED} (2**32 - 1), the largest seed"
        )
    keys = [g.key for g in grids]
    if len(set(keys)) < len(keys):
        raise ConfigError(f"--grid: a key is given twice in {keys}")
    if config.data.validation_size == 0:
        raise ConfigError(_NO_VALIDATION.format(name=config.data.source()))


def run_sweep(
    config: Config,
    grids: Sequence[Grid],
    replicates: int,
    out: str | Path | None | Literal["config"] = "config",
    *,
    existing: Literal["refuse", "overwrite", "resume"] = "overwrite",
    progress: bool = False,
    label: str = "sweep",
    devices: int | str | None = None,
    data_parallel: int | None = None,
    checked: Callable[[], object] | None = None,
) -> SweepResult:
    """Run a sweep (see the module docstring) and write its table.

    Args:
        config: a validated configuration; its values of the swept keys are replaced.
        grids: the swept keys and values (:func:`parse_grid`); none: replicates of ``config``.
        replicates: runs per setting, seeds ``run.seed`` to ``run.seed + replicates − 1``.
        out: the results folder (``"config"``: ``out.folder``; ``None``: nothing written).
        existing: an earlier run in the folder is refused, replaced (its files removed) or
            continued from its newest checkpoint (``"resume"``: the same configuration, grid and
            replicates, :func:`check_resumable_grid`).
        progress: show a progress bar.
        label: the progress bar's description.
        devices, data_parallel: shard the sweep's chains over a device mesh (:func:`sweep_mesh`;
            ``None``: ``run.devices`` and ``run.data_parallel``).
        checked: called once the input is read and checked, before the learning rates are
            chosen and anything is written (:func:`sgrld_app.launch.run_config`).

    Returns:
        The :class:`SweepResult`.

    Raises:
        ConfigError: ``replicates`` below 1, a repeated grid key, no validation split, a mesh
            that does not fit, or a sweep to resume with another configuration, grid or
            replicates (naming them).
    """
    _check_sweep(config, grids, replicates)
    points = settings(grids)
    grid = {g.key: list(g.values) for g in grids}
    folder = Path(config.out.folder) if out == "config" else out
    if existing == "resume" and folder is not None:
        check_resumable_grid(Path(folder), grid, replicates)
    chains = len(points) * replicates * config.run.chains
    mesh = sweep_mesh(config, chains, devices, data_parallel)

    built: dict[str, Experiment] = {}

    def build(config: Config) -> tuple[Experiment, RunPlan]:
        experiment, schedule = sweep_experiment(config, grids, replicates)
        _check_built(config, list(grid), experiment, schedule)
        meta = {**experiment.meta, "sweep": {"grid": grid, "replicates": replicates}}
        return dataclasses.replace(experiment, meta=meta), schedule

    def resolve(experiment: Experiment, schedule: RunPlan, saved: object) -> Experiment:
        if sweep_rates.needs_search(config, list(grid)):  # once the input is checked
            resumed = folder if existing == "resume" else None
            experiment = _with_rates(experiment, config, points, replicates, resumed)
        built["experiment"] = experiment
        return experiment

    result = run_config(
        config,
        out,
        existing=existing,
        progress=progress,
        label=label,
        build=build,
        resolve=resolve,
        checked=checked,
        stop_on_divergence=False,
        mesh=mesh,
    )
    experiment = built["experiment"]
    scores = sweep_table.setting_scores(result, experiment, len(points), replicates, config)
    best = sweep_table.best_setting(experiment.kind, scores)
    cols, rows = sweep_table.table(experiment.kind, points, scores, best, TITLES)
    caption = (
        f"sweep of {len(points)} setting(s) x {replicates} replicate(s) ({config.data.source()}, "
        f"{config.sampler.metric}, {len(result.records)} epochs): mean ± std over replicates; "
        "best: highest mean validation log-likelihood without divergence"
    )
    sweep = SweepResult(result, points, replicates, scores, best, rows, cols, caption)
    if result.out is not None:
        sweep_table.write(sweep, result.out)
    return sweep


def _check_built(
    config: Config, keys: list[str], experiment: Experiment, schedule: RunPlan
) -> None:
    """A sweep's checks of its built chains: a validation split to choose on, then the schedule
    (:func:`check_schedule`, whose errors come first, as in ``run_config``), then a burn-in long
    enough for each setting's rate search (:func:`sgrld_app.sweep_rates.check_burn_in`)."""
    if not len(experiment.eval_sets["val"][0]):
        raise ConfigError(_NO_VALIDATION.format(name=config.data.source()))
    check_schedule(config, len(experiment.train[0]))
    sweep_rates.check_burn_in(config, keys, schedule)


def _with_rates(
    experiment: Experiment,
    config: Config,
    points: list[dict[str, float]],
    replicates: int,
    resumed: str | Path | None,
) -> Experiment:
    """``experiment`` with each setting's learning rate, searched or read back from the sweep
    being resumed in ``resumed`` (:func:`sgrld_app.sweep_rates.setting_rates`), in its chains'
    hyperparameters and its ``meta``; each of ``points`` gets its rate (the table's lr column)."""
    choices = sweep_rates.setting_rates(config, points, resumed)
    rates = [c.learning_rate for c in choices]
    for point, rate in zip(points, rates, strict=True):
        point[sweep_rates.KEY] = rate
    per_chain = np.repeat(np.asarray(rates, np.float32), replicates * config.run.chains)
    meta = {**experiment.meta, auto_rate.META_KEY: [c.to_dict() for c in choices]}
    hyper = {**experiment.chain_args[0], "learning_rate": per_chain}
    return dataclasses.replace(experiment, chain_args=(hyper,), meta=meta)


def sweep_mesh(
    config: Config, chains: int, devices: int | str | None, data_parallel: int | None
) -> jax.sharding.Mesh | None:
    """The device mesh of a sweep of ``chains`` chains (settings × replicates × ``run.chains``):
    ``devices`` and ``data_parallel`` as :func:`sgrld.chains.devices.make_mesh` takes them
    (``None``: the configuration's ``run.devices`` and ``run.data_parallel``), checked against the
    sweep's chains, not ``run.chains``, and the batch size.

    Raises:
        ConfigError: ``--data-parallel`` without devices, or a mesh that does not fit, naming
            the numbers.

    Example:
        >>> from sgrld_app.config import Config
        >>> dict(sweep_mesh(Config(), 6, 1, None).shape)
        {'chains': 1, 'data': 1}
        >>> sweep_mesh(Config(), 6, None, None) is None
        True
    """
    devices = config.run.devices if devices is None else devices
    data_parallel = config.run.data_parallel if data_parallel is None else data_parallel
    if devices is None:
        if data_parallel > 1:
            raise ConfigError(f"--data-parallel {data_parallel} needs a mesh: give --devices too")
        return None
    try:
        mesh = make_mesh(devices, data_parallel)
        check_mesh(mesh, chains, config.data.batch_size)
    except ValueError as err:
        raise ConfigError(
            f"--devices {devices}, --data-parallel {data_parallel}, {chains} chains (settings x "
            f"replicates x run.chains), data.batch_size = {config.data.batch_size}: {err}"
        ) from None
    return mesh


_NO_VALIDATION = (
    "sgrld sweep picks the best setting on the validation log-likelihood, but {name} has no "
    "validation split here: set data.validation_size > 0"
)
