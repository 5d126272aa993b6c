"""How a reproduction's run on the application's runner keeps its files: :class:`RunSpec`, the
folder, progress bar and resumption that ``natural-langevin`` and ``psgld`` pass to each run."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from sgrld_app import api as app


class RunSpec(NamedTuple):
    """Where a run on the runner (:func:`sgrld_app.api.run`) writes, and whether it goes on from
    what is there.

    Attributes:
      out: the run's folder (its records, samples and checkpoints); None: it writes none.
      progress: show a progress bar.
      resume: continue the run in ``out`` from its newest checkpoint
        (:func:`sgrld_app.api.resume_point`: it must have the same settings, else
        ``CheckpointError``); without one, or without ``out``, the run starts afresh.

    Example:
      >>> RunSpec(Path("results") / "sgld", resume=True)
      RunSpec(out=PosixPath('results/sgld'), progress=False, resume=True)
    """

    out: Path | None = None
    progress: bool = False
    resume: bool = False

    def run(self, experiment: app.Experiment, schedule: app.RunPlan, label: str) -> app.Result:
        """Run ``experiment`` on ``schedule`` as this spec says.

        Args:
          experiment: what to run; its ``meta`` is what a resumed run must have been started
            with.
          schedule: epochs, batches, burn-in, thinning, chains and seed.
          label: the progress bar's label.

        Returns:
          The runner's :class:`sgrld_app.api.Result`.
        """
        saved = None
        if self.resume and self.out is not None:
            saved = app.resume_point(self.out, experiment.meta)
        return app.run(
            experiment, schedule, out=self.out, progress=self.progress, label=label, resume=saved
        )
