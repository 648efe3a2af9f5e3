"""The hybrid dispatcher (Garaph section 5.1) on the CPU alone, with synthetic measurements.

What is tested, without a GPU and without real timings:

* :meth:`HybridPolicy.decide` with only a ratio (given by the user, or a
  probe without |E|): alpha = min(2 f rho, 1) * T_pull / T_GPU (Equation 3
  as is), CPU-only below the threshold and hybrid at or above it (the
  boundary, the cap at a full pull, rho > 1), no ratio yet -> CPU, a forced
  mode, a configurable threshold, every decision recorded with its inputs,
  and the argument checks;
* :meth:`HybridPolicy.decide` on measured costs in seconds,
  alpha = (c_0 + min(2 f rho T_notify, T_pull) + s_cpu) / (T_GPU + s_gpu),
  on hand-computed cases; its reduction to Equation 3 when c_0 = s = 0 and
  T_notify = T_pull; the synchronization seconds pushing the decision
  towards the processor whose copy of the vertex data is current;
* the updates: the start-up probe (:meth:`HybridPolicy.calibrate`, with and
  without |E|, keeping a given ratio), the smoothed per-edge rates, T_pull,
  T_GPU and the ratio after a hybrid iteration, a GPU-alone iteration and a
  CPU pull, T_notify after a CPU notify-pull (``(t_cpu - c_0) / min(2 f rho,
  1)``, smoothed from T_pull), c_0 as the cheapest CPU-only iteration, and
  observations that must change nothing;
* the tail rule (:meth:`HybridPolicy.should_take`) on hand-computed cases;
* :class:`PageQueue` in a deterministic discrete-event simulation of a GPU
  and a CPU with a fake clock: each page exactly once, the GPU from the
  front and the CPU from the back, the tail rule's makespan against the
  paper's greedy queue, declines, and two real threads racing on one queue;
* user policies (subclasses overriding ``decide`` and ``should_take``);
* ``garaphpy.run`` without a usable GPU: ``mode="hybrid"`` (the default)
  warns :class:`GpuFallbackWarning` once per process and runs on the CPU;
* the iteration records' dispatcher fields and their JSON lines.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
import warnings

import numpy as np
import pytest

import garaphpy
import garaphpy.api
import garaphpy.kernels.gpu
from garaphpy.errors import ConfigError
from garaphpy.output import write_iterations
from garaphpy.scheduler import decisions
from garaphpy.scheduler import policy as cost_policy
from garaphpy.scheduler.policy import Decision, HybridPolicy, Observation, PageQueue
from garaphpy.scheduler.records import IterationRecord
from helpers import policy_with_costs

# Rates and page sizes are powers of two (times small integers), so that the
# simulated times below are exact in floating point and the comparisons in
# the tail rule are not decided by rounding.
GPU_RATE = 2.0 ** -10          # seconds per edge
PAGE = 64                      # edges per page: 1/16 s on the GPU


def policy_with_rates(cpu_rate, gpu_rate, **options) -> HybridPolicy:
    """A policy whose start-up probe measured these seconds per edge."""
    policy = HybridPolicy(**options)
    policy.calibrate(1024, cpu_rate * 1024, 1024, gpu_rate * 1024)
    return policy


def state_of(policy: HybridPolicy) -> tuple:
    return (policy.cpu_seconds_per_edge, policy.gpu_seconds_per_edge, policy.ratio,
            policy.ratio_source, policy.t_pull, policy.t_notify, policy.t_gpu,
            policy.cpu_overhead)


# -- 1. the decision ---------------------------------------------------------------------

def test_public_names():
    assert garaphpy.HybridPolicy is HybridPolicy
    assert garaphpy.Decision is Decision
    assert garaphpy.GpuFallbackWarning is garaphpy.api.GpuFallbackWarning
    assert issubclass(garaphpy.GpuFallbackWarning, UserWarning)


@pytest.mark.parametrize("ratio, f, rho, alpha, mode", [
    (4.0, 0.125, 1.0, 1.0, "hybrid"),                 # 2 f rho ratio = 1 exactly: hybrid
    (4.0, 0.125 - 2.0 ** -20, 1.0, 1.0 - 2.0 ** -17, "cpu"),   # just below
    (4.0, 0.0625, 1.0, 0.5, "cpu"),
    (3.0, 0.9, 1.0, 3.0, "hybrid"),                    # 2 f = 1.8: capped at a full pull
    (3.0, 1.0, 1.0, 3.0, "hybrid"),
    (0.5, 1.0, 1.0, 0.5, "cpu"),                       # a GPU slower than the CPU
    (2.0, 0.125, 1.0, 0.5, "cpu"),
    (2.0, 0.125, 2.0, 1.0, "hybrid"),                  # pages on disk: rho raises alpha
    (2.0, 0.125, 8.0, 2.0, "hybrid"),                  # ... up to the cap
    (4.0, 0.0, 1.0, 0.0, "cpu"),                       # nothing active
])
def test_alpha_and_mode(ratio, f, rho, alpha, mode):
    policy = HybridPolicy(initial_ratio=ratio)
    decision = policy.decide(3, f, rho)
    assert decision.alpha == pytest.approx(alpha, rel=1e-15, abs=0.0)
    assert decision.alpha == min(2.0 * f * rho, 1.0) * ratio
    assert decision.mode == mode
    assert not decision.forced
    assert (decision.iteration, decision.active_fraction, decision.rho, decision.ratio,
            decision.ratio_source) == (3, f, rho, ratio, "given")


def test_no_ratio_yet_runs_on_the_cpu():
    policy = HybridPolicy()
    decision = policy.decide(0, 1.0, 1.0)
    assert (decision.mode, decision.alpha, decision.ratio, decision.forced) == \
        ("cpu", None, None, False)
    assert decision.ratio_source == "none"


def test_forced_mode_wins_over_alpha():
    hybrid = HybridPolicy(force="hybrid").decide(0, 1.0, 1.0)       # no ratio at all
    assert (hybrid.mode, hybrid.forced, hybrid.alpha) == ("hybrid", True, None)
    tiny = HybridPolicy(initial_ratio=0.01, force="hybrid").decide(0, 0.01, 1.0)
    assert (tiny.mode, tiny.forced) == ("hybrid", True)
    assert tiny.alpha == pytest.approx(0.0002)                       # still computed, recorded
    cpu = HybridPolicy(initial_ratio=100.0, force="cpu").decide(0, 1.0, 1.0)
    assert (cpu.mode, cpu.forced, cpu.alpha) == ("cpu", True, 100.0)


def test_threshold_is_configurable():
    # alpha = 2 * 0.2 * 4 = 1.6
    assert HybridPolicy(initial_ratio=4.0).decide(0, 0.2, 1.0).mode == "hybrid"
    assert HybridPolicy(initial_ratio=4.0, threshold=2.0).decide(0, 0.2, 1.0).mode == "cpu"
    assert HybridPolicy(initial_ratio=4.0, threshold=1.6).decide(0, 0.2, 1.0).mode == "hybrid"
    assert HybridPolicy(initial_ratio=0.5, threshold=0.25).decide(0, 1.0, 1.0).mode == "hybrid"


def test_every_decision_is_recorded_in_order_with_its_inputs():
    policy = HybridPolicy(initial_ratio=4.0)
    steps = [(0, 1.0, 1.0), (1, 0.05, 1.0), (2, 0.125, 1.0), (3, 0.01, 4.0)]
    returned = [policy.decide(*step) for step in steps]
    assert policy.decisions == returned
    assert [d.mode for d in policy.decisions] == ["hybrid", "cpu", "hybrid", "cpu"]
    for (iteration, f, rho), decision in zip(steps, policy.decisions):
        # only a ratio: no costs in seconds, and no synchronization priced
        assert decision.as_dict() == {
            "iteration": iteration, "active_fraction": f, "rho": rho, "ratio": 4.0,
            "alpha": min(2 * f * rho, 1.0) * 4.0, "mode": decision.mode, "forced": False,
            "ratio_source": "given", "cpu_seconds": None, "gpu_seconds": None,
            "cpu_sync_seconds": 0.0, "gpu_sync_seconds": 0.0, "pull_fraction": None,
            "gpu_loop": False, "gpu_dense": False, "covers": 1, "switch_credit": 0.0,
        "switched": False}
    json.dumps([d.as_dict() for d in policy.decisions])      # JSON-able

    # the ratio in force at each decision is the one recorded
    policy = HybridPolicy()
    policy.decide(0, 1.0, 1.0)
    policy.calibrate(100, 0.4, 100, 0.1)
    policy.decide(1, 1.0, 1.0)
    assert [(d.ratio, d.ratio_source, d.mode) for d in policy.decisions] == \
        [(None, "none", "cpu"), (4.0, "probe", "hybrid")]

    # with T_pull and T_GPU known the costs and the synchronization are recorded too:
    # CPU 0 + min(2 * 0.0625 * 4, 4) + 0.25 = 0.75 s, GPU 1 + 0.5 = 1.5 s
    policy = policy_with_costs(4.0, 1.0)
    decision = policy.decide(7, 0.0625, 1.0, cpu_sync_seconds=0.25, gpu_sync_seconds=0.5)
    assert policy.decisions == [decision]
    assert decision.as_dict() == {
        "iteration": 7, "active_fraction": 0.0625, "rho": 1.0, "ratio": 4.0, "alpha": 0.5,
        "mode": "cpu", "forced": False, "ratio_source": "probe", "cpu_seconds": 0.75,
        "gpu_seconds": 1.5, "cpu_sync_seconds": 0.25, "gpu_sync_seconds": 0.5,
        "pull_fraction": None, "gpu_loop": False, "gpu_dense": False, "covers": 1, "switch_credit": 0.0,
        "switched": False}
    json.dumps(decision.as_dict())

    # the iteration record's entry: every field, the mode as the choice
    expected = decision.as_dict()
    expected["choice"] = expected.pop("mode")
    assert decision.entry() == expected


# T_pull = 4 s, T_GPU = 2 s; every value a power of two times a small integer,
# so alpha is exact.  T_notify None: not measured yet, T_pull is used.
@pytest.mark.parametrize("f, rho, c0, t_notify, s_cpu, s_gpu, cpu, gpu, mode", [
    (0.125, 1.0, 0.0, None, 0.0, 0.0, 1.0, 2.0, "cpu"),        # 0.25 * 4
    (0.125, 1.0, 0.5, 8.0, 0.0, 0.0, 2.5, 2.0, "hybrid"),      # 0.5 + 0.25 * 8
    (0.125, 1.0, 0.5, 32.0, 0.0, 0.0, 4.5, 2.0, "hybrid"),     # 0.25 * 32 capped at T_pull
    (0.0625, 2.0, 0.25, 4.0, 0.5, 2.0, 1.75, 4.0, "cpu"),      # rho and both syncs
    (0.0, 1.0, 0.25, 4.0, 0.0, 0.0, 0.25, 2.0, "cpu"),         # nothing active: c_0 alone
    (1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 2.0, 2.0, "hybrid"),        # 2 f T_notify < T_pull; alpha 1
    (0.75, 1.0, 1.0, 8.0, 0.0, 0.0, 5.0, 2.0, "hybrid"),       # 2 f > 1: still capped at T_pull
])
def test_alpha_from_measured_costs(f, rho, c0, t_notify, s_cpu, s_gpu, cpu, gpu, mode):
    policy = policy_with_costs(4.0, 2.0)
    assert (policy.t_pull, policy.t_gpu, policy.t_notify, policy.cpu_overhead) == \
        (4.0, 2.0, None, 0.0)
    policy.cpu_overhead = c0
    policy.t_notify = t_notify
    decision = policy.decide(5, f, rho, cpu_sync_seconds=s_cpu, gpu_sync_seconds=s_gpu)
    assert decision.cpu_seconds == cpu
    assert decision.gpu_seconds == gpu
    assert decision.alpha == cpu / gpu
    assert (decision.cpu_sync_seconds, decision.gpu_sync_seconds) == (s_cpu, s_gpu)
    assert decision.mode == mode
    assert (decision.ratio, decision.ratio_source) == (2.0, "probe")     # T_pull / T_GPU


@pytest.mark.parametrize("t_notify", ["unset", "t_pull"])
@pytest.mark.parametrize("f", [0.0, 2.0 ** -10, 0.05, 0.1, 0.125, 0.3, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("rho", [1.0, 2.0, 8.0])
def test_cost_model_reduces_to_equation_3(f, rho, t_notify):
    """c_0 = 0, no synchronization and T_notify = T_pull: min(2 f rho, 1) T_pull / T_GPU."""
    t_pull, t_gpu = 3.0, 0.75 * 1.25                    # ratio 3.2
    measured = HybridPolicy()
    measured.calibrate(1000, t_pull, 1000, t_gpu, num_edges=1000)
    assert measured.cpu_overhead == 0.0
    assert measured.t_pull == pytest.approx(t_pull) and measured.t_gpu == pytest.approx(t_gpu)
    if t_notify == "t_pull":
        measured.t_notify = measured.t_pull
    else:
        assert measured.t_notify is None
    given = HybridPolicy(initial_ratio=t_pull / t_gpu)
    ours, paper = measured.decide(0, f, rho), given.decide(0, f, rho)
    equation_3 = min(2.0 * f * rho, 1.0) * t_pull / t_gpu
    assert ours.alpha == pytest.approx(equation_3, rel=1e-12, abs=1e-300)
    assert paper.alpha == pytest.approx(equation_3, rel=1e-12, abs=1e-300)
    assert ours.cpu_seconds == pytest.approx(min(2.0 * f * rho, 1.0) * t_pull, rel=1e-12,
                                             abs=1e-300)
    assert ours.gpu_seconds == pytest.approx(t_gpu, rel=1e-12)
    if abs(equation_3 - 1.0) > 1e-9:                     # off the boundary: the same choice
        assert ours.mode == paper.mode == ("hybrid" if equation_3 >= 1.0 else "cpu")


def test_with_only_a_ratio_the_synchronization_is_not_priced():
    """Without T_pull and T_GPU in seconds alpha is Equation 3 as is."""
    policy = HybridPolicy(initial_ratio=4.0)
    decision = policy.decide(0, 0.1, 1.0, cpu_sync_seconds=10.0, gpu_sync_seconds=3.0)
    assert decision.alpha == min(2 * 0.1 * 1.0, 1.0) * 4.0
    assert decision.mode == "cpu"
    assert (decision.cpu_seconds, decision.gpu_seconds) == (None, None)
    assert (decision.cpu_sync_seconds, decision.gpu_sync_seconds) == (10.0, 3.0)
    # and a probe without |E| gives rates but no times: the same
    probe = HybridPolicy()
    probe.calibrate(1024, 4.0, 1024, 1.0)
    assert probe.t_pull is None and probe.t_gpu is None
    assert probe.decide(0, 0.1, 1.0, cpu_sync_seconds=10.0).alpha == \
        min(2 * 0.1 * 1.0, 1.0) * 4.0


def test_synchronization_pushes_the_decision_towards_the_current_copy():
    policy = policy_with_costs(4.0, 1.0)                # T_pull 4 s, T_GPU 1 s, c_0 = 0
    # the GPU ran the last iteration: the CPU's copy must be brought up to date
    f = 3 / 32                                          # 2 f T_pull = 0.75 s
    assert policy.decide(0, f, 1.0).alpha == 0.75
    assert policy.decide(0, f, 1.0).mode == "cpu"
    behind = policy.decide(0, f, 1.0, cpu_sync_seconds=0.5)
    assert (behind.alpha, behind.mode, behind.cpu_seconds) == (1.25, "hybrid", 1.25)
    # a sync the GPU would need is no reason to leave the CPU
    assert policy.decide(0, f, 1.0, gpu_sync_seconds=0.25).mode == "cpu"
    # the CPU ran the last iteration: the GPU's copy must be brought up to date
    f = 0.125                                           # 2 f T_pull = 1 s: alpha 1, hybrid
    assert policy.decide(1, f, 1.0).mode == "hybrid"
    stale = policy.decide(1, f, 1.0, gpu_sync_seconds=0.25)
    assert (stale.alpha, stale.mode, stale.gpu_seconds) == (0.8, "cpu", 1.25)
    assert policy.decide(1, f, 1.0, cpu_sync_seconds=0.25).mode == "hybrid"


def test_a_switch_is_made_once_the_iterations_lost_pay_for_the_copy():
    # T_pull 4 s, T_GPU 1 s; f = 3/32: the CPU 0.75 s an iteration, the GPU 1 s
    policy = policy_with_costs(4.0, 1.0)
    f = 3 / 32
    first = policy.decide(0, f, 1.0, cpu_sync_seconds=0.5)      # alpha 1.25: stay
    assert (first.mode, first.switched, first.switch_credit) == ("hybrid", False, 0.25)
    second = policy.decide(1, f, 1.0, cpu_sync_seconds=0.5)     # 0.5 lost: the copy is paid
    assert (second.alpha, second.mode, second.switched) == (1.25, "cpu", True)
    assert second.switch_credit == 0.0 == policy.switch_credit
    # an iteration the CPU would not win clears the credit
    policy.decide(2, f, 1.0, cpu_sync_seconds=0.5)
    assert policy.switch_credit == 0.25
    policy.decide(3, 0.5, 1.0, cpu_sync_seconds=0.5)
    assert policy.switch_credit == 0.0
    assert policy.decide(4, f, 1.0, cpu_sync_seconds=0.5).mode == "hybrid"

    # back to the GPU: f = 1/4, the CPU 2 s an iteration, the GPU 1 s and a 1.5 s copy
    policy = policy_with_costs(4.0, 1.0)
    modes = [policy.decide(k, 0.25, 1.0, gpu_sync_seconds=1.5) for k in range(2)]
    assert [(d.alpha, d.mode, d.switched) for d in modes] == [(0.8, "cpu", False),
                                                               (0.8, "hybrid", True)]
    # both copies current, or a forced mode: no credit
    assert policy.decide(2, f, 1.0).switch_credit == 0.0
    forced = policy_with_costs(4.0, 1.0, force="hybrid")
    assert not any(forced.decide(k, f, 1.0, cpu_sync_seconds=0.5).switched for k in range(4))


@pytest.mark.parametrize("credit, staying, switched, copy, expected", [
    (0.0, 1.0, 0.5, 2.0, (False, 0.5)),
    (1.5, 1.0, 0.5, 2.0, (True, 0.0)),
    (1.5, 1.0, 1.0, 2.0, (False, 0.0)),     # no loss this iteration: the credit clears
    (0.0, 1.0, 2.0, 0.0, (False, 0.0)),
])
def test_switch_credit(credit, staying, switched, copy, expected):
    assert decisions.switch_credit(credit, staying, switched, copy) == expected


@pytest.mark.parametrize("options", [
    {"force": "gpu"}, {"force": "CPU"}, {"smoothing": 0}, {"smoothing": 0.0},
    {"smoothing": 2}, {"smoothing": -0.5}, {"initial_ratio": 0}, {"initial_ratio": -1.0},
])
def test_invalid_arguments_name_themselves(options):
    name = next(iter(options))
    with pytest.raises(ConfigError, match=name):
        HybridPolicy(**options)


def test_valid_edge_arguments():
    assert HybridPolicy(smoothing=1.0).smoothing == 1.0
    assert HybridPolicy(force=None, initial_ratio=1e-9).ratio == 1e-9


# -- 2. the updates -----------------------------------------------------------------------

def test_calibrate_sets_rates_and_the_probe_ratio():
    policy = HybridPolicy()
    policy.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.1)
    assert policy.cpu_seconds_per_edge == pytest.approx(4e-3)
    assert policy.gpu_seconds_per_edge == pytest.approx(1e-3)
    assert policy.ratio == pytest.approx(4.0)
    assert policy.ratio_source == "probe"


def test_calibrate_keeps_a_given_ratio():
    policy = HybridPolicy(initial_ratio=7.0)
    policy.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.1)
    assert (policy.ratio, policy.ratio_source) == (7.0, "given")
    assert policy.cpu_seconds_per_edge == pytest.approx(4e-3)     # the tail rule's rates
    assert policy.gpu_seconds_per_edge == pytest.approx(1e-3)
    assert policy.decide(0, 0.05, 1.0).alpha == pytest.approx(0.7)


def test_calibrate_without_a_gpu_measurement_leaves_no_ratio():
    policy = HybridPolicy()
    policy.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.0)
    assert policy.gpu_seconds_per_edge is None and policy.ratio is None
    assert policy.decide(0, 1.0, 1.0).mode == "cpu"


def test_calibrate_with_num_edges_sets_t_pull_and_t_gpu():
    policy = HybridPolicy()
    policy.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.1,
                     num_edges=1000)
    assert policy.t_pull == pytest.approx(4.0)            # 4e-3 s/edge * 1000
    assert policy.t_gpu == pytest.approx(1.0)             # 1e-3 s/edge * 1000
    assert policy.t_notify is None and policy.cpu_overhead == 0.0
    assert (policy.ratio, policy.ratio_source) == (pytest.approx(4.0), "probe")
    decision = policy.decide(0, 0.05, 1.0)
    assert decision.cpu_seconds == pytest.approx(0.4)     # 2 f T_pull
    assert decision.gpu_seconds == pytest.approx(1.0)
    assert decision.alpha == pytest.approx(0.4)
    # without |E| the probe gives the rates and the ratio only
    rates_only = HybridPolicy()
    rates_only.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.1)
    assert rates_only.t_pull is None and rates_only.t_gpu is None
    assert rates_only.ratio == pytest.approx(4.0)


def test_calibrate_with_num_edges_keeps_a_given_ratio():
    policy = HybridPolicy(initial_ratio=7.0)
    policy.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.1,
                     num_edges=1000)
    assert (policy.ratio, policy.ratio_source) == (7.0, "given")
    assert policy.t_gpu == pytest.approx(1.0)
    assert policy.t_pull == pytest.approx(7.0)            # ratio * T_GPU, not the probe's 4 s
    assert policy.cpu_seconds_per_edge == pytest.approx(4e-3)     # the tail rule's rates
    assert policy.gpu_seconds_per_edge == pytest.approx(1e-3)
    decision = policy.decide(0, 0.05, 1.0)
    assert decision.alpha == pytest.approx(0.7)           # as without |E|
    assert decision.cpu_seconds == pytest.approx(0.7)


def test_calibrate_with_num_edges_but_no_gpu_measurement_sets_no_times():
    policy = HybridPolicy()
    policy.calibrate(cpu_edges=200, cpu_seconds=0.8, gpu_edges=100, gpu_seconds=0.0,
                     num_edges=1000)
    assert policy.t_pull is None and policy.t_gpu is None and policy.ratio is None
    assert policy.decide(0, 1.0, 1.0).mode == "cpu"


def test_hybrid_observation_smooths_both_rates_and_the_ratio_follows_them():
    s = 0.25
    policy = HybridPolicy(smoothing=s)
    policy.calibrate(1000, 4.0, 1000, 1.0)                   # 4e-3 and 1e-3 s/edge: ratio 4
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, num_edges=1000, cpu_edges=200,
                               gpu_edges=800, cpu_seconds=0.2, gpu_seconds=0.8))
    # measured 1e-3 (CPU) and 1e-3 (GPU) s/edge
    cpu = (1 - s) * 4e-3 + s * 1e-3
    gpu = (1 - s) * 1e-3 + s * 1e-3
    assert policy.cpu_seconds_per_edge == pytest.approx(cpu)
    assert policy.gpu_seconds_per_edge == pytest.approx(gpu)
    assert policy.ratio_source == "measured"
    # the probe had no |E|, so T_pull and T_GPU start from this iteration's own
    # measurements (page time per edge times |E|, smoothed once, not the smoothed
    # rates smoothed again): 1 s each, ratio 1
    assert policy.t_pull == pytest.approx(0.2 / 200 * 1000)
    assert policy.t_gpu == pytest.approx(0.8 / 800 * 1000)
    assert policy.ratio == pytest.approx(1.0)


def test_hybrid_observation_sets_t_pull_and_t_gpu_from_the_page_rates():
    policy = policy_with_costs(4.0, 1.0, smoothing=1.0)
    # the CPU pulled 256 edges at 3/1024 s each, the GPU 768 at 2/1024 s each; the
    # iteration's whole GPU time is no GPU-alone time, since the CPU took pages
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, cpu_edges=256,
                               gpu_edges=768, cpu_seconds=0.75, gpu_seconds=1.5,
                               gpu_iteration_seconds=5.0))
    assert (policy.cpu_seconds_per_edge, policy.gpu_seconds_per_edge) == (3 / 1024, 2 / 1024)
    assert (policy.t_pull, policy.t_gpu) == (3.0, 2.0)
    assert (policy.ratio, policy.ratio_source) == (1.5, "measured")
    assert (policy.t_notify, policy.cpu_overhead) == (None, 0.0)   # no CPU-only iteration


def test_hybrid_observation_replaces_a_given_ratio_by_the_rates():
    policy = HybridPolicy(initial_ratio=100.0, smoothing=0.5)
    policy.calibrate(1000, 4.0, 1000, 1.0)
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1000, cpu_edges=500,
                               gpu_edges=500, cpu_seconds=2.0, gpu_seconds=0.5))
    assert policy.cpu_seconds_per_edge == pytest.approx(4e-3)
    assert policy.gpu_seconds_per_edge == pytest.approx(1e-3)
    assert policy.ratio == pytest.approx(4.0)
    assert policy.ratio_source == "measured"


def test_gpu_alone_observation_updates_the_gpu_rate_only():
    s = 0.5
    policy = policy_with_costs(4.0, 1.0, smoothing=s)      # 2^-8 and 2^-10 s/edge
    policy.cpu_overhead, policy.t_notify = 0.25, 2.0
    # a GPU-alone iteration: 1024 edges in 2 s busy, 2.5 s with launches and waits
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, gpu_edges=1024,
                               gpu_seconds=2.0, gpu_iteration_seconds=2.5))
    assert policy.gpu_seconds_per_edge == (1 - s) * 2.0 ** -10 + s * 2.0 / 1024
    assert policy.t_gpu == (1 - s) * 1.0 + s * 2.5         # the whole iteration's time
    # the CPU side is untouched
    assert policy.cpu_seconds_per_edge == 2.0 ** -8
    assert (policy.t_pull, policy.t_notify, policy.cpu_overhead) == (4.0, 2.0, 0.25)
    assert (policy.ratio, policy.ratio_source) == (4.0 / 1.75, "measured")

    # GPU pages without the whole iteration's time: T_GPU from the GPU rate times |E|
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, gpu_edges=512,
                               gpu_seconds=0.5))
    rate = (1 - s) * 1.5 / 1024 + s * 2.0 ** -10          # 1.25 / 1024
    assert policy.gpu_seconds_per_edge == rate
    assert policy.t_gpu == (1 - s) * 1.75 + s * 0.5 / 512 * 1024   # this iteration's pages
    assert policy.t_gpu == 1.375
    assert policy.cpu_seconds_per_edge == 2.0 ** -8
    assert (policy.t_pull, policy.t_notify, policy.cpu_overhead) == (4.0, 2.0, 0.25)
    assert policy.ratio == 4.0 / 1.375


# c_0 = 0.01 s, T_pull = 4 s, T_GPU = 1 s, smoothing 0.5; T_notify starts at T_pull:
# T_notify = 0.5 * 4 + 0.5 * (t_cpu - c_0) / min(2 f rho, 1)
# alpha    = (c_0 + min(2 f rho T_notify, T_pull)) / T_GPU
@pytest.mark.parametrize("f, rho, t_cpu, t_notify, alpha", [
    (0.1, 1.0, 0.06, 0.5 * 4 + 0.5 * 0.05 / 0.2, 0.01 + 0.2 * 2.125),
    (0.05, 4.0, 0.06, 0.5 * 4 + 0.5 * 0.05 / 0.4, 0.01 + 0.4 * 2.0625),   # rho counts
    (0.8, 1.0, 0.06, 0.5 * 4 + 0.5 * 0.05, 0.01 + 1.6 * 2.025),           # share capped at 1
])
def test_notify_pull_observation_moves_t_notify_through_the_cost_model(f, rho, t_cpu,
                                                                         t_notify, alpha):
    s = 0.5
    policy = policy_with_costs(4.0, 1.0, smoothing=s)
    policy.cpu_overhead = 0.01
    policy.observe(Observation("cpu", "notify-pull", f, rho, num_edges=1024,
                               cpu_edges=150, cpu_seconds=t_cpu))
    share = min(2 * f * rho, 1.0)
    assert policy.t_notify == pytest.approx((1 - s) * 4.0 + s * (t_cpu - 0.01) / share)
    assert policy.t_notify == pytest.approx(t_notify)
    assert policy.cpu_overhead == 0.01                      # a dearer iteration: c_0 stays
    # a notify-pull measures no pull: T_pull, T_GPU, the ratio and the rates stay
    assert (policy.t_pull, policy.t_gpu, policy.ratio) == (4.0, 1.0, 4.0)
    assert policy.cpu_seconds_per_edge == 2.0 ** -8
    assert policy.gpu_seconds_per_edge == 2.0 ** -10
    # and the next decision prices the CPU with T_notify, scaled to its f
    decision = policy.decide(1, f, rho)
    assert decision.alpha == pytest.approx(alpha)
    assert decision.cpu_seconds == pytest.approx(0.01 + min(2 * f * rho * policy.t_notify,
                                                            4.0))


def test_notify_pull_with_smoothing_one_is_the_measurement():
    policy = policy_with_costs(4.0, 1.0, smoothing=1.0)
    policy.cpu_overhead = 0.01
    policy.observe(Observation("cpu", "notify-pull", 0.1, 1.0, 1024, cpu_edges=150,
                               cpu_seconds=0.06))
    assert policy.t_notify == pytest.approx(0.25)            # (0.06 - 0.01) / 0.2
    # alpha of the same iteration again: (c_0 + 2 f T_notify) / T_GPU = t_cpu / T_GPU
    assert policy.decide(1, 0.1, 1.0).alpha == pytest.approx(0.06)
    # and of one twice as large: 0.01 + 0.4 * 0.25
    assert policy.decide(2, 0.2, 1.0).alpha == pytest.approx(0.11)
    # a second notify-pull replaces it (smoothing 1), from the same c_0
    policy.observe(Observation("cpu", "notify-pull", 0.05, 1.0, 1024, cpu_edges=80,
                               cpu_seconds=0.11))
    assert policy.t_notify == pytest.approx(1.0)             # (0.11 - 0.01) / 0.1


def test_notify_pull_without_t_pull_starts_t_notify_from_the_measurement():
    policy = HybridPolicy(smoothing=0.5)
    policy.calibrate(1024, 4.0, 1024, 1.0)                   # no |E|: no T_pull, no T_GPU
    policy.cpu_overhead = 0.01
    policy.observe(Observation("cpu", "notify-pull", 0.1, 1.0, 1024, cpu_edges=150,
                               cpu_seconds=0.06))
    assert policy.t_notify == pytest.approx(0.25)            # nothing to smooth it with
    # without T_pull and T_GPU in seconds the decision stays Equation 3 on the ratio
    assert (policy.ratio, policy.ratio_source) == (4.0, "probe")
    assert policy.decide(1, 0.1, 1.0).alpha == min(2 * 0.1, 1.0) * 4.0


def test_cpu_only_observations_set_c0_to_the_cheapest():
    policy = policy_with_costs(4.0, 1.0, smoothing=0.5)
    assert policy.cpu_overhead == 0.0                        # none measured yet
    steps = [
        (Observation("cpu", "pull", 1.0, 1.0, 1024, cpu_edges=1024, cpu_seconds=3.0), 3.0),
        (Observation("cpu", "notify-pull", 0.01, 1.0, 1024, cpu_edges=10,
                     cpu_seconds=0.5), 0.5),
        (Observation("cpu", "notify-pull", 0.2, 1.0, 1024, cpu_edges=200,
                     cpu_seconds=1.5), 0.5),                 # dearer: c_0 stays
        (Observation("cpu", "pull", 1.0, 1.0, 1024, cpu_edges=1024, cpu_seconds=3.5), 0.5),
        # hybrid pages are no CPU-only iteration, however cheap
        (Observation("hybrid", "pull", 1.0, 1.0, 1024, cpu_edges=256, gpu_edges=768,
                     cpu_seconds=0.25, gpu_seconds=0.75), 0.5),
        # no edges, or no time: nothing measured
        (Observation("cpu", "notify-pull", 0.01, 1.0, 0, cpu_seconds=0.125), 0.5),
        (Observation("cpu", "notify-pull", 0.01, 1.0, 1024), 0.5),
    ]
    for observation, c0 in steps:
        policy.observe(observation)
        assert policy.cpu_overhead == c0
    # c_0 is paid whatever f: with nothing active alpha is c_0 / T_GPU
    assert policy.t_gpu == 1.0
    decision = policy.decide(9, 0.0, 1.0)
    assert (decision.cpu_seconds, decision.alpha) == (0.5, 0.5)


def test_cpu_pull_observation_updates_the_cpu_rate():
    s = 0.5
    policy = policy_with_costs(4.0, 1.0, smoothing=s)
    policy.observe(Observation("cpu", "pull", 1.0, 1.0, 1024, cpu_edges=1024,
                               cpu_seconds=2.0))
    assert policy.cpu_seconds_per_edge == (1 - s) * 2.0 ** -8 + s * 2.0 / 1024
    assert policy.gpu_seconds_per_edge == 2.0 ** -10
    assert policy.t_pull == (1 - s) * 4.0 + s * 2.0         # the whole pull's time: 3 s
    assert policy.t_gpu == 1.0 and policy.t_notify is None
    assert policy.cpu_overhead == 2.0                        # the cheapest CPU-only iteration
    assert (policy.ratio, policy.ratio_source) == (3.0, "measured")


def test_cpu_pull_before_any_gpu_measurement_sets_the_rate_not_a_ratio():
    policy = HybridPolicy()
    policy.observe(Observation("cpu", "pull", 1.0, 1.0, 1000, cpu_edges=1000,
                               cpu_seconds=2.0))
    assert policy.cpu_seconds_per_edge == pytest.approx(2e-3)
    assert policy.ratio is None and policy.ratio_source == "none"
    assert policy.decide(0, 1.0, 1.0).mode == "cpu"


@pytest.mark.parametrize("observation", [
    Observation("hybrid", "pull", 1.0, 1.0, num_edges=0, cpu_seconds=0.5, gpu_seconds=0.5),
    Observation("cpu", "pull", 1.0, 1.0, num_edges=0, cpu_seconds=0.5),
    Observation("cpu", "notify-pull", 0.2, 1.0, num_edges=0, cpu_seconds=0.5),
    Observation("cpu", "notify-pull", 0.0, 1.0, num_edges=1000, cpu_seconds=0.0),
])
def test_observations_without_edges_change_nothing(observation):
    policy = HybridPolicy(smoothing=0.5)
    policy.calibrate(1000, 4.0, 1000, 1.0)
    before = state_of(policy)
    policy.observe(observation)
    assert state_of(policy) == before


@pytest.mark.parametrize("observation", [
    pytest.param(Observation("hybrid", "pull", 1.0, 1.0, num_edges=1024),   # no page measured
                 id="hybrid"),
    pytest.param(Observation("cpu", "pull", 1.0, 1.0, num_edges=1024), id="cpu-pull"),
    pytest.param(Observation("cpu", "notify-pull", 0.1, 1.0, num_edges=1024),
                 id="cpu-notify-pull"),
])
def test_an_observation_measuring_nothing_keeps_the_ratio(observation):
    """Nothing was measured, so the cost model the last iterations gave must stay."""
    policy = policy_with_costs(4.0, 1.0, smoothing=1.0)
    policy.cpu_overhead = 0.01
    policy.observe(Observation("cpu", "notify-pull", 0.1, 1.0, 1024, cpu_edges=150,
                               cpu_seconds=0.06))
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, gpu_edges=1024,
                               gpu_seconds=1.0, gpu_iteration_seconds=1.25))
    assert policy.t_notify == pytest.approx(0.25)
    assert (policy.t_pull, policy.t_gpu, policy.ratio) == (4.0, 1.25, 3.2)
    before = state_of(policy)
    policy.observe(observation)
    assert state_of(policy) == before


def test_an_observation_measuring_nothing_keeps_a_given_ratio():
    policy = HybridPolicy(initial_ratio=7.0)
    policy.calibrate(1024, 4.0, 1024, 1.0, num_edges=1024)
    assert (policy.ratio, policy.ratio_source, policy.t_pull) == (7.0, "given", 7.0)
    before = state_of(policy)
    policy.observe(Observation("cpu", "pull", 1.0, 1.0, num_edges=1024))
    assert state_of(policy) == before


# -- 3. the tail rule -----------------------------------------------------------------------

def test_slow_cpu_must_not_take_the_last_page():
    policy = policy_with_rates(20 * GPU_RATE, GPU_RATE)
    # CPU: 64 edges take 1.25 s; the GPU, 0.5 s of backlog, needs 1/16 s more
    assert not policy.should_take("cpu", PAGE, 0.0, 0.5, PAGE)
    # nor the last of three pages: the GPU does all three by 0.5 + 3/16 s
    assert not policy.should_take("cpu", PAGE, 0.0, 0.5, 3 * PAGE)


def test_slow_cpu_takes_a_page_when_the_gpu_is_far_behind():
    policy = policy_with_rates(20 * GPU_RATE, GPU_RATE)
    assert policy.should_take("cpu", PAGE, 0.0, 2.0, PAGE)             # 1.25 <= 2.0625
    # the boundary: finishing at the same time takes it
    assert policy.should_take("cpu", PAGE, 0.0, 1.25 - 1 / 16, PAGE)
    assert not policy.should_take("cpu", PAGE, 0.0, 1.25 - 1 / 16 - 2.0 ** -20, PAGE)
    # its own backlog counts
    assert not policy.should_take("cpu", PAGE, 1.0, 2.0, PAGE)
    # the GPU's view: it takes the page unless the CPU does everything sooner
    assert policy.should_take("gpu", PAGE, 0.0, 0.0, PAGE)
    assert not policy.should_take("gpu", PAGE, 10.0, 0.0, PAGE)


def test_tail_rule_off_always_takes():
    policy = policy_with_rates(20 * GPU_RATE, GPU_RATE, tail_rule=False)
    assert policy.should_take("cpu", PAGE, 100.0, 0.0, PAGE)
    assert policy.should_take("gpu", PAGE, 100.0, 0.0, PAGE)


def test_unknown_rates_always_take():
    policy = HybridPolicy(initial_ratio=20.0)          # a ratio, but no measured rates
    assert policy.should_take("cpu", PAGE, 100.0, 0.0, PAGE)
    half = HybridPolicy()
    half.calibrate(PAGE, 1.0, 0, 0.0)                  # only the CPU's rate
    assert half.should_take("cpu", PAGE, 100.0, 0.0, PAGE)
    assert half.should_take("gpu", PAGE, 100.0, 0.0, PAGE)


# -- 4. the page queue, simulated ----------------------------------------------------------

class FakeClock:
    """A clock the simulation sets: ``clock()`` returns ``clock.now``."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulate(page_edges, order, policy, rates=None, first="gpu", prices=None,
             **queue_options):
    """Two processors take pages from one queue, each asking when it is free.

    A processor working at ``rates[p]`` seconds per edge (or taking
    ``prices[p][page]`` seconds for a page) asks for the next page the
    moment it finishes the last one (the earlier free one first; ties:
    ``first``), and stops at its first None.  ``queue_options`` go to the
    queue.  Returns the queue, the makespan and the pages in the order they
    were taken, as (processor, page).
    """
    clock = FakeClock()
    queue = PageQueue(page_edges, order, policy, clock=clock, **queue_options)
    preference = [first, "cpu" if first == "gpu" else "gpu"]
    free_at = {"cpu": 0.0, "gpu": 0.0}
    done = {"cpu": False, "gpu": False}
    log = []
    while not all(done.values()):
        processor = min((p for p in preference if not done[p]), key=free_at.__getitem__)
        clock.now = free_at[processor]
        page = queue.take(processor)
        if page is None:
            queue.finished(processor)
            done[processor] = True
            continue
        log.append((processor, page))
        free_at[processor] += (page_edges[page] * rates[processor] if prices is None
                               else prices[processor][page])
    return queue, max(free_at.values()), log


