"""What more than one test file uses: graphs, programs, references by name,
records compared without their times, budgets, policies, the session's paths and the fast loop's list.

Test files import from here (``tests/`` is on ``sys.path`` through the
``pythonpath`` option in setup.cfg), never from one another
(tests/test_test_layout.py checks that); shared fixtures are in
tests/conftest.py.
"""

from __future__ import annotations

import functools
import math
import os
from pathlib import Path

import numpy as np
import pytest

import garaphpy
import references as ref
from garaphpy import api, config
from garaphpy.program import VertexProgram
from garaphpy.programs import BUILTIN_PROGRAMS, CircuitSimulation, NeuralNetwork
from garaphpy.scheduler.policy import HybridPolicy
from garaphpy.storage.builder import BuildOptions, build_store
from garaphpy.storage.host_budget import plan_host_cache, run_fixed_bytes
from garaphpy.storage.host_pages import HostPages
from garaphpy.storage.page_io import staging_buffer_bytes
from garaphpy.storage.readers import from_arrays
from garaphpy.storage.store import Store
from references import MinLabels

#: The repository's root folder.
REPOSITORY = Path(__file__).resolve().parents[1]

#: ../shared/data beside the repository: the real SNAP graphs (or the folder
#: named by GARAPHPY_TEST_DATA, where the tests run on another machine).
SHARED_DATA = Path(os.environ.get("GARAPHPY_TEST_DATA")
                   or REPOSITORY.parent / "shared" / "data")

#: The session's temporary cache root and the user's own cache directory (set
#: by tests/conftest.py before any test runs; no test may write under the latter).
TEST_CACHE_ROOT: Path | None = None
USER_CACHE_DIRECTORY: Path | None = None

#: Where the session's compiled programs are kept, in pytest's cache folder
#: (None without pytest's cache): ``garaphpy.run`` in the test processes and
#: every process they start with the session's ``GARAPHPY_CACHE`` load a
#: program any of them compiled (tests/conftest.py).
PROGRAM_CACHE: Path | None = None


def cache_with_programs(directory: Path) -> Path:
    """``directory``, made, as a ``GARAPHPY_CACHE`` of its own whose
    ``programs`` folder is :data:`PROGRAM_CACHE` (where there is one): a
    process started with it builds its stores there and loads the programs
    the session compiled."""
    directory.mkdir(parents=True, exist_ok=True)
    if PROGRAM_CACHE is not None:
        try:
            (directory / "programs").symlink_to(PROGRAM_CACHE, target_is_directory=True)
        except FileExistsError:     # made before (by the other worker, or a session before)
            pass
    return directory


#: :func:`garaphpy.api._gpu_set_up_choice` as the package has it (tests/conftest.py
#: replaces it for the whole session: :func:`gpu_set_up_unweighed`).
WEIGHED_GPU_SET_UP = api._gpu_set_up_choice


def gpu_set_up_unweighed() -> None:
    """Hybrid runs set the GPU up whatever their size, for the whole session
    (module-scoped fixtures included): the weighing of the GPU's set-up
    (:func:`garaphpy.scheduler.set_up_choice.gpu_set_up_pays`) would give every
    small graph of the suite to the CPU alone; tests/scheduler/test_gpu_set_up.py
    puts it back (:data:`WEIGHED_GPU_SET_UP`)."""
    api._gpu_set_up_choice = lambda *arguments, **keywords: None


@functools.cache
def gpu_available() -> str | None:
    """None when a CUDA device is usable through cupy, else the reason why not."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a broken CUDA install
        return f"cupy is not importable ({error.__class__.__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as error:
        return f"no usable CUDA device ({error.__class__.__name__})"
    return None


#: The fast loop's tests, one file or ``file::function`` a line (tests/fast.txt).
FAST_TESTS = frozenset(
    line.strip() for line in (Path(__file__).parent / "fast.txt").read_text().splitlines()
    if line.strip() and not line.lstrip().startswith("#"))


def is_fast(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (its parameters aside) or its file is in
    FAST_TESTS (tests/conftest.py marks those, unless they are marked ``slow``)."""
    function = nodeid.split("[", 1)[0]
    return function in FAST_TESTS or function.split("::", 1)[0] in FAST_TESTS


