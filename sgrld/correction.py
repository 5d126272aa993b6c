"""The correction term Γ(θ) of Riemannian Langevin dynamics, for every metric.

SGRLD targets ``p(θ)`` only if its drift includes ``Γ_i(θ) = Σ_j ∂(G⁻¹)_ij / ∂θ_j``
(Ma et al., 2015); the published adaptive samplers drop it and are biased (Rensmeyer & Niggemann).
Every metric here is ``G⁻¹ = F(S)`` with ``S`` a moving average of a statistic ``s(g(θ))``; its
limiting metric is ``F(s(θ))``, whose Γ is, for a probe ``z`` with ``E[z zᵀ] = I``,

    Γ = E_z[ D_S[F(S)·z] ( D_θ s · z ) ],       D_θ s · z = s′(g) · (H z),

with ``H z`` one Hessian-vector product (a forward-over-reverse JVP of the gradient). Evaluating
``D_S F`` at the current average ``S_t`` rather than through it is Rensmeyer & Niggemann's
``1/(1 − decay)`` rescaling done exactly: differentiating through the average sees only a
``(1 − decay)`` share.

Modes (the ``correction`` argument of :func:`sgrld.sgrld`):

* ``None``: Γ dropped, the samplers as published.
* ``"hutchinson"``: the estimator above with Rademacher probes (unbiased; one probe costs about one
  extra forward-over-reverse pass).
* ``"exact"``: the full trace over the D basis vectors; D passes, for small problems and tests.

The derivative ``D_S[F(S)·z]`` along ``s′(g)·(H z)`` is the composition of two JVPs, unless the
metric supplies it directly (``Metric.inv_grad_tangent``: Shampoo, in its factors' eigenbases).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax.flatten_util import ravel_pytree

from sgrld.metrics.base import Metric, MetricState, inv_tangent
from sgrld.noise import rademacher

PyTree = Any
MODES = (None, "hutchinson", "exact")


def check_mode(correction: str | None) -> str | None:
    """Validate a ``correction`` argument."""
    if correction not in MODES:
        raise ValueError(f"correction must be one of {MODES}, got {correction!r}")
    return correction


def rademacher_like(key: jax.Array, tree: PyTree, num: int) -> PyTree:
    """``num`` Rademacher (±1) probes shaped like ``tree``, stacked on a leading axis.

    The signs of ``jax.random.rademacher`` with one subkey per leaf, drawn by
    :func:`sgrld.noise.rademacher` (the same numbers, the hash unrolled).
    """
    leaves, treedef = jax.tree.flatten(tree)
    keys = jax.random.split(key, len(leaves))
    return treedef.unflatten(
        [
            rademacher(k, (num, *jnp.shape(x)), dtype=x.dtype)
            for k, x in zip(keys, leaves, strict=True)
        ]
    )


def basis_like(tree: PyTree) -> PyTree:
    """The D standard basis vectors of the flattened ``tree``, stacked on a leading axis."""
    flat, unravel = ravel_pytree(tree)
    return jax.vmap(unravel)(jnp.eye(flat.size, dtype=flat.dtype))


def probes(correction: str, key: jax.Array, params: PyTree, num_probes: int) -> PyTree:
    """The probe vectors of a correction mode, stacked on a leading axis."""
    if correction == "exact":
        return basis_like(params)
    return rademacher_like(key, params, num_probes)


def gamma_from_probes(
    metric: Metric,
    metric_state: MetricState,
    metric_grads: PyTree,
    z: PyTree,
    hz: PyTree,
    *,
    reduce: str,
) -> PyTree:
    """Γ from probes ``z`` and the Hessian-vector products ``hz`` of the metric's gradient.

    Args:
      metric: the metric.
      metric_state: its state after folding in the current gradient (``S_t``).
      metric_grads: the gradient the statistic is computed from.
      z: probes stacked on a leading axis.
      hz: ``H z`` for each probe (same stacking).
      reduce: ``"mean"`` (Hutchinson) or ``"sum"`` (exact trace over a basis).

    Returns:
      Γ, shaped like the parameters.
    """
    if metric.statistic is None:
        return jax.tree.map(jnp.zeros_like, metric_grads)

    def one(z1, hz1):
        if metric.inv_grad_tangent is not None:
            return metric.inv_grad_tangent(metric_state, z1, metric_grads, hz1)
        _, dstat = jax.jvp(metric.statistic, (metric_grads,), (hz1,))
        return inv_tangent(metric, metric_state, z1, dstat)

    if jax.tree.leaves(z)[0].shape[0] == 1:  # no vmap of one: it transposes Shampoo's blocks
        return one(jax.tree.map(lambda x: x[0], z), jax.tree.map(lambda x: x[0], hz))
    per_probe = jax.vmap(one)(z, hz)
    combine = jnp.mean if reduce == "mean" else jnp.sum
    return jax.tree.map(lambda x: combine(x, axis=0), per_probe)
