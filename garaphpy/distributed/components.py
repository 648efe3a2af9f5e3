"""CC's start over a cluster: partition forests joined at their boundaries (Afforest, GAPBS's ``cc``; Garaph section 6's CC).

The one-process CPU run of a min-label program on a symmetric graph starts
from a union-find over every edge (:mod:`garaphpy.kernels.union_find`): the
labels are then the fixed point, and the one pull that follows confirms
them.  A partition holds a share of the edges, the in-edges of its own
vertices, so its union-find alone gives parts of components.  Each partition
links its edges, held both ways (:func:`partition_edges_both_ways`: its
in-edges turned around and as they are), by Afforest with its skip of the
largest tree's vertices (:func:`partition_roots`; over the turned edges
alone, which hold an edge once, only the edges inside that tree could be
skipped: :func:`partition_forest`) over the vertices those edges touch
alone, numbered in increasing order (:func:`vertices_with_edges`), and
names each of its trees by its *holder*, the tree's vertex of least user id
(:func:`tree_holders`).  Two partitions' trees meet only at a vertex both
hold an edge of, a *boundary* vertex, which one of them owns or a third owns
and both read; the mirror lists of the value exchange name them all.  So
instead of its whole forest (O(|V|) pairs to every peer) a partition sends:

1. to each owner, the holders of the owner's vertices it reads, in the
   order of the owner's mirror list, which both know: the most frequent
   holder and the others' positions alone (:func:`compact_holders`; a
   partition's boundary mostly lies in one tree);
2. to every peer, the links its owned boundary vertices make between the
   holders of the trees that meet at them, reduced to a spanning forest of
   those holders (:func:`links_between`: a few pairs where components are
   few);

and merges its own forest with every partition's links
(:func:`merged_labels`).  A path between two of its vertices crosses
partitions at boundary vertices, where its trees meet, and each meeting is
one owner's link, so the merge gives the components of the vertices it
holds an edge of; each such component holds every one of its trees' holders,
so the least user id over it is its label, the one-process label.  The
iterations then confirm them.

The graph is symmetric (the start runs on no other), so an edge between two
partitions' vertices u and v is in both, and u and v share a tree in each:
the link at either end joins those trees.  With two partitions every such
edge has an end in each, so a partition's own links join every pair of
trees that meet: it needs no other's, and step 2 sends nothing (one message
each way).

:class:`UnionFindStart` is the workers' side: the two sends and the merge as
three calls of the client, or, where each worker holds one partition, at the
opening of the first iterations' call (a worker then waits for its peers'
messages, as in :mod:`garaphpy.distributed.rounds`, and goes on to its pull
once its own labels are lowered).
"""

from __future__ import annotations

import time

import numpy as np

from .._numba_setup import parallel_section
from ..kernels import union_find
from .exchange import WorkerError, failed_sends, pair_bytes
from .frontier import partition_out_edges


def partition_forest(out_offsets: np.ndarray, out_targets: np.ndarray,
                     rounds: int = 2) -> np.ndarray:
    """The root of every vertex (int64, the least internal id of its tree) in a
    union-find over every edge of a partition's CSR (its in-edges turned
    around): Afforest's sampled start (``rounds`` out-edges a vertex, then
    the most frequent root), then every other edge but those inside that
    root's tree (:func:`~garaphpy.kernels.union_find.link_beside`)."""
    parent = np.arange(out_offsets.shape[0] - 1, dtype=np.int64)
    if parent.size == 0:
        return parent
    with parallel_section():
        union_find.link_rounds(out_offsets, out_targets, parent, 0, rounds)
        largest = union_find.most_frequent_root(parent, union_find.SAMPLE_SIZE)
        union_find.link_beside(out_offsets, out_targets, parent, largest, rounds)
    return parent


