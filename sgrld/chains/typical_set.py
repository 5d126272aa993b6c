"""Whether chains start far from the target's typical set, by its configurational temperature:
the Stein virial's pilot chooses a rate for the steps it sees, and from a far start those are a
transient's (:func:`sgrld.chains.step_size.choose_learning_rate` searches again from the pilot's
end).

For ``p ∝ exp(−U/T)``, integration by parts gives ``E_p‖∇U‖² = T·E_p[tr ∇²U]``, so

    T_conf(θ) = ‖∇U(θ)‖² / tr ∇²U(θ)

is about T in the typical set (Rugh's configurational temperature) and grows as the square of
the distance outside it: on a Gaussian target, a start ``k`` standard deviations from the mean in
every coordinate has ``T_conf = k²·T``. Both terms are estimated without bias from minibatches:
``‖∇U‖²`` as ``N²·ĝ₁·ĝ₂``, ĝ₁ and ĝ₂ the gradients of ``Û/N`` on two independent minibatches (a
minibatch gradient's own square would add its noise, about ``N/B`` times T in the typical set),
and ``tr ∇²U`` as ``N·vᵀ∇²(Û/N)v`` with Rademacher ``v`` (Hutchinson).

Example:
  >>> import jax, jax.numpy as jnp, sgrld
  >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, 1)  # N(0, 1): one datum, 0
  >>> s = sgrld.sgrld(u, sgrld.metrics.identity(), learning_rate="auto", num_data=1)
  >>> t = temperature_fn(s.rate_search, lambda k: jnp.zeros(1))
  >>> [round(float(t(jax.random.key(0), jnp.full((2,), x))), 3) for x in (1.0, 10.0)]
  [1.0, 100.0]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from sgrld.chains.programs import kept
from sgrld.chains.rate_choice import RateChoice
from sgrld.numerics.pytrees import PyTree
from sgrld.samplers.rate_search import RateSearch

FAR = 25.0
"""A start is far from the typical set where its configurational temperature exceeds ``FAR·T``:
on a Gaussian, 5 standard deviations from the mean in every coordinate (the pilot's chains
relax in the first half of the pilot; from much further they are still relaxing in its window)."""
PROBES = 4
"""Rademacher probes of the Hessian's trace, and pairs of minibatch gradients, per chain."""


@kept
def temperature_fn(
    search: RateSearch, batch_fn: Callable
) -> Callable[[jax.Array, PyTree], jax.Array]:
    """``(key, params [C, ...]) -> T_conf/T`` over the ``C`` chains (their sums of ``‖∇U‖²`` over
    their sums of ``T·tr ∇²U``), compiled once for every call (module docstring)."""
    grad = jax.grad(search.potential_fn)

    def one_chain(key, params):
        def probe(key):
            k1, k2, k3 = jax.random.split(key, 3)
            g1, g2 = grad(params, batch_fn(k1)), grad(params, batch_fn(k2))
            leaves, tree = jax.tree.flatten(params)
            signs = jax.random.split(k3, len(leaves))
            v = tree.unflatten(
                [
                    jax.random.rademacher(k, jnp.shape(x), jnp.result_type(x))
                    for k, x in zip(signs, leaves, strict=True)
                ]
            )
            hv = jax.jvp(lambda p: grad(p, batch_fn(k1)), (params,), (v,))[1]
            dot = lambda a, b: sum(
                jnp.vdot(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
            )  # noqa: E731
            return dot(g1, g2), dot(v, hv)

        squares, traces = jax.lax.map(probe, jax.random.split(key, PROBES))
        return jnp.mean(squares), jnp.mean(traces)

    @jax.jit
    def ratio(key, params):
        chains = jax.tree.leaves(params)[0].shape[0]
        squares, traces = jax.vmap(one_chain)(jax.random.split(key, chains), params)
        # ‖∇U‖² = N²·ĝ₁·ĝ₂ and T·tr ∇²U = T·N·vᵀH̄v, H̄ the Hessian of Û/N
        return search.num_data * jnp.sum(squares) / (search.temperature * jnp.sum(traces))

    return ratio


class FarStartWarning(RuntimeWarning):
    """The chains were still far from the target's typical set after the pilot: the rate was
    chosen on a transient (:func:`searched_near_typical_set`)."""


def searched_near_typical_set(
    key: jax.Array,
    search: RateSearch,
    batch_fn: Callable,
    states: Any,
    search_fn: Callable[[jax.Array, Any], tuple[RateChoice, Any]],
) -> tuple[RateChoice, Any]:
    """``search_fn(key, states)``; where ``states`` start far from the typical set
    (configurational temperature over :data:`FAR`·T), run again from its chains' end if they
    reached the typical set there, else a :class:`FarStartWarning`.

    From a far start the pilot's steps are a transient's, and a metric warmed there is large
    along its gradients: on the australian BLR at full batch, from 10 prior standard deviations
    away, RMSprop's rate was 7.2 times its rate from the mode, and its errors 20 times the best
    rate's (RESULTS §33). The pilot's end is where the run continues; searched from there, the
    rate is chosen for the steps the run keeps. The second search starts its chains anew (their
    metrics adapting again) at the first's end and costs as much as the first; its pilot's steps
    count as the burn-in's too. Chains still far at the pilot's end (a network from its
    initialisation, as a rule) would be searched again on a transient too: that costs a search
    and is not done.

    Args:
      key: PRNG key (the same key gives the same choice).
      search: the sampler's :class:`~sgrld.samplers.rate_search.RateSearch`.
      batch_fn: ``key -> batch``.
      states: the chains' starting states, leading axis the chains.
      search_fn: ``(key, states) -> (choice, states after the pilot)``.

    Returns:
      ``(choice, states)`` of the last search, its ``pilot_steps`` those of both.
    """
    again_key, temp_key = jax.random.split(jax.random.fold_in(key, 1))
    choice, ends = search_fn(key, states)
    temperature = temperature_fn(search, batch_fn)
    hot = float(temperature(temp_key, states.params))
    if not hot > FAR:  # a NaN (no curvature) is no evidence of a far start
        return choice, ends
    still = float(temperature(temp_key, ends.params))
    if not still <= FAR:
        warnings.warn(
            f"learning_rate='auto': the chains start far from the target's typical set "
            f"(configurational temperature {hot:.3g}·T) and were still far after the pilot "
            f"({still:.3g}·T), so the rate is chosen on their way in; start nearer the mode, "
            "give a longer burn-in or a number",
            FarStartWarning,
            stacklevel=3,
        )
        return choice, ends
    fresh = jax.vmap(search.build(choice.learning_rate).init)(ends.params)  # adapting anew
    again, ends = search_fn(again_key, fresh)
    note = f" (searched again from the pilot's end; the start's temperature was {hot:.3g}·T)"
    return again._replace(
        pilot_steps=choice.pilot_steps + again.pilot_steps,
        criterion=again.criterion.replace(":", note + ":", 1),
    ), ends._replace(step=ends.step + choice.pilot_steps)  # both pilots are burn-in
