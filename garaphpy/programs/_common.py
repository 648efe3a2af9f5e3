"""Numpy helpers shared by the built-in programs' verifiers.

A verifier checks a result by a method other than the engine's (GAPBS
habit: ``src/pr.cc``, ``src/bfs.cc``): it never imports kernels/ or
scheduler/, and reads the graph straight from the store, one page at a time
(Garaph section 2.1: a page is a run of CSC shards), so that it also works
on graphs larger than host memory.  Nothing here is used while a program
runs.

Conventions every verifier follows
----------------------------------
* Edges are the store's in-edges: ``(u, v, w)`` for every edge of the CSC,
  destinations recovered from ``in_offsets``; the weight is the stored edge
  value as float64, or 1.0 on an unweighted graph.
* Vertices named in a report are the user's ids (``graph.original_ids``).
* A mismatch is a vertex that breaks at least one invariant; the detail
  names the first few per invariant.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError
from ..program import VerifyReport

#: Vertices named per failed invariant in a report's detail.
DETAIL_VERTICES = 3


# ------------------------------------------------------------------ edges --
def edge_chunks(graph):
    """Yield ``(src, dst, weight)`` for every in-edge, one store page at a time.

    ``src`` and ``dst`` are int64 internal ids; ``weight`` is float64 (1.0 on
    an unweighted graph).  Pages are read with their block checksums checked.
    """
    store = graph.store
    in_offsets = np.asarray(store.in_offsets, dtype=np.int64)
    for info in store.pages:
        if info.num_edges == 0:
            continue
        page = store.read_page(info.index)
        positions = np.arange(info.edge_begin, info.edge_begin + info.num_edges,
                              dtype=np.int64)
        # the destination of edge e is the vertex v with in_offsets[v] <= e < in_offsets[v+1]
        dst = np.searchsorted(in_offsets, positions, side="right") - 1
        src = page.sources.astype(np.int64)
        if page.weights is None:
            weight = np.ones(info.num_edges, dtype=np.float64)
        else:
            weight = page.weights.astype(np.float64)
        yield src, dst, weight


def in_sums(graph, n):
    """Per vertex: (number of in-edges, sum of in-edge weights), counted from the edges."""
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n, dtype=np.float64)
    for _, dst, weight in edge_chunks(graph):
        count += np.bincount(dst, minlength=n)
        total += np.bincount(dst, weights=weight, minlength=n)
    return count, total


def weight_problem(graph, *, positive: bool) -> str | None:
    """None when every edge weight is finite and >= 0 (> 0 when ``positive``)."""
    bad = 0
    first = None
    for src, dst, weight in edge_chunks(graph):
        wrong = ~np.isfinite(weight) | ((weight <= 0) if positive else (weight < 0))
        if wrong.any():
            bad += int(wrong.sum())
            if first is None:
                i = int(np.flatnonzero(wrong)[0])
                first = (src[i], dst[i], weight[i])
    if not bad:
        return None
    u, v = user_ids(graph, np.array(first[:2], dtype=np.int64)).tolist()
    need = "> 0" if positive else ">= 0"
    return (f"{bad} edge weight(s) are not finite and {need}, e.g. ({u!r}, {v!r}) has "
            f"{float(first[2])!r}")


def user_ids(graph, internal) -> np.ndarray:
    """The user's ids (labels included) of internal ids, for reports."""
    ids = getattr(graph, "user_ids", None)
    return ids(internal) if ids is not None else graph.original_ids(internal)


# ---------------------------------------------------------------- results --
def result_values(graph, result, dtype=np.float64):
    """``result.values`` as a 1-D array of ``dtype``, or a problem string."""
    values = np.asarray(result.values)
    if values.ndim != 1 or values.shape[0] != graph.num_vertices:
        return None, (f"result.values has shape {values.shape}, expected "
                      f"({graph.num_vertices},)")
    return values.astype(dtype, copy=False), None


def result_sources(graph, result):
    """``result.sources`` as unique int64 internal ids, or a problem string."""
    sources = getattr(result, "sources", None)
    sources = np.unique(np.asarray([] if sources is None else sources, dtype=np.int64).ravel())
    if sources.size and (sources[0] < 0 or sources[-1] >= graph.num_vertices):
        return None, (f"result.sources holds internal ids outside 0..{graph.num_vertices - 1}")
    return sources, None