# -- the built-in programs on small graphs, against their references --------------------
def tiny_graph():
    """Directed, weighted, user ids 10..90: a dangling vertex (90), a vertex with no
    in-edge (80), a self-loop, a 2-cycle, and a part no source at 10 reaches (70, 80)."""
    edges = [(10, 20, 2.0), (10, 30, 5.0), (20, 30, 1.0), (30, 40, 2.0), (40, 20, 1.0),
             (20, 50, 7.0), (50, 50, 3.0), (50, 60, 1.0), (40, 60, 8.0), (60, 90, 2.0),
             (80, 70, 1.0), (70, 60, 4.0), (30, 90, 9.0)]
    src, dst, w = zip(*edges)
    return garaphpy.Graph.from_arrays(list(src), list(dst), list(w), weight_dtype="float64")


def random_graph(seed=3, n=40, m=160):
    """Random directed multigraph-free graph, integer weights 1..9, user ids 3*i + 7."""
    rng = np.random.default_rng(seed)
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    weight = rng.integers(1, 10, m).astype(np.float64)
    return garaphpy.Graph.from_arrays(src * 3 + 7, dst * 3 + 7, weight, weight_dtype="float64")


def undirected_graph():
    """Undirected, weighted, 12 vertices: components {0..4}, {5, 6, 7}, {8, 9}, {10}, {11}."""
    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 0, 4.0), (2, 3, 1.5), (3, 4, 0.5), (5, 6, 3.0),
             (6, 7, 1.0), (8, 9, 2.5), (4, 4, 1.0)]
    src, dst, w = zip(*edges)
    return garaphpy.Graph.from_arrays(list(src), list(dst), list(w), num_vertices=12,
                                      directed=False, weight_dtype="float64")


SMALL_GRAPHS = {"tiny": tiny_graph, "random": random_graph, "undirected": undirected_graph}

SOURCES = {"tiny": [0], "random": [0, 10, 20, 30], "undirected": [0], "hepph": [0, 5000]}


def sources_of(graph, name):
    """Internal ids of the sources a test uses on graph ``name``.

    Several on the random graph: HS converges at the rate of a random walk
    absorbed at the sources, thousands of iterations with one source there.
    """
    return np.array(SOURCES[name], dtype=np.int64)


CIRCUIT = {"ground_every": 4}  # small graphs have few ids; ground a quarter of them
#: Programs that stop on a bound of their own, not a tolerance: their constants for a run
#: to (nearly) the exact fixed point.
TIGHT_CONSTANTS = {"delta_pagerank": {"l1_bound": 1e-12}}

#: The programs that iterate to a tolerance (their values are approximate).
ITERATIVE = {"pagerank", "hs", "cs"}


def program_for(name, tight=False):
    if name == "cs":
        return CircuitSimulation(**CIRCUIT)
    return BUILTIN_PROGRAMS[name](**(TIGHT_CONSTANTS.get(name, {}) if tight else {}))


def reference(name, graph, sources, *, big=False):
    """An independent correct result of program ``name`` (values users see)."""
    if name in ("pagerank", "delta_pagerank"):
        return ref.pagerank_power(graph) if big else ref.pagerank_networkx(graph)
    if name == "sssp":
        return ref.sssp_scipy(graph, sources) if big else ref.sssp_networkx(graph, sources)
    if name == "bfs":
        return ref.bfs_scipy(graph, sources)
    if name == "cc":
        return ref.components_scipy(graph)
    if name == "sswp":
        return ref.sswp_heap(graph, sources)
    if name == "nn":
        return ref.nn_scipy(graph, NeuralNetwork.max_iterations)
    if name == "hs":
        return ref.heat_exact(graph, sources)
    if name == "cs":
        return ref.circuit_exact(graph, sources, CIRCUIT["ground_every"])
    raise KeyError(name)


def gpu_program(name):
    """The program of ``name``; delta-PageRank bounded tightly enough to meet the
    PageRank reference."""
    if name == "delta_pagerank":
        return BUILTIN_PROGRAMS[name](l1_bound=1e-11)
    return program_for(name)


def gpu_reference(name, graph, sources):
    return reference("pagerank" if name == "delta_pagerank" else name, graph, sources)


