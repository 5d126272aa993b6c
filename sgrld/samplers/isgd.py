"""Isotropic SGD (i-SGD, Franzese et al., Entropy 2021, Algorithm 2): SGD whose minibatch noise is
topped up, layer by layer, to an isotropic Gaussian of the variance the posterior needs.

A *layer* p is a leaf of the parameter pytree (a Dense layer's kernel and bias are two layers:
their gradient noise differs by the scale of the inputs). In the units of the full potential
``U = −log p(D, θ)``, with ``N·g`` the minibatch estimate of ∇U (``g = ∇Û/N``, README
"Conventions"), ``B_j = ½·Var(N·g_j)`` (half the minibatch noise's variance; the paper's B(θ),
diagonal) and ``n ~ N(0, I)``, one step is, per layer p and coordinate j in it::

    C_j = T·λ^(p) − B̂_j,
    θ_j ← θ_j − (N·g_j + √(2·max(C_j, 0))·n_j) / λ^(p).

The λ rule, from Algorithm 1 (``θ ← θ − Σ⁻¹(∇Ũ + √2·C^{1/2}n)``, ``C = Σ − B``) with
``Σ = diag(λ^(p))``: the bracket's noise has covariance ``2B + 2C``, so the step is
``θ ← θ − h_p∇U + h_p·ε`` with ``h_p = 1/λ^(p)`` and ``Cov(h_p·ε) = 2h_p²(B + C)``. An
Euler–Maruyama step h of ``dθ = −∇U dt + √(2T) dW`` (stationary law ``p(θ|D)^{1/T}``) needs
``2h²(B + C) = 2hT·I`` within each layer, i.e. ``C = T·λ^(p) − B``: isotropic total noise. C must
be positive semi-definite, so ``T·λ^(p) ≥ max_j B_j`` over the layer: λ^(p) must dominate the
gradient-noise variance, and the largest step (the fastest mixing) is the smallest such λ. The
rule (``learning_rate=None``)::

    λ^(p) = margin · max_{j∈p} B̄_j / T,

with ``B̄`` the average of the estimates B̂ over the first ``warmup`` steps (during which λ follows
it), then fixed: the mean of all of them, or with ``noise_window=K`` a moving average over about
the last K, so that λ is that of the gradient noise where the chain is at the warm-up's end. The
noise can change several-fold as the chain leaves its initialisation, either way (UCI protein: the
first 100 steps' B̄ is 4-36× the later noise in three of its five layers, a step that much
smaller; kin8nm: the later noise is 9-45× the first 100 steps' in four, λ far below it, a chain
clipped hot; ``benchmarks/isgd_noise.py``), so a warm-up through the burn-in with a window is the
setting that samples at T where the chain samples. A layer without gradient noise (B̄ = 0: a
prior's scale that the likelihood does not see) takes the largest λ of the others. With a
``learning_rate``, ``λ^(p) = N/learning_rate`` in every layer (so ``T = 0`` is SGD,
``θ ← θ − lr·g``, and with B̂ = 0 the step is SGLD's).

How fast the rule mixes: near the posterior the per-example gradients' variance is about the
per-datum Fisher information, ``s_j² ≈ F_j``, so ``B_j ≈ N²F_j/(2b)`` for a batch of b and the
rule's step is ``lr = N·h ≈ 2b·T/(margin·N·max_j F_j)`` (Mandt et al.'s constant-SGD scale):
b/(margin·N) times the largest stable SGLD step of the layer's stiffest direction
(``lr < 2/max_j F_j``). The drift contracts direction j by ``h·N·F_j ≤ 2bT/(margin·N)`` a step,
so relaxing it takes about ``(margin/2T)·max F/F_j`` *epochs*, where SGLD at its largest step
takes about ``½·max F/F_j`` *updates*. On UCI protein (N = 37,041, b = 32, margin 2) the
rule's per-layer learning rates were 2.8e-5 (output kernel) to 7.8e-3 (first bias), against
SGLD's 0.03 chosen on validation: i-SGD needs many more epochs than SGLD, not a better λ.

What is approximated:

* B's diagonal only: the minibatch noise's correlations between coordinates are left as they are
  (the paper's Algorithm 2).
* B̂ from one minibatch: ``gradient_noise="per_example"`` uses ``½N²·s²/b``, ``s²`` the sample
  variance of the b per-example log-likelihood gradients (:mod:`sgrld.numerics.per_example`:
  about the cost of a backward pass for Flax Dense layers, ``vmap(grad)`` for other leaves);
  ``gradient_noise="square"`` uses Algorithm 2's ``½(N·g_j)²``, which also counts the mean
  gradient, so it injects less noise than needed away from a mode.
* Clipping: where a step's B̂_j exceeds T·λ^(p), C_j is clipped to 0 (that coordinate is hotter
  than T); ``info.noise_clipped`` says so (the engine counts such steps) and
  ``info.clipped_share`` is the share of coordinates clipped. Where λ^(p) lies below the averaged
  estimate ``max_j B̄_j/T`` (a ``learning_rate`` too large for the gradient noise; the rule's λ
  never is) the clipping is systematic: a :class:`NoiseClippingWarning` says so, once. This check
  is a host callback per step and chain (about 80 µs on CPU), compiled only with a
  ``learning_rate``. The noise can outgrow a λ fixed at the warm-up's end, under the rule too:
  :func:`warn_if_clipped` warns once where an epoch of :func:`sgrld_app.runner.run` clipped more
  than :data:`CLIPPED_SHARE_WARN` of the coordinates on average (no cost per step).
* The Euler discretisation's O(h) bias, as for SGLD.

Which shared parts it uses: its gradient and B̂ come from :mod:`sgrld.parts.gradients`
(``"gradient"``, ``"variance"``), its ``info`` is a :class:`~sgrld.samplers.info.StepInfo`
family member. Its move is its own, not an :class:`~sgrld.samplers.assembly.Assembly`'s
:func:`~sgrld.samplers.assembly.advance`: the integrator contract moves by one learning rate,
``lr·G⁻¹g`` and a noise ``√(2·lr·T/N)·G^{−1/2}ξ``, while i-SGD's step size 1/λ^(p) is set per
layer from the state (λ adapts in the warm-up) and its noise is what is left of the target's,
``√(2·max(Tλ − B̂, 0))/λ`` per coordinate, clipped: a metric G = diag(λ/N) would give the drift
but not this noise. So it has no integrator, and no integrator state: λ and B̄ are its own
(:class:`ISGDState`). The learning rate is checked here because ``None`` (the rule) and a
schedule-free float are i-SGD's only two forms.

Reference: G. Franzese, D. Milios, M. Filippone, P. Michiardi, "A Scalable Bayesian Sampling
Method Based on Stochastic Gradient Descent Isotropization", Entropy 23 (2021), Algorithms 1-2.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from sgrld.numerics.checks import (
    LEARNING_RATE,
    Bound,
    check_params,
    check_temperature,
    is_traced,
)
from sgrld.numerics.noise import normal_like
from sgrld.numerics.per_example import at_least_float32
from sgrld.numerics.potential import Potential
from sgrld.numerics.pytrees import PyTree
from sgrld.parts.gradients import gradient_estimate
from sgrld.samplers.assembly import COMMON_BOUNDS, check_options
from sgrld.samplers.contract import Sampler
from sgrld.samplers.info import ISGDInfo, step_info

NOISE_ESTIMATES = ("per_example", "square")
"""The estimates of B's diagonal (``gradient_noise``)."""


