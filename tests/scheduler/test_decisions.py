"""Every switch of the engine, one pure function each (garaphpy.scheduler.decisions).

Each function is checked on both sides of its threshold with its threshold
read from config (tests patch config to move it), and a run's iteration
records must carry every decision it took with the inputs it was taken on.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.scheduler import decisions
from garaphpy.scheduler.policy import HybridPolicy
from garaphpy.scheduler.records import IterationRecord

from helpers import OutDegreeRank


# -- direction -----------------------------------------------------------------------------
@pytest.mark.parametrize("factor", [2.0, 4.0])
def test_direction_switches_at_one_over_factor_rho(monkeypatch, factor):
    monkeypatch.setattr(config, "NOTIFY_PULL_COST_FACTOR", factor)
    for rho in (1.0, 3.0):
        threshold = 1.0 / (factor * rho)
        assert decisions.choose_direction(threshold, rho) == "notify-pull"
        assert decisions.choose_direction(threshold * 1.001, rho) == "pull"
    assert decisions.choose_direction(0.0, 1.0, "pull") == "pull"
    assert decisions.choose_direction(1.0, 1.0, "notify-pull") == "notify-pull"


def test_active_fraction_and_the_hybrid_direction():
    assert decisions.active_fraction(5, 20) == 0.25
    assert decisions.active_fraction(5, 0) == 0.0
    assert decisions.iteration_direction("cpu", 0.01, 1.0) == "notify-pull"
    assert decisions.iteration_direction("hybrid", 0.01, 1.0) == "pull"


# -- dense or sparse notify ----------------------------------------------------------------
def test_dense_notify_above_vertices_over_factor(monkeypatch):
    monkeypatch.setattr(config, "NOTIFY_DENSE_FACTOR", 16)
    assert not decisions.dense_notify(100, 1600)
    assert decisions.dense_notify(101, 1600)
    assert not decisions.dense_notify(101, 1600, early_exit=True)
    monkeypatch.setattr(config, "NOTIFY_DENSE_FACTOR", 1)
    assert not decisions.dense_notify(101, 1600)


# -- the source-gather precompute ----------------------------------------------------------
@pytest.mark.parametrize("direction, synchronous, parameters, enabled, expected", [
    ("pull", True, {"src", "src_out_degree"}, True, True),
    ("pull", True, {"src_in_degree"}, True, True),
    ("pull", True, {"src"}, True, False),                         # one read either way
    ("pull", True, {"src", "src_out_degree", "weight"}, True, False),   # not source-side
    ("pull", True, {"src", "dst"}, True, False),
    ("notify-pull", True, {"src", "src_out_degree"}, True, False),
    ("pull", False, {"src", "src_out_degree"}, True, False),      # asynchronous
    ("pull", True, {"src", "src_out_degree"}, False, False),      # switched off
])
def test_one_precompute_rule(direction, synchronous, parameters, enabled, expected):
    assert decisions.precompute_source_gathers(direction, synchronous, frozenset(parameters),
                                               enabled) is expected


# -- the fused GPU launch --------------------------------------------------------------------
def test_fused_launch_needs_every_condition():
    fused = dict(resident=True, fuse_enabled=True, host_copies=False, synchronous=True,
                 checkpoints_after_pages=False, num_pages=3)
    assert decisions.fuse_gpu_launch(**fused)
    for key, value in (("resident", False), ("fuse_enabled", False), ("host_copies", True),
                       ("num_pages", 1)):
        assert not decisions.fuse_gpu_launch(**{**fused, key: value})
    # checkpoints after pages only matter to asynchronous runs
    assert decisions.fuse_gpu_launch(**{**fused, "checkpoints_after_pages": True})
    assert not decisions.fuse_gpu_launch(**{**fused, "checkpoints_after_pages": True,
                                            "synchronous": False})
    assert decisions.fuse_gpu_launch(**{**fused, "synchronous": False})


def test_only_synchronous_final_once_set_runs_from_disk_skip_settled_pages():
    facts = {"final_once_set": True, "synchronous": True, "resident": False, "selective": True,
             "reads_storage": True}
    assert decisions.gpu_settled_pages(**facts)
    for key, spoiler in (("final_once_set", False), ("synchronous", False),
                         ("resident", True), ("selective", False), ("reads_storage", False)):
        assert not decisions.gpu_settled_pages(**{**facts, key: spoiler})


def test_only_streamed_runs_that_copy_every_page_prefetch_the_next_copies():
    assert decisions.prefetch_next_copies(resident=False, selective=False)
    for key in ("resident", "selective"):
        assert not decisions.prefetch_next_copies(**{"resident": False, "selective": False,
                                                     key: True})





# -- alpha and the mode ----------------------------------------------------------------------
def test_paper_alpha_uses_the_configured_factor(monkeypatch):
    assert decisions.paper_alpha(0.1, 1.0, 3.0) == pytest.approx(0.2 * 3.0)
    assert decisions.paper_alpha(0.9, 1.0, 3.0) == pytest.approx(3.0)     # capped at a pull
    monkeypatch.setattr(config, "NOTIFY_PULL_COST_FACTOR", 4.0)
    assert decisions.paper_alpha(0.1, 1.0, 3.0) == pytest.approx(0.4 * 3.0)
    # the policy reads it too: the 2 of Equation 3 is not a literal
    policy = HybridPolicy(initial_ratio=3.0)
    assert policy.decide(0, 0.1, 1.0).alpha == pytest.approx(0.4 * 3.0)


def test_cpu_iteration_cost_and_the_mode():
    assert decisions.cpu_iteration_seconds(0.1, 0.3, 2.0, 1.0, 5.0, 0.5, 0.25) == \
        pytest.approx(0.5 + 0.8 + 0.25)
    assert decisions.cpu_iteration_seconds(0.5, 0.5, 2.0, 1.0, 1.5, 0.0, 0.0) == 1.5
    assert decisions.hybrid_mode(1.0) == "hybrid"
    assert decisions.hybrid_mode(0.99) == "cpu"
    assert decisions.hybrid_mode(None) == "cpu"
    assert decisions.hybrid_mode(2.0, threshold=3.0) == "cpu"
    assert decisions.hybrid_mode(0.0, forced="hybrid") == "hybrid"
    assert decisions.hybrid_mode(9.0, forced="cpu") == "cpu"


def test_take_page_tail_rule():
    assert decisions.take_page(None, 1.0, 0.0, 0.0)        # no rate yet: take
    assert decisions.take_page(1.0, None, 0.0, 0.0)
    assert decisions.take_page(1.0, 1.0, 0.0, 0.0)         # a tie takes
    assert not decisions.take_page(2.0, 1.0, 0.0, 0.0)
    assert decisions.take_page(2.0, 1.0, 0.0, 1.0)         # the other is busy for longer
    assert not decisions.take_page(1.0, 1.0, 0.5, 0.0)


# -- recording ---------------------------------------------------------------------------
def test_decide_records_the_choice_and_its_inputs_as_json():
    record = IterationRecord(0, "cpu", "pull", False, 0.1, 1.0, 1)
    choice = decisions.decide(record, "direction", decisions.choose_direction, f=0.1,
                              rho=np.float64(1.0), forced="auto")
    assert choice == "notify-pull"
    assert record.decisions["direction"] == {"f": 0.1, "rho": 1.0, "forced": "auto",
                                             "choice": "notify-pull"}
    decisions.note(record, "cpu_precompute", np.bool_(True),
                   gather_parameters=frozenset({"src_out_degree", "src"}))
    decisions.note(record, "pages", {"cpu": [np.int64(3)], "gpu": []}, declined=(False,))
    row = json.loads(json.dumps(record.as_dict()))
    assert row["decisions"]["cpu_precompute"] == {
        "gather_parameters": ["src", "src_out_degree"], "choice": True}
    assert row["decisions"]["pages"] == {"declined": [False], "choice": {"cpu": [3], "gpu": []}}
    assert row["decisions"]["direction"]["rho"] == 1.0


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(7)
    n, m = 400, 3000
    return garaphpy.Graph.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                      rng.integers(1, 10, m).astype(np.float64),
                                      max_shard_edges=500, max_page_bytes=20_000)


@pytest.mark.parametrize("priority", [False, True], ids=["frontier", "buckets"])
def test_records_carry_every_cpu_decision(graph, priority, monkeypatch):
    source = int(graph.original_ids([0])[0])
    result = api.execute(graph, "sssp", sources=[source], mode="cpu",
                         turned_off=() if priority else {"value_priority"})
    if priority:    # every iteration a bucket's notify-pull
        for record in result.iterations:
            assert record.decisions["direction"]["choice"] == record.direction == "notify-pull"
            assert record.decisions["value_priority"]["bucket_width"] > 0
            notify = record.decisions["dense_notify"]
            assert notify["choice"] == decisions.dense_notify(notify["active_out_edges"],
                                                              graph.num_vertices)
        json.dumps([r.as_dict() for r in result.iterations])
        return
    directions = {r.direction for r in result.iterations}
    assert directions == {"pull", "notify-pull"}
    for record in result.iterations:
        direction = record.decisions["direction"]
        assert direction["choice"] == record.direction
        assert direction["f"] == record.active_fraction and direction["rho"] == record.rho
        if record.direction == "notify-pull":
            notify = record.decisions["dense_notify"]
            assert notify["num_vertices"] == graph.num_vertices
            assert notify["choice"] == decisions.dense_notify(notify["active_out_edges"],
                                                              graph.num_vertices)
        else:
            assert record.decisions["cpu_precompute"]["choice"] is False     # src alone
    json.dumps([r.as_dict() for r in result.iterations])


def test_records_carry_the_precompute_decision(graph):
    result = garaphpy.run(graph, OutDegreeRank, mode="cpu", direction="pull")
    for record in result.iterations:
        precompute = record.decisions["cpu_precompute"]
        assert precompute["choice"] is True and record.gather_precomputed
        assert precompute["gather_parameters"] == {"src", "src_out_degree"}
        assert precompute["synchronous"] is True