def assert_each_page_once(queue, log, order):
    taken = queue.taken["gpu"] + queue.taken["cpu"]
    assert sorted(taken) == sorted(order)
    assert sorted(page for _, page in log) == sorted(order)
    assert not queue.pending and queue.queued_edges == 0
    # the GPU from the front, the CPU from the back
    gpu, cpu = queue.taken["gpu"], queue.taken["cpu"]
    assert gpu == list(order[:len(gpu)])
    assert cpu == list(order[::-1][:len(cpu)])


# (ids other than a bare "gpu": conftest skips tests with a "gpu" keyword)
@pytest.mark.parametrize("first", ["gpu", "cpu"], ids=["gpu-asks-first", "cpu-asks-first"])
def test_slow_cpu_leaves_six_pages_to_the_gpu(first):
    rates = {"gpu": GPU_RATE, "cpu": 20 * GPU_RATE}
    pages, order = [PAGE] * 6, [3, 0, 5, 1, 4, 2]

    tail = policy_with_rates(rates["cpu"], rates["gpu"])
    queue, makespan, log = simulate(pages, order, tail, rates, first)
    assert_each_page_once(queue, log, order)
    assert queue.taken["cpu"] == []
    assert queue.declined == {"cpu": True, "gpu": False}
    assert makespan == 6 / 16

    greedy = policy_with_rates(rates["cpu"], rates["gpu"], tail_rule=False)
    queue, greedy_makespan, log = simulate(pages, order, greedy, rates, first)
    assert_each_page_once(queue, log, order)
    assert queue.taken["cpu"] == [2]                        # grabs the back page at t = 0 ...
    assert greedy_makespan == 1.25                          # ... and finishes long after the GPU
    assert makespan < greedy_makespan


