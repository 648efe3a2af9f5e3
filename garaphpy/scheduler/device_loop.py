"""The GPU's sparse iterations in a loop kept on the device.

Garaph's GPU engine (section 3) pulls over every shard each iteration, and
the host reads the iteration's statistics back before it decides the next
one.  On graphs of thousands of iterations with small frontiers (road
networks, grids, meshes) that round trip, and the pull over edges no active
vertex touches, are the run.  Subway (EuroSys'20, section 3) moves only the
active subgraph and iterates asynchronously for the same reason; Gunrock-style
engines keep the frontier on the device.  Here:

* **work proportional to the frontier**: an iteration whose frontier has few
  out-edges (:func:`~garaphpy.scheduler.decisions.gpu_sparse_pass`) is a
  sparse pass over them (the out-edges in CSR, built on the device from the
  resident CSC at set-up).  For a program declaring ``apply_keeps_best``
  (BFS, SSSP, CC, SSWP; :func:`~garaphpy.scheduler.decisions.gpu_push`) it
  is a push: each out-edge combines its gather into its destination's
  accumulator with the sum's atomic, and each vertex reached is applied in
  place.  Otherwise it is a notify-pull: the out-edges mark their
  destinations, each queued once, and each queued vertex gathers over all
  of its in-edges (the resident CSC) and is applied: the CPU engine's
  notify-pull.  Either way the values, activity and counters are those of
  the pull over every shard;
* **in order of value**: for a program declaring ``value_priority`` run
  asynchronously (SSSP; :func:`~garaphpy.scheduler.decisions.gpu_value_priority`)
  the push takes its frontier in buckets of values (near-far delta-stepping,
  Davidson et al., IPDPS'14; HyTGraph's priority scheduling): a vertex
  activated with a value beyond the bucket's threshold waits in a far queue
  (flagged, queued once), and when the frontier runs dry the threshold moves
  up by the width (:func:`~garaphpy.scheduler.decisions.gpu_bucket_width`)
  from the least waiting value, and the far queue is split into the next
  frontier, the vertices still waiting, and those taken at their present
  value in an earlier bucket (dropped).  A vertex is then rarely set off
  from a value it will lose (grid 2000x2000 SSSP: 40M edges pushed instead
  of 1,511M); the values are those of any order;
* **hubs go to the pull**: an iteration is called off on the device (and
  run by the host as a pull over every shard) when a vertex of the frontier,
  or a notified one, has more edges than one group of lanes should take
  (:func:`~garaphpy.scheduler.decisions.gpu_span_edges`), or when the
  notified vertices have too many in-edges in all
  (:func:`~garaphpy.scheduler.decisions.gpu_pull_edges`);
* **the loop on the device**: the frontier (two queues, by parity), the
  counters and the stop test live in device memory (the loop state below);
  every kernel of an iteration is a no-op once the loop has stopped, so the
  host queues many iterations without waiting and reads their records back
  in batches, turning each group's records into
  :class:`~garaphpy.scheduler.records.IterationRecord` objects while the
  next group runs.  After ``config.GPU_LOOP_GRAPH_AFTER`` iterations
  launched one by one (in groups of 1, 2, 4, ...: an iteration called off
  wastes little), the run captures ``config.GPU_LOOP_GRAPH_ITERATIONS``
  iterations in one CUDA graph and launches that (one host call for many
  iterations);
* **several iterations a launch**: for the push
  (:func:`~garaphpy.scheduler.decisions.gpu_persistent_loop`) a persistent
  cooperative kernel (``kernels/cuda/persistent.cu``) runs the same passes,
  a grid-wide barrier between the passes of an iteration and between
  iterations, up to :data:`PERSISTENT_ITERATIONS` iterations a launch and
  leaving at once when the loop stops (a persistent kernel with a grid
  barrier, as in the GPU graph engines that keep BFS levels on the device);
  while the frontier the host last read is small enough
  (:func:`~garaphpy.scheduler.decisions.gpu_persistent_launch`) the host
  queues it instead of the graphs.  Records, state and values are those of
  the graphs: the kernel calls the same device functions;
* **one pass a level**: for an asynchronous run whose activate is "the value
  changed" (:func:`~garaphpy.scheduler.decisions.gpu_fused_push`) a
  persistent launch fuses the push and the apply: each out-edge applies its
  gather to its destination's value with a compare-and-swap, the vertex
  changed first in the level (a stamp per vertex) is queued once, and every
  block takes the stop test itself from the iteration's counters (three
  rotating slots), so a level is one grid barrier: a level of a road
  network or a grid is a chain of dependent memory round trips, and this
  removes half of them.  The state and records the host reads are the
  loop's (a record's ``updated_vertices`` are the vertices changed);
* the loop stops after an iteration that activates no vertex, whose L1
  change is below the tolerance, that reaches the batch's end (the run's
  iteration limit, the next checkpoint, ``config.GPU_LOOP_MAX_STEPS``), or
  whose frontier is too large for the sparse pass: the run then goes on with
  the pull over every shard, launched from the host (the activity bitmap is
  set from the frontier queue and the far queues, and a synchronous
  notify-pull's last values committed, as the batch ends).

The loop state is one ``int64`` array (:data:`LOOP_FIELDS`, the same order as
``kernels/cuda/sparse.cu``); each iteration writes one row of
:data:`RECORD_FIELDS` into the records array.
"""

