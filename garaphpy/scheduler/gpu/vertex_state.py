"""The vertex data on the device: GlobalVertices' GPU copy (Garaph sections 3, 3.1).

:class:`DeviceVertexState` holds the vertex values, for synchronous runs a
second buffer committed at the end of each iteration by swapping the two
(section 3.1), the active flags, the per-vertex attributes the program reads,
the precomputed contributions, the accumulators of vertices split over
several shards, the aggregates and the iteration's counters, and the kernels
that run over every vertex (initial values, aggregates).
"""

from __future__ import annotations

import numpy as np

from ..frontier import Frontier
from ...monoids import monoid_identity
from .page_store import pinned_array


class DeviceVertexState:
    """The vertex data of one GPU run, on the device.

    Parameters
    ----------
    cupy : module
    kernels : garaphpy.kernels.gpu.Kernels
        The run's compiled kernels (the per-vertex ones run here).
    device : garaphpy.kernels.gpu.DeviceInfo
    store : garaphpy.storage.Store
    program : garaphpy.kernels.cuda_program.TranslatedProgram
        The program as the kernels run it (value, accumulator dtypes, aggregates).
    sum_name : str
        The program's sum monoid (the split accumulators' identity).
    synchronous : bool
    precompute : bool
        The contributions are computed once per vertex before the pulls.
    attributes : tuple of numpy.ndarray
        Out-degree, in-degree, weighted in-degree, user ids, is-source, host side.
    uses : frozenset of str
        The attributes the program reads (the others take one element).
    """

    pinned_array = staticmethod(pinned_array)

    def __init__(self, cupy, kernels, device, store, program, *, sum_name: str,
                 synchronous: bool, precompute: bool, attributes: tuple, uses: frozenset):
        self.cupy, self.kernels, self.device = cupy, kernels, device
        self.num_vertices = n = store.num_vertices
        self.num_pages = len(store.pages)
        self.out_degree = store.out_degree
        self.synchronous = synchronous
        self.aggregate_monoids = program.aggregate_monoids
        self.main_stream = cupy.cuda.Stream(non_blocking=True)
        value_dtype, accum_dtype = program.value_dtype, program.accum_dtype
        device_array = cupy.asarray

        # -- vertices split over several shards --------------------------------------------
        shards = store.shards
        split = shards["split"] == 1
        split_vertices, split_slot = np.unique(shards["first_vertex"][split],
                                               return_inverse=True)
        #: per shard, its split vertex's slot (-1: none), host side
        self.split_slot_of_shard = np.full(shards.shape[0], -1, np.int32)
        self.split_slot_of_shard[np.flatnonzero(split)] = split_slot
        #: per split slot, the vertex; per page, the split slots of its shards (made on
        #: first use by :meth:`split_partials`)
        self.split_vertex_ids = split_vertices.astype(np.int64)
        self._split_slot_of_split_shard = split_slot
        self._page_of_split_shard = shards["page"][split].astype(np.int64)
        self._page_split_slots = None
        self.split_vertices = device_array(split_vertices.astype(np.int64))
        self.num_split = int(split_vertices.size)
        identity = monoid_identity(sum_name, accum_dtype)
        # accumulators narrower than 4 bytes are combined through the aligned 32-bit word
        # that holds them: pad so that the word never leaves the allocation
        self.split_accum = cupy.full(self.num_split + 4, identity, dtype=accum_dtype)
        self.split_identity = identity

        # -- the vertices' attributes, values and flags -------------------------------------
        out_degree, in_degree, weighted_in, vertex_ids, is_source = attributes

        def attribute(array, used):
            return device_array(np.ascontiguousarray(array)) if used else \
                cupy.zeros(1, dtype=array.dtype)

        self.attrs = (
            device_array(out_degree),  # activated_out_edges reads it in every run
            attribute(in_degree, bool({"in_degree", "src_in_degree", "dst_in_degree"} & uses)),
            attribute(weighted_in, "weighted_in_degree" in uses),
            attribute(vertex_ids, "vertex" in uses),
            attribute(is_source, "is_source" in uses),
        )
        self.values = cupy.empty(n, dtype=value_dtype)
        self.next = cupy.empty(n, dtype=value_dtype) if synchronous else self.values
        self.active = cupy.zeros(max(n, 1), dtype=np.uint8)
        self._frontier_staging = None       # set_frontier's pinned activity, made once
        self.contributions = cupy.empty(n if precompute else 1, dtype=accum_dtype)
        self.aggregate_totals = cupy.zeros(max(len(program.aggregate_monoids), 1),
                                           np.float64)
        # activated, activated out-edges, the L1 change's bits and the labels the
        # shortcut dropped: one read-back
        self.statistics = cupy.zeros(4, np.uint64)
        self.counters = self.statistics[0:2]
        self.l1_total = self.statistics[2:3].view(np.float64)
        self.empty_weights = cupy.zeros(1, dtype=store.weight_dtype or np.float64)
        self.active_vertices = 0
        self.active_out_edges_count = 0

    def device_arrays(self) -> tuple:
        """Every device array this state holds (what it takes of the budget)."""
        return (self.split_vertices, self.split_accum, *self.attrs, self.values, self.active,
                self.contributions, self.aggregate_totals, self.statistics, self.empty_weights,
                *([self.next] if self.next is not self.values else []))

    def initialize(self) -> None:
        """The initial values, computed on the device (once its arrays are filled)."""
        self.launch_vertices(self.kernels.init_values, (self.values,) + self.attrs
                             + (np.int64(self.num_vertices),))

    def launch_vertices(self, kernel, arguments, stream=None, shared_mem: int = 0) -> None:
        """``kernel`` over every vertex, on ``stream`` (default the main stream)."""
        threads = 256
        blocks = max(1, min(self.device.multiprocessors * 8,
                            (self.num_vertices + threads - 1) // threads))
        with stream or self.main_stream:
            kernel((blocks,), (threads,), arguments, shared_mem=shared_mem)

    def set_frontier(self, frontier: Frontier) -> None:
        """Mark the vertices of ``frontier`` active, and no other.  Its device
        flags and out-degree sum are made by parallel kernels, the flags in a
        pinned buffer made at the first call (a switch's frontier may hold
        most vertices)."""
        if self._frontier_staging is None:
            self._frontier_staging = self.pinned_array(max(self.num_vertices, 1), np.uint8)
        flags = frontier.device_flags(self._frontier_staging)
        self.active_out_edges_count = frontier.out_edges(self.out_degree)
        self.active_vertices = frontier.size
        self.active.set(flags, stream=self.main_stream)
        self.main_stream.synchronize()

    def num_active(self) -> int:
        """Vertices active after the last iteration."""
        return self.active_vertices

    def active_out_edges(self) -> tuple[int, None]:
        """Sum of the active vertices' out-degrees (counted by the last iteration)."""
        return self.active_out_edges_count, None

    def aggregates(self, iteration: int) -> object:
        """The program's aggregates over the committed values, on the device."""
        monoids = self.aggregate_monoids
        if not monoids:
            return self.aggregate_totals
        identities = np.array([monoid_identity(m, np.float64) for m in monoids], np.float64)
        if not identities.any():
            with self.main_stream:
                self.aggregate_totals.fill(0)
        else:
            self.aggregate_totals.set(identities, stream=self.main_stream)
        self.launch_vertices(self.kernels.aggregates,
                             (self.values,) + self.attrs + (np.int64(self.num_vertices),
                                                            np.int64(iteration),
                                                            self.aggregate_totals))
        return self.aggregate_totals

    def commit(self, counters: np.ndarray) -> None:
        """The iteration's values committed (the buffers swapped when
        synchronous) and its counters, read back, kept."""
        if self.synchronous:
            self.values, self.next = self.next, self.values
        self.active_vertices = int(counters[0])
        self.active_out_edges_count = int(counters[1])

    def split_partials(self, pages: list[int]) -> dict:
        """vertex -> this GPU's partial sum, for every vertex split over several
        shards with a shard in one of ``pages``; the split accumulators are
        reset."""
        if not self.num_split or not pages:
            return {}
        if self._page_split_slots is None:
            slots, page_of = self._split_slot_of_split_shard, self._page_of_split_shard
            self._page_split_slots = [np.unique(slots[page_of == p])
                                      for p in range(self.num_pages)]
        slots = np.unique(np.concatenate([self._page_split_slots[p] for p in pages]))
        if slots.size == 0:
            return {}
        partials = self.cupy.asnumpy(self.split_accum[:self.num_split])
        with self.main_stream:
            self.split_accum.fill(self.split_identity)
        self.main_stream.synchronize()
        return {int(self.split_vertex_ids[s]): partials[s] for s in slots.tolist()}

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed values and the frontier, copied to the host between iterations."""
        self.main_stream.synchronize()
        active = self.cupy.asnumpy(self.active[:self.num_vertices])
        return self.values_to_host(), np.flatnonzero(active).astype(np.int64)

    def restore_values(self, values: np.ndarray) -> None:
        """A checkpoint's committed values, in both buffers."""
        self.values.set(np.ascontiguousarray(values, dtype=self.values.dtype),
                        stream=self.main_stream)
        if self.synchronous:
            self.next.set(np.ascontiguousarray(values, dtype=self.values.dtype),
                          stream=self.main_stream)

    def values_to_host(self) -> np.ndarray:
        """The committed vertex values, copied to host memory."""
        self.main_stream.synchronize()
        return self.cupy.asnumpy(self.values)