def test_moderately_slow_cpu_takes_what_the_rule_allows():
    rates = {"gpu": GPU_RATE, "cpu": 4 * GPU_RATE}          # a page: 1/16 s GPU, 1/4 s CPU
    pages, order = [PAGE] * 20, list(range(20))
    queue, makespan, log = simulate(pages, order, policy_with_rates(4 * GPU_RATE, GPU_RATE),
                                    rates)
    assert_each_page_once(queue, log, order)
    # 20 pages: the GPU does 16 in 1 s while the CPU does 4, both done at 1 s
    assert queue.taken["cpu"] == [19, 18, 17, 16]
    assert makespan == 1.0
    greedy = policy_with_rates(4 * GPU_RATE, GPU_RATE, tail_rule=False)
    _, greedy_makespan, _ = simulate(pages, order, greedy, rates)
    assert makespan <= greedy_makespan


@pytest.mark.parametrize("seed", range(20))
def test_tail_rule_never_loses_to_the_greedy_queue(seed):
    """With exact rate estimates both queues agree until the first decline, and
    a decline happens only when taking would end later than the other
    processor finishing everything: the tail rule's makespan is never worse."""
    rng = random.Random(seed)
    pages = [rng.choice([16, 32, 64, 128, 256]) for _ in range(rng.randint(1, 30))]
    order = list(range(len(pages)))
    rng.shuffle(order)
    rates = {"gpu": GPU_RATE, "cpu": GPU_RATE * rng.choice([0.25, 0.5, 1, 2, 3, 8, 20, 64])}
    first = rng.choice(["gpu", "cpu"])
    tail = policy_with_rates(rates["cpu"], rates["gpu"])
    queue, makespan, log = simulate(pages, order, tail, rates, first)
    assert_each_page_once(queue, log, order)
    greedy = policy_with_rates(rates["cpu"], rates["gpu"], tail_rule=False)
    greedy_queue, greedy_makespan, greedy_log = simulate(pages, order, greedy, rates, first)
    assert_each_page_once(greedy_queue, greedy_log, order)
    assert makespan <= greedy_makespan
    if any(queue.declined.values()) and greedy_log != log:
        assert makespan < greedy_makespan


