"""The GPU engine: vertex state on the device and the page pipeline (Garaph sections 3, 5.2).

:class:`GpuEngine` is what the driver, the processors and the device loop
use; it is made of parts, each owning one thing:

* :class:`~garaphpy.scheduler.gpu.vertex_state.DeviceVertexState`: the
  vertex values (GlobalVertices' GPU copy), for synchronous runs a second
  buffer committed at the end of each iteration by swapping the two
  (section 3.1), the active flags, the attributes the program reads, the
  split vertices' accumulators and the aggregates;
* :class:`~garaphpy.scheduler.gpu.page_store.PageStore`: the page plan
  (resident when every page and the vertex data fit the budget, else
  streamed through ``n_streams`` device buffers, section 5.2's transmission
  and computation sides, with the pages the budget holds kept on the
  device, packed first), the images, the buffers, the copies queued ahead
  and the pages released for the selective transfers;
* :class:`~garaphpy.scheduler.gpu.launches.Launches`: the shard table and
  the kernels of an iteration (a page's copy and pull on its stream, or one
  pull over every shard of the resident arrays), their timings;
* :class:`~garaphpy.scheduler.gpu.selective.SelectiveTransfers`: beyond the
  paper, for programs declaring ``apply_keeps_best``, each page of a sparse
  iteration skipped, pulled, or its active edges pushed from a compacted
  buffer or read from pinned host memory, priced with transfer rates
  measured at set-up.

Streamed pages come through the run's page source
(:class:`~garaphpy.storage.page_source.PageSource`): the pages it keeps in
host memory sit in pinned host buffers read once; the others are read ahead
from the storage directories (Garaph section 2.2), in the order the GPU
takes them.  When asked (hybrid runs, where the host works on the same
values), the updated vertex range of each page is copied back to pinned
host memory on the page's stream right after its kernel.

Beyond the paper: a run on the GPU alone with resident pages runs its
iterations with small frontiers as sparse passes in a loop kept on the
device (:mod:`~garaphpy.scheduler.device_loop`, :meth:`GpuEngine.iterate_batch`),
and a program declaring ``shortcut_labels`` (CC) ends each pull over every
shard with pointer jumping over its labels (:meth:`GpuEngine.enable_shortcut_labels`);
on a symmetric graph whose pages are resident its first iteration starts
from the labels of a union-find on the device (Afforest:
:mod:`~garaphpy.scheduler.gpu.union_find_start`), which the pull confirms.
"""

from __future__ import annotations

import time

import numpy as np

from ... import config
from ...errors import ConfigError
from ...kernels import gpu as gpu_kernels
from ...program import VertexProgram
from .. import decisions, device_loop
from ..frontier import Frontier
from ..records import IterationRecord, batch_records
from .launches import Launches
from .page_store import (PageStore, compressed_layouts, interleave, kept_edge_bytes,
                         packed_layouts, pinned_array, stream_slots)
