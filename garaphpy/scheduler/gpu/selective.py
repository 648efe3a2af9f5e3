"""Selective transfers of the GPU's pages: skip, copy, compact or zero-copy (beyond Garaph section 5.2).

For programs declaring ``apply_keeps_best``, each page of a sparse iteration
is skipped, pulled (copied first when it streams), or its active edges
pushed from a compacted buffer or read from pinned host memory
(:func:`~garaphpy.scheduler.gpu.transfer.choose_transfers`, Subway's SubCSR).
:class:`SelectiveTransfers` holds the arrays these choices need (made at
set-up, or at the first sparse iteration where making them pays:
:meth:`SelectiveTransfers.selective_verdict`), the transfer rates the
choices are priced with (measured at set-up and learnt from every
iteration), and runs such an iteration (:meth:`SelectiveTransfers.iterate`).
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from dataclasses import dataclass

import numpy as np

from ... import config
from ...kernels import gpu as gpu_kernels
from ...kernels import gpu_subgraph as subgraph
from . import transfer
from .page_store import interleave, pinned_array, stream_slots

#: A selective iteration counts the frontier's edges per page only while it holds
#: at most 1 / SELECTIVE_FRONTIER_SHARE of the vertices (the device keeps room for
#: that many; a larger frontier reaches nearly every page, and every page is copied).
SELECTIVE_FRONTIER_SHARE = 8

#: The least counting work (edges, see :meth:`SelectiveTransfers.iterate`) the
#: count rate learns from: a smaller count's time is mostly its fixed costs.
COUNT_LEARNING_WORK = 1 << 20

#: About the out-edges of the sample frontier whose count and gather measure the
#: host's rates at set-up (:meth:`SelectiveTransfers.calibrate_transfer_rates`).
CALIBRATION_EDGES = 1 << 22
#: ... and about the bytes of the pinned copies that measure the link (a small
#: page is copied several times over).
CALIBRATION_BYTES = 32 << 20


def selective_device_bytes(num_vertices: int, accum_itemsize: int, largest_page: int,
                           num_pages: int) -> int:
    """Device bytes of the selective transfers' arrays: the accumulators, the
    frontier, the compacted buffer, two sets of vertex ranges."""
    return ((num_vertices + 4) * accum_itemsize
            + 8 * (num_vertices // SELECTIVE_FRONTIER_SHARE + 1)
            + max(largest_page, 1 << 16) + 32 * (num_pages + 1))


@dataclass
class ActiveEdgeCount:
    """What a selective iteration knows of its frontier before it chooses."""

    frontier_edges: int
    frontier: np.ndarray = None
    pieces: tuple = None
    active_edges: np.ndarray = None
    counted: bool = False
    count_work: int = 0
    count_seconds: float = 0.0


class SelectiveTransfers:
    """The selective transfers of one GPU run, and its transfer rates.

    Parameters
    ----------
    cupy : module
    store : garaphpy.storage.Store
    state : DeviceVertexState
    page_store : PageStore
    launches : Launches
    reads_weights : bool
        The program reads edge values (the pushes then carry them).
    forced : str
        ``config.GPU_TRANSFER``: "auto", or one transfer for study.
    selective_bytes : int
        Device bytes of the arrays (0: the run has none).
    when_pays : bool
        Deferred arrays are made once that pays (:func:`decisions.selective_pays`;
        False: at the first sparse iteration).
    calibrate : bool
        The transfer rates are measured at set-up (False: config's rates).
    """

    pinned_array = staticmethod(pinned_array)

    def __init__(self, cupy, store, state, page_store, launches, *, reads_weights: bool,
                 forced: str, selective_bytes: int, when_pays: bool = True,
                 calibrate: bool = True):
        self.cupy, self.store = cupy, store
        self.state, self.page_store, self.launches = state, page_store, launches
        self.pages = store.pages
        #: per page, the bytes a read of it moves from disk
        self.page_disk_bytes = np.array([info.disk_bytes for info in self.pages], np.float64)
        self.num_vertices, self.num_edges = store.num_vertices, store.num_edges
        self.reads_weights = reads_weights
        self.transfer_forced = forced
        self.when_pays, self.calibrate = bool(when_pays), bool(calibrate)
        #: device bytes the selective transfers' arrays take when pages stream
        self.selective_bytes = selective_bytes
        #: whether sparse iterations choose per page (set by the engine once decided)
        self.selective = False
        #: the pages whose destinations are all settled, skipped (the plan's
        #: ``settled_pages``: :meth:`skip_settled_pages`); None: not
        self.settled = None
        self.pushes_entry = None
        #: the transfer rates measured at set-up (:meth:`calibrate_transfer_rates`)
        self.calibration = None
        self.push_weights = False
        self.push_stream = cupy.cuda.Stream(non_blocking=True)
        self.transfer_rates = transfer.TransferRates()
        #: the deferred selective arrays' rent-or-buy (:meth:`selective_verdict`): the
        #: savings forgone so far, the largest frontier so far, and the last dense
        #: iteration's time (None: none yet)
        self._selective_rent = 0.0
        self._peak_active = 0
        self.dense_seconds = None

    # -- what a sparse iteration is expected to cost ------------------------------------------
    def sparse_edge_seconds(self) -> float:
        """What a sparse pass is expected to spend per out-edge of its frontier,
        from the transfer rates: with selective transfers, the host's count
        and gather of the edge and its compacted bytes over the bus; on
        resident pages, the pull of the edge."""
        rates = self.transfer_rates
        if not self.selective:
            return 1.0 / rates.pull
        compact = self.pushed_edge_bytes()["compact"]
        return 1.0 / rates.count + 1.0 / rates.gather + compact / rates.bus

    def pushed_edge_bytes(self) -> dict:
        """:func:`transfer.edge_bytes` of this run's pushed edges (their weights
        only where the pushes read them)."""
        return transfer.edge_bytes(self.store.vertex_dtype.itemsize,
                                   self.store.weight_dtype.itemsize if self.push_weights else 0)

    @property
    def selective_most_vertices(self) -> int:
        """The largest frontier, in vertices, that a selective iteration counts
        per page (larger ones pull every page)."""
        return self.num_vertices // SELECTIVE_FRONTIER_SHARE

    def deferred_verdict(self, active_out_edges: int) -> tuple[bool, float, dict] | None:
        """Where the selective arrays are deferred: :meth:`selective_verdict`
        for a frontier sparse enough to make them
        (:func:`decisions.make_selective_arrays`), else None.  The one rule of
        the policy's question (the engine's ``iterates_sparse``) and the
        iteration's own choice (:meth:`iterate_if_chosen`)."""
        from .. import decisions

        if not decisions.make_selective_arrays(self.state.active_vertices,
                                               self.selective_most_vertices):
            return None
        return self.selective_verdict(active_out_edges)

    def selective_verdict(self, active_out_edges: int) -> tuple[bool, float, dict]:
        """Whether a sparse iteration of ``active_out_edges`` frontier out-edges
        makes the deferred selective arrays now (:func:`decisions.selective_pays`,
        unless :attr:`when_pays` is off), the rent after it,
        and the record's entry.  The dense pass costs what the last one took
        (before any, the streamed pages' copies at the bus rate); the
        selective pass, ``config.HYBRID_GPU_SPARSE_OVERHEAD_SECONDS`` and the
        frontier's out-edges at :meth:`sparse_edge_seconds`; the released
        pages, their copies in every later dense iteration.  Nothing is
        changed here: the caller keeps the rent."""
        from .. import decisions

        rates, pages = self.transfer_rates, self.page_store
        dense = self.dense_seconds
        if dense is None:
            dense = pages.streamed_bus_bytes / rates.bus
        sparse = (config.HYBRID_GPU_SPARSE_OVERHEAD_SECONDS
                  + active_out_edges * self.sparse_edge_seconds())
        released = float(pages.page_bus_bytes[pages.release_pages].sum()) / rates.bus
        tail = self.state.active_vertices < self._peak_active
        if self.when_pays:
            make, rent = decisions.selective_pays(dense, sparse, released, self._selective_rent,
                                                  tail, config.GPU_RELEASE_DENSE_ITERATIONS)
        else:
            make, rent = True, self._selective_rent
        entry = {"choice": make, "dense_seconds": dense, "sparse_seconds": sparse,
                 "released_seconds": released, "tail": tail, "rent": rent,
                 "enabled": self.when_pays}
        return make, rent, entry

    def iterates_sparse(self, active_out_edges: int) -> bool:
        """Whether a sparse iteration may choose per page: the run chooses
        per page, with its arrays made or, where they are deferred, once
        making them pays (:meth:`selective_verdict`)."""
        if not self.selective:
            return False
        if self.page_store.release_pages is None:
            return True
        verdict = self.deferred_verdict(active_out_edges)
        return bool(verdict is not None and verdict[0])

    # -- set-up --------------------------------------------------------------------------------
    def _host_room(self) -> int:
        """Host bytes the run may still pin beyond its page plan."""
        available = config.available_host_memory()
        plan = self.page_store.page_source.plan
        if plan is None:
            return int(available * config.HOST_MEMORY_FRACTION)
        return max(0, min(available, plan.budget_bytes - plan.fixed_bytes
                          - plan.readahead_bytes - plan.cached_bytes))

    def pinned_out_edges_fit(self) -> bool:
        """Whether the out-edge CSR the selective transfers read in pinned host
        memory is made already or fits the host room left."""
        store = self.store
        entry = _PINNED_OUT_EDGES.get(store)
        needed = 0
        if entry is None:
            needed += 8 * (self.num_vertices + 1) + self.num_edges * store.vertex_dtype.itemsize
        if self.reads_weights and (entry is None or entry[2] is None):
            needed += self.num_edges * store.weight_dtype.itemsize
        return needed <= self._host_room()

    def setup(self, pushes_entry: dict, largest_page: int) -> None:
        """The arrays of selective iterations: the push's accumulators (at the
        identity), the compacted buffer (one page's bytes, on the host pinned
        and on the device), the pages' vertex ranges, and the out-edge CSR in
        pinned host memory (the host gathers from it; the GPU reads it in
        zero-copy transfers), its values placed in the targets' order, or the
        store's own CSR when the host has no room for that copy
        (``pushes_entry``: :func:`decisions.selective_pushes`)."""
        cupy, store, n = self.cupy, self.store, self.num_vertices
        self.pushes_entry = pushes_entry
        self.compact_capacity_bytes = max(int(largest_page), 1 << 16)
        self.compact_host = self.pinned_array(self.compact_capacity_bytes, np.uint8)
        if self.page_store.release_pages is None:
            self.make_device_arrays()
        self.page_first = np.array([p.first_vertex for p in self.pages], np.int64)
        self.page_end = np.array([p.end_vertex for p in self.pages], np.int64)
        self.page_lookup = subgraph.PageLookup(self.page_first, self.page_end, n)
        self._piece_buffers = subgraph.PieceBuffers()
        self.push_weights = self.reads_weights
        if pushes_entry["pinned_fits"]:
            self.out_offsets, self.out_targets, self.out_weights = pinned_out_edges(
                store, self.push_weights)
        else:
            self.out_offsets = np.asarray(store.out_offsets, np.int64)
            self.out_targets, self.out_weights = np.asarray(store.out_targets), None
        #: the transfer codes the pushes may use (:func:`decisions.selective_pushes`)
        self.push_codes = tuple(transfer.TRANSFER_NAMES.index(name)
                                for name in pushes_entry["choice"])
        self.targets_sorted = subgraph.targets_sorted(self.out_offsets, self.out_targets)
        mean_degree = self.num_edges / max(n, 1)
        self.push_group_shift = int(min(5, max(0, np.ceil(np.log2(max(mean_degree, 1.0))))))
        self.gather_threads = max(1, len(os.sched_getaffinity(0)))
        self._push_events = [cupy.cuda.Event(), cupy.cuda.Event(), cupy.cuda.Event()]
        # compiled now, not in the first selective iteration (seconds on a fresh install)
        subgraph.compile_counts(self.out_offsets, self.out_targets, self.page_lookup,
                                self.targets_sorted, self._piece_buffers)
        if "compact" in pushes_entry["choice"] and n:
            # and the gather into the compacted buffer (3.9 s inside a timed run, H200)
            with contextlib.suppress(OverflowError):
                subgraph.gather_active_edges(
                    np.zeros(1, np.int64), self.out_offsets, self.out_targets,
                    self.out_weights if self.push_weights else None, self.page_lookup,
                    np.ones(len(self.pages), bool), self.compact_views, 1, None,
                    self.targets_sorted)
        # and cupy's kernels of the frontier's list (0.6 s on their first call)
        with self.state.main_stream:
            cupy.flatnonzero(self.state.active[:n]).get()
        if self.calibrate:
            self.calibration = {"choice": "measured", **self.calibrate_transfer_rates()}

    def calibrate_transfer_rates(self) -> dict:
        """The rates the first selective iterations price with, measured now on
        this host and link (the defaults in :mod:`~garaphpy.config` are another
        machine's, and a loaded host counts at half their speed): pinned
        copies of a streamed page (:data:`CALIBRATION_BYTES` in all), and the
        count and the gather of sample frontiers (every vertex at a stride,
        about :data:`CALIBRATION_EDGES` out-edges, the gather's within half
        the compacted buffer).  Each replaces its default; the iterations go
        on learning from there.  Returns what was measured
        (``self.calibration``, in the run's decisions)."""
        cupy, n, rates, pages = self.cupy, self.num_vertices, self.transfer_rates, self.page_store
        measured = {}
        # the link: a streamed page's pinned image into a stream's buffer, the second
        # of two rounds of copies timed (the first may map the memory)
        host = max(pages.packed_host.values(), key=len, default=self.compact_host)
        device = (pages.device_packed or pages.device_pages or [None])[0]
        if device is not None:
            size = min(host.nbytes, device.nbytes)
            repeats = min(64, -(-CALIBRATION_BYTES // max(size, 1)))
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            stream = pages.copy_stream
            for _ in range(2):
                stream.record(start)
                for _ in range(repeats):
                    cupy.cuda.runtime.memcpyAsync(device.data.ptr, host.ctypes.data, size,
                                                  cupy.cuda.runtime.memcpyHostToDevice,
                                                  stream.ptr)
                stream.record(stop)
                stop.synchronize()
            seconds = cupy.cuda.get_elapsed_time(start, stop) / 1e3
            if rates.learn("bus", size * repeats, seconds, smoothing=1.0):
                measured["bus"] = {"amount": int(size * repeats), "seconds": seconds}
        # the host threads: frontiers of every vertex at a stride
        def sample(edges: int) -> np.ndarray:
            stride = max(1, int(np.ceil(self.num_edges / max(edges, 1))))
            return np.arange(0, n, stride, dtype=np.int64)

        counted = sample(CALIBRATION_EDGES)
        edge_bytes = self.pushed_edge_bytes()["compact"]
        # the gather's within half the compacted buffer
        gathered = sample(min(CALIBRATION_EDGES,
                              self.compact_capacity_bytes // (2 * edge_bytes + 16)))
        if counted.size <= subgraph.SERIAL_PIECES:
            return measured     # too small a graph for the threads' rates
        best = {}
        for _ in range(2):      # the second, with the threads awake
            started = time.perf_counter()
            work = subgraph.count_work(counted, self.out_offsets, len(self.pages),
                                       self.targets_sorted)
            pieces = subgraph.frontier_pieces(counted, self.out_offsets,
                                              buffers=self._piece_buffers)
            subgraph.page_active_edges(counted, self.out_offsets, self.out_targets,
                                       self.page_lookup, self.gather_threads * 4, pieces,
                                       self.targets_sorted)
            best["count"] = (work, time.perf_counter() - started)
            if "compact" not in self.pushes_entry["choice"] or \
                    gathered.size <= subgraph.SERIAL_PIECES:
                continue
            pieces = subgraph.frontier_pieces(gathered, self.out_offsets,
                                              buffers=self._piece_buffers)
            started = time.perf_counter()
            try:
                sub = subgraph.gather_active_edges(
                    gathered, self.out_offsets, self.out_targets,
                    self.out_weights if self.push_weights else None, self.page_lookup,
                    np.ones(len(self.pages), bool), self.compact_views,
                    self.gather_threads * 4, pieces, self.targets_sorted)
            except OverflowError:
                continue
            best["gather"] = (sub["edges"], time.perf_counter() - started)
        for name, (amount, seconds) in best.items():
            if rates.learn(name, amount, seconds, smoothing=1.0):
                measured[name] = {"amount": int(amount), "seconds": seconds}
        return measured

    def make_device_arrays(self) -> None:
        """The selective iterations' device arrays: the push's accumulators (at
        the identity), the compacted buffer, and the pushed vertex ranges."""
        cupy, n, state = self.cupy, self.num_vertices, self.state
        with state.main_stream:
            self.stream_accum = cupy.full(n + 4, state.split_identity,
                                          dtype=state.split_accum.dtype)
            self.compact_device = cupy.empty(self.compact_capacity_bytes, np.uint8)
            self.range_device = cupy.empty(4 * (len(self.pages) + 1), np.int64)
        state.main_stream.synchronize()

    def release(self, record) -> None:
        """The deferred selective arrays made (:func:`decisions.make_selective_arrays`):
        the pages the page store kept until then released from the device first
        (:meth:`PageStore.release`), recorded as
        ``record.decisions["selective_arrays"]`` with the seconds this took
        (once in a run: the hybrid policy leaves them out of what it expects
        the next sparse iterations to cost)."""
        from .. import decisions

        started = time.perf_counter()
        released, freed = self.page_store.release()
        self.make_device_arrays()
        decisions.note(record, "selective_arrays", "made", iteration=record.iteration,
                       active_vertices=self.state.active_vertices, released_pages=released,
                       released_bytes=freed, selective_bytes=self.selective_bytes,
                       seconds=time.perf_counter() - started)

    # -- buffers ---------------------------------------------------------------------------------
    def compact_views(self, sizes: dict) -> dict:
        """Arrays of the given element counts in the pinned compacted buffer:
        sources and offsets (int64), targets (vertex type), weights; raises
        OverflowError when they do not fit."""
        vertex_dtype, weight_dtype = self.store.vertex_dtype, (
            self.store.weight_dtype if self.push_weights else np.dtype(np.float32))
        layout, at = {}, 0
        for name, dtype in (("sources", np.dtype(np.int64)), ("offsets", np.dtype(np.int64)),
                            ("targets", vertex_dtype), ("weights", weight_dtype)):
            layout[name] = (at, int(sizes[name]), dtype)
            at += -(-int(sizes[name]) * dtype.itemsize // 256) * 256
        if at > self.compact_capacity_bytes:
            raise OverflowError(at)
        self._compact_layout = layout
        self._compact_bytes = at
        return {name: self.compact_host[start:start + count * dtype.itemsize].view(dtype)
                for name, (start, count, dtype) in layout.items()}

    def _device_compact(self, name: str):
        start, count, dtype = self._compact_layout[name]
        return self.compact_device[start:start + count * dtype.itemsize].view(dtype)

    # -- a selective iteration -------------------------------------------------------------------
    def iterate_if_chosen(self, record, aggregates) -> bool:
        """Run the iteration the engine began as a selective one where the run
        chooses per page (with the deferred arrays made first, once that pays:
        recorded as ``record.decisions["selective_pays"]``); returns whether it
        did."""
        if not self.selective:
            return False
        state = self.state
        if self.page_store.release_pages is not None:
            verdict = self.deferred_verdict(state.active_out_edges_count)
            if verdict is not None:
                make, self._selective_rent, record.decisions["selective_pays"] = verdict
                if make:
                    self.release(record)
                    self.iterate(record, aggregates)
                    return True
            self._peak_active = max(self._peak_active, state.active_vertices)
            return False
        if self.page_store.plan.resident and \
                state.active_vertices > self.selective_most_vertices:
            return False
        self.iterate(record, aggregates)
        return True

    def _count(self, pull_seconds: np.ndarray, streamed_bytes: int,
               read_seconds: float = 0.0) -> ActiveEdgeCount:
        """The frontier's active edges per page, when counting them pays
        (:func:`decisions.count_active_edges`)."""
        from .. import decisions

        cupy, state, n = self.cupy, self.state, self.num_vertices
        main, rates, forced = state.main_stream, self.transfer_rates, self.transfer_forced
        # end_iteration counts the next ones
        count = ActiveEdgeCount(frontier_edges=state.active_out_edges_count)
        started = time.perf_counter()
        count.count_work = count.frontier_edges
        most_vertices = self.selective_most_vertices
        if forced != "copy" and state.active_vertices <= most_vertices:
            with main:
                frontier_device = cupy.flatnonzero(state.active[:n])
            count.frontier = frontier_device.get(stream=main)
            main.synchronize()
            # a vertex's sorted targets cost a few steps per page they reach
            count.count_work = subgraph.count_work(count.frontier, self.out_offsets,
                                                   len(self.pages), self.targets_sorted)
        count.counted = decisions.count_active_edges(
            count.count_work, streamed_bytes, rates.bus, rates.count, forced,
            active_vertices=state.active_vertices, most_vertices=most_vertices,
            kept_pull_seconds=float(pull_seconds.sum()), read_seconds=read_seconds)
        if count.counted:
            count.pieces = subgraph.frontier_pieces(count.frontier, self.out_offsets,
                                                    buffers=self._piece_buffers)
            count.active_edges = subgraph.page_active_edges(
                count.frontier, self.out_offsets, self.out_targets, self.page_lookup,
                self.gather_threads * 4, count.pieces, self.targets_sorted)
            count.count_seconds = time.perf_counter() - started
        return count

    def iterate(self, record, aggregates) -> None:
        """One iteration whose streamed pages each reach the GPU the cheapest
        way (:func:`~garaphpy.scheduler.gpu.transfer.choose_transfers`): skipped,
        copied whole and pulled, or their active edges pushed from a compacted
        buffer or read from pinned host memory (zero-copy); then the vertices
        of every page not pulled are applied.  The choice and its inputs are
        recorded as ``record.decisions["page_transfer"]``."""
        from .. import decisions

        rates, pages, launches = self.transfer_rates, self.page_store, self.launches
        resident = pages.kept_pages
        streamed_bytes = pages.streamed_bus_bytes
        pull_seconds = np.where(resident, pages.page_edge_counts / np.where(
            pages.packed_kept, rates.packed_pull, rates.pull), 0.0)
        # pages from disk: a copy waits for the read, which a skip or a push spares
        read_seconds = page_read_seconds(pages, self.page_disk_bytes,
                                         pages.page_source.disk_bytes_per_s)
        count = self._count(pull_seconds, streamed_bytes, float(read_seconds.sum()))
        bytes_per_edge = self.pushed_edge_bytes()
        # a piece of at most gpu_subgraph.PIECE_EDGES edges adds its source and offset
        compact_capacity = self.compact_capacity_bytes // (bytes_per_edge["compact"] + 1)
        choices, predicted = transfer.choose_transfers(
            count.active_edges, pages.page_bus_bytes, resident, rates, exact=True,
            forced=self.transfer_forced, bytes_per_edge=bytes_per_edge,
            compact_capacity=compact_capacity, total_active_edges=count.frontier_edges,
            vertex_bytes=self.store.vertex_dtype.itemsize, pull_seconds=pull_seconds,
            pushes=self.push_codes, read_seconds=read_seconds)
        settled = self.settled.skip(choices) if self.settled is not None else 0
        copied = np.flatnonzero(choices == transfer.COPY).tolist()
        kept_pulled = np.flatnonzero(choices == transfer.RESIDENT).tolist()
        launches.begin_iteration(record.iteration, order=copied)
        timings = []
        order = interleave(copied, kept_pulled)
        for k, slot in zip(order, stream_slots(order, resident, len(pages.streams))):
            timings.append(launches.launch_page(k, aggregates, record.iteration, slot=slot))
        pushed = self._push(choices, count, bytes_per_edge, timings, aggregates, record)
        self._apply(choices, pushed, aggregates, record)
        launches.end_iteration(record, timings, aggregates)
        # what crossed the bus, and the rates measured
        record.edges_processed += pushed["edges"]
        record.gpu_edges += pushed["edges"]
        record.bytes_to_device += pushed["compact_bytes"] + pushed["zero_copy_bytes"]
        copy_bytes = sum(t.bytes_to_device for t in timings)
        rates.learn("bus", copy_bytes, record.copy_seconds)
        if pushed["compact_pages"].size and pushed["gathered"]:
            rates.learn("gather", pushed["gathered"], pushed["gather_seconds"])
        if count.counted and count.count_work >= COUNT_LEARNING_WORK:  # else fixed costs
            rates.learn("count", count.count_work, count.count_seconds)
        self.learn_pull_rates(timings)
        if pushed["zero_copy_pages"].size:
            rates.learn("zero_copy", pushed["zero_copy_bytes"], self.cupy.cuda.get_elapsed_time(
                pushed["zero_copy_started"], pushed["done"]) / 1e3)
        decisions.note(record, "page_transfer", transfer.describe_choices(choices),
                       forced=self.transfer_forced, counted=count.counted,
                       count_seconds=count.count_seconds,
                       active_out_edges=int(count.frontier_edges),
                       streamed_bytes=streamed_bytes, predicted_seconds=predicted["seconds"],
                       rates=rates.as_dict(), compact_edges=int(pushed["gathered"]),
                       compact_bytes=int(pushed["compact_bytes"]),
                       zero_copy_bytes=int(pushed["zero_copy_bytes"]),
                       copied_bytes=int(copy_bytes), settled_pages=settled,
                       read_seconds=float(read_seconds.sum()),
                       **{name: int((choices == code).sum())
                          for code, name in enumerate(transfer.TRANSFER_NAMES)})

    def _push(self, choices: np.ndarray, count: ActiveEdgeCount, bytes_per_edge: dict,
              timings: list, aggregates, record) -> dict:
        """The pushes of the compacted and zero-copy pages on the push stream
        (the host gathers while the copies are under way); a compacted set
        that outgrows the buffer turns its pages into copies (``choices`` and
        ``timings`` updated).  Returns what was pushed and its events."""
        cupy, state, pages, launches = self.cupy, self.state, self.page_store, self.launches
        resident = pages.kept_pages
        frontier, pieces, active_edges = count.frontier, count.pieces, count.active_edges
        push = self.push_stream
        push.wait_event(launches.ready)
        events = self._push_events
        push.record(events[0])
        compact_pages = np.flatnonzero(choices == transfer.COMPACT)
        zero_copy_pages = np.flatnonzero(choices == transfer.ZERO_COPY)
        kernel_arguments = (self.stream_accum, state.values) + state.attrs + (
            np.int32(self.push_group_shift),)
        pushed = dict(compact_pages=compact_pages, zero_copy_pages=zero_copy_pages, gathered=0,
                      gather_seconds=0, compact_bytes=0, zero_copy_bytes=0,
                      zero_copy_started=None)
        if compact_pages.size:
            gather_started = time.perf_counter()
            try:
                sub = subgraph.gather_active_edges(
                    frontier, self.out_offsets, self.out_targets,
                    self.out_weights if self.push_weights else None, self.page_lookup,
                    choices == transfer.COMPACT, self.compact_views, self.gather_threads * 4,
                    pieces, self.targets_sorted)
            except OverflowError:
                sub = None
            pushed["gather_seconds"] = time.perf_counter() - gather_started
            if sub is None:     # more edges than the buffer: these pages are copied after all
                for k in compact_pages.tolist():
                    choices[k] = transfer.RESIDENT if resident[k] else transfer.COPY
                    timings.append(launches.launch_page(k, aggregates, record.iteration,
                                                        slot=len(timings) % len(pages.streams)))
            else:
                pushed["gathered"] = sub["edges"]
                pushed["compact_bytes"] = compact_bytes = self._compact_bytes
                cupy.cuda.runtime.memcpyAsync(self.compact_device.data.ptr,
                                              self.compact_host.ctypes.data, compact_bytes,
                                              cupy.cuda.runtime.memcpyHostToDevice, push.ptr)
                push.record(events[1])
                offsets = self._device_compact("offsets")
                self.launch_push(push, self._device_compact("sources"), offsets[:-1],
                                 offsets[1:], self._device_compact("targets").data.ptr,
                                 self._device_compact("weights").data.ptr, None,
                                 kernel_arguments)
        zero_copy_edges = 0
        if zero_copy_pages.size:
            first, end = transfer.pushed_ranges(self.page_first, self.page_end, zero_copy_pages)
            ranges = self.upload_ranges(first, end, push, offset=len(self.pages) + 1)
            with push:
                vertex, begin, end = (cupy.asarray(array) for array in pieces)
            pushed["zero_copy_started"] = push.record(events[2])
            self.launch_push(push, vertex, begin, end, host_pointer(self.out_targets),
                             host_pointer(self.out_weights) if self.push_weights
                             else state.empty_weights.data.ptr, ranges, kernel_arguments)
            zero_copy_edges = int(active_edges[zero_copy_pages].sum())
            vertex_size = self.store.vertex_dtype.itemsize
            pushed["zero_copy_bytes"] = (count.frontier_edges * vertex_size
                                         + zero_copy_edges * bytes_per_edge["zero-copy"]
                                         - zero_copy_edges * vertex_size)
        pushed["done"] = push.record(cupy.cuda.Event())
        pushed["edges"] = pushed["gathered"] + zero_copy_edges
        return pushed

    def _apply(self, choices: np.ndarray, pushed: dict, aggregates, record) -> None:
        """The vertices of the pages not pulled applied to the pushed sums, once
        the pages' streams and the pushes are done."""
        state, kernels = self.state, self.launches.kernels
        main, n = state.main_stream, self.num_vertices
        applied = np.flatnonzero((choices == transfer.SKIP) | (choices == transfer.COMPACT)
                                 | (choices == transfer.ZERO_COPY))
        self.launches.join_page_streams()
        main.wait_event(pushed["done"])
        if not applied.size:
            return
        if (pushed["compact_pages"].size or pushed["zero_copy_pages"].size) and state.num_split:
            state.launch_vertices(kernels.stream_split_merge, (
                state.split_vertices, np.int32(state.num_split), self.stream_accum,
                state.split_accum))
        first, end = transfer.pushed_ranges(self.page_first, self.page_end, applied)
        range_first, range_end = self.upload_ranges(first, end, main)
        widest = int((end - first).max())
        blocks = max(1, min(state.device.multiprocessors * 8 // max(first.size, 1) + 1,
                            -(-widest // 256)))
        with main:
            kernels.stream_apply((blocks, int(first.size)), (256,), (
                range_first, range_end, self.stream_accum, state.values, state.next,
                state.active) + state.attrs + (aggregates, np.int64(n),
                                               np.int64(record.iteration), state.l1_total,
                                               state.counters),
                shared_mem=gpu_kernels.TOTALS_SHARED_BYTES)

    def learn_pull_rates(self, timings: list) -> None:
        """The kept pages' pull rates from this iteration's kernel windows
        (:func:`learn_kept_pull_rates`)."""
        learn_kept_pull_rates(self.transfer_rates, self.launches.timings, self.page_store,
                              timings)

    def skip_settled_pages(self) -> None:
        """From now on, selective iterations skip the pages whose destinations
        are all settled (:class:`SettledPages`)."""
        self.settled = SettledPages(self.cupy, self.state, self.page_first, self.page_end,
                                    self.store.in_degree)

    def upload_ranges(self, first: np.ndarray, end: np.ndarray, stream, offset: int = 0):
        """Vertex ranges copied into the device's range area (at ``offset`` pairs)
        on ``stream``: (first, end) device views."""
        count = int(first.size)
        host = np.concatenate([first, end]).astype(np.int64)
        area = self.range_device[2 * offset:2 * offset + 2 * count]
        area.set(host, stream=stream)
        return area[:count], area[count:]

    def launch_push(self, stream, vertex, begin, end, targets_pointer, weights_pointer,
                    ranges, kernel_arguments) -> None:
        """The push kernel over pieces of active vertices' edges (``vertex``,
        ``begin``, ``end`` device arrays; targets and values at the given
        addresses, on the device or in pinned host memory), into ``ranges`` of
        vertices only when given."""
        count = int(vertex.size)
        if count == 0:
            return
        if ranges is None:
            ranges = (self.range_device, self.range_device)
            num_ranges = 0
        else:
            num_ranges = int(ranges[0].size)
        group = 1 << self.push_group_shift
        threads = 256
        blocks = max(1, min(self.state.device.multiprocessors * 16,
                            -(-count * group // threads)))
        with stream:
            self.launches.kernels.stream_push((blocks,), (threads,), (
                vertex, np.int64(count), begin, end, np.uint64(targets_pointer),
                np.uint64(weights_pointer), ranges[0], ranges[1],
                np.int32(num_ranges)) + kernel_arguments)


class SettledPages:
    """The pages whose destinations were all active once, for a program whose
    vertices never change once active (:func:`decisions.gpu_settled_pages`).

    A flag per vertex on the device, set from the start for the vertices
    without in-edges (none can reach them), takes each iteration's frontier; one
    prefix sum over the flags tells which pages still hold a vertex never
    active.  The others are skipped: not read, copied nor pulled.
    """

    def __init__(self, cupy, state, page_first: np.ndarray, page_end: np.ndarray,
                 in_degree: np.ndarray):
        self.cupy, self.state = cupy, state
        self.num_vertices = int(page_end.max(initial=0))
        with state.main_stream:
            # a vertex without in-edges never changes: it counts as settled from the start
            self.once_active = cupy.asarray(
                (np.asarray(in_degree[:self.num_vertices]) == 0).astype(np.uint8))
            self.bounds = cupy.asarray(np.stack([page_first, page_end]).astype(np.int64))
            #: per vertex, how many before it were never active (the first stays 0)
            self.never_before = cupy.zeros(self.num_vertices + 1, np.int64)

    def skip(self, choices: np.ndarray) -> int:
        """``choices`` with the settled pages skipped; returns how many of them
        were not skipped already."""
        cupy, n = self.cupy, self.num_vertices
        with self.state.main_stream:
            cupy.bitwise_or(self.once_active, self.state.active[:n] != 0, out=self.once_active)
            never = self.never_before
            cupy.cumsum(self.once_active == 0, dtype=np.int64, out=never[1:])
            open_pages = (never[self.bounds[1]] > never[self.bounds[0]]).get()
        closing = ~open_pages & (choices != transfer.SKIP)
        choices[closing] = transfer.SKIP
        return int(closing.sum())


def page_read_seconds(page_store, disk_bytes: np.ndarray,
                      disk_speed: float | None) -> np.ndarray:
    """Per page, the time its read from disk takes before the GPU can copy it:
    the pages it copies (:meth:`PageStore.copied_mask`) that the page source
    holds in neither budget (not packed in pinned host memory, not in the
    host's page cache: :meth:`PageSource.cached_mask`), their ``disk_bytes``
    at ``disk_speed`` (the source's ``disk_bytes_per_s``); 0 for every other
    page, and for every page of a source in memory (``disk_speed`` None)."""
    if disk_speed is None:
        return np.zeros(len(disk_bytes), np.float64)
    from_disk = (page_store.copied_mask() & ~page_store.packed_host_mask()
                 & ~page_store.page_source.cached_mask())
    return np.where(from_disk, np.asarray(disk_bytes, np.float64) / disk_speed, 0.0)


def learn_kept_pull_rates(rates, measured_timings: list, page_store, timings: list) -> None:
    """The kept pages' pull rates (edges per second, as they are and packed)
    learnt by ``rates`` from an iteration's kernel windows.  Pages' kernels
    overlap on the streams: each window counts for its share of the kernels'
    busy time (the windows' sum over that time)."""
    if not measured_timings or not timings:
        return
    measured = measured_timings[-1]
    windows = float(sum(measured.per_page_kernel))
    if windows <= 0.0:
        return
    share = measured.kernel_seconds / windows
    edges = {"pull": 0, "packed_pull": 0}
    seconds = {"pull": 0.0, "packed_pull": 0.0}
    for timing, kernel in zip(timings, measured.per_page_kernel):
        if timing.page >= 0 and page_store.kept_pages[timing.page]:
            name = "packed_pull" if page_store.packed_kept[timing.page] else "pull"
            edges[name] += page_store.pages[timing.page].num_edges
            seconds[name] += kernel * share
    for name in edges:
        rates.learn(name, edges[name], seconds[name])


def host_pointer(array: np.ndarray) -> np.uint64:
    """A pinned host array's address, which kernels read through (unified
    virtual addressing: pinned memory is mapped at the same address)."""
    return np.uint64(array.ctypes.data)


#: store -> its out-edge CSR in pinned host memory (offsets, targets, values or None),
#: shared by the runs on the store (made once: a copy, the values placed in order)
_PINNED_OUT_EDGES = weakref.WeakKeyDictionary()


def pinned_out_edges(store, with_values: bool) -> tuple:
    """The store's out-edge CSR in pinned host memory, kept for the store's
    lifetime: (offsets int64, targets, values in the targets' order or None).

    The selective transfers' host threads gather from it, and the GPU reads
    it in zero-copy transfers; the values are placed once, on first use
    (:func:`garaphpy.kernels.gpu_subgraph.store_out_edge_values`)."""
    entry = _PINNED_OUT_EDGES.get(store)
    if entry is None:
        offsets = np.asarray(store.out_offsets, np.int64)
        pinned_offsets = gpu_kernels.pinned_empty(offsets.nbytes).view(np.int64)
        pinned_offsets[:] = offsets
        targets = gpu_kernels.pinned_empty(store.num_edges * store.vertex_dtype.itemsize
                                           ).view(store.vertex_dtype)
        targets[:] = store.out_targets
        entry = _PINNED_OUT_EDGES[store] = [pinned_offsets, targets, None]
    if with_values and entry[2] is None:
        pinned = gpu_kernels.pinned_empty(store.num_edges * store.weight_dtype.itemsize
                                          ).view(store.weight_dtype)
        entry[2] = subgraph.store_out_edge_values(store, out=pinned)
    return entry[0], entry[1], entry[2] if with_values else None