CLIPPED_SHARE_WARN = 0.1
"""An epoch whose steps clip more than this share of the coordinates on average warns
(:func:`warn_if_clipped`). Where λ dominates the noise, only the estimate's own fluctuations clip:
measured 0.02-0.05 % (UCI protein, batches of 32, the rule), 0.4 % (kin8nm, λ fixed at the end of
a burn-in long warm-up), up to 4 % with batches of 4 (``tests/samplers/test_isgd.py``); where the
noise outgrew λ, 15 % (kin8nm, the rule fixed after the first 100 steps;
``benchmarks/isgd_noise.py``)."""


class NoiseClippingWarning(UserWarning):
    """λ lies below the gradient-noise estimate: the injected noise is clipped."""


def warn_if_clipped(record: dict[str, Any]) -> bool:
    """Warn (:class:`NoiseClippingWarning`) and return True if an epoch's record
    (:func:`sgrld_app.records.record`) after the warm-up (no ``warming_up_count``) has a mean
    ``clipped_share`` above :data:`CLIPPED_SHARE_WARN`: the λ fixed at the warm-up's end lies
    below the gradient noise where the chain is, so the clipped coordinates sample hotter than T.

    Example:
      >>> import warnings
      >>> with warnings.catch_warnings(record=True) as caught:
      ...     warnings.simplefilter("always")
      ...     warned = [warn_if_clipped({"epoch": 3, "clipped_share": 0.25}),
      ...               warn_if_clipped({"epoch": 3, "clipped_share": 0.0004}),
      ...               warn_if_clipped({"epoch": 0, "clipped_share": 0.25, "warming_up_count": 9}),
      ...               warn_if_clipped({"epoch": 3, "potential": 1.0})]  # not i-SGD's
      >>> warned, [str(w.message)[:48] for w in caught]
      ([True, False, False, False], ['i-SGD clipped the injected noise of 25.0% of the'])
    """
    share = record.get("clipped_share")
    if share is None or record.get("warming_up_count") or not share > CLIPPED_SHARE_WARN:
        return False
    warnings.warn(
        f"i-SGD clipped the injected noise of {100 * share:.1f}% of the coordinates on average "
        f"in epoch {record['epoch']}: λ lies below the gradient noise there, so they sample "
        "hotter than T. Warm up through the burn-in with a noise_window (λ is then that of the "
        "noise where the chain samples), raise margin, or lower learning_rate",
        NoiseClippingWarning,
        stacklevel=2,
    )
    return True


