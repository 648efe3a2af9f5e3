"""Slow, independent references for the built-in programs (tests only).

Nothing here shares code with garaphpy's engine or verifiers:

* the definitions solved by other libraries -- NetworkX PageRank, SciPy
  Dijkstra / BFS / connected components, sparse linear solves for the
  fixed points of HS and CS, SciPy sparse products for NN -- and a
  heap-based widest-path search in plain Python;
* :func:`run_naive`, a tiny pure-Python GAS interpreter that runs a
  program's *own* functions edge by edge (sync or async, pull or
  notify-pull), binding their parameters by name from
  :data:`garaphpy.program.PARAMETERS`, to check the functions themselves;
* :func:`run_engine`, the hook to the real engine (``garaphpy.run``),
  skipping the calling test where the engine is not available.

Vertex ids are internal ids throughout, except where noted.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from garaphpy.program import PARAMETERS, VertexProgram, monoid_identity


# ------------------------------------------------------------------ graphs --
def edges_of(graph):
    """``(n, src, dst, weight)`` of a Graph's store: int64 ids, float64 weights (1 if none)."""
    in_offsets, sources, weights = graph.store.csc()
    n = graph.num_vertices
    dst = np.repeat(np.arange(n, dtype=np.int64), np.diff(in_offsets))
    weight = np.ones(dst.size) if weights is None else weights.astype(np.float64)
    return n, sources.astype(np.int64), dst, weight


def random_csr_csc(seed: int, n: int, m: int, symmetric: bool = False) -> tuple:
    """A random directed graph of ``n`` vertices and ``m`` edges (repeats and
    loops allowed; with ``symmetric``, each edge also reversed: ``2 m``) as
    the kernels read it: ``(out_offsets, out_targets, in_offsets, sources)``,
    int64, each vertex's edges in increasing order."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    if symmetric:
        src, dst = np.concatenate([src, dst]), np.concatenate([dst, src])
    out_order, in_order = np.lexsort((dst, src)), np.lexsort((src, dst))
    out_offsets = np.searchsorted(src[out_order], np.arange(n + 1)).astype(np.int64)
    in_offsets = np.searchsorted(dst[in_order], np.arange(n + 1)).astype(np.int64)
    return (out_offsets, dst[out_order].astype(np.int64), in_offsets,
            src[in_order].astype(np.int64))


def sparse(graph, transpose=False):
    """SciPy CSR adjacency with edge weights: row = source (row = destination if transpose)."""
    import scipy.sparse as sp

    n, src, dst, weight = edges_of(graph)
    rows, cols = (dst, src) if transpose else (src, dst)
    return sp.csr_matrix((weight, (rows, cols)), shape=(n, n))


@dataclass
class FakeResult:
    """What a verifier reads of a run's result (see garaphpy/programs/__init__.py)."""

    values: np.ndarray
    sources: np.ndarray
    num_iterations: int
    converged: bool
    program: object
    tolerance: float | None = None


def fake_result(program, values, sources=(), num_iterations=1, converged=True, tolerance=None):
    return FakeResult(np.asarray(values), np.asarray(sources, dtype=np.int64), num_iterations,
                      converged, program, tolerance)


# ------------------------------------------------------ naive GAS interpreter --
def _python_functions(program):
    """role -> (callable, parameter names): the checked sources, constants as globals."""
    namespace = {"math": math, **program.constants}
    functions = {}
    for role, function in type(program).functions.items():
        allowed = PARAMETERS[role.split(":")[0]]
        if role == "apply":
            allowed = allowed + tuple(type(program).aggregates)
        assert set(function.parameters) <= set(allowed), (role, function.parameters)
        exec(compile(function.source, function.filename, "exec"), namespace)
        functions[role] = (namespace[function.name], function.parameters)
    return functions


def _call(functions, role, env):
    function, parameters = functions[role]
    return function(*[env[p] for p in parameters])


_COMBINE = {"add": lambda a, b: a + b, "min": min, "max": max}