def partition_edges_both_ways(out_offsets: np.ndarray, out_targets: np.ndarray,
                              sources: np.ndarray, in_offsets: np.ndarray, first: int,
                              end: int) -> tuple[np.ndarray, np.ndarray]:
    """A CSR over every vertex holding each edge of a partition in both
    directions: a vertex's out-edges of the partition's CSR (its in-edges
    turned around, ``out_offsets``/``out_targets``), then, for an owned vertex,
    its in-neighbours (``sources``, the in-edges of vertices ``first..end-1``
    in CSC order).  Every edge then has its reverse, so Afforest may skip the
    largest tree's vertices whole (:func:`~garaphpy.kernels.union_find.component_roots`)
    and gives the same forest as :func:`partition_forest` (each root the least
    vertex of its tree) reading a fraction of the edges."""
    num_vertices = out_offsets.shape[0] - 1
    turned = np.diff(out_offsets)
    own = np.zeros(num_vertices, np.int64)
    own[first:end] = np.diff(in_offsets[first:end + 1])
    offsets = np.zeros(num_vertices + 1, np.int64)
    np.cumsum(turned + own, out=offsets[1:])
    targets = np.empty(int(offsets[-1]), out_targets.dtype)
    # a turned edge e of vertex x moves to offsets[x] + (e - out_offsets[x])
    shift = np.repeat(offsets[:-1] - out_offsets[:-1], turned)
    shift += np.arange(out_targets.shape[0], dtype=np.int64)
    targets[shift] = out_targets
    del shift
    # an owned vertex's in-neighbours follow its turned edges
    edge_base = int(in_offsets[first])
    shift = np.repeat(offsets[first:end] + turned[first:end]
                      - (in_offsets[first:end] - edge_base), own[first:end])
    shift += np.arange(sources.shape[0], dtype=np.int64)
    targets[shift] = sources
    return offsets, targets


def vertices_with_edges(offsets: np.ndarray, targets: np.ndarray) -> tuple:
    """A CSR over every vertex cut to the vertices that have edges, numbered
    in increasing order: ``(vertices, numbering, local_offsets,
    local_targets)``, local vertex i standing for ``vertices[i]`` and
    ``numbering`` the local number of every vertex (-1: none).  Every edge
    of the partition's CSR has its reverse, so every target has edges and
    keeps a number.  A
    partition's edges touch about half of a Kronecker graph's vertices at
    four partitions (rmat:20: 0.50 M of 1.05 M, one partition): its
    union-find over them alone reads a parent array half as long, 1.9x
    faster (dev VM, one thread)."""
    degrees = np.diff(offsets)
    vertices = np.flatnonzero(degrees)
    local_offsets = np.zeros(vertices.size + 1, np.int64)
    np.cumsum(degrees[vertices], out=local_offsets[1:])
    numbering = np.full(offsets.shape[0] - 1, -1, np.int32 if vertices.size < 2 ** 31
                        else np.int64)
    numbering[vertices] = np.arange(vertices.size, dtype=numbering.dtype)
    return vertices, numbering, local_offsets, numbering[targets]


def partition_roots(offsets: np.ndarray, targets: np.ndarray,
                    sampled: np.ndarray | None = None,
                    parent: np.ndarray | None = None) -> np.ndarray:
    """Every vertex's root (int64, the least vertex of its tree) in Afforest
    over a CSR whose every edge has its reverse (:func:`partition_edges_both_ways`);
    ``sampled`` and ``parent``, where given, its first out-edges laid out and
    every vertex its own parent, made at set-up
    (:func:`~garaphpy.kernels.union_find.sampled_edges`; ``parent`` becomes
    the roots)."""
    with parallel_section():
        return union_find.component_roots(offsets, targets, sampled=sampled,
                                          parent=parent)[0]