# -- users' programs ---------------------------------------------------------------------
class ShortestPaths(VertexProgram):
    sum = "min"
    initially_active = "sources"
    needs_weights = True
    needs_sources = True

    def init(is_source):
        return 0.0 if is_source else math.inf

    def gather(src, weight):
        return src + weight

    def apply(value, accum):
        return min(value, accum)

    def activate(new, old):
        return new < old


class Hops(ShortestPaths):
    """A user's SSSP (ShortestPaths) that declares its values' order."""

    execution = "async"
    value_priority = True
    max_iterations = 10**9


class OwnLabels(MinLabels):
    """A user's min-label propagation over vertex ids (CC without the library)."""

    initially_active = "all"
    needs_undirected = True
    shortcut_labels = True


class OffByOneInit(OwnLabels):
    def init(vertex):
        return vertex + 1


class DoublingGather(OwnLabels):
    def gather(src):
        return src * 2


class TakesTheSum(OwnLabels):
    def apply(value, accum):
        return accum


class Crash(Exception):
    """Stands for the process dying between two iterations."""


# -- iteration records --------------------------------------------------------------------
def untimed(records, labels: bool = True) -> list[dict]:
    """The records as dicts without their measured times (theirs and their
    decisions'; a NaN as "nan", so
    that equal records compare equal: SSSP's L1 change is inf - inf), nor the
    facts of the GPU's device-loop batch an iteration ran in (its length and
    end, and how it was launched, depend on where checkpoints cut the run) and
    the GPU memory a decision found free (the loop's budget is a share of it).
    The L1 change compares to nine digits: the CPU threads' partial sums, and
    the device's atomics, add up in an order no two runs share.

    ``labels=False`` also leaves out the mode label and the hybrid run's
    per-run choice (``run_processors``): a hybrid run's records against those
    of the one processor it chose.
    """
    rows = []
    for record in records:
        row = {name: value for name, value in record.as_dict().items()
               if not name.endswith("seconds") and (labels or name != "mode")}
        row["decisions"] = {name: dict(entry) if isinstance(entry, dict) else entry
                            for name, entry in row["decisions"].items()
                            if labels or name != "run_processors"}
        for name in ("steps", "stop", "launch"):
            row["decisions"].get("device_loop", {}).pop(name, None)
        for entry in row["decisions"].values():
            if isinstance(entry, dict):
                entry.pop("free_bytes", None)
                entry.pop("seconds", None)
        row = {name: "nan" if isinstance(value, float) and math.isnan(value) else value
               for name, value in row.items()}
        if isinstance(row.get("l1_change"), float):
            row["l1_change"] = pytest.approx(row["l1_change"], rel=1e-9, abs=1e-300)
        rows.append(row)
    return rows


# -- hybrid policies ---------------------------------------------------------------------
def policy_with_costs(t_pull, t_gpu, **options) -> HybridPolicy:
    """A policy whose start-up probe over |E| = 1024 edges gave these T_pull and T_GPU.

    With powers of two (times small integers) the rates t / 1024 and the
    times rate * 1024 are exact in floating point.
    """
    policy = HybridPolicy(**options)
    policy.calibrate(1024, t_pull, 1024, t_gpu, num_edges=1024)
    return policy


class SplitPolicy(HybridPolicy):
    """Every iteration hybrid; the GPU takes ``gpu_share`` of the pages from the
    front, the CPU the rest from the back (no tail rule).  Each stops at its
    share, whichever starts first: a split that the two threads' timing
    decided (a CPU worker that took every page before the GPU's first take)
    would leave a test's processor without pages."""

    def __init__(self, gpu_share: float = 0.5, **options):
        super().__init__(force="hybrid", **options)
        self.gpu_share = gpu_share
        self.gpu_taken = self.cpu_taken = 0
        self.num_pages = None

    def should_take(self, processor, page_edges, own_backlog, other_backlog, queued_edges):
        gpu_pages = max(1, round(self.gpu_share * self.num_pages))
        if processor == "cpu":
            self.cpu_taken += 1
            return self.cpu_taken <= self.num_pages - gpu_pages
        self.gpu_taken += 1
        return self.gpu_taken <= gpu_pages

    def decide(self, iteration, active_fraction, rho):
        self.gpu_taken = self.cpu_taken = 0
        return super().decide(iteration, active_fraction, rho)


