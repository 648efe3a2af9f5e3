"""Partitions of a store by destination vertex range (Garaph section 2.1's pages, cut for workers).

A store's pages are already ranges of destination vertices with their
in-edges (CSC shards).  A run over P workers cuts the vertices 0..|V|-1
into P consecutive ranges holding about |E| / P in-edges each
(:func:`cut_partitions`, from the CSC index alone); partition p owns the
values of its range and pulls the in-edges of its vertices, which are the
pieces of the pages overlapping the range (:func:`partition_pieces`: a
page cut by a partition boundary is read by both partitions, each taking
its vertices' edges).  A vertex is never cut: its in-edges, even when
they span two pages, belong to one partition.

Nothing the client calls here reads edges: the cut and the pieces come from
the CSC index and the page table, so the client that plans a run never reads
the graph.  A worker, which holds its pieces, makes its mirror lists from
them (:func:`read_by`) and numbers their sources by the vertices they read
(:func:`compact_sources`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError


@dataclass(frozen=True)
class Partition:
    """One worker's share of a store.

    Attributes
    ----------
    index : int
        Its place among the run's partitions (0..P-1).
    first_vertex, end_vertex : int
        The destination vertices it owns, ``first_vertex..end_vertex-1``.
    num_edges : int
        Their in-edges.
    """

    index: int
    first_vertex: int
    end_vertex: int
    num_edges: int

    @property
    def num_vertices(self) -> int:
        return self.end_vertex - self.first_vertex


@dataclass(frozen=True)
class Piece:
    """The part of one page a partition pulls: the page's vertices inside
    the partition's range and their in-edges on that page (global edge
    numbers ``edge_begin..edge_end-1``)."""

    page: int
    first_vertex: int
    end_vertex: int
    edge_begin: int
    edge_end: int


def cut_partitions(in_offsets: np.ndarray, partitions: int) -> list[Partition]:
    """``partitions`` consecutive vertex ranges balanced by in-edges.

    Parameters
    ----------
    in_offsets : int64 array of |V| + 1
        The store's CSC index.
    partitions : int
        P, at least 1; more than |V| is refused.

    Returns
    -------
    list of Partition
        Each range non-empty; partition p's range ends at the first vertex
        whose in-edges start at or after p's share of the edges, p |E| / P
        (so a vertex of many in-edges may give one partition more than its
        share).
    """
    num_vertices = in_offsets.shape[0] - 1
    if isinstance(partitions, bool) or not isinstance(partitions, (int, np.integer)) \
            or partitions < 1:
        raise ConfigError(f"partitions={partitions!r}: expected a positive integer")
    if partitions > max(num_vertices, 1):
        raise ConfigError(f"partitions={partitions}: the graph has {num_vertices} vertices, "
                          "fewer than the partitions asked for")
    num_edges = int(in_offsets[-1])
    cuts = [0]
    for p in range(1, partitions):
        if num_edges:
            target = (p * num_edges + partitions - 1) // partitions
            cut = int(np.searchsorted(in_offsets, target, side="left"))
        else:
            cut = p * num_vertices // partitions
        # every range keeps at least one vertex, and room for those after it
        cut = min(max(cut, cuts[-1] + 1), num_vertices - (partitions - p))
        cuts.append(cut)
    cuts.append(num_vertices)
    return [Partition(p, cuts[p], cuts[p + 1], int(in_offsets[cuts[p + 1]] - in_offsets[cuts[p]]))
            for p in range(partitions)]


def partition_pieces(pages, in_offsets: np.ndarray, partition: Partition) -> list[Piece]:
    """The pieces of ``pages`` (the store's page table) that ``partition`` pulls,
    in page order."""
    pieces = []
    for page in pages:
        first = max(partition.first_vertex, page.first_vertex)
        end = min(partition.end_vertex, page.end_vertex)
        if first >= end:
            continue
        page_end = page.edge_begin + page.num_edges
        pieces.append(Piece(page.index, first, end,
                            max(int(in_offsets[first]), page.edge_begin),
                            min(int(in_offsets[end]), page_end)))
    return pieces


def partition_bytes(store, partition: Partition, value_itemsize: int) -> int:
    """The host memory a worker holds for ``partition``: the store's vertex
    arrays (every worker opens the store), the edges of its pieces (their
    sources and edge values) and the full-length vertex state (values, the
    next buffer, flags, ids) and, where the program pulls by frontier, its
    in-edges turned around (counted for every program: an upper bound)."""
    vertex_arrays = sum(int(meta["nbytes"]) for meta in store.manifest["arrays"].values())
    per_edge = store.vertex_dtype.itemsize + (store.weight_dtype.itemsize
                                              if store.weighted else 0)
    state = store.num_vertices * (2 * value_itemsize + 2 + 8)
    # the in-edges turned around for the notify (garaphpy.distributed.frontier)
    turned = partition.num_edges * store.vertex_dtype.itemsize + store.num_vertices * 10
    return vertex_arrays + partition.num_edges * per_edge + state + turned


def read_by(pieces_sources, partitions: list[Partition]) -> list[np.ndarray]:
    """The mirror lists of one partition: for each partition q, the vertices
    of q's range that ``pieces_sources`` (the sources of this partition's
    pieces, one array per piece) read, sorted and unique."""
    num_vertices = partitions[-1].end_vertex if partitions else 0
    # a flag per vertex: |V| bytes, one pass over the edges, no sort
    read = np.zeros(num_vertices, np.bool_)
    for sources in pieces_sources:
        read[np.asarray(sources)] = True
    return [partition.first_vertex + np.flatnonzero(
                read[partition.first_vertex:partition.end_vertex]).astype(np.int64)
            for partition in partitions]


def compact_sources(pieces_sources, first: int, end: int, num_vertices: int) -> np.ndarray:
    """Number the sources of a partition's in-edges in place: its own vertices
    ``first..end-1`` first (``u - first``), then the other partitions' vertices
    its edges read, its *ghosts*, in increasing order (``end - first`` on);
    the ghosts.

    PowerGraph's and Gemini's local ids.  A pull of precomputed source-side
    gathers then computes them for the owned vertices and the ghosts alone
    and reads them from an array of that size, not of |V|: fewer gathers a
    pull, and fewer cache lines its random reads touch (on kron:20 a
    partition of four reads 57% of the vertices).  The sums are the same, in
    the same order.

    Parameters
    ----------
    pieces_sources : list of arrays
        The sources of the partition's pieces (views of one array), rewritten.
    first, end : int
        The owned vertices.
    num_vertices : int
        |V|.

    Returns
    -------
    int64 array
        The ghosts, sorted: a source ``u`` outside the owned range becomes
        ``end - first + i`` where ``result[i] == u``.
    """
    read = np.zeros(num_vertices, np.bool_)
    for sources in pieces_sources:
        read[sources] = True
    read[first:end] = False
    ghosts = np.flatnonzero(read)
    if pieces_sources:
        dtype = pieces_sources[0].dtype
        place = np.cumsum(read, dtype=dtype) + np.array(end - first - 1, dtype)
        place[first:end] = np.arange(end - first, dtype=dtype)
        for sources in pieces_sources:
            sources[:] = place[sources]
    return ghosts