class ISGDState(NamedTuple):
    """State of an i-SGD chain.

    Attributes:
      step: int32 number of steps taken.
      params: the sample θ_t.
      noise: B̄, the average of the estimates B̂ over the warm-up window (float32, shaped like
        ``params``; fixed after it).
      lambdas: λ^(p) of the last step, a float32 scalar per leaf of ``params`` (0 before the
        first step). Leaf p moves by ``N·g/λ^(p)``: its learning rate is ``N/λ^(p)``.
    """

    step: jax.Array
    params: PyTree
    noise: PyTree
    lambdas: PyTree


BOUNDS = {
    **COMMON_BOUNDS,
    "warmup": Bound(1),
    "noise_window": Bound(1),
    "margin": Bound(1),
}
"""The ranges of :func:`isgd`'s numeric options (integers: ``warmup``, ``noise_window``)."""


def _is_count(value, bound: Bound) -> bool:
    return not isinstance(value, bool) and int(value) == value and bound.holds(value)


class _Options(NamedTuple):
    estimate: Callable
    num_data: int
    learning_rate: float | None
    temperature: float
    warmup: int
    window: int
    margin: float


def isgd(
    potential_fn: Potential,
    *,
    num_data: int,
    learning_rate: float | None = None,
    temperature: float = 1.0,
    warmup: int = 100,
    noise_window: int | None = None,
    margin: float = 2.0,
    gradient_noise: str = "per_example",
) -> Sampler:
    """i-SGD: minibatch SGD with the gradient noise made isotropic per layer (the update, the λ
    rule and what it approximates are in the module docstring).

    Args:
      potential_fn: the potential ``Û/N`` of :func:`sgrld.potential` (per-example
        log-likelihoods are needed for ``"per_example"``).
      num_data: N; must equal the potential's.
      learning_rate: ``N/λ`` in every layer (``lr = h·N``); ``None``: the rule
        ``λ^(p) = margin·max_j B̄_j/T``.
      temperature: T ≥ 0 (the rule needs T > 0).
      warmup: steps over which B̄ is averaged (and λ adapted, with the rule), ≥ 1.
      noise_window: the steps B̄ remembers (≥ 1): the mean of the first ``noise_window``
        estimates, then a moving average of weight ``1/noise_window``, so that the λ fixed at
        the warm-up's end is that of the gradient noise where the chain then is. ``None``: the
        whole warm-up (the mean of its estimates).
      margin: λ's factor over the largest averaged noise estimate of its layer, ≥ 1 (larger:
        smaller steps, fewer clipped coordinates).
      gradient_noise: B̂ from ``"per_example"`` gradients or Algorithm 2's ``"square"``.

    Returns:
      A :class:`~sgrld.Sampler` whose ``step`` returns :class:`ISGDState` and :class:`ISGDInfo`.

    Example:
      >>> import jax, jax.numpy as jnp, sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, lambda w: -0.5 * w**2, 4)
      >>> s = sgrld.isgd(u, num_data=4, learning_rate=0.01, gradient_noise="square")
      >>> state, info = jax.jit(s.step)(jax.random.key(0), s.init(jnp.zeros(())), jnp.ones(2))
      >>> int(state.step), bool(info.is_finite), bool(info.noise_clipped), float(state.lambdas)
      (1, True, False, 400.0)

    References:
      Franzese et al. (Entropy 2021), Algorithm 1 (``C = Σ − B``) and Algorithm 2.
    """
    num_data = check_options(
        potential_fn, learning_rate=None, num_data=num_data, temperature=temperature
    ).num_data
    temperature = check_temperature(temperature)  # a constant: λ's rule divides by it
    if learning_rate is not None and not is_traced(learning_rate):
        learning_rate = float(learning_rate)
        if not (math.isfinite(learning_rate) and LEARNING_RATE.holds(learning_rate)):
            raise ValueError(
                f"learning_rate must be None or a finite number {LEARNING_RATE.text()}, "
                f"got {learning_rate}"
            )
    elif temperature == 0.0:
        raise ValueError(
            "temperature=0 needs a learning_rate: the rule λ = margin·max B̄/T has no finite value"
        )
    if not _is_count(warmup, BOUNDS["warmup"]):
        raise ValueError(f"warmup must be an integer {BOUNDS['warmup'].text()}, got {warmup!r}")
    window = warmup if noise_window is None else noise_window
    if not _is_count(window, BOUNDS["noise_window"]):
        raise ValueError(
            f"noise_window must be None or an integer {BOUNDS['noise_window'].text()}, "
            f"got {noise_window!r}"
        )
    if not (math.isfinite(float(margin)) and BOUNDS["margin"].holds(margin)):
        raise ValueError(
            f"margin must be a finite number {BOUNDS['margin'].text()} (λ must dominate B̄), "
            f"got {margin}"
        )
    estimate = noise_estimate(potential_fn, num_data, gradient_noise)
    options = _Options(
        estimate, num_data, learning_rate, temperature, int(warmup), int(window), float(margin)
    )
    return Sampler(partial(_init, options), partial(_step, options))


