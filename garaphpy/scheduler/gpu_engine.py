"""The GPU engine: vertex state on the device and the page pipeline (Garaph sections 3, 5.2).

The device holds the vertex values (GlobalVertices' GPU copy), for
synchronous runs a second buffer committed at the end of each iteration by
swapping the two (section 3.1), the active bitmap, the per-vertex attributes
the program reads, and the shard table.  Pages reach it in one of two ways:

* **resident**: when every page and the vertex data fit the GPU memory budget,
  the pages are copied once at set-up into whole-graph edge arrays (sources,
  IdxOff, weights in the store's global edge order) and stay on the device
  between iterations; an iteration the GPU runs alone is then one launch over
  every shard (one launch and two events instead of a launch and four events
  per page), and a hybrid iteration launches the GPU's pages as shard ranges
  of the same arrays;
* **streamed**: otherwise ``n_streams`` device page buffers are cycled.  The
  page images sit in pinned host memory; an iteration's pages are taken
  round the streams, a page's copy and kernel on the same stream, so the
  copy of one page overlaps the kernels of others (section 5.2's
  transmission and computation sides), and a buffer is reused only after
  the kernel that read it (stream order).  Beyond the paper (issue 17): the
  pages the budget holds beside the buffers stay on the device (partial
  residency), packed first (:mod:`garaphpy.kernels.packed`: about half the
  bytes; the GPU pulls a packed page where it lies, finding each run's
  destinations from the page's kept IdxOff and column starts, so a stream
  needs no buffer for an unpacked page),
  so that twice as many stay; the pages that still stream cross the bus
  packed too, and without their edge values when the program does not
  read them; the pages kept on the device are spread among the copied ones
  (:func:`interleave`); and for programs declaring ``apply_keeps_best`` each
  page is, per iteration, skipped, pulled (copied first when it streams),
  or its active edges pushed from a compacted buffer or read from pinned
  host memory (:mod:`~garaphpy.scheduler.transfer`,
  :meth:`GpuEngine._iterate_selective`), with the device arrays these
  choices need made at the first sparse iteration where that pays (the
  selective passes' savings forgone reach what the released pages cost the
  dense iterations after, :meth:`GpuEngine._selective_verdict`): until then
  their room keeps more pages on the device, and sparse iterations pull
  every page (:meth:`GpuEngine._defer_selective_arrays`).

Streamed pages come through the run's page source
(:class:`~garaphpy.storage.page_source.PageSource`): the pages it keeps in
host memory (all of them when the host budget holds the graph) sit in
pinned host buffers read once; when the budget holds only some of them
(Garaph section 2.2) the others are read ahead from the storage
directories, in the order the GPU takes them, into pinned buffers of the
reader's pool, each given back once the copy that reads it has finished
(its CUDA event).  Resident pages
are read once at set-up, whatever the host budget.

When asked (hybrid runs, where the host works on the same values), the
updated vertex range of each page is copied back to pinned host memory on
the page's stream right after its kernel, overlapping the next pages.

Every iteration records the pages processed, the bytes moved each way, and
the copy and kernel time measured with CUDA events (summed per page, and the
busy time of each stream), so that the overlap can be seen.

Beyond the paper (issue 18): a run on the GPU alone with resident pages runs
its iterations with small frontiers as sparse passes in a loop kept on the
device (:mod:`~garaphpy.scheduler.device_loop`, :meth:`GpuEngine.iterate_batch`),
and a program declaring ``shortcut_labels`` (CC) ends each pull over every
shard with pointer jumping over its labels (:meth:`GpuEngine.enable_shortcut_labels`),
both from the eighth iteration on.  An asynchronous streamed run of a min or
max program can pull its kept pages again until they settle before the
streamed pages move again (Subway's asynchronous model:
:meth:`GpuEngine._settle_kept_pages`, off by default).
"""

from __future__ import annotations

import collections
import contextlib
import time
import weakref
from dataclasses import dataclass, field

import numpy as np

from .. import config
from ..errors import ConfigError, GaraphError
from .._numba_setup import parallel_section
from ..kernels import cpu as cpu_kernels
from ..kernels import gpu as gpu_kernels
from ..kernels.packed import KEY_SHIFT
from ..monoids import monoid_identity
from ..program import VertexProgram
from . import decisions, device_loop, transfer
from .records import IterationRecord, batch_records


#: Edges the resident arrays carry past the last one: the longest run of
#: consecutive edges one pull-kernel thread loads as vectors.
RESIDENT_PADDING_EDGES = max(gpu_kernels.EDGES_PER_THREAD_CHOICES)

#: A selective iteration counts the frontier's edges per page only while it holds
#: at most 1 / SELECTIVE_FRONTIER_SHARE of the vertices (the device keeps room for
#: that many; a larger frontier reaches nearly every page, and every page is copied).
SELECTIVE_FRONTIER_SHARE = 8

#: The packed pull's stride of kept IdxOff keys (:data:`garaphpy.kernels.packed.KEY_SHIFT`),
#: as the kernel takes it.
PACKED_KEY_SHIFT = np.int32(KEY_SHIFT)

#: Bytes a page's device buffer holds past its last array (the pull's vector loads of
#: a run may read a little past the IdxOff array when the values are not copied).
PAGE_SLACK_BYTES = 256

#: The least counting work (edges, see :meth:`GpuEngine._iterate_selective`) the
#: count rate learns from: a smaller count's time is mostly its fixed costs.
COUNT_LEARNING_WORK = 1 << 20

#: About the out-edges of the sample frontier whose count and gather measure the
#: host's rates at set-up (:meth:`GpuEngine._calibrate_transfer_rates`).
CALIBRATION_EDGES = 1 << 22
#: ... and about the bytes of the pinned copies that measure the link (a small
#: page is copied several times over).
CALIBRATION_BYTES = 32 << 20


class GpuMemoryError(GaraphError, MemoryError):
    """The GPU memory budget cannot hold the vertex data and one page."""



@dataclass
class PagePlan:
    """How the pages meet the GPU in this run.

    Attributes
    ----------
    resident : bool
        All pages stay on the device between iterations.
    n_streams : int
        Streams (and, when streaming, device page buffers).
    budget : int
        GPU memory the run may use, in bytes.
    vertex_bytes : int
        Device memory taken by vertex data, shard table and attributes (and
        the resident edge arrays' padding).
    page_bytes : int
        Device memory taken by page images (all pages, or the buffers and
        the pages kept resident).
    resident_pages : numpy.ndarray of bool
        Per page, whether it stays on the device (all of them when
        ``resident``; when streaming, those the budget holds beside the
        buffers: :func:`~garaphpy.scheduler.transfer.resident_pages`).
    selective_bytes : int
        Device memory of the selective transfers' arrays (0: the run copies
        every streamed page whole).
    packed_pages : numpy.ndarray of bool
        Per page, whether it stays on the device packed
        (:mod:`garaphpy.kernels.packed`; unpacked into a stream's buffer
        before its pull).  None when pages are not packed.
    """

    resident: bool
    n_streams: int
    budget: int
    vertex_bytes: int
    page_bytes: int
    resident_pages: np.ndarray = None
    selective_bytes: int = 0
    packed_pages: np.ndarray = None

    @property
    def streamed_pages(self) -> int:
        """Pages that cross the bus every iteration (at most)."""
        kept = self.resident_pages if self.packed_pages is None else \
            self.resident_pages | self.packed_pages
        return int((~kept).sum())


def plan_pages(page_sizes: list[int], vertex_bytes: int, budget: int,
               n_streams: int, *, page_edges: list[int] | None = None,
               selective_bytes: int = 0, order: str = "edges",
               packed_sizes: list[int] | None = None, raw_buffers: bool = True) -> PagePlan:
    """Resident pages when they all fit beside the vertex data, else streaming,
    with as many pages kept resident as the budget holds beside the stream
    buffers (and the selective transfers' arrays, ``selective_bytes``, when
    they fit too: else the plan has none).

    Streaming needs one device buffer per stream; with less memory, fewer
    streams are used (down to one, which loses the copy/kernel overlap).
    With ``packed_sizes`` (each page's packed bytes), each stream also has a
    buffer for a packed page, and pages are kept packed before any is kept as
    it is (:func:`~garaphpy.scheduler.transfer.resident_tiers`).  Without
    ``raw_buffers`` (every page that may stream is packed and pulled where it
    lies), a stream has only the packed page's buffer.

    Raises
    ------
    GpuMemoryError
        When the budget holds not even the vertex data and one page.
    """
    from .transfer import resident_tiers

    if n_streams < 1:
        raise ConfigError(f"n_streams={n_streams}: expected at least 1")
    total = int(sum(page_sizes))
    largest = int(max(page_sizes, default=0))
    count = len(page_sizes)
    if vertex_bytes + total <= budget:
        return PagePlan(True, n_streams, budget, vertex_bytes, total, np.ones(count, bool))
    # packed pages: a packed page's buffer per stream beside the page's
    if packed_sizes is None:
        per_stream = largest
    else:
        per_stream = (largest if raw_buffers else 0) + int(max(packed_sizes, default=0))
    streams = n_streams
    while streams > 1 and vertex_bytes + streams * per_stream > budget:
        streams -= 1
    if vertex_bytes + streams * per_stream > budget:
        raise GpuMemoryError(
            f"the GPU memory budget of {budget:,} bytes cannot hold the vertex data "
            f"({vertex_bytes:,} bytes) and one page ({per_stream:,} bytes); raise the budget "
            "(gpu_memory) or rebuild the store with a smaller max_page_bytes")
    buffers = streams * per_stream
    if vertex_bytes + buffers + selective_bytes > budget:
        selective_bytes = 0
    room = budget - vertex_bytes - buffers - selective_bytes
    edges = page_edges if page_edges is not None else page_sizes
    # unpacked, every page's packed size is its size: the tiers keep none packed
    sizes_packed = packed_sizes if packed_sizes is not None else page_sizes
    kept, packed = resident_tiers(page_sizes, sizes_packed, edges, room, order)
    kept_bytes = int(np.asarray(page_sizes, np.int64)[kept].sum()
                     + np.asarray(sizes_packed, np.int64)[packed].sum())
    return PagePlan(False, streams, budget, vertex_bytes, buffers + kept_bytes, kept,
                    selective_bytes, packed if packed_sizes is not None else None)


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


@dataclass
class IterationTiming:
    """Measured copy and kernel times of one iteration, in seconds."""

    copy_seconds: float = 0.0
    kernel_seconds: float = 0.0
    copy_back_seconds: float = 0.0
    busy_seconds: float = 0.0
    per_page_kernel: list = field(default_factory=list)
    stream_busy: list = field(default_factory=list)


