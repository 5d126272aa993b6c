"""Typed experiment configuration: TOML files, ``--set key=value`` overrides, validation.

A configuration has seven sections, each a frozen dataclass; every key has a default, so a file
only lists what differs. The defaults are the MNIST setup of Yu et al. (TMLR 2023, Sec. 4.1 and
Table 4): a 784-400-400-10 MLP with the horseshoe prior, Identity metric with its learning rate
chosen in the burn-in (``"auto"``; Yu et al. use 0.25), batches of 100, burn-in 1000
minibatches, a sample every 100 minibatches, 400 epochs.

.. code-block:: toml

    [data]                      # sgrld.data.load_dataset
    name = "mnist"              # mnist, fashion_mnist, cifar10, digits, or a UCI regression
                                # set: uci_boston, uci_concrete, uci_energy, uci_kin8nm,
                                # uci_naval, uci_power, uci_protein, uci_wine, uci_yacht
    # data_dir = "..."          # default: $SGRLD_DATA_DIR, else ~/.cache/sgrld/data
    # validation_size = 10000   # default: the data set's (10000 for MNIST, 0 for UCI)
    # train_size = 10000        # use only the first train_size training examples
    # verify_checksums = false  # skip the SHA-256 check of files with a known checksum
    # split = 0                 # the UCI train/test split (0 to 19; 0 to 4 for protein)
    batch_size = 100

    [model]
    kind = "mlp"                # mlp, cnn (widths = its dense layers), regression_mlp (one width),
                                # resnet20 (one width: the first stack's channels, 16)
    widths = [400, 400]
    # depth = 20                # resnet20 only: 6n + 2 layers
    # conv = "auto"             # cnn, resnet20: auto (im2col on a CPU), xla, im2col

    [likelihood]                # regression only (the Gaussian likelihood)
    # noise_std = 0.5           # fixed noise std, in the targets' units; default: sampled

    [prior]                     # a factory of sgrld.bnn.priors and its keyword arguments
    kind = "horseshoe"          # gaussian, laplace, student_t, horseshoe, horseshoe_per_weight,
                                # conv_correlated
    [prior.params]
    weight_scale = 1.41

    [sampler]                   # sgrld.sgrld(potential, metric, num_data=N, ...)
    kind = "sgrld"              # sgrld, sghmc, sgnht, isgd (sgrld.<kind>; only its options)
    metric = "monge"            # identity, rmsprop, wenzel, monge, shampoo, fisher_diag,
                                # fisher_qdiag, fisher_full (labels, eps, decay)
    learning_rate = "auto"      # lr = h·N; "auto": chosen in the first quarter of run.burn_in
                                # (the default; isgd: "rule", its λ rule)
    temperature = 1.0
    # adapt_until = "auto"      # freeze at 3/4 of run.burn_in ("never": adapt throughout; a step)
    # correction = "auto"       # none, hutchinson, exact; auto: Γ before the freeze for Monge
    # correction_scale = "auto"  # the share of Γ: estimated online ("auto") or a number c
    # num_probes = 1            # Rademacher probes per step of "hutchinson"
    # correction_warmup = 30    # metric updates before Γ (default: the metric's warm-up)
    # prior_in_metric = true    # the prior's gradient enters the metric's statistic
    # max_drift_norm = 1000.0   # identity fallback when |G⁻¹g| exceeds it (default: none)
    # gamma_kick_limit = 1.0    # Γ's kick tamed to this many noise sds (default: none)
    # frozen_drift_limit = 10.0 # a frozen metric's drift step clipped at this many noise sds
                                # (1e30: in effect never; a file takes no inf)
    # friction = 0.1            # sghmc: α ∈ (0, 1]; gradient_noise = "per_example", noise_decay
    # diffusion = 0.1           # sgnht: α ∈ (0, 1]
    # warmup = 100              # isgd (learning_rate = "rule" for its λ rule): margin,
                                # noise_window, gradient_noise = "per_example" | "square"
    [sampler.metric_params]     # keyword arguments of the sgrld.metrics factory
    alpha2 = 1.25
    decay = 0.9

    [run]
    epochs = 400
    burn_in = "auto"            # minibatches before the first sample ("auto": 1000, or half a
                                # run shorter than 2000)
    thin = 100                  # a sample every `thin` minibatches
    chains = 1
    seed = 0
    save_samples = false
    curvature = false
    checkpoint_every = 1        # epochs between checkpoints (sgrld run --resume OUT)
    checkpoint_seconds = 60.0   # but at least this long apart (0: every due epoch)
    # devices = "all"           # shard the chains over "all" or N devices (default: one device)
    # data_parallel = 2         # devices that split each chain's minibatch (chains = devices / D)

    [out]
    folder = "results/run"

Overrides are dotted keys with values parsed as TOML literals (``run.epochs=3``,
``sampler.metric_params.alpha2=0.5``, ``model.widths=[800, 800]``, ``sampler.metric="monge"``); a
value that is not a TOML literal is taken as a string, so ``sampler.metric=monge`` works too.
TOML has no null: leave a key out for its default (``None`` for the optional ones).

Every error is a :class:`ConfigError` that names the offending key: unknown keys (with the valid
keys and the closest match), wrong types and out-of-range values.

The ``[sampler]`` keys after ``metric_params`` are the keyword options of :func:`sgrld.sgrld`,
:func:`sgrld.sghmc`, :func:`sgrld.sgnht` and :func:`sgrld.isgd`, one for one;
:meth:`SamplerConfig.sampler_options` passes those of ``sampler.kind`` on by keyword, and an
option set for a kind that does not take it is an error.

The package: :mod:`~sgrld_app.config.schema` (the sections, building from dicts, overrides),
:mod:`~sgrld_app.config.key_checks` (type and value checks, :class:`ConfigError`),
:mod:`~sgrld_app.config.registries` (the metric, prior and model names),
:mod:`~sgrld_app.config.validation` (one check per section) and :mod:`~sgrld_app.config.toml_io`
(reading and writing TOML).

Example:
    >>> cfg = load_config(None, ["sampler.metric=monge", "sampler.metric_params.alpha2=0.5"])
    >>> cfg.sampler.metric, cfg.sampler.metric_params, cfg.run.thin
    ('monge', {'alpha2': 0.5}, 100)
    >>> load_config(None, ["sampler.learnig_rate=0.1"])
    Traceback (most recent call last):
    ...
    sgrld_app.config.key_checks.ConfigError: unknown key 'sampler.learnig_rate' (did you mean...
"""

from sgrld_app.config.key_checks import ConfigError
from sgrld_app.config.registries import METRICS, MODEL_KINDS, PRIORS, SAMPLERS, Registry
from sgrld_app.config.schema import (
    SECTIONS,
    Config,
    DataConfig,
    LikelihoodConfig,
    ModelConfig,
    OutConfig,
    PriorConfig,
    RunConfig,
    SamplerConfig,
    ScheduleConfig,
)
from sgrld_app.config.toml_io import (
    from_dict,
    load_config,
    parse_override,
    set_dotted,
    to_toml,
    with_overrides,
    write_config,
)
from sgrld_app.config.validation import validate

__all__ = [
    "METRICS",
    "MODEL_KINDS",
    "PRIORS",
    "SAMPLERS",
    "SECTIONS",
    "Config",
    "ConfigError",
    "DataConfig",
    "LikelihoodConfig",
    "ModelConfig",
    "OutConfig",
    "PriorConfig",
    "Registry",
    "RunConfig",
    "SamplerConfig",
    "ScheduleConfig",
    "from_dict",
    "load_config",
    "parse_override",
    "set_dotted",
    "to_toml",
    "validate",
    "with_overrides",
    "write_config",
]
