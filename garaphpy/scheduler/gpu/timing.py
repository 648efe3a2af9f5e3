"""What the GPU's iterations measure: CUDA events per page, busy times (Garaph section 5.2).

An iteration's pages overlap on the streams, their copies on one copy
engine: the copy and kernel time of an iteration is the union of the pages'
windows (:func:`busy_time`), not their sum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class PageTiming:
    """CUDA events of one page in one iteration."""

    page: int
    stream: int
    copy_start: object = None
    copy_end: object = None
    kernel_start: object = None
    kernel_end: object = None
    back_end: object = None
    done: object = None
    bytes_to_device: int = 0
    bytes_to_host: int = 0
    #: the copy was queued by the iteration before (its window starts before this
    #: iteration's origin)
    prefetched: bool = False
    #: the host buffer the page's copy reads, held while the copy may run (the
    #: host's page cache may drop a page between iterations)
    host_image: object = None


@dataclass
class IterationTiming:
    """Measured copy and kernel times of one iteration, in seconds."""

    copy_seconds: float = 0.0
    kernel_seconds: float = 0.0
    copy_back_seconds: float = 0.0
    busy_seconds: float = 0.0
    per_page_kernel: list = field(default_factory=list)
    stream_busy: list = field(default_factory=list)


def busy_time(windows: list[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end] windows (the time some
    copy, or some kernel, was under way)."""
    total, reach = 0.0, -np.inf
    for start, end in sorted(windows):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