from __future__ import annotations

import time

import numpy as np

from .. import config
from ..kernels import gpu as gpu_kernels
from . import decisions

#: The device loop's state, one int64 each, in the kernels' order.
LOOP_FIELDS = ("iteration", "end", "stop", "parity", "frontier_size_0", "frontier_size_1",
               "notified_0", "notified_1", "first", "dense_edges", "pull_edges", "capacity",
               "frontier_out_edges", "activated", "activated_out_edges", "edges_pulled", "l1",
               "edges_notified", "tolerance", "blocks_done", "frontier_max_degree_0",
               "frontier_max_degree_1", "notified_max_degree", "span_edges", "priority",
               "bucket_width", "threshold", "floor", "far_parity", "far_size_0", "far_size_1",
               "far_min", "split_due", "splits")
FIELD = {name: i for i, name in enumerate(LOOP_FIELDS)}

#: One iteration's record, as the last block of its pull writes it.
RECORD_FIELDS = ("active_vertices", "active_out_edges", "updated_vertices", "edges_pulled",
                 "activated", "activated_out_edges", "l1_change", "edges_notified")

#: Why the loop stopped, by the state's ``stop`` code.
STOP_REASONS = ("running", "no active vertex", "end of batch", "tolerance", "dense frontier",
                "record capacity", "dense pull")

#: Threads per block of the loop's kernels (warp-per-vertex passes).
THREADS = 256

#: Iterations one launch of the persistent kernel may run: the host reads the
#: records and the state between launches (two in flight), so they reach it in
#: groups, and a stop is seen within two launches.
PERSISTENT_ITERATIONS = 128

#: Blocks a multiprocessor of the persistent kernel
#: (:func:`~garaphpy.scheduler.decisions.gpu_persistent_blocks`; None: as many
#: as are co-resident): the graphs' grid (2 an SM).
PERSISTENT_BLOCKS_PER_MULTIPROCESSOR = 2

#: Dynamic shared memory of the apply's block totals (bytes).
APPLY_SHARED_BYTES = 768

#: The fused push stamps a vertex with 2 * (iteration + 1) in 32 bits: its
#: launches stop short of this iteration (the two-pass launches go on).
FUSED_ITERATION_LIMIT = 2**31 - 2

#: ``cudaDevAttrCooperativeLaunch``.
_COOPERATIVE_LAUNCH_ATTRIBUTE = 95


def extra_bytes(num_vertices: int, num_edges: int, vertex_itemsize: int,
                accum_itemsize: int = 0, weight_itemsize: int = 0,
                priority: bool = False, fused: bool = False) -> int:
    """Device memory the loop adds to a resident run: out-edge offsets and
    targets (CSR), in-edge offsets, notified flags, two notified and two
    frontier queues, its state and records; for the push, the accumulators
    (``accum_itemsize``) and the edge values in the out-edges' order
    (``weight_itemsize``; 0: none); in order of value (``priority``), two
    far queues and their flags; for the fused push (``fused``), a stamp per
    vertex and three slots of counters."""
    n = max(num_vertices, 1)
    return (2 * 8 * (n + 1) + vertex_itemsize * num_edges + 4 * n + 4 * vertex_itemsize * n
            + 8 * (len(LOOP_FIELDS) + len(RECORD_FIELDS) * config.GPU_LOOP_MAX_STEPS)
            + accum_itemsize * (n + 4) + weight_itemsize * num_edges
            + (2 * vertex_itemsize + 4) * n * bool(priority)
            + (4 * n + 3 * 8 * len(LOOP_FIELDS)) * bool(fused))