def run_naive(graph, program, sources=(), *, direction="pull", execution=None,
              max_iterations=None, tolerance="program"):
    """Run ``program``'s own functions on ``graph``, one edge at a time, in pure Python.

    Parameters
    ----------
    sources : iterable of int
        Internal ids.
    direction : {"pull", "notify-pull", "auto"}
        pull applies every vertex each iteration; notify-pull only the
        out-neighbours of the active vertices; auto picks notify-pull when
        f = (active out-degrees) / |E| <= 1/2 (Garaph section 4.2, rho = 1).
    execution : {"sync", "async"}
        sync reads the previous iteration's values; async updates in place
        in vertex order (Gauss-Seidel).  Default: the program's.
    tolerance : float, None or "program"
        Stop once an iteration's L1 change falls below it.

    Returns
    -------
    FakeResult
        ``values`` after ``finalize``.
    """
    cls = type(program)
    execution = execution or cls.execution
    max_iterations = max_iterations or cls.max_iterations
    tolerance = program.tolerance if tolerance == "program" else tolerance
    functions = _python_functions(program)
    n, src, dst, weight = edges_of(graph)
    if cls.needs_undirected and graph.directed:
        # what the engine runs such a program on: every edge and its reverse, once
        pairs = {}
        for u, v, w in zip(src.tolist() + dst.tolist(), dst.tolist() + src.tolist(),
                           weight.tolist() * 2):
            pairs.setdefault((u, v), w)
        src, dst = (np.array(x, dtype=np.int64) for x in zip(*pairs)) if pairs else (src, dst)
        weight = np.array(list(pairs.values())) if pairs else weight
    in_edges = [[] for _ in range(n)]
    out_neighbours = [[] for _ in range(n)]
    for u, v, w in zip(src.tolist(), dst.tolist(), weight.tolist()):
        in_edges[v].append((u, w))
        out_neighbours[u].append(v)
    source_set = {int(s) for s in sources}
    original = graph.original_ids().tolist()
    attrs = [{"vertex": original[v], "out_degree": len(out_neighbours[v]),
              "in_degree": len(in_edges[v]),
              "weighted_in_degree": float(sum(w for _, w in in_edges[v])),
              "is_source": v in source_set, "num_vertices": n} for v in range(n)]
    value_type = np.dtype(cls.value_dtype).type
    accum_dtype = np.dtype(cls.accum_dtype or cls.value_dtype)
    accum_type = accum_dtype.type
    identity = monoid_identity(cls.sum, accum_dtype).item()
    combine = _COMBINE[cls.sum]

    values = [value_type(_call(functions, "init", attrs[v])).item() for v in range(n)]
    active = [cls.initially_active == "all" or v in source_set for v in range(n)]
    iterations, converged = 0, False
    for iteration in range(max_iterations):
        if not any(active):
            converged = True
            break
        aggregates = {}
        for name, (monoid, _) in cls.aggregates.items():
            total = float(monoid_identity(monoid, np.float64))
            for v in range(n):
                term = _call(functions, f"aggregate:{name}",
                             {**attrs[v], "value": values[v], "iteration": iteration})
                total = _COMBINE[monoid](total, float(term))
            aggregates[name] = total
        if direction == "auto":
            f = sum(len(out_neighbours[v]) for v in range(n) if active[v]) / max(1, len(src))
            chosen = "notify-pull" if f <= 0.5 else "pull"
        else:
            chosen = direction
        if chosen == "pull":
            update = range(n)
        else:
            update = sorted({t for v in range(n) if active[v] for t in out_neighbours[v]})
        old = values
        new = list(values)
        read = old if execution == "sync" else new
        next_active = [False] * n
        change = 0.0
        for v in update:
            accum = identity
            for u, w in in_edges[v]:
                term = _call(functions, "gather", {
                    "src": read[u], "dst": read[v], "weight": w,
                    "src_out_degree": attrs[u]["out_degree"],
                    "src_in_degree": attrs[u]["in_degree"],
                    "dst_out_degree": attrs[v]["out_degree"],
                    "dst_in_degree": attrs[v]["in_degree"]})
                accum = combine(accum, accum_type(term).item())
            before = read[v]
            after = value_type(_call(functions, "apply", {
                **attrs[v], "value": before, "accum": accum, "iteration": iteration,
                **aggregates})).item()
            new[v] = after
            next_active[v] = bool(_call(functions, "activate", {"new": after, "old": before}))
            if after != before:
                change += abs(float(after) - float(before))
        values = new
        active = next_active
        iterations += 1
        if tolerance is not None and change < tolerance:
            converged = True
            break
    else:
        converged = not any(active) or cls.run_until_limit
    finalized = program.finalize(np.array(values, dtype=cls.value_dtype))
    return FakeResult(finalized, np.array(sorted(source_set), dtype=np.int64), iterations,
                      converged, program, tolerance)


