"""The processors' narrow interface (begin, process a page, finish -> result).

The CPU processor runs on the real CPU engine: pulling every page through it
(in the CPU's order, from the back) and combining its result must give the
CPU engine's own pull iteration, and every page's vertex range must be sent
to the device copy once.  The GPU processor is checked for its wiring
against a recording stand-in of the GPU engine (the real one is exercised
by the GPU tests of hybrid runs, tests/scheduler/test_engine_hybrid.py).  At a switch
to the GPU, :class:`VertexState` must hand it the host's frontier, and
:meth:`GpuEngine.set_frontier` must make it flags over every vertex with its
out-degree sum, against NumPy, with the device's copy recorded.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import garaphpy
from garaphpy import api
from garaphpy.scheduler.cpu_engine import CpuEngine
from garaphpy.scheduler.cpu_state import GraphArrays, RunState
from garaphpy.scheduler import decisions
from garaphpy.scheduler.gpu.vertex_state import DeviceVertexState
from garaphpy.scheduler.plan import CpuPlan
from garaphpy.scheduler.gpu_engine import GpuEngine
from garaphpy.scheduler.processors import CpuProcessor, GpuProcessor, ProcessorResult
from garaphpy.scheduler.records import IterationRecord
from garaphpy.scheduler.vertex_state import VertexState
from garaphpy.storage.page_source import InMemoryPages

from helpers import OutDegreeRank as Rank


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(11)
    n, m = 4000, 6000
    src = np.concatenate([rng.integers(0, n, m), np.arange(3000) + 100])
    dst = np.concatenate([rng.integers(0, n, m), np.full(3000, 7)])   # a vertex cut by pages
    return garaphpy.Graph.from_arrays(src, dst, max_shard_edges=300, max_page_bytes=8_000)


def cpu_engine(graph):
    program = Rank()
    compiled = api._compiled_program(program)
    source = InMemoryPages(graph.store)
    arrays = GraphArrays.from_graph(graph, np.zeros(0, np.int64), False, source)
    state = RunState(arrays, compiled, synchronous=True)
    state.frontier = np.arange(graph.num_vertices, dtype=np.int64)
    precompute = decisions.precompute_source_gathers("pull", True, compiled.gather_parameters)
    return CpuEngine(arrays, compiled, state,
                     CpuPlan(threads=2, synchronous=True, source_precompute=precompute))


class RecordingVertexState:
    """Stands for VertexState: the CPU's sends are recorded, not copied."""

    def __init__(self, host):
        self.host = host
        self.sent = []

    def send_range(self, first: int, end: int) -> int:
        self.sent.append((first, end))
        return (end - first) * 9


def test_cpu_processor_pages_equal_the_cpu_pull(graph):
    assert len(graph.store.pages) > 3
    reference = cpu_engine(graph)
    record = IterationRecord(0, "cpu", "pull", True, 1.0, 1.0, graph.num_vertices)
    reference.iterate(record, None, reference.aggregates(0))

    engine = cpu_engine(graph)
    vertex_state = RecordingVertexState(engine.state)
    processor = CpuProcessor(engine, vertex_state, threads=1)
    order = list(range(len(graph.store.pages)))
    aggregates = engine.aggregates(0)
    processor.begin(0, aggregates, order)
    for index in reversed(order):
        processor.process(index)
    result = processor.finish()
    assert isinstance(result, ProcessorResult) and result.processor == "cpu"
    assert result.pages == order[::-1]
    assert result.edges == graph.num_edges and result.busy_seconds > 0
    pages = graph.store.pages
    assert sorted(vertex_state.sent) == [(p.first_vertex, p.end_vertex) for p in pages]
    # a vertex cut between two pages is in both ranges
    assert result.bytes_to_device == 9 * sum(p.end_vertex - p.first_vertex for p in pages)
    vertices = [vertex for vertex, _ in result.partials]
    assert vertices and vertices == sorted(vertices)        # vertex 7 is cut by pages
    assert result.decisions["cpu_precompute"]["choice"] is True

    combined = IterationRecord(0, "hybrid", "pull", True, 1.0, 1.0, graph.num_vertices)
    engine.finish_pull(combined, result.partials, aggregates)
    np.testing.assert_allclose(engine.state.values, reference.state.values, rtol=1e-12)
    assert engine.num_active() == reference.num_active()
    assert engine.l1_change == pytest.approx(record.l1_change)
    engine.reset_statistics()
    assert engine.l1_change == 0.0


def test_cpu_processor_probe_and_pull_fraction_against_numpy(graph):
    """The calibration and the cost model's p, now the processor's: the probe
    pulls the largest page into scratch buffers (the run's values and
    frontier as they were), and p is the frontier's out-neighbours'
    in-edges over |E|, against NumPy."""
    engine = cpu_engine(graph)
    processor = CpuProcessor(engine, RecordingVertexState(engine.state), threads=1)
    values, frontier = engine.state.values.copy(), engine.state.frontier.copy()
    probe = processor.probe(list(range(len(graph.store.pages))), engine.aggregates(0))
    assert probe.edges == max(page.num_edges for page in graph.store.pages)
    assert probe.seconds > 0 and probe.empty_iteration_seconds > 0
    np.testing.assert_array_equal(engine.state.values, values)
    np.testing.assert_array_equal(engine.state.frontier, frontier)

    in_offsets, sources, _ = graph.store.csc()
    in_degree = np.diff(in_offsets)
    per_vertex = np.bincount(sources, weights=np.repeat(in_degree, in_degree),
                             minlength=graph.num_vertices)
    np.testing.assert_array_equal(processor.count_neighbour_in_edges(), per_vertex)
    engine.state.frontier = np.array([3, 7, 100, 2500], np.int64)
    assert processor.pull_fraction() == pytest.approx(
        min(per_vertex[[3, 7, 100, 2500]].sum() / graph.num_edges, 1.0))
    engine.state.frontier = np.arange(graph.num_vertices, dtype=np.int64)
    assert processor.pull_fraction() == 1.0


