"""The GPU engine's names where they were first defined (Garaph sections 3, 5.2).

The engine is the package :mod:`garaphpy.scheduler.gpu`; this module gives
its public names to the callers that import them from here (the run's set-up
in :mod:`garaphpy.api`, benchmarks, tests).
"""

from .gpu.engine import POOL_BLOCK_BYTES, GpuEngine, pooled_bytes
from .gpu.page_store import (
    PAGE_SLACK_BYTES,
    RESIDENT_PADDING_EDGES,
    GpuMemoryError,
    PagePlan,
    interleave,
    page_weight_codes,
    plan_pages,
    stream_slots,
)
from .gpu.selective import SELECTIVE_FRONTIER_SHARE, pinned_out_edges
from .gpu.timing import IterationTiming, PageTiming, busy_time

__all__ = ["GpuEngine", "GpuMemoryError", "IterationTiming", "PAGE_SLACK_BYTES", "PagePlan",
           "PageTiming", "POOL_BLOCK_BYTES", "RESIDENT_PADDING_EDGES",
           "SELECTIVE_FRONTIER_SHARE", "busy_time", "interleave", "page_weight_codes",
           "pinned_out_edges", "plan_pages", "pooled_bytes", "stream_slots"]