@pytest.mark.parametrize("count", [10, 7, 1])
def test_equal_speeds_split_the_pages_evenly(count):
    rates = {"gpu": GPU_RATE, "cpu": GPU_RATE}
    pages, order = [PAGE] * count, list(range(count))
    queue, makespan, log = simulate(pages, order, policy_with_rates(GPU_RATE, GPU_RATE), rates)
    assert_each_page_once(queue, log, order)
    assert abs(len(queue.taken["gpu"]) - len(queue.taken["cpu"])) <= 1
    assert makespan == (count + 1) // 2 / 16


def test_a_processor_that_declined_gets_none_from_then_on():
    clock = FakeClock()
    policy = policy_with_rates(20 * GPU_RATE, GPU_RATE)
    queue = PageQueue([PAGE] * 6, range(6), policy, clock=clock)
    assert queue.take("gpu") == 0
    assert queue.take("cpu") is None
    assert queue.declined["cpu"]
    # even where the rule would now let it take (no rule at all, the GPU far behind)
    policy.tail_rule = False
    clock.now = 100.0
    queue.busy_until["gpu"] = 1000.0
    assert queue.take("cpu") is None
    assert queue.taken["cpu"] == [] and len(queue.pending) == 5
    assert [queue.take("gpu") for _ in range(6)] == [1, 2, 3, 4, 5, None]


