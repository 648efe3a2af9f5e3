"""One partition's worker: its pulls, its share of the exchange, its checkpoints (Garaph sections 2.2, 4.1).

:class:`PartitionWorker` is a Dask actor (``client.submit(PartitionWorker,
setup, actor=True)``): it lives in one worker process, which opens the store
by its path (a shared file system; on a LocalCluster the same disk) and reads
the pieces of the pages its partition pulls, once.  It holds a full-length
value array: its own vertices' values, which it writes, and the values of
the other partitions' vertices its pieces read, kept current by the
exchange (:mod:`garaphpy.distributed.exchange`).  Where its pull reads
precomputed source-side gathers (PageRank's), it pulls as the one process
does, fused with the next contributions and aggregates, over its own
numbering of the vertices it reads (local ids: :mod:`.fused`).

An iteration (:meth:`PartitionWorker.step`) is a synchronous pull of the
partition's vertices with the CPU engine's pull kernels, specialized for the
program (the same :func:`~garaphpy.kernels.cpu.pull_range` over each piece,
over gathers computed once per source vertex where the engine's rule says,
vertices cut between pages combined and applied by
:func:`~garaphpy.kernels.cpu.apply_vertices`), or, in a sparse iteration of
a program that allows it, a notify-pull of the owned vertices the last
iteration's changes notify, settled vertices skipped
(:mod:`garaphpy.distributed.frontier`); then the worker sends its
changed vertices' pairs straight to the workers that read them, actor to
actor (never through the scheduler or the client), and returns a few
numbers: its L1 change, the vertices it activated, the bytes it sent and its
share of the next iteration's aggregates.  The pulls here are the CPU's; a
worker with a GPU pulls on it instead
(:class:`~garaphpy.distributed.gpu_worker.GpuPartitionWorker`, the same
protocol: steps, pairs, votes, checkpoints).
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from .. import config
from .._numba_setup import parallel_section, release_thread_team
from ..kernels import cpu as kernels
from ..kernels.cpu.arguments import apply_context, page_range
from ..paths import cache_directory
from ..scheduler import decisions
from . import kept
from .components import UnionFindStart, warm_up_union_find
from .exchange import (Inbox, Mirrors, WorkerError, aggregate_shares, decode_changes,
                       message_bytes, warm_up_exchange)
from .frontier import PartitionFrontier, frontier_pulls, partition_early_exit
from .fused import FusedPartitionPull
from .links import PeerCalls
from .partition import Partition, partition_pieces, read_by
from .rounds import Rounds


@dataclass(frozen=True)
class WorkerSetup:
    """What a partition's worker is made from (sent to it once, no graph data).

    Attributes
    ----------
    store_path : str
        The store, opened by the worker by this path.
    program : VertexProgram
    partitions : tuple of Partition
        Every partition of the run (the worker's is ``partitions[index]``).
    index : int
    sources : int64 array
        The run's source vertices (internal ids).
    threads : int
        Kernel threads of the worker.
    reads_weights, weighted_in : bool
        The program's gather reads the edge values; a function reads
        ``weighted_in_degree``.
    program_cache : str or None
        Where the program's compiled module is kept (None: the worker's own
        cache directory).
    ids_store_path : str or None
        The store whose id table gives the vertices' user ids, where it is not
        ``store_path``'s (the undirected copy of a directed graph).
    exchange_timeout : float
        Seconds a peer may take to accept pairs before it counts as lost (a
        call to an actor whose worker died waits for it to come back).
    union_find_start : bool
        Lower the labels to those of the partitions' union-find forests,
        joined at their boundaries, before the first iteration
        (:class:`~garaphpy.distributed.components.UnionFindStart`).
    processor : {"cpu", "gpu"}
        What pulls the partition: the worker's CPU threads, or its GPU
        (:class:`~garaphpy.distributed.gpu_worker.GpuPartitionWorker`).    float32_contributions : bool
        A CPU pull's precomputed source-side gathers are held in float32 (the
        one process's choice, :func:`garaphpy.scheduler.decisions.float32_contributions`):
        half the bytes its gathers read.
    """

    store_path: str
    program: object
    partitions: tuple
    index: int
    sources: np.ndarray
    threads: int
    reads_weights: bool
    weighted_in: bool
    program_cache: str | None = None
    ids_store_path: str | None = None
    exchange_timeout: float = 60.0
    union_find_start: bool = False
    processor: str = "cpu"
    float32_contributions: bool = False

    @property
    def partition(self) -> Partition:
        return self.partitions[self.index]


_COMPILED: dict = {}
#: One program compiled at a time in a worker process (its hosts make two
#: partitions side by side: :mod:`.hosts`; Python's ``ast`` is not re-entrant
#: between threads).
_COMPILE_LOCK = threading.Lock()

#: glibc's ``mallopt`` parameters (``malloc.h``)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: A partition's worker process serves allocations up to this size from its
#: heap (glibc's own ceiling for the threshold it raises by itself) ...
MMAP_THRESHOLD_BYTES = 32 * 2**20
#: ... and keeps this much freed memory at the heap's top (twice the above,
#: as glibc sets it when it raises the threshold)
TRIM_THRESHOLD_BYTES = 64 * 2**20


def reuse_freed_memory() -> bool:
    """Let this process's allocations of up to :data:`MMAP_THRESHOLD_BYTES`
    reuse freed memory (glibc's ``mallopt``); whether it could.

    A Dask nanny starts its worker with ``MALLOC_TRIM_THRESHOLD_=65536``, and
    glibc then keeps its mmap threshold at 128 KiB instead of raising it to
    the size of the blocks freed: every array of an iteration from 128 KiB
    up (a frontier's concatenation, a kernel's output, a message's bitmap)
    is mapped anew and its pages faulted in at their first write, each
    iteration.  Two partitions of kron:20 stepped in one process (BFS, one
    thread each) took 62-65 ms with glibc's defaults and 87-105 ms with the
    nanny's setting (medians of 5, dev VM, 2026-12-05); a 500,000-vertex
    frontier's concatenation 0.28 ms against 2.1.  The worker holds its
    partition's arrays anyway; a few tens of MiB more kept for reuse are
    small beside them.  A no-op outside glibc.
    """
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) \
        and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES))


def _compiled(program, parallel: bool, directory: str | None):
    """The program compiled once per worker process (numba's disk cache shared)."""
    from ..kernels.cpu_program import compile_program

    key = (type(program), tuple(sorted(program.constants.items())), parallel)
    with _COMPILE_LOCK:
        if key not in _COMPILED:
            _COMPILED[key] = compile_program(
                program, Path(directory) if directory else cache_directory() / "programs",
                parallel)
        return _COMPILED[key]


def open_store(address: str, path: Path):
    """The store at ``path``, opened by the worker at ``address`` (an error
    naming it where the store is not there or cannot be opened)."""
    from ..errors import StoreError
    from ..storage.store import Store

    if not path.is_dir():
        raise WorkerError(f"worker {address}: the store {path} is not there "
                          "(the workers open it by its path: a shared file system)")
    try:
        return Store.open(path, verify="quick")
    except (StoreError, OSError) as error:
        raise WorkerError(f"worker {address}: cannot open the store {path}: "
                          f"{error}") from None


def _worker_address() -> str:
    from distributed import get_worker

    try:
        return get_worker().address
    except ValueError:      # outside a worker (a test calling the class directly)
        return "local"


class PartitionWorker(PeerCalls, Rounds, UnionFindStart):
    """A partition of a run, in one Dask worker (an actor; see the module)."""

    #: what pulls the partition (the rows and :meth:`describe` say it)
    processor = "cpu"
    #: a sparse iteration notify-pulls the vertices its changes notify, and a
    #: program final once set skips its settled vertices (:mod:`.frontier`)
    pulls_by_frontier = True

    def __init__(self, setup: WorkerSetup):
        self.address = _worker_address()
        self.reuses_freed_memory = reuse_freed_memory()     # the process's, for good
        self.setup = setup
        self.index = setup.index
        partition = setup.partition
        self.first, self.end = partition.first_vertex, partition.end_vertex
        self.threads = setup.threads
        self.own_threads()
        try:
            self._open(setup)
        except MemoryError:
            raise WorkerError(f"worker {self.address}: not enough memory for partition "
                              f"{self.index} ({partition.num_vertices} vertices, "
                              f"{partition.num_edges} edges)") from None
        self.mirrors = Mirrors(self.first, self.end)
        self.inbox = Inbox()
        self.peers = ()
        self.peer_addresses = ()
        self.epoch = 0
        self._warm_up()
        # the set-up ran on a task thread of the Dask worker, the calls run on its
        # actor thread: the set-up's OpenMP team would stay beside the calls'
        # (and libgomp throttles the spin of every team of a process holding
        # more threads than cores: each parallel region then pays wake-ups)
        release_thread_team()

    def _open(self, setup: WorkerSetup) -> None:
        from ..storage.store import Store

        path = Path(setup.store_path)
        # an earlier run's partition of the same range of this very store (:mod:`.kept`)
        self.kept_key, held = kept.take_for(path, self.first, self.end, setup.reads_weights)
        self.store = store = held.store if held is not None else open_store(self.address, path)
        self.num_vertices = store.num_vertices
        self.in_offsets = store.in_offsets
        # numba's parallel build whatever the threads: on one thread its
        # kernels ran the bottom-up pull 2.2x faster than the serial build's
        # (kron:20 BFS's densest level, 61 -> 28.6 ms, dev VM); the serial build
        # (a one-thread run's) saves a cold compile a worker pays once
        self.compiled = compiled = _compiled(setup.program, True, setup.program_cache)
        self.dummy_weights = np.zeros(1, np.float64)
        if held is None:
            self._read_pieces(store, setup)
        else:
            held.lend_to(self)
        n = self.num_vertices
        is_source = np.zeros(n, np.bool_)
        is_source[setup.sources] = True
        weighted_in = np.zeros(n if setup.weighted_in else 1, np.float64)
        ids_store = store if setup.ids_store_path is None else \
            Store.open(setup.ids_store_path, verify="quick")
        self.attrs = (store.out_degree, store.in_degree, weighted_in,
                      ids_store.original_id_array, is_source)
        if setup.weighted_in:
            self._owned_weighted_in_degrees(weighted_in)
        self.values = np.empty(n, compiled.value_dtype)
        self._initial_values()
        self.next = self.values.copy()
        self.active = np.zeros(n, np.bool_)
        self.floor = np.zeros(1, compiled.value_dtype)
        # the engine's rule: a source-side gather reading an attribute is computed
        # once per vertex before the pulls (Garaph's pull, GAPBS's contributions)
        self.precompute = decisions.precompute_source_gathers(
            "pull", True, compiled.gather_parameters)
        self.aggregate_identities = np.array(
            [_identity(m) for m in compiled.aggregate_monoids], np.float64)
        self.no_aggregates = np.zeros(1, np.float64)
        self.early_exit = partition_early_exit(setup.program) and self.pulls_by_frontier
        #: a sparse iteration pushes from the frontier over the partition's
        #: in-edges turned around, as the one process does
        self.settles_by_push = decisions.settling_push(self.early_exit, setup.reads_weights)
        # the one-process floor skip (a vertex as good as the best value of a
        # vertex with out-edges reads no in-edge), over this partition's values:
        # its in-neighbours' are all current here, so a floor taken over them
        # and stale others is never better than what a gather could bring
        self.floor_mode = 0
        if decisions.floor_skip(setup.program.gather_no_better_than_source, "cpu") \
                and not self.early_exit and not self.precompute:
            self.floor_mode = kernels.FLOOR_MAX if setup.program.sum == "max" \
                else kernels.FLOOR_MIN
        self.frontier = None
        self.floor_now = 0
        self.settled_from_values = False
        if frontier_pulls(setup.program) and self.pulls_by_frontier:
            initially_active = np.arange(n, dtype=np.int64) \
                if setup.program.initially_active == "all" else setup.sources
            self.frontier = PartitionFrontier(self.sources, self.in_offsets, self.first,
                                              self.end, n, initially_active, self.early_exit,
                                              self.threads)
        self.settling_pull = None
        if self.early_exit:
            self._set_up_settling_pull()
        #: for each partition, the vertices of its range this one's edges read,
        #: in the order their values come where a peer sends them all (:mod:`.rounds`)
        self.reads = read_by([s for _, s, _ in self.pieces], list(setup.partitions))
        contribution_dtype = np.float32 if setup.float32_contributions \
            else compiled.accum_dtype
        #: the one process's fused pull over the partition's own numbering of
        #: the vertices it reads (:mod:`.fused`), where its pull reads
        #: precomputed gathers; None: page by page, by vertex ids
        self.fused = None
        if self.precompute and self.processor == "cpu" and self.frontier is None \
                and self.settling_pull is None and not setup.union_find_start:
            self.fused = FusedPartitionPull([s for _, s, _ in self.pieces], self.sources,
                                            self.in_offsets, self.first, self.end, self.attrs,
                                            contribution_dtype, self.threads)
        self.contributions = np.empty(n if self.precompute and self.fused is None else 0,
                                      contribution_dtype)
        self.carried_aggregates = None

    def _set_up_settling_pull(self) -> None:
        """The one process's pull with early exit over one CSC
        (:func:`garaphpy.kernels.cpu.pull_settling_whole`), over this
        partition's in-edges: offsets over every vertex into ``sources``
        (empty ranges outside the partition), and the vertices with in-edges
        here as a bitmap; the pull passes over the owned range alone."""
        n = self.num_vertices
        offsets = np.empty(n + 1, np.int64)
        offsets[:self.first + 1] = 0
        offsets[self.first:self.end + 1] = self.in_offsets[self.first:self.end + 1] \
            - self.edge_base
        offsets[self.end + 1:] = offsets[self.end]
        in_edge_bits = np.zeros((n + 63) // 64, np.uint64)
        with parallel_section():
            kernels.pack_flags(offsets[1:] != offsets[:-1], in_edge_bits)
        self.settling_pull = {"graph": (offsets, self.sources, self.weights),
                              "in_edge_bits": in_edge_bits,
                              "found": np.zeros(n, np.int64),
                              "found_out_edges": np.zeros(1, np.int64)}

    def _read_pieces(self, store, setup: WorkerSetup) -> None:
        """Read the partition's in-edges, once: ``sources`` (and ``weights``)
        from edge ``edge_base`` = in_offsets[first] on, in CSC order, and
        ``pieces``, views of them page by page."""
        self.edge_base = int(self.in_offsets[self.first])
        edges = int(self.in_offsets[self.end]) - self.edge_base
        keeps_weights = store.weighted and setup.reads_weights
        self.sources = np.empty(edges, store.vertex_dtype)
        self.weights = np.empty(edges, store.weight_dtype) if keeps_weights \
            else self.dummy_weights
        self.pieces = []
        for piece in partition_pieces(store.pages, store.in_offsets, setup.partition):
            # the piece's own blocks, straight into place (a page's other
            # partitions' edges and its IdxOff not read)
            local = slice(piece.edge_begin - self.edge_base, piece.edge_end - self.edge_base)
            store.read_edges(piece.page, piece.edge_begin, piece.edge_end, self.sources[local],
                             self.weights[local] if keeps_weights else None)
            self.pieces.append((piece, self.sources[local],
                                self.weights[local] if keeps_weights else self.dummy_weights))

    def _owned_weighted_in_degrees(self, out: np.ndarray) -> None:
        for piece, page_index in ((p, p.page) for p, _, _ in self.pieces):
            page = self.store.read_page(page_index)
            kernels.add_weighted_in_degrees(
                self.in_offsets, page.weights, page.info.edge_begin, piece.edge_begin,
                piece.edge_end, piece.first_vertex, piece.end_vertex, out)

    def _initial_values(self) -> None:
        with parallel_section():
            self.compiled.kernels.init_values(self.attrs, self.num_vertices, self.values)

    def _initial_copy(self) -> np.ndarray:
        """The initial values of every vertex (a new array)."""
        initial = np.empty_like(self.values)
        with parallel_section():
            self.compiled.kernels.init_values(self.attrs, self.num_vertices, initial)
        return initial

    def _warm_up(self) -> None:
        """Compile the kernels of a step on empty work (numba's disk cache makes
        this a load after the first run)."""
        compiled = self.compiled
        with compiled.compiling():
            if self.precompute:
                with parallel_section():
                    compiled.kernels.source_contributions(self.values[:0], self.attrs,
                                                          self.contributions)
            if self.fused is not None:
                self.fused.warm_up(compiled, self.values, self.active, self.attrs,
                                   self.aggregate_identities)
            if self.settling_pull is not None:
                settling = self.settling_pull
                with parallel_section():
                    self.frontier.pack_settled()
                    compiled.kernels.pull_settling_whole(
                        compiled.identity, settling["graph"], self.values,
                        apply_context(self.attrs, self.no_aggregates, 0, 0), self.active,
                        (self.frontier.settled, self.frontier.settled_bits,
                         settling["in_edge_bits"], self.frontier.claimed, settling["found"]),
                        (np.zeros(2), np.zeros(1, np.int64), np.zeros(1, np.int64)), 1,
                        (0, 0))
            self._pull_piece(None, 0, self.no_aggregates if compiled.aggregate_call is None
                             else self.aggregate_identities.copy(), np.zeros(2))
            self._partial_aggregates(0, self.first, self.first)
            if self.frontier is not None:
                nothing = np.zeros(0, np.int64)
                self.frontier.out_edges(nothing)
                self.frontier.notified(nothing, np.zeros(1, np.int64))
                self._pull_notified(nothing, 0, self.no_aggregates, np.zeros(2))
                if self.settles_by_push:
                    self._push_settling(nothing, np.zeros(1, np.int64), 0,
                                        self.no_aggregates, np.zeros(2))
        warm_up_exchange(self.values.dtype, self.store.vertex_dtype, self.early_exit)
        if self.setup.union_find_start:
            # loaded from numba's cache now, not in the timed start (50-100 ms a worker)
            warm_up_union_find(self.sources.dtype, self.values.dtype)
            self.prepare_union_find()

    def own_threads(self) -> None:
        """Take the worker's kernel threads on the calling thread: numba's count
        is per thread, and a Dask actor's calls run on another thread than its
        set-up, where numba would take every core (``NUMBA_NUM_THREADS``),
        each worker beside the others."""
        numba.set_num_threads(min(self.threads, numba.config.NUMBA_NUM_THREADS))

    # -- what the client and the peers call --------------------------------------------
    def describe(self) -> dict:
        """Where this partition runs, what it holds, and how its kernels' threads
        wait (OpenMP's policy chosen at the worker's import of garaphpy: a
        passive one costs in-memory pulls two to three times,
        :mod:`garaphpy._numba_setup`)."""
        from .. import _numba_setup

        try:
            layer = numba.threading_layer()
        except ValueError:      # no parallel launch in this process yet
            layer = None
        return {"address": self.address, "index": self.index, "pid": os.getpid(),
                "processor": self.processor, "pieces": len(self.pieces),
                "edges": int(sum(p.edge_end - p.edge_begin for p, _, _ in self.pieces)),
                "threads": self.threads, "numba_threads": numba.config.NUMBA_NUM_THREADS,
                "threading_layer": layer, "wait_policy": _numba_setup.WAIT_POLICY,
                "float32_contributions": bool(self.contributions.dtype == np.float32),
                "reuses_freed_memory": self.reuses_freed_memory,
                "fused_pull": self.fused is not None and self.fused.whole}

    def wire(self, peers, addresses, epoch: int) -> dict:
        """Take the run's workers (``peers[q]`` the actor of partition q, in the
        worker at ``addresses[q]``) and tell each which of its vertices this
        partition reads (its mirror list, sent to it directly); returns
        :meth:`describe`'s (one call of the client fewer at the start)."""
        self.peers = tuple(peers)
        self.peer_addresses = tuple(addresses)
        self.epoch = epoch
        self.link()
        self.inbox.reset(epoch)
        reads = self.reads
        self._wait({q: self._call(q, "set_reader", self.index, reads[q])
                    for q in range(len(self.peers)) if q != self.index})
        return self.describe()

    # a peer in another worker is called on that worker's event loop (async), so
    # that its iteration thread, busy with its own pull, never holds the call up;
    # a peer in this worker is called in place (Dask gives a coroutine otherwise)
    async def set_reader(self, partition: int, vertices: np.ndarray) -> None:
        """Partition ``partition`` reads ``vertices`` of this one."""
        self.mirrors.set_reader(partition, vertices)

    def set_reader_here(self, partition: int, vertices: np.ndarray) -> None:
        """:meth:`set_reader`, called by a partition in the same worker."""
        self.mirrors.set_reader(partition, vertices)

    async def receive(self, epoch: int, iteration: int, kind: str, sender: int,
                      message: tuple) -> bool:
        """Changes of array ``kind`` partition ``sender``'s ``iteration`` made,
        for the next one (:func:`~garaphpy.distributed.exchange.encode_changes`)."""
        return self.receive_here(epoch, iteration, kind, sender, message)

    def receive_here(self, epoch: int, iteration: int, kind: str, sender: int,
                     message: tuple) -> bool:
        """:meth:`receive`, called by a partition in the same worker."""
        indices, values = decode_changes(message, self.reads[sender])
        return self.inbox.put(epoch, iteration, kind, indices, values)

    def share_weighted_in_degrees(self) -> int:
        """Send the owned vertices' weighted in-degrees to their readers; bytes sent."""
        self.own_threads()
        owned = np.arange(self.first, self.end, dtype=np.int64)
        return self._send("weighted_in", -1, owned, self.attrs[2])

    def take_weighted_in_degrees(self) -> None:
        """Write the weighted in-degrees received (after every worker shared)."""
        self.inbox.apply("weighted_in", self.attrs[2], 0)

    def partial_aggregates(self, iteration: int) -> np.ndarray:
        """This partition's share of ``iteration``'s aggregates (one row)."""
        self.own_threads()
        return self._partial_aggregates(iteration, self.first, self.end)

    def step(self, iteration: int, aggregates: np.ndarray) -> dict:
        """One synchronous iteration of this partition, then its exchange.

        Returns
        -------
        dict
            ``l1_change``, ``activated``, ``changed`` (owned vertices whose value
            changed; with early exit, those activated), ``sent_bytes``, ``edges``, ``pull_seconds``
            (of which ``apply_seconds``: the pairs received written), ``exchange_seconds``, ``aggregates`` (the next iteration's share)
            and ``address``.
        """
        row, changed = self._pull_step(iteration, aggregates)
        pull_ended = time.perf_counter()
        row["sent_bytes"] = self._send("values", iteration, changed, self.values)
        row["exchange_seconds"] = time.perf_counter() - pull_ended
        return row

    def _pull_step(self, iteration: int, aggregates: np.ndarray) -> tuple[dict, np.ndarray]:
        """The pull of one iteration (the pairs received written first):
        its row (see :meth:`step`, less what the exchange adds) and the owned
        vertices it changed."""
        self.own_threads()
        started = time.perf_counter()
        self.carried_aggregates = None
        received: list = []
        if self.fused is not None:
            self.fused.take_contributions(self.inbox.take_due("contributions", iteration),
                                          self.setup.partitions)
        self.inbox.apply("values", self.values, iteration, received)
        applied = time.perf_counter()       # the pull's time takes the pairs' writes
        if self.settled_from_values:        # restored: every value read is here now
            self.frontier.settle_from_values(self.values, self._initial_copy(),
                                             self.attrs[4])
            self.settled_from_values = False
        direction, frontier, prefix, pushed = "pull", None, None, False
        if self.frontier is not None:
            for indices in received:
                self.frontier.add_changes(indices)
            direction, frontier, prefix = self.frontier.direction()
        stats = np.zeros(2, np.float64)
        if direction == "pull":
            pulled, edges = self.end - self.first, self.sources.size
            if self.early_exit:         # the settled ones are skipped
                pulled -= int(np.count_nonzero(self.frontier.settled[self.first:self.end]))
            changed = self._pull_all(iteration, aggregates, stats)
        elif self.settles_by_push:
            changed, pulled = self._push_settling(frontier, prefix, iteration, aggregates,
                                                  stats)
            edges, pushed = int(prefix[-1]), True
        else:
            notified = self.frontier.notified(frontier, prefix)
            changed, edges = self._pull_notified(notified, iteration, aggregates, stats)
            pulled = int(notified.size)
        if self.frontier is not None:
            self.frontier.restart(changed)
        row = {"l1_change": float(stats[0]), "activated": int(stats[1]),
               "changed": int(changed.size), "direction": direction, "pushed": pushed,
               "pulled": int(pulled), "edges": int(edges),
               "aggregates": self._next_aggregates(iteration), "address": self.address,
               "processor": self.processor, "apply_seconds": applied - started}
        row["pull_seconds"] = time.perf_counter() - started
        return row, changed

    def _pull_all(self, iteration: int, aggregates: np.ndarray, stats: np.ndarray):
        """Pull every owned vertex, piece by piece or fused (:mod:`.fused`,
        which also makes the next aggregates: ``carried_aggregates``); the
        owned vertices changed."""
        first, end = self.first, self.end
        if self.settling_pull is not None:
            return self._pull_settling(iteration, aggregates, stats)
        if self.fused is not None and self.fused.whole:
            partial, sums = self.fused.pull(
                self.compiled, self.values, self.next, self.active, self.attrs,
                (aggregates, self.num_vertices, iteration), stats,
                max(1, min(self.threads, numba.get_num_threads())), self.aggregate_identities)
            if self.compiled.aggregate_call is not None:
                self.carried_aggregates = aggregate_shares(
                    partial, sums, self.compiled.aggregate_monoids)
            changed = first + np.flatnonzero(self.next[first:end] != self.values[first:end])
            self.values[first:end] = self.next[first:end]
            return changed
        self.active[first:end] = False
        pending = []
        if self.fused is not None:
            self.fused.prepare(self.compiled, self.values, self.attrs, iteration)
        elif self.precompute:
            with parallel_section():
                self.compiled.kernels.source_contributions(self.values, self.attrs,
                                                           self.contributions)
        self.floor_now = 0
        start_floor, self.start_floor = self.start_floor, None     # the next pull's alone
        if self.floor_mode == kernels.FLOOR_MIN and start_floor is not None:
            # CC's start knows the least label its pull can gather: no pass over
            # every vertex (kron:20, a 1 M-vertex pass: 4.5-5 ms of one thread, dev VM)
            self.floor[0] = start_floor
            self.floor_now = self.floor_mode
        elif self.floor_mode:
            with parallel_section():
                if kernels.best_source_value(self.values, self.attrs[0], self.floor_mode,
                                             self.floor):
                    self.floor_now = self.floor_mode
        for piece, sources, weights in self.pieces:
            pending.extend(self._pull_piece((piece, sources, weights), iteration, aggregates,
                                            stats))
        if pending:
            vertices, accums = combined(pending, self.compiled.combine,
                                        self.compiled.accum_dtype)
            with parallel_section():
                self.compiled.kernels.apply_vertices(
                    apply_context(self.attrs, aggregates, self.num_vertices, iteration),
                    vertices, accums, (self.values, self.next), self.active, stats)
        changed = first + np.flatnonzero(self.next[first:end] != self.values[first:end])
        self.values[first:end] = self.next[first:end]
        return changed

    def _pull_settling(self, iteration: int, aggregates: np.ndarray, stats: np.ndarray):
        """Beamer's bottom-up step over the partition in one launch, in place
        (:meth:`_set_up_settling_pull`): the vertices neither settled nor
        without in-edges here read their in-neighbours until a settled one
        activates them; the owned vertices activated, in increasing order
        (the one process's next frontier: a vertex changed but not activated
        stays unsettled, so no gather reads it)."""
        frontier, settling = self.frontier, self.settling_pull
        with parallel_section():
            frontier.pack_settled()
            activated = self.compiled.kernels.pull_settling_whole(
                self.compiled.identity, settling["graph"], self.values,
                apply_context(self.attrs, aggregates, self.num_vertices, iteration),
                self.active,
                (frontier.settled, frontier.settled_bits, settling["in_edge_bits"],
                 frontier.claimed, settling["found"]),
                (stats, frontier.settled_in_edges, settling["found_out_edges"]),
                max(1, min(self.threads, numba.get_num_threads())), (self.first, self.end))
            # the pull writes ``values`` in place; ``next`` must hold them too
            kernels.commit_vertices(activated, self.values, self.next)
        return activated

    def _pull_notified(self, notified: np.ndarray, iteration: int, aggregates: np.ndarray,
                       stats: np.ndarray):
        """Pull the ``notified`` owned vertices alone (the CPU engine's
        notify-pull kernel over the partition's in-edges); ``(changed, edges)``:
        the owned vertices changed and the in-edges the pull may read."""
        frontier = self.frontier
        chunks = max(1, self.threads * config.CPU_CHUNKS_PER_THREAD)
        with parallel_section():
            in_prefix = kernels.frontier_degree_prefix(notified, self.in_offsets, self.threads)
            edge_starts = self.in_offsets[notified] - self.edge_base
            self.compiled.kernels.pull_vertices(
                self.compiled.identity, (notified, in_prefix, edge_starts),
                (self.sources, self.weights), (self.values, self.next),
                apply_context(self.attrs, aggregates, self.num_vertices, iteration), chunks,
                stats, (bool(self.early_exit),
                        frontier.settled if self.early_exit else self.active,
                        frontier.claimed, frontier.settled_in_edges))
        changed = notified[self.next[notified] != self.values[notified]]
        self.values[changed] = self.next[changed]
        return changed, int(in_prefix[-1])

    def _push_settling(self, frontier: np.ndarray, prefix: np.ndarray, iteration: int,
                       aggregates: np.ndarray, stats: np.ndarray) -> tuple[np.ndarray, int]:
        """Beamer's top-down step over the partition's in-edges turned around
        (:func:`garaphpy.kernels.cpu.push_settling`, the one process's sparse
        step with early exit): each edge of a settled ``frontier`` vertex to an
        owned vertex not settled gives it its final value.  ``(changed,
        written)``: the owned vertices activated, in increasing order (as
        :meth:`_pull_settling`), and how many the push wrote (each committed)."""
        front = self.frontier
        chunks = max(1, self.threads * config.CPU_CHUNKS_PER_THREAD)
        with parallel_section():
            written, activated = self.compiled.kernels.push_settling(
                self.compiled.identity, (frontier, prefix),
                (front.out_offsets, front.out_targets, self.dummy_weights, self.in_offsets),
                (self.values, self.next),
                apply_context(self.attrs, aggregates, self.num_vertices, iteration), chunks,
                stats, (front.settled, front.claimed, front.settled_in_edges))
            kernels.commit_vertices(written, self.next, self.values)
        return front.in_order(activated), int(written.size)

    def checkpoint(self, iteration: int, directory: str) -> str:
        """Write the owned values after ``iteration`` iterations (atomically)."""
        path = checkpoint_path(directory, self.index, len(self.setup.partitions), iteration)
        temporary = path.with_name(path.name + f".{os.getpid()}.tmp")
        with open(temporary, "wb") as file:
            np.save(file, self.values[self.first:self.end])
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
        return str(path)

    def discard_checkpoint(self, iteration: int, directory: str) -> None:
        """Remove this partition's checkpoint of ``iteration`` (a later one is complete)."""
        checkpoint_path(directory, self.index, len(self.setup.partitions),
                        iteration).unlink(missing_ok=True)

    def restore(self, iteration: int, directory: str | None, epoch: int) -> int:
        """Roll back to the values after ``iteration`` iterations (0: the initial
        ones; else the checkpoint in ``directory``) and send every owned value
        others read to them (for the next step); returns the bytes sent.
        Called on every worker once a worker was lost, after every worker's
        :meth:`wire` of the new ``epoch`` (which dropped the pairs held)."""
        self.own_threads()
        if epoch != self.epoch:
            raise WorkerError(f"worker {self.address}: partition {self.index} restored at "
                              f"epoch {epoch}, wired at {self.epoch}")
        if iteration == 0:
            self._initial_values()
        else:
            path = checkpoint_path(directory, self.index, len(self.setup.partitions),
                                   iteration)
            self.values[self.first:self.end] = np.load(path)
        self.next[:] = self.values
        self.start_floor = None
        if self.fused is not None:
            self.fused.forget()
        if self.frontier is not None:
            self.frontier.forget()
            self.settled_from_values = self.early_exit
        owned = np.arange(self.first, self.end, dtype=np.int64)
        return self._send("values", iteration - 1, owned, self.values)

    def owned_values(self) -> np.ndarray:
        """The committed values of the owned vertices."""
        return self.values[self.first:self.end].copy()

    def ping(self) -> str:
        return self.address

    # -- inside --------------------------------------------------------------------------
    def _send(self, kind: str, iteration: int, changed: np.ndarray, array: np.ndarray) -> int:
        """Send the changes of ``changed`` (owned vertices) of ``array``, made by
        ``iteration``, to the partitions that read them
        (:func:`~garaphpy.distributed.exchange.encode_changes`), and wait until
        each has them; bytes sent."""
        index_dtype = self.store.vertex_dtype
        futures, sent = {}, 0
        for partition, message in self.mirrors.messages(changed, array, index_dtype).items():
            sent += message_bytes(message)
            futures[partition] = self._call(partition, "receive", self.epoch, iteration, kind,
                                            self.index, message)
        self._wait(futures)
        return sent

    def _pull_piece(self, item, iteration: int, aggregates: np.ndarray,
                    stats: np.ndarray) -> list:
        """Pull one piece into ``next`` (None: an empty one, the warm-up); the
        (vertex, partial sum) of its vertices cut at the piece's ends."""
        compiled = self.compiled
        if item is None:
            piece_range, sources, weights = (0, 0, 0, 0), np.zeros(0, self.store.vertex_dtype), \
                self.dummy_weights
        else:
            piece, sources, weights = item
            piece_range = (piece.edge_begin, piece.edge_end, piece.first_vertex,
                           piece.end_vertex)
        edge_begin, edge_end, first_vertex, end_vertex = piece_range
        parts = max(1, min(self.threads, (edge_end - edge_begin) // config.CPU_MIN_PART_EDGES))
        boundary_vertex = np.empty(2, np.int64)
        boundary_accum = np.empty(2, compiled.accum_dtype)
        # the CPU engine's choice of pull kernel: settled vertices skipped first
        if self.early_exit:
            pull, gather_values = compiled.kernels.pull_range_settling, self.values
            skipping = (self.frontier.settled, self.frontier.settled_bits)
        elif self.precompute:
            pull = compiled.kernels.pull_range_precomputed
            gather_values = self.contributions if self.fused is None \
                else self.fused.contributions
            skipping = (0, self.floor)
        else:
            pull, gather_values, skipping = compiled.kernels.pull_range, self.values, \
                (self.floor_now, self.floor)
        with parallel_section():
            count = pull(
                compiled.identity, (self.in_offsets, sources, weights, int(edge_begin)),
                page_range(edge_begin, edge_end, first_vertex, end_vertex),
                (self.values, self.next, gather_values),
                apply_context(self.attrs, aggregates, self.num_vertices, iteration), parts,
                (self.active, stats, boundary_vertex, boundary_accum), skipping)
        return [(int(boundary_vertex[i]), boundary_accum[i]) for i in range(count)]

    def _next_aggregates(self, iteration: int) -> np.ndarray:
        """This partition's share of ``iteration + 1``'s (the fused pull's, if made)."""
        return self.carried_aggregates if self.carried_aggregates is not None \
            else self._partial_aggregates(iteration + 1, self.first, self.end)

    def _partial_aggregates(self, iteration: int, first: int, end: int) -> np.ndarray:
        """This partition's share of ``iteration``'s aggregates over vertices
        ``first..end-1``, one part a thread (:func:`.exchange.aggregate_shares`:
        exact, the same bits whatever the parts)."""
        compiled = self.compiled
        if compiled.aggregate_call is None:
            return np.zeros(0, np.float64)
        starts = np.linspace(first, end, max(1, self.threads) + 1).astype(np.int64)
        with parallel_section():
            partial, sums = compiled.kernels.compute_aggregates(
                self.values, self.attrs, self.num_vertices, iteration,
                self.aggregate_identities, starts)
        return aggregate_shares(partial, sums, compiled.aggregate_monoids)


def combined(pending: list, combine, accum_dtype) -> tuple[np.ndarray, np.ndarray]:
    """The partial sums of each cut vertex, ``(vertex, accum)`` pairs,
    combined: ``(vertices, accums)`` in vertex order."""
    merged: dict = {}
    for vertex, accum in pending:
        merged[vertex] = combine(merged[vertex], accum) if vertex in merged else accum
    vertices = np.array(sorted(merged), np.int64)
    return vertices, np.array([merged[v] for v in vertices.tolist()], dtype=accum_dtype)


def _identity(monoid: str) -> float:
    from ..monoids import monoid_identity

    return monoid_identity(monoid, np.float64)


def checkpoint_path(directory, index: int, partitions: int, iteration: int) -> Path:
    """The file of partition ``index``'s values after ``iteration`` iterations."""
    return Path(directory) / f"partition-{index:04d}-of-{partitions:04d}.iteration-{iteration}.npy"
