"""Which pages stay in host memory and which are read again every iteration.

Garaph keeps the graph in host memory when it fits and otherwise uses
secondary storage "as memory extension" (sections 1 and 2.2); the CPU
engine's cost model then takes rho = k instead of 1 (section 4.2).  This
module draws that line for a run: a host-memory budget (by default
``config.HOST_CACHE_FRACTION`` of the memory available now) pays first for
what the run cannot do without, the vertex arrays and buffers it names
(``fixed_bytes``), then, if not every page fits, for the read-ahead buffers
of the :class:`~garaphpy.storage.page_io.PageReader`, and what is left holds
page images.

The pages kept are a prefix of the page order (pages 0, 1, ... while they
fit).  Every iteration visits the pages in the same order, so a cache that
evicts by recency (LRU) would throw out each page just before it is needed
again and hit nothing once the pages exceed it; a fixed set does not thrash.
A prefix leaves the streamed pages one contiguous run, read in order while
the cached pages at the head of the iteration are being processed.

The host cache is one tier of three (Garaph's GPU, host memory and SSDs):
pages the GPU keeps in its own memory for the run are never read from the
host again, so :func:`cache_beside` gives their room in the host cache to
the next pages in order, and no page is held in two budgets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .. import config
from ..errors import ConfigError
from ..progress import human_bytes
from . import decisions
from .page_io import page_buffer_bytes, staging_buffer_bytes
from .read_ratio import disk_read_speed

__all__ = ["HostCachePlan", "cache_beside", "host_cache_budget", "plan_host_cache",
           "plan_run_pages",
           "run_fixed_bytes", "store_array_bytes"]


def _check_bytes(name: str, value, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ConfigError(f"{name}={value!r}: expected a number of bytes >= {minimum}")
    return int(value)


def host_cache_budget(budget: int | None = None) -> int:
    """The host-memory budget of a run in bytes.

    Parameters
    ----------
    budget : int, optional
        Bytes; default ``config.HOST_CACHE_FRACTION`` of
        ``psutil.virtual_memory().available``.
    """
    if budget is None:
        return int(config.HOST_CACHE_FRACTION * config.available_host_memory())
    return _check_bytes("host_memory", budget, 1)


def store_array_bytes(store) -> int:
    """Bytes of the arrays an open store keeps in host memory.

    The CSC index, the CSR of out-edges (|E| targets), the degrees, the shard
    and block tables and the id table, and the out-edges' values an earlier
    run kept (``Store.kept_out_edge_values``): they count against the budget.
    """
    kept = store.kept_out_edge_values
    return int(sum(array.nbytes for array in store._arrays.values())) \
        + (kept.nbytes if kept is not None else 0)


@dataclass(frozen=True)
class HostCachePlan:
    """The outcome of :func:`plan_host_cache`.

    Attributes
    ----------
    budget_bytes : int
        The host-memory budget.
    fixed_bytes : int
        Vertex arrays and buffers of the run, paid first.
    readahead_bytes : int
        Read-ahead buffers (and the staging buffers of compressed pages) paid
        for: 0 when every page is cached.
    cached : tuple of int
        Pages kept in host memory (a prefix of the page order).
    streamed : tuple of int
        Pages read from the storage directories every iteration.
    cached_bytes, streamed_bytes : int
        Their total sizes.
    held_elsewhere : tuple of int
        Pages another tier keeps for the run (the GPU's kept pages), left out
        of the cache (:func:`cache_beside`); they count among ``streamed``.
    disk_bytes_per_s : float or None
        The storage directories' read speed the read-ahead was sized by
        (:func:`plan_run_pages`); None: not sized by it.
    readahead_pages : int or None
        Pages of each reader's read-ahead window so sized.
    kept_bytes : int
        Of ``fixed_bytes``, the out-edge values an earlier run kept
        (``Store.kept_out_edge_values``), counted where they fit beside every
        page (:func:`plan_run_pages`); a run whose plan leaves them out drops
        them (:func:`~garaphpy.storage.page_source.open_page_source`).
    """

    budget_bytes: int
    fixed_bytes: int
    readahead_bytes: int
    cached: tuple[int, ...]
    streamed: tuple[int, ...]
    cached_bytes: int
    streamed_bytes: int
    held_elsewhere: tuple[int, ...] = ()
    disk_bytes_per_s: float | None = None
    readahead_pages: int | None = None
    kept_bytes: int = 0

    @property
    def all_cached(self) -> bool:
        """Every page in host memory: no page is read from storage after the first time."""
        return not self.streamed

    @property
    def used_bytes(self) -> int:
        """Host memory the plan takes: fixed, read-ahead and cached pages."""
        return self.fixed_bytes + self.readahead_bytes + self.cached_bytes

    @property
    def room_bytes(self) -> int:
        """Bytes of the budget the plan leaves unused (none where it overruns)."""
        return max(self.budget_bytes - self.used_bytes, 0)

    def rho(self, k: float) -> float:
        """rho of Garaph section 4.2: ``config.RHO_IN_MEMORY`` when every page
        is cached, else ``k`` (the storage's sequential/random read ratio)."""
        return config.RHO_IN_MEMORY if self.all_cached else float(k)

    def describe(self) -> str:
        """One line for logs."""
        return (f"host budget {human_bytes(self.budget_bytes)}: vertex data and buffers "
                f"{human_bytes(self.fixed_bytes)}, read-ahead "
                f"{human_bytes(self.readahead_bytes)}, {len(self.cached)} pages cached "
                f"({human_bytes(self.cached_bytes)}), {len(self.streamed)} streamed "
                f"({human_bytes(self.streamed_bytes)})"
                + (f", {len(self.held_elsewhere)} held by the GPU instead"
                   if self.held_elsewhere else "")
                + (f"; read-ahead {self.readahead_pages} pages a reader for a disk at "
                   f"{self.disk_bytes_per_s / 1e9:.2f} GB/s"
                   if self.disk_bytes_per_s is not None else ""))


def plan_host_cache(page_sizes: Sequence[int], fixed_bytes: int, readahead_bytes: int,
                    budget: int | None = None) -> HostCachePlan:
    """Decide which pages stay in host memory under a budget.

    Parameters
    ----------
    page_sizes : sequence of int
        Bytes of each page image, in page order (``[p.nbytes for p in store.pages]``).
    fixed_bytes : int
        Host memory the run needs whatever happens: vertex arrays (values,
        their next copy, the active bitmap), the store's arrays
        (:func:`store_array_bytes`), staging buffers.
    readahead_bytes : int
        Buffers of the page reader, needed only when some page is streamed
        (``PageReader.readahead_bytes``).
    budget : int, optional
        Bytes (see :func:`host_cache_budget`).

    Returns
    -------
    HostCachePlan
        Every page cached if ``fixed_bytes`` plus all pages fit; otherwise
        the longest prefix of pages that fits beside ``fixed_bytes`` and
        ``readahead_bytes``, the rest streamed.

    Raises
    ------
    garaphpy.errors.ConfigError
        The pages do not all fit and ``fixed_bytes + readahead_bytes``
        alone exceeds the budget.
    """
    budget = host_cache_budget(budget)
    fixed_bytes = _check_bytes("fixed_bytes", fixed_bytes)
    readahead_bytes = _check_bytes("readahead_bytes", readahead_bytes)
    sizes = [_check_bytes(f"page_sizes[{i}]", size) for i, size in enumerate(page_sizes)]
    total = sum(sizes)
    if fixed_bytes + total <= budget:
        return HostCachePlan(budget, fixed_bytes, 0, tuple(range(len(sizes))), (), total, 0)
    room = budget - fixed_bytes - readahead_bytes
    if room < 0:
        raise ConfigError(
            f"host memory budget of {human_bytes(budget)} ({budget} bytes) is too small: the "
            f"vertex arrays and buffers ({human_bytes(fixed_bytes)}) and the page read-ahead "
            f"buffers ({human_bytes(readahead_bytes)}) alone need "
            f"{human_bytes(fixed_bytes + readahead_bytes)}; raise the host budget or lower "
            "readahead_bytes")
    # -- the longest prefix of pages that fits the room left -------------------------
    cumulative = np.cumsum(np.asarray(sizes, dtype=np.int64))
    count = int(np.searchsorted(cumulative, room, side="right"))
    cached_bytes = int(cumulative[count - 1]) if count else 0
    return HostCachePlan(budget, fixed_bytes, readahead_bytes, tuple(range(count)),
                         tuple(range(count, len(sizes))), cached_bytes, total - cached_bytes)


def cache_beside(plan: HostCachePlan, page_sizes: Sequence[int],
                 held_elsewhere) -> HostCachePlan:
    """``plan`` with the pages another tier holds for the run left out of the
    host cache, and the room they took given to the next pages in order.

    Parameters
    ----------
    plan : HostCachePlan
        The run's plan (:func:`plan_host_cache` over ``page_sizes``).
    page_sizes : sequence of int
        Bytes of each page image, in page order.
    held_elsewhere : iterable of int
        Pages kept elsewhere for the whole run (the GPU's kept pages).

    Returns
    -------
    HostCachePlan
        The same budget, fixed and read-ahead bytes; cached: the longest
        prefix, in page order, of the pages not held elsewhere that fits the
        room the old plan's cache had; streamed: the others, held elsewhere
        included (read from storage if asked).  ``plan`` itself where every
        page is cached or none is held elsewhere.
    """
    held = {int(k) for k in held_elsewhere}
    sizes = [int(size) for size in page_sizes]
    if not held or plan.all_cached:
        return plan
    others = [k for k in range(len(sizes)) if k not in held]
    # the same prefix rule over the others, the read-ahead paid as fixed bytes
    beside = plan_host_cache([sizes[k] for k in others],
                             plan.fixed_bytes + plan.readahead_bytes, 0, plan.budget_bytes)
    cached = [others[i] for i in beside.cached]
    used = beside.cached_bytes
    chosen = set(cached)
    streamed = tuple(k for k in range(len(sizes)) if k not in chosen)
    return dataclasses.replace(plan, cached=tuple(cached), streamed=streamed,
                               cached_bytes=used, streamed_bytes=sum(sizes) - used,
                               held_elsewhere=tuple(sorted(held)))


def run_fixed_bytes(store) -> int:
    """Host memory a run of ``store`` needs besides page images: the store's
    arrays and ``config.HOST_BYTES_PER_VERTEX`` per vertex."""
    return store_array_bytes(store) + config.HOST_BYTES_PER_VERTEX * store.num_vertices


def plan_run_pages(store, readers: int, budget: int | None = None,
                   readahead_bytes: int | None = None,
                   disk_bytes_per_s: float | None = None) -> tuple[HostCachePlan, int]:
    """The page plan of a run and the read-ahead of each of its ``readers``.

    The budget (default :func:`host_cache_budget`, plus the bytes of the
    buffers earlier runs gave back, ``store.vertex_buffers``: this run's
    vertex data, and of the out-edge values they kept,
    ``store.kept_out_edge_values``) pays first for :func:`run_fixed_bytes`,
    those values included where they fit beside every page (else the run
    drops them, and they are not counted); when every page fits
    beside it, all are cached.  Otherwise each page reader (one per
    processor) gets ``readahead_bytes`` rounded up to whole page buffers (and,
    for a store of compressed pages, a staging buffer per page buffer and one
    more, paid beside them), or by default the pages
    :func:`garaphpy.storage.decisions.readahead_pages` sizes from the
    storage directories' read speed (``disk_bytes_per_s``, default
    :func:`garaphpy.storage.read_ratio.disk_read_speed`, measured once per
    device; it is recorded in the plan), at most
    ``config.PAGE_READAHEAD_BYTES`` and the store's page count, and no more
    than a quarter of the room beside the fixed bytes, unless that is under
    two pages: a cached page saves its read every iteration, read-ahead
    only hides the read's latency.  The read-ahead is paid from the budget
    before the pages cached.

    Returns
    -------
    (HostCachePlan, int)
        The plan and the read-ahead bytes of one reader.
    """
    sizes = [info.nbytes for info in store.pages]
    buffer = page_buffer_bytes(store)
    fixed = run_fixed_bytes(store)
    # the buffers earlier runs gave back are this run's vertex data, and the out-edge
    # values they kept the store's: counted in ``fixed``, already out of the memory
    # available now
    kept = store.kept_out_edge_values
    kept_bytes = kept.nbytes if kept is not None else 0
    budget = host_cache_budget(budget) if budget is not None \
        else host_cache_budget() + store.vertex_buffers.held_bytes + kept_bytes
    if fixed + sum(sizes) > budget:     # the kept values yield to the pages: dropped
        fixed, kept_bytes = fixed - kept_bytes, 0
    if readahead_bytes is not None:
        pages_ahead = -(-_check_bytes("readahead_bytes", readahead_bytes, 1) // buffer)
    elif fixed + sum(sizes) <= budget:      # every page cached: nothing is read ahead
        pages_ahead, disk_bytes_per_s = 1, None
    else:
        if disk_bytes_per_s is None:
            disk_bytes_per_s = disk_read_speed(store.storage_dirs)
        # each reader thread reads one block, at most a page, at a time
        block = min(int(store.manifest["layout"]["block_bytes"]), buffer)
        sized = decisions.readahead_pages(
            buffer, disk_bytes_per_s, reads_in_flight_bytes=len(store.storage_dirs)
            * config.READS_IN_FLIGHT_PER_DIRECTORY * block)
        room = max(budget - fixed, 0)
        per_page = readers * buffer
        pages_ahead = min(sized, config.PAGE_READAHEAD_BYTES // buffer, len(sizes),
                          max(room // (4 * per_page), min(2, room // per_page)))
    readahead = max(1, pages_ahead) * buffer
    # a compressed page in flight also holds its staging buffer until decoded
    staging = (max(1, pages_ahead) + 1) * staging_buffer_bytes(store)
    plan = plan_host_cache(sizes, fixed, readers * (readahead + staging), budget)
    if readahead_bytes is None and disk_bytes_per_s is not None and not plan.all_cached:
        plan = dataclasses.replace(plan, disk_bytes_per_s=float(disk_bytes_per_s),
                                   readahead_pages=max(1, pages_ahead))
    return dataclasses.replace(plan, kept_bytes=kept_bytes), readahead
