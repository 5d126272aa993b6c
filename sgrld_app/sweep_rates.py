"""``sgrld sweep`` with ``sampler.learning_rate = "auto"``: one search per setting.

Where the grid does not sweep the learning rate, each setting's rate is chosen as ``sgrld run``
would choose it for that setting (:func:`sgrld_app.auto_rate.search_rate`, the seed
``run.seed``), and the sweep runs every setting's chains at its own rate, as if the grid paired
each setting with it. The choices go into the sweep's ``meta``; ``--resume`` reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from sgrld.chains.step_size import RateChoice
from sgrld.samplers.rate_search import is_auto
from sgrld_app import auto_rate, checkpoint
from sgrld_app.config import Config
from sgrld_app.experiment import RunPlan
from sgrld_app.from_config import build_experiment, run_plan_of
from sgrld_app.sampler_from_config import configured_sampler

KEY = "sampler.learning_rate"


def needs_search(config: Config, keys: Sequence[str]) -> bool:
    """Whether a sweep over ``keys`` must choose each setting's rate."""
    return is_auto(config.sampler.sampler_options().get("learning_rate")) and KEY not in keys


def check_burn_in(config: Config, keys: Sequence[str], schedule: RunPlan) -> None:
    """A one-line :class:`~sgrld_app.config.ConfigError` where each setting's rate is searched
    (:func:`needs_search`) in a burn-in too short for it (:func:`auto_rate.check_burn_in`)."""
    if needs_search(config, keys):
        auto_rate.check_burn_in(schedule)


def setting_rates(
    config: Config, points: Sequence[Mapping[str, float]], folder: Any = None
) -> list[RateChoice]:
    """The rate of each setting: read from the newest checkpoint in ``folder`` (a sweep being
    resumed) where it holds them, else searched."""
    saved = None if folder is None else checkpoint.latest(folder)
    stored = None if saved is None else saved.info.get("meta", {}).get(auto_rate.META_KEY)
    if stored is not None:
        return auto_rate.stored_choices(stored, True)

    def one(point: Mapping[str, float]) -> RateChoice:
        values = {k.removeprefix("sampler."): v for k, v in point.items()}
        build = partial(configured_sampler, config, values=values)
        experiment = build_experiment(config, sampler=build)
        plan = run_plan_of(config, len(experiment.train[0]))
        return auto_rate.checked_search(experiment, plan)

    return [one(point) for point in points]