class RecordingGpuEngine:
    """Stands for GpuEngine: records the calls the GPU processor makes."""

    streams = [object(), object()]

    def __init__(self):
        self.calls = []

    def begin_iteration(self, iteration):
        self.calls.append(("begin", iteration))

    def launch_page(self, k, aggregates, iteration, host_values, host_active):
        self.calls.append(("launch", k, iteration, host_values.dtype, host_active.dtype))
        return ("timing", k)

    def end_iteration(self, record, timings, aggregates, apply_split=True, shortcut=True):
        self.calls.append(("end", list(timings), apply_split, shortcut))
        record.gpu_edges, record.gpu_busy_seconds = 120, 0.5
        record.bytes_to_device, record.bytes_to_host = 1000, 200
        record.copy_seconds, record.kernel_seconds, record.l1_change = 0.2, 0.3, 1.5
        record.decisions["gpu_precompute"] = {"choice": False}
        return np.array([17, 40], np.uint64)

    def split_partials(self, pages):
        self.calls.append(("split", list(pages)))
        return {7: 0.25}


def test_gpu_processor_wiring():
    class Host:
        next = np.zeros(10, np.float64)
        active = np.zeros(10, np.bool_)

    class State:
        host = Host()

    engine = RecordingGpuEngine()
    processor = GpuProcessor(engine, State())
    assert processor.pages_in_flight >= len(engine.streams)
    processor.begin(4, "aggregates")
    assert processor.process(2) == ("timing", 2)
    processor.process(0)
    result = processor.finish()
    assert engine.calls == [("begin", 4), ("launch", 2, 4, np.float64, np.uint8),
                            ("launch", 0, 4, np.float64, np.uint8),
                            ("end", [("timing", 2), ("timing", 0)], False, False),
                            ("split", [2, 0])]
    assert result == ProcessorResult("gpu", [2, 0], 120, 0.5, 1000, 200, 0.2, 0.3, 1.5, 17,
                                     {7: 0.25}, {"gpu_precompute": {"choice": False}})


# -- the GPU's frontier: the host's, a checkpoint's or the first ---------------------------
class RecordedActivity:
    """Stands for the GPU's activity array: what it is set to is recorded."""

    def __init__(self):
        self.uploads = []

    def set(self, flags, stream=None):
        self.uploads.append(flags.copy())


def test_set_frontier_marks_exactly_the_frontier_in_one_pinned_buffer():
    rng = np.random.default_rng(5)
    n = 5000
    out_degree = rng.integers(0, 40, n).astype(np.int64)
    engine = GpuEngine.__new__(GpuEngine)       # no device: the copies are recorded
    state = engine.state = DeviceVertexState.__new__(DeviceVertexState)
    pinned = []
    state.pinned_array = lambda size, dtype: pinned.append(np.empty(size, dtype)) or pinned[-1]
    state.num_vertices = n
    state.out_degree = out_degree
    state.active = RecordedActivity()
    state.main_stream = SimpleNamespace(synchronize=lambda: None)
    state._frontier_staging = None
    engine._loop = SimpleNamespace(frontier_current=True)
    # a large frontier, a smaller one (the first's flags must not stay), none
    frontiers = [np.sort(rng.choice(n, 4000, replace=False)),
                 np.sort(rng.choice(n, 37, replace=False)), np.zeros(0, np.int64)]
    for uploaded_before, frontier in enumerate(frontiers):
        engine.set_frontier(frontier.astype(np.int64))
        expected = np.zeros(n, np.uint8)
        expected[frontier] = 1
        assert len(engine.active.uploads) == uploaded_before + 1
        np.testing.assert_array_equal(engine.active.uploads[-1], expected)
        assert engine.num_active() == frontier.size
        assert engine.active_out_edges() == (int(out_degree[frontier].sum()), None)
        assert engine._loop.frontier_current is False       # the device loop re-reads it
        engine._loop.frontier_current = True
    assert len(pinned) == 1                                  # one pinned buffer, made once


def test_a_switch_to_the_gpu_hands_it_the_hosts_values_and_frontier():
    calls = []
    vertex_state = VertexState.__new__(VertexState)     # the copies are not under test
    vertex_state.host = SimpleNamespace(frontier=np.array([3, 9], np.int64))
    vertex_state.device = SimpleNamespace(
        num_vertices=12, set_frontier=lambda vertices: calls.append(("frontier", vertices)))
    vertex_state.upload_values = lambda: calls.append(("values",)) or 96
    vertex_state.smooth = lambda old, new: new
    vertex_state.upload_seconds = 0.0
    vertex_state.device_current = False
    assert vertex_state.make_device_current() == 96 + 12
    assert [call[0] for call in calls] == ["values", "frontier"]
    assert calls[1][1].ids is vertex_state.host.frontier
    assert vertex_state.device_current
    assert vertex_state.make_device_current() == 0       # already current: nothing moves
    assert len(calls) == 2