def noise_estimate(potential_fn: Callable, num_data: int, kind: str = "per_example") -> Callable:
    """``(params, batch) -> (Û/N, ∇Û/N, B̂)``, B̂ (float32) estimating ``½·Var(N·g)`` per
    coordinate: ``½N²·s²/b`` from the b per-example gradients (``"per_example"``; 0 on leaves the
    likelihood does not see) or ``½(N·g)²`` (``"square"``).

    Example:
      >>> import jax.numpy as jnp, sgrld
      >>> u = sgrld.potential(lambda w, b: -0.5 * (b - w) ** 2, None, num_data=10)
      >>> _, g, b_hat = noise_estimate(u, 10, "square")(jnp.zeros(()), jnp.array([0.0, 2.0]))
      >>> g.item(), b_hat.item()  # ½(N·g)² = ½·(10·(−1))²
      (-1.0, 50.0)
    """
    if kind not in NOISE_ESTIMATES:
        raise ValueError(f"gradient_noise must be one of {NOISE_ESTIMATES}, got {kind!r}")
    if kind == "square":
        gradients = gradient_estimate(potential_fn, "gradient")

        def square(params, batch):
            value, g, _ = gradients(params, batch)
            squares = jax.tree.map(lambda x: 0.5 * jnp.square(num_data * at_least_float32(x)), g)
            return value, g, squares

        return square
    if not isinstance(potential_fn, Potential):
        raise TypeError(
            "gradient_noise='per_example' needs a potential built by sgrld.potential(...) "
            "(per-example log-likelihoods); gradient_noise='square' does not"
        )
    variances = gradient_estimate(potential_fn, "variance")

    def per_example(params, batch):
        value, g, var = variances(params, batch)
        return value, g, jax.tree.map(lambda v: 0.5 * num_data**2 * v, var)

    return per_example


