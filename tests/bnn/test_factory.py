"""``sgrld.bnn.factory``: a network named ``"package.module:function"``, of any library, its chains'
parameters, and every factory that cannot build one refused in one line (issue 51, item 3)."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from sgrld.bnn.factory import FactoryError, import_factory, network_of

MODELS = """
import jax, jax.numpy as jnp
import equinox as eqx
import haiku as hk
from flax import linen, nnx

def linen_mlp(num_outputs):
    return linen.Sequential([linen.Dense(8), linen.tanh, linen.Dense(num_outputs)])

class Small(nnx.Module):
    def __init__(self, key, n):
        self.hidden = nnx.Linear(3, 8, rngs=nnx.Rngs(key))
        self.out = nnx.Linear(8, n, rngs=nnx.Rngs(1))
    def __call__(self, x):
        return self.out(jnp.tanh(self.hidden(x)))

def nnx_mlp(key, num_outputs):
    return Small(key, num_outputs)

def equinox_mlp(key, num_outputs, input_shape):
    return eqx.nn.MLP(input_shape[0], num_outputs, 8, 1, key=key)

def haiku_mlp(num_outputs):
    return hk.transform(lambda x: hk.nets.MLP([8, num_outputs])(x))

def plain(**options):
    init = lambda key: {"w": jax.random.normal(key, (3, options["num_outputs"]))}
    return init, lambda params, x: x @ params["w"]

def three():
    return 3

def five_outputs(key):
    return eqx.nn.MLP(3, 5, 8, 1, key=key)

def wrong_inputs(key):
    return eqx.nn.MLP(4, 2, 8, 1, key=key)

def asks(learning_rate):
    return None

def fails():
    raise RuntimeError("no GPU here\\nsecond line")

NOT_A_FUNCTION = 3
"""


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[str, Path]:
    """A module of factories in a folder of its own, by a name no other test uses."""
    folder = tmp_path_factory.mktemp("factories")
    name = f"factories_{uuid.uuid4().hex[:8]}"
    (folder / f"{name}.py").write_text(textwrap.dedent(MODELS))
    yield name, folder
    sys.path[:] = [p for p in sys.path if p != str(folder.resolve())]
    sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("function", "kind"),
    [
        ("linen_mlp", "linen"),
        ("nnx_mlp", "nnx"),
        ("equinox_mlp", "equinox"),
        ("haiku_mlp", "haiku"),
        ("plain", "function"),
    ],
)
def test_each_library_builds_a_network_with_chains_apart(models, function, kind):
    name, folder = models
    network = network_of(
        import_factory(f"{name}:{function}", cwd=folder), input_shape=(3,), num_outputs=2
    )
    assert network.kind == kind
    params = jax.jit(jax.vmap(network.init))(jax.random.split(jax.random.key(1), 3))
    out = jax.vmap(network.apply, (0, None))(params, jnp.ones((4, 3)))
    assert out.shape == (3, 4, 2)
    assert float(jnp.abs(out[0] - out[1]).max()) > 0  # each chain from its own key


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("no_colon", ["not of the form 'package.module:function'"]),
        ("surely_no_such_module_51:f", ["no module named 'surely_no_such_module_51' in"]),
        ("{name}:missing", ["has no 'missing'", ".py"]),
        ("{name}:NOT_A_FUNCTION", ["NOT_A_FUNCTION is a int, not a function"]),
    ],
)
def test_a_factory_that_cannot_be_imported_is_one_line(models, spec, words):
    name, folder = models
    spec = spec.format(name=name)
    with pytest.raises(FactoryError) as info:
        import_factory(spec, cwd=folder)
    message = str(info.value)
    assert message.startswith(f"model.factory = {spec!r}: ") and "\n" not in message
    for word in words:
        assert word in message, message


def test_a_module_that_fails_to_import_says_how(tmp_path: Path):
    name = f"broken_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("import surely_no_such_dependency_51\n")
    with pytest.raises(FactoryError, match="importing .* failed: No module named 'surely_no"):
        import_factory(f"{name}:f", cwd=tmp_path)
    (tmp_path / f"{name}2.py").write_text("x = 1 / 0\n")
    with pytest.raises(FactoryError, match="failed: ZeroDivisionError: division by zero$"):
        import_factory(f"{name}2:f", cwd=tmp_path)
    sys.path[:] = [p for p in sys.path if p != str(tmp_path.resolve())]


@pytest.mark.parametrize(
    ("function", "words"),
    [
        ("three", ["returned a builtins.int, not a Flax Linen or NNX module"]),
        ("five_outputs", ["equinox network maps a minibatch of shape (2, 3) to (2, 5)"]),
        ("wrong_inputs", ["fails on a minibatch of shape (2, 3): TypeError"]),
        ("asks", ["it takes learning_rate", "key, num_outputs, input_shape"]),
        ("fails", ["the factory failed: RuntimeError: no GPU here"]),
    ],
)
def test_a_factory_that_builds_no_network_of_the_data_is_one_line(models, function, words):
    name, folder = models
    factory = import_factory(f"{name}:{function}", cwd=folder)
    with pytest.raises(FactoryError) as info:
        network_of(factory, input_shape=(3,), num_outputs=2, name=f"{name}:{function}")
    message = str(info.value)
    assert message.startswith(f"model.factory = '{name}:{function}': ") and "\n" not in message
    for word in words:
        assert word in message, message
