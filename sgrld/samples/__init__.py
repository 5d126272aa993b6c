"""Layer 5, samples: what a run leaves and what can be said of it.

The files of a results folder (written atomically, read back), the ArviZ export, convergence
diagnostics, the kernel Stein discrepancy, distances of samples to known distributions and test
targets with known answers.
"""

from sgrld.samples import arviz_export, atomic, diagnostics, distances, results, stein, targets

__all__ = ["arviz_export", "atomic", "diagnostics", "distances", "results", "stein", "targets"]