# ------------------------------------------------------------------ engine --
def gpu_engine_options(monkeypatch, **options):
    """The GPU engines that the runs after this call build take ``options``
    (keyword arguments of :class:`~garaphpy.scheduler.gpu.engine.GpuEngine`
    that a run does not expose: its study switches, e.g. ``device_loop=False``);
    undone with ``monkeypatch``.  Calls nest: the innermost's options win.  A
    switch off is the run plan's choice turned off (``turned_off`` of
    :func:`run_engine`, :data:`garaphpy.scheduler.gpu.plan.ENGINE_SWITCHES`),
    which a new test names instead."""
    from garaphpy.scheduler import gpu_engine

    class ConfiguredGpuEngine(gpu_engine.GpuEngine):
        def __init__(self, *arguments, **given):
            super().__init__(*arguments, **{**options, **given})

    monkeypatch.setattr(gpu_engine, "GpuEngine", ConfiguredGpuEngine)


def run_engine(graph, program, sources=(), turned_off=(), **options):
    """Run on the real engine (``garaphpy.run``); ``sources`` are internal ids here;
    ``turned_off``: the run plan's choices made off (``garaphpy.api.execute``)."""
    import garaphpy
    from garaphpy import api

    sources = np.asarray(sources, dtype=np.int64)
    user_sources = graph.original_ids(sources).tolist() if sources.size else None
    if turned_off:
        return api.execute(graph, program, sources=user_sources, turned_off=turned_off,
                           **options)
    return garaphpy.run(graph, program, sources=user_sources, **options)


def run_engine_quietly(graph, program, sources=(), **options):
    """:func:`run_engine` with NotConvergedWarning silenced (runs cut short on purpose)."""
    import warnings

    import garaphpy

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        return run_engine(graph, program, sources, **options)


def run_engine_like_gpu(graph, program, sources=(), **options):
    """:func:`run_engine_quietly` without label shortcuts
    (the plan's ``shortcut_labels`` and ``config.GPU_SHORTCUT_LABELS``, one
    processor alone) nor the GPU's union-find start (``gpu_union_find_start``;
    the CPU's goes with its shortcuts), so that the CPU reference of a GPU or
    hybrid run does the same iterations.

    A min/max program whose default is asynchronous (SSSP, CC, SSWP) runs
    synchronously on the CPU alone and on the GPU alone unless an execution
    is asked for: the GPU tests that use this compare iteration counts and
    size budgets for those runs, and were written when the GPU alone ran
    them synchronously.  The asynchronous default on the GPU alone has its
    own test (``test_streamed_gpu.test_gpu_alone_takes_the_programs_default``);
    a hybrid run keeps the default."""
    import garaphpy.api
    from garaphpy import config
    from garaphpy.program import default_execution

    instance = garaphpy.api._program_instance(program)
    if options.get("mode") in ("cpu", "gpu") and options.get("execution") is None \
            and instance.sum in ("min", "max") and default_execution(instance) == "async":
        options["execution"] = "sync"
    turned_off = {"shortcut_labels", *options.pop("turned_off", ())}
    if instance.shortcut_labels:
        turned_off.add("gpu_union_find_start")
    shortcuts = config.GPU_SHORTCUT_LABELS
    config.GPU_SHORTCUT_LABELS = False
    try:
        return run_engine_quietly(graph, program, sources, turned_off=turned_off, **options)
    finally:
        config.GPU_SHORTCUT_LABELS = shortcuts


