"""Chains that start apart, and the check that they agree at the end.

R-hat compares chains that began at over-dispersed points: chains started at one point agree
from the start and hide a chain that never leaves a bad mode. :func:`starts` gives each chain its
own start (:func:`sgrld.sample`'s ``init``), and :func:`warn_if_chains_disagree` warns once after
a run whose potential has a split R-hat above :data:`RHAT_LIMIT`, naming the chains that disagree
with the others.

Example:
  >>> import jax, jax.numpy as jnp
  >>> x = starts(jax.random.key(0), {"w": jnp.full(3, 2.0), "b": jnp.zeros(2)}, 4, "jitter")
  >>> jax.tree.map(jnp.shape, x)
  {'b': (4, 2), 'w': (4, 3)}
  >>> bool(jnp.all(x["w"][0] != x["w"][1])), float(starts(jax.random.key(0), 1.5, 2, "shared")[1])
  (True, 1.5)
"""

from __future__ import annotations

import warnings
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from sgrld.numerics.pytrees import PyTree

Init = Literal["jitter", "shared", "stacked"]
"""How the chains start: ``"jitter"``: each chain at ``params + σ·ξ``, ξ ~ N(0, I) drawn per
chain and leaf, σ the root mean square of the leaf in ``params``, for a leaf of zeros (biases, a
log σ) that of all of ``params``, and 1 if all are zero: the spread is the size of the
parameters themselves; ``"shared"``: all at ``params``;
``"stacked"``: ``params`` has a leading chain axis, one start per chain (draws from the prior,
say)."""
INITS = ("jitter", "shared", "stacked")
"""The values of :data:`Init`."""
START_STREAM = 0x5354
"""The jitter's key is ``fold_in(key, START_STREAM)``: the run's key fixes it, and the chains'
own keys (``split(key, K)``) are those of a run with shared starts."""
RHAT_LIMIT = 1.05
"""A run whose potential has a split R-hat above this warns (:func:`warn_if_chains_disagree`)."""


class ChainsDisagreeWarning(RuntimeWarning):
    """The chains end in different places: the potential's split R-hat is above
    :data:`RHAT_LIMIT` (a warning about the run's numbers, as
    :class:`sgrld.samplers.guarantee.BiasWarning` is)."""


def starts(key: jax.Array, params: PyTree, num_chains: int, init: Init) -> PyTree:
    """Each chain's starting parameters, leaves ``[num_chains, ...]`` (:data:`Init`).

    Raises:
      ValueError: an unknown ``init``, or ``"stacked"`` params whose leaves do not all lead with
        ``num_chains``.
    """
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if init == "stacked":
        lead = {jnp.shape(x)[:1] for x in jax.tree.leaves(params)}
        if lead != {(num_chains,)}:
            raise ValueError(
                f'init="stacked" needs every leaf of params to lead with num_chains = '
                f"{num_chains}, got leading sizes {sorted(lead)}"
            )
        return jax.tree.map(jnp.asarray, params)
    shared = jax.tree.map(
        lambda x: jnp.broadcast_to(jnp.asarray(x), (num_chains, *jnp.shape(x))), params
    )
    if init == "shared":
        return shared
    leaves, tree = jax.tree.flatten(shared)
    floats = [x[0].astype(jnp.float32) for x in leaves if jnp.issubdtype(x.dtype, jnp.floating)]
    whole = _rms(jnp.concatenate([x.ravel() for x in floats])) if floats else jnp.zeros(())
    fallback = jnp.where(whole > 0, whole, 1.0)
    keys = jax.random.split(jax.random.fold_in(key, START_STREAM), len(leaves))
    return jax.tree.unflatten(
        tree, [_jitter(k, x, fallback) for k, x in zip(keys, leaves, strict=True)]
    )


def _rms(x: jax.Array) -> jax.Array:
    return jnp.sqrt(jnp.mean(jnp.square(x.astype(jnp.float32))))


def _jitter(key: jax.Array, x: jax.Array, fallback: jax.Array) -> jax.Array:
    """``x + σ·ξ`` for a float leaf (σ its root mean square, ``fallback`` if it is 0); other
    leaves unchanged."""
    if not jnp.issubdtype(x.dtype, jnp.floating):
        return x
    rms = _rms(x[0])
    sigma = jnp.where(rms > 0, rms, fallback)
    return x + (sigma * jax.random.normal(key, x.shape)).astype(x.dtype)