class Declines(HybridPolicy):
    """A policy whose tail rule always says no."""

    def should_take(self, processor, page_edges, own_backlog, other_backlog, queued_edges):
        return False


@pytest.mark.parametrize("declining, remaining", [("cpu", "gpu"), ("gpu", "cpu")])
def test_after_the_other_declined_the_remaining_one_takes_everything(declining, remaining):
    queue = PageQueue([PAGE] * 5, range(5), Declines(), clock=FakeClock())
    assert queue.take(declining) is None
    expected = [0, 1, 2, 3, 4] if remaining == "gpu" else [4, 3, 2, 1, 0]
    assert [queue.take(remaining) for _ in range(6)] == expected + [None]
    assert queue.taken[remaining] == expected and queue.taken[declining] == []


def test_busy_until_follows_the_estimates_and_finished_clears_it():
    clock = FakeClock()
    queue = PageQueue([PAGE, 2 * PAGE, PAGE], [0, 1, 2],
                      policy_with_rates(2 * GPU_RATE, GPU_RATE), clock=clock)
    assert queue.queued_edges == 4 * PAGE
    assert queue.take("gpu") == 0 and queue.busy_until["gpu"] == 1 / 16
    assert queue.take("gpu") == 1 and queue.busy_until["gpu"] == 3 / 16   # queued behind
    assert queue.take("cpu") == 2 and queue.busy_until["cpu"] == 1 / 8
    assert queue.queued_edges == 0
    clock.now = 0.1
    queue.finished("gpu")
    assert queue.busy_until["gpu"] == 0.1
    assert queue.take("gpu") is None and queue.take("cpu") is None


