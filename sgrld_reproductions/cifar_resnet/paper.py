"""The paper's numbers that ``sgrld reproduce cifar-resnet``
(:mod:`sgrld_reproductions.cifar_resnet`, which describes the experiment) sets beside its own:
Yu et al. (2023) Tables 3, 7 and 9 and their learning rates.
"""

from __future__ import annotations

from typing import NamedTuple

Pair = tuple[float, float]


class Paper(NamedTuple):
    """One metric and prior of the paper: Tables 3, 5, 7 and 9 and App. A.6.

    Attributes:
        learning_rate: Table 5, or None where Monge with α² = 0 (Identity) was optimal.
        log_lik: test log p(y|X), mean and standard deviation over 10 runs (Table 3).
        accuracy: test accuracy, mean and standard deviation (Table 3).
        curvature: mean curvature C(θ) (Table 3).
        seconds: seconds per epoch on a V100 GPU (Table 3).
        ece: expected calibration error, mean and standard deviation (Table 9).
        equal_time_lr: the learning rate re-chosen for the equal time budget (App. A.6).
        equal_time_log_lik: test log p(y|X) at the equal time budget (Table 7).
        equal_time_accuracy: test accuracy at the equal time budget (Table 7).
    """

    learning_rate: float | None
    log_lik: Pair | None = None
    accuracy: Pair | None = None
    curvature: float | None = None
    seconds: float | None = None
    ece: Pair | None = None
    equal_time_lr: float | None = None
    equal_time_log_lik: Pair | None = None
    equal_time_accuracy: Pair | None = None


IDENTITY_OPTIMAL = Paper(None)


PAPER: dict[str, dict[str, Paper]] = {
    "gaussian": {
        "identity": Paper(
            0.1, (-0.4627, 0.0039), (0.8591, 0.0015), 10.18, 7.6, (0.0919, 0.0032),
            0.1, (-0.4634, 0.0039), (0.8589, 0.0013),
        ),
        "wenzel": Paper(
            0.5, (-0.4869, 0.0047), (0.8533, 0.0023), 9.12, 7.5, (0.1006, 0.0036),
            0.5, (-0.4869, 0.0047), (0.8533, 0.0023),
        ),
        "rmsprop": Paper(
            0.0005, (-0.4751, 0.0023), (0.8566, 0.0014), 10.27, 8.8, (0.0962, 0.0021),
            0.00075, (-0.4828, 0.0041), (0.8562, 0.0018),
        ),
        "monge": IDENTITY_OPTIMAL,
        "shampoo": Paper(
            0.01, (-0.4606, 0.0043), (0.8596, 0.0018), 10.63, 11.4, (0.0902, 0.0017),
            0.025, (-0.4858, 0.0047), (0.8595, 0.0023),
        ),
    },
    "correlated": {
        "identity": Paper(
            0.1, (-0.4437, 0.0040), (0.8641, 0.0025), 9.91, 11.6, (0.0861, 0.0020),
            0.1, (-0.4437, 0.0040), (0.8641, 0.0025),
        ),
        "wenzel": Paper(
            0.75, (-0.4615, 0.0050), (0.8614, 0.0021), 8.91, 11.8, (0.0962, 0.0038),
            0.75, (-0.4624, 0.0050), (0.8612, 0.0020),
        ),
        "rmsprop": Paper(
            0.0005, (-0.4500, 0.0041), (0.8642, 0.0018), 9.94, 14.1, (0.0925, 0.0021),
            0.00075, (-0.4594, 0.0030), (0.8631, 0.0026),
        ),
        "monge": IDENTITY_OPTIMAL,
        "shampoo": Paper(
            0.01, (-0.4365, 0.0034), (0.8668, 0.0023), 10.39, 15.4, (0.0856, 0.0024),
            0.025, (-0.4506, 0.0023), (0.8697, 0.0015),
        ),
    },
}  # fmt: skip
"""Tables 3, 5, 7 and 9 and App. A.6 of Yu et al. (2023), by prior and metric."""
