"""Preprocessing: an edge source in, a Garaph store out.

Garaph section 2.1 (CSC shards with 16-bit IdxOff, pages, the CSR of
out-edges for notify-pull), section 2.2 (page data blocks spread over several
storage devices by a hash) and section 6.5 (preprocessing scans the input
once or twice).  The steps:

1. *Ingest*: stream the input, renumber arbitrary ids to 0..n-1 (increasing
   order of the original id; inputs that declare their size keep their ids),
   count or drop self-loops, add reverse edges for undirected graphs.
2. *CSC*: a stable counting sort by source, then by destination, gives every
   vertex's in-edges sorted by source; runs of equal edges are merged by the
   duplicate policy.  CSR: a stable counting sort of the CSC by source.
3. *Layout*: shards and pages from the in-degrees (layout.py).
4. *Write*: page images cut into data blocks, each block placed in a storage
   directory chosen by a hash of (page, block), checksummed (page_writer.py);
   vertex arrays; the manifest last.

When the edges do not fit the host-memory budget, ingest reads the input
twice (vertex ids, then edges) and spills edges into destination-range
buckets on disk (scratch.py: every scratch file checksummed, duplicate
bombs merged as they are spilled); each group of buckets that fits the
budget is sorted on its own, a bucket larger than the budget in pieces
split by a finer key (bucket_split.py), and the CSR is built from
source-range buckets the same way.  Both paths produce byte-identical stores.

Everything is written into temporary directories that are renamed into
place at the end, so an interrupted or failed build leaves no store behind.
Only a store of ours is ever replaced, temporaries of dead builds are
removed by the next build, every write and every scratch read is checked,
and a build that cannot fit the memory budget or the disk is refused up
front (:mod:`garaphpy.storage.filesafety`).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import numba
import numpy as np

from .. import _numba_setup, config
from ..errors import ConfigError, GraphInputError, StoreError
from ..options import BuildOptions
from ..paths import cache_directory
from ..progress import PRINTED_BY_CLI, Progress, human_bytes
from ..progress import logger as progress_logger
from . import _build_kernels as kernels
from . import filesafety, layout, page_codec
from .compress_choice import choose_compression
from .page_writer import BLOCK_FILE, StoreWriter, write_array, write_pages
from .page_writer import block_directory  # noqa: F401  (re-exported: declared here before)
from .bucket_split import bucket_pieces
from .scratch import AppendFile, scan_blocks, weight_statistics
from .scratch import Buckets as _Buckets
from .edges import EdgeChunk, EdgeSource, location_error, warn_if_weights_rounded

# ------------------------------------------------------------------ summary --

@dataclass
class LoadSummary:
    """What cleaning did, printed after a build and kept in the manifest."""

    edges_read: int = 0
    self_loops_found: int = 0
    self_loops_removed: int = 0
    reverse_edges_added: int = 0
    duplicates_removed: int = 0
    num_vertices: int = 0
    num_edges: int = 0
    isolated_vertices: int = 0
    max_in_degree: int = 0
    max_out_degree: int = 0
    #: Smallest stored edge value (None when unweighted).
    min_weight: int | float | None = None
    #: Stored edges whose value is < 0, and where the input's first one is
    #: (:meth:`EdgeSource.locate_weight`); likewise for values <= 0.
    negative_weights: int = 0
    first_negative_weight: dict | None = None
    nonpositive_weights: int = 0
    first_nonpositive_weight: dict | None = None


# -------------------------------------------------------------------- ingest --

class _BudgetExceeded(Exception):
    """The in-memory ingest outgrew the budget: rebuild out of core."""


def _vertex_dtype(num_vertices: int) -> np.dtype:
    return np.dtype(np.int32) if num_vertices < config.INT32_VERTEX_LIMIT else np.dtype(np.int64)


def _check_chunk(chunk: EdgeChunk, source: EdgeSource) -> None:
    if chunk.src.shape != chunk.dst.shape:
        raise GraphInputError("source and destination arrays differ in length", path=source.name)
    if source.weighted and (chunk.weight is None or chunk.weight.shape != chunk.src.shape):
        raise GraphInputError("a chunk of a weighted input lacks weights", path=source.name)


class _Ingest:
    """Streams an input into internal ids, counting what cleaning does."""

    def __init__(self, source: EdgeSource, options: BuildOptions, summary: LoadSummary,
                 progress: Progress):
        self.source = source
        self.options = options
        self.summary = summary
        self.progress = progress
        self.keep_weights = source.weighted and options.weight_dtype != "none"
        directed = options.directed
        if directed is None:
            directed = source.directed if source.directed is not None else True
        self.directed = bool(directed)
        self.symmetrize = not self.directed and not source.already_symmetric
        self.weight_range = [None, None]
        self.fractional_weights = False
        #: the vertices of the self-loops the last cleaned chunk dropped, or None
        self.dropped_loop_ids = None

    def clean(self, src, dst, weight):
        """Self-loops and reverse edges of one chunk (never modifies its input)."""
        loop_mask = src == dst
        loops = int(np.count_nonzero(loop_mask))
        self.summary.self_loops_found += loops
        self.dropped_loop_ids = None
        if loops and self.options.self_loops == "drop":
            self.summary.self_loops_removed += loops
            self.dropped_loop_ids = src[loop_mask]     # their vertices stay in the graph
            keep = ~loop_mask
            src, dst = src[keep], dst[keep]
            weight = weight[keep] if weight is not None else None
            loop_mask = np.zeros(src.size, bool)
        if self.symmetrize:
            forward = ~loop_mask
            src, dst = (np.concatenate([src, dst[forward]]),
                        np.concatenate([dst, src[forward]]))
            if weight is not None:
                weight = np.concatenate([weight, weight[forward]])
            self.summary.reverse_edges_added += int(np.count_nonzero(forward))
        return src, dst, weight

    def note_weights(self, weight) -> None:
        if weight is None or weight.size == 0:
            return
        low, high = weight.min(), weight.max()
        self.weight_range[0] = low if self.weight_range[0] is None else min(self.weight_range[0], low)
        self.weight_range[1] = high if self.weight_range[1] is None else max(self.weight_range[1], high)
        if weight.dtype.kind == "f" and not self.fractional_weights:
            self.fractional_weights = bool(np.any(weight != np.floor(weight)))

    def check_weights(self) -> None:
        """Refuse weights the requested weight_dtype cannot hold, naming the first.

        Called after each complete pass over the input.  ``auto`` never
        refuses: :meth:`weight_dtype` widens instead.
        """
        requested = self.options.weight_dtype
        low, high = self.weight_range
        if not self.keep_weights or requested == "auto" or low is None:
            return
        dtype = np.dtype(requested)
        if dtype.kind == "i":
            if self.fractional_weights:
                self._refuse(lambda w: w != np.floor(w), f"is not an integer, and weight_dtype="
                             f"'{requested}' stores integers (use 'float64' or 'auto')")
            info = np.iinfo(dtype)
            if low < info.min or high > info.max:
                self._refuse(lambda w: (w < info.min) | (w > info.max),
                             f"does not fit weight_dtype='{requested}' ({info.min}.."
                             f"{info.max}); use 'int64' or 'auto'")
        elif max(abs(float(low)), abs(float(high))) > float(np.finfo(dtype).max):
            limit = float(np.finfo(dtype).max)
            self._refuse(lambda w: np.abs(w) > limit,
                         f"overflows weight_dtype='{requested}' (largest {limit:.6g}); "
                         "use 'float64' or 'auto'")

    def _refuse(self, test, problem: str) -> None:
        found = self.source.locate_weight(test)
        if found is None:  # the input changed under us; still refuse
            raise GraphInputError(f"a weight {problem}", path=self.source.name)
        raise location_error(found, f"weight {found['value']!r} {problem}")

    def weight_dtype(self, stored_range=None) -> np.dtype | None:
        """Stored weight type (BuildOptions.weight_dtype resolved).

        ``auto`` widens int32 to int64 and float32 to float64 where the
        values (``stored_range``, after merging duplicates, else those read)
        do not fit.
        """
        if not self.keep_weights:
            return None
        if self.options.weight_dtype != "auto":
            return np.dtype(self.options.weight_dtype)
        low, high = stored_range if stored_range is not None else self.weight_range
        if self.source.weight_kind == "int":
            fits = low is None or (low >= -2**31 and high < 2**31)
            return np.dtype(np.int32) if fits else np.dtype(np.int64)
        own = getattr(self.source, "real_weight_dtype", None)
        if own is not None and own == np.float64:
            return own
        largest = float(np.finfo(np.float32).max)
        fits = low is None or max(abs(float(low)), abs(float(high))) <= largest
        return np.dtype(np.float32) if fits else np.dtype(np.float64)

    def chunks(self):
        """Cleaned chunks (src, dst, weight) of the source, in its own 0-based ids.

        Ids are checked against a declared vertex count; the same chunk
        sequence comes out of every pass, so in-memory and out-of-core builds
        see the edges in one order.
        """
        self.summary.edges_read = 0
        self.summary.self_loops_found = self.summary.self_loops_removed = 0
        self.summary.reverse_edges_added = 0
        for chunk in self.source.chunks(config.READ_CHUNK_EDGES):
            _check_chunk(chunk, self.source)
            self.summary.edges_read += len(chunk)
            self.progress.update(self.summary.edges_read, "reading")
            if self.source.num_vertices is not None:
                _check_declared(chunk, self.source)
            weight = chunk.weight if self.keep_weights else None
            self.note_weights(weight)
            yield self.clean(chunk.src, chunk.dst, weight)
        self.check_weights()


class _VertexIdSet:
    """The set of vertex ids met so far, for renumbering.

    While ids are non-negative and not much larger than the number of edges
    seen, a presence table marks them (one pass, no sort); otherwise each
    chunk's unique ids are kept and merged at the end.
    """

    def __init__(self):
        self.present = np.zeros(0, np.bool_)
        self.parts: list[np.ndarray] | None = None
        self.seen = 0

    def add(self, src: np.ndarray, dst: np.ndarray, id_range: tuple | None = None) -> None:
        """Mark the ids of ``src`` and ``dst``; ``id_range``: their (lowest,
        highest) where the caller knows it."""
        if src.size == 0:
            return
        self.seen += src.size
        low, high = map(int, id_range or kernels.id_range(src, dst))
        if self.parts is None and low >= 0 and high < max(1 << 24, 16 * self.seen):
            if high >= self.present.size:
                grown = np.zeros(max(high + 1, 2 * self.present.size), np.bool_)
                grown[:self.present.size] = self.present
                self.present = grown
            kernels.mark_present(src, self.present)
            kernels.mark_present(dst, self.present)
            return
        if self.parts is None:
            self.parts = [np.flatnonzero(self.present).astype(np.int64)]
            self.present = np.zeros(0, np.bool_)
        self.parts.append(np.unique(np.concatenate([src, dst])).astype(np.int64))
        if sum(p.size for p in self.parts) > 4 * max(self.parts[0].size, 1 << 20):
            self.parts = [np.unique(np.concatenate(self.parts))]

    def sorted_ids(self) -> np.ndarray:
        """Every id met, sorted, as int64."""
        if self.parts is None:
            return np.flatnonzero(self.present).astype(np.int64)
        return np.unique(np.concatenate(self.parts)).astype(np.int64)


def _renumbering(unique_ids: np.ndarray):
    """A mapping from sorted unique original ids to 0..n-1.

    Returns (table, base): ``internal = table[raw - base]`` for dense ids,
    else (None, None) and callers use ``searchsorted``.
    """
    if unique_ids.size == 0:
        return None, None
    low, high = int(unique_ids[0]), int(unique_ids[-1])
    span = high - low + 1
    if span <= max(4 * unique_ids.size, 1 << 16):
        table = np.full(span, -1, _vertex_dtype(unique_ids.size))
        table[unique_ids - low] = np.arange(unique_ids.size, dtype=table.dtype)
        return table, low
    return None, None


def _map_ids(raw: np.ndarray, unique_ids: np.ndarray, table, base, out: np.ndarray) -> None:
    if table is not None:
        kernels.map_dense_ids(raw - base if base else raw, table, out)
    else:
        out[:] = np.searchsorted(unique_ids, raw)


def _check_declared(chunk: EdgeChunk, source: EdgeSource) -> None:
    n = source.num_vertices
    for name, ids in (("source", chunk.src), ("destination", chunk.dst)):
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids.min()) if ids.min() < 0 else int(ids.max())
            raise GraphInputError(
                f"{name} id {bad + source.id_base} is outside the declared "
                f"{n} vertices", path=source.name)


class _GrowingEdges:
    """The edges read so far, in two id arrays that grow as chunks come.

    The arrays are reserved for the input's edge count estimate up front
    (pages nobody writes cost no memory) and narrowed on the way in (int32
    while every id fits), so a chunk is copied once, with no temporaries.
    """

    def __init__(self, dtype, capacity: int):
        self.dtype = np.dtype(dtype)
        self.size = 0
        self.src = np.empty(max(capacity, 1), self.dtype)
        self.dst = np.empty(max(capacity, 1), self.dtype)

    def _reserve(self, needed: int, dtype) -> None:
        if needed <= self.src.size and dtype == self.dtype:
            return
        capacity = max(needed, 2 * self.src.size if needed > self.src.size else self.src.size)
        for name in ("src", "dst"):
            grown = np.empty(capacity, dtype)
            grown[:self.size] = getattr(self, name)[:self.size]
            setattr(self, name, grown)
        self.dtype = np.dtype(dtype)

    def append(self, src: np.ndarray, dst: np.ndarray, wide: bool = False):
        """Store a chunk (``wide``: in int64 from now on); views of its copy."""
        self._reserve(self.size + src.size, np.int64 if wide else self.dtype)
        end = self.size + src.size
        stored_src, stored_dst = self.src[self.size:end], self.dst[self.size:end]
        stored_src[:] = src
        stored_dst[:] = dst
        self.size = end
        return stored_src, stored_dst


def _ingest_in_memory(ingest: _Ingest, budget_edges: int):
    """All edges in memory, in internal ids.  Raises _BudgetExceeded."""
    source = ingest.source
    declared = source.num_vertices is not None
    estimate = int(source.num_edges_hint or 0) * (2 if ingest.symmetrize else 1)
    edges = _GrowingEdges(_vertex_dtype(source.num_vertices) if declared else np.int32,
                          min(budget_edges, estimate + estimate // 8 + 1024))
    parts_w = []
    vertex_ids = _VertexIdSet()
    for src, dst, weight in ingest.chunks():
        if edges.size + src.size > budget_edges:
            raise _BudgetExceeded()
        if weight is not None:
            parts_w.append(weight)
        if declared:
            edges.append(src, dst)
        elif src.size:
            low, high = kernels.id_range(src, dst)
            stored = edges.append(src, dst, wide=low < 0 or high >= 2**31)
            vertex_ids.add(*stored, id_range=(low, high))
        if not declared and ingest.dropped_loop_ids is not None:
            vertex_ids.add(ingest.dropped_loop_ids, ingest.dropped_loop_ids)
    src, dst = edges.src[:edges.size], edges.dst[:edges.size]
    if declared:
        num_vertices, original_ids = source.num_vertices, None
    else:
        original_ids = vertex_ids.sorted_ids()
        del vertex_ids
        num_vertices = int(original_ids.size)
        vid = _vertex_dtype(num_vertices)
        table, base = _renumbering(original_ids)
        # renumbered in place (internal ids are never wider than the ids read)
        mapped_src = src if src.dtype == vid else np.empty(src.size, vid)
        _map_ids(src, original_ids, table, base, mapped_src)
        mapped_dst = dst if dst.dtype == vid else np.empty(dst.size, vid)
        _map_ids(dst, original_ids, table, base, mapped_dst)
        src, dst = mapped_src, mapped_dst
    weight = None
    if ingest.keep_weights:
        weight = np.concatenate(parts_w) if parts_w else np.zeros(
            0, np.int64 if source.weight_kind == "int" else np.float64)
    return num_vertices, original_ids, src, dst, weight


# -------------------------------------------------------------- CSC and CSR --

def _index_dtype(count: int) -> np.dtype:
    return np.dtype(np.int32) if count < 2**31 else np.dtype(np.int64)


def _sorted_by_key(keys, key_base: int, key_range: int, values):
    """(offsets, values stably sorted by keys), sorting ``values`` in place.

    See kernels.sort_by_key.
    """
    if keys.size <= config.NUMPY_SORT_MAX_EDGES:
        return kernels.sort_by_key_numpy(keys, key_base, key_range, values), values
    key_scratch = np.empty(keys.size, np.int64 if keys.dtype.itemsize > 4 else np.int32)
    value_scratch = np.empty_like(values)
    offsets = kernels.sort_by_key(keys, key_base, key_range, values, values, key_scratch,
                                  value_scratch, numba.get_num_threads())
    return offsets, values


def _expand_offsets(offsets, first_key: int, out: np.ndarray) -> None:
    """out[e] = first_key + k for every e in offsets[k]..offsets[k+1]-1 (see
    kernels.expand_offsets; numpy for small inputs, like :func:`_sorted_by_key`)."""
    if out.size <= config.NUMPY_SORT_MAX_EDGES:
        kernels.expand_offsets_numpy(offsets, first_key, out)
    else:
        kernels.expand_offsets(offsets, first_key, out)


def _gather(values, permutation, out) -> None:
    """out[i] = values[permutation[i]] (numpy for small inputs)."""
    if out.size <= config.NUMPY_SORT_MAX_EDGES:
        np.take(values, permutation, out=out)
    else:
        kernels.gather(values, permutation, out)


def _kernel_for(kernel, items: int):
    """``kernel`` (a numba dispatcher that calls no other kernel), or its Python
    function when the input is small (:data:`config.INTERPRET_MAX_ITEMS`): the
    same code, run without compiling it."""
    if items <= config.INTERPRET_MAX_ITEMS:
        return kernel.py_func
    return kernel


def _csc_of_group(columns: dict, first_vertex: int, end_vertex: int, num_vertices: int,
                  duplicates: str):
    """CSC of the edges whose destinations lie in first_vertex..end_vertex-1.

    Two stable sorts, by source and then by destination (a least significant
    digit radix order), leave every destination's sources sorted and equal
    edges in input order, so duplicates merge in one linear pass.
    ``columns`` holds ``src``, ``dst`` and ``weight`` (or None) and is emptied:
    each input array is reused or freed as soon as possible.

    Returns
    -------
    sources : numpy.ndarray
        Sources grouped by destination, each group sorted by source.
    weights : numpy.ndarray or None
    in_degree : numpy.ndarray of int64
        Edges kept per destination.
    removed : int
        Duplicates merged away.
    """
    src, dst, weight = columns.pop("src"), columns.pop("dst"), columns.pop("weight")
    num_items = src.size
    count = end_vertex - first_vertex
    if weight is None:
        # dst in source order; then src rebuilt from the source offsets
        by_source, dst = _sorted_by_key(src, 0, num_vertices, dst)
        _expand_offsets(by_source, 0, src)
        del by_source
        offsets, sources = _sorted_by_key(dst, first_vertex, count, src)
        weights = None
    else:
        items = np.arange(num_items, dtype=_index_dtype(num_items))
        _, items = _sorted_by_key(src, 0, num_vertices, items)
        keys = np.empty_like(dst)
        _gather(dst, items, keys)
        offsets, items = _sorted_by_key(keys, first_vertex, count, items)
        del keys
        sources = np.empty_like(src)
        _gather(src, items, sources)
        weights = np.empty_like(weight)
        _gather(weight, items, weights)
        del items, weight
    del src, dst
    if duplicates == "keep":
        return sources, weights, np.diff(offsets), 0
    kept = np.empty(count, np.int64)
    dedup = _kernel_for(kernels.dedup_sorted_segments, num_items)
    dedup(offsets, sources, weights if weights is not None else np.zeros(1, np.int64),
          weights is not None, kernels.DUPLICATE_POLICIES[duplicates], kept)
    removed = num_items - int(kept.sum())
    if removed:
        new_offsets = np.zeros(count + 1, np.int64)
        np.cumsum(kept, out=new_offsets[1:])
        compacted = np.empty(int(new_offsets[-1]), sources.dtype)
        compact = _kernel_for(kernels.compact_segments, num_items)
        compact(offsets, kept, new_offsets, sources, compacted)
        sources = compacted
        if weights is not None:
            compacted = np.empty(int(new_offsets[-1]), weights.dtype)
            compact(offsets, kept, new_offsets, weights, compacted)
            weights = compacted
    return sources, weights, kept, removed


def _csr_of_group(sources: np.ndarray, destinations: np.ndarray, first_vertex: int,
                  count: int):
    """Out-edges of sources first_vertex..first_vertex+count-1, by source.

    The sort is stable, so each vertex's targets keep the order they come in
    (increasing, when the edges come in CSC order).  ``destinations`` is
    reordered in place and returned as the targets.

    Returns (offsets relative to the group, targets).
    """
    return _sorted_by_key(sources, first_vertex, count, destinations)


# ------------------------------------------------------------ the out-of-core path --

def _check_symmetric(source: EdgeSource, original_ids, in_offsets, csc_src, csc_weight,
                     out_offsets, out_targets) -> None:
    """GraphInputError unless every vertex's in-edges are its out-edges, with
    the same weights, for an input that says it stores an undirected graph in
    both directions (both lists come sorted, so they must be equal arrays)."""
    vertex = None
    differs = np.flatnonzero(in_offsets != out_offsets)
    if differs.size:
        vertex = int(differs[0]) - 1
    else:
        step = 1 << 20
        for block, (sources, targets) in enumerate(zip(scan_blocks(csc_src, step),
                                                       scan_blocks(out_targets, step))):
            unequal = np.flatnonzero(sources != targets)
            if unequal.size:
                edge = block * step + int(unequal[0])
                vertex = int(np.searchsorted(in_offsets, edge, side="right")) - 1
                break

    def name(vertex):
        return int(original_ids[vertex]) if original_ids is not None else vertex + source.id_base

    if vertex is not None:
        raise GraphInputError(f"the file says the graph is undirected (each edge stored both "
                              f"ways), but vertex {name(vertex)}'s in-edges differ from its "
                              "out-edges", path=source.name)
    if csc_weight is None:
        return
    check = _kernel_for(kernels.first_asymmetric_weight, csc_src.size)
    edge = int(check(in_offsets, csc_src, csc_weight))
    if edge >= 0:
        head = int(np.searchsorted(in_offsets, edge, side="right")) - 1
        tail = int(csc_src[edge])
        copy = edge - in_offsets[head] - int(np.searchsorted(
            csc_src[in_offsets[head]:in_offsets[head + 1]], tail))
        reverse = in_offsets[tail] + copy + int(np.searchsorted(
            csc_src[in_offsets[tail]:in_offsets[tail + 1]], head))
        raise GraphInputError(f"the file says the graph is undirected (each edge stored both "
                              f"ways), but edge {name(tail)} -> {name(head)} weighs "
                              f"{csc_weight[edge].item()!r} and edge {name(head)} -> "
                              f"{name(tail)} {csc_weight[reverse].item()!r}", path=source.name)


def _unique_ids_streaming(ingest: _Ingest) -> np.ndarray:
    """First pass of an out-of-core build: the sorted set of vertex ids."""
    vertex_ids = _VertexIdSet()
    for src, dst, _ in ingest.chunks():
        vertex_ids.add(src, dst)
        if ingest.dropped_loop_ids is not None:
            vertex_ids.add(ingest.dropped_loop_ids, ingest.dropped_loop_ids)
    return vertex_ids.sorted_ids()


# ------------------------------------------------------------------- writing --

def _resolve_gpu_memory(options: BuildOptions) -> int:
    """The GPU budget pages are sized for: the run's rule (:func:`config.gpu_budget`),
    with ``config.DEFAULT_GPU_MEMORY_BYTES`` where no GPU is visible."""
    return config.gpu_budget(options.gpu_memory,
                             without_device=config.DEFAULT_GPU_MEMORY_BYTES)


def _change_stamp(identity: dict) -> dict:
    """For a file, what no edit leaves unchanged: its inode and status-change
    time (ctime), which a write sets and which, unlike the modification time,
    no user can set back (``touch -r`` and restoring copies change it too)."""
    if identity.get("kind") != "file" or not identity.get("path"):
        return {}
    try:
        status = os.stat(identity["path"])
    except (OSError, ValueError):
        return {}
    return {"inode": status.st_ino, "ctime_ns": status.st_ctime_ns}


def store_key(identity: dict, options: BuildOptions) -> str:
    """Key of a store: a hash of the input's identity (for a file, with its
    change stamp: :func:`_change_stamp`) and the content options."""
    identity = {**identity, **_change_stamp(identity)}
    text = json.dumps({"input": identity, "options": options.content_options(),
                       "version": config.STORE_FORMAT_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


# ---------------------------------------------------------------- the build --

def build_store(source: EdgeSource, path, options: BuildOptions | None = None, *,
                progress: bool = True, force: bool = False, verify: str = "auto"):
    """Preprocess ``source`` into a store at ``path`` (or reuse an up-to-date one).

    Parameters
    ----------
    source : EdgeSource
        The input (see :func:`garaphpy.storage.readers.open_source`,
        :mod:`garaphpy.generators`).
    path : str or os.PathLike
        Directory of the store.  Created; replaced if it holds a store of
        another input or other options.  Only a directory that is provably
        a garaphpy store and holds nothing else is ever replaced
        (:func:`garaphpy.storage.filesafety.check_replaceable`); a file, a
        link or a directory of the user's is a StoreError, untouched.
    options : BuildOptions, optional
        Cleaning and layout options.
    progress : bool
        Log progress lines and the load summary (logger ``garaphpy.preprocess``,
        INFO; see :mod:`garaphpy.progress`).
    force : bool
        Rebuild even if an up-to-date store exists.
    verify : {"auto", "full", "quick", "sizes", "none"}
        How an up-to-date store is checked when it is reused
        (:mod:`garaphpy.storage.verify_levels`).

    Returns
    -------
    garaphpy.storage.store.Store
        The opened store.
    """
    from .store import Store, read_manifest
    from .verify_levels import check_level, record_full_check

    options = options or BuildOptions()
    options.validate()
    check_level(verify, "store.verify")
    path = Path(path)
    key = store_key(source.identity(), options)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StoreError(f"{error.filename or path.parent}: cannot create the store's parent "
                         f"directory ({error.strerror or error})") from None
    # one build or open of this path at a time: what is checked stays true until opened
    with filesafety.StoreLock(path):
        if path.exists() and not force:
            try:
                manifest = read_manifest(path)
            except StoreError:
                manifest = None
            if manifest is not None and manifest.get("key") == key \
                    and _format_as_asked(manifest, options):
                store = Store.open(path, verify=verify, key=key)
                store.reused = True
                if progress:
                    progress_logger("preprocess").info(
                        f"preprocess: reusing up-to-date store {path}")
                return store
        # asked only for a build: an up-to-date store opens without touching the GPU
        _build_locked(source, path, options, key, _resolve_gpu_memory(options), progress)
        # just written and checksummed block by block: a quick check suffices,
        # and counts as a full one for the next opening
        store = Store.open(path, verify="quick", key=key)
        record_full_check(store)
        return store


def _format_as_asked(manifest: dict, options: BuildOptions) -> bool:
    """Whether a store's page format is the one ``options`` asks for:
    ``compress=False`` shares ``"auto"``'s key (so that stores built when
    False was the default keep theirs), and a store ``"auto"`` built
    compressed is rebuilt plain for it."""
    return options.compress is not False or "page_codec" not in manifest.get("layout", {})


def _refuse_repeated_storage_dirs(storage_dirs) -> None:
    """ConfigError for a storage directory listed twice (after resolving links):
    its blocks would overwrite each other's."""
    seen: dict[str, str] = {}
    for directory in storage_dirs:
        real = os.path.realpath(directory)
        if real in seen:
            same = "" if seen[real] == str(directory) else f" (as {seen[real]})"
            raise ConfigError(f"storage_dirs: {directory} is listed twice{same}; list each "
                              "storage directory once")
        seen[real] = str(directory)