def test_two_threads_take_every_page_exactly_once():
    count = 200
    order = list(range(count))
    random.Random(1).shuffle(order)
    queue = PageQueue([PAGE] * count, order, HybridPolicy())     # no rates: always take
    got = {"cpu": [], "gpu": []}
    start = threading.Barrier(2)

    def worker(processor, seed):
        rng = random.Random(seed)
        start.wait()
        while (page := queue.take(processor)) is not None:
            got[processor].append(page)
            time.sleep(rng.uniform(0.0, 2e-4))
        queue.finished(processor)

    threads = [threading.Thread(target=worker, args=(p, i)) for i, p in
               enumerate(("gpu", "cpu"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(got["gpu"] + got["cpu"]) == list(range(count))
    assert got == queue.taken
    assert got["gpu"] == order[:len(got["gpu"])]
    assert got["cpu"] == order[::-1][:len(got["cpu"])]
    assert got["gpu"] and got["cpu"]


# -- 4b. pages priced one by one, and whether the CPU joins ----------------------

# eight pages: four kept on the GPU (1/16 s each), four streamed (their copy: 1/2 s each);
# the CPU pulls any page in 1/4 s
KEPT, STREAMED = [0, 1, 2, 3], [4, 5, 6, 7]
PRICES = {"cpu": [0.25] * 8, "gpu": [1 / 16] * 4 + [0.5] * 4}


def test_a_streamed_page_costs_the_gpu_at_least_its_copy():
    policy = policy_with_rates(4 * GPU_RATE, GPU_RATE)
    assert policy.page_seconds("gpu", PAGE) == 1 / 16
    assert policy.page_seconds("gpu", PAGE, bus_bytes=1024, bus_bytes_per_second=2048) == 0.5
    # a copy faster than the pull: the pull
    assert policy.page_seconds("gpu", PAGE, bus_bytes=64, bus_bytes_per_second=2048) == 1 / 16
    # the CPU reads host memory: no bus
    assert policy.page_seconds("cpu", PAGE, bus_bytes=1024, bus_bytes_per_second=2048) == 0.25
    assert HybridPolicy().page_seconds("gpu", PAGE, 1024, 2048) is None


def simulate_priced(prices, order, policy, **queue_options):
    """:func:`simulate` with each page taking ``prices[processor][page]`` seconds."""
    queue, makespan, _ = simulate([PAGE] * len(order), order, policy, prices=prices,
                                  **queue_options)
    return queue, makespan


def test_a_page_goes_where_it_finishes_first():
    # the rates a blended estimate would use: 1/16 s a page on the GPU, 1/4 on the CPU
    policy = policy_with_rates(4 * GPU_RATE, GPU_RATE)
    order = KEPT + STREAMED
    priced, makespan = simulate_priced(PRICES, order, policy, page_seconds=PRICES,
                                       gpu_pages=KEPT)
    # the GPU: its four kept pages by 1/4 s, then page 4 by 3/4 s; the CPU pages 7, 6, 5
    assert priced.taken == {"gpu": [0, 1, 2, 3, 4], "cpu": [7, 6, 5]}
    assert makespan == 0.75
    blended, blended_makespan = simulate_priced(PRICES, order, policy, gpu_pages=KEPT)
    # priced by edges alone the streamed pages look as cheap as the kept ones: the CPU
    # stops after page 7, and the GPU copies 4, 5 and 6 one after another
    assert blended.taken["cpu"] == [7]
    assert blended_makespan == 1.75
    assert makespan < blended_makespan


def test_pages_kept_on_the_gpu_never_go_to_the_cpu():
    fast_cpu = {"cpu": [1 / 64] * 8, "gpu": PRICES["gpu"]}
    policy = policy_with_rates(GPU_RATE / 4, GPU_RATE)
    queue, _ = simulate_priced(fast_cpu, KEPT + STREAMED, policy, page_seconds=fast_cpu,
                               gpu_pages=KEPT)
    assert queue.taken["cpu"] == [7, 6, 5, 4]
    assert queue.taken["gpu"] == KEPT
    assert queue.declined["cpu"]


@pytest.mark.parametrize("gpu_prices, join, expected", [
    # the split: the CPU takes 7, 6, 5 (3/4 s) while the GPU does the rest (3/4 s)
    (PRICES["gpu"], 0.1, {"choice": True, "cpu_pages": 3, "split_seconds": 0.85}),
    (PRICES["gpu"], 2.0, {"choice": False, "cpu_pages": 3, "split_seconds": 2.75}),
    # every page kept: the CPU would take one page (1/4 s) beside 7/16 s of the GPU's
    ([1 / 16] * 8, 0.0, {"choice": True, "cpu_pages": 1, "split_seconds": 7 / 16}),
    ([1 / 16] * 8, 0.125, {"choice": False, "cpu_pages": 1, "split_seconds": 9 / 16}),
])
def test_the_cpu_joins_only_when_the_split_pays_for_joining(gpu_prices, join, expected):
    policy = policy_with_rates(4 * GPU_RATE, GPU_RATE)
    plan = policy.plan_join(PRICES["cpu"], gpu_prices, None, join)
    alone = sum(gpu_prices)
    assert plan == {**expected, "gpu_alone_seconds": alone, "join_seconds": join}
    # a measured GPU-alone iteration replaces the sum of the pages
    assert policy.plan_join(PRICES["cpu"], gpu_prices, 100.0, join)["choice"] is True
    assert policy.plan_join(PRICES["cpu"], gpu_prices, 0.01, join)["choice"] is False


@pytest.mark.parametrize("cpu_overhead, expected", [
    (0.0, {"choice": True, "cpu_pages": 2, "split_seconds": 0.5}),
    # the CPU's fixed cost first: one page fits before the GPU's rest ends
    (0.6, {"choice": True, "cpu_pages": 1, "split_seconds": 0.85}),
    # c_0 alone is as long as the GPU's whole iteration: the CPU stays out
    (1.0, {"choice": False, "cpu_pages": 0, "split_seconds": 1.0}),
])
def test_the_cpu_joins_after_its_fixed_cost(cpu_overhead, expected):
    policy = HybridPolicy()
    policy.cpu_overhead = cpu_overhead
    plan = policy.plan_join([0.25] * 4, [0.25] * 4, None, 0.0)
    assert plan["split_seconds"] == pytest.approx(expected.pop("split_seconds"))
    assert {name: plan[name] for name in expected} == expected


def test_the_cpu_never_takes_every_page_of_a_joined_iteration():
    plan = HybridPolicy().plan_join([0.001] * 3, [1.0] * 3, None, 0.0)
    assert plan["cpu_pages"] == 2 and plan["choice"]
    assert HybridPolicy().plan_join([0.001], [1.0], None, 0.0)["choice"] is False


def test_joining_costs_are_learnt_from_iterations_both_ran():
    policy = policy_with_costs(4.0, 2.0)
    assert policy.join_seconds is None
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, cpu_edges=64, gpu_edges=960,
                               cpu_seconds=0.25, gpu_seconds=1.875, join_seconds=0.5))
    assert policy.join_seconds == 0.5
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, gpu_edges=1024,
                               gpu_seconds=2.0, gpu_iteration_seconds=2.0))
    assert policy.join_seconds == 0.5          # a GPU-alone iteration says nothing of it
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, cpu_edges=64, gpu_edges=960,
                               cpu_seconds=0.25, gpu_seconds=1.875, join_seconds=1.0))
    assert policy.join_seconds == policy.smooth(0.5, 1.0)