class GpuAlonePolicy(HybridPolicy):
    """Every iteration hybrid, and the CPU takes nothing: the GPU-alone path."""

    def __init__(self):
        super().__init__(force="hybrid")

    def should_take(self, processor, *arguments):
        return processor == "gpu"


def with_pages(policy, graph, program):
    graph_run = graph.as_undirected() if program.needs_undirected else graph
    policy.num_pages = len(graph_run.store.pages)
    return policy


# -- stores and budgets ------------------------------------------------------------------
HOST_PAGES_READ_RATIO = 6.0   #: the read ratio k the host-page tests give
CACHED_PAGES = 3              #: pages the standard host-page plan keeps in host memory
PAGES_AHEAD = 2               #: page buffers of the standard reader
STREAMED_READ_RATIO = 8.0     #: the read ratio the out-of-core runs are given


def build_striped_store(directory: Path) -> Store:
    """A weighted store of many multi-block plain pages over three storage directories."""
    rng = np.random.default_rng(5)
    n, m = 2000, 20000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    ssds = [directory / "ssd1", directory / "ssd2"]
    for ssd in ssds:
        ssd.mkdir(parents=True)
    return build_store(from_arrays(src, dst, rng.integers(1, 100, m)), directory / "store",
                       BuildOptions(block_bytes=4096, max_page_bytes=20000, compress=False,
                                    storage_dirs=[str(d) for d in ssds]), progress=False)


def build_compressed_store(directory: Path, seed: int = 5) -> Store:
    """A weighted store of many compressed pages on one storage directory."""
    rng = np.random.default_rng(seed)
    n, m = 2000, 20000
    (directory / "ssd").mkdir(parents=True)
    store = build_store(from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                    rng.integers(1, 100, m)), directory / "store",
                        BuildOptions(block_bytes=4096, max_page_bytes=20000, compress=True,
                                     storage_dirs=[str(directory / "ssd")]), progress=False)
    assert all(info.compressed for info in store.pages) and len(store.pages) > CACHED_PAGES + 4
    return store


def page_bytes(store):
    return [info.nbytes for info in store.pages]


