"""The CPU engine (Garaph section 4): :class:`~garaphpy.scheduler.cpu.engine.CpuEngine`
over its parts in :mod:`garaphpy.scheduler.cpu`, named here for the modules
that import it from its first home."""

from __future__ import annotations

# vertex_attributes and weighted_in_degree: the GPU engine still imports them from here
from .cpu.engine import CpuEngine
from .cpu_state import (GraphArrays, RunState, vertex_attributes,
                        weighted_in_degree)

__all__ = ["CpuEngine", "GraphArrays", "RunState", "vertex_attributes", "weighted_in_degree"]