# -- 5. policies of one's own ----------------------------------------------------------------

class Alternating(HybridPolicy):
    """CPU-only on even iterations, hybrid on odd ones, whatever alpha says."""

    def decide(self, iteration, active_fraction, rho):
        decision = super().decide(iteration, active_fraction, rho)
        decision.mode = "hybrid" if iteration % 2 else "cpu"
        decision.forced = True
        return decision


class SmallPagesOnCpu(HybridPolicy):
    """The CPU takes only pages of at most ``limit`` edges; the GPU takes anything.

    ``should_take`` sees the page's edges, not its index, and the queue offers
    the CPU always its back page: with the pages ordered big first, the CPU
    takes the small ones from the back and stops at the first big one.
    """

    limit = 32

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls = []

    def should_take(self, processor, page_edges, own_backlog, other_backlog, queued_edges):
        self.calls.append((processor, page_edges, queued_edges))
        return processor == "gpu" or page_edges <= self.limit


def test_a_replaced_decide_is_followed_and_recorded():
    policy = Alternating(initial_ratio=100.0)
    modes = [policy.decide(i, 1.0, 1.0).mode for i in range(6)]
    assert modes == ["cpu", "hybrid"] * 3
    assert [d.mode for d in policy.decisions] == modes
    assert all(d.alpha == 100.0 and d.forced for d in policy.decisions)


def test_a_replaced_should_take_drives_the_queue():
    pages = [256, 256, 128, 256, 16, 32, 8]
    order = sorted(range(len(pages)), key=lambda p: -pages[p])     # big first
    rates = {"gpu": GPU_RATE, "cpu": GPU_RATE / 4}                 # a CPU even faster
    policy = SmallPagesOnCpu()
    queue, _, log = simulate(pages, order, policy, rates)
    assert_each_page_once(queue, log, order)
    assert sorted(queue.taken["cpu"]) == [4, 5, 6]
    assert all(pages[p] > SmallPagesOnCpu.limit for p in queue.taken["gpu"])
    assert queue.declined["cpu"]
    cpu_calls = [call for call in policy.calls if call[0] == "cpu"]
    assert [edges for _, edges, _ in cpu_calls] == [8, 16, 32, 128]
    assert cpu_calls[-1][2] == 128 + 2 * 256            # pages 2, 3, 1 still queued


def test_run_accepts_a_policy_subclass_and_rejects_anything_else(small_graph, no_gpu):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.GpuFallbackWarning)
        result = garaphpy.run(small_graph, "pagerank", policy=Alternating())
    assert result.mode == "cpu"
    with pytest.raises(ConfigError, match="policy"):
        garaphpy.run(small_graph, "pagerank", policy=object())
    with pytest.raises(ConfigError, match="policy"):
        garaphpy.run(small_graph, "pagerank", mode="cpu", policy=Declines)   # the class


# -- 6. no GPU: the fallback ----------------------------------------------------------------

@pytest.fixture(scope="module")
def small_graph():
    rng = np.random.default_rng(5)
    src, dst = rng.integers(0, 300, 3000), rng.integers(0, 300, 3000)
    return garaphpy.Graph.from_arrays(src, dst, max_shard_edges=200, max_page_bytes=8_000)


@pytest.fixture
def no_gpu(monkeypatch):
    """No usable GPU on any machine, and a process that has not warned yet."""
    def unavailable():
        raise garaphpy.kernels.gpu.GpuUnavailableError("no device (test)")

    monkeypatch.setattr(garaphpy.kernels.gpu, "cupy_module", unavailable)
    monkeypatch.setattr(garaphpy.api, "_FALLBACK_WARNED", False)


