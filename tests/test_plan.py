"""The run plan (garaphpy.scheduler.plan): every run-constant choice made once.

Each choice is its rule in garaphpy.scheduler.decisions (tested in the
feature's own test file); here: the plan a run keeps, its two forms, and
what turning a choice off does to the choices made after it.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import garaphpy
from garaphpy import api
from garaphpy.scheduler.plan import CPU_CHOICES, RunPlan

from references import bfs_scipy


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(3)
    n, m = 500, 4000
    return garaphpy.Graph.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                      rng.integers(1, 9, m).astype(np.float64))


def test_a_run_keeps_its_plan_in_both_forms(graph):
    result = garaphpy.run(graph, "bfs", sources=[0], mode="cpu", threads=1)
    plan = result.plan
    assert isinstance(plan, RunPlan)
    assert (plan.mode, plan.execution, plan.threads) == ("cpu", "sync", 1)
    assert plan.cpu.early_exit and plan.cpu.settling_push and not plan.cpu.fused_pull
    row = json.loads(json.dumps(plan.as_dict()))
    assert set(CPU_CHOICES) <= set(row["cpu"])
    assert row["cpu"]["early_exit"] == {"final_once_set": True, "synchronous": True,
                                        "mode": "cpu", "choice": True}
    assert row["gpu"] is None and row["turned_off"] == []
    assert "early exit" in plan.describe()
    with pytest.raises(AttributeError):
        plan.cpu.early_exit = False         # frozen


def test_turning_a_choice_off_turns_off_those_made_from_it(graph):
    result = api.execute(graph, "bfs", sources=[0], mode="cpu", threads=1,
                         turned_off={"early_exit"})
    cpu = result.plan.cpu
    assert not (cpu.early_exit or cpu.settling_push or cpu.whole_settling_pull)
    assert cpu.entry("early_exit")["turned_off"] is True
    assert result.plan.turned_off == frozenset({"early_exit"})
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, graph.internal_ids([0])))
    assert not any("whole_settling_pull" in r.decisions for r in result.iterations)


def test_the_fused_pull_follows_the_precompute(graph):
    fused = garaphpy.run(graph, "pagerank", mode="cpu", threads=1).plan.cpu
    assert fused.source_precompute and fused.fused_pull and fused.float32_contributions
    plain = api.execute(graph, "pagerank", mode="cpu", threads=1,
                        turned_off={"source_precompute"}).plan.cpu
    assert not (plain.source_precompute or plain.fused_pull or plain.float32_contributions)


def test_an_unknown_choice_is_refused(graph):
    with pytest.raises(ValueError, match="turned_off"):
        api.execute(graph, "bfs", sources=[0], mode="cpu", turned_off={"early_exits"})