def warm_up_union_find(index_dtype, value_dtype) -> None:
    """Compile (or load from numba's cache) the kernels of the start on one
    vertex, so that the set-up pays for them, not the first iteration."""
    out_offsets = np.zeros(2, np.int64)
    sampled = union_find.sampled_edges(out_offsets, np.zeros(0, index_dtype))
    roots = partition_roots(out_offsets, np.zeros(0, index_dtype), sampled)
    with parallel_section():      # the first rounds a large partition takes
        union_find.link_sampled_ahead(sampled, np.zeros(1, np.int64))
    nothing = np.zeros(0, index_dtype)
    links_between(np.zeros(1, np.int64), np.ones(1, np.int64), index_dtype)
    merged_labels(roots, np.zeros(1, np.int64), np.array([0, -1], np.int32),
                  [(np.zeros(1, index_dtype), np.ones(1, index_dtype))],
                  np.arange(2, dtype=np.int64))
    merged_labels(roots, np.zeros(1, np.int64), np.zeros(1, np.int32), [(nothing, nothing)],
                  np.zeros(1, np.int64))
    union_find.lower_labels(np.zeros(1, value_dtype), np.zeros(1, np.int64),
                            np.zeros(1, value_dtype), 0, 1)
    one = np.zeros(1, np.int64)        # a read list, a mirror list, a forest
    with parallel_section():
        union_find.holders_of(one, np.zeros(1, np.int32), one, one)
    union_find.apart_holders(one, np.zeros(1, np.int32), one, one, 0, one, one)
    lower_to_merged_labels(np.zeros(2, value_dtype), np.zeros(1, np.int64),
                           np.zeros(1, np.int64), np.array([0, -1], np.int32),
                           [(np.zeros(1, index_dtype), np.ones(1, index_dtype))],
                           np.arange(2, dtype=np.int64), 0, 2)


def tree_holders(roots: np.ndarray, ids: np.ndarray,
                 increasing: bool | None = None) -> np.ndarray:
    """Every vertex's holder (int64): the vertex of least user id (``ids``) in
    its tree of the forest ``roots`` (each vertex's root, the least internal
    id of its tree: the holder itself where user ids increase with internal
    ones, as the store numbers them; ``increasing`` says whether they do,
    None: look)."""
    ids = np.asarray(ids, np.int64)
    if increasing is None:
        increasing = increasing_ids(ids)
    if increasing:
        return roots
    holds = ids == union_find.least_over_sets(roots, ids)   # one a tree: ids are distinct
    holder_of_root = np.empty(roots.shape[0], np.int64)
    holder_of_root[roots[holds]] = np.flatnonzero(holds)
    return holder_of_root[roots]


def compact_holders(holders: np.ndarray, index_dtype) -> tuple[int, np.ndarray, np.ndarray]:
    """``(common, positions, others)``: the most frequent of ``holders`` (-1
    where there is none; over ``union_find.SAMPLE_SIZE`` evenly spaced ones
    where more, as Afforest names its largest tree: a count over every
    vertex id cost a partition of rmat:20 1.5 ms a peer) and the positions
    and values of the others."""
    if holders.size == 0:
        return -1, np.zeros(0, index_dtype), np.zeros(0, index_dtype)
    common = int(union_find.most_frequent_root(np.asarray(holders, np.int64),
                                               union_find.SAMPLE_SIZE))
    positions = np.flatnonzero(holders != common)
    return common, positions.astype(index_dtype), holders[positions].astype(index_dtype)


def read_runs(vertices: np.ndarray, reads: list) -> list:
    """For each partition q, ``(lo, hi)`` where the vertices this partition
    reads of q's range (``reads[q]``, increasing) are the forest's vertices
    ``lo..hi-1`` (``vertices`` increasing), None where they are not.  For
    every other partition they are: a vertex of q's range touches an edge
    here exactly where it is the source of an owned vertex's in-edge, which
    this partition then reads; so their holders are a slice of the forest,
    no gather through the numbering (:func:`compact_run_holders`).  (Its
    own range's are not: an owned vertex has edges here where it only
    receives.)"""
    runs = []
    for read in reads:
        lo = int(np.searchsorted(vertices, read[0])) if read.size else 0
        hi = lo + read.size
        runs.append((lo, hi) if np.array_equal(vertices[lo:hi], read) else None)
    return runs