class DeviceLoop:
    """The sparse iterations of one GPU engine's run, looped on the device.

    Parameters
    ----------
    engine : garaphpy.scheduler.gpu_engine.GpuEngine
        A run with resident pages (its whole-graph edge arrays are the CSC
        the sparse pull reads).
    push : bool
        Run the sparse iterations as a push over the frontier's out-edges
        (a program declaring ``apply_keeps_best``) rather than a notify and
        a pull.
    push_weights : bool
        The push's gather reads edge values (kept in the out-edges' order).
    priority : {0, 1, 2}
        The push takes the frontier in order of value (a program declaring
        ``value_priority``, run asynchronously:
        :func:`~garaphpy.scheduler.decisions.gpu_value_priority`), smaller
        values first (1) or larger (2), in buckets of
        :func:`~garaphpy.scheduler.decisions.gpu_bucket_width`; 0: the whole
        frontier each iteration.
    persistent : bool
        The push may run several iterations a launch in the persistent kernel
        (:func:`~garaphpy.scheduler.decisions.gpu_persistent_loop`), where the
        device launches it cooperatively.
    fused : bool
        Its launches run each iteration as one fused pass
        (:func:`~garaphpy.scheduler.decisions.gpu_fused_push`).
    """

    def __init__(self, engine, push: bool = False, push_weights: bool = False,
                 priority: int = 0, persistent: bool = False, fused: bool = False):
        started = time.perf_counter()
        cupy = engine.cupy
        store = engine.store
        self.engine = engine
        self.cupy = cupy
        n = engine.num_vertices
        vertex_dtype = store.vertex_dtype
        self.num_vertices = n
        self.out_offsets = cupy.asarray(np.ascontiguousarray(store.out_offsets, np.int64))
        self.in_offsets = cupy.asarray(np.ascontiguousarray(store.in_offsets, np.int64))
        # the out-edges are made on the device from the resident in-edges
        self.push = bool(push)
        sources, _, weights = engine.resident_edges
        self.out_targets = cupy.empty(max(engine.num_edges, 1), vertex_dtype)
        self.out_weights = cupy.empty(max(engine.num_edges, 1), weights.dtype) \
            if push_weights else engine.empty_weights
        cursor = cupy.zeros(max(n, 1), np.uint32)
        weight_total = cupy.zeros(1, np.float64)
        wide = (8 * engine.device.multiprocessors,)
        engine.kernels.loop_out_edges(wide, (THREADS,), (
            self.in_offsets, sources, weights, self.out_offsets, cursor, self.out_targets,
            self.out_weights, np.int32(bool(push_weights)), weight_total, np.int64(n)))
        del cursor
        if priority not in (0, 1, 2) or (priority and not push):
            raise ValueError(f"priority={priority!r}: expected 0, or 1 or 2 with the push")
        self.priority = int(priority)
        #: the width of a bucket of values (None: the whole frontier each iteration)
        self.bucket_width = None
        if self.priority:
            mean_edge_value = float(weight_total.get()[0]) / engine.num_edges \
                if push_weights and engine.num_edges else None
            self.bucket_width = decisions.gpu_bucket_width(
                config.GPU_BUCKET_WIDTH, mean_edge_value, engine.num_edges / max(n, 1),
                config.GPU_BUCKET_FACTOR)
        self.far = cupy.zeros(2 * max(n, 1) if self.priority else 1, vertex_dtype)
        self.far_flags = cupy.zeros(max(n, 1) if self.priority else 1, np.uint32)
        self.accum = cupy.empty(n + 4 if push else 1, engine.program.accum_dtype)
        if push:
            engine.kernels.loop_identity(wide, (THREADS,), (self.accum, np.int64(n + 4)))
        self.notified_flags = cupy.zeros(max(n, 1), np.uint32)
        self.notified = cupy.zeros(2 * max(n, 1), vertex_dtype)
        self.frontiers = cupy.zeros(2 * max(n, 1), vertex_dtype)
        self.capacity = int(config.GPU_LOOP_MAX_STEPS)
        self.state = cupy.zeros(len(LOOP_FIELDS), np.int64)
        self.records = cupy.zeros((self.capacity, len(RECORD_FIELDS)), np.int64)
        self.host_states = [engine.pinned_array(len(LOOP_FIELDS), np.int64) for _ in range(2)]
        for host in self.host_states:
            host[:] = 0
        self.host_records = engine.pinned_array(self.capacity * len(RECORD_FIELDS),
                                                np.int64).reshape(self.capacity, -1)
        self.events = [cupy.cuda.Event(), cupy.cuda.Event()]
        #: whether the frontier queue of the state's parity is the run's frontier
        #: (False after a pull over every shard, or a frontier set from the host)
        self.frontier_current = False
        self.launched_singly = 0
        self._next_direct = 1
        self.graphs = {}            # (values, out) pointers -> captured CUDA graph
        self.graph_failure = None   # why capturing failed, if it did
        multiprocessors = engine.device.multiprocessors
        self.grid = (max(1, 2 * multiprocessors),)
        #: lanes per vertex: the power of two nearest above the mean degree, at most a warp
        mean_degree = engine.num_edges / max(n, 1)
        self.group_shift = int(min(5, max(0, np.ceil(np.log2(max(mean_degree, 1.0))))))
        #: the most edges of one vertex a sparse pass takes with one group of lanes
        #: (:func:`~garaphpy.scheduler.decisions.gpu_span_edges`)
        self.span_edges = decisions.gpu_span_edges(
            engine.num_edges, 1 << self.group_shift, self.grid[0] * THREADS,
            config.GPU_SPARSE_SPAN_FACTOR)
        self.last_state = self.host_states[0].copy()
        #: the persistent kernel's grid (blocks; 0: the loop launches graphs alone), and
        #: why it does not run where it cannot
        self.persistent_blocks, self.persistent_failure = 0, None
        self.persistent_kernel = None
        if persistent and self.push:
            self.persistent_kernel, self.persistent_failure = gpu_kernels.persistent_kernel(
                engine.kernels)
            if self.persistent_kernel is not None:
                self.persistent_blocks, self.persistent_failure = self._persistent_grid()
        self.persistent_launches = self.group_launches = 0
        self._known_frontier_edges = 0
        #: the fused push's stamps (one per vertex, none yet) and slots of counters
        self.fused = bool(fused and self.persistent_blocks)
        self.stamps = cupy.zeros(max(n, 1) if self.fused else 1, np.uint32)
        self.fused_slots = cupy.zeros(3 * len(LOOP_FIELDS) if self.fused else 1, np.int64)
        self._fused_now = False
        cupy.cuda.get_current_stream().synchronize()
        #: seconds taken to set the loop up (its arrays on the device)
        self.setup_seconds = time.perf_counter() - started

    def _persistent_grid(self) -> tuple[int, str | None]:
        """Blocks of the persistent kernel on this device, or 0 and why none."""
        kernel = self.persistent_kernel
        runtime, driver = self.cupy.cuda.runtime, self.cupy.cuda.driver
        device = self.cupy.cuda.Device().id
        try:
            if not runtime.deviceGetAttribute(_COOPERATIVE_LAUNCH_ATTRIBUTE, device):
                return 0, "the device has no cooperative launch"
            co_resident = driver.occupancyMaxActiveBlocksPerMultiprocessor(
                kernel.kernel.ptr, THREADS, APPLY_SHARED_BYTES)
        except Exception as error:      # a cupy or driver without these calls
            return 0, f"{type(error).__name__}: {error}"
        blocks = decisions.gpu_persistent_blocks(
            co_resident, self.engine.device.multiprocessors,
            PERSISTENT_BLOCKS_PER_MULTIPROCESSOR)
        return blocks, None if blocks else "no block of it fits a multiprocessor"

    def _launch_persistent(self, stream, steps: int) -> None:
        """Queue one launch of the persistent kernel: up to ``steps`` iterations."""
        engine = self.engine
        args = (self.state, self.records, self.out_offsets, self.out_targets, self.out_weights,
                self.frontiers, self.notified_flags, self.notified, self.accum, self.far,
                self.far_flags, engine.values) + engine.attrs + (
                engine.aggregate_totals, self.fused_slots, self.stamps,
                np.int32(self._fused_now), np.int32(self.group_shift),
                np.int64(self.num_vertices), np.int64(steps))
        # (cupy's cooperative launch: cuLaunchCooperativeKernel, every block co-resident)
        self.persistent_kernel.kernel((self.persistent_blocks,), (THREADS,), args,
                      shared_mem=APPLY_SHARED_BYTES, stream=stream,
                      enable_cooperative_groups=True)

    # -- one iteration's launches ------------------------------------------------------
    def _launch_iteration(self, stream) -> None:
        engine = self.engine
        kernels = engine.kernels
        n = np.int64(self.num_vertices)
        sources, _, weights = engine.resident_edges
        out = engine.next
        block = (THREADS,)
        shift = np.int32(self.group_shift)
        if self.push:
            with stream:
                if self.priority:
                    kernels.priority_split(self.grid, block, (
                        self.state, self.far, self.far, self.far_flags, self.frontiers,
                        engine.values, engine.attrs[0], n))
                kernels.sparse_push(self.grid, block, (
                    self.state, self.out_offsets, self.out_targets, self.out_weights,
                    self.frontiers, self.notified_flags, self.notified, self.accum,
                    engine.values) + engine.attrs + (shift, n))
                kernels.sparse_apply(self.grid, block, (
                    self.state, self.records, self.notified, self.notified_flags,
                    self.frontiers, self.accum, self.far, self.far_flags,
                    engine.values) + engine.attrs
                    + (engine.aggregate_totals, n), shared_mem=APPLY_SHARED_BYTES)
            return
        with stream:
            kernels.sparse_notify(self.grid, block, (
                self.state, self.out_offsets, self.out_targets, self.in_offsets, self.frontiers,
                self.notified_flags, self.notified, out, engine.values,
                np.int32(engine.synchronous), shift, n))
            kernels.sparse_pull(self.grid, block, (
                self.state, self.records, self.in_offsets, sources, weights, self.notified,
                self.notified_flags, self.frontiers, engine.values, out) + engine.attrs
                + (engine.aggregate_totals, shift, n), shared_mem=768)

    def _graph(self, stream):
        """The captured graph of ``config.GPU_LOOP_GRAPH_ITERATIONS`` iterations for
        the engine's current buffers, or None (not yet due, or capture failed)."""
        if self.graph_failure is not None or self.launched_singly < config.GPU_LOOP_GRAPH_AFTER:
            return None
        engine = self.engine
        key = (engine.values.data.ptr, engine.next.data.ptr)
        graph = self.graphs.get(key)
        if graph is None:
            try:
                stream.begin_capture()
                try:
                    for _ in range(config.GPU_LOOP_GRAPH_ITERATIONS):
                        self._launch_iteration(stream)
                finally:
                    graph = stream.end_capture()
            except Exception as error:      # a CUDA or cupy without stream capture
                self.graph_failure = f"{type(error).__name__}: {error}"
                return None
            self.graphs[key] = graph
        return graph

    def _launch_group(self, stream) -> int:
        """Queue one group of iterations; returns how many were queued."""
        if self.persistent_blocks and decisions.gpu_persistent_launch(
                self._known_frontier_edges, self.persistent_blocks * THREADS):
            self._launch_persistent(stream, PERSISTENT_ITERATIONS)
            self.persistent_launches += 1
            return PERSISTENT_ITERATIONS
        self.group_launches += 1
        graph = self._graph(stream)
        if graph is not None:
            graph.launch(stream)
            return config.GPU_LOOP_GRAPH_ITERATIONS
        # a batch's first groups grow 1, 2, 4, ...: an iteration called off wastes little
        steps = max(1, min(config.GPU_LOOP_GRAPH_ITERATIONS, config.GPU_LOOP_GRAPH_AFTER,
                           self._next_direct))
        self._next_direct = 2 * steps
        for _ in range(steps):
            self._launch_iteration(stream)
        self.launched_singly += steps
        return steps

    # -- a batch -----------------------------------------------------------------------
    def run(self, first_iteration: int, max_steps: int, tolerance: float | None,
            dense_edges: int, pull_edges: int, frontier_out_edges: int,
            on_rows=None, span_edges: int | None = None) -> tuple[int, str, float]:
        """Run up to ``max_steps`` sparse iterations from ``first_iteration``.

        The loop stops after an iteration whose new frontier has more than
        ``dense_edges`` out-edges, and calls an iteration off (it is not run,
        and no record is written) when its notified vertices have more than
        ``pull_edges`` in-edges; then the activity bitmap is set from the
        frontier, and synchronous runs commit the last iteration's values.

        Parameters
        ----------
        span_edges : int, optional
            The most edges of one vertex the pass takes (default: the loop's
            :func:`~garaphpy.scheduler.decisions.gpu_span_edges`).
        on_rows : callable, optional
            Called with each block of iteration records (an int64 array of
            :data:`RECORD_FIELDS` columns, ``l1_change`` as a float64's
            bits), in order, as soon as they are on the host: the host turns
            one group's records into whatever it keeps while the GPU runs the
            next group.

        Returns
        -------
        taken : int
            Iterations run.
        reason : str
            Why the loop stopped (:data:`STOP_REASONS`).
        seconds : float
            Wall time of the batch.
        """
        cupy, engine = self.cupy, self.engine
        stream = engine.main_stream
        started = time.perf_counter()
        steps = max(1, min(int(max_steps), self.capacity))
        header = self.host_states[0]
        header[:] = self.last_state
        if not self.frontier_current:       # the frontier queue is made from the bitmap
            header[FIELD["parity"]] = 0
            for name in ("frontier_size_0", "frontier_size_1", "frontier_max_degree_0",
                         "frontier_max_degree_1"):
                header[FIELD[name]] = 0
        for name in ("notified_0", "notified_1", "activated", "activated_out_edges",
                     "edges_pulled", "l1", "edges_notified", "stop", "blocks_done",
                     "notified_max_degree"):
            header[FIELD[name]] = 0
        header[FIELD["priority"]] = self.priority
        header[FIELD["bucket_width"]] = np.float64(self.bucket_width or 0.0).view(np.int64)
        if not self.frontier_current:       # entered afresh: no bucket open, nothing waits
            for name in ("far_parity", "far_size_0", "far_size_1", "split_due"):
                header[FIELD[name]] = 0
            header[FIELD["far_min"]] = -1
            header[FIELD["threshold"]] = header[FIELD["floor"]] = np.float64(-np.inf).view(
                np.int64)
        header[FIELD["iteration"]] = first_iteration
        header[FIELD["first"]] = first_iteration
        header[FIELD["end"]] = first_iteration + steps
        header[FIELD["dense_edges"]] = dense_edges
        header[FIELD["pull_edges"]] = pull_edges
        header[FIELD["span_edges"]] = self.span_edges if span_edges is None else span_edges
        header[FIELD["capacity"]] = self.capacity
        # (entered in order of value, the frontier is the first bucket's: its split counts them)
        header[FIELD["frontier_out_edges"]] = 0 if self.priority and not self.frontier_current \
            else frontier_out_edges
        header[FIELD["tolerance"]] = np.float64(
            -np.inf if tolerance is None else tolerance).view(np.int64)
        runtime = cupy.cuda.runtime
        memcpy = runtime.memcpyAsync
        memcpy(self.state.data.ptr, header.ctypes.data, header.nbytes,
               runtime.memcpyHostToDevice, stream.ptr)
        if not self.frontier_current and self.priority:
            # the active vertices wait in the far queue; the first bucket takes the lowest
            runtime.memsetAsync(self.far_flags.data.ptr, 0, self.far_flags.nbytes, stream.ptr)
            with stream:
                engine.kernels.loop_enter_far(self.grid, (THREADS,), (
                    self.state, engine.active, engine.values, self.far_flags, self.far,
                    np.int64(self.num_vertices)))
                engine.kernels.loop_turn((1,), (32,), (self.state,))
        elif not self.frontier_current:
            with stream:
                engine.kernels.loop_enter(self.grid, (THREADS,), (
                    self.state, engine.active, engine.attrs[0], self.frontiers,
                    np.int64(self.num_vertices)))
        stream.synchronize()        # the header's pinned buffer is reused below
        self.frontier_current = True
        self._next_direct = 1
        self._known_frontier_edges = int(header[FIELD["frontier_out_edges"]])
        self._fused_now = self.fused and first_iteration + steps < FUSED_ITERATION_LIMIT
        self.persistent_launches = self.group_launches = 0
        row_bytes = len(RECORD_FIELDS) * 8
        delivered = 0

        def deliver(done: int) -> int:
            if on_rows is not None and done > delivered:
                on_rows(self.host_records[delivered:done])
            return max(done, delivered)

        # two groups in flight: the state (and the records) after group g - 1 are read
        # while group g runs
        queued, group = 0, 0
        while True:
            before = queued
            queued += self._launch_group(stream)
            rows = min(queued, steps) - min(before, steps)
            if rows > 0:
                memcpy(self.host_records[before:].ctypes.data,
                       self.records.data.ptr + before * row_bytes, rows * row_bytes,
                       runtime.memcpyDeviceToHost, stream.ptr)
            slot = group % 2
            memcpy(self.host_states[slot].ctypes.data, self.state.data.ptr,
                   self.state.nbytes, runtime.memcpyDeviceToHost, stream.ptr)
            self.events[slot].record(stream)
            if queued >= steps:
                break
            if group >= 1:
                previous = 1 - slot
                self.events[previous].synchronize()
                state = self.host_states[previous]
                delivered = deliver(int(state[FIELD["iteration"]]) - first_iteration)
                self._known_frontier_edges = int(state[FIELD["frontier_out_edges"]])
                if state[FIELD["stop"]]:
                    break
            group += 1
        stream.synchronize()
        final = self.host_states[slot]
        self.last_state = final.copy()
        self._leave(stream, final)
        taken = int(final[FIELD["iteration"]]) - first_iteration
        deliver(taken)
        stream.synchronize()
        reason = STOP_REASONS[int(final[FIELD["stop"]])]
        return taken, reason, time.perf_counter() - started

    def _leave(self, stream, final: np.ndarray) -> None:
        """After a batch: the last iteration's values committed (synchronous
        runs), and the activity bitmap set to the frontier."""
        engine, n = self.engine, self.num_vertices
        parity = int(final[FIELD["parity"]])
        size = int(final[FIELD["frontier_size_0"] + parity])
        committed = int(final[FIELD["notified_0"] + 1 - parity])
        if not engine.synchronous or self.push:      # applied in place
            committed = 0
        self.cupy.cuda.runtime.memsetAsync(engine.active.data.ptr, 0, engine.active.nbytes,
                                           stream.ptr)
        with stream:
            engine.kernels.loop_leave(self.grid, (THREADS,), (
                self.notified[(1 - parity) * n:], np.int64(committed), engine.next,
                engine.values, self.frontiers[parity * n:], np.int64(size), engine.active))
            for far_parity in (0, 1):       # the vertices waiting for their bucket are active
                waiting = int(final[FIELD["far_size_0"] + far_parity]) if self.priority else 0
                if waiting:
                    engine.kernels.loop_leave(self.grid, (THREADS,), (
                        self.notified, np.int64(0), engine.next, engine.values,
                        self.far[far_parity * n:], np.int64(waiting), engine.active))
        self.last_state[FIELD["notified_0"]] = self.last_state[FIELD["notified_1"]] = 0

    def frontier_size(self) -> int:
        """Vertices in the frontier after the last batch."""
        state = self.last_state
        return int(state[FIELD["frontier_size_0"] + int(state[FIELD["parity"]])])

    def pending_vertices(self) -> int:
        """Vertices active after the last batch: the frontier's, and those waiting
        in the far queues for their bucket (at most: a vertex taken in an
        earlier bucket may still hold a place there)."""
        state = self.last_state
        waiting = int(state[FIELD["far_size_0"]]) + int(state[FIELD["far_size_1"]]) \
            if self.priority else 0
        return self.frontier_size() + waiting

    def buckets(self) -> int:
        """Buckets of values opened since the loop was made (0 without priority)."""
        return int(self.last_state[FIELD["splits"]])

    def frontier_out_edges(self) -> int:
        """The frontier's out-edges after the last batch."""
        return int(self.last_state[FIELD["frontier_out_edges"]])

    def describe(self) -> str:
        """How the loop runs its iterations, and launches them (in the last batch)."""
        how = "push" if self.push else "notify-pull"
        if self.persistent_launches and self._fused_now:
            how = "fused push"
        if self.priority:
            how += f" in buckets of values of width {self.bucket_width:g}"
        if self.persistent_launches:
            how += f", {self.persistent_launches} launches of a persistent kernel of " \
                   f"{self.persistent_blocks} blocks (up to {PERSISTENT_ITERATIONS} " \
                   "iterations each)"
            if not self.group_launches:
                return how
            how += f" and {self.group_launches} groups"
        elif self.persistent_failure is not None:
            how += f" (no persistent kernel: {self.persistent_failure})"
        if self.graph_failure is not None:
            return f"{how}, kernels launched one by one (graph capture failed: " \
                   f"{self.graph_failure})"
        if self.graphs:
            return f"{how}, CUDA graphs of {config.GPU_LOOP_GRAPH_ITERATIONS} iterations"
        return f"{how}, kernels launched one by one"
