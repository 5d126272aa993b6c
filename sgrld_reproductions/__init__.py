"""Reproductions of the papers' experiments, each a module with ``add_arguments`` and ``run``."""
