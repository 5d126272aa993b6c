"""The sections of a configuration, one frozen dataclass each.

Every key has a default, so a file lists only what differs. :mod:`sgrld_app.config.toml_io`
builds a :class:`Config` from nested dicts (as :mod:`tomllib` returns them), checking each key's
type against its annotation and then every value (:func:`sgrld_app.config.validation.validate`),
and applies ``--set key=value`` overrides to those dicts.

Example:
    >>> Config(sampler=SamplerConfig(metric="monge")).sampler.sampler_options()["correction"]
    'auto'
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import operator
import typing
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from sgrld_app.config.key_checks import declared_type
from sgrld_app.config.registries import SAMPLERS, sampler_keywords


@dataclass(frozen=True)
class DataConfig:
    """``[data]``: which data set, where it is, how it is split and batched.

    Attributes:
        name: a name of ``sgrld.data.DATASETS``.
        data_dir: base data folder (``None``: ``$SGRLD_DATA_DIR``, else ``~/.cache/sgrld/data``).
        validation_size: training examples held out for validation (``None``: the data set's).
        train_size: keep only the first ``train_size`` training examples (``None``: all).
        verify_checksums: check the SHA-256 of every file whose checksum is known (``false``:
            read the files unchecked, e.g. a re-compressed copy of the data).
        batch_size: minibatch size B; an epoch is ``n_train // B`` minibatches.
        split: the published train/test split of a UCI regression set (the other data sets
            have none and accept only 0).
        test_size: examples held out as the test set of a set with no official test split
            (australian; ``None``: the data set's, 138 = 20 %; ``0``: train on every row, no
            test scores), or of a data file (``None``: 20 % of its rows).
        path: a data file of one's own, ``.npz``, ``.csv`` or ``.parquet``, in place of ``name``
            (relative to the working directory; :func:`sgrld.data.load_file`); its SHA-256 is
            recorded in ``summary.json`` (``meta.data_file``). Its validation split is
            ``validation_size`` rows (``None``: 10 %).
        inputs: the inputs' key (``.npz``) or columns (a table) of ``path`` (``None``: the key
            ``"x"``, or every column but the target).
        target: the targets' key or column of ``path`` (``None``: ``"y"``, or the last column).
        task: ``"auto"`` (classification for integer targets, else regression),
            ``"classification"`` or ``"regression"``: what the targets of ``path`` are.
        standardize: standardise the inputs and regression targets with the training split's
            statistics (``None``: the data set's default; yes for a data file).
    """

    name: str = "mnist"
    data_dir: str | None = None
    validation_size: int | None = None
    train_size: int | None = None
    verify_checksums: bool = True
    batch_size: int = 100
    split: int = 0
    test_size: int | None = None
    path: str | None = None
    inputs: str | tuple[str, ...] | None = None
    target: str | None = None
    task: str = "auto"
    standardize: bool | None = None

    def source(self) -> str:
        """The data, for messages: the name of the file ``path``, else the registry's ``name``.

        Example:
            >>> DataConfig(path="data/mine.csv").source(), DataConfig(name="digits").source()
            ('mine.csv', 'digits')
        """
        return self.name if self.path is None else PurePath(self.path).name


@dataclass(frozen=True)
class ModelConfig:
    """``[model]``: the network.

    Attributes:
        kind: ``"mlp"`` (hidden ``widths``), ``"cnn"`` (Li et al.'s CNN, ``widths`` = its dense
            layers), ``"regression_mlp"`` (one hidden layer, ``widths = [width]``) or
            ``"resnet20"`` (:class:`sgrld.bnn.ResNet20`, ``widths = [w]``: the first stack's
            channels, 16 in the paper, then 2w and 4w) or ``"logistic_regression"`` (one
            ``nn.Dense(1)``, :func:`sgrld.bnn.models.logistic_regression`, with the Bernoulli
            likelihood; a binary data set, e.g. ``australian``, ``a9a``; no ``widths``).
        widths: hidden layer widths.
        depth: layers of a ``resnet20`` (``6n + 2``: 20 is ResNet-20, 8 one block per stack).
        conv: how a ``cnn`` or ``resnet20`` computes its convolutions
            (:data:`sgrld.bnn.convolutions.CONVOLUTIONS`): ``"auto"`` (im2col on a CPU, where XLA's
            convolution is slow inside the runner's ``lax.scan``; XLA's elsewhere), ``"xla"``
            or ``"im2col"``. The parameters and the function do not depend on it.
        factory: ``"package.module:function"``, a network of one's own in place of ``kind``
            (:mod:`sgrld.bnn.factory`: a Flax Linen or NNX module, an Equinox model, a Haiku
            transform or a pair ``(init, apply)``), imported from the working directory or the
            environment.
    """

    kind: str = "mlp"
    widths: tuple[int, ...] = (400, 400)
    depth: int = 20
    conv: str = "auto"
    factory: str | None = None


@dataclass(frozen=True)
class LikelihoodConfig:
    """``[likelihood]``: the Gaussian likelihood of a regression data set.

    A classification data set has the categorical (softmax) likelihood, or with
    ``model.kind = "logistic_regression"`` the Bernoulli one, and no options.

    Attributes:
        noise_std: the noise standard deviation σ, fixed, in the units of the targets in the
            data files; ``None`` samples ``log σ`` with the network (flat prior on ``log σ``,
            started at the targets' standard deviation).
    """

    noise_std: float | None = None


@dataclass(frozen=True)
class PriorConfig:
    """``[prior]``: a factory of :mod:`sgrld.bnn.priors` and its keyword arguments.

    Attributes:
        kind: a name of :data:`sgrld_app.config.PRIORS`.
        params: keyword arguments of the factory (its defaults for those left out).
    """

    kind: str = "horseshoe"
    params: dict[str, Any] = field(default_factory=dict)


LEARNING_RATE = "auto"
"""``sampler.learning_rate`` of sgrld, sghmc and sgnht when it is not set: chosen in the first
quarter of the burn-in (:mod:`sgrld.chains.step_size`)."""


CONFIG_TYPES: dict[str, Any] = {
    "learning_rate": float | str | None,
    "correction": str,
    "gradient_noise": str | None,
}
"""``[sampler]`` keys whose type is not that of the factories' annotations: ``learning_rate``
also takes ``"rule"`` (i-SGD's ``None``), ``correction`` names its mode (``None`` is the Python
spelling of ``"none"``), and ``gradient_noise`` only names an estimate (SGHMC's known variance, a
number, is for the Python API)."""


def sampler_fields() -> list[tuple[str, Any, Any]]:
    """``(name, type, default)`` of ``[sampler]``'s keys after ``metric_params``: the keyword
    options of the samplers of :data:`~sgrld_app.config.registries.SAMPLERS`, in the order they
    first appear (:func:`~sgrld_app.config.registries.sampler_keywords`), typed by their
    annotations (:func:`~sgrld_app.config.key_checks.declared_type`, united over the kinds) and
    defaulting to :func:`sgrld.sgrld`'s default, else ``None`` (the kind's own default).

    Example:
        >>> [f for f in sampler_fields() if f[0] in ("friction", "correction_scale")]
        [('correction_scale', float | str, 'auto'), ('friction', float | None, None)]
    """
    types_: dict[str, list[Any]] = {}
    for kind in SAMPLERS:
        for name, default in sampler_keywords(kind).items():
            hint = declared_type(SAMPLERS[kind], name, default)
            types_.setdefault(name, []).extend(typing.get_args(hint) or [hint])
    defaults = sampler_keywords("sgrld")
    fields = []
    for name, hints in types_.items():
        default = defaults.get(name)
        if default is inspect.Parameter.empty:
            default = None
        kinds = tuple(dict.fromkeys(h for h in hints if h is not None))
        if default is None:
            kinds = tuple(dict.fromkeys((*kinds, type(None))))
        declared = CONFIG_TYPES.get(name, functools.reduce(operator.or_, kinds))
        fields.append((name, declared, default))
    return fields


@dataclass(frozen=True)
class SamplerSection:
    """The keys of ``[sampler]`` that are not a sampler's keyword option: ``kind`` (a name of
    :data:`sgrld_app.config.SAMPLERS`), ``metric`` (a name of :data:`sgrld_app.config.METRICS`;
    sgrld, sghmc) and ``metric_params`` (keyword arguments of the metric factory)."""

    kind: str = "sgrld"
    metric: str = "identity"
    metric_params: dict[str, Any] = field(default_factory=dict)

    def sampler_options(self) -> dict[str, Any]:
        """The keyword arguments of the kind's sampler (all but ``num_data`` and ``metric``);
        an option left at ``None`` takes the sampler's default.

        Example:
            >>> SamplerConfig(correction="hutchinson").sampler_options()["correction"]
            'hutchinson'
            >>> SamplerConfig(kind="sghmc", friction=0.5).sampler_options()["friction"]
            0.5
            >>> SamplerConfig().sampler_options()["learning_rate"], "learning_rate" in (
            ...     SamplerConfig(kind="isgd").sampler_options())
            ('auto', False)
        """
        options = {}
        for name, default in sampler_keywords(self.kind).items():
            value = getattr(self, name)
            if name == "learning_rate" and value is None:
                value = "rule" if self.kind == "isgd" else LEARNING_RATE
            if value == "rule":  # isgd's learning_rate=None
                continue
            if value is not None or default is None:
                options[name] = value
        return options


SamplerConfig = dataclasses.make_dataclass(
    "SamplerConfig", sampler_fields(), bases=(SamplerSection,), frozen=True
)
SamplerConfig.__module__ = __name__
SamplerConfig.__doc__ = """``[sampler]``: the kind, its metric and every keyword option of the
    samplers.

    The fields after ``metric_params`` are made from the samplers' signatures
    (:func:`sampler_fields`): every keyword option of :func:`sgrld.sgrld`, :func:`sgrld.sghmc`,
    :func:`sgrld.sgnht` and :func:`sgrld.isgd` but ``num_data`` (the training-set size) and
    ``metric``, with :func:`sgrld.sgrld`'s defaults, except ``learning_rate`` (``None``:
    :data:`LEARNING_RATE`, Yu et al.'s 0.25, except for isgd, whose default is its λ rule); the
    others default to ``None``, the sampler's own default. An option set for a kind that does not
    take it is an error. :meth:`sampler_options` passes the kind's options on. The factories'
    docstrings document each option; in a file:

    Attributes:
        kind: a name of :data:`sgrld_app.config.SAMPLERS`: ``sgrld``, ``sghmc``, ``sgnht``,
            ``isgd``.
        metric: a name of :data:`sgrld_app.config.METRICS` (sgrld, sghmc).
        metric_params: keyword arguments of the metric factory.
        learning_rate: ``lr = h·N`` (> 0); ``"auto"``: chosen in the first quarter of
            ``run.burn_in`` (:mod:`sgrld.chains.step_size`); ``"rule"``: i-SGD's λ rule (isgd
            only); ``None``: the kind's default (:data:`LEARNING_RATE`; the rule for isgd).
        adapt_until: an integer, ``"auto"`` or ``"never"`` (adapt throughout; TOML has no null).
        gradient_noise: ``"per_example"`` (sghmc, isgd) or ``"square"`` (isgd).
    """


@dataclass(frozen=True)
class ScheduleConfig:
    """``[schedule]``: how the learning rate (and, cyclical, the temperature) change over the
    run's steps ``t = 0, 1, …`` (:mod:`sgrld.numerics.schedules`), for every sampler but i-SGD.

    Attributes:
        kind: ``"constant"``: ``sampler.learning_rate`` throughout; ``"polynomial"``:
            ``lr·(1 + t/offset)^(−power)`` (Welling & Teh 2011); ``"cyclical"``: cSG-MCMC (Zhang
            et al. 2020), a cosine learning rate from ``lr`` restarted ``cycles`` times over the
            run, each cycle's first ``exploration`` share at temperature 0 and samples kept only
            in the rest (on top of ``run.burn_in`` and ``run.thin``).
        offset: polynomial's step scale (> 0).
        power: polynomial's exponent (≥ 0; SGLD's decreasing-step theory needs (0.5, 1]).
        cycles: cyclical's number of cycles (≥ 1).
        exploration: cyclical's share of each cycle spent exploring, in [0, 1).
    """

    kind: str = "constant"
    offset: float = 1000.0
    power: float = 0.55
    cycles: int = 4
    exploration: float = 0.5


AUTO_BURN_IN = 1000
"""``run.burn_in = "auto"``'s steps where the run has at least twice as many (the papers' 1,000
minibatches, Yu et al.'s and Li et al.'s); a shorter run burns in its first half."""


@dataclass(frozen=True)
class RunConfig:
    """``[run]``: the sampling schedule (burn-in and thinning counted in minibatches).

    Attributes:
        epochs: passes over the shuffled training set.
        burn_in: global steps before the first sample; ``"auto"`` (the default):
            :data:`AUTO_BURN_IN` steps, or half the run where it is shorter than twice that
            (:meth:`burn_in_steps`), so that a run on a small data set keeps samples.
        thin: step ``s`` is a sample when ``s >= burn_in`` and ``(s + 1) % thin == 0``.
        chains: independent chains run with ``vmap``.
        seed: the random seed of initialisation, shuffling and noise.
        save_samples: write the thinned samples to ``samples/`` (one ``.npz`` per epoch).
        curvature: score the input-space curvature C(x) of every sample (slow).
        checkpoint_every: write a checkpoint (to resume from) after every this many epochs.
        checkpoint_seconds: but skip one due less than this many seconds after the last (or
            after sampling started): a killed run loses at most this long plus an epoch, and
            short epochs (a GPU's) are not slowed by a checkpoint each. ``0``: every due epoch.
        devices: shard the chains over ``"all"`` devices or the first ``N`` (``None``: one
            device, no mesh; :func:`sgrld.chains.devices.make_mesh`).
        data_parallel: devices ``D`` that split each chain's minibatch and sum its gradient; the
            mesh has ``devices / D`` chain groups, which must divide ``chains``.
    """

    epochs: int = 400
    burn_in: int | str = "auto"
    thin: int = 100
    chains: int = 1
    seed: int = 0
    save_samples: bool = False
    curvature: bool = False
    checkpoint_every: int = 1
    checkpoint_seconds: float = 60.0
    devices: int | str | None = None
    data_parallel: int = 1

    def burn_in_steps(self, num_steps: int) -> int:
        """The burn-in of this run's ``num_steps`` steps: ``burn_in`` as given, or for
        ``"auto"`` :data:`AUTO_BURN_IN` steps, and half of ``num_steps`` where that is less.

        Example:
            >>> RunConfig().burn_in_steps(4800), RunConfig().burn_in_steps(800)
            (1000, 400)
            >>> RunConfig(burn_in=1000).burn_in_steps(800)
            1000
        """
        if self.burn_in != "auto":
            return int(self.burn_in)
        return min(AUTO_BURN_IN, num_steps // 2)


@dataclass(frozen=True)
class OutConfig:
    """``[out]``: where results go.

    Attributes:
        folder: the results folder (created).
    """

    folder: str = "results/run"


@dataclass(frozen=True)
class Config:
    """A whole experiment configuration; see the module docstring for the file format."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    likelihood: LikelihoodConfig = field(default_factory=LikelihoodConfig)
    prior: PriorConfig = field(default_factory=PriorConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    run: RunConfig = field(default_factory=RunConfig)
    out: OutConfig = field(default_factory=OutConfig)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """The configuration as nested plain dicts (tuples become lists; ``None`` is kept).

        Example:
            >>> Config().to_dict()["run"]["thin"]
            100
        """
        return json.loads(json.dumps(dataclasses.asdict(self)))

    def num_steps(self, num_train: int) -> int:
        """The run's steps on ``num_train`` training rows: ``run.epochs`` of
        ``num_train // data.batch_size`` minibatches."""
        return self.run.epochs * (num_train // self.data.batch_size)

    def burn_in_steps(self, num_train: int | None) -> int:
        """``run.burn_in`` of the run on ``num_train`` training rows
        (:meth:`RunConfig.burn_in_steps`; ``"auto"`` resolved).

        Example:
            >>> Config().burn_in_steps(num_train=277)  # 400 epochs of 2 minibatches of 100
            400

        Raises:
            ValueError: ``run.burn_in = "auto"`` and ``num_train`` is ``None``.
        """
        if num_train is None and self.run.burn_in == "auto":
            raise ValueError('run.burn_in = "auto" depends on the run\'s length: give num_train')
        return self.run.burn_in_steps(self.num_steps(num_train or 0))


SECTIONS: dict[str, type] = typing.get_type_hints(Config)
