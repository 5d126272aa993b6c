"""The halving's rounds on the CPU skip a survivor's repeated slots and score each survivor once:
the same choice, scores and chains as every slot run and scored (the batched path of other
backends)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from sgrld.chains import rate_grid, rate_halving
from tests.chains.test_step_size import batch_fn, quadratic


def halving(backend: str, monkeypatch, calls: list[int]):
    """``halve_learning_rate`` on the quadratic from θ = 10 with ``_advance_fn`` built for
    ``backend`` (a fresh sampler: the kept programs are not reused); ``calls`` gets the number
    of rates each call of the score saw."""
    s = quadratic()
    states = jax.vmap(s.init)(jnp.full((4, 2), 10.0))
    monkeypatch.setattr(rate_halving.jax, "default_backend", lambda: backend)

    def score(params):
        calls.append(params.shape[0])
        return -jnp.mean(params**2, axis=(1, 2))

    candidates = rate_grid.candidate_rates(2.0 / 25.0)
    return rate_halving.halve_learning_rate(
        jax.random.key(0), s.rate_search, states, batch_fn, score, 400, candidates
    )


def test_repeats_skipped_on_the_cpu_change_nothing(monkeypatch):
    cpu_calls: list[int] = []
    batched_calls: list[int] = []
    cpu, cpu_ends = halving("cpu", monkeypatch, cpu_calls)
    batched, batched_ends = halving("gpu", monkeypatch, batched_calls)
    assert cpu.learning_rate == batched.learning_rate
    np.testing.assert_allclose(cpu.scores, batched.scores, rtol=1e-5)
    np.testing.assert_allclose(cpu_ends.params, batched_ends.params, rtol=1e-5, atol=1e-6)
    # each round scores its survivors only: 7 rates, then 4, then 2 (both paths)
    assert cpu_calls == batched_calls == [7, 4, 2]


@pytest.mark.parametrize("backend", ["cpu", "gpu"])
def test_a_skipped_slot_keeps_its_state(backend):
    """An inactive slot of the CPU path returns its state unchanged; the batched path runs it."""
    s = quadratic()
    states = jax.vmap(s.init)(jnp.full((2, 2), 10.0))
    rates = jnp.asarray([0.01, 0.01], jnp.float32)
    slots = jax.tree.map(lambda x: jnp.stack([x, x]), states)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(rate_halving.jax, "default_backend", lambda: backend)
        advance = rate_halving._advance_fn(s.rate_search, batch_fn, 16)
        keys = jax.random.split(jax.random.key(0), 2)
        ends, _ = advance(rates, slots, keys, 0, jnp.asarray([True, False]))
    moved = np.abs(np.asarray(ends.params[1]) - 10.0).max()
    assert np.abs(np.asarray(ends.params[0]) - 10.0).max() > 0.5  # the active slot ran
    assert (moved == 0.0) if backend == "cpu" else (moved > 0.5)


def test_compiled_ahead_the_halving_compiles_no_program_of_its_own():
    """:func:`compile_ahead` compiles the halving's program (in a thread); the halving then
    compiles none of its size (only its small ops), and chooses what it chooses without it."""
    from tests.chains.test_sampling_compiles import compilations

    def search(ahead: bool):
        s = quadratic()
        states = jax.vmap(s.init)(jnp.full((4, 2), 10.0))
        score = lambda params: -jnp.mean(params**2, axis=(1, 2))  # noqa: E731
        candidates = rate_grid.candidate_rates(2.0 / 25.0)
        if ahead:
            rate_halving.compile_ahead(s.rate_search, states, batch_fn, 400, len(candidates))()
        with compilations() as seen:
            choice = rate_halving.halve_learning_rate(
                jax.random.key(0), s.rate_search, states, batch_fn, score, 400, candidates
            )[0]
        return choice, len(seen)

    search(False)  # the halving's small ops, compiled once for every later search
    (warm, warm_count), (cold, cold_count) = search(True), search(False)
    assert warm.learning_rate == cold.learning_rate and warm.scores == cold.scores
    assert (warm_count, cold_count) == (0, 1)  # the advance program, compiled ahead or not
