"""A partition's worker that pulls on its GPU (Garaph sections 3.1, 4.1; a partitioned run's GPU worker).

:class:`GpuPartitionWorker` is a
:class:`~garaphpy.distributed.worker.PartitionWorker` (the same actor
protocol: steps, pairs, votes, checkpoints) whose pulls run on the Dask
worker's GPU.  It reads its partition's pieces from the store as the CPU
worker does, then uploads, once, its in-edges as a CSC over its owned
destination range (offsets, sources, and the edge values where the program
reads them), the vertex attributes the program reads and a full-length value
array (:class:`DevicePartition`).

An iteration (:meth:`DevicePartition.pull`) writes the pairs received for it
into the device's values, computes the source-side contributions where the
one-process rule says (:func:`garaphpy.scheduler.decisions.precompute_source_gathers`,
in float64 as the CPU workers keep them), runs one kernel over the owned
vertices that gathers over each vertex's in-edges with the program's own
functions translated to CUDA (:mod:`garaphpy.kernels.cuda_program`, the
kernels of ``kernels/cuda/partition.cu``) and applies them, commits the owned
values while flagging those that changed, takes the partition's share of the
next iteration's aggregates, and compacts the changed (index, value) pairs on
the device (``cupy.flatnonzero``) before one copy to the host, which sends
them.  The host keeps a copy of the values (the pairs received and sent are
written into it), so checkpoints, restores and the union-find start are the
CPU worker's.

The GPU worker pulls every owned vertex each iteration (no notify-pull, no
settled vertices skipped): for the programs that skip (``apply_keeps_best``)
the values are those of the skipping CPU workers beside it, as the skips
change no value.  The rows it returns name its ``processor``, ``"gpu"``.
"""

from __future__ import annotations

import time

import numpy as np

from .exchange import WorkerError, aggregate_monoids, shares_of_values
from .worker import PartitionWorker, WorkerSetup, _worker_address

#: Threads of a block of the partition's kernels (partition.cu's launch bound).
THREADS_PER_BLOCK = 256
#: Blocks per multiprocessor the grid-stride kernels are launched with, at most.
BLOCKS_PER_MULTIPROCESSOR = 16


def gather_lanes_shift(edges: int, vertices: int) -> int:
    """log2 of the lanes of one warp that gather one vertex's in-edges: the
    partition's mean in-degree rounded up to a power of two, 1 to 32 (the
    device loop's sparse pull's rule, :mod:`garaphpy.scheduler.device_loop`)."""
    mean_degree = edges / max(vertices, 1)
    return int(min(5, max(0, np.ceil(np.log2(max(mean_degree, 1.0))))))