def test_hybrid_without_a_gpu_warns_once_and_runs_on_the_cpu(small_graph, no_gpu):
    cpu = garaphpy.run(small_graph, "pagerank", mode="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hybrid = garaphpy.run(small_graph, "pagerank", mode="hybrid")
        default = garaphpy.run(small_graph, "pagerank")
        given = garaphpy.run(small_graph, "pagerank", policy=HybridPolicy(force="hybrid"))
    fallback = [w for w in caught if issubclass(w.category, garaphpy.GpuFallbackWarning)]
    assert len(fallback) == 1
    assert "no device (test)" in str(fallback[0].message)
    assert fallback[0].filename == __file__          # points at the caller of garaphpy.run
    for result in (hybrid, default, given):
        assert result.mode == "cpu"
        assert all(r.mode == "cpu" for r in result.iterations)
        assert result.num_iterations == cpu.num_iterations
        np.testing.assert_array_equal(result.values, cpu.values)


def test_mode_cpu_never_warns_about_the_gpu(small_graph, no_gpu):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        garaphpy.run(small_graph, "pagerank", mode="cpu")
    assert not [w for w in caught if issubclass(w.category, garaphpy.GpuFallbackWarning)]
    assert garaphpy.api._FALLBACK_WARNED is False


def test_warning_is_an_error_when_asked(small_graph, no_gpu):
    with warnings.catch_warnings():
        warnings.simplefilter("error", garaphpy.GpuFallbackWarning)
        with pytest.raises(garaphpy.GpuFallbackWarning, match="no device"):
            garaphpy.run(small_graph, "pagerank", mode="hybrid")


# -- 7. the records ---------------------------------------------------------------------------

NEW_FIELDS = {"alpha": None, "ratio": None, "cpu_pages": 0, "cpu_edges": 0, "gpu_edges": 0,
              "cpu_busy_seconds": 0.0, "gpu_busy_seconds": 0.0, "cpu_idle_seconds": 0.0,
              "gpu_idle_seconds": 0.0, "dispatch_seconds": 0.0}


def test_iteration_record_has_the_dispatcher_fields():
    fields = {f.name: f.default for f in dataclasses.fields(IterationRecord)}
    for name, default in NEW_FIELDS.items():
        assert name in fields
        assert fields[name] == default


def test_cpu_run_fills_the_cpu_fields_and_writes_them(small_graph, tmp_path):
    with pytest.warns(garaphpy.NotConvergedWarning):
        result = garaphpy.run(small_graph, "pagerank", mode="cpu", max_iterations=5,
                              tolerance=0.0)
    assert result.mode == "cpu" and result.num_iterations == 5
    pulls = [r for r in result.iterations if r.direction == "pull"]
    assert pulls
    for record in pulls:
        assert record.cpu_pages == record.pages > 1
        assert record.cpu_edges == record.edges_processed == small_graph.num_edges
        assert record.cpu_busy_seconds > 0
        assert record.cpu_busy_seconds <= record.seconds
        assert (record.gpu_pages, record.gpu_edges, record.gpu_busy_seconds) == (0, 0, 0.0)
        assert record.alpha is None and record.ratio is None

    path = write_iterations(tmp_path / "iterations.jsonl", result.iterations)
    lines = path.read_text().splitlines()
    assert len(lines) == result.num_iterations
    for line, record in zip(lines, result.iterations):
        written = json.loads(line)
        for name in NEW_FIELDS:
            assert written[name] == getattr(record, name)
        assert written["cpu_pages"] == record.pages


def test_dispatcher_module_constants():
    assert cost_policy.PROCESSORS == ("cpu", "gpu")
    assert cost_policy.MODES == ("cpu", "hybrid")


def test_the_notified_in_edges_make_a_notify_pull_dearer_and_are_only_asked_for_when_needed():
    """p, the share of |E| the notified vertices' in-edges make up: the paper's 2 f
    assumes p = f; a frontier whose out-neighbours are hubs has p >> f."""
    policy = policy_with_costs(4.0, 1.0)            # T_pull 4 s, T_GPU 1 s, c_0 0
    asked = []

    def hubs():
        asked.append(True)
        return 0.5

    cheap = policy.decide(0, 0.0625, 1.0, pull_fraction=hubs)
    assert asked and cheap.pull_fraction == 0.5
    assert cheap.cpu_seconds == pytest.approx((0.0625 + 0.5) * 4.0)     # 2.25 s
    assert cheap.mode == "hybrid" and cheap.alpha == pytest.approx(2.25)
    paper = policy.decide(1, 0.0625, 1.0)                                # p = f
    assert paper.mode == "cpu" and paper.alpha == pytest.approx(0.5)
    asked.clear()
    dense = policy.decide(2, 0.5, 1.0, pull_fraction=hubs)               # alpha >= 1 with f
    assert not asked and dense.pull_fraction is None and dense.mode == "hybrid"
    low = policy.decide(3, 0.0625, 1.0, pull_fraction=0.01)              # never below f
    assert low.pull_fraction == 0.0625 and low.alpha == pytest.approx(0.5)


# -- the GPU's sparse passes ---------------------------------------------------

def test_gpu_iteration_seconds_is_the_cheaper_of_a_dense_and_a_sparse_pass():
    # 1024 edges, T_GPU 1 s; a sparse pass: 1/16 s and 2^-10 s per frontier out-edge
    cost = decisions.gpu_iteration_seconds
    assert cost(0.25, 1024, 1.0, 1 / 16, 2.0 ** -10) == 1 / 16 + 1 / 4
    assert cost(1.0, 1024, 1.0, 1 / 16, 2.0 ** -10) == 1.0
    assert cost(0.25, None, 1.0, 1 / 16, 2.0 ** -10) == 1.0       # |E| unknown


def test_a_priced_sparse_pass_keeps_a_tail_iteration_on_the_gpu():
    # T_pull 4 s, T_GPU 1 s, a CPU iteration's fixed cost 1/8 s; the host's copy is
    # stale (a 1/2 s download): f = 1/1024 costs the CPU 1/8 + 2 f T_pull + 1/2 s
    unpriced = policy_with_costs(4.0, 1.0)
    unpriced.cpu_overhead = 1 / 8
    f = 1 / 1024
    tail = unpriced.decide(0, f, 1.0, cpu_sync_seconds=0.5)
    assert (tail.mode, tail.gpu_seconds) == ("cpu", 1.0)            # priced as a dense pass
    priced = policy_with_costs(4.0, 1.0)
    priced.cpu_overhead = 1 / 8
    priced.seed_sparse_pass(1 / 16, 2.0 ** -10)
    tail = priced.decide(0, f, 1.0, cpu_sync_seconds=0.5)
    assert (tail.mode, tail.gpu_seconds) == ("hybrid", 1 / 16 + 2.0 ** -10)
    # a dense frontier is still priced at T_GPU
    assert priced.decide(1, 1.0, 1.0).gpu_seconds == 1.0
    # a seed does not replace what is set
    priced.seed_sparse_pass(1.0, 1.0)
    assert (priced.gpu_sparse_overhead, priced.gpu_sparse_seconds_per_edge) == (1 / 16,
                                                                             2.0 ** -10)


def test_a_gpu_that_pulls_every_page_is_priced_at_t_gpu_however_sparse():
    # as above, the sparse pass priced: the tail stays on the GPU unless the GPU
    # would pull every page anyway (pages streaming whole, outside the device loop)
    policy = policy_with_costs(4.0, 1.0)
    policy.cpu_overhead = 1 / 8
    policy.seed_sparse_pass(1 / 16, 2.0 ** -10)
    f = 1 / 1024
    sparse = policy.decide(0, f, 1.0, cpu_sync_seconds=0.5)
    assert (sparse.mode, sparse.gpu_dense) == ("hybrid", False)
    dense = policy.decide(1, f, 1.0, cpu_sync_seconds=0.5, gpu_dense=True)
    assert (dense.mode, dense.gpu_seconds, dense.gpu_dense) == ("cpu", 1.0, True)
    assert dense.entry()["gpu_dense"] is True
    # the device loop's price wins over the flag
    looped = policy.decide(2, f, 1.0, cpu_sync_seconds=0.5, gpu_loop=True, gpu_dense=True)
    assert (looped.gpu_seconds, looped.gpu_dense) == (policy.t_loop, False)


def test_sparse_and_dense_gpu_passes_are_learnt_apart():
    policy = policy_with_costs(4.0, 1.0, smoothing=0.5)
    # a dense pass (every edge): T_GPU; the sparse model stays unpriced
    policy.observe(Observation("hybrid", "pull", 1.0, 1.0, 1024, gpu_edges=1024,
                               gpu_iteration_seconds=2.0))
    assert policy.t_gpu == 1.5 and policy.gpu_sparse_overhead is None
    # the first sparse pass, 64 edges in 1/4 s of which 1/8 s made the selective
    # arrays: its 1/8 s is the fixed cost, and 1/8 s over 64 edges the rate
    policy.observe(Observation("hybrid", "pull", 1 / 16, 1.0, 1024, gpu_edges=64,
                               gpu_iteration_seconds=0.25, gpu_setup_seconds=0.125))
    assert policy.t_gpu == 1.5
    assert (policy.gpu_sparse_overhead, policy.gpu_sparse_seconds_per_edge) == (1 / 8, 1 / 512)
    # a cheaper one lowers the fixed cost; a dearer one teaches the rate
    policy.observe(Observation("hybrid", "pull", 0.0, 1.0, 1024, gpu_edges=2,
                               gpu_iteration_seconds=1 / 16))
    assert policy.gpu_sparse_overhead == 1 / 16
    policy.observe(Observation("hybrid", "pull", 0.25, 1.0, 1024, gpu_edges=256,
                               gpu_iteration_seconds=1 / 16 + 1 / 4))
    assert policy.gpu_sparse_seconds_per_edge == 0.5 * (1 / 512) + 0.5 * (1 / 1024)
    assert policy.t_gpu == 1.5
    assert policy.gpu_iteration_seconds(1 / 128) == pytest.approx(
        1 / 16 + 8 * (0.5 / 512 + 0.5 / 1024))


def test_a_notify_pull_of_a_few_vertices_raises_t_notify_at_most_by_the_rise():
    """A hiccup in a notify-pull of a sliver of the edges must not price every
    later CPU iteration as a whole pull: T_notify rises by at most
    ``config.HYBRID_NOTIFY_RISE`` per observation, and falls freely."""
    from garaphpy import config

    policy = policy_with_costs(4.0, 1.0, smoothing=0.5)
    policy.cpu_overhead = 0.01
    f = 1e-6                                       # share 2e-6 of the edges
    tiny = Observation("cpu", "notify-pull", f, 1.0, num_edges=1 << 24, cpu_edges=40,
                       cpu_seconds=0.06)          # 50 ms of work: 25,000 s a whole notify
    policy.observe(tiny)
    rise = config.HYBRID_NOTIFY_RISE
    assert policy.t_notify == pytest.approx(0.5 * 4.0 + 0.5 * rise * 4.0)
    # the CPU's next tiny iteration is still priced near c_0, below a GPU
    # iteration of 20 ms (the 50 ms taken at face value: 35 ms)
    policy.t_gpu = 0.02
    decision = policy.decide(1, f, 1.0)
    assert decision.cpu_seconds < 0.011 and decision.mode == "cpu"
    # observations that keep measuring more move it on, a rise at a time
    before = policy.t_notify
    policy.observe(tiny)
    assert before < policy.t_notify <= 0.5 * before + 0.5 * rise * before
    # and one far cheaper brings it down at once
    cheap = Observation("cpu", "notify-pull", 0.1, 1.0, num_edges=1 << 24, cpu_edges=150,
                        cpu_seconds=0.01 + 0.2 * 0.25)
    policy.smoothing = 1.0
    policy.observe(cheap)
    assert policy.t_notify == pytest.approx(0.25)


@pytest.mark.parametrize("share, work, t_notify, overhead, measures", [
    (2e-6, 1e-4, 6e-3, 1.2e-4, False),     # grid SSSP: a 0.1 ms excess at a share of 2e-6
    (2e-6, 5e-4, 6e-3, 1.2e-4, True),      # more than 4 c_0 beyond c_0: measured
    (0.05, 1e-4, 6e-3, 1.2e-4, True),      # predicts 0.3 ms of work: measured
    (2e-6, 1e-4, 100.0, 1.2e-4, True),     # an estimate too high opens the gate
    (2e-6, 1e-4, None, 1.2e-4, True),      # nothing to keep
    (2e-6, 1e-4, 6e-3, 0.0, True),         # no c_0 yet
])
def test_which_notify_pulls_measure_t_notify(share, work, t_notify, overhead, measures):
    from garaphpy.scheduler.decisions import notify_measures_t_notify
    assert notify_measures_t_notify(share, work, t_notify, overhead) is measures


def test_small_notify_pulls_leave_t_notify_and_the_cpu_keeps_the_iterations():
    """Notify-pulls of a few vertices a little dearer than c_0 (fixed costs,
    not edges) leave T_notify where it is, and the CPU stays the cheaper
    processor; once the frontier's share predicts real work, they count."""
    policy = policy_with_costs(4.0, 1.0, smoothing=0.5)
    policy.cpu_overhead = 0.01
    policy.t_gpu = 0.02
    for iteration in range(50):
        policy.observe(Observation("cpu", "notify-pull", 1e-6, 1.0, num_edges=1 << 24,
                                   cpu_edges=40, cpu_seconds=0.018))
    assert policy.t_notify is None                  # still T_pull's prior
    assert policy.decide(50, 1e-6, 1.0).mode == "cpu"
    policy.observe(Observation("cpu", "notify-pull", 0.05, 1.0, num_edges=1 << 24,
                               cpu_edges=40, cpu_seconds=0.01 + 0.1 * 0.5))
    assert policy.t_notify == pytest.approx(0.5 * 4.0 + 0.5 * 0.5)
