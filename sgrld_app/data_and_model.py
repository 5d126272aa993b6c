"""The data set and the network of a configuration: a set of the registry (``data.name``) or a
data file of one's own (``data.path``, :func:`sgrld.data.load_file`), a network of the built-in
kinds (``model.kind``) or of one's own factory (``model.factory``, :mod:`sgrld.bnn.factory`).

A data file's SHA-256 goes into the run's ``meta`` (``summary.json``, the checkpoints) as
``data_file``; a resumed run reads the file again and refuses to go on if it changed
(:func:`check_same_data`). A file's inputs keep their shape for a factory and a ``cnn`` or
``resnet20`` (images ``(n, H, W, C)``); the other built-in kinds take them flattened.

Example:
    >>> from sgrld_app.config import load_config
    >>> cfg = load_config(None, ["data.name=digits", "model.widths=[8]"])
    >>> ds = load_data(cfg)
    >>> net = network(cfg, ds, ds.x_train)
    >>> import jax
    >>> net.apply(net.init(jax.random.key(0)), ds.x_test[:2]).shape, data_file_meta(cfg, ds)
    ((2, 10), {})
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from sgrld import bnn
from sgrld.bnn.factory import FactoryError, import_factory, network_of
from sgrld.data import DATASETS, DataError, Dataset, load_dataset, load_file
from sgrld.data.transforms import flatten_inputs
from sgrld.numerics.pytrees import PyTree
from sgrld_app.config import Config, ConfigError
from sgrld_app.config.validation import check_model_for_data

META_KEY = "data_file"
"""The key of ``meta`` holding a data file's ``path`` (absolute) and ``sha256``."""


class Net(NamedTuple):
    """The network of a configuration.

    Attributes:
        init: ``key -> net_params`` of one chain.
        apply: ``(net_params, x) -> outputs`` on a minibatch, as the likelihood takes it.
        evaluate: ``(net_params, x) -> logits`` (classification) or outputs, to score held-out
            inputs (a batch-normalised network with the training inputs' statistics).
    """

    init: Callable[[jax.Array], PyTree]
    apply: Callable[[PyTree, jax.Array], jax.Array]
    evaluate: Callable[[PyTree, jax.Array], jax.Array]


def load_data(config: Config) -> Dataset:
    """The data set of ``[data]``: the registry's ``data.name`` or the file ``data.path``.

    Raises:
        sgrld.data.DataError: a missing or corrupt file, naming it.
        ConfigError: a split or size the data do not allow, a model that does not fit the file's
            targets (:func:`~sgrld_app.config.validation.check_model_for_data`) or inputs.
    """
    d = config.data
    try:
        if d.path is None:
            return load_dataset(
                d.name,
                d.data_dir,
                validation_size=d.validation_size,
                split=d.split,
                test_size=d.test_size,
                standardize=d.standardize,
                verify=None if d.verify_checksums else False,
            )
        ds = load_file(
            d.path,
            inputs=d.inputs,
            target=d.target,
            task=d.task,
            validation_size=d.validation_size,
            test_size=d.test_size,
            standardize=True if d.standardize is None else d.standardize,
        )
    except DataError:
        raise
    except ValueError as err:
        raise ConfigError(f"[data]: {err}") from None
    check_model_for_data(config, ds.num_classes)
    return _shaped(config, ds)


def _shaped(config: Config, ds: Dataset) -> Dataset:
    """A data file's inputs as the model takes them: flat for an MLP (and logistic regression),
    images for a ``cnn`` or ``resnet20``, as they are for a factory."""
    m, shape = config.model, ds.x_train.shape[1:]
    if m.factory is not None:
        return ds
    if m.kind in ("cnn", "resnet20"):
        if len(shape) != 3:
            raise ConfigError(
                f"model.kind: a {m.kind} takes images (n, height, width, channels), and "
                f"data.path = {config.data.path!r} holds inputs of shape {('n', *shape)}"
            )
        return ds
    flat = (flatten_inputs(x) for x in (ds.x_train, ds.x_val, ds.x_test))
    return ds._replace(**dict(zip(("x_train", "x_val", "x_test"), flat, strict=True)))