from .plan import ENGINE_SWITCHES, VertexMemory, plan_gpu
from .selective import SelectiveTransfers
from .union_find_start import UnionFindStart, device_ids
from .vertex_state import DeviceVertexState

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
        Budget in bytes (default: :func:`garaphpy.config.gpu_budget`
        of the vertex data made first).
    n_streams : int, optional
        Default: ``config.N_STREAMS``.
    precompute : bool
        Let synchronous runs whose gather reads only the source compute the
        contributions once per vertex (same results; set False to study).
    page_source : garaphpy.storage.page_source.PageSource, optional
        Where streamed pages come from (default: every page in memory,
        :class:`~garaphpy.storage.page_source.InMemoryPages`).
    edges_per_thread : int, optional
        Consecutive edges one thread of the pull takes (default
        ``config.GPU_EDGES_PER_THREAD``).
    fuse_resident : bool
        An iteration the GPU runs alone over resident pages is one launch
        (False: a launch per page, for study).
    device_loop : bool
        Iterations with small frontiers may run in a loop kept on the device
        (:func:`decisions.device_loop`; False: every iteration is a pull over
        every page).
    sparse_push : bool
        The device loop pushes a program declaring ``apply_keeps_best``
        (:func:`decisions.gpu_push`; False: it notifies and pulls).
    value_priority : bool
        The push takes the frontier in order of value where the program
        declares it (:func:`decisions.gpu_value_priority`; False: the whole
        frontier each iteration).
    packed_pages, pull_packed, defer_selective_arrays : bool
        How streamed pages are kept (:class:`~garaphpy.scheduler.gpu.page_store.PageStore`).
    selective_when_pays, calibrate_transfer_rates : bool
        How the selective transfers decide
        (:class:`~garaphpy.scheduler.gpu.selective.SelectiveTransfers`).
    turned_off : iterable of str
        Choices of the run's GPU plan made off
        (:data:`~garaphpy.scheduler.plan.GPU_CHOICES`).

    Every switch is on by default; off is for study and tests, and the same
    as naming its choice in ``turned_off``
    (:data:`~garaphpy.scheduler.gpu.plan.ENGINE_SWITCHES`).  The engine makes
    no run-constant choice itself: :func:`~garaphpy.scheduler.gpu.plan.plan_gpu`
    makes them at set-up, into :attr:`gpu_plan`.
    """

    mode = "gpu"

    def __init__(self, graph, program: VertexProgram, source_vertices: np.ndarray,
                 synchronous: bool, *, gpu_memory: int | None = None,
                 n_streams: int | None = None,
                 precompute: bool = True, page_source=None,
                 edges_per_thread: int | None = None, fuse_resident: bool = True,
                 device_loop: bool = True, sparse_push: bool = True,
                 value_priority: bool = True, packed_pages: bool = True,
                 pull_packed: bool = True, defer_selective_arrays: bool = True,
                 selective_when_pays: bool = True, calibrate_transfer_rates: bool = True,
                 turned_off=frozenset()):
        from ...kernels.cuda_program import translate_program
        from ...storage.page_source import InMemoryPages
        from ..cpu_engine import vertex_attributes, weighted_in_degree

        cupy = gpu_kernels.cupy_module()
        self.cupy = cupy
        store = graph.store
        self.store = store
        self.pages = store.pages
        self.num_vertices = store.num_vertices
        self.num_edges = store.num_edges
        self.synchronous = synchronous
        #: the engine copies no vertex range back itself (a hybrid run's GPU processor
        #: hands :meth:`launch_page` the host arrays): the rules' ``host_copies``
        self.host_copies = False
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
        if page_source is None:
            page_source = InMemoryPages(store)
        self.page_source = page_source
        self.rho = config.RHO_IN_MEMORY     # the GPU always pulls; rho prices the CPU's choice
        page_source.use_allocator("gpu", gpu_kernels.pinned_empty)
        need_weighted = "weighted_in_degree" in uses
        attributes = vertex_attributes(
            graph, source_vertices,
            weighted_in_degree(page_source, "gpu") if need_weighted else None)

        def vertex_memory(precompute: bool) -> VertexMemory:
            """The vertex data made on the device for the precompute's choice, what it
            takes there and the run's budget beside it (:func:`config.gpu_budget`)."""
            self.state = DeviceVertexState(
                cupy, self.kernels, self.device, store, self.program,
                sum_name=type(program).sum, synchronous=synchronous, precompute=precompute,
                attributes=attributes, uses=uses)
            self.launches = Launches(cupy, self.kernels, self.device, store, self.state,
                                     precompute=precompute)
            # what these arrays hold in the memory pool (not the pool's use before and
            # after: a collection of an earlier run's arrays in between would be counted off)
            vertex_bytes = pooled_bytes(*self.launches.device_arrays(),
                                        *self.state.device_arrays())
            return VertexMemory(vertex_bytes, config.gpu_budget(
                gpu_memory, vertex_bytes + kept_edge_bytes(store)))

        switches = dict(precompute=precompute, fuse_resident=fuse_resident,
                        device_loop=device_loop, sparse_push=sparse_push,
                        value_priority=value_priority, packed_pages=packed_pages,
                        pull_packed=pull_packed, defer_selective_arrays=defer_selective_arrays,
                        selective_when_pays=selective_when_pays,
                        calibrate_transfer_rates=calibrate_transfer_rates)
        switched_off = {ENGINE_SWITCHES[name] for name, on in switches.items() if not on}
        #: the run's GPU choices (:func:`~garaphpy.scheduler.gpu.plan.plan_gpu`)
        self.gpu_plan = plan = plan_gpu(
            program, self.program, store, synchronous=synchronous,
            reads_weights=self.reads_weights,
            n_streams=config.N_STREAMS if n_streams is None else int(n_streams),
            vertex_memory=vertex_memory,
            packed_layouts=lambda: packed_layouts(store, page_source, self.reads_weights),
            compressed_layouts=lambda: compressed_layouts(store, self.reads_weights),
            host_copies=self.host_copies,
            reads_storage=page_source.reads_storage,
            turned_off=frozenset(turned_off) | switched_off)
        self.precompute_decision = plan.entry("gpu_precompute")
        self.precompute = plan.precompute
        self.selective_entry = plan.entry("selective_transfers")

        # -- pages: resident or streamed --------------------------------------------
        self.page_store = PageStore(cupy, store, page_source, plan,
                                    reads_weights=self.reads_weights,
                                    empty_weights=self.state.empty_weights)
        self.launches.attach(self.page_store, plan.pull_packed)
        self.transfers = SelectiveTransfers(
            cupy, store, self.state, self.page_store, self.launches,
            reads_weights=self.reads_weights, forced=plan.transfer_forced,
            selective_bytes=plan.selective_bytes, when_pays=plan.selective_when_pays,
            calibrate=plan.calibrate_transfer_rates)
        self.transfers.selective = self.page_store.selective_room
        #: called with (iteration, pages launched) after each page of an asynchronous
        #: iteration (checkpoints after pages, set by the checkpointer)
        self.page_done = None
        self._loop = None               # the device loop of sparse iterations, made on first use
        self._loop_entry = None
        self._called_off = False        # the loop's last batch ended on an iteration called off
        self._neighbour_in_degree = None    # decisions.neighbour_in_degree, on first use
        self.resident_selective_entry = None
        #: (order, slots) of the iteration whose next copies :meth:`iterate` queues
        self._next_copies = None
        self._set_up_sparse_iterations()
        #: the union-find start of min-label propagation (``plan.union_find_start``)
        self.union_find = self._make_union_find(attributes[3]) if plan.union_find_start \
            else None

        # -- initial values -----------------------------------------------------------
        # the arrays above were filled on the legacy stream, which ours do not wait for
        cupy.cuda.Device().synchronize()
        self.state.initialize()
        cupy.cuda.Device().synchronize()

    def _set_up_sparse_iterations(self) -> None:
        """What this run's sparse iterations need, as the plan chose: the device
        loop's arrays (a set-up cost, when the run may use them), the
        selective transfers' arrays, pages chosen per page."""
        plan = self.gpu_plan
        self.push_entry = plan.entry("gpu_push")
        self._larger_first = plan.larger_first
        self.priority_entry = plan.entry("gpu_value_priority")
        if plan.device_loop:
            self._loop = self._make_loop()
            self._sparse_inputs(0, "auto")      # the rule's graph statistic, once per store
        transfers = self.transfers
        if plan.entry("resident_selective") is not None:
            self.resident_selective_entry = plan.entry("resident_selective")
            transfers.selective = plan.selective
        if transfers.selective:
            # the out-edge CSR copied into pinned host memory, if the host has room for it
            transfers.setup(plan.selective_pushes_entry(transfers.pinned_out_edges_fit()),
                            plan.largest_wire_bytes)
            if plan.settled_pages:
                transfers.skip_settled_pages()
        self.prefetch_entry = plan.entry("prefetch_next_copies")

    # -- the engine interface of the iteration driver --------------------------------------
    def set_frontier(self, frontier) -> None:
        """Mark the vertices of ``frontier`` (a :class:`~garaphpy.scheduler.frontier.Frontier`,
        or sorted vertex ids) active, and no other: the first iteration's
        frontier, a checkpoint's, or after CPU iterations the host's (which a
        sparse pass and the device loop start from)."""
        if self._loop is not None:
            self._loop.frontier_current = False
        self.state.set_frontier(Frontier.of(frontier, self.state.num_vertices))

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The pull over every shard (the sparse iterations run in
        :meth:`iterate_batch`; when the run may loop them, the refusal is
        recorded)."""
        record.direction = "pull"
        if self._loop_entry is not None and self._loop_entry["choice"]:
            # refused by the rule, or called off by the loop (too many in-edges to pull)
            decisions.note(record, "gpu_sparse_pass", False, called_off=self._called_off,
                           **self._sparse_inputs(self.state.active_out_edges_count,
                                                 direction, record.iteration))
            self._called_off = False

    def enable_shortcut_labels(self, ids: np.ndarray) -> None:
        """End every pull over every shard, from iteration
        ``config.GPU_SHORTCUT_LABELS_AFTER`` on, with pointer jumping over the labels of
        every vertex (a program declaring ``shortcut_labels`` on the GPU alone:
        :func:`decisions.shortcut_labels`); ``ids``: the vertices' user ids,
        increasing."""
        main = self.state.main_stream
        with main:      # where the pulls that read it are ordered
            self.launches.shortcut = device_ids(self.cupy, ids)
        main.synchronize()      # a set-up copy, not the first iteration's

    def _make_union_find(self, ids: np.ndarray) -> UnionFindStart:
        """The union-find start over the resident CSC (its offsets the device
        loop's where the run has it); ``ids``: the vertices' user ids."""
        cupy = self.cupy
        in_offsets = self._loop.in_offsets if self._loop is not None else \
            cupy.asarray(np.ascontiguousarray(self.store.in_offsets, np.int64))
        return UnionFindStart(cupy, in_offsets, self.resident_edges[0], ids,
                              self.program.value_dtype, self.device.multiprocessors,
                              self.gpu_plan.entry("gpu_union_find_start"))

    def _start_from_union_find(self, iteration: int) -> None:
        """The union-find start, where ``iteration`` takes it (the run's first, once)."""
        if self.union_find is not None:
            self.union_find.take(iteration, self.state)

    def _note_union_find(self, record: IterationRecord) -> None:
        """The union-find start's entry in ``record``, the first after it."""
        if self.union_find is not None:
            self.union_find.note(record)

    def _device_loop_entry(self, checkpoints_after_pages: bool | None = None) -> dict:
        """Whether this run may loop sparse iterations on the device
        (:func:`~garaphpy.scheduler.decisions.device_loop`): the plan's entry for
        the run's checkpoints, taken once, on the first batch (checkpoints after
        pages are set up after the engine)."""
        if checkpoints_after_pages is None:
            checkpoints_after_pages = self.page_done is not None
        if self._loop_entry is None:
            self._loop_entry = self.gpu_plan.device_loop_entry(checkpoints_after_pages)
        return self._loop_entry

    def _make_loop(self) -> device_loop.DeviceLoop:
        """The device loop of this run's sparse iterations (push, in order of value,
        several iterations a launch)."""
        priority = 0
        if self.priority_entry["choice"]:
            priority = 2 if self._larger_first else 1
        return device_loop.DeviceLoop(self, push=self.push_entry["choice"],
                                      push_weights=bool(self._push_bytes()[1]),
                                      priority=priority,
                                      persistent=self.gpu_plan.persistent_loop,
                                      fused=self.gpu_plan.fused_push)

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
        them pays), or the device loop takes the iteration
        (:meth:`loop_takes`).  Otherwise every page is pulled, and the
        iteration costs T_GPU whatever the frontier (a hybrid run's policy
        prices it so)."""
        if self.loop_takes(iteration, active_out_edges):
            return True
        return self.transfers.iterates_sparse(active_out_edges)

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance, active_out_edges: int,
                      direction: str = "auto") -> list:
        """Up to ``max_steps`` sparse iterations from ``first_iteration`` in the
        device loop (:class:`~garaphpy.scheduler.device_loop.DeviceLoop`), when the
        run allows it and the frontier is small enough
        (:func:`~garaphpy.scheduler.decisions.gpu_sparse_pass`); the engine
        interface of :meth:`garaphpy.scheduler.driver.SingleDriver.iterate_batch`.

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
                ("the device loop is off (the engine's device_loop)", not entry["enabled"]),
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
        self._start_from_union_find(first_iteration)
        inputs = self._sparse_inputs(0, direction)
        num_edges, forced, factor = self.num_edges, direction, inputs["factor"]
        neighbour_in, pull_factor = inputs["neighbour_in_degree"], inputs["pull_factor"]
        loop_entry = {**entry, "push": self.push_entry, "value_priority": self.priority_entry,
                      "persistent": self.gpu_plan.entry("persistent_loop"),
                      "fused_push": self.gpu_plan.entry("fused_push")}
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
        if records:
            self._note_union_find(records[0])
        self.state.active_vertices = loop.pending_vertices()
        self.state.active_out_edges_count = loop.frontier_out_edges()
        return records

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """One synchronous or asynchronous pull over every page (the run's
        first from a union-find's labels, where the plan says); then the
        copies the next iteration begins with queued ahead, where the run
        does (:func:`decisions.prefetch_next_copies`)."""
        self._next_copies = None
        self._start_from_union_find(record.iteration)
        self._note_union_find(record)
        self._iterate_pages(record, aggregates)
        if self._next_copies is not None:
            self.page_store.prefetch_next_copies(*self._next_copies)
            record.decisions["prefetch_next_copies"]["queued"] = \
                len(self.page_store.prefetched)

    def _iterate_pages(self, record: IterationRecord, aggregates) -> None:
        if self._loop is not None:
            self._loop.frontier_current = False
        self.launches.begin_iteration(record.iteration)
        started = time.perf_counter()
        if self.transfers.iterate_if_chosen(record, aggregates):
            self._record_entries(record)
            return
        if self._fused(record):
            self.end_iteration(record, [self.launches.launch_all_resident(
                aggregates, record.iteration)], aggregates)
            return
        launches, pages = self.launches, self.page_store
        timings = []
        kept = pages.kept_pages
        order = interleave(np.flatnonzero(~kept).tolist(), np.flatnonzero(kept).tolist())
        slots = stream_slots(order, kept, len(pages.streams))
        for position, (k, slot) in enumerate(zip(order, slots)):
            timings.append(launches.launch_page(k, aggregates, record.iteration, slot=slot))
            if self.page_done is not None and not self.synchronous:
                self.page_done(record.iteration, position + 1)
        if self.prefetch_entry["choice"]:
            self._next_copies = order, slots
        # the copies this iteration found queued by the one before, and those it queues
        # (:meth:`iterate`)
        record.decisions["prefetch_next_copies"] = dict(
            self.prefetch_entry, used=sum(timing.prefetched for timing in timings), queued=0)
        self.end_iteration(record, timings, aggregates)
        self.transfers.dense_seconds = time.perf_counter() - started

    def _fused(self, record: IterationRecord) -> bool:
        """Whether an iteration the GPU runs alone is one launch over every shard
        (:func:`~garaphpy.scheduler.decisions.fuse_gpu_launch`, recorded)."""
        entry = self.gpu_plan.fused_launch_entry(self.page_done is not None)
        record.decisions["fused_launch"] = entry
        return entry["choice"]

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
        counters = self.launches.end_iteration(record, timings, aggregates, apply_split,
                                               shortcut)
        self._record_entries(record)
        return counters

    def _record_entries(self, record: IterationRecord) -> None:
        """The run's set-up decisions, in every iteration's record."""
        pages, transfers = self.page_store, self.transfers
        record.decisions["gpu_precompute"] = self.precompute_decision
        if pages.packed_entry is not None:
            record.decisions["packed_pages"] = pages.packed_entry
        if pages.compressed_entry is not None:
            record.decisions["compressed_pages"] = pages.compressed_entry
        if not pages.plan.resident:
            record.decisions["selective_transfers"] = self.selective_entry
        elif self.resident_selective_entry is not None:
            record.decisions["resident_selective"] = self.resident_selective_entry
        if transfers.pushes_entry is not None:
            record.decisions["selective_pushes"] = transfers.pushes_entry
        if pages.deferral_entry is not None:
            record.decisions["defer_selective_arrays"] = pages.deferral_entry
        if transfers.calibration is not None:
            record.decisions["transfer_calibration"] = transfers.calibration

    def values_between_pages(self) -> np.ndarray:
        """The values of an asynchronous iteration once the pages launched so far
        are done, copied to the host."""
        for stream in self.page_store.page_streams:
            stream.synchronize()
        return self.state.values_to_host()

    def restore_checkpoint(self, values: np.ndarray, frontier) -> None:
        """Continue from a checkpoint's committed values and frontier (a
        :class:`~garaphpy.scheduler.frontier.Frontier` or vertex ids)."""
        self.state.restore_values(values)
        self.set_frontier(Frontier.of(frontier, self.state.num_vertices))

    def close(self) -> None:
        """Wait for the copies queued ahead for an iteration that did not come,
        before the buffers they fill can go back to the memory pool."""
        self.page_store.close()

    def describe(self) -> str:
        """One line: device, plan and kernels."""
        pages, transfers, launches = self.page_store, self.transfers, self.launches
        plan = pages.plan
        how = pages.describe() + (
            (f", transfers chosen per page ({transfers.transfer_forced})"
             if transfers.selective else "")
            + (f" once the frontier is sparse, releasing {int(pages.release_pages.sum())} kept "
               "pages then" if pages.release_pages is not None else "")
            if not plan.resident else "")
        return (f"{self.device.name}: {len(self.pages)} pages {how}, budget "
                f"{plan.budget / 2**20:.0f} MiB (vertex data {plan.vertex_bytes / 2**20:.1f} "
                f"MiB, pages {pages.page_bytes / 2**20:.1f} MiB), shared memory "
                f"{launches.shared_bytes:,} B/block"
                + (f", {launches.oversize_shards} shards in global memory"
                   if launches.oversize_shards else "")
                + (", contributions precomputed" if self.precompute else ""))

    pinned_array = staticmethod(pinned_array)


def _forward(part: str, names: tuple) -> None:
    """Read-only attributes of :class:`GpuEngine` that are its part's
    (``engine.values`` is ``engine.state.values``)."""
    for name in names:
        def read(self, name=name):
            return getattr(getattr(self, part), name)
        setattr(GpuEngine, name, property(read, doc=f"``{part}.{name}``"))


#: What the driver, the processors, the device loop and the hybrid vertex state
#: read of the engine's parts.
FORWARDED = {
    "state": ("values", "next", "active", "attrs", "contributions", "aggregate_totals",
              "statistics", "counters", "l1_total", "empty_weights", "main_stream",
              "split_accum", "split_vertices", "num_split", "active_vertices",
              "active_out_edges_count", "num_active", "active_out_edges", "aggregates",
              "split_partials", "checkpoint_state", "values_to_host"),
    "page_store": ("plan", "streams", "kept_streams", "page_streams", "copy_stream",
                   "kept_pages", "packed_kept", "page_bus_bytes", "page_wire_bytes",
                   "packed_layouts", "packed_images", "packed_host", "resident_images",
                   "resident_edges", "device_pages", "device_packed", "raw_buffers",
                   "release_pages", "streamed_bus_bytes", "host_held_pages"),
    "launches": ("begin_iteration", "launch_page", "launch_all_resident", "probe_pages",
                 "timings", "shared_bytes", "oversize_shards",
                 "page_shared_bytes", "pull_packed", "shortcut"),
    "transfers": ("transfer_rates", "sparse_edge_seconds", "selective", "selective_bytes",
                  "calibration", "transfer_forced", "pushes_entry", "selective_most_vertices"),
}
for _part, _names in FORWARDED.items():
    _forward(_part, _names)