class GpuEngine:
    """Runs iterations of one program on the GPU, page by page.

    Parameters
    ----------
    graph : garaphpy.Graph
    program : VertexProgram
        An instance (its constants are baked into the kernels).
    source_vertices : numpy.ndarray of int64
        Internal ids of the run's sources.
    synchronous : bool
    gpu_memory : int, optional
        Budget in bytes (default: ``config.GPU_MEMORY_FRACTION`` of the
        free memory).
    n_streams : int, optional
        Default: ``config.N_STREAMS``.
    host_copies : bool
        Copy each page's updated vertex range (values and activity) back to
        pinned host memory as the page completes (hybrid runs).
    precompute : bool
        Let synchronous runs whose gather reads only the source compute the
        contributions once per vertex (same results; set False to study).
    warp_combine : bool, optional
        Combine each warp's runs of same-destination edges before the replica
        atomics (default ``config.GPU_WARP_COMBINE``, read when the engine is
        made).
    page_source : garaphpy.storage.page_source.PageSource, optional
        Where streamed pages come from: its cached pages, held in pinned
        host memory, or pages read ahead into pinned buffers from the
        storage directories every iteration (default: every page in
        memory, :class:`~garaphpy.storage.page_source.InMemoryPages`).
    """

    mode = "gpu"

    def __init__(self, graph, program: VertexProgram, source_vertices: np.ndarray,
                 synchronous: bool, *, gpu_memory: int | None = None,
                 n_streams: int | None = None, host_copies: bool = False,
                 precompute: bool = True, warp_combine: bool | None = None, page_source=None,
                 edges_per_thread: int | None = None, fuse_resident: bool | None = None):
        from ..kernels.cuda_program import translate_program
        from ..storage.page_source import InMemoryPages
        from .cpu_engine import vertex_attributes, weighted_in_degree

        cupy = gpu_kernels.cupy_module()
        self.cupy = cupy
        store = graph.store
        self.store = store
        self.num_vertices = n = store.num_vertices
        self.num_edges = store.num_edges
        self.synchronous = synchronous
        self.host_copies = host_copies
        self.device = gpu_kernels.DeviceInfo.current()
        self.program = translate_program(
            program, weight_dtype=store.weight_dtype if store.weighted else np.float64,
            degree_dtype=store.out_degree.dtype)
        self.kernels = gpu_kernels.compile_kernels(self.program, store.vertex_dtype,
                                                   edges_per_thread)
        uses = self.program.uses
        self.gather_parameters = frozenset(type(program).functions["gather"].parameters)
        #: whether the kernels read edge values: a page crosses the bus without them if not
        self.reads_weights = bool(store.weighted and "weight" in self.gather_parameters)
        self.precompute_enabled = bool(precompute)
        self.precompute_decision = decisions.fixed(
            decisions.precompute_source_gathers, direction="pull", synchronous=synchronous,
            gather_parameters=self.gather_parameters, enabled=self.precompute_enabled)
        self.precompute = self.precompute_decision["choice"]
        value_dtype, accum_dtype = self.program.value_dtype, self.program.accum_dtype

        # -- shared memory per block, from the device's properties ----------------
        shards = store.shards
        accumulator_bytes = gpu_kernels.accumulator_bytes(shards, accum_dtype)
        shared_limit = self.device.shared_memory_per_block_optin
        oversize = accumulator_bytes > shared_limit
        scratch_offsets = np.full(shards.shape[0], -1, np.int64)
        slots = accumulator_bytes // np.dtype(accum_dtype).itemsize  # whole 4-byte words
        scratch_offsets[oversize] = np.cumsum(slots[oversize]) - slots[oversize]
        self.oversize_shards = int(oversize.sum())
        fitting = np.where(oversize, 0, accumulator_bytes)
        self.shared_bytes = int(fitting.max(initial=0))
        if warp_combine is None:
            warp_combine = config.GPU_WARP_COMBINE
        self.warp_combine = bool(warp_combine)
        self.pull_kernel = self.kernels.pull[(self.precompute, self.warp_combine)]
        #: packed pages pulled where they lie (else unpacked first)
        self.pull_packed = bool(config.GPU_PULL_PACKED)
        if self.shared_bytes > self.device.shared_memory_per_block:
            # kernels are shared by every engine of the process: only ever raise the limit
            for kernel in (*self.kernels.pull.values(), *self.kernels.pull_packed.values()):
                kernel.max_dynamic_shared_size_bytes = max(
                    kernel.max_dynamic_shared_size_bytes, self.shared_bytes)

        # -- host-side tables -----------------------------------------------------
        pages = store.pages
        self.pages = pages
        page_of_shard = shards["page"].astype(np.int64)
        page_edge_begin = np.array([p.edge_begin for p in pages], np.int64)
        split = shards["split"] == 1
        split_vertices, split_slot = np.unique(shards["first_vertex"][split],
                                               return_inverse=True)
        slot_of_shard = np.full(shards.shape[0], -1, np.int32)
        slot_of_shard[np.flatnonzero(split)] = split_slot
        #: per split slot, the vertex; per page, the split slots of its shards (made on
        #: first use by :meth:`split_partials`)
        self.split_vertex_ids = split_vertices.astype(np.int64)
        self._split_slot_of_split_shard = split_slot
        self._page_of_split_shard = shards["page"][split].astype(np.int64)
        self._page_split_slots = None
        self.page_shared_bytes = [
            max(int(fitting[p.first_shard:p.first_shard + p.num_shards].max(initial=0)),
                gpu_kernels.TOTALS_SHARED_BYTES) for p in pages]

        # -- device arrays ----------------------------------------------------------
        device_array = cupy.asarray
        self.shard_first_vertex = device_array(shards["first_vertex"].astype(np.int64))
        self.shard_num_vertices = device_array(shards["num_vertices"].astype(np.int32))
        self.shard_replication = device_array(shards["replication"].astype(np.int32))
        # edge ranges within the page image (streamed) or the whole-graph arrays (resident):
        # both are counted in the vertex data, the unused one is dropped after the plan
        offsets = page_edge_begin[page_of_shard] if shards.size else np.zeros(0, np.int64)
        edge_ranges = {"page": (device_array(shards["edge_begin"].astype(np.int64) - offsets),
                                device_array(shards["edge_end"].astype(np.int64) - offsets)),
                       "global": (device_array(shards["edge_begin"].astype(np.int64)),
                                  device_array(shards["edge_end"].astype(np.int64)))}
        self.shard_split_slot = device_array(slot_of_shard)
        self.shard_scratch = device_array(scratch_offsets)
        self.scratch = cupy.empty(int(slots[oversize].sum()) + 4, dtype=accum_dtype)
        self.split_vertices = device_array(split_vertices.astype(np.int64))
        self.num_split = int(split_vertices.size)
        identity = monoid_identity(type(program).sum, accum_dtype)
        # accumulators narrower than 4 bytes are combined through the aligned 32-bit word
        # that holds them: pad so that the word never leaves the allocation
        self.split_accum = cupy.full(self.num_split + 4, identity, dtype=accum_dtype)
        self._split_identity = identity

        need_weighted = "weighted_in_degree" in uses
        if page_source is None:
            page_source = InMemoryPages(store)
        self.page_source = page_source
        self.rho = config.RHO_IN_MEMORY     # the GPU always pulls; rho prices the CPU's choice
        page_source.use_allocator("gpu", gpu_kernels.pinned_empty)
        out_degree, in_degree, weighted_in, vertex_ids, is_source = vertex_attributes(
            graph, source_vertices,
            weighted_in_degree(page_source, "gpu") if need_weighted else None)

        def attribute(array, used):
            return device_array(np.ascontiguousarray(array)) if used else \
                cupy.zeros(1, dtype=array.dtype)

        self.attrs = (
            device_array(out_degree),  # activated_out_edges reads it in every run
            attribute(in_degree, bool({"in_degree", "src_in_degree", "dst_in_degree"} & uses)),
            attribute(weighted_in, need_weighted),
            attribute(vertex_ids, "vertex" in uses),
            attribute(is_source, "is_source" in uses),
        )
        self.values = cupy.empty(n, dtype=value_dtype)
        self.next = cupy.empty(n, dtype=value_dtype) if synchronous else self.values
        self.active = cupy.zeros(max(n, 1), dtype=np.uint8)
        self._frontier_staging = None       # set_frontier's pinned activity, made once
        self.contributions = cupy.empty(n if self.precompute else 1, dtype=accum_dtype)
        self.aggregate_totals = cupy.zeros(max(len(self.program.aggregate_monoids), 1),
                                           np.float64)
        # activated, activated out-edges, the L1 change's bits and the labels the
        # shortcut dropped: one read-back
        self.statistics = cupy.zeros(4, np.uint64)
        self.counters = self.statistics[0:2]
        self.l1_total = self.statistics[2:3].view(np.float64)
        self.empty_weights = cupy.zeros(1, dtype=store.weight_dtype or np.float64)
        # what these arrays hold in the memory pool (not the pool's use before and after:
        # a collection of an earlier run's arrays in between would be counted off)
        vertex_bytes = pooled_bytes(
            self.shard_first_vertex, self.shard_num_vertices, self.shard_replication,
            *edge_ranges["page"], *edge_ranges["global"], self.shard_split_slot,
            self.shard_scratch, self.scratch, self.split_vertices, self.split_accum,
            *self.attrs, self.values, self.active, self.contributions, self.aggregate_totals,
            self.statistics, self.empty_weights,
            *([self.next] if self.next is not self.values else []))

        # -- pages: resident or streamed --------------------------------------------
        free = cupy.cuda.runtime.memGetInfo()[0]
        budget = int(gpu_memory) if gpu_memory is not None else \
            int(config.GPU_MEMORY_FRACTION * (free + vertex_bytes))
        n_streams = config.N_STREAMS if n_streams is None else int(n_streams)
        # the resident arrays' padding: one run of the pull kernel past the last edge
        run_padding = RESIDENT_PADDING_EDGES * (
            store.vertex_dtype.itemsize + 2 + (store.weight_dtype.itemsize if store.weighted
                                               else 0))
        # selective transfers of streamed pages (issue 17): their arrays' device bytes
        self.transfer_forced = config.GPU_TRANSFER
        self.selective_entry = decisions.fixed(
            decisions.selective_transfers, declared=bool(type(program).apply_keeps_best),
            host_copies=host_copies, forced=self.transfer_forced)
        # a page on the wire: its sources and IdxOff, and its values where they are read
        self.page_wire_bytes = [p.nbytes if self.reads_weights else p.weights_offset
                                for p in pages]
        largest = max(self.page_wire_bytes, default=0)
        selective_bytes = 0
        if self.selective_entry["choice"]:
            # accumulators, the frontier, the compacted buffer, two sets of vertex ranges
            selective_bytes = ((n + 4) * np.dtype(accum_dtype).itemsize
                               + 8 * (n // SELECTIVE_FRONTIER_SHARE + 1)
                               + max(largest, 1 << 16) + 32 * (len(pages) + 1))
        #: device bytes the selective transfers' arrays take when pages stream
        self.selective_bytes = selective_bytes
        plan_arguments = dict(page_edges=[p.num_edges for p in pages],
                              selective_bytes=selective_bytes, order=config.GPU_RESIDENT_ORDER)
        wire_sizes = [size + PAGE_SLACK_BYTES for size in self.page_wire_bytes]
        self.plan = plan_pages(wire_sizes, vertex_bytes + run_padding, budget, n_streams,
                               **plan_arguments)
        #: per page, its packed layout when it is packed (:mod:`garaphpy.kernels.packed`)
        self.packed_layouts = {}
        self.packed_entry = None
        self.raw_buffers = True
        if not self.plan.resident:
            self.packed_layouts = self._packed_layouts()
            packed_sizes = [self.packed_layouts[k].nbytes + PAGE_SLACK_BYTES
                            if k in self.packed_layouts else wire_sizes[k]
                            for k in range(len(pages))]
            self.packed_entry = decisions.fixed(
                decisions.packed_pages, enabled=bool(config.GPU_PACKED_PAGES),
                wire_bytes=int(sum(wire_sizes)), packed_bytes=int(sum(packed_sizes)))
            if self.packed_entry["choice"]:
                # a stream's buffer for an unpacked page: only to unpack into, or for a
                # page that streams as stored (one the host does not hold)
                self.raw_buffers = not (self.pull_packed
                                        and len(self.packed_layouts) == len(pages))
                self.plan = plan_pages(wire_sizes, vertex_bytes + run_padding, budget,
                                       n_streams, packed_sizes=packed_sizes,
                                       raw_buffers=self.raw_buffers, **plan_arguments)
            else:
                self.packed_layouts = {}
        self.selective = bool(not self.plan.resident and self.plan.selective_bytes)
        #: the kept pages released when the selective arrays are made (deferred), else None
        self.release_pages = None
        self.deferral_entry = None
        if self.selective and self.plan.packed_pages is not None:
            self._defer_selective_arrays(packed_sizes, plan_arguments["page_edges"])
        self.pushes_entry = self.resident_selective_entry = None
        #: the transfer rates measured at set-up (:meth:`_calibrate_transfer_rates`)
        self.calibration = None
        #: per page, whether it stays on the device (as it is or packed)
        self.kept_pages = self.plan.resident_pages.copy()
        if self.plan.packed_pages is not None:
            self.kept_pages |= self.plan.packed_pages
        #: per page, whether it stays on the device packed
        self.packed_kept = (self.plan.packed_pages.copy() if self.plan.packed_pages is not None
                            else np.zeros(len(pages), bool))
        self.page_edge_counts = np.array([p.num_edges for p in pages], np.float64)
        #: per page, the bytes one copy of it moves to the device
        self.page_bus_bytes = np.array(
            [self.packed_layouts[k].nbytes if k in self.packed_layouts else wire
             for k, wire in enumerate(self.page_wire_bytes)], np.int64)
        self.shard_edge_begin, self.shard_edge_end = \
            edge_ranges["global" if self.plan.resident else "page"]
        del edge_ranges
        if fuse_resident is None:
            fuse_resident = config.GPU_FUSE_RESIDENT_PAGES
        self.fuse_resident = bool(fuse_resident)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(self.plan.n_streams)]
        # the pulls of pages kept on the device that read no stream buffer (raw, or packed
        # and pulled where they lie) in turn on streams of their own, when
        # config.GPU_KEPT_PAGES_STREAMS asks for some (0: on the copied pages' streams)
        kept_streams = config.GPU_KEPT_PAGES_STREAMS \
            if not self.plan.resident and self.kept_pages.any() else 0
        self.kept_streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(kept_streams)]
        self._kept_turn = 0
        #: every stream a page's kernels run on (joined at the end of an iteration)
        self.page_streams = self.streams + self.kept_streams
        self.main_stream = cupy.cuda.Stream(non_blocking=True)
        #: the copies of streamed pages, one after another into the streams' buffers
        #: (their kernels wait on them in the streams): the bus never waits on a kernel
        self.copy_stream = cupy.cuda.Stream(non_blocking=True)
        self.device_pages, self.device_packed = [], []
        self.resident_images = {}       # page -> its image on the device (partial residency)
        self.packed_images, self.packed_host = {}, {}
        if self.plan.resident:
            self.resident_edges = self._resident_edge_arrays()
        else:
            self.resident_images = self._resident_page_images()
            self._pack_pages()
            if any(k not in self.resident_images and k not in self.packed_layouts
                   for k in range(len(pages))):
                # the pages it holds in memory, now, into pinned buffers
                page_source.load("gpu")
            # a stream's buffer: a page copied, or a page kept packed unpacked
            if self.raw_buffers:
                unpacked = max((self.page_wire_bytes[k] for k in range(len(pages))
                                if k not in self.resident_images), default=0)
                self.device_pages = [cupy.empty(unpacked + PAGE_SLACK_BYTES, np.uint8)
                                     for _ in self.streams]
        # the GPU's walk over the pages of an iteration (opened by begin_iteration), and the
        # pages read from storage for it, each until its copy to the device is done
        self._cursor = page_source.cursor((), "gpu", release="manual")
        self._copying = collections.deque()
        #: called with (iteration, pages launched) after each page of an asynchronous
        #: iteration (checkpoints after pages, set by the checkpointer)
        self.page_done = None
        self._fused_decisions = {}      # checkpoints after pages or not -> the entry
        self._loop = None               # the device loop of sparse iterations, made on first use
        self.shortcut = None            # (user ids on the device, consecutive) when enabled
        self._loop_entry = None
        self._called_off = False        # the loop's last batch ended on an iteration called off
        self._neighbour_in_degree = None    # decisions.neighbour_in_degree, on first use
        self.page_views = {}            # (page, stream slot) -> the kernel's typed views
        self.push_stream = cupy.cuda.Stream(non_blocking=True)
        self.transfer_rates = transfer.TransferRates()
        if host_copies:
            self.host_values = self.pinned_array(n, value_dtype)
            self.host_active = self.pinned_array(n, np.uint8)

        # the device loop's arrays, made with the engine (a set-up cost, not the first
        # sparse iteration's) when the run may use them
        self.push_entry = decisions.fixed(
            decisions.gpu_push, declared=bool(type(program).apply_keeps_best),
            enabled=bool(config.GPU_SPARSE_PUSH))
        self._larger_first = type(program).sum == "max"
        self.priority_entry = decisions.fixed(
            decisions.gpu_value_priority, declared=bool(type(program).value_priority),
            synchronous=self.synchronous, push=self.push_entry["choice"],
            larger_first=self._larger_first,
            width_configured=config.GPU_BUCKET_WIDTH is not None,
            enabled=bool(config.GPU_VALUE_PRIORITY))
        loop_entry = self._device_loop_entry(checkpoints_after_pages=False)
        if loop_entry["choice"]:
            self._loop = self._make_loop()
            self._sparse_inputs(0, "auto")      # the rule's graph statistic, once per store
        self._loop_entry = None     # decided again at the first batch, with the checkpoints
        if self.plan.resident and self.selective_entry["choice"]:
            # every page fits, the device loop's arrays do not: sparse iterations choose
            # per page all the same (skip, pull, or push from pinned host memory)
            self.resident_selective_entry = decisions.fixed(
                decisions.resident_selective, loop_bytes=loop_entry["extra_bytes"],
                selective_bytes=selective_bytes, free_bytes=loop_entry["free_bytes"])
            self.selective = self.resident_selective_entry["choice"]
        if self.selective:
            # the out-edge CSR copied into pinned host memory, if the host has room for it
            self.pushes_entry = decisions.fixed(
                decisions.selective_pushes, pinned_fits=self._pinned_out_edges_fit(),
                pushes_values=self.reads_weights)
            self._selective_setup(largest)
        self.prefetch_entry = decisions.fixed(
            decisions.prefetch_next_copies, enabled=bool(config.GPU_PREFETCH_NEXT_COPIES),
            resident=self.plan.resident, selective=self.selective)
        kept_count = int(self.kept_pages.sum())
        self.settle_entry = decisions.fixed(
            decisions.settle_kept_pages, enabled=bool(config.GPU_SETTLE_KEPT_PAGES),
            synchronous=self.synchronous, keeps_best=bool(type(program).apply_keeps_best),
            resident=self.plan.resident, kept_pages=kept_count,
            streamed_pages=len(self.pages) - kept_count, host_copies=bool(self.host_copies),
            aggregates=bool(self.program.aggregate_monoids))
        #: stream slot -> the copy an iteration queued for the next one's page in that
        #: slot's buffer (its PageTiming); launching any page that reads the buffer
        #: takes the entry out
        self._prefetched = {}
        #: (order, slots) of the iteration whose next copies :meth:`iterate` queues
        self._next_copies = None

        # -- initial values -----------------------------------------------------------
        # the arrays above were filled on the legacy stream, which ours do not wait for
        cupy.cuda.Device().synchronize()
        self._launch_vertices(self.kernels.init_values, (self.values,) + self.attrs
                              + (np.int64(n),))
        self.active_vertices = 0
        self.active_out_edges_count = 0
        #: the deferred selective arrays' rent-or-buy (:meth:`_selective_verdict`): the
        #: savings forgone so far, the largest frontier so far, and the last dense
        #: iteration's time (None: none yet)
        self._selective_rent = 0.0
        self._peak_active = 0
        self._dense_seconds = None
        self.timings: list[IterationTiming] = []
        # CUDA events, made once and recorded again every iteration
        event = cupy.cuda.Event
        self._events = {"origin": event(), "ready": event(),
                        "streams": [event() for _ in self.page_streams],
                        # per stream: its packed buffer unpacked, its page buffer pulled
                        "packed_free": [event() for _ in self.streams],
                        "raw_free": [event() for _ in self.streams],
                        "pages": [[event() for _ in range(5)] for _ in pages]}
        cupy.cuda.Device().synchronize()

    # -- helpers -------------------------------------------------------------------------
    def pinned_array(self, count: int, dtype) -> np.ndarray:
        """An array of ``count`` elements of ``dtype`` in pinned host memory (the
        copies to and from the device are asynchronous)."""
        dtype = np.dtype(dtype)
        return gpu_kernels.pinned_empty(count * dtype.itemsize).view(dtype)

    def _resident_edge_arrays(self) -> tuple:
        """Every page's sources, IdxOff and weights copied into whole-graph device
        arrays at the pages' global edge offsets, padded by
        ``RESIDENT_PADDING_EDGES`` (a run of the pull kernel's vector loads may
        read past the last edge).

        They take no more than the page images (whose arrays are padded to 64
        bytes each) plus that padding, which the plan counts.
        """
        cupy, store = self.cupy, self.store
        vertex_dtype = store.vertex_dtype
        weight_dtype = store.weight_dtype if store.weighted else None
        padded = self.num_edges + RESIDENT_PADDING_EDGES
        sources = cupy.zeros(padded, vertex_dtype)
        idxoff = cupy.zeros(padded, np.uint16)
        weights = cupy.zeros(padded, weight_dtype) if weight_dtype is not None else \
            self.empty_weights
        largest = max((p.nbytes for p in self.pages), default=0)
        staging = self.pinned_array(largest, np.uint8) if largest else None
        for info in self.pages:
            image = store.read_page(info.index, out=staging).image
            begin, n = info.edge_begin, info.num_edges
            sources[begin:begin + n].set(image[:n * vertex_dtype.itemsize].view(vertex_dtype))
            idxoff[begin:begin + n].set(
                image[info.idxoff_offset:info.idxoff_offset + 2 * n].view(np.uint16))
            if weight_dtype is not None:
                size = weight_dtype.itemsize
                weights[begin:begin + n].set(image[info.weights_offset:
                                                   info.weights_offset + size * n]
                                             .view(weight_dtype))
            cupy.cuda.get_current_stream().synchronize()  # before staging is reused
        return sources, idxoff, weights

    def _defer_selective_arrays(self, packed_sizes, page_edges) -> None:
        """Keep the pages the selective arrays' room holds, packed, until a
        sparse iteration makes the arrays (:meth:`_selective_verdict`;
        :func:`decisions.defer_selective_arrays`,
        :func:`transfer.pages_kept_until_sparse`); the plan then is the plan
        made with the arrays' room."""
        plan = self.plan
        kept = plan.resident_pages | plan.packed_pages
        room = plan.budget - plan.vertex_bytes - plan.page_bytes
        extra = transfer.pages_kept_until_sparse(kept, packed_sizes, page_edges, room,
                                                 config.GPU_RESIDENT_ORDER)
        extra_bytes = int(np.asarray(packed_sizes, np.int64)[extra].sum())
        self.deferral_entry = decisions.fixed(
            decisions.defer_selective_arrays, forced=self.transfer_forced,
            packed_streams=bool(self.packed_entry["choice"] and not self.raw_buffers),
            displaced_bytes=extra_bytes, enabled=bool(config.GPU_DEFER_SELECTIVE_ARRAYS))
        if not self.deferral_entry["choice"]:
            return
        self.deferral_entry["kept_until_sparse"] = int(extra.sum())
        self.release_pages = extra
        plan.packed_pages = plan.packed_pages | extra
        plan.page_bytes += extra_bytes
        plan.selective_bytes = 0        # until the arrays are made

    def _resident_page_images(self) -> dict:
        """The plan's resident pages copied to the device, each as its image
        (a streaming run keeps them between iterations: partial residency)."""
        cupy, store = self.cupy, self.store
        kept = np.flatnonzero(self.plan.resident_pages).tolist()
        if not kept:
            return {}
        staging = self.pinned_array(max(self.pages[k].nbytes for k in kept), np.uint8)
        images = {}
        for k in kept:
            info = self.pages[k]
            wire = self.page_wire_bytes[k]
            image = store.read_page(info.index, out=staging).image
            images[k] = cupy.empty(wire + PAGE_SLACK_BYTES, np.uint8)
            images[k][:wire].set(image[:wire])
            cupy.cuda.get_current_stream().synchronize()    # before staging is reused
        return images

    def _packed_layouts(self) -> dict:
        """Per page the plan may pack (one the page source holds in host memory:
        packing it once costs a read), its packed layout."""
        from ..kernels import packed

        store = self.store
        width = packed.source_width(self.num_vertices, store.vertex_dtype)
        codes = page_weight_codes(store) if self.reads_weights else None
        weight_size = store.weight_dtype.itemsize if self.reads_weights else 0
        vertices = store.shards["num_vertices"].astype(np.int64)
        layouts = {}
        for info in self.pages:
            if not self.page_source.is_cached(info.index):
                continue
            columns = int(vertices[info.first_shard:info.first_shard + info.num_shards].sum())
            layouts[info.index] = packed.packed_layout(
                info.num_edges, columns, width,
                packed.WEIGHT_NONE if codes is None else int(codes[info.index]), weight_size)
        return layouts

    def _pack_pages(self) -> None:
        """The packed pages: those the plan keeps packed, on the device; those
        that stream, in pinned host memory (one block); and a packed page's
        buffer per stream."""
        from ..kernels import packed

        cupy, store = self.cupy, self.store
        self.packed_images = {}         # page -> its packed image on the device
        self.packed_host = {}           # page -> its packed image in pinned host memory
        self.release_host = {}          # the same, of a kept page until it is released
        self.device_packed = []
        if not self.packed_layouts:
            return
        vertices = store.shards["num_vertices"].astype(np.int64)
        self.shard_column_begin = cupy.asarray(np.cumsum(vertices) - vertices)
        kept = self.plan.packed_pages
        released = (self.release_pages if self.release_pages is not None
                    else np.zeros(len(self.pages), bool))
        streamed = [k for k in self.packed_layouts
                    if (not kept[k] and k not in self.resident_images) or released[k]]
        offsets, at = {}, 0
        for k in streamed:
            offsets[k] = at
            at += -(-self.packed_layouts[k].nbytes // 4096) * 4096
        host_block = gpu_kernels.pinned_empty(at) if streamed else None
        largest_kept = max((self.packed_layouts[k].nbytes for k in self.packed_layouts
                            if kept[k]), default=0)
        staging = self.pinned_array(largest_kept, np.uint8) if largest_kept else None
        read_buffer = np.empty(max(self.pages[k].nbytes for k in self.packed_layouts), np.uint8)
        for k, layout in self.packed_layouts.items():
            if k in self.resident_images and not released[k]:
                continue
            page = store.read_page(k, out=read_buffer)
            out = host_block[offsets[k]:] if k in offsets else staging
            packed.pack_page(page.sources, page.idxoff,
                             page.weights if self.reads_weights else None,
                             store.page_shards(k), self.num_vertices,
                             code=layout.weight_code, out=out)
            if k in offsets:
                host = host_block[offsets[k]:offsets[k] + layout.nbytes]
                (self.release_host if released[k] else self.packed_host)[k] = host
            if kept[k]:
                image = self.packed_images[k] = cupy.empty(layout.nbytes + PAGE_SLACK_BYTES,
                                                           np.uint8)
                image[:layout.nbytes].set(out[:layout.nbytes])
                cupy.cuda.get_current_stream().synchronize()    # before staging is reused
        if streamed:
            largest = max(self.packed_layouts[k].nbytes for k in streamed)
            self.device_packed = [cupy.empty(largest + PAGE_SLACK_BYTES, np.uint8)
                                  for _ in self.streams]

    def _unpack(self, k: int, packed_image, slot: int, stream) -> None:
        """Page ``k``'s packed image (on the device) unpacked into the buffer of
        stream ``slot``, where its pull reads it."""
        info, layout = self.pages[k], self.packed_layouts[k]
        if not info.num_shards:
            return
        sources, idxoff, weights = self._views(k, slot)
        with stream:
            self.kernels.unpack_page((info.num_shards,), (256,), (
                packed_image, np.int32(layout.source_bytes), np.int64(layout.columns_offset),
                np.int64(layout.weights_offset), np.int32(layout.weight_code),
                self.shard_edge_begin, self.shard_edge_end, self.shard_num_vertices,
                self.shard_column_begin, np.int32(info.first_shard), sources, idxoff, weights))

    def _launch_packed_pull(self, k: int, packed_image, stream, aggregates,
                            iteration: int) -> None:
        """The pull of page ``k`` read from its packed image (on the device)."""
        info, layout = self.pages[k], self.packed_layouts[k]
        if not info.num_shards:
            return
        with stream:
            self.kernels.pull_packed[self.precompute](
                (info.num_shards,), (config.GPU_THREADS_PER_BLOCK,), (
                    packed_image, np.int32(layout.source_bytes),
                    np.int64(layout.columns_offset), np.int64(layout.weights_offset),
                    np.int32(layout.weight_code), np.int64(layout.keys_offset),
                    PACKED_KEY_SHIFT, self.shard_first_vertex, self.shard_num_vertices,
                    self.shard_replication, self.shard_edge_begin, self.shard_edge_end,
                    self.shard_split_slot, self.shard_scratch, self.scratch,
                    self.shard_column_begin, np.int32(info.first_shard),
                    self.values, self.next, self.contributions, self.active,
                    self.split_accum) + self.attrs + (
                    aggregates, np.int64(self.num_vertices), np.int64(iteration),
                    self.l1_total, self.counters),
                shared_mem=self.page_shared_bytes[k])

    def _host_room(self) -> int:
        """Host bytes the run may still pin beyond its page plan."""
        available = config.available_host_memory()
        plan = self.page_source.plan
        if plan is None:
            return int(available * config.HOST_MEMORY_FRACTION)
        return max(0, min(available, plan.budget_bytes - plan.fixed_bytes
                          - plan.readahead_bytes - plan.cached_bytes))

    def _pinned_out_edges_fit(self) -> bool:
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

    def _views(self, index: int, slot: int | None = None) -> tuple:
        """Typed device views (sources, idxoff, weights) the kernel of page ``index``
        reads: the whole-graph arrays when resident (shards index them globally),
        its own image when the page alone is resident, else the page's image in
        the buffer of stream ``slot`` (default ``index % streams``)."""
        if self.plan.resident:
            return self.resident_edges
        if slot is None:
            slot = index % len(self.streams)
        key = (index, slot if index not in self.resident_images else -1)
        views = self.page_views.get(key)
        if views is not None:
            return views
        info = self.pages[index]
        buffer = self.resident_images.get(index)
        if buffer is None:
            buffer = self.device_pages[slot]
        n = info.num_edges
        vertex_dtype = self.store.vertex_dtype
        sources = buffer[:n * vertex_dtype.itemsize].view(vertex_dtype)
        idxoff = buffer[info.idxoff_offset:info.idxoff_offset + 2 * n].view(np.uint16)
        if self.reads_weights:
            size = self.store.weight_dtype.itemsize
            weights = buffer[info.weights_offset:info.weights_offset + size * n].view(
                self.store.weight_dtype)
        else:
            weights = self.empty_weights
        self.page_views[key] = views = (sources, idxoff, weights)
        return views

    def _launch_vertices(self, kernel, arguments, stream=None, shared_mem: int = 0) -> None:
        threads = 256
        blocks = max(1, min(self.device.multiprocessors * 8,
                            (self.num_vertices + threads - 1) // threads))
        with stream or self.main_stream:
            kernel((blocks,), (threads,), arguments, shared_mem=shared_mem)

    # -- the engine interface of the iteration driver --------------------------------------
    def set_frontier(self, vertices: np.ndarray) -> None:
        """Mark the vertices active, and no other: the first iteration's frontier,
        a checkpoint's, or after CPU iterations the host's (which a sparse pass
        and the device loop start from).  The flags and the out-degree sum are
        made by parallel kernels in a pinned buffer made at the first call (a
        switch's frontier may hold most vertices)."""
        if self._frontier_staging is None:
            self._frontier_staging = self.pinned_array(max(self.num_vertices, 1), np.uint8)
        flags = self._frontier_staging
        with parallel_section():
            cpu_kernels.flags_of(vertices, flags)
            out_edges = int(cpu_kernels.sum_over(vertices, self.store.out_degree))
        self.active_vertices = int(vertices.size)
        self.active_out_edges_count = out_edges
        self.active.set(flags, stream=self.main_stream)
        if self._loop is not None:
            self._loop.frontier_current = False
        self.main_stream.synchronize()

    def num_active(self) -> int:
        """Vertices active after the last iteration."""
        return self.active_vertices

    def active_out_edges(self) -> tuple[int, None]:
        """Sum of the active vertices' out-degrees (counted by the last iteration)."""
        return self.active_out_edges_count, None

    def sparse_edge_seconds(self) -> float:
        """What a sparse pass is expected to spend per out-edge of its frontier,
        from the transfer rates: with selective transfers, the host's count
        and gather of the edge and its compacted bytes over the bus; on
        resident pages, the pull of the edge."""
        rates = self.transfer_rates
        if not self.selective:
            return 1.0 / rates.pull
        compact = self._pushed_edge_bytes()["compact"]
        return 1.0 / rates.count + 1.0 / rates.gather + compact / rates.bus

    def _pushed_edge_bytes(self) -> dict:
        """:func:`transfer.edge_bytes` of this run's pushed edges (their weights
        only where the pushes read them)."""
        return transfer.edge_bytes(self.store.vertex_dtype.itemsize,
                                   self.store.weight_dtype.itemsize if self.push_weights else 0)

    def aggregates(self, iteration: int) -> object:
        """The program's aggregates over the committed values, on the device."""
        monoids = self.program.aggregate_monoids
        if not monoids:
            return self.aggregate_totals
        identities = np.array([monoid_identity(m, np.float64) for m in monoids], np.float64)
        if not identities.any():
            with self.main_stream:
                self.aggregate_totals.fill(0)
        else:
            self.aggregate_totals.set(identities, stream=self.main_stream)
        self._launch_vertices(self.kernels.aggregates,
                              (self.values,) + self.attrs + (np.int64(self.num_vertices),
                                                             np.int64(iteration),
                                                             self.aggregate_totals))
        return self.aggregate_totals

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The pull over every shard (the sparse iterations run in
        :meth:`iterate_batch`; when the run may loop them, the refusal is
        recorded)."""
        record.direction = "pull"
        if self._loop_entry is not None and self._loop_entry["choice"]:
            # refused by the rule, or called off by the loop (too many in-edges to pull)
            decisions.note(record, "gpu_sparse_pass", False, called_off=self._called_off,
                           **self._sparse_inputs(self.active_out_edges_count, direction,
                                                 record.iteration))
            self._called_off = False

    def enable_shortcut_labels(self, ids: np.ndarray) -> None:
        """End every pull over every shard, from iteration
        ``config.GPU_SHORTCUT_LABELS_AFTER`` on, with pointer jumping over the labels of
        every vertex (a program declaring ``shortcut_labels`` on the GPU alone:
        :func:`decisions.shortcut_labels`); ``ids``: the vertices' user ids,
        increasing."""
        ids = np.ascontiguousarray(ids, np.int64)
        dense = bool(ids.size and ids[-1] - ids[0] == ids.size - 1)
        # consecutive ids: the kernel reads the first alone
        kept = ids[:1] if dense else ids if ids.size else np.zeros(1, np.int64)
        with self.main_stream:      # where the pulls that read it are ordered
            self.shortcut = (self.cupy.asarray(kept), dense)
        self.main_stream.synchronize()      # a set-up copy, not the first iteration's

    def _device_loop_entry(self, checkpoints_after_pages: bool | None = None) -> dict:
        """Whether this run may loop sparse iterations on the device
        (:func:`~garaphpy.scheduler.decisions.device_loop`, decided once, on the
        first batch: checkpoints after pages are set up after the engine)."""
        if checkpoints_after_pages is None:
            checkpoints_after_pages = self.page_done is not None
        if self._loop_entry is None:
            self._loop_entry = decisions.fixed(
                decisions.device_loop, enabled=bool(config.GPU_DEVICE_LOOP),
                resident=self.plan.resident, aggregates=bool(self.program.aggregate_monoids),
                host_copies=self.host_copies, checkpoints_after_pages=checkpoints_after_pages,
                extra_bytes=device_loop.extra_bytes(
                    self.num_vertices, self.num_edges, self.store.vertex_dtype.itemsize,
                    *self._push_bytes(), priority=self.priority_entry["choice"]),
                free_bytes=self.plan.budget - self.plan.vertex_bytes - self.plan.page_bytes)
        return self._loop_entry

    def _make_loop(self) -> device_loop.DeviceLoop:
        """The device loop of this run's sparse iterations (push, in order of value)."""
        priority = 0
        if self.priority_entry["choice"]:
            priority = 2 if self._larger_first else 1
        return device_loop.DeviceLoop(self, push=self.push_entry["choice"],
                                      push_weights=bool(self._push_bytes()[1]),
                                      priority=priority)

    def _push_bytes(self) -> tuple[int, int]:
        """Bytes per accumulator and per edge value the push keeps (0 without)."""
        if not self.push_entry["choice"]:
            return 0, 0
        weights = self.store.weighted and "weight" in self.gather_parameters
        return (np.dtype(self.program.accum_dtype).itemsize,
                self.store.weight_dtype.itemsize if weights else 0)

    def _sparse_inputs(self, active_out_edges: int, forced: str, iteration: int = 0) -> dict:
        """The inputs of :func:`decisions.gpu_sparse_pass` for this run's
        ``iteration``."""
        if self._neighbour_in_degree is None:
            self._neighbour_in_degree = self.store.neighbour_in_degree
        push = self.push_entry["choice"]     # a push pulls nothing
        return dict(active_out_edges=int(active_out_edges), num_edges=self.num_edges,
                    forced=forced, factor=config.GPU_SPARSE_FACTOR,
                    neighbour_in_degree=1.0 if push else self._neighbour_in_degree,
                    pull_factor=0.0 if push else config.GPU_SPARSE_PULL_FACTOR,
                    iteration=int(iteration), loop_after=int(config.GPU_LOOP_AFTER_ITERATIONS))

    def loop_takes(self, iteration: int, active_out_edges: int, direction: str = "auto") -> bool:
        """Whether :meth:`iterate_batch` would run ``iteration`` in the device
        loop: the run may loop (:func:`decisions.device_loop`) and the frontier,
        of ``active_out_edges`` out-edges, is sparse
        (:func:`decisions.gpu_sparse_pass`)."""
        return bool(self._device_loop_entry()["choice"] and decisions.gpu_sparse_pass(
            **self._sparse_inputs(active_out_edges, direction, iteration)))

    def iterates_sparse(self, iteration: int, active_out_edges: int) -> bool:
        """Whether ``iteration``, with ``active_out_edges`` out-edges in its
        frontier, may cost the GPU less than a pull over every page: the run
        chooses per page (the selective transfers skip or push the pages the
        frontier hardly reaches; where their arrays are deferred, once making
        them pays, :meth:`_selective_verdict`), or the device loop takes the
        iteration (:meth:`loop_takes`).  Otherwise every page is pulled, and
        the iteration costs T_GPU whatever the frontier (a hybrid run's
        policy prices it so)."""
        if self.loop_takes(iteration, active_out_edges):
            return True
        if not self.selective:
            return False
        if self.release_pages is None:
            return True
        verdict = self._deferred_verdict(active_out_edges)
        return bool(verdict is not None and verdict[0])

    @property
    def selective_most_vertices(self) -> int:
        """The largest frontier, in vertices, that a selective iteration counts
        per page (larger ones pull every page)."""
        return self.num_vertices // SELECTIVE_FRONTIER_SHARE

    @property
    def streamed_bus_bytes(self) -> int:
        """The bytes the pages not kept on the device move over the bus in a
        pull over every page."""
        return int(self.page_bus_bytes[~self.kept_pages].sum())

    def _deferred_verdict(self, active_out_edges: int) -> tuple[bool, float, dict] | None:
        """Where the selective arrays are deferred: :meth:`_selective_verdict`
        for a frontier sparse enough to make them
        (:func:`decisions.make_selective_arrays`), else None.  The one rule of
        the policy's question (:meth:`iterates_sparse`) and the iteration's
        own choice (:meth:`_iterate_pages`)."""
        if not decisions.make_selective_arrays(self.active_vertices,
                                               self.selective_most_vertices):
            return None
        return self._selective_verdict(active_out_edges)

    def _selective_verdict(self, active_out_edges: int) -> tuple[bool, float, dict]:
        """Whether a sparse iteration of ``active_out_edges`` frontier out-edges
        makes the deferred selective arrays now (:func:`decisions.selective_pays`,
        unless ``config.GPU_SELECTIVE_WHEN_PAYS`` is off), the rent after it,
        and the record's entry.  The dense pass costs what the last one took
        (before any, the streamed pages' copies at the bus rate); the
        selective pass, ``config.HYBRID_GPU_SPARSE_OVERHEAD_SECONDS`` and the
        frontier's out-edges at :meth:`sparse_edge_seconds`; the released
        pages, their copies in every later dense iteration.  Nothing is
        changed here: the caller keeps the rent."""
        rates = self.transfer_rates
        dense = self._dense_seconds
        if dense is None:
            dense = self.streamed_bus_bytes / rates.bus
        sparse = (config.HYBRID_GPU_SPARSE_OVERHEAD_SECONDS
                  + active_out_edges * self.sparse_edge_seconds())
        released = float(self.page_bus_bytes[self.release_pages].sum()) / rates.bus
        tail = self.active_vertices < self._peak_active
        if config.GPU_SELECTIVE_WHEN_PAYS:
            make, rent = decisions.selective_pays(dense, sparse, released, self._selective_rent,
                                                  tail, config.GPU_RELEASE_DENSE_ITERATIONS)
        else:
            make, rent = True, self._selective_rent
        entry = {"choice": make, "dense_seconds": dense, "sparse_seconds": sparse,
                 "released_seconds": released, "tail": tail, "rent": rent,
                 "enabled": bool(config.GPU_SELECTIVE_WHEN_PAYS)}
        return make, rent, entry

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance, active_out_edges: int,
                      direction: str = "auto") -> list:
        """Up to ``max_steps`` sparse iterations from ``first_iteration`` in the
        device loop (:class:`~garaphpy.scheduler.device_loop.DeviceLoop`), when the
        run allows it and the frontier is small enough
        (:func:`~garaphpy.scheduler.decisions.gpu_sparse_pass`); the engine
        interface of :meth:`garaphpy.scheduler.driver.Driver.iterate_batch`.

        Each iteration is a notify-pull with the values, activity and counters
        the pull over every shard would give; the loop ends after an
        iteration that activates nothing, whose L1 change is below
        ``tolerance``, that is the batch's last, or whose frontier is too large
        for the sparse pass.  The iterations share the batch's time evenly.

        Returns
        -------
        list of IterationRecord
            One per iteration run; empty when the next iteration is not sparse
            (nothing was done).
        """
        entry = self._device_loop_entry()
        if direction == "notify-pull" and not entry["choice"]:
            why = [name for name, bad in (
                ("the device loop is off (config.GPU_DEVICE_LOOP)", not entry["enabled"]),
                ("the pages do not all fit the GPU budget", not entry["resident"]),
                ("the program has aggregates", entry["aggregates"]),
                ("checkpoints are taken after pages", entry["checkpoints_after_pages"]),
                ("its arrays do not fit the GPU budget",
                 entry["extra_bytes"] > entry["free_bytes"])) if bad]
            raise ConfigError("direction='notify-pull' on the GPU runs in its device loop, "
                              f"which this run cannot use: {'; '.join(why)}")
        if max_steps < 1 or not self.loop_takes(first_iteration, active_out_edges, direction):
            return []
        if self._loop is None:
            self._loop = self._make_loop()
        loop = self._loop
        inputs = self._sparse_inputs(0, direction)
        num_edges, forced, factor = self.num_edges, direction, inputs["factor"]
        neighbour_in, pull_factor = inputs["neighbour_in_degree"], inputs["pull_factor"]
        loop_entry = {**entry, "push": self.push_entry, "value_priority": self.priority_entry}
        field = device_loop.RECORD_FIELDS.index
        names = ("active_vertices", "active_out_edges", "updated_vertices", "edges_pulled",
                 "activated", "edges_notified")
        common = dict(mode=self.mode, direction="push" if loop.push else "notify-pull",
                      forced=direction != "auto", rho=self.rho)
        records = []

        def keep(rows: np.ndarray) -> None:
            """Records of a block of looped iterations (made while the GPU runs on)."""
            columns = [rows[:, field(name)].tolist() for name in names]
            changes = rows[:, field("l1_change")].view(np.float64).tolist()
            first = first_iteration + len(records)

            def values():
                for step, (active, edges, updated, pulled, activated, notified) in enumerate(
                        zip(*columns)):
                    yield (first + step, edges / num_edges if num_edges else 0.0, active,
                           updated, pulled, activated, changes[step], pulled, {
                               "gpu_sparse_pass": {
                                   "active_out_edges": edges, "num_edges": num_edges,
                                   "forced": forced, "factor": factor,
                                   "neighbour_in_degree": neighbour_in,
                                   "pull_factor": pull_factor,
                                   "notified_edges": notified, "choice": True},
                               "device_loop": loop_entry})

            records.extend(batch_records(common, (
                "iteration", "active_fraction", "active_vertices", "updated_vertices",
                "edges_processed", "activated", "l1_change", "gpu_edges", "decisions"),
                values()))

        taken, reason, seconds = loop.run(
            first_iteration, max_steps, tolerance,
            decisions.gpu_dense_edges(**{
                key: value for key, value in self._sparse_inputs(0, direction).items()
                if key not in ("active_out_edges", "iteration", "loop_after")}),
            decisions.gpu_pull_edges(self.num_edges, direction, config.GPU_SPARSE_PULL_FACTOR)
            if not loop.push else 2 ** 62,
            active_out_edges, on_rows=keep,
            span_edges=2 ** 62 if direction == "notify-pull" else None)
        self._called_off = reason == "dense pull"
        loop_entry.update(steps=taken, stop=reason, launch=loop.describe())
        if loop.priority:
            loop_entry.update(bucket_width=loop.bucket_width, buckets=loop.buckets())
        each = seconds / max(taken, 1)
        for record in records:
            record.seconds = record.gpu_busy_seconds = each
        self.active_vertices = loop.pending_vertices()
        self.active_out_edges_count = loop.frontier_out_edges()
        return records

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """One synchronous or asynchronous pull over every page; then, where the
        run settles its kept pages (:func:`decisions.settle_kept_pages`),
        rounds over those pages (:meth:`_settle_kept_pages`)."""
        self._next_copies = None
        self._iterate_pages(record, aggregates)
        if self.settle_entry["choice"]:
            self._settle_kept_pages(record, aggregates)
        if self._next_copies is not None:
            # after the rounds, whose unpacks may use the buffers the copies fill
            self._prefetch_next_copies(*self._next_copies)
            record.decisions["prefetch_next_copies"]["queued"] = len(self._prefetched)

    def _iterate_pages(self, record: IterationRecord, aggregates) -> None:
        if self._loop is not None:
            self._loop.frontier_current = False
        self.begin_iteration(record.iteration)
        started = time.perf_counter()
        if self.selective and self.release_pages is not None:
            verdict = self._deferred_verdict(self.active_out_edges_count)
            if verdict is not None:
                make, self._selective_rent, record.decisions["selective_pays"] = verdict
                if make:
                    self._release_for_selective(record)
                    self._iterate_selective(record, aggregates)
                    return
            self._peak_active = max(self._peak_active, self.active_vertices)
        elif self.selective and not (self.plan.resident and self.active_vertices
                                     > self.selective_most_vertices):
            self._iterate_selective(record, aggregates)
            return
        if self._fused(record):
            self.end_iteration(record, [self.launch_all_resident(aggregates, record.iteration)],
                               aggregates)
            return
        targets = (self.host_values, self.host_active) if self.host_copies else (None, None)
        timings = []
        kept = self.kept_pages
        order = interleave(np.flatnonzero(~kept).tolist(), np.flatnonzero(kept).tolist())
        slots = stream_slots(order, kept, len(self.streams))
        for position, (k, slot) in enumerate(zip(order, slots)):
            timings.append(self.launch_page(k, aggregates, record.iteration, *targets,
                                            slot=slot))
            if self.page_done is not None and not self.synchronous:
                self.page_done(record.iteration, position + 1)
        if self.prefetch_entry["choice"]:
            self._next_copies = order, slots
        # the copies this iteration found queued by the one before, and those it queues
        # (:meth:`iterate`)
        record.decisions["prefetch_next_copies"] = dict(
            self.prefetch_entry, used=sum(timing.prefetched for timing in timings), queued=0)
        self.end_iteration(record, timings, aggregates)
        self._dense_seconds = time.perf_counter() - started

    def _settle_kept_pages(self, record: IterationRecord, aggregates) -> None:
        """Pull the pages kept on the device again, all of them each round, in
        place, until a round activates no vertex or ``config.GPU_SETTLE_MAX_ROUNDS``
        rounds have run (issue 18, asynchronous inner iterations).

        The vertices active after the iteration are those any of its pulls
        changed, the rounds' included: the next iteration's frontier.  The
        rounds are recorded as ``record.decisions["settle_kept_pages"]`` (the
        run's entry, with the vertices each round activated) and their edges
        in ``record.edges_processed``.
        """
        if self.active_vertices == 0:
            return
        cupy, main, n = self.cupy, self.main_stream, self.num_vertices
        kept = np.flatnonzero(self.kept_pages).tolist()
        slots = stream_slots(kept, self.kept_pages, len(self.streams))
        kept_edges = int(sum(self.pages[k].num_edges for k in kept))
        with main:
            changed = self.active.copy()
        activated = []
        for _ in range(int(config.GPU_SETTLE_MAX_ROUNDS)):
            self.begin_iteration(record.iteration, order=kept)
            for k, slot in zip(kept, slots):
                self.launch_page(k, aggregates, record.iteration, slot=slot)
            statistics = self._wait_for_launches(record.iteration, aggregates, shortcut=False)
            with main:
                cupy.bitwise_or(changed, self.active, out=changed)
            activated.append(int(statistics[0]))
            if not statistics[0]:
                break
        with main:
            self.active[...] = changed
            frontier = changed[:n].view(np.bool_)
            count = cupy.count_nonzero(frontier)
            out_edges = cupy.where(frontier, self.attrs[0][:n], 0).sum(dtype=np.int64)
            totals = cupy.stack([count.astype(np.int64), out_edges]).get(stream=main)
        main.synchronize()
        self.active_vertices, self.active_out_edges_count = int(totals[0]), int(totals[1])
        record.activated = self.active_vertices
        record.edges_processed += kept_edges * len(activated)
        record.gpu_edges += kept_edges * len(activated)
        record.decisions["settle_kept_pages"] = dict(
            self.settle_entry, rounds=len(activated), activated=activated,
            max_rounds=int(config.GPU_SETTLE_MAX_ROUNDS))

    # -- selective transfers of streamed pages (issue 17) ---------------------------------
    def _selective_setup(self, largest_page: int) -> None:
        """The arrays of selective iterations: the push's accumulators (at the
        identity), the compacted buffer (one page's bytes, on the host pinned
        and on the device), the pages' vertex ranges, and the out-edge CSR in
        pinned host memory (the host gathers from it; the GPU reads it in
        zero-copy transfers), its values placed in the targets' order, or the
        store's own CSR when the host has no room for that copy."""
        from ..kernels import subgraph

        cupy, store, n = self.cupy, self.store, self.num_vertices
        self.compact_capacity_bytes = max(int(largest_page), 1 << 16)
        self.compact_host = self.pinned_array(self.compact_capacity_bytes, np.uint8)
        if self.release_pages is None:
            self._selective_device_arrays()
        self.page_first = np.array([p.first_vertex for p in self.pages], np.int64)
        self.page_end = np.array([p.end_vertex for p in self.pages], np.int64)
        self.page_lookup = subgraph.PageLookup(self.page_first, self.page_end, n)
        self._piece_buffers = subgraph.PieceBuffers()
        self.push_weights = self.reads_weights
        if self.pushes_entry["pinned_fits"]:
            self.out_offsets, self.out_targets, self.out_weights = pinned_out_edges(
                store, self.push_weights)
        else:
            self.out_offsets = np.asarray(store.out_offsets, np.int64)
            self.out_targets, self.out_weights = np.asarray(store.out_targets), None
        #: the transfer codes the pushes may use (:func:`decisions.selective_pushes`)
        self.push_codes = tuple(transfer.TRANSFER_NAMES.index(name)
                                for name in self.pushes_entry["choice"])
        self.targets_sorted = subgraph.targets_sorted(self.out_offsets, self.out_targets)
        mean_degree = self.num_edges / max(n, 1)
        self.push_group_shift = int(min(5, max(0, np.ceil(np.log2(max(mean_degree, 1.0))))))
        self.gather_threads = max(1, len(__import__("os").sched_getaffinity(0)))
        self._push_events = [cupy.cuda.Event(), cupy.cuda.Event(), cupy.cuda.Event()]
        # compiled now, not in the first selective iteration (seconds on a fresh install)
        subgraph.compile_counts(self.out_offsets, self.out_targets, self.page_lookup,
                                self.targets_sorted, self._piece_buffers)
        if "compact" in self.pushes_entry["choice"] and n:
            # and the gather into the compacted buffer (3.9 s inside a timed run, H200)
            with contextlib.suppress(OverflowError):
                subgraph.gather_active_edges(
                    np.zeros(1, np.int64), self.out_offsets, self.out_targets,
                    self.out_weights if self.push_weights else None, self.page_lookup,
                    np.ones(len(self.pages), bool), self._compact_views, 1, None,
                    self.targets_sorted)
        # and cupy's kernels of the frontier's list (0.6 s on their first call)
        with self.main_stream:
            cupy.flatnonzero(self.active[:n]).get()
        if config.GPU_CALIBRATE_TRANSFER_RATES:
            self.calibration = {"choice": "measured", **self._calibrate_transfer_rates()}

    def _calibrate_transfer_rates(self) -> dict:
        """The rates the first selective iterations price with, measured now on
        this host and link (the defaults in :mod:`~garaphpy.config` are another
        machine's, and a loaded host counts at half their speed): pinned
        copies of a streamed page (:data:`CALIBRATION_BYTES` in all), and the
        count and the gather of sample frontiers (every vertex at a stride,
        about :data:`CALIBRATION_EDGES` out-edges, the gather's within half
        the compacted buffer).  Each replaces its default; the iterations go
        on learning from there.  Returns what was measured
        (``self.calibration``, in the run's decisions)."""
        from ..kernels import subgraph

        cupy, n, rates = self.cupy, self.num_vertices, self.transfer_rates
        measured = {}
        # the link: a streamed page's pinned image into a stream's buffer, the second
        # of two rounds of copies timed (the first may map the memory)
        host = max(self.packed_host.values(), key=len, default=self.compact_host)
        device = (self.device_packed or self.device_pages or [None])[0]
        if device is not None:
            size = min(host.nbytes, device.nbytes)
            repeats = min(64, -(-CALIBRATION_BYTES // max(size, 1)))
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            stream = self.copy_stream
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
        edge_bytes = self._pushed_edge_bytes()["compact"]
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
                    np.ones(len(self.pages), bool), self._compact_views,
                    self.gather_threads * 4, pieces, self.targets_sorted)
            except OverflowError:
                continue
            best["gather"] = (sub["edges"], time.perf_counter() - started)
        for name, (amount, seconds) in best.items():
            if rates.learn(name, amount, seconds, smoothing=1.0):
                measured[name] = {"amount": int(amount), "seconds": seconds}
        return measured

    def _selective_device_arrays(self) -> None:
        """The selective iterations' device arrays: the push's accumulators (at
        the identity), the compacted buffer, and the pushed vertex ranges."""
        cupy, n = self.cupy, self.num_vertices
        with self.main_stream:
            self.stream_accum = cupy.full(n + 4, self._split_identity,
                                          dtype=self.program.accum_dtype)
            self.compact_device = cupy.empty(self.compact_capacity_bytes, np.uint8)
            self.range_device = cupy.empty(4 * (len(self.pages) + 1), np.int64)
        self.main_stream.synchronize()

    def _release_for_selective(self, record: IterationRecord) -> None:
        """The deferred selective arrays made (:func:`decisions.make_selective_arrays`):
        the pages :meth:`_defer_selective_arrays` chose released from the device
        first (each streams packed from then on, from the packed image made at
        set-up), recorded as ``record.decisions["selective_arrays"]`` with the
        seconds this took (once in a run: the hybrid policy leaves them out of
        what it expects the next sparse iterations to cost)."""
        started = time.perf_counter()
        released = np.flatnonzero(self.release_pages).tolist()
        freed = 0
        for k in released:
            freed += self.packed_images.pop(k).nbytes
            self.packed_host[k] = self.release_host.pop(k)
        self.kept_pages[released] = False
        self.packed_kept[released] = False
        self.plan.packed_pages[released] = False
        self.plan.page_bytes -= freed
        self.plan.selective_bytes = self.selective_bytes
        self._selective_device_arrays()
        self.release_pages = None
        decisions.note(record, "selective_arrays", "made", iteration=record.iteration,
                       active_vertices=self.active_vertices, released_pages=released,
                       released_bytes=freed, selective_bytes=self.selective_bytes,
                       seconds=time.perf_counter() - started)

    def _host_pointer(self, array: np.ndarray) -> np.uint64:
        """A pinned host array's address, which kernels read through (unified
        virtual addressing: pinned memory is mapped at the same address)."""
        return np.uint64(array.ctypes.data)

    def _compact_views(self, sizes: dict) -> dict:
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

    def _iterate_selective(self, record: IterationRecord, aggregates) -> None:
        """One iteration whose streamed pages each reach the GPU the cheapest
        way (:func:`~garaphpy.scheduler.transfer.choose_transfers`): skipped,
        copied whole and pulled, or their active edges pushed from a compacted
        buffer or read from pinned host memory (zero-copy); then the vertices
        of every page not pulled are applied.  The choice and its inputs are
        recorded as ``record.decisions["page_transfer"]``."""
        from ..kernels import subgraph

        cupy, main, n = self.cupy, self.main_stream, self.num_vertices
        rates, forced = self.transfer_rates, self.transfer_forced
        resident = self.kept_pages
        page_bytes = self.page_bus_bytes
        streamed_bytes = self.streamed_bus_bytes
        pull_seconds = np.where(resident, self.page_edge_counts / np.where(
            self.packed_kept, rates.packed_pull, rates.pull), 0.0)
        frontier_edges = self.active_out_edges_count    # end_iteration counts the next ones
        started = time.perf_counter()
        active_edges = frontier = frontier_device = pieces = None
        count_work, count_seconds = frontier_edges, 0.0
        most_vertices = self.selective_most_vertices
        if forced != "copy" and self.active_vertices <= most_vertices:
            with main:
                frontier_device = cupy.flatnonzero(self.active[:n])
            frontier = frontier_device.get(stream=main)
            main.synchronize()
            # a vertex's sorted targets cost a few steps per page they reach
            count_work = subgraph.count_work(frontier, self.out_offsets, len(self.pages),
                                             self.targets_sorted)
        counted = decisions.count_active_edges(
            count_work, streamed_bytes, rates.bus, rates.count, forced,
            active_vertices=self.active_vertices, most_vertices=most_vertices,
            kept_pull_seconds=float(pull_seconds.sum()))
        if counted:
            pieces = subgraph.frontier_pieces(frontier, self.out_offsets,
                                              buffers=self._piece_buffers)
            active_edges = subgraph.page_active_edges(
                frontier, self.out_offsets, self.out_targets, self.page_lookup,
                self.gather_threads * 4, pieces, self.targets_sorted)
            count_seconds = time.perf_counter() - started
        bytes_per_edge = self._pushed_edge_bytes()
        # a piece of at most subgraph.PIECE_EDGES edges adds its source and offset
        compact_capacity = self.compact_capacity_bytes // (bytes_per_edge["compact"] + 1)
        choices, predicted = transfer.choose_transfers(
            active_edges, page_bytes, resident, rates, exact=True, forced=forced,
            bytes_per_edge=bytes_per_edge, compact_capacity=compact_capacity,
            total_active_edges=frontier_edges,
            vertex_bytes=self.store.vertex_dtype.itemsize, pull_seconds=pull_seconds,
            pushes=self.push_codes)
        copied = [k for k in range(len(self.pages)) if choices[k] == transfer.COPY]
        kept_pulled = [k for k in range(len(self.pages)) if choices[k] == transfer.RESIDENT]
        self.begin_iteration(record.iteration, order=copied)
        timings = []
        order = interleave(copied, kept_pulled)
        for k, slot in zip(order, stream_slots(order, resident, len(self.streams))):
            timings.append(self.launch_page(k, aggregates, record.iteration, slot=slot))
        # the pushes: host gathers while the copies above are under way
        push = self.push_stream
        push.wait_event(self._ready)
        events = self._push_events
        push.record(events[0])
        compact_pages = np.flatnonzero(choices == transfer.COMPACT)
        zero_copy_pages = np.flatnonzero(choices == transfer.ZERO_COPY)
        kernel_arguments = (self.stream_accum, self.values) + self.attrs + (
            np.int32(self.push_group_shift),)
        gathered = gather_seconds = 0
        compact_bytes = zero_copy_bytes = 0
        if compact_pages.size:
            gather_started = time.perf_counter()
            try:
                sub = subgraph.gather_active_edges(
                    frontier, self.out_offsets, self.out_targets,
                    self.out_weights if self.push_weights else None, self.page_lookup,
                    choices == transfer.COMPACT, self._compact_views, self.gather_threads * 4,
                    pieces, self.targets_sorted)
            except OverflowError:
                sub = None
            gather_seconds = time.perf_counter() - gather_started
            if sub is None:     # more edges than the buffer: these pages are copied after all
                for k in compact_pages.tolist():
                    choices[k] = transfer.RESIDENT if resident[k] else transfer.COPY
                    timings.append(self.launch_page(k, aggregates, record.iteration,
                                                    slot=len(timings) % len(self.streams)))
            else:
                gathered = sub["edges"]
                compact_bytes = self._compact_bytes
                cupy.cuda.runtime.memcpyAsync(self.compact_device.data.ptr,
                                              self.compact_host.ctypes.data, compact_bytes,
                                              cupy.cuda.runtime.memcpyHostToDevice, push.ptr)
                push.record(events[1])
                offsets = self._device_compact("offsets")
                self._launch_push(push, self._device_compact("sources"), offsets[:-1],
                                  offsets[1:], self._device_compact("targets").data.ptr,
                                  self._device_compact("weights").data.ptr, None,
                                  kernel_arguments)
        if zero_copy_pages.size:
            first, end = transfer.pushed_ranges(self.page_first, self.page_end, zero_copy_pages)
            ranges = self._upload_ranges(first, end, push, offset=len(self.pages) + 1)
            with push:
                vertex, begin, end = (cupy.asarray(array) for array in pieces)
            zero_copy_started = push.record(events[2])
            self._launch_push(push, vertex, begin, end, self._host_pointer(self.out_targets),
                              self._host_pointer(self.out_weights) if self.push_weights
                              else self.empty_weights.data.ptr, ranges, kernel_arguments)
            zero_copy_edges = int(active_edges[zero_copy_pages].sum())
            zero_copy_bytes = (frontier_edges * self.store.vertex_dtype.itemsize
                               + zero_copy_edges * bytes_per_edge["zero-copy"]
                               - zero_copy_edges * self.store.vertex_dtype.itemsize)
        pushed_done = push.record(cupy.cuda.Event())
        # the pages not pulled: their vertices applied to the pushed sums
        applied = np.flatnonzero((choices == transfer.SKIP) | (choices == transfer.COMPACT)
                                 | (choices == transfer.ZERO_COPY))
        for stream, done in zip(self.page_streams, self._events["streams"]):
            main.wait_event(stream.record(done))
        main.wait_event(pushed_done)
        if applied.size:
            if (compact_pages.size or zero_copy_pages.size) and self.num_split:
                self._launch_vertices(self.kernels.stream_split_merge, (
                    self.split_vertices, np.int32(self.num_split), self.stream_accum,
                    self.split_accum))
            first, end = transfer.pushed_ranges(self.page_first, self.page_end, applied)
            range_first, range_end = self._upload_ranges(first, end, main)
            widest = int((end - first).max())
            blocks = max(1, min(self.device.multiprocessors * 8 // max(first.size, 1) + 1,
                                -(-widest // 256)))
            with main:
                self.kernels.stream_apply((blocks, int(first.size)), (256,), (
                    range_first, range_end, self.stream_accum, self.values, self.next,
                    self.active) + self.attrs + (aggregates, np.int64(n),
                                                  np.int64(record.iteration), self.l1_total,
                                                  self.counters),
                    shared_mem=gpu_kernels.TOTALS_SHARED_BYTES)
        self.end_iteration(record, timings, aggregates)
        # what crossed the bus, and the rates measured
        pushed_edges = gathered + (int(active_edges[zero_copy_pages].sum())
                                   if zero_copy_pages.size else 0)
        record.edges_processed += pushed_edges
        record.gpu_edges += pushed_edges
        record.bytes_to_device += compact_bytes + zero_copy_bytes
        copy_bytes = sum(t.bytes_to_device for t in timings)
        rates.learn("bus", copy_bytes, record.copy_seconds)
        if compact_pages.size and gathered:
            rates.learn("gather", gathered, gather_seconds)
        if counted and count_work >= COUNT_LEARNING_WORK:    # else mostly fixed costs
            rates.learn("count", count_work, count_seconds)
        self._learn_pull_rates(timings)
        if zero_copy_pages.size:
            rates.learn("zero_copy", zero_copy_bytes,
                        cupy.cuda.get_elapsed_time(zero_copy_started, pushed_done) / 1e3)
        decisions.note(record, "page_transfer", transfer.describe_choices(choices),
                       forced=forced, counted=counted, count_seconds=count_seconds,
                       active_out_edges=int(frontier_edges),
                       streamed_bytes=streamed_bytes, predicted_seconds=predicted["seconds"],
                       rates=rates.as_dict(), compact_edges=int(gathered),
                       compact_bytes=int(compact_bytes), zero_copy_bytes=int(zero_copy_bytes),
                       copied_bytes=int(copy_bytes),
                       **{name: int((choices == code).sum())
                          for code, name in enumerate(transfer.TRANSFER_NAMES)})

    def _learn_pull_rates(self, timings: list) -> None:
        """The kept pages' pull rates (edges per second, as they are and packed)
        from this iteration's kernel windows.  Pages' kernels overlap on the
        streams: each window counts for its share of the kernels' busy time
        (the windows' sum over that time)."""
        if not self.timings or not timings:
            return
        measured = self.timings[-1]
        windows = float(sum(measured.per_page_kernel))
        if windows <= 0.0:
            return
        share = measured.kernel_seconds / windows
        edges = {"pull": 0, "packed_pull": 0}
        seconds = {"pull": 0.0, "packed_pull": 0.0}
        for timing, kernel in zip(timings, measured.per_page_kernel):
            if timing.page >= 0 and self.kept_pages[timing.page]:
                name = "packed_pull" if self.packed_kept[timing.page] else "pull"
                edges[name] += self.pages[timing.page].num_edges
                seconds[name] += kernel * share
        for name in edges:
            self.transfer_rates.learn(name, edges[name], seconds[name])

    def _upload_ranges(self, first: np.ndarray, end: np.ndarray, stream, offset: int = 0):
        """Vertex ranges copied into the device's range area (at ``offset`` pairs)
        on ``stream``: (first, end) device views."""
        count = int(first.size)
        host = np.concatenate([first, end]).astype(np.int64)
        area = self.range_device[2 * offset:2 * offset + 2 * count]
        area.set(host, stream=stream)
        return area[:count], area[count:]

    def _launch_push(self, stream, vertex, begin, end, targets_pointer, weights_pointer,
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
        blocks = max(1, min(self.device.multiprocessors * 16, -(-count * group // threads)))
        with stream:
            self.kernels.stream_push((blocks,), (threads,), (
                vertex, np.int64(count), begin, end, np.uint64(targets_pointer),
                np.uint64(weights_pointer), ranges[0], ranges[1],
                np.int32(num_ranges)) + kernel_arguments)

    def begin_iteration(self, iteration: int, order=None) -> None:
        """Reset the statistics and compute the contributions; pages launch after it
        (``order``: the pages that will, in their order, when not all of them)."""
        main = self.main_stream
        events = self._events
        if order is None:
            order = range(len(self.pages))
        # the pages whose images come from the page source this iteration
        order = [k for k in order if k not in self.resident_images
                 and k not in self.packed_layouts]
        self._cursor = self.page_source.cursor(order, "gpu", release="manual")
        self._origin = main.record(events["origin"])
        with main:
            self.statistics.fill(0)
        if self.precompute:
            self._launch_vertices(self.kernels.contributions,
                                  (self.values, self.contributions) + self.attrs
                                  + (np.int64(self.num_vertices),))
        self._ready = main.record(events["ready"])

    def _fused(self, record: IterationRecord) -> bool:
        """Whether an iteration the GPU runs alone is one launch over every shard
        (:func:`~garaphpy.scheduler.decisions.fuse_gpu_launch`, recorded)."""
        after_pages = self.page_done is not None
        entry = self._fused_decisions.get(after_pages)
        if entry is None:
            entry = self._fused_decisions[after_pages] = decisions.fixed(
                decisions.fuse_gpu_launch, resident=self.plan.resident,
                fuse_enabled=self.fuse_resident, host_copies=self.host_copies,
                synchronous=self.synchronous, checkpoints_after_pages=after_pages,
                num_pages=len(self.pages))
        record.decisions["fused_launch"] = entry
        return entry["choice"]

    def launch_all_resident(self, aggregates, iteration: int) -> PageTiming:
        """Queue one pull kernel over every shard of the resident arrays on the
        first stream; its timing stands for all pages (``page`` is -1)."""
        stream = self.streams[0]
        stream.wait_event(self._ready)
        events = self._events["pages"][0]
        timing = PageTiming(-1, 0)
        timing.kernel_start = stream.record(events[2])
        self._launch_pull(stream, 0, self.store.shards.shape[0], self.resident_edges,
                          max(self.page_shared_bytes, default=0), aggregates, iteration)
        timing.kernel_end = timing.done = stream.record(events[3])
        return timing

    def _launch_pull(self, stream, first_shard: int, num_shards: int, edges, shared_bytes: int,
                     aggregates, iteration: int) -> None:
        sources, idxoff, weights = edges
        with stream:
            self.pull_kernel((num_shards,), (config.GPU_THREADS_PER_BLOCK,), (
                sources, idxoff, weights, self.shard_first_vertex,
                self.shard_num_vertices, self.shard_replication, self.shard_edge_begin,
                self.shard_edge_end, self.shard_split_slot, self.shard_scratch,
                self.scratch, np.int32(first_shard),
                self.values, self.next, self.contributions, self.active,
                self.split_accum) + self.attrs + (
                aggregates, np.int64(self.num_vertices), np.int64(iteration),
                self.l1_total, self.counters),
                shared_mem=shared_bytes)

    def launch_page(self, k: int, aggregates, iteration: int, host_values=None,
                    host_active=None, slot: int | None = None) -> PageTiming:
        """Queue page ``k``: its copy (when streamed), its pull kernel, and the copy
        of its updated vertex range to ``host_values``/``host_active`` when given.

        Returns the page's events; ``timing.done`` is recorded after its last
        operation.  Runs after :meth:`begin_iteration` of the same iteration.
        ``slot``: the stream (and its page buffer), default ``k % streams``.
        """
        cupy = self.cupy
        info = self.pages[k]
        slot = k % len(self.streams) if slot is None else slot
        packed_image = self.packed_images.get(k)
        reads_buffers = not (k in self.resident_images
                             or (packed_image is not None and self.pull_packed))
        if reads_buffers or not self.kept_streams:
            stream = self.streams[slot]
        else:
            stream = self.kept_streams[self._kept_turn % len(self.kept_streams)]
            self._kept_turn += 1
        stream.wait_event(self._ready)
        timing = PageTiming(k, slot)
        page_events = self._events["pages"][k]
        packed_free, raw_free = self._events["packed_free"][slot], self._events["raw_free"][slot]
        if k in self.packed_host:
            packed_image = self.device_packed[slot]
        prefetched = self._prefetched.pop(slot, None) if reads_buffers else None
        if prefetched is not None and prefetched.page == k:
            timing.copy_start, timing.copy_end = prefetched.copy_start, prefetched.copy_end
            timing.bytes_to_device = prefetched.bytes_to_device
            timing.prefetched = True
            prefetched = None
        if prefetched is not None:
            # dropped: its copy may still be filling a buffer this page unpacks into
            stream.wait_event(prefetched.copy_end)
        if not timing.prefetched and self._copied(k):
            read = self._queue_copy(k, slot, timing, page_events[0], page_events[1])
            if read is not None:
                self._copying.append((read, timing.copy_end))
        if timing.copy_end is not None:
            stream.wait_event(timing.copy_end)
        timing.kernel_start = stream.record(page_events[2])
        out = self.next
        if packed_image is not None and self.pull_packed:
            self._launch_packed_pull(k, packed_image, stream, aggregates, iteration)
            if k in self.packed_host:
                stream.record(packed_free)
        else:
            if packed_image is not None:
                self._unpack(k, packed_image, slot, stream)
                if k in self.packed_host:
                    stream.record(packed_free)
            if info.num_shards:
                self._launch_pull(stream, info.first_shard, info.num_shards,
                                  self._views(k, slot), self.page_shared_bytes[k], aggregates,
                                  iteration)
        timing.kernel_end = stream.record(page_events[3])
        if reads_buffers and self.raw_buffers:
            stream.record(raw_free)
        timing.done = timing.kernel_end
        if host_values is not None and info.end_vertex > info.first_vertex:
            first, end = info.first_vertex, info.end_vertex
            value_size = self.values.dtype.itemsize
            cupy.cuda.runtime.memcpyAsync(
                host_values[first:end].ctypes.data, out[first:end].data.ptr,
                (end - first) * value_size, cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            cupy.cuda.runtime.memcpyAsync(
                host_active[first:end].ctypes.data, self.active[first:end].data.ptr,
                end - first, cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
            timing.bytes_to_host = (end - first) * (value_size + 1)
            timing.back_end = stream.record(page_events[4])
            timing.done = timing.back_end
        return timing

    def _copied(self, k: int) -> bool:
        """Whether page ``k`` reaches the device by a copy into a stream's buffer
        (packed in pinned host memory, or streamed as stored)."""
        return k in self.packed_host or not (self.plan.resident or k in self.resident_images
                                             or k in self.packed_images)

    def _queue_copy(self, k: int, slot: int, timing: PageTiming, start, end):
        """Queue the copy of page ``k`` into stream ``slot``'s buffer on the copy
        stream, once the buffer's last pull (or unpack) is done; its events
        (``start``, ``end``) and bytes go into ``timing``.  Returns the page read
        from storage for it (released once the copy is done), or None."""
        cupy, copy = self.cupy, self.copy_stream
        read = None
        if k in self.packed_host:
            image = self.packed_host[k]
            target, free, nbytes = (self.device_packed[slot],
                                    self._events["packed_free"][slot], image.nbytes)
        else:
            image, read = self._host_image(k)
            target, free, nbytes = (self.device_pages[slot], self._events["raw_free"][slot],
                                    self.page_wire_bytes[k])
        copy.wait_event(free)
        timing.copy_start = copy.record(start)
        cupy.cuda.runtime.memcpyAsync(target.data.ptr, image.ctypes.data, nbytes,
                                      cupy.cuda.runtime.memcpyHostToDevice, copy.ptr)
        timing.bytes_to_device = nbytes
        timing.copy_end = copy.record(end)
        return read

    def _prefetch_next_copies(self, order: list, slots: list) -> None:
        """Queue now the copies the next iteration would begin with: the first
        copied page of each stream buffer, in ``order`` (this iteration's, which
        the next repeats), each once this iteration's last pull from its buffer
        is done.  The copy engine then runs on while this iteration's last
        pulls finish and the host ends it and begins the next, where it would
        otherwise idle.  Only pages in pinned host memory (packed, or held by
        the page source): a page read from storage waits for its read.  The
        next iteration's :meth:`launch_page` of the same page in the same slot
        uses the copy; any other page launched into that slot replaces it."""
        event = self.cupy.cuda.Event
        self._prefetched = {}
        for k, slot in zip(order, slots):
            if len(self._prefetched) == len(self.streams):
                break
            if not self._copied(k) or slot in self._prefetched:
                continue
            if k not in self.packed_host and not self.page_source.is_cached(k):
                break
            timing = PageTiming(k, slot)
            self._queue_copy(k, slot, timing, event(), event())
            self._prefetched[slot] = timing

    def _host_image(self, k: int):
        """Page ``k``'s image in pinned host memory, and the page read from
        storage for it (to be released once its copy is done) or None."""
        source = self.page_source
        if source.is_cached(k):
            return source.cached_page(k, "gpu").image, None
        cursor, copying = self._cursor, self._copying
        # buffers whose copy has finished go back to the reader; all held: wait for one
        while copying and (copying[0][1].done or cursor.held >= cursor.max_held):
            read, copied = copying.popleft()
            copied.synchronize()
            cursor.release(read)
        read = cursor.get(k)
        return read.image, read

    def _end_page_reads(self) -> None:
        """After the iteration's copies: the reader's buffers back (a walk over
        every page goes on reading for the next iteration, see
        :meth:`~garaphpy.storage.host_pages.PageCursor.close`)."""
        self._cursor.close()
        self._copying.clear()

    def _shortcuts(self, iteration: int) -> bool:
        """Whether the pull over every shard of ``iteration`` ends with pointer
        jumping over the labels (:meth:`enable_shortcut_labels`; from
        ``config.GPU_SHORTCUT_LABELS_AFTER`` on)."""
        return self.shortcut is not None and iteration >= config.GPU_SHORTCUT_LABELS_AFTER

    def _wait_for_launches(self, iteration: int, aggregates, apply_split: bool = True,
                           shortcut: bool = True) -> np.ndarray:
        """Wait for the launched pages, then apply the split vertices (unless not
        ``apply_split``) and shortcut the labels (where the run does, unless
        not ``shortcut``); returns the iteration's statistics, read back."""
        cupy = self.cupy
        main = self.main_stream
        n = np.int64(self.num_vertices)
        out = self.next
        for stream, done in zip(self.page_streams, self._events["streams"]):
            main.wait_event(stream.record(done))
        if apply_split and self.num_split:
            self._launch_vertices(self.kernels.apply_split, (
                self.split_vertices, np.int32(self.num_split), self.values, out, self.active,
                self.split_accum) + self.attrs + (aggregates, n, np.int64(iteration),
                                                  self.l1_total, self.counters),
                shared_mem=gpu_kernels.TOTALS_SHARED_BYTES)
            if self.host_copies:
                main.synchronize()
                split = cupy.asnumpy(self.split_vertices)
                self.host_values[split] = cupy.asnumpy(out[self.split_vertices])
                self.host_active[split] = cupy.asnumpy(self.active[self.split_vertices])
        if shortcut and self._shortcuts(iteration):
            self._launch_vertices(self.kernels.shortcut_labels, (
                out, self.shortcut[0], np.int32(self.shortcut[1]), self.active, self.attrs[0],
                self.counters, self.statistics[3:4], n), shared_mem=gpu_kernels.TOTALS_SHARED_BYTES)
        statistics = self.statistics.get(stream=main)
        main.synchronize()
        self._end_page_reads()
        return statistics

    def end_iteration(self, record: IterationRecord, timings: list, aggregates,
                      apply_split: bool = True, shortcut: bool = True) -> np.ndarray:
        """Wait for the launched pages, apply the split vertices, commit, record.

        Parameters
        ----------
        timings : list of PageTiming
            What :meth:`launch_page` returned for the pages the GPU ran.
        apply_split : bool
            Apply the vertices split over several shards here (False: the
            caller combines ``split_accum`` with partial sums of its own, as
            hybrid iterations do, and resets it).
        shortcut : bool
            Shortcut the labels where the run does (False: an iteration whose
            pages the host pulled too, whose copy would not see the jumps).

        Returns
        -------
        numpy.ndarray of uint64
            ``[activated, activated out-edges]`` counted on the GPU.
        """
        statistics = self._wait_for_launches(record.iteration, aggregates, apply_split, shortcut)
        if shortcut and self._shortcuts(record.iteration):
            decisions.note(record, "shortcut_labels", "all", dropped=int(statistics[3]))
        counters = statistics[:2]
        l1 = statistics[2:3].view(np.float64)
        if self.synchronous:
            self.values, self.next = self.next, self.values
        self.active_vertices = int(counters[0])
        self.active_out_edges_count = int(counters[1])
        timing = self._measure(timings)
        self.timings.append(timing)
        record.direction = "pull"
        record.l1_change += float(l1[0])
        record.activated = self.active_vertices
        record.updated_vertices = self.num_vertices
        pages = [page for t in timings for page in
                 (self.pages if t.page < 0 else [self.pages[t.page]])]
        edges = sum(page.num_edges for page in pages)
        record.edges_processed += edges
        record.pages += len(pages)
        record.gather_precomputed = self.precompute
        record.decisions["gpu_precompute"] = self.precompute_decision
        if self.packed_entry is not None:
            record.decisions["packed_pages"] = self.packed_entry
        if not self.plan.resident:
            record.decisions["selective_transfers"] = self.selective_entry
        elif self.resident_selective_entry is not None:
            record.decisions["resident_selective"] = self.resident_selective_entry
        if self.pushes_entry is not None:
            record.decisions["selective_pushes"] = self.pushes_entry
        if self.deferral_entry is not None:
            record.decisions["defer_selective_arrays"] = self.deferral_entry
        if self.calibration is not None:
            record.decisions["transfer_calibration"] = self.calibration
        record.gpu_pages = len(pages)
        record.gpu_edges = edges
        record.bytes_to_device += sum(t.bytes_to_device for t in timings)
        record.bytes_to_host += sum(t.bytes_to_host for t in timings)
        record.copy_seconds = timing.copy_seconds
        record.kernel_seconds = timing.kernel_seconds
        record.gpu_busy_seconds = timing.busy_seconds
        return counters

    def split_partials(self, pages: list[int]) -> dict:
        """vertex -> this GPU's partial sum, for every vertex split over several
        shards with a shard in one of ``pages``; the split accumulators are
        reset.  For a caller that applies split vertices itself
        (:meth:`end_iteration` with ``apply_split=False``)."""
        if not self.num_split or not pages:
            return {}
        if self._page_split_slots is None:
            slots, page_of = self._split_slot_of_split_shard, self._page_of_split_shard
            self._page_split_slots = [np.unique(slots[page_of == p])
                                      for p in range(len(self.pages))]
        slots = np.unique(np.concatenate([self._page_split_slots[p] for p in pages]))
        if slots.size == 0:
            return {}
        partials = self.cupy.asnumpy(self.split_accum[:self.num_split])
        with self.main_stream:
            self.split_accum.fill(self._split_identity)
        self.main_stream.synchronize()
        return {int(self.split_vertex_ids[s]): partials[s] for s in slots.tolist()}

    def probe_pages(self, pages, aggregates, repeats: int = 2) -> float:
        """Seconds the GPU takes for the given pages, as an iteration runs them
        (copies included when streamed, overlapping the kernels), written into
        scratch buffers: the run's state is left as it was.

        The fastest of ``repeats`` runs (the first may load the module).
        """
        cupy = self.cupy
        saved = self.next, self.active
        with self.main_stream:      # before begin_iteration's launches on it
            self.next = cupy.empty_like(self.values)
            self.active = cupy.zeros_like(saved[1])
        best = np.inf
        try:
            for _ in range(repeats):
                self.begin_iteration(0)
                timings = [self.launch_page(k, aggregates, 0) for k in pages]
                for timing in timings:
                    timing.done.synchronize()
                self._end_page_reads()
                span = max(cupy.cuda.get_elapsed_time(self._origin, timing.kernel_end)
                           for timing in timings) / 1e3 if timings else 0.0
                best = min(best, span)
        finally:
            for stream in self.page_streams:
                stream.synchronize()
            self._end_page_reads()
            self.next, self.active = saved
            with self.main_stream:
                self.split_accum.fill(self._split_identity)
                self.statistics.fill(0)
            self.main_stream.synchronize()
        return float(best)

    def _measure(self, timings: list[PageTiming]) -> IterationTiming:
        """Copy and kernel busy time: the union of the pages' windows, measured
        from the iteration's origin event (copies of different streams queue on
        one copy engine, so summing their windows would count waiting as work)."""
        elapsed = self.cupy.cuda.get_elapsed_time

        def since_origin(event):
            return elapsed(self._origin, event) / 1e3

        result = IterationTiming(stream_busy=[0.0] * len(self.streams))
        copies, kernels, backs = [], [], []
        for timing in timings:
            window = (since_origin(timing.kernel_start), since_origin(timing.kernel_end))
            kernels.append(window)
            result.per_page_kernel.append(window[1] - window[0])
            busy = window[1] - window[0]
            if timing.copy_start is not None:
                copies.append((since_origin(timing.copy_start), since_origin(timing.copy_end)))
                busy += copies[-1][1] - copies[-1][0]
            if timing.back_end is not None:
                backs.append((window[1], since_origin(timing.back_end)))
                busy += backs[-1][1] - backs[-1][0]
            result.stream_busy[timing.stream] += busy
        result.copy_seconds = busy_time(copies)
        result.kernel_seconds = busy_time(kernels)
        result.copy_back_seconds = busy_time(backs)
        result.busy_seconds = busy_time(copies + kernels + backs)
        return result

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed values and the frontier, copied to the host between iterations.

        See :class:`garaphpy.scheduler.checkpoint.CheckpointableEngine`.
        """
        self.main_stream.synchronize()
        active = self.cupy.asnumpy(self.active[:self.num_vertices])
        return self.values_to_host(), np.flatnonzero(active).astype(np.int64)

    def values_between_pages(self) -> np.ndarray:
        """The values of an asynchronous iteration once the pages launched so far
        are done, copied to the host."""
        for stream in self.page_streams:
            stream.synchronize()
        return self.values_to_host()

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from a checkpoint's committed values and frontier."""
        self.values.set(np.ascontiguousarray(values, dtype=self.values.dtype),
                        stream=self.main_stream)
        if self.synchronous:
            self.next.set(np.ascontiguousarray(values, dtype=self.values.dtype),
                          stream=self.main_stream)
        self.set_frontier(np.asarray(frontier, dtype=np.int64))

    def values_to_host(self) -> np.ndarray:
        """The committed vertex values, copied to host memory."""
        self.main_stream.synchronize()
        return self.cupy.asnumpy(self.values)

    def close(self) -> None:
        """Wait for the copies queued ahead for an iteration that did not come
        (:meth:`_prefetch_next_copies`), before the buffers they fill can go
        back to the memory pool."""
        self.copy_stream.synchronize()
        self._prefetched = {}

    def describe(self) -> str:
        """One line: device, plan and kernels."""
        plan = self.plan
        how = "resident" if plan.resident else (
            f"streamed over {plan.n_streams} streams, {len(self.resident_images)} kept resident"
            + (f", {len(self.packed_images)} kept packed, {len(self.packed_host)} streamed "
               "packed" if self.packed_layouts else "")
            + (f", transfers chosen per page ({self.transfer_forced})" if self.selective else "")
            + (f" once the frontier is sparse, releasing {int(self.release_pages.sum())} kept "
               "pages then" if self.release_pages is not None else ""))
        return (f"{self.device.name}: {len(self.pages)} pages {how}, budget "
                f"{plan.budget / 2**20:.0f} MiB (vertex data {plan.vertex_bytes / 2**20:.1f} "
                f"MiB, pages {plan.page_bytes / 2**20:.1f} MiB), shared memory "
                f"{self.shared_bytes:,} B/block"
                + (f", {self.oversize_shards} shards in global memory" if self.oversize_shards
                   else "")
                + (", contributions precomputed" if self.precompute else "")
                + (", warp-combined atomics" if self.warp_combine else ""))


#: store -> each page's values' code in a packed page, found once per store
_PAGE_WEIGHT_CODES = weakref.WeakKeyDictionary()


def page_weight_codes(store) -> np.ndarray:
    """Per page of a weighted store, the narrowest exact code of its values in
    a packed page (:func:`garaphpy.kernels.packed.weight_code`); each page is
    read once per store."""
    from ..kernels import packed

    codes = _PAGE_WEIGHT_CODES.get(store)
    if codes is None:
        codes = np.empty(len(store.pages), np.int8)
        buffer = np.empty(max((p.nbytes for p in store.pages), default=0), np.uint8)
        for info in store.pages:
            codes[info.index] = packed.weight_code(store.read_page(info.index,
                                                                   out=buffer).weights)
        _PAGE_WEIGHT_CODES[store] = codes
    return codes


#: store -> its out-edge CSR in pinned host memory (offsets, targets, values or None),
#: shared by the runs on the store (made once: a copy, the values placed in order)
_PINNED_OUT_EDGES = weakref.WeakKeyDictionary()


def pinned_out_edges(store, with_values: bool) -> tuple:
    """The store's out-edge CSR in pinned host memory, kept for the store's
    lifetime: (offsets int64, targets, values in the targets' order or None).

    The selective transfers' host threads gather from it, and the GPU reads
    it in zero-copy transfers; the values are placed once, on first use
    (:func:`garaphpy.kernels.subgraph.store_out_edge_values`)."""
    from ..kernels import subgraph

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


def interleave(copied: list, kept: list) -> list:
    """The pages of an iteration in launch order: the pages kept on the device
    spread evenly among the copied ones (round the streams, each kept page's
    pull then runs while other streams' copies hold the bus), in their orders."""
    if not copied or not kept:
        return list(copied) + list(kept)
    order, taken = [], 0
    for position, page in enumerate(copied, 1):
        order.append(page)
        due = position * len(kept) // len(copied)
        order.extend(kept[taken:due])
        taken = due
    return order


#: The device memory pool's unit of allocation (CuPy rounds every block up to it).
POOL_BLOCK_BYTES = 512


def pooled_bytes(*arrays) -> int:
    """Device bytes the given arrays take in the memory pool (views of one
    another's memory counted once)."""
    blocks = {}
    for array in arrays:
        pointer = array.data.mem.ptr if array.data.mem is not None else array.data.ptr
        size = array.data.mem.size if array.data.mem is not None else array.nbytes
        blocks[pointer] = -(-max(int(size), 1) // POOL_BLOCK_BYTES) * POOL_BLOCK_BYTES
    return int(sum(blocks.values()))


def stream_slots(order: list, kept: np.ndarray, streams: int) -> list:
    """The stream (and buffer) of each page in ``order``: the copied pages take
    the streams in turn, and so do the kept ones (``kept[k]``), so that every
    buffer holds copies while a kept page's pull runs beside them."""
    turns = [0, 0]
    slots = []
    for k in order:
        kind = int(bool(kept[k]))
        slots.append(turns[kind] % streams)
        turns[kind] += 1
    return slots


def busy_time(windows: list[tuple[float, float]]) -> float:
    """Total length covered by a set of [start, end] windows (the time some
    copy, or some kernel, was under way)."""
    total, reach = 0.0, -np.inf
    for start, end in sorted(windows):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total