def network(config: Config, ds: Dataset, x_train: np.ndarray) -> Net:
    """The network of ``[model]`` for the data set ``ds`` (its training inputs ``x_train``).

    Raises:
        ConfigError: a ``model.factory`` that cannot be imported or builds no network of the
            data (:class:`sgrld.bnn.factory.FactoryError`'s line).
    """
    m, regression = config.model, ds.num_classes == 0
    outputs = 1 if regression else ds.num_classes
    if m.factory is not None:
        try:
            net = network_of(
                import_factory(m.factory),
                input_shape=x_train.shape[1:],
                num_outputs=outputs,
                name=m.factory,
            )
        except FactoryError as err:
            raise ConfigError(str(err)) from None
        return Net(net.init, net.apply, net.apply)
    model = _model(config, ds, outputs)
    input_shape = (1, *x_train.shape[1:])
    evaluate = bnn.models.evaluation_apply_fn(model, x_train)  # batch norm: training statistics
    if m.kind == "logistic_regression":
        evaluate = _two_class_logits(evaluate)
    return Net(lambda key: bnn.init_params(model, key, input_shape), bnn.apply_fn(model), evaluate)


def _model(config: Config, ds: Dataset, outputs: int):
    """The Flax network of ``[model]``'s built-in ``kind``."""
    m, d = config.model, config.data
    if m.kind == "logistic_regression":
        return bnn.models.logistic_regression()
    image_shape = DATASETS[d.name].image_shape if d.path is None else ds.x_train.shape[1:]
    if m.kind == "resnet20":
        return bnn.ResNet20(
            width=m.widths[0],
            depth=m.depth,
            num_outputs=outputs,
            image_shape=image_shape,
            conv=m.conv,
        )
    if m.kind == "cnn":
        return bnn.CNN(
            dense_features=m.widths, num_outputs=outputs, image_shape=image_shape, conv=m.conv
        )
    return bnn.MLP(features=m.widths, num_outputs=outputs)


def _two_class_logits(apply: Callable) -> Callable:
    """``apply`` of a logistic regression's logit ``z [n, 1]`` as the two classes' ``[0, z]``."""

    def logits(net: PyTree, x: jax.Array) -> jax.Array:
        z = apply(net, x)
        return jnp.concatenate([jnp.zeros_like(z), z], axis=-1)

    return logits


def data_file_meta(config: Config, ds: Dataset) -> dict[str, Any]:
    """``{"data_file": {"path": ..., "sha256": ...}}`` of a run on a data file; ``{}`` else."""
    if config.data.path is None:
        return {}
    return {META_KEY: {"path": str(Path(config.data.path).resolve()), "sha256": ds.sha256}}


def check_same_data(saved_meta: Mapping[str, Any], meta: Mapping[str, Any], folder: Path) -> None:
    """Refuse to resume the run in ``folder`` on a data file that changed since it started.

    Args:
        saved_meta: the ``meta`` of the run's checkpoint.
        meta: the ``meta`` of the run rebuilt now (:func:`data_file_meta`).
        folder: the results folder, for the message.

    Raises:
        sgrld.data.DataError: the file's SHA-256 differs, naming the file and both digests.

    Example:
        >>> was = {META_KEY: {"path": "/d/mine.csv", "sha256": "ab" * 32}}
        >>> now = {META_KEY: {"path": "/d/mine.csv", "sha256": "cd" * 32}}
        >>> check_same_data(was, now, Path("out"))
        Traceback (most recent call last):
        ...
        sgrld.data.errors.DataError: /d/mine.csv: changed since the run in out started (SHA-256
        abababababab…, now cdcdcdcdcdcd…); resume it on the file as it was, or start afresh ...
    """
    before, now = saved_meta.get(META_KEY), meta.get(META_KEY)
    if before is None or now is None or before["sha256"] == now["sha256"]:
        return
    raise DataError(
        f"{now['path']}: changed since the run in {folder} started (SHA-256 "
        f"{before['sha256'][:12]}…, now {now['sha256'][:12]}…); resume it on the file as it "
        "was, or start afresh (--overwrite)"
    )