def _build_locked(source: EdgeSource, path: Path, options: BuildOptions, key: str,
                  gpu_memory: int, progress: bool) -> None:
    """Build ``source`` into ``path``; the caller holds the path's StoreLock."""
    _refuse_repeated_storage_dirs(options.storage_dirs)
    # refuse before any work: only a store of ours is ever replaced
    filesafety.check_replaceable(path)
    for directory in options.storage_dirs:
        filesafety.check_replaceable(Path(directory) / f"{path.name}-{key[:12]}", "storage_dirs")
    # the debris of any killed build, of this store or another (by marker and pid)
    for parent in dict.fromkeys([path.parent, *map(Path, options.storage_dirs),
                                 cache_directory()]):
        filesafety.remove_stale_temporaries(parent, ".+")
    builder = _Builder(source, path, options, key, gpu_memory, progress)
    # a Ctrl-C while numba compiles is not lost; the compiling is left out of the rate
    with _numba_setup.KeptInterrupts(), builder.progress:
        builder.run()


#: Host memory the build takes per vertex, whatever the edges (offsets,
#: degrees, sort counters; measured: a .gr of 10^7 vertices and 2 edges
#: peaks 45 bytes per vertex above the interpreter).
BUILD_BYTES_PER_VERTEX = 48


class _Builder:
    def __init__(self, source, path: Path, options: BuildOptions, key: str, gpu_memory: int,
                 show_progress: bool):
        self.source = source
        self.path = path
        self.options = options
        self.key = key
        self.gpu_memory = gpu_memory
        self.summary = LoadSummary()
        self.progress = Progress("preprocess", total=source.num_edges_hint, enabled=show_progress)
        self.show_progress = show_progress
        self.budget = options.memory_budget or config.default_host_budget()
        self.temporaries: list[Path] = []
        self.locks: dict[Path, filesafety.TemporaryLock] = {}
        self.phase_seconds: dict[str, float] = {}
        self._build_started = self._phase_started = time.perf_counter()

    def _mark(self, phase: str) -> None:
        """Record the time since the previous mark under ``phase``."""
        now = time.perf_counter()
        self.phase_seconds[phase] = round(
            self.phase_seconds.get(phase, 0.0) + now - self._phase_started, 4)
        self._phase_started = now

    # -- bookkeeping of temporary directories ------------------------------
    def _temporary(self, parent: Path, name: str, locked: bool = True) -> Path:
        parent.mkdir(parents=True, exist_ok=True)
        directory = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-{os.getpid()}-", dir=parent))
        self.temporaries.append(directory)
        if locked:
            self.locks[directory] = filesafety.TemporaryLock(directory)
        return directory

    def _rename_into_place(self, temporary: Path, target: Path) -> None:
        self.locks.pop(temporary).release()
        os.rename(temporary, target)
        self.temporaries.remove(temporary)

    def run(self) -> None:
        try:
            self._run()
        except OSError as error:
            # mkdir, rename, open: one line naming the path (writes raise StoreError already)
            where = error.filename or self.path
            raise StoreError(f"{where}: {error.strerror or error} (building the store "
                             f"{self.path})") from None
        except MemoryError:
            raise StoreError(f"{self.source.name}: out of memory while preprocessing it into "
                             f"{self.path} with a memory budget of {self.budget:,} bytes "
                             "(store.memory_budget)") from None
        finally:
            for lock in self.locks.values():
                lock.release(unlink=False)
            for directory in self.temporaries:
                shutil.rmtree(directory, ignore_errors=True)

    def _check_fits(self, ingest: _Ingest) -> None:
        """Refuse up front, with the numbers, a build that cannot fit.

        Vertex arrays stay in memory whatever the edges do (about
        :data:`BUILD_BYTES_PER_VERTEX` bytes per vertex); a declared vertex
        count must fit the memory budget.  A declared edge count (headers,
        generators) gives the store's size, which must fit the free space of
        the store's and the storage directories' file systems.
        """
        source, options = self.source, self.options
        n = source.num_vertices
        if n is None:
            return
        needed = BUILD_BYTES_PER_VERTEX * n
        if needed > self.budget:
            raise StoreError(
                f"{source.name}: its {n:,} declared vertices need about {needed:,} bytes of "
                f"memory to preprocess, more than the memory budget of {self.budget:,} "
                "bytes (store.memory_budget)")
        m = source.num_edges_hint
        if m is None or source.format in ("snap", "el", "wel"):
            return  # text edge lists only estimate their edge count
        if ingest.symmetrize:
            m *= 2
        vid = _vertex_dtype(n).itemsize
        weight_bytes = 8 if ingest.keep_weights else 0
        page_bytes = m * (vid + 2 + weight_bytes)
        vertex_bytes = m * vid + 40 * n       # CSR targets; offsets and degrees
        directories = [self.path.parent] + [Path(d) for d in options.storage_dirs]
        share = {0: page_bytes // len(directories) + vertex_bytes}
        for i in range(1, len(directories)):
            share[i] = page_bytes // len(directories)
        by_device: dict[int, list] = {}
        for i, directory in enumerate(directories):
            try:
                device = directory.stat().st_dev
                free = shutil.disk_usage(directory).free
            except OSError:
                continue
            entry = by_device.setdefault(device, [directory, free, 0])
            entry[2] += share[i]
        for directory, free, wanted in by_device.values():
            if wanted > free:
                raise StoreError(
                    f"{directory}: the store of {source.name} ({n:,} vertices, {m:,} edges) "
                    f"needs about {wanted:,} bytes there, and only {free:,} are free")

    def _run(self) -> None:
        source = self.source
        ingest = _Ingest(source, self.options, self.summary, self.progress)
        self._check_fits(ingest)
        primary = self._temporary(self.path.parent, self.path.name)
        extra_dirs = [Path(d) for d in self.options.storage_dirs]
        extra_tmp = [self._temporary(d, f"{self.path.name}-{self.key[:12]}") for d in extra_dirs]
        weight_bytes = 8 if ingest.keep_weights else 0
        bytes_per_edge = 3 * (2 * 8 + weight_bytes)
        budget_edges = max(1024, self.budget // bytes_per_edge)
        try:
            num_vertices, original_ids, src, dst, weight = _ingest_in_memory(ingest, budget_edges)
            in_memory = True
        except _BudgetExceeded:
            in_memory = False
        self._mark("ingest")
        if in_memory:
            self.progress.note(f"read {self.summary.edges_read} edges; sorting in memory")
            wdtype = None if weight is None else weight.dtype
            columns = {"src": src, "dst": dst, "weight": weight}
            del src, dst, weight
            csc_src, csc_weight, in_degree, removed = _csc_of_group(
                columns, 0, num_vertices, num_vertices, self.options.duplicates)
            self.summary.duplicates_removed = removed
            self._mark("sort")
            in_offsets = np.zeros(num_vertices + 1, np.int64)
            np.cumsum(in_degree, out=in_offsets[1:])
            csc_dst = np.empty(csc_src.size, csc_src.dtype)
            _expand_offsets(in_offsets, 0, csc_dst)
            out_offsets, out_targets = _csr_of_group(csc_src, csc_dst, 0, num_vertices)
            del csc_dst
            self._mark("csr")
        else:
            scratch = self._temporary(primary, "scratch", locked=False)
            self.progress.note(f"input exceeds the memory budget of {human_bytes(self.budget)};"
                               " building out of core in two passes")
            (num_vertices, original_ids, csc_src, csc_weight, in_degree, out_offsets,
             out_targets, wdtype) = self._out_of_core(ingest, scratch, budget_edges)
            in_offsets = np.zeros(num_vertices + 1, np.int64)
            np.cumsum(in_degree, out=in_offsets[1:])
            self._mark("out_of_core")
        num_edges = int(in_offsets[-1])
        only_loops = num_edges == 0 and source.num_vertices is None \
            and self.summary.self_loops_removed
        if num_vertices == 0 or only_loops:
            why = "no vertices and no edges"
            if self.summary.self_loops_removed:
                why = (f"all {self.summary.self_loops_removed:,} edges read are self-loops, "
                       "which self_loops='drop' removed")
            raise GraphInputError(f"empty graph: {why}", path=source.name)
        if not ingest.directed and source.already_symmetric:
            _check_symmetric(source, original_ids, in_offsets, csc_src, csc_weight,
                             out_offsets, out_targets)
        self._fill_summary(num_vertices, num_edges, in_degree, out_offsets)
        self._write(primary, extra_tmp, extra_dirs, ingest, num_vertices, original_ids,
                    csc_src, csc_weight, in_offsets, in_degree, out_offsets, out_targets,
                    in_memory)

    def _out_of_core(self, ingest: _Ingest, scratch: Path, budget_edges: int):
        source = self.source
        if source.num_vertices is None:
            self.progress.note("pass 1: vertex ids")
            original_ids = _unique_ids_streaming(ingest)
            num_vertices = int(original_ids.size)
            table, base = _renumbering(original_ids)
        else:
            original_ids, num_vertices = None, source.num_vertices
        vid = _vertex_dtype(num_vertices)
        keep_weights = ingest.keep_weights
        wdtype = (np.dtype(np.int64) if source.weight_kind == "int" else np.dtype(np.float64)) \
            if keep_weights else None
        num_buckets = min(1024, max(2, num_vertices // 64))
        duplicates = self.options.duplicates
        # merging early regroups float sums, which would change their rounding
        merge_early = duplicates != "keep" and not (duplicates == "sum" and wdtype is not None
                                                    and wdtype.kind == "f")

        def merge(buckets, bucket, with_weight):
            for piece in bucket_pieces(buckets, bucket, bucket + 1, with_weight, budget_edges,
                                       duplicates):
                columns = {"src": piece.src, "dst": piece.dst, "weight": piece.weight}
                del piece.src, piece.dst, piece.weight
                lo, hi = piece.first_key, piece.end_key
                sources, weights, degree, removed = _csc_of_group(columns, lo, hi, num_vertices,
                                                                  duplicates)
                offsets = np.zeros(hi - lo + 1, np.int64)
                np.cumsum(degree, out=offsets[1:])
                destinations = np.empty(sources.size, vid)
                _expand_offsets(offsets, lo, destinations)
                yield sources, destinations, weights, removed + piece.removed

        by_dst = _Buckets(scratch, "dst", num_vertices, num_buckets, vid, wdtype,
                          merge=merge if merge_early else None, merge_edges=budget_edges)
        self.progress.note("pass 2: edges into destination buckets")
        for raw_src, raw_dst, weight in ingest.chunks():
            if original_ids is None:
                src, dst = raw_src.astype(vid), raw_dst.astype(vid)
            else:
                src, dst = np.empty(raw_src.size, vid), np.empty(raw_src.size, vid)
                _map_ids(raw_src, original_ids, table, base, src)
                _map_ids(raw_dst, original_ids, table, base, dst)
            weight = weight.astype(wdtype) if weight is not None else None
            by_dst.add(dst, src, dst, weight)
        self.summary.duplicates_removed = by_dst.merged
        # CSC per group of destination buckets; (src, dst) into source buckets
        in_degree = np.zeros(num_vertices, np.int64)
        by_src = _Buckets(scratch, "src", num_vertices, num_buckets, vid, None)
        csc_src_path, csc_w_path = scratch / "csc.src", scratch / "csc.w"
        edges_done = 0
        with AppendFile(csc_src_path) as src_file, AppendFile(csc_w_path) as w_file:
            for piece in (piece for first, end in by_dst.groups(budget_edges)
                          for piece in bucket_pieces(by_dst, first, end, keep_weights,
                                                     budget_edges, duplicates)):
                lo, hi = piece.first_key, piece.end_key
                columns = {"src": piece.src, "dst": piece.dst, "weight": piece.weight}
                del piece.src, piece.dst, piece.weight
                src, weight, degree, removed = _csc_of_group(columns, lo, hi, num_vertices,
                                                             duplicates)
                self.summary.duplicates_removed += removed + piece.removed
                in_degree[lo:hi] += degree
                src_file.append(src)
                if weight is not None:
                    w_file.append(weight)
                group_offsets = np.zeros(hi - lo + 1, np.int64)
                np.cumsum(degree, out=group_offsets[1:])
                dst = np.empty(src.size, vid)
                _expand_offsets(group_offsets, lo, dst)
                by_src.add(src, src, dst, None)
                edges_done += src.size
                self.progress.update(edges_done, "sorting")
        csc_src = src_file.map(vid)
        csc_weight = w_file.map(wdtype) if keep_weights else None
        # CSR per group of source buckets
        out_degree = np.zeros(num_vertices, np.int64)
        targets_path = scratch / "csr.dst"
        with AppendFile(targets_path) as targets_file:
            for first, end in by_src.groups(budget_edges):
                for piece in bucket_pieces(by_src, first, end, False, budget_edges):
                    lo, hi = piece.first_key, piece.end_key
                    offsets, targets = _csr_of_group(piece.src, piece.dst, lo, hi - lo)
                    del piece.src, piece.dst
                    out_degree[lo:hi] += np.diff(offsets)
                    targets_file.append(targets)
        out_offsets = np.zeros(num_vertices + 1, np.int64)
        np.cumsum(out_degree, out=out_offsets[1:])
        out_targets = targets_file.map(vid)
        return (num_vertices, original_ids, csc_src, csc_weight, in_degree, out_offsets,
                out_targets, wdtype)

    def _fill_summary(self, num_vertices, num_edges, in_degree, out_offsets) -> None:
        out_degree = np.diff(out_offsets)
        summary = self.summary
        summary.num_vertices = num_vertices
        summary.num_edges = num_edges
        summary.isolated_vertices = int(np.count_nonzero((in_degree == 0) & (out_degree == 0)))
        summary.max_in_degree = int(in_degree.max()) if num_vertices else 0
        summary.max_out_degree = int(out_degree.max()) if num_vertices else 0

    def _stored_weight_dtype(self, ingest: _Ingest, csc_weight) -> np.dtype | None:
        """The stored weight type, checked against the values after merging.

        Also records in the summary the smallest weight and where the
        input's first negative (and first non-positive) weight is, which runs
        of programs with a restricted weight domain are refused on.
        """
        if csc_weight is None or not ingest.keep_weights:
            return ingest.weight_dtype()
        if csc_weight.size == 0:
            return ingest.weight_dtype()
        low, high, negatives, nonpositives = weight_statistics(csc_weight)
        dtype = ingest.weight_dtype((low, high))
        if dtype.kind == "i":
            info = np.iinfo(dtype)
            fits = info.min <= low and high <= info.max
        else:
            fits = max(abs(low), abs(high)) <= float(np.finfo(dtype).max)
        if not fits:
            raise GraphInputError(
                f"duplicates='{self.options.duplicates}' merges parallel edges into weights "
                f"{low!r}..{high!r}, which do not fit weight_dtype='{dtype.name}' (use a "
                "wider weight_dtype or 'auto')", path=self.source.name)
        warn_if_weights_rounded(csc_weight, self.options.weight_dtype, self.source.name)
        summary = self.summary
        summary.min_weight = low
        if low <= 0:
            summary.negative_weights, summary.nonpositive_weights = negatives, nonpositives
            if summary.negative_weights:
                summary.first_negative_weight = self.source.locate_weight(lambda w: w < 0)
            summary.first_nonpositive_weight = self.source.locate_weight(lambda w: w <= 0)
        return dtype

    def _write(self, primary: Path, extra_tmp, extra_dirs, ingest: _Ingest, num_vertices,
               original_ids, csc_src, csc_weight, in_offsets, in_degree, out_offsets,
               out_targets, in_memory) -> None:
        options = self.options
        vid = _vertex_dtype(num_vertices)
        degree_dtype = np.int32 if in_offsets[-1] < 2**31 else np.int64
        weight_dtype = self._stored_weight_dtype(ingest, csc_weight)
        shards = layout.cut_shards(
            in_offsets, shared_memory_bytes=options.shared_memory_bytes,
            slot_bytes=options.slot_bytes, max_vertices=options.max_shard_vertices,
            max_edges=layout.shard_edge_limit(int(in_offsets[-1]), options.max_shard_edges,
                                              options.min_shards),
            max_replication=options.max_replication,
            fixed_replication=options.fixed_replication,
            replication_rule=options.replication_rule,
            edges_per_thread=options.replication_edges_per_thread)
        value_bytes = 8
        vertex_bytes = num_vertices * (3 * value_bytes + 1)
        if options.gpu_memory is None and vertex_bytes >= self.gpu_memory:
            # no GPU budget was asked for, and the guessed one cannot even hold
            # the vertex data: size pages for the CPU (a GPU run refuses itself)
            page_bytes = options.max_page_bytes
        else:
            page_bytes = layout.page_budget(self.gpu_memory, options.n_streams, vertex_bytes,
                                            options.max_page_bytes)
        sizing = layout.PageSizing(source_bytes=vid.itemsize,
                                   weight_bytes=weight_dtype.itemsize if weight_dtype else 0,
                                   page_bytes=page_bytes)
        largest, smallest_page = layout.smallest_page_bytes(shards, sizing)
        if smallest_page > page_bytes == options.max_page_bytes:
            raise ConfigError(
                f"max_page_bytes={options.max_page_bytes}: a page must hold at least one "
                f"shard, and the largest has {largest:,} edges ({smallest_page:,} bytes); "
                f"raise max_page_bytes to at least {smallest_page:,} or lower max_shard_edges")
        pages_count = layout.group_pages(shards, sizing)
        self._mark("layout")
        directories = [primary] + list(extra_tmp)
        compression = choose_compression(options.compress, shards, pages_count, in_offsets,
                                         csc_src, csc_weight, sizing, vid, weight_dtype,
                                         directories, None if in_memory else self.budget)
        self._mark("compress_choice")
        writer = StoreWriter(directories, options.block_bytes)
        try:
            page_rows = write_pages(writer, shards, pages_count, in_offsets, csc_src, csc_weight,
                                     sizing, vid, weight_dtype, self.progress,
                                     compress=compression.compress)
        finally:
            blocks = writer.close()
        self._mark("pages")
        arrays = {}
        write_array(primary, "vertices/in_offsets.bin", in_offsets, arrays)
        write_array(primary, "vertices/out_offsets.bin", out_offsets, arrays)
        write_array(primary, "vertices/out_targets.bin", np.asarray(out_targets, vid), arrays)
        write_array(primary, "vertices/in_degree.bin", in_degree.astype(degree_dtype), arrays)
        write_array(primary, "vertices/out_degree.bin",
                     np.diff(out_offsets).astype(degree_dtype), arrays)
        if original_ids is not None:
            write_array(primary, "vertices/original_ids.bin", original_ids, arrays)
        write_array(primary, "shards.bin", shards, arrays)
        write_array(primary, "blocks.bin", blocks, arrays)
        self._mark("vertex_arrays")
        for directory in directories:
            filesafety.write_file(directory / filesafety.STORE_ID, (self.key + "\n").encode())
        if original_ids is not None:
            mapping = {"kind": "table", "array": "vertices/original_ids.bin"}
        else:
            mapping = {"kind": "offset", "base": int(self.source.id_base)}
        summary = asdict(self.summary)
        manifest = {
            "format": "garaphpy-store",
            "format_version": config.COMPRESSED_STORE_FORMAT_VERSION
            if any("codec" in row for row in page_rows) else config.STORE_FORMAT_VERSION,
            "key": self.key,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "build_seconds": round(time.perf_counter() - self._build_started, 3),
            "build_phases": self.phase_seconds,
            "built_in_memory": in_memory,
            "input": {"name": self.source.name, "format": self.source.format,
                      "identity": self.source.identity()},
            "options": {**asdict(options), "gpu_memory": self.gpu_memory},
            "num_vertices": int(num_vertices),
            "num_edges": int(in_offsets[-1]),
            "directed": ingest.directed,
            "weighted": weight_dtype is not None,
            "weight_dtype": weight_dtype.str if weight_dtype is not None else None,
            "vertex_dtype": vid.str,
            "id_mapping": mapping,
            "summary": summary,
            "layout": {"shared_memory_bytes": options.shared_memory_bytes,
                       "slot_bytes": options.slot_bytes,
                       "max_shard_edges": options.max_shard_edges,
                       "min_shards": options.min_shards,
                       "max_shard_vertices": options.max_shard_vertices,
                       "max_replication": options.max_replication,
                       "fixed_replication": options.fixed_replication,
                       "replication_rule": options.replication_rule,
                       "replication_edges_per_thread": options.replication_edges_per_thread,
                       "n_streams": options.n_streams, "page_bytes": page_bytes,
                       "block_bytes": options.block_bytes, "block_file": BLOCK_FILE,
                       "source_bytes": sizing.source_bytes, "weight_bytes": sizing.weight_bytes,
                       "page_array_alignment": layout.PAGE_ARRAY_ALIGNMENT,
                       "num_shards": int(shards.size), "num_pages": len(page_rows),
                       "compress": compression.record(),
                       **({"page_codec": page_codec.GAP_BP128} if compression.compress
                          else {})},
            "storage_dirs": [None] + [str(d.resolve()) for d in extra_dirs],
            "arrays": arrays,
            "pages": page_rows,
        }
        self._install(primary, extra_tmp, extra_dirs, manifest)
        if self.show_progress:
            from .store import format_summary

            self.progress.note("done")
            progress_logger("preprocess").info(format_summary(manifest), extra=PRINTED_BY_CLI)

    def _install(self, primary: Path, extra_tmp, extra_dirs, manifest) -> None:
        from .store import write_manifest

        for scratch in [t for t in self.temporaries if t.parent == primary]:
            shutil.rmtree(scratch)
            self.temporaries.remove(scratch)
        write_manifest(primary, manifest)
        # extra directories first: the primary directory with its manifest
        # appearing last is what makes the store exist
        # nothing but a store of ours is ever replaced (checked again: the
        # directories may have changed during the build)
        targets = [parent / f"{self.path.name}-{self.key[:12]}" for parent in extra_dirs]
        for target in targets:
            filesafety.check_replaceable(target, "storage_dirs")
        filesafety.check_replaceable(self.path)
        for temporary, target in zip(extra_tmp, targets):
            if target.exists():
                shutil.rmtree(target)
            self._rename_into_place(temporary, target)
        old = None
        if self.path.exists():
            old = self.path.parent / f".{self.path.name}.old-{uuid.uuid4().hex[:8]}"
            os.rename(self.path, old)
        self._rename_into_place(primary, self.path)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