def split_rhat(x: np.ndarray) -> float:
    """The rank-normalised split R-hat of draws ``x [chains, draws]`` (Vehtari et al. 2021):
    the larger of the bulk R-hat and that of the draws folded about their median, as ArviZ's
    ``rhat`` and ``sgrld diagnose`` compute it; NaN for fewer than 4 draws or draws that do not
    vary.

    Example:
      >>> rng = np.random.default_rng(0)
      >>> round(split_rhat(rng.normal(size=(4, 500))), 2)
      1.0
      >>> split_rhat(rng.normal(size=(4, 500)) + np.arange(4)[:, None]) > 1.5
      True
    """
    x = np.asarray(x, np.float64)
    half = x.shape[1] // 2
    if half < 2 or not np.all(np.isfinite(x)):
        return float("nan")
    halves = np.concatenate([x[:, :half], x[:, -half:]])
    folded = np.abs(halves - np.median(halves))
    return max(_rank_rhat(halves), _rank_rhat(folded))


def _rank_rhat(x: np.ndarray) -> float:
    """R-hat of the rank-normalised draws ``x [chains, draws]`` (NaN if they do not vary)."""
    from scipy import special, stats  # on first use: scipy.stats takes a second to import

    ranks = stats.rankdata(x, method="average").reshape(x.shape)
    z = special.ndtri((ranks - 0.375) / (x.size + 0.25))
    n, within = x.shape[1], z.var(axis=1, ddof=1).mean()
    if within == 0:
        return float("nan")
    between = n * z.mean(axis=1).var(ddof=1)
    return float(np.sqrt(((n - 1) / n * within + between / n) / within))


def disagreeing(potentials: np.ndarray, limit: float = RHAT_LIMIT) -> tuple[float, list[int]]:
    """The split R-hat of ``potentials [chains, draws]`` and the chains that disagree: none
    when it is at most ``limit``; else those whose removal, one at a time (each time the chain
    whose mean rank is farthest from the others', the largest share of R-hat's between-chain
    variance), brings the others' R-hat to ``limit`` before half the chains are gone, or every
    chain if none does. One R-hat per removal: trying every removal cost one per chain per
    removal, and the naming of 512 chains took minutes.

    Example:
      >>> rng = np.random.default_rng(1)
      >>> x = rng.normal(size=(4, 200)); x[2] += 3.0
      >>> r, chains = disagreeing(x)
      >>> r > 1.05, chains
      (True, [2])
    """
    rhat = split_rhat(potentials)
    if not rhat > limit:  # NaN too: nothing to say
        return rhat, []
    from scipy import stats  # on first use: scipy.stats takes a second to import

    left, removed = list(range(len(potentials))), []
    while len(left) > 2 and len(removed) < len(potentials) // 2:
        if not split_rhat(potentials[left]) > limit:
            return rhat, sorted(removed)
        ranks = stats.rankdata(potentials[left]).reshape(len(left), -1).mean(axis=1)
        out = left[int(np.argmax(np.abs(ranks - ranks.mean())))]
        removed.append(out)
        left.remove(out)
    if split_rhat(potentials[left]) > limit:
        return rhat, list(range(len(potentials)))
    return rhat, sorted(removed)


def warn_if_chains_disagree(potentials: np.ndarray) -> bool:
    """A :class:`ChainsDisagreeWarning` naming the chains that disagree
    (:func:`disagreeing`) if the split R-hat of ``potentials [chains, draws]`` (each kept
    draw's Û/N, on its minibatch) is above :data:`RHAT_LIMIT`; whether it warned.

    Example:
      >>> warn_if_chains_disagree(np.random.default_rng(0).normal(size=(3, 100)))
      False
    """
    potentials = np.asarray(potentials, np.float64)
    if potentials.ndim != 2 or len(potentials) < 2:
        return False
    rhat, chains = disagreeing(potentials)
    if not chains:
        return False
    means, sds = potentials.mean(axis=1), potentials.std(axis=1)
    if len(chains) == len(potentials):
        which = f"all {len(chains)} chains disagree with each other"
    else:
        named = ", ".join(f"{c} (potential {means[c]:.4g} ± {sds[c]:.2g})" for c in chains)
        mean, sd = (np.median(np.delete(v, chains)) for v in (means, sds))
        which = f"chain(s) {named} disagree with the others ({mean:.4g} ± {sd:.2g})"
    warnings.warn(
        f"the chains have not mixed: the potential's split R-hat is {rhat:.3f} (above "
        f"{RHAT_LIMIT}); {which}. Sample longer (a longer burn-in), lower the learning rate, or "
        "look at the chains' traces before using their samples",
        ChainsDisagreeWarning,
        stacklevel=3,
    )
    return True
