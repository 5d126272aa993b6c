"""``sgrld demo``: four metrics on scikit-learn's digits, in about a minute (the README's main job).

A 64-100-100-10 ReLU MLP with the horseshoe prior of Yu et al. (2023) on the 8x8 digits bundled
with scikit-learn (1258 training, 180 validation and 359 test images; no files needed), sampled by
SGRLD in four metrics with the metric settings of the paper (λ = 0.99, ε = 1e-8; Monge λ = 0.9;
Shampoo roots every 100 steps), each learning rate ``"auto"``, chosen in the burn-in on the
validation log-likelihood (:mod:`sgrld_app.auto_rate`), and Monge's α² chosen with it
(:data:`SETTINGS`).

Batches of 32 (39 steps per epoch), burn-in 1000 minibatches, a sample every 20, 100 epochs: 145
samples per metric. Each metric is one :func:`sgrld_app.launch.run_config` run whose folder
(``--out``/``<metric>``) holds its configuration, ``metrics.jsonl`` and ``summary.json``;
``--out`` also gets ``demo.md`` (the printed table: test log-likelihood, accuracy, ECE, validation
log-likelihood, seconds per epoch of sampling and of scoring, compile seconds) and ``curves.png``
(test log-likelihood and accuracy against epochs, as Yu et al.'s Fig. 3).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sgrld.chains.rate_choice import OPTION_NAMES
from sgrld_app import auto_rate, report
from sgrld_app.argument_types import integer_at_least, positive_int
from sgrld_app.config import Config, ConfigError, load_config
from sgrld_app.experiment import EXIT_CODES, Result
from sgrld_app.launch import run_config

BASE = [
    'data.name="digits"',
    "data.batch_size=32",
    "model.widths=[100, 100]",
    'prior.kind="horseshoe"',
    "run.burn_in=1000",
    "run.thin=20",
]
SETTINGS = {
    "Identity": ['sampler.metric="identity"'],
    "RMSprop": ['sampler.metric="rmsprop"'],
    "Monge": ['sampler.metric="monge"'],
    "Shampoo": ['sampler.metric="shampoo"'],
}
"""Each metric's overrides of :data:`BASE`; every learning rate is ``"auto"``, chosen in the
burn-in (:mod:`sgrld_app.auto_rate`), and Monge's α² with it."""
EPOCHS = 100
TITLE = "digits, 64-100-100-10 MLP, horseshoe prior"


def configs(out: str | Path, epochs: int = EPOCHS, seed: int = 0) -> dict[str, Config]:
    """The demo's configuration of each metric, writing to ``out/<metric>``.

    Example:
        >>> c = configs("results/demo")["Monge"]
        >>> c.data.name, c.model.widths, c.sampler.metric_params, c.out.folder
        ('digits', (100, 100), {}, 'results/demo/monge')
    """
    return {
        name: load_config(
            None,
            [
                *BASE,
                *overrides,
                f"run.epochs={epochs}",
                f"run.seed={seed}",
                f"out.folder={json.dumps(str(Path(out) / name.lower()))}",
            ],
        )
        for name, overrides in SETTINGS.items()
    }


def run_learning_rate(result: Result) -> str:
    """The rate a run used, as the table shows it: the chosen one, marked, where it was
    ``"auto"`` (:mod:`sgrld_app.auto_rate`), with Monge's α² where it was chosen with it.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> meta = {"config": {"sampler": {"learning_rate": "auto"}},
        ...         "learning_rate_search": {"learning_rate": 0.0583}}
        >>> run_learning_rate(NS(summary={"meta": meta}))
        '0.0583 (auto)'
        >>> meta["learning_rate_search"] |= {"option": "alpha2", "option_value": 0.1}
        >>> run_learning_rate(NS(summary={"meta": meta}))
        '0.0583 (auto, α² 0.1)'
    """
    meta = result.summary.get("meta", {})
    chosen = meta.get(auto_rate.META_KEY)
    if chosen is not None and chosen.get("option_value") is not None:
        name = OPTION_NAMES.get(chosen["option"], chosen["option"])
        return f"{chosen['learning_rate']:.3g} (auto, {name} {chosen['option_value']:g})"
    if chosen is not None:
        return f"{chosen['learning_rate']:.3g} (auto)"
    return format(meta.get("config", {}).get("sampler", {}).get("learning_rate"), "g")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the demo's options to ``parser``."""
    parser.add_argument(
        "--out", default="results/demo", help="results folder (default: %(default)s)"
    )
    parser.add_argument(
        "--epochs",
        type=positive_int,
        default=EPOCHS,
        help="epochs per metric (default: %(default)s)",
    )
    parser.add_argument(
        "--seed", type=integer_at_least(0), default=0, help="random seed (default: %(default)s)"
    )


def run(args: argparse.Namespace) -> int:
    """Run the four metrics, print and save the table and the curves; the exit code."""
    console = report.console()
    out = Path(args.out)
    console.print(
        "SGRLD demo: a 64-100-100-10 MLP with the horseshoe prior on scikit-learn's digits, "
        f"{args.epochs} epochs per metric"
    )
    results, rows = {}, []
    try:
        settings = configs(out, args.epochs, args.seed)
    except ConfigError as err:
        raise ConfigError(f"--epochs {args.epochs}: {err}") from None
    for name, config in settings.items():
        try:
            results[name] = result = run_config(config, progress=True, label=name)
        except ConfigError as err:
            raise ConfigError(f"--epochs {args.epochs}, --seed {args.seed}: {err}") from None
        rows.append(report.summary_row(result, metric=name, lr=run_learning_rate(result)))
        if result.status == "interrupted":
            break
    columns = report.summary_columns(rows[0])
    console.print(report.rich_table(TITLE, columns, rows))
    (out / "demo.md").write_text(report.markdown_table(TITLE, columns, rows), encoding="utf-8")
    png = report.plot_curves(
        {name: r.records for name, r in results.items()}, out / "curves.png", TITLE
    )
    console.print(f"Wrote {out / 'demo.md'} and {png}")
    for r in results.values():
        if r.status != "completed":
            console.print(r.message)
    return max(EXIT_CODES[r.status] for r in results.values())