class DevicePartition:
    """A partition's in-edges and vertex data on the GPU, and its iteration.

    Parameters
    ----------
    cupy : module
    program : VertexProgram
    store : garaphpy.storage.store.Store
    first, end : int
        The owned vertices.
    local_offsets : int64 array of ``end - first + 1``
        The owned vertices' in-edge offsets, from the partition's first edge.
    sources, weights : arrays
        The partition's in-edges in CSC order (``weights`` None where the
        program does not read them).
    attrs : tuple of arrays
        The worker's vertex attributes (out-degree, in-degree, weighted
        in-degree, user ids, is-source).
    values : array
        Every vertex's value (the host's copy).
    precompute : bool
        The source-side contributions are computed before each pull.
    """

    def __init__(self, cupy, program, store, *, first: int, end: int,
                 local_offsets: np.ndarray, sources: np.ndarray, weights, attrs: tuple,
                 values: np.ndarray, precompute: bool):
        from ..kernels import gpu as gpu_kernels
        from ..kernels.cuda_program import translate_program

        self.cupy = cupy
        self.first, self.end = first, end
        self.num_vertices = n = values.shape[0]
        self.translated = translated = translate_program(
            program, weight_dtype=store.weight_dtype if store.weighted else np.float64,
            degree_dtype=store.out_degree.dtype)
        self.kernels = gpu_kernels.compile_partition_kernels(translated, store.vertex_dtype)
        self.device = gpu_kernels.DeviceInfo.current()
        self.shared_bytes = gpu_kernels.TOTALS_SHARED_BYTES
        self.precompute = precompute
        self.group_shift = gather_lanes_shift(int(sources.size), end - first)
        uses = translated.uses

        def attribute(array, used: bool):
            return cupy.asarray(np.ascontiguousarray(array)) if used else \
                cupy.zeros(1, dtype=array.dtype)

        out_degree, in_degree, weighted_in, vertex_ids, is_source = attrs
        self.attrs = (
            cupy.asarray(out_degree),       # gp_update counts the activated out-edges
            attribute(in_degree, bool({"in_degree", "src_in_degree", "dst_in_degree"} & uses)),
            attribute(weighted_in, "weighted_in_degree" in uses),
            attribute(vertex_ids, "vertex" in uses),
            attribute(is_source, "is_source" in uses))
        self.offsets = cupy.asarray(np.ascontiguousarray(local_offsets, np.int64))
        self.sources = cupy.asarray(sources)
        self.weights = cupy.asarray(weights) if weights is not None else \
            cupy.zeros(1, dtype=translated.weight_dtype)
        self.values = cupy.asarray(values)
        self.next = cupy.empty_like(self.values)
        self.active = cupy.zeros(max(n, 1), np.uint8)
        self.changed = cupy.zeros(max(end - first, 1), np.uint8)
        self.contributions = cupy.empty(n if precompute else 1, translated.accum_dtype)
        monoids = translated.aggregate_monoids
        self.num_aggregates = len(monoids)
        self.aggregates = cupy.zeros(max(self.num_aggregates, 1), np.float64)
        # activated, activated out-edges, the L1 change's bits, a spare word, then
        # the aggregates' shares: one buffer, zeroed (identities) from one copy
        self.statistics = cupy.zeros(4 + self.num_aggregates, np.uint64)
        self.statistics_start = np.zeros(4 + self.num_aggregates, np.uint64)
        if monoids:
            from ..monoids import monoid_identity

            identities = np.array([monoid_identity(m, np.float64) for m in monoids], np.float64)
            self.statistics_start[4:] = identities.view(np.uint64)
        cupy.cuda.Device().synchronize()

    @staticmethod
    def bytes_needed(num_vertices: int, owned: int, edge_bytes: int, value_dtype,
                     accum_dtype, attribute_bytes: int, precompute: bool) -> int:
        """The device memory a partition takes (:class:`DevicePartition`'s arrays)."""
        values = np.dtype(value_dtype).itemsize
        contributions = np.dtype(accum_dtype).itemsize * num_vertices if precompute else 0
        return int((owned + 1) * 8 + edge_bytes + num_vertices * (2 * values + 1) + owned
                   + contributions + attribute_bytes + 4096)

    def upload_values(self, values: np.ndarray) -> None:
        """Every vertex's value from the host's copy."""
        self.values.set(np.ascontiguousarray(values))

    def upload_weighted_in_degrees(self, weighted_in: np.ndarray) -> None:
        """The weighted in-degrees, where the program reads them."""
        if self.attrs[2].size == weighted_in.size:
            self.attrs[2].set(np.ascontiguousarray(weighted_in))

    def _blocks(self, threads: int) -> int:
        most = self.device.multiprocessors * BLOCKS_PER_MULTIPROCESSOR
        return max(1, min(most, -(-threads // THREADS_PER_BLOCK)))

    def pull(self, iteration: int, aggregates: np.ndarray, received: np.ndarray,
             received_values: np.ndarray):
        """One synchronous iteration of the owned vertices.

        Parameters
        ----------
        iteration : int
        aggregates : float64 array
            The iteration's aggregates.
        received, received_values : arrays
            The pairs received for this iteration (written before the pull).

        Returns
        -------
        tuple
            ``(l1_change, activated, aggregate_shares, changed, changed_values)``:
            the owned vertices changed (int64, increasing) and their new values.
        """
        cupy, kernels = self.cupy, self.kernels
        first, end, n = self.first, self.end, self.num_vertices
        owned = end - first
        if received.size:
            self.values[cupy.asarray(received)] = cupy.asarray(received_values)
        given = np.zeros(self.aggregates.size, np.float64)
        given[:min(given.size, len(aggregates))] = np.asarray(aggregates, np.float64)[:given.size]
        self.aggregates.set(given)
        self.statistics.set(self.statistics_start)
        counters = self.statistics[0:2]
        l1_total = self.statistics[2:3].view(np.float64)
        if self.precompute:
            kernels.contributions((self._blocks(n),), (THREADS_PER_BLOCK,),
                                  (self.values, self.contributions, *self.attrs, np.int64(n)))
        lanes = (owned * (1 << self.group_shift) + 31) // 32 * 32
        kernels.pull((self._blocks(lanes),), (THREADS_PER_BLOCK,),
                     (self.offsets, self.sources, self.weights, np.int64(first), np.int64(end),
                      np.int32(self.group_shift), np.int32(self.precompute), self.values,
                      self.next, self.contributions, self.active, *self.attrs, self.aggregates,
                      np.int64(n), np.int64(iteration), l1_total, counters),
                     shared_mem=self.shared_bytes)
        kernels.commit((self._blocks(owned),), (THREADS_PER_BLOCK,),
                       (self.next, self.values, self.changed, np.int64(first), np.int64(end)))
        if self.num_aggregates:
            kernels.aggregates((self._blocks(owned),), (THREADS_PER_BLOCK,),
                               (self.values, *self.attrs, np.int64(n), np.int64(iteration + 1),
                                np.int64(first), np.int64(end), self.statistics[4:].view(np.float64)))
        return self._compacted(owned)

    def _compacted(self, owned: int):
        """The iteration's statistics and changed pairs, compacted on the device
        and copied to the host at once (the values alone where every owned
        vertex changed)."""
        cupy = self.cupy
        first = self.first
        changed = cupy.flatnonzero(self.changed[:owned])
        count = int(changed.size)
        every = count == owned
        parts = [self.statistics.view(np.uint8)]
        if every:
            parts.append(self.values[first:self.end].view(np.uint8))
        elif count:
            parts += [changed.astype(np.int64).view(np.uint8),
                      self.values[changed + first].view(np.uint8)]
        host = cupy.concatenate(parts).get()
        head = self.statistics.nbytes
        statistics = host[:head].view(np.uint64)
        shares = statistics[4:].view(np.float64).copy()
        if every:
            indices = np.arange(first, self.end, dtype=np.int64)
            new_values = host[head:].view(self.values.dtype)
        elif count:
            indices = host[head:head + 8 * count].view(np.int64) + first
            new_values = host[head + 8 * count:].view(self.values.dtype)
        else:
            indices = np.zeros(0, np.int64)
            new_values = np.zeros(0, self.values.dtype)
        return (float(statistics[2:3].view(np.float64)[0]), int(statistics[0]), shares,
                indices, new_values)


class GpuPartitionWorker(PartitionWorker):
    """A partition of a run pulled on its Dask worker's GPU (an actor; see the module)."""

    processor = "gpu"
    pulls_by_frontier = False

    def __init__(self, setup: WorkerSetup):
        from ..kernels.gpu import DeviceInfo, GpuUnavailableError, cupy_module

        address = _worker_address()
        try:
            self.cupy = cupy_module()
            device = DeviceInfo.current()
        except GpuUnavailableError as error:
            reason = str(error).strip().splitlines()[0]
            raise WorkerError(f"worker {address}: its resources name a GPU for partition "
                              f"{setup.index}, and it cannot use one: {reason}") from None
        self.device_info = device
        super().__init__(setup)     # reads the pieces; _warm_up puts them on the device

    def _warm_up(self) -> None:
        """Put the partition on the GPU (its kernels compiled by NVRTC, cached)."""
        setup = self.setup
        weights = self.weights if self.weights is not self.dummy_weights else None
        attribute_bytes = sum(int(a.nbytes) for a in self.attrs)
        need = DevicePartition.bytes_needed(
            self.num_vertices, self.end - self.first,
            int(self.sources.nbytes) + (int(weights.nbytes) if weights is not None else 0),
            self.values.dtype, self.compiled.accum_dtype, attribute_bytes, self.precompute)
        free = self.device_info.free_memory
        if need > free:
            raise WorkerError(f"worker {self.address}: partition {self.index} needs about "
                              f"{need / 2**20:.1f} MiB of GPU memory, its GPU "
                              f"({self.device_info.name}) has {free / 2**20:.1f} MiB free; "
                              "use more workers or partitions")
        local_offsets = self.in_offsets[self.first:self.end + 1] - self.edge_base
        try:
            self.device = DevicePartition(
                self.cupy, setup.program, self.store, first=self.first, end=self.end,
                local_offsets=local_offsets, sources=self.sources, weights=weights,
                attrs=self.attrs, values=self.values, precompute=self.precompute)
        except self.cupy.cuda.memory.OutOfMemoryError:
            raise WorkerError(f"worker {self.address}: partition {self.index} does not fit "
                              f"in its GPU's memory ({self.device_info.name})") from None

    def describe(self) -> dict:
        description = super().describe()
        description["device"] = self.device_info.name
        return description

    def _pull_step(self, iteration: int, aggregates: np.ndarray) -> tuple[dict, np.ndarray]:
        """The pull of one iteration on the GPU (the pairs received written
        first): its row, as the CPU worker's, and the owned vertices changed."""
        started = time.perf_counter()
        received: list = []
        self.inbox.apply("values", self.values, iteration, received)
        indices = np.concatenate(received).astype(np.int64) if received \
            else np.zeros(0, np.int64)
        l1_change, activated, shares, changed, new_values = self.device.pull(
            iteration, aggregates, indices, self.values[indices])
        self.values[changed] = new_values
        row = {"l1_change": l1_change, "activated": activated, "changed": int(changed.size),
               "direction": "pull", "pulled": self.end - self.first,
               "edges": int(self.sources.size),
               "aggregates": shares_of_values(shares, aggregate_monoids(self.setup.program)),
               "address": self.address, "processor": self.processor}
        row["pull_seconds"] = time.perf_counter() - started
        return row, changed

    def restore(self, iteration: int, directory: str | None, epoch: int) -> int:
        sent = super().restore(iteration, directory, epoch)
        self.device.upload_values(self.values)
        return sent

    def start_from_union_find(self) -> dict:
        outcome = super().start_from_union_find()
        self.device.upload_values(self.values)
        return outcome

    def take_weighted_in_degrees(self) -> None:
        super().take_weighted_in_degrees()
        self.device.upload_weighted_in_degrees(self.attrs[2])
