"""A hybrid run on a mesh starts on the CPU while the GPU is set up, then hands over.

Without a GPU: the hand-over rule (:func:`relay.hand_over_pays`) and the
set-up's choice to relay (:func:`set_up_choice.relays`) on truth tables;
then ``garaphpy.run`` in hybrid mode on a grid, the set-up's choice given
(the GPU alone, sparse levels), with a stand-in for the GPU's set-up: a CPU
engine of its own, made on the relay's thread after a delay.  BFS and SSSP
equal SciPy's whichever processor ends the run: the stand-in taking the
run at once, after some of the CPU's levels, or never (the rule declines,
or the run ends first, and the run does not wait for the set-up); a set-up
that fails fails the run with its error.

With a GPU (``pytest -m gpu``): the relay on a grid, its values those of
the GPU mode, the GPU's plan in the run's.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.scheduler import relay, set_up_choice
from garaphpy.scheduler.driver import Driver

from references import bfs_scipy, sssp_scipy


@pytest.mark.parametrize("cpu, gpu, levels, hand_over, expected", [
    (30e-6, 10e-6, 1000, 1e-3, True),       # saves 20 ms for 1 ms
    (30e-6, 10e-6, 40, 1e-3, False),        # saves 0.8 ms for 1 ms
    (10e-6, 30e-6, 1000, 0.0, False),       # the CPU's levels are the cheaper
    (20e-6, 20e-6, 1000, 0.0, False),
    (20e-6, 10e-6, 1, 0.0, True),
])
def test_hand_over_pays_truth_table(cpu, gpu, levels, hand_over, expected):
    assert relay.hand_over_pays(cpu, gpu, levels, hand_over) is expected


@pytest.mark.parametrize("change, checkpoints, expected", [
    ({}, False, True),
    ({}, True, False),                              # checkpoints are a processor's own
    ({"gpu_alone": False}, False, False),           # both processors share pages
    ({"sparse_levels": 0.0}, False, False),         # whole pulls, no mesh's levels
    ({"storage_reads": {"first_bytes": 1}}, False, False),   # pages read from storage
])
def test_relays_truth_table(change, checkpoints, expected):
    entry = {"gpu_alone": True, "sparse_levels": 80.0, "storage_reads": None, **change}
    assert set_up_choice.relays(entry, checkpoints) is expected
    assert entry["relay"] is expected


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return garaphpy.Graph.load("grid:48x48", store=tmp_path_factory.mktemp("relay") / "s",
                               progress=False)


class StandIn:
    """The GPU's set-up, stood in for by a CPU engine of its own, made after
    ``delay`` seconds and ``wait_for`` set (or raising ``error``); notes when it
    made its driver and when that was closed."""

    def __init__(self, delay: float = 0.0, error: Exception | None = None,
                 wait_for: threading.Event | None = None):
        self.delay = delay
        self.error = error
        self.wait_for = wait_for
        self.made_event = threading.Event()
        self.closed = threading.Event()
        self.thread = None

    def __call__(self, plan, run_, pages, options, initially_active):
        self.thread = threading.current_thread().name
        time.sleep(self.delay)
        if self.wait_for is not None:
            self.wait_for.wait(60)
        if self.error is not None:
            raise self.error
        cpu_run = dataclasses.replace(run_, mode="cpu", relay=False)
        cpu_plan, parts = api._plan(cpu_run, pages, None, frozenset())
        engine = api.build_cpu_engine(cpu_plan, run_.program, *parts, initially_active)
        driver = Driver(engine)
        closed, close = self.closed, driver.close

        def close_and_note():
            close()
            closed.set()

        driver.close = close_and_note
        self.made_event.set()
        return driver, None


@pytest.fixture
def relayed(monkeypatch):
    """``garaphpy.run`` in hybrid mode as on a GPU host whose set-up choice is
    the GPU alone on a mesh; the stand-in set with ``use(StandIn(...))``."""
    monkeypatch.setattr(api, "_hybrid_or_fallback", lambda: "hybrid")
    monkeypatch.setattr(api, "_gpu_set_up_choice", lambda *a, **k: {
        "choice": True, "whole_pulls": False, "passes": 1.0, "sparse_levels": 96.0,
        "storage_reads": None})

    def use(stand_in):
        monkeypatch.setattr(api, "_gpu_alone_driver", stand_in)
        return stand_in
    return use


def run(graph, program, **options):
    sources = [int(graph.original_ids(np.array([0]))[0])]
    result = garaphpy.run(graph, program, mode="hybrid", sources=sources, threads=2,
                          gpu_memory=1 << 30, **options)
    reference = (bfs_scipy if program == "bfs" else sssp_scipy)(graph, [0])
    expected = np.asarray(reference, np.float64)
    if program == "bfs":
        expected[expected < 0] = np.inf
    values = np.asarray(result.values, np.float64)
    np.testing.assert_array_equal(values, expected)
    return result


def relay_entry(result):
    entries = [r.decisions["relay"] for r in result.iterations if "relay" in r.decisions]
    assert len(entries) <= 1
    return entries[0] if entries else None


@pytest.mark.parametrize("program", ["bfs", "sssp"])
@pytest.mark.parametrize("after", [1, 10])
def test_the_gpu_takes_the_rest_once_ready(grid, relayed, program, after, monkeypatch):
    monkeypatch.setattr(config, "HYBRID_LOOP_ITERATION_SECONDS", 0.0)
    monkeypatch.setattr(relay, "CHECK_SECONDS", 1e-9)      # a check after every level
    monkeypatch.setattr(relay, "FIRST_BATCH_STEPS", 1)
    stand_in = relayed(StandIn(wait_for=threading.Event()))
    steps = []

    def on_iteration(record):
        steps.append(record.iteration)
        if len(steps) == after:     # the set-up ends now, before the next check
            stand_in.wait_for.set()
            assert stand_in.made_event.wait(60)
            time.sleep(0.2)

    result = run(grid, program, on_iteration=on_iteration)
    assert result.mode == "hybrid" and result.plan.gpu_set_up["relay"] is True
    assert stand_in.thread.startswith("garaphpy-gpu-set-up")
    entry = relay_entry(result)
    assert entry is not None and entry["choice"] is True
    assert entry["iteration"] == after and entry["cpu_levels_timed"] is True
    assert entry["handed_over_bytes"] > 0
    taken = next(r for r in result.iterations if "relay" in r.decisions)
    assert taken.iteration == after
    assert result.num_iterations > after
    assert [r.iteration for r in result.iterations] == list(range(result.num_iterations))
    assert stand_in.closed.is_set()


def test_the_cpu_keeps_the_run_where_handing_it_over_does_not_pay(grid, relayed, monkeypatch):
    monkeypatch.setattr(config, "HYBRID_LOOP_ITERATION_SECONDS", 1.0)
    stand_in = relayed(StandIn())
    result = run(grid, "bfs")
    entry = relay_entry(result)
    assert entry is not None and entry["choice"] is False
    assert entry["handed_over_bytes"] == 0
    assert result.plan.gpu is None
    assert stand_in.closed.is_set()         # closed when the rule declined


def test_a_run_the_cpu_ends_first_does_not_wait_for_the_set_up(grid, relayed):
    stand_in = relayed(StandIn(delay=3.0))
    started = time.perf_counter()
    result = run(grid, "bfs")
    assert time.perf_counter() - started < 2.5
    assert relay_entry(result) is None
    assert all(r.mode == "cpu" for r in result.iterations)
    assert stand_in.closed.wait(10)         # closed on its own thread once made


def test_a_failed_set_up_fails_the_run_with_its_error(grid, relayed):
    relayed(StandIn(error=RuntimeError("no room on the device")))
    with pytest.raises(RuntimeError, match="no room on the device"):
        run(grid, "bfs")


def test_checkpoints_run_on_the_gpu_alone_not_relayed(grid, relayed, tmp_path):
    entry = {"choice": True, "whole_pulls": False, "passes": 1.0, "sparse_levels": 96.0,
             "storage_reads": None, "gpu_alone": True}
    assert set_up_choice.relays(dict(entry), api._checkpoints_asked(
        api.RunOptions(checkpoint_dir=tmp_path))) is False
    assert set_up_choice.relays(dict(entry), api._checkpoints_asked(api.RunOptions())) is True


@pytest.mark.gpu
@pytest.mark.parametrize("program", ["bfs", "sssp"])
def test_a_relayed_grid_run_equals_the_gpu_mode(grid, program):
    sources = [int(grid.original_ids(np.array([0]))[0])]
    garaphpy.run(grid, program, mode="gpu", sources=sources)        # a set-up measured
    gpu = garaphpy.run(grid, program, mode="gpu", sources=sources)
    hybrid = garaphpy.run(grid, program, mode="hybrid", sources=sources)
    np.testing.assert_array_equal(hybrid.values, gpu.values)
    if hybrid.plan.gpu_set_up is not None and hybrid.plan.gpu_set_up.get("relay"):
        entry = relay_entry(hybrid)
        if entry is not None and entry["choice"]:
            assert hybrid.plan.gpu is not None
            assert any(r.mode == "gpu" for r in hybrid.iterations)