def buffer_bytes(store: Store) -> int:
    """The bytes of one read-ahead buffer: the largest page, block-aligned."""
    return -(-max(page_bytes(store)) // config.BLOCK_ALIGNMENT) * config.BLOCK_ALIGNMENT


def make_pages(store: Store, cached: int = CACHED_PAGES, pages_ahead: int = PAGES_AHEAD,
               fixed: int = 1000) -> HostPages:
    """HostPages caching the first ``cached`` pages, ``pages_ahead`` read-ahead buffers."""
    sizes = [info.nbytes for info in store.pages]
    readahead = pages_ahead * buffer_bytes(store)
    budget = fixed + readahead + sum(sizes[:cached])
    plan = plan_host_cache(sizes, fixed, readahead, budget)
    assert plan.cached == tuple(range(cached))
    return HostPages(store, plan, HOST_PAGES_READ_RATIO, readahead_bytes=readahead)


def store_of(graph, name):
    """The store a program runs on (the symmetrized one for CC)."""
    program = BUILTIN_PROGRAMS[name]
    return (graph.as_undirected() if program.needs_undirected else graph).store


def budget(graph, name, cached_fraction, pages_ahead=2) -> dict:
    """Options of a host budget below the store: the vertex data, ``pages_ahead``
    page buffers of read-ahead and ``cached_fraction`` of the page bytes."""
    store = store_of(graph, name)
    readahead = pages_ahead * buffer_bytes(store)
    # compressed pages in flight also hold staging buffers (plan_run_pages pays them)
    staging = (pages_ahead + 1) * staging_buffer_bytes(store)
    host_memory = (run_fixed_bytes(store) + readahead + staging
                   + int(cached_fraction * sum(page_bytes(store))))
    return {"host_memory": host_memory, "readahead_bytes": readahead}


def plan_of(store, host_memory, readahead_bytes=None):
    """The page plan of a CPU run under ``host_memory`` (None: all in memory)."""
    pages = api.page_source(store, "cpu", host_memory, STREAMED_READ_RATIO, readahead_bytes)
    pages.close()
    return None if pages.plan.all_cached else pages.plan


def host_budget(graph, program, readers: int, cached_fraction: float) -> dict:
    """Options giving a host budget that holds ``cached_fraction`` of the pages
    of the store the program runs on, beside two pages of read-ahead per reader."""
    store = (graph.as_undirected() if program.needs_undirected else graph).store
    largest = max(page.nbytes for page in store.pages)
    readahead = 2 * (-(-largest // config.BLOCK_ALIGNMENT) * config.BLOCK_ALIGNMENT)
    total = sum(page.nbytes for page in store.pages)
    staging = 3 * staging_buffer_bytes(store)     # beside two pages in flight
    budget = run_fixed_bytes(store) + readers * (readahead + staging) \
        + int(cached_fraction * total)
    return {"host_memory": budget, "readahead_bytes": readahead}


def budget_for(graph, program, fraction: float, execution: str = "sync",
               buffers: bool = True, selective: bool = True) -> int:
    """A GPU budget holding the vertex data, the stream buffers (unless not
    ``buffers``), the selective arrays (unless not ``selective``: a forced copy
    has none) and ``fraction`` of the pages' bytes."""
    from garaphpy.scheduler.gpu_engine import GpuEngine

    graph_run = graph.as_undirected() if program.needs_undirected else graph
    sources = np.array([0], np.int64) if program.needs_sources else np.zeros(0, np.int64)
    sizing = GpuEngine(graph_run, program, sources, synchronous=execution == "sync")
    wire = sizing.page_wire_bytes       # the pages' bytes on the device
    return (sizing.plan.vertex_bytes + buffers * config.N_STREAMS * max(wire)
            + selective * sizing.selective_bytes + int(fraction * sum(wire)))


class OutDegreeRank(VertexProgram):
    """A synchronous pull whose gather reads a source attribute (precomputed)."""

    max_iterations = 3
    run_until_limit = True

    def init(num_vertices):
        return 1.0 / num_vertices

    def gather(src, src_out_degree):
        return src / src_out_degree

    def apply(value, accum):
        return 0.15 + 0.85 * accum

    def activate(new, old):
        return True


# -- the device loop's persistent kernel (test_persistent_loop, test_fused_push) ----------
def road_like(seed: int, width: int, height: int, kept: float, store: Path):
    """A grid's edges both ways, a share removed at random (each pair both ways
    or neither), weights 1..255 (the same both ways)."""
    rng = np.random.default_rng(seed)
    ids = np.arange(width * height).reshape(height, width)
    pairs = np.concatenate([np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()], 1),
                            np.stack([ids[:-1, :].ravel(), ids[1:, :].ravel()], 1)])
    pairs = pairs[rng.random(len(pairs)) < kept]
    weights = rng.integers(1, 256, len(pairs))
    src = np.concatenate([pairs[:, 0], pairs[:, 1]])
    dst = np.concatenate([pairs[:, 1], pairs[:, 0]])
    return garaphpy.Graph.from_arrays(src, dst, np.concatenate([weights, weights]).astype(
        np.float64), num_vertices=width * height, store=store)


def persistent_loop_graphs(folder: Path) -> dict:
    """The persistent kernel's tests' graphs, stored under ``folder``: a
    weighted grid, a chain, a road-like grid (:func:`road_like`) and a
    skewed rmat."""
    return {
        "grid": garaphpy.Graph.load("grid:60x50", store=folder / "grid", progress=False,
                                    generator_options={"weighted": True}),
        "chain": garaphpy.Graph.load("grid:1x30000", store=folder / "chain", progress=False),
        "road": road_like(7, 120, 100, 0.8, folder / "road"),
        "rmat": garaphpy.Graph.load("rmat:12", store=folder / "rmat", progress=False,
                                    generator_options={"weighted": True}),
    }


def source_of(graph, name: str) -> np.ndarray:
    """A vertex with out-edges (the hub of a skewed graph; an end of a chain)."""
    degree = np.asarray(graph.store.out_degree)
    if name == "chain":
        return np.array([int(np.flatnonzero(degree == 1)[0])])
    return np.array([int(np.argmax(degree))])


def loop_entries(result) -> list:
    """The device loop's decisions entry of each looped iteration's record."""
    return [r.decisions["device_loop"] for r in result.iterations
            if "device_loop" in r.decisions]


def loop_launches(result) -> list:
    """The device loop's ``launch`` of each looped iteration's record."""
    return [entry["launch"] for entry in loop_entries(result)]