#: Built-in programs whose results are exact (integers, min, max): compared bitwise.
EXACT_PROGRAMS = frozenset({"bfs", "sssp", "cc", "sswp"})


def assert_program_values(name, values, expected):
    """Bitwise for the exact programs, 1e-4 relative for float sums."""
    if name in EXACT_PROGRAMS:
        np.testing.assert_array_equal(values, expected)
    else:
        np.testing.assert_allclose(values, expected, rtol=1e-4, atol=1e-12)


def assert_run_matches(name, execution, result, reference):
    """``result`` against ``reference`` (the CPU engine's run of the same
    program): synchronous runs and exact programs give the same values (and
    synchronous exact ones the same iteration count); an asynchronous float
    sum takes another path to its fixed point, so a converged run is verified."""
    if execution == "sync" or name in EXACT_PROGRAMS:
        assert_program_values(name, result.values, reference.values)
    if execution == "sync" and name in EXACT_PROGRAMS:
        assert result.num_iterations == reference.num_iterations
    if result.converged:
        report = result.program.verify(result.graph, result)
        assert report.ok, str(report)


def out_of_core_rmat(base):
    """rmat:12, weighted, in many small plain pages spread over three storage
    directories under ``base`` (the store and ``ssd1``, ``ssd2``)."""
    import garaphpy

    return garaphpy.Graph.load(
        "rmat:12", store=base / "store", progress=False,
        generator_options={"weighted": True, "seed": 11}, max_shard_edges=512,
        max_page_bytes=16384, compress=False, storage_dirs=[str(base / "ssd1"), str(base / "ssd2")])


def weighted_chain(store, num_vertices: int, period: int):
    """The chain 0 -> 1 -> ... -> n-1, edge i weighted i % period + 1 (for
    i from 1), stored at ``store``."""
    import garaphpy

    src = np.arange(num_vertices - 1, dtype=np.int64)
    weights = np.arange(1, num_vertices, dtype=np.float64) % period + 1
    return garaphpy.Graph.from_arrays(src, src + 1, weights, num_vertices=num_vertices,
                                      store=store)


# ------------------------------------------------------------- references --
def pagerank_networkx(graph, damping=0.85):
    """PageRank by NetworkX (dangling mass spread uniformly, its default)."""
    import networkx as nx

    n, src, dst, _ = edges_of(graph)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(zip(src.tolist(), dst.tolist()))
    scores = nx.pagerank(g, alpha=damping, tol=1e-15, max_iter=100_000, weight=None)
    return np.array([scores[v] for v in range(n)])


def pagerank_power(graph, damping=0.85, tol=1e-14):
    """PageRank by SciPy sparse power iteration (for larger graphs)."""
    import scipy.sparse as sp

    n, src, dst, _ = edges_of(graph)
    out_degree = np.bincount(src, minlength=n).astype(np.float64)
    transition = sp.csr_matrix((1.0 / out_degree[src], (dst, src)), shape=(n, n))
    dangling = out_degree == 0
    x = np.full(n, 1.0 / n)
    for _ in range(10_000):
        y = (1 - damping) / n + damping * (transition @ x + x[dangling].sum() / n)
        if np.abs(y - x).sum() < tol:
            return y
        x = y
    raise AssertionError("reference PageRank did not converge")


def sssp_scipy(graph, sources):
    """Distances by SciPy's Dijkstra (weights must be > 0: SciPy drops explicit zeros)."""
    from scipy.sparse.csgraph import dijkstra

    n = graph.num_vertices
    if len(sources) == 0:
        return np.full(n, np.inf)
    return dijkstra(sparse(graph), directed=True, indices=list(sources), min_only=True)