def _init(o: _Options, params: PyTree) -> ISGDState:
    params = check_params(params)
    noise = jax.tree.map(lambda x: jnp.zeros(jnp.shape(x), jnp.float32), params)
    lambdas = jax.tree.map(lambda x: jnp.zeros((), jnp.float32), params)
    return ISGDState(jnp.zeros((), jnp.int32), params, noise, lambdas)


def _lambdas(o: _Options, noise: PyTree) -> list[jax.Array]:
    """λ^(p) per leaf: ``N/learning_rate``, or ``margin·max_j B̄_j/T`` (a leaf with B̄ = 0 takes
    the largest λ of the others)."""
    leaves = jax.tree.leaves(noise)
    if o.learning_rate is not None:
        return [jnp.float32(o.num_data / o.learning_rate)] * len(leaves)
    rule = [o.margin * jnp.max(b) / o.temperature for b in leaves]
    largest = jnp.max(jnp.stack(rule))
    return [jnp.where(lam > 0, lam, largest) for lam in rule]


def _warn_below(below: jax.Array) -> None:
    if below:
        warnings.warn(  # once: the message and its location are fixed
            "i-SGD: λ lies below the averaged gradient-noise estimate max B̄/T in some layer, so "
            "the injected noise is clipped there and the chain is hotter than T: lower "
            "learning_rate (or leave it None for the rule), or raise margin",
            NoiseClippingWarning,
            stacklevel=1,
        )


def _step(o: _Options, key, state: ISGDState, batch) -> tuple[ISGDState, ISGDInfo]:
    """One step: gradient and B̂, warm-up average and λ, isotropised noise, update, report."""
    value, g, b_hat = o.estimate(state.params, batch)
    t = state.step
    warm = t < o.warmup
    noise = jax.tree.map(
        lambda m, b: jnp.where(
            warm, m + (b - m) / jnp.minimum(t + 1, o.window).astype(jnp.float32), m
        ),
        state.noise,
        b_hat,
    )
    treedef = jax.tree.structure(state.params)
    lams = _lambdas(o, noise)
    temp = o.temperature
    excess = [temp * lam - b for lam, b in zip(lams, jax.tree.leaves(b_hat), strict=True)]
    clipped = [(e < 0) & (temp > 0) for e in excess]
    if o.learning_rate is not None and temp > 0:  # the rule's λ ≥ max B̄/T by construction
        pairs = zip(lams, jax.tree.leaves(noise), strict=True)
        below = [temp * lam < jnp.max(b) for lam, b in pairs]
        jax.debug.callback(_warn_below, jnp.any(jnp.stack(below)))
    n = jax.tree.leaves(normal_like(key, state.params))

    def move(x, g, lam, e, n):
        g, n = at_least_float32(g), at_least_float32(n)
        kick = o.num_data * g + jnp.sqrt(2.0 * jnp.maximum(e, 0.0)) * n
        return x - (kick / lam).astype(x.dtype)

    rows = zip(jax.tree.leaves(state.params), jax.tree.leaves(g), lams, excess, n, strict=True)
    params = treedef.unflatten([move(*row) for row in rows])
    size = sum(c.size for c in clipped)
    base = step_info(value, g, o.num_data / jnp.min(jnp.stack(lams)), params)
    info = ISGDInfo(
        *base,
        noise_clipped=jnp.any(jnp.stack([jnp.any(c) for c in clipped])),
        clipped_share=sum(jnp.sum(c, dtype=jnp.float32) for c in clipped) / size,
        warming_up=warm & (o.learning_rate is None),
    )
    lambdas = treedef.unflatten([jnp.asarray(lam, jnp.float32) for lam in lams])
    return ISGDState(t + 1, params, noise, lambdas), info
