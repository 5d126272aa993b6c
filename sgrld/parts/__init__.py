"""Layer 2, parts: what an SGRLD step is assembled from.

The correction term Γ (:mod:`~sgrld.parts.correction`), the preconditioned drift
(:mod:`~sgrld.parts.preconditioning`) and the move that adds the noise
(:mod:`~sgrld.parts.integrators`).
"""

from sgrld.parts import correction, integrators, preconditioning

__all__ = ["correction", "integrators", "preconditioning"]