def sssp_networkx(graph, sources):
    """Distances by NetworkX's multi-source Dijkstra (zero weights allowed)."""
    import networkx as nx

    n, src, dst, weight = edges_of(graph)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_weighted_edges_from(zip(src.tolist(), dst.tolist(), weight.tolist()))
    dist = np.full(n, np.inf)
    if len(sources):
        for v, d in nx.multi_source_dijkstra_path_length(g, set(int(s) for s in sources)).items():
            dist[v] = d
    return dist


def bfs_scipy(graph, sources):
    """Depths by SciPy's unweighted shortest paths; -1 where unreached."""
    from scipy.sparse.csgraph import breadth_first_order, shortest_path

    n = graph.num_vertices
    depth = np.full(n, -1, dtype=np.int64)
    if len(sources) == 0:
        return depth
    hops = shortest_path(sparse(graph), directed=True, unweighted=True, indices=list(sources))
    hops = np.atleast_2d(hops).min(axis=0)
    reached = np.isfinite(hops)
    depth[reached] = hops[reached].astype(np.int64)
    # cross-check the reached set with a BFS order from each source
    seen = set()
    for s in sources:
        seen.update(breadth_first_order(sparse(graph), int(s), directed=True,
                                        return_predecessors=False).tolist())
    assert seen == set(np.flatnonzero(reached).tolist())
    return depth


def components_scipy(graph):
    """Weakly connected component labels as the smallest original id, by SciPy."""
    from scipy.sparse.csgraph import connected_components

    count, label = connected_components(sparse(graph), directed=True, connection="weak")
    original = graph.original_ids()
    smallest = np.full(count, np.iinfo(np.int64).max)
    np.minimum.at(smallest, label, original)
    return smallest[label]


def sswp_heap(graph, sources):
    """Widest-path widths by a max-heap (modified Dijkstra) in plain Python."""
    n, src, dst, weight = edges_of(graph)
    out = [[] for _ in range(n)]
    for u, v, w in zip(src.tolist(), dst.tolist(), weight.tolist()):
        out[u].append((v, w))
    width = [0.0] * n
    heap = []
    for s in sources:
        width[int(s)] = math.inf
        heap.append((-math.inf, int(s)))
    heapq.heapify(heap)
    done = [False] * n
    while heap:
        negative, u = heapq.heappop(heap)
        if done[u]:
            continue
        done[u] = True
        for v, w in out[u]:
            through = min(-negative, w)
            if through > width[v]:
                width[v] = through
                heapq.heappush(heap, (-through, v))
    return np.array(width)


def nn_scipy(graph, iterations):
    """NN by SciPy sparse products: x(0) = 1/(1+indeg), x <- expit(A' W x)."""
    from scipy.special import expit

    matrix = sparse(graph, transpose=True)  # row v: in-edges of v
    n, _, dst, _ = edges_of(graph)
    x = 1.0 / (1.0 + np.bincount(dst, minlength=n))
    for _ in range(iterations):
        x = expit(matrix @ x)
    return x