def compact_run_holders(positions: np.ndarray, vertices: np.ndarray,
                        index_dtype) -> tuple[int, np.ndarray, np.ndarray]:
    """:func:`compact_holders` of the holders ``vertices[positions]`` (each a
    position in the increasing ``vertices``, int64), without making them:
    the most frequent position names the most frequent holder (sampled
    alike, ties alike: the order of positions is the holders'), and only
    the others are read (three peers' read vertices of a partition of
    kron:22 at four, 0.4 M each, one thread: a gather through the
    numbering and a compaction 1.9 ms a peer)."""
    common, apart, others = compact_holders(positions, np.int64)
    if common < 0:
        return common, apart.astype(index_dtype), others.astype(index_dtype)
    return int(vertices[common]), apart.astype(index_dtype), vertices[others].astype(index_dtype)


def expand_holders(message: tuple, size: int) -> np.ndarray:
    """The ``size`` holders of a :func:`compact_holders` message (int64)."""
    common, positions, others = message
    holders = np.full(size, common, np.int64)
    holders[np.asarray(positions, np.int64)] = others
    return holders


def holders_bytes(message: tuple, index_dtype) -> int:
    """The bytes of a :func:`compact_holders` message (its common holder one index)."""
    _, positions, others = message
    return int(np.dtype(index_dtype).itemsize + positions.nbytes + others.nbytes)


def links_between(mine: np.ndarray, theirs: np.ndarray, index_dtype) -> tuple[np.ndarray,
                                                                              np.ndarray]:
    """The links an owner's boundary vertices make between trees, as
    ``(vertices, their roots)`` of a spanning forest over the holders they
    join (the holders not their forest's root, the least holder):
    ``mine[i]`` and ``theirs[i]`` (int64), the owner's holder of a boundary
    vertex and a reader's where the two differ
    (:func:`~garaphpy.kernels.union_find.apart_holders`)."""
    nothing = (np.zeros(0, index_dtype), np.zeros(0, index_dtype))
    if not mine.size:
        return nothing
    # the holders joined, numbered 0..k-1 in increasing order, and a forest over them
    joined, local = np.unique(np.concatenate([mine, theirs]), return_inverse=True)
    half = local.size // 2
    parent = np.arange(joined.size, dtype=np.int64)
    with parallel_section():
        union_find.link_pairs(local[:half], local[half:], parent)
        union_find.compress(parent)
    linked = np.flatnonzero(parent != np.arange(joined.size))
    return joined[linked].astype(index_dtype), joined[parent[linked]].astype(index_dtype)


