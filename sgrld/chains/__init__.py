"""Layer 4, chains: running many chains of a sampler.

The chain engine (chunks of steps in ``lax.scan``, chains in ``vmap``), the summaries of each
chunk, divergence reports, devices and meshes, the progress bar, and :func:`sgrld.sample`.
"""

from sgrld.chains import devices, divergence, engine, progress, sampling, summaries

__all__ = ["devices", "divergence", "engine", "progress", "sampling", "summaries"]