def _harmonic(graph, fixed_values):
    """Fixed point of v <- sum w_uv x_u / sum w_uv at the free vertices, by a sparse solve.

    ``fixed_values``: float array, NaN marks a free vertex.  Free vertices
    without in-edges, and those no fixed vertex reaches, keep 0.
    """
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order
    from scipy.sparse.linalg import spsolve

    n, src, dst, weight = edges_of(graph)
    x = np.where(np.isnan(fixed_values), 0.0, fixed_values)
    free = np.isnan(fixed_values) & (np.bincount(dst, minlength=n) > 0)
    fixed = ~free
    # reached from a fixed vertex: BFS from a super-vertex n joined to every fixed vertex
    extra_src = np.concatenate([src, np.full(int(fixed.sum()), n)])
    extra_dst = np.concatenate([dst, np.flatnonzero(fixed)])
    reach = sp.csr_matrix((np.ones(extra_src.size), (extra_src, extra_dst)), shape=(n + 1, n + 1))
    reached = np.zeros(n + 1, dtype=bool)
    reached[breadth_first_order(reach, n, directed=True, return_predecessors=False)] = True
    solve = free & reached[:n]
    index = -np.ones(n, dtype=np.int64)
    index[solve] = np.arange(int(solve.sum()))
    if solve.any():
        into = solve[dst]
        weighted_in = np.bincount(dst, weights=weight, minlength=n)
        inside = into & solve[src]
        matrix = sp.csr_matrix(
            (np.concatenate([weighted_in[solve], -weight[inside]]),
             (np.concatenate([index[solve], index[dst[inside]]]),
              np.concatenate([index[solve], index[src[inside]]]))),
            shape=(int(solve.sum()),) * 2)
        boundary = into & ~solve[src]
        rhs = np.bincount(index[dst[boundary]], weights=weight[boundary] * x[src[boundary]],
                          minlength=int(solve.sum()))
        # minimum-degree ordering on A+A' keeps the fill-in of these Laplacian-like systems low
        x[solve] = spsolve(matrix.tocsc(), rhs, permc_spec="MMD_AT_PLUS_A")
    return x


def heat_exact(graph, sources):
    """HS steady state: sources 1, free vertices the weighted mean of their in-neighbours."""
    fixed = np.full(graph.num_vertices, np.nan)
    fixed[list(sources)] = 1.0
    return _harmonic(graph, fixed)


def circuit_exact(graph, sources, ground_every):
    """CS voltages: sources 1 V, ground (user id % ground_every == 0) 0 V, others solved."""
    fixed = np.full(graph.num_vertices, np.nan)
    fixed[np.mod(graph.original_ids(), ground_every) == 0] = 0.0
    fixed[list(sources)] = 1.0
    return _harmonic(graph, fixed)


class MinLabels(VertexProgram):
    """A user's min-label propagation over vertex ids, defined outside garaphpy
    (CC's functions; the tests that use it add declarations of their own)."""

    value_dtype = np.int64
    sum = "min"
    max_iterations = 100_000

    def init(vertex):
        return vertex

    def gather(src):
        return src

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


# -- the pages a frontier's pull needs (the disk tier's tests) ----------------
def notified_vertices(frontier: np.ndarray, out_offsets: np.ndarray,
                      out_targets: np.ndarray) -> np.ndarray:
    """Reference: per vertex, whether an active vertex has an out-edge into it (the
    vertices a notify-pull of ``frontier`` pulls), and a last flag, False,
    one past the last vertex."""
    frontier = np.asarray(frontier, np.int64)
    reached = np.zeros(out_offsets.size, bool)
    starts, ends = out_offsets[frontier], out_offsets[frontier + 1]
    lengths = (ends - starts).astype(np.int64)
    total = int(lengths.sum())
    if total:
        # the out-edges of every active vertex, without a Python loop
        positions = np.repeat(starts.astype(np.int64) - np.cumsum(lengths) + lengths,
                              lengths) + np.arange(total, dtype=np.int64)
        reached[out_targets[positions]] = True
    return reached


def pages_with_active_in_edges(frontier: np.ndarray, out_offsets: np.ndarray,
                               out_targets: np.ndarray, page_first_vertex: np.ndarray,
                               page_end_vertex: np.ndarray) -> np.ndarray:
    """Per page, whether an active vertex has an out-edge into its vertex range:
    the pages a pull of the frontier needs (the others gather nothing new).

    Parameters
    ----------
    frontier : numpy.ndarray of int
        The active vertices.
    out_offsets, out_targets : numpy.ndarray
        The CSR of out-edges.
    page_first_vertex, page_end_vertex : numpy.ndarray of int64
        Each page's vertex range (pages in order; a vertex split over several
        pages is in each of their ranges).
    """
    from garaphpy.storage.tiers import pages_holding

    return pages_holding(notified_vertices(frontier, out_offsets, out_targets),
                         page_first_vertex, page_end_vertex)