def checked_inputs(graph, result, checked: str, *, weights: str, requirement: str):
    """The result's values, its sources and their mask, after the common checks.

    Parameters
    ----------
    weights : {"positive", "nonnegative"}
        What the program needs of the edge values.
    requirement : str
        How a weight failure is introduced ("SSSP needs finite weights >= 0").

    Returns
    -------
    (values, sources, is_source, None), or (None, None, None, VerifyReport)
    when a check failed.
    """
    values, problem = result_values(graph, result)
    if problem:
        return None, None, None, failed(checked, problem)
    sources, problem = result_sources(graph, result)
    if problem:
        return None, None, None, failed(checked, problem)
    problem = weight_problem(graph, positive=weights == "positive")
    if problem:
        return None, None, None, failed(checked, f"{requirement}: {problem}")
    is_source = np.zeros(graph.num_vertices, dtype=bool)
    is_source[sources] = True
    return values, sources, is_source, None


def run_tolerance(program, result) -> float:
    """The L1 tolerance the run stopped on: ``result.tolerance`` if set, else the program's."""
    tolerance = getattr(result, "tolerance", None)
    if tolerance is None:
        tolerance = program.tolerance
    return float(tolerance)


# ---------------------------------------------------------- reachability --
def reachable(n, src, dst, start):
    """Vertices reachable from ``start`` (int64 ids) along the edges ``src -> dst``.

    Level-synchronous BFS on a CSR built with numpy (no engine code).
    """
    reached = np.zeros(n, dtype=bool)
    if n == 0 or start.size == 0:
        return reached
    reached[start] = True
    if src.size == 0:
        return reached
    order = np.argsort(src, kind="stable")
    targets = dst[order]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=offsets[1:])
    frontier = np.unique(start)
    while frontier.size:
        begin = offsets[frontier]
        counts = offsets[frontier + 1] - begin
        total = int(counts.sum())
        if total == 0:
            break
        # positions begin[i] .. begin[i]+counts[i]-1 of every frontier vertex, concatenated
        firsts = np.repeat(begin - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        neighbours = targets[firsts + np.arange(total, dtype=np.int64)]
        neighbours = np.unique(neighbours[~reached[neighbours]])
        reached[neighbours] = True
        frontier = neighbours
    return reached


#: Relative tolerance of the path verifiers (SSSP, SSWP): four ulps.  The
#: engine and the verifier make the same float64 operations (``dist(u) + w``,
#: ``min(width(u), w)``), so an honest result matches exactly; a relative
#: bound without an absolute floor catches a wrong value of any size.
PATH_RTOL = 4 * float(np.finfo(np.float64).eps)


def close(a, b, rtol=PATH_RTOL):
    """Elementwise a == b up to a relative tolerance (equal infinities count as
    equal; no absolute floor: near 0 only 0 is close to 0)."""
    with np.errstate(invalid="ignore"):
        return (a == b) | (np.abs(a - b) <= rtol * np.abs(b))


def at_most(a, b, rtol=PATH_RTOL):
    """Elementwise a <= b up to a relative tolerance (NaN is False)."""
    with np.errstate(invalid="ignore"):
        return a <= b + rtol * np.abs(b)


# ------------------------------------------------------------------ reports --
def _format_value(value) -> str:
    value = value.item() if hasattr(value, "item") else value
    if isinstance(value, float) and not math.isinf(value) and not math.isnan(value):
        return f"{value:.10g}"
    return repr(value)


def report(graph, values, checked: str, problems, extra: str = "") -> VerifyReport:
    """Build a VerifyReport from named boolean masks of failing vertices.

    Parameters
    ----------
    problems : list of (str, numpy.ndarray of bool)
        Each invariant's description and the vertices that break it.
    extra : str
        Appended to the detail (an error measure, a count).
    """
    bad = np.zeros(graph.num_vertices, dtype=bool)
    parts = []
    for description, mask in problems:
        if mask is None or not mask.any():
            continue
        bad |= mask
        where = np.flatnonzero(mask)[:DETAIL_VERTICES]
        ids = user_ids(graph, where).tolist()
        named = ", ".join(f"vertex {i!r} = {_format_value(values[w])}"
                          for i, w in zip(ids, where))
        parts.append(f"{description}: {int(mask.sum())} ({named})")
    if extra:
        parts.append(extra)
    mismatches = int(bad.sum())
    return VerifyReport(ok=mismatches == 0, checked=checked, mismatches=mismatches,
                        detail="; ".join(parts))


def failed(checked: str, why: str) -> VerifyReport:
    """A report for a result that cannot be checked at all (wrong shape, bad weights)."""
    return VerifyReport(ok=False, checked=checked, mismatches=0, detail=why)


# -------------------------------------------------------------- constants --
def require(program, name: str, ok: bool, expectation: str) -> None:
    """Raise ConfigError naming the constant when ``ok`` is false."""
    if not ok:
        raise ConfigError(f"{type(program).__name__}: constant {name}="
                          f"{program.constants[name]!r}: expected {expectation}")


def holding_half(amounts):
    """Mask of the fewest vertices whose ``amounts`` sum to at least half the total.

    Used to name the culprits of an aggregate (L1) error; NaN counts as infinite.
    """
    amounts = np.nan_to_num(np.abs(amounts), nan=np.inf)
    mask = np.zeros(amounts.shape[0], dtype=bool)
    if amounts.size == 0:
        return mask
    order = np.argsort(-amounts, kind="stable")
    running = np.cumsum(amounts[order])
    total = running[-1]
    count = int(np.searchsorted(running, total / 2)) + 1 if np.isfinite(total) else \
        int(np.isinf(amounts).sum())
    mask[order[:max(1, count)]] = True
    return mask


def weighted_average_step(graph, values, free, weighted_in):
    """One Jacobi averaging step's pieces, computed from the edges.

    Returns
    -------
    average : numpy.ndarray
        sum_{u->v} w_uv values[u] / weighted_in[v] at the ``free`` vertices
        (their current values elsewhere).
    spread : float
        max over free u of sum_{v free, u->v} w_uv / weighted_in[v]: the L1
        norm of the averaging map restricted to the free vertices (0 when
        none is free).  One step of a linear iteration whose changes live on
        the free vertices moves values by at most this times the last
        change, in L1.
    """
    n = graph.num_vertices
    total = np.zeros(n, dtype=np.float64)
    outflow = np.zeros(n, dtype=np.float64)
    share = np.divide(1.0, weighted_in, out=np.zeros(n), where=free & (weighted_in > 0))
    for src, dst, weight in edge_chunks(graph):
        total += np.bincount(dst, weights=weight * values[src], minlength=n)
        outflow += np.bincount(src, weights=weight * share[dst], minlength=n)
    average = values.copy()
    average[free] = total[free] / weighted_in[free]
    spread = float(outflow[free].max()) if free.any() else 0.0
    return average, spread


def rounding_slack(n: int) -> float:
    """Allowance for float64 rounding in an L1 sum of n values of magnitude <= 1."""
    return 1e-12 + 16 * np.finfo(np.float64).eps * n


# ------------------------------------------------------------ path trees --
def path_tree(graph, sources, is_tight) -> np.ndarray:
    """Predecessors of a shortest-path (or widest-path, BFS) tree, from the values.

    One pass over the in-edges keeps the *tight* ones (``is_tight(src, dst,
    weight)``: the edge gives its destination exactly its value), then a
    level-synchronous BFS from the sources over them sets each reached
    vertex's predecessor to a tight in-neighbour one level closer to a
    source.  Ties: the in-neighbour of least level, then of least internal
    id (for integer ids, the least user id).  The levels make it a tree
    even when zero-weight edges tie around a cycle.

    Returns
    -------
    numpy.ndarray of int64
        Internal id of each vertex's predecessor; -1 for the sources and for
        vertices no source reaches (SciPy's and cuGraph's convention).
    """
    n = graph.num_vertices
    tight_src, tight_dst = [], []
    for src, dst, weight in edge_chunks(graph):
        tight = is_tight(src, dst, weight)
        tight_src.append(src[tight])
        tight_dst.append(dst[tight])
    src = np.concatenate(tight_src) if tight_src else np.zeros(0, np.int64)
    dst = np.concatenate(tight_dst) if tight_dst else np.zeros(0, np.int64)
    parent = np.full(n, -1, dtype=np.int64)
    reached = np.zeros(n, dtype=bool)
    frontier = np.unique(np.asarray(sources, dtype=np.int64))
    reached[frontier] = True
    order = np.argsort(src, kind="stable")
    targets = dst[order]
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=offsets[1:])
    while frontier.size:
        begin = offsets[frontier]
        counts = offsets[frontier + 1] - begin
        total = int(counts.sum())
        if total == 0:
            break
        firsts = np.repeat(begin - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
        heads = targets[firsts + np.arange(total, dtype=np.int64)]
        tails = np.repeat(frontier, counts)
        new = ~reached[heads]
        heads, tails = heads[new], tails[new]
        if heads.size == 0:
            break
        by_head = np.lexsort((tails, heads))        # per head, the least tail first
        heads, tails = heads[by_head], tails[by_head]
        first = np.concatenate(([True], heads[1:] != heads[:-1]))
        parent[heads[first]] = tails[first]
        reached[heads[first]] = True
        frontier = heads[first]
    return parent