def merged_labels(roots: np.ndarray, vertices: np.ndarray, numbering: np.ndarray,
                  forests: list, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The least user id over each vertex's component in the union of the
    forests: ``roots`` (this partition's, over its ``vertices``; ``numbering``
    the position of every vertex held, -1 elsewhere) and ``forests``,
    (vertex, root) pairs of links known elsewhere, whose vertices this
    partition may not hold.

    Returns
    -------
    (vertices, labels)
        The vertices held, then those only a link names, and their labels.
    """
    named = np.unique(np.concatenate([np.asarray(array, np.int64) for pair in forests
                                      for array in pair] or [np.zeros(0, np.int64)]))
    foreign = named[numbering[named] < 0]
    held = vertices.size
    every = np.concatenate([np.asarray(vertices, np.int64), foreign])
    parent = np.concatenate([np.asarray(roots, np.int64),
                             np.arange(held, held + foreign.size, dtype=np.int64)])

    def positions(of):
        of = np.asarray(of, np.int64)
        found = numbering[of].astype(np.int64)
        outside = found < 0
        found[outside] = held + np.searchsorted(foreign, of[outside])
        return found

    with parallel_section():
        for linked, tree_roots in forests:
            union_find.link_pairs(positions(linked), positions(tree_roots), parent)
        union_find.compress(parent)
    return every, union_find.least_over_sets(parent, np.asarray(ids, np.int64)[every])


def lower_to_merged_labels(values: np.ndarray, roots: np.ndarray, vertices: np.ndarray,
                           numbering: np.ndarray, forests: list, ids: np.ndarray,
                           first: int, end: int) -> tuple[int, int | None]:
    """:func:`merged_labels` written into ``values`` as
    :func:`~garaphpy.kernels.union_find.lower_labels` would, where user ids
    increase with the internal ones (each tree's label is then its root's id):
    the links join the few trees they touch and the vertices only a link
    names, in a union-find over those alone, and one parallel pass lowers
    every held vertex to its tree's label or to its merged one
    (:func:`~garaphpy.kernels.union_find.lower_held_labels`), instead of a
    forest over every held vertex made again, compressed, and its least ids
    taken in two serial passes.  ``roots`` (the partition's forest, each
    vertex's root position) is overwritten.

    Returns
    -------
    (int, int or None)
        The owned vertices lowered (a half of kron:20, 0.5 M vertices held,
        one thread, dev VM: 12-13 ms -> 2-3 ms), and the least label of a
        held vertex (None: none is held): its first vertex's id, or a merged
        tree's label below it (an untouched tree's label is its root's id,
        no less than the first's), known without a pass over the labels.
    """
    named = np.unique(np.concatenate([np.asarray(array, np.int64) for pair in forests
                                      for array in pair] or [np.zeros(0, np.int64)]))
    position = numbering[named].astype(np.int64)
    held = position >= 0
    foreign = named[~held]
    touched = np.unique(roots[position[held]])
    count = touched.size

    def elements(of):
        of = np.asarray(of, np.int64)
        found = numbering[of].astype(np.int64)
        inside = found >= 0
        found[inside] = np.searchsorted(touched, roots[found[inside]])
        found[~inside] = count + np.searchsorted(foreign, of[~inside])
        return found

    parent = np.arange(count + foreign.size, dtype=np.int64)
    with parallel_section():
        for linked, tree_roots in forests:
            union_find.link_pairs(elements(linked), elements(tree_roots), parent)
        union_find.compress(parent)
    element_ids = np.concatenate([ids[vertices[touched]], ids[foreign]])
    merged = union_find.least_over_sets(parent, element_ids)
    roots[touched] = -2 - np.arange(count, dtype=np.int64)
    with parallel_section():
        lowered = union_find.lower_held_labels(values, roots, vertices, ids,
                                               merged[:count].astype(values.dtype), first, end)
    union_find.lower_labels(values, foreign, merged[count:].astype(values.dtype), first, end)
    least = None
    if vertices.size:
        least = int(ids[vertices[0]])
        if count:
            least = min(least, int(merged[:count].min()))
    return int(lowered), least


def increasing_ids(ids: np.ndarray) -> bool:
    """Whether the user ids increase with the internal ones."""
    return bool(ids.size < 2 or (ids[1:] > ids[:-1]).all())


class UnionFindStart:
    """The union-find start of :class:`~garaphpy.distributed.worker.PartitionWorker`
    (see the module): :meth:`share_holders`, :meth:`share_links` and
    :meth:`start_from_union_find`, one call of the client each after every
    worker's previous one, or :meth:`union_find_start`, all three in one."""

    #: the partition's edges both ways over the vertices they touch
    #: (:func:`partition_edges_both_ways`, :func:`vertices_with_edges`), their
    #: first out-edges laid out (:func:`~garaphpy.kernels.union_find.sampled_edges`)
    #: and the forest's parent array, each vertex its own (14.5 MB a partition
    #: of kron:22 at four, written in the start otherwise), made at set-up and
    #: let go once the forest is made
    union_find_edges = None
    #: for each partition, where the vertices this one reads of its range lie
    #: in the forest (:func:`read_runs`), made at set-up
    read_runs = None
    #: the least label of a vertex this partition holds an edge of, once the
    #: start lowered them (None: not known): every value the next pull
    #: gathers is at least this, so it is that pull's floor, without a pass
    #: over every vertex's value (:meth:`start_from_union_find`)
    start_floor = None

    def prepare_union_find(self) -> None:
        """Make the partition's edges both ways, and see whether the user ids
        increase with the internal ones (at set-up: the start reads both)."""
        if self.frontier is not None:
            out_offsets, out_targets = self.frontier.out_offsets, self.frontier.out_targets
        else:
            out_offsets, out_targets = partition_out_edges(
                self.sources, self.in_offsets, self.first, self.end, self.num_vertices,
                self.threads)
        edges = vertices_with_edges(*partition_edges_both_ways(
            out_offsets, out_targets, self.sources, self.in_offsets, self.first, self.end))
        with parallel_section():
            self.union_find_edges = (*edges, union_find.sampled_edges(edges[2], edges[3]),
                                     np.arange(edges[0].size, dtype=np.int64))
        self.read_runs = read_runs(edges[0], self.reads)
        self.increasing_ids = increasing_ids(self.attrs[3])

    def own_threads(self) -> None:
        """Take the worker's kernel threads on the calling thread (numba's count
        is per thread; the worker's sets it)."""

    def union_find_start(self) -> dict:
        """The three steps in one call, each waiting for the peers' messages of
        the last (one partition a worker: a worker's actors share a thread);
        :meth:`start_from_union_find`'s row."""
        self.share_holders()
        self.share_links()
        return self.start_from_union_find()

    def share_holders(self) -> int:
        """Link every edge of the partition in a union-find and send each other
        partition the holders of its vertices this one reads; bytes sent."""
        self.own_threads()
        started = time.perf_counter()
        if self.union_find_edges is None:
            self.prepare_union_find()
        self.forest_vertices, self.forest_numbering, offsets, targets, sampled, parent = \
            self.union_find_edges
        self.union_find_edges = None
        self.forest = partition_roots(offsets, targets, sampled, parent)
        # each held vertex's holder's position in forest_vertices (its root
        # where user ids increase with internal ones: no gather of the ids),
        # the holders themselves read where a message needs them alone
        self.holder_positions = self.forest if self.increasing_ids else tree_holders(
            self.forest, self.attrs[3][self.forest_vertices], False)
        index_dtype = self.store.vertex_dtype
        peers = self._start_peers()
        self.start_sends, sent = [], 0
        for q in peers:
            run = self.read_runs[q]
            if run is not None:
                message = compact_run_holders(self.holder_positions[run[0]:run[1]],
                                              self.forest_vertices, index_dtype)
            else:
                with parallel_section():
                    read = union_find.holders_of(self.reads[q], self.forest_numbering,
                                                 self.holder_positions, self.forest_vertices)
                message = compact_holders(read, index_dtype)
            sent += holders_bytes(message, index_dtype)
            self._send_start(q, "holders", message)
        self.start_bytes = [sent, 0]
        self.start_seconds = time.perf_counter() - started
        return sent

    def share_links(self) -> int:
        """Once the readers' holders came (:meth:`share_holders`), the links the
        owned vertices they read make between trees, kept and sent to every
        other partition (with one peer, kept alone: every edge between the
        two has an owned end here); bytes sent."""
        self.own_threads()
        started = time.perf_counter()
        peers = self._start_peers()
        came = self._start_messages("holders", peers)
        # the readers' holders against this partition's, message by message
        # (in one pass a message, never expanded), then the links they make
        pairs = [union_find.apart_holders(
            self.mirrors.lists[q], self.forest_numbering, self.holder_positions,
            self.forest_vertices, int(came[q][0]), np.asarray(came[q][1], np.int64),
            np.asarray(came[q][2], np.int64)) for q in peers]
        self.links = links_between(
            np.concatenate([mine for mine, _ in pairs] or [np.zeros(0, np.int64)]),
            np.concatenate([theirs for _, theirs in pairs] or [np.zeros(0, np.int64)]),
            self.store.vertex_dtype)
        if len(peers) > 1:
            for q in peers:
                self._send_start(q, "links", self.links)
            self.start_bytes[1] = pair_bytes(*self.links) * len(peers)
        self.start_seconds += time.perf_counter() - started
        return self.start_bytes[1]

    def start_from_union_find(self) -> dict:
        """Once every partition shared its links (:meth:`share_links`), lower
        every label, owned or read, to the least user id of its component in
        this partition's forest and every partition's links: the same labels
        on every partition, so nothing more is sent.  A label so lowered is
        still the id of a vertex of the same component and no label falls
        below its component's least id, so the iterations reach the same
        fixed point, in one step where the links join every tree.  Returns
        the owned labels lowered, the bytes sent (``sent_bytes``, and as
        ``holder_bytes`` and ``link_bytes``) and the seconds taken.  Where
        user ids increase with the internal ones, :attr:`start_floor` is the
        least held label."""
        self.own_threads()
        started = time.perf_counter()
        peers = self._start_peers()
        came = self._start_messages("links", peers) if len(peers) > 1 else {}
        for q, _, future in self.start_sends:       # all taken by now
            self._wait({q: future})
        forests = [self.links] + list(came.values())
        self.start_floor = None
        if self.increasing_ids:
            lowered, self.start_floor = lower_to_merged_labels(
                self.values, self.forest, self.forest_vertices, self.forest_numbering, forests,
                np.asarray(self.attrs[3], np.int64), self.first, self.end)
        else:
            vertices, labels = merged_labels(self.forest, self.forest_vertices,
                                             self.forest_numbering, forests, self.attrs[3])
            lowered = int(union_find.lower_labels(self.values, vertices,
                                                  labels.astype(self.values.dtype),
                                                  self.first, self.end))
        self.forest = self.forest_vertices = self.forest_numbering = None
        self.holder_positions = self.links = self.start_sends = None
        # a pull writes ``next`` at the owned vertices alone, and reads it there
        self.next[self.first:self.end] = self.values[self.first:self.end]
        return {"lowered": lowered, "sent_bytes": sum(self.start_bytes),
                "holder_bytes": self.start_bytes[0], "link_bytes": self.start_bytes[1],
                "seconds": self.start_seconds + time.perf_counter() - started}

    # a peer in another worker is called on that worker's event loop (async), a
    # peer in this worker in place (as the worker's ``receive``)
    async def receive_start(self, epoch: int, kind: str, sender: int, message) -> bool:
        """Partition ``sender``'s message of the union-find start."""
        return self.inbox.put_message(epoch, kind, sender, message)

    def receive_start_here(self, epoch: int, kind: str, sender: int, message) -> bool:
        """:meth:`receive_start`, called by a partition in the same worker."""
        return self.inbox.put_message(epoch, kind, sender, message)

    def _send_start(self, q: int, kind: str, message) -> None:
        """Send partition ``q`` a message of the start, not waiting for it to
        take it (a failed send fails the wait for the peers' messages)."""
        self.start_sends.append(
            (q, kind, self.tell(q, "receive_start", self.epoch, kind, self.index, message)))

    def _start_peers(self) -> list[int]:
        return [q for q in range(len(self.peers)) if q != self.index]

    def _start_messages(self, kind: str, peers: list[int]) -> dict:
        """Every peer's message of ``kind``, waited for (the exchange timeout at
        most; a failed send of this partition's fails the wait, naming the peer)."""
        failed = failed_sends(self, [(q, future, f"the {sent_kind} of the union-find start")
                                     for q, sent_kind, future in self.start_sends])
        try:
            return self.inbox.take_messages(kind, peers, self.setup.exchange_timeout, failed)
        except TimeoutError as error:
            raise WorkerError(f"worker {self.address}: partition {self.index}: {error} "
                              f"within {self.setup.exchange_timeout:g} s") from None
