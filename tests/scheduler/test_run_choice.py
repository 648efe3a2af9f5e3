"""A hybrid run chooses per run: the GPU alone, the CPU alone or both.

Without a GPU: the rule (:func:`decisions.run_processors`) on a truth table
of synthetic costs, the iterations expected from a graph's shape, the
frontier's switch point, and :class:`RunChoice`'s estimates (the road-like
case: connected components on a mesh, where the CPU's union-find start
finishes in one iteration and label propagation would take the diameter,
goes to the CPU).  The driver's hand-over runs on the processor protocol
with a stand-in for the GPU: a CPU engine planned for the CPU alone,
without its union-find start, named ``"gpu"`` (:class:`CpuAsGpu`), and
copies of the vertex data moved between the two engines
(:class:`CopiesStandIn`).  A hybrid run the choice leaves on the GPU alone
has the records of the GPU's own run (apart from mode labels and the
choice's own entries); the road-like run goes to the CPU alone's engine and
ends after its union-find start; a run that switches processors as its
frontier grows and shrinks ends with the CPU mode's values.

With a GPU (``pytest -m gpu``): ``garaphpy.run`` in hybrid mode on a grid
chooses the CPU for connected components and equals the CPU mode; on the
GPU alone its records equal the GPU mode's.
"""

from __future__ import annotations

import cProfile
import dataclasses
import functools
import gc
import math
import pstats
import warnings

import numpy as np
import pytest

import garaphpy
from garaphpy import api, config
from garaphpy.options import RunOptions
from garaphpy.scheduler import decisions, run_choice
from garaphpy.scheduler.driver import SingleDriver
from garaphpy.scheduler.hybrid_driver import HybridDriver
from garaphpy.scheduler.plan import plan_cpu
from garaphpy.scheduler.processors import CpuProcessor
from garaphpy.scheduler.run_choice import CpuAlone, RunChoice
from garaphpy.storage import residency
from garaphpy.storage.page_io import drop_from_page_cache

from helpers import policy_with_costs, untimed

# -- the rule, on synthetic costs -------------------------------------------------------------
@pytest.mark.parametrize("cpu, gpu, both, current, expected", [
    # the first choice: the cheapest, ties to one processor alone (GPU, then CPU)
    (1.0, 2.0, 3.0, None, "cpu"),
    (2.0, 1.0, 3.0, None, "gpu"),
    (2.0, 3.0, 1.0, None, "both"),
    (1.0, 1.0, 1.0, None, "gpu"),
    (1.0, 2.0, 1.0, None, "cpu"),
    (None, 2.0, 1.0, None, "both"),
    (None, 2.0, None, None, "gpu"),
    (None, None, None, None, "both"),
    (math.inf, 2.0, math.nan, None, "gpu"),
    # later: leaving the choice in force takes a margin (0.8)
    (0.9, 2.0, 1.0, "both", "both"),
    (0.8, 2.0, 1.0, "both", "cpu"),
    (2.0, 0.85, 1.0, "both", "both"),
    (2.0, 0.5, 1.0, "cpu", "gpu"),
    (1.0, 0.9, 3.0, "cpu", "cpu"),
    (10.0, 1.0, 3.0, "gpu", "gpu"),
    (None, 1.0, 3.0, "cpu", "gpu"),      # no estimate for the current: the cheapest
    (None, None, None, "gpu", "gpu"),    # nothing known: stay
])
def test_run_processors_truth_table(cpu, gpu, both, current, expected):
    assert decisions.run_processors(cpu, gpu, both, current, margin=0.8) == expected


def test_run_processors_margin_defaults_to_config(monkeypatch):
    monkeypatch.setattr(config, "HYBRID_RUN_SWITCH_MARGIN", 0.5)
    assert decisions.run_processors(0.6, 5.0, 1.0, "both") == "both"
    assert decisions.run_processors(0.5, 5.0, 1.0, "both") == "cpu"


@pytest.mark.parametrize("union_find, cpu_seconds, build, expected", [
    (True, None, 1.0, True),
    (True, 0.1, 1.0, True),
    (False, 0.1, 1.0, False),
    (False, 1.0, 1.0, True),
    (False, None, 1.0, False),
])
def test_the_cpu_alone_engine_is_made_where_it_pays(union_find, cpu_seconds, build, expected):
    assert decisions.cpu_alone_engine(union_find, cpu_seconds, build) is expected


@pytest.mark.parametrize("vertices, edges, skew, done, expected", [
    (1_000_000, 4_000_000, 1.1, 0, 1000.0),              # a mesh: sqrt(|V|)
    (1_000_000, 4_000_000, 1.1, 600, 600.0),             # past half: as long again
    (1_000_000, 4_000_000, 1.1, 2000, 2000.0),
    (2 ** 20, 2 ** 25, 40.0, 0, 5.0),                    # log |V| / log 32 + 1
    (None, 0, None, 0, 16.0),                            # nothing known: the prior
    (None, 0, None, 30, 30.0),
    (1, 0, 1.0, 0, 16.0),
])
def test_expected_iterations(vertices, edges, skew, done, expected):
    assert decisions.expected_iterations(vertices, edges, skew, done, mesh_skew=1.5,
                                         prior=16) == pytest.approx(expected)


def test_the_switch_point_is_where_the_cheaper_processor_changes():
    point = decisions.frontier_switch_point(lambda f: 2 * f, lambda f: 0.1)
    assert point == pytest.approx(0.05, rel=1e-5)
    assert decisions.frontier_switch_point(lambda f: 2 * f, lambda f: 5.0) is None
    assert decisions.frontier_switch_point(lambda f: 1.0, lambda f: 0.5) is None


# -- the estimates -------------------------------------------------------------------------
def test_road_like_components_go_to_the_cpus_union_find():
    """CC on a mesh of 1.5 M vertices: the GPU's iteration is 10x cheaper
    than the CPU's pull, but label propagation takes about sqrt(|V|)
    iterations, and the CPU's union-find start one."""
    policy = policy_with_costs(8.0, 0.5)
    policy.t_loop = 0.25
    shape = CpuAlone(num_vertices=1_500_000, in_degree_skew=1.2, union_find_start=True)
    entry = RunChoice(policy, shape).estimate(0, 1.0, 1.0, 10_000)
    assert entry["union_find_start"] is True
    assert entry["cpu_seconds"] == 16.0         # the union-find (one pull's worth) + a pull
    assert entry["iterations"] == pytest.approx(math.sqrt(1_500_000))
    assert entry["gpu_seconds"] == pytest.approx(0.5 * math.sqrt(1_500_000))
    assert entry["choice"] == "cpu"
    # the same costs on a power-law graph: a few iterations, the GPU's
    skewed = CpuAlone(num_vertices=2 ** 22, in_degree_skew=40.0, union_find_start=True)
    policy.num_edges = 2 ** 27
    assert RunChoice(policy, skewed).estimate(0, 1.0, 1.0, 10_000,
                                              join_seconds=0.1)["choice"] == "gpu"
    # past the first iteration there is no union-find start to take
    later = RunChoice(policy, shape).estimate(3, 1.0, 1.0, 10_000, join_seconds=0.1)
    assert later["union_find_start"] is False and later["choice"] == "gpu"


@pytest.mark.parametrize("cold, expected", [
    (None, "cpu"),                # the kernel cannot say: nothing priced
    (0, "cpu"),                   # the CSR in memory: the CPU's iterations are cheaper
    (1_982_735_680, "gpu"),       # kron24's from a dropped page cache
    (50_000_000, "cpu"),          # a little cold: the CPU still wins
])
def test_the_cpu_alones_cold_edges_are_priced(cold, expected, monkeypatch):
    """kron24 BFS from storage (H200 host, 2026-12-05): 9.2 ms an iteration
    on the CPU against 18.8 on the GPU, 6 iterations, but the CPU's
    out-edge CSR cold (1.98 GB read at 2.26 GB/s), which the GPU's pages,
    read at its set-up, are not."""
    policy = policy_with_costs(9.2e-3, 18.8e-3)
    policy.t_loop = 18.8e-3
    arrays = (np.zeros(4), np.zeros(4))
    monkeypatch.setattr(run_choice.residency, "cold_bytes", lambda given: cold
                        if given == arrays else pytest.fail("other arrays"))
    shape = CpuAlone(num_vertices=2 ** 24, in_degree_skew=40.0, edge_arrays=arrays,
                     read_speed=lambda: 2.26e9)
    entry = RunChoice(policy, shape).estimate(0, 1.0, 1.0, 6, join_seconds=1.0)
    assert entry["iterations"] == 6
    assert entry["cpu_cold_bytes"] == cold
    assert entry["cpu_read_seconds"] == pytest.approx((cold or 0) / 2.26e9)
    assert entry["cpu_seconds"] == pytest.approx(6 * 9.2e-3 + (cold or 0) / 2.26e9)
    assert entry["choice"] == expected
    # no edge arrays named (a program of whole pulls): nothing read, whatever is cold
    bare = RunChoice(policy, dataclasses.replace(shape, edge_arrays=())).estimate(
        0, 1.0, 1.0, 6, join_seconds=1.0)
    assert bare["cpu_read_seconds"] == 0.0 and bare["choice"] == "cpu"


def test_a_small_frontier_goes_to_the_cpu_and_a_large_one_to_the_gpu():
    policy = policy_with_costs(4.0, 1.0)
    policy.cpu_overhead = 0.01
    choice = RunChoice(policy)
    small = choice.estimate(0, 2.0 ** -12, 1.0, 100)
    assert small["choice"] == "cpu"
    assert small["switch_point"] == pytest.approx((1.0 - 0.01) / 8.0, rel=1e-5)
    choice.commit(small, 0)
    assert not choice.due(1, 2.0 ** -10) and choice.due(1, 0.5)
    assert choice.due(config.HYBRID_RUN_STRETCH_ITERATIONS, 2.0 ** -10)
    large = choice.estimate(1, 0.5, 1.0, 100, join_seconds=0.5)
    assert large["current"] == "cpu" and large["choice"] == "gpu"


def test_the_hosts_work_per_iteration_keeps_one_processor_alone():
    """Both split each iteration in the model; the host's measured work
    per iteration makes the GPU alone cheaper when the CPU adds little."""
    policy = policy_with_costs(64.0, 1.0)
    choice = RunChoice(policy)
    assert choice.estimate(0, 1.0, 1.0, 10, join_seconds=0.0)["choice"] == "both"
    choice.observe_dispatch(0.5)
    entry = choice.estimate(0, 1.0, 1.0, 10, join_seconds=0.0)
    assert entry["dispatch_seconds"] == 0.5 and entry["choice"] == "gpu"


def test_measured_shared_iterations_replace_the_models_split():
    """The model shares a dense iteration at both full rates; where the
    iterations both ran measured slower than the GPU alone, the GPU alone."""
    policy = policy_with_costs(4.0, 2.0)
    choice = RunChoice(policy)
    assert choice.estimate(0, 1.0, 1.0, 20)["choice"] == "both"
    choice.observe_split(2.5)
    entry = choice.estimate(0, 1.0, 1.0, 20)
    assert entry["split_seconds"] == 2.5 and entry["choice"] == "gpu"


def test_the_shared_iteration_charges_the_cpus_fixed_cost():
    """Sharing a dense iteration: the CPU's part starts after its c_0, so a
    c_0 above T_GPU leaves nothing to share (the GPU alone), and one below
    shares less than the rates alone would say."""
    assert run_choice.shared_iteration_seconds(4.0, 2.0, 0.0) == pytest.approx(4 / 3)
    assert run_choice.shared_iteration_seconds(4.0, 2.0, 1.0) == pytest.approx(5 / 3)
    assert run_choice.shared_iteration_seconds(4.0, 2.0, 2.5) == 2.0
    policy = policy_with_costs(4.0, 2.0)
    dispatch = config.HYBRID_DISPATCH_SECONDS
    policy.cpu_overhead = 1.0
    entry = RunChoice(policy).estimate(0, 1.0, 1.0, 20)
    assert entry["both_iteration_seconds"] == pytest.approx(5 / 3 + dispatch)
    assert entry["choice"] == "both"
    policy.cpu_overhead = 2.5        # the CPU's fixed cost alone exceeds the GPU's iteration
    entry = RunChoice(policy).estimate(0, 1.0, 1.0, 20)
    assert entry["both_iteration_seconds"] == pytest.approx(2.0 + dispatch)
    assert entry["choice"] == "gpu"


def test_stretches_double_from_the_first(monkeypatch):
    monkeypatch.setattr(config, "HYBRID_RUN_FIRST_STRETCH", 2)
    monkeypatch.setattr(config, "HYBRID_RUN_STRETCH_ITERATIONS", 8)
    choice = RunChoice(policy_with_costs(4.0, 1.0))
    ends, iteration = [], 0
    for _ in range(5):
        entry = choice.estimate(iteration, 1.0, 1.0, 100)
        choice.commit(entry, iteration)
        ends.append(entry["stretch_end"])
        iteration = entry["stretch_end"]
    assert ends == [2, 6, 14, 22, 30]
    assert not choice.due(29, 1.0) and choice.due(30, 1.0)


def test_without_costs_both_decide_per_iteration():
    entry = RunChoice(garaphpy.HybridPolicy()).estimate(0, 1.0, 1.0, 10)
    assert entry["choice"] == "both" and entry["gpu_seconds"] is None


# -- the driver's hand-over, with a stand-in GPU ----------------------------------------------
class CpuAsGpu(CpuProcessor):
    """Stands for the GPU processor: a CPU engine planned for the CPU alone
    without its union-find start (label propagation, as the GPU's)."""

    name = "gpu"

    def sparse_edge_seconds(self) -> float:
        return 0.0

    def restore_checkpoint(self, values, frontier) -> None:
        super().restore_checkpoint(values, getattr(frontier, "ids", frontier))


class CopiesStandIn:
    """Stands for :class:`VertexState`: the host's copy is the hybrid CPU
    engine's, the device's the stand-in GPU's; bringing one up to date
    restores it from the other."""

    download_seconds = upload_seconds = 1e-3

    def __init__(self, host, device):
        self.host, self.device = host, device
        self.host_current = self.device_current = True

    def sync_seconds(self):
        return (0.0 if self.host_current else self.download_seconds,
                0.0 if self.device_current else self.upload_seconds)

    def _copy(self, source, target) -> int:
        values, frontier = source.checkpoint_state()
        target.restore_checkpoint(values.copy(), frontier.copy())
        return values.nbytes

    def download(self) -> int:
        return self._copy(self.device, self.host)

    def make_host_current(self) -> int:
        copied = 0 if self.host_current else self._copy(self.device, self.host)
        self.host_current = True
        return copied

    def make_device_current(self) -> int:
        copied = 0 if self.device_current else self._copy(self.host, self.device)
        self.device_current = True
        return copied

    def written_by(self, processors: str) -> None:
        self.host_current = processors in ("cpu", "both")
        self.device_current = processors in ("gpu", "both")


def sources_of(name):
    return np.array([0], np.int64) if name in ("bfs", "sssp") else None


def parts(graph, name, threads=2, mode="hybrid", **options):
    """(run, plan, compiled program and arrays, first frontier) as ``garaphpy.run``
    makes them for a run in ``mode`` (with ``options``, :class:`RunOptions`' own)."""
    run_ = api._validated(graph, name, RunOptions(mode="cpu", threads=threads,
                                                  sources=sources_of(name), **options))
    run_.mode = mode
    pages = api.page_source(run_.graph.store, "cpu")
    plan, cpu_parts = api._plan(run_, pages, None, frozenset())
    first = (np.arange(run_.graph.num_vertices, dtype=np.int64)
             if run_.program.initially_active == "all" else run_.sources.copy())
    return run_, plan, cpu_parts, first


def stand_in_gpu(run_, plan, cpu_parts, first) -> CpuAsGpu:
    compiled, arrays = cpu_parts
    alone = plan_cpu(run_.program, compiled, arrays, mode="cpu", synchronous=plan.synchronous,
                     threads=run_.threads, tolerance=run_.tolerance,
                     symmetric=not run_.graph.directed, turned_off={"union_find_start"})
    engine = api.build_cpu_engine(dataclasses.replace(plan, mode="cpu", cpu=alone),
                                  run_.program, compiled, arrays, first.copy())
    return CpuAsGpu(engine)


def hybrid_driver(graph, name, policy, shape: dict | None = None, threads: int = 2,
                  options: dict | None = None, counted: bool = True):
    """A hybrid driver over the run's CPU engine and a stand-in GPU, with the
    run's CPU alone (its shape overridden by ``shape``; ``options``: the
    run's :class:`RunOptions`; ``counted``: the CPU's per-vertex in-edges of
    the out-neighbours counted first, else when the policy first asks)."""
    run_, plan, cpu_parts, first = parts(graph, name, threads, **(options or {}))
    cpu_engine = api.build_cpu_engine(plan, run_.program, *cpu_parts, first.copy())
    gpu = stand_in_gpu(run_, plan, cpu_parts, first)
    copies = CopiesStandIn(cpu_engine, gpu)
    cpu = CpuProcessor(cpu_engine, copies, threads=1)
    if counted:
        cpu.count_neighbour_in_edges()
    cpu_alone = dataclasses.replace(api._cpu_alone(plan, run_, cpu_parts, first), **(shape or {}))
    return run_, HybridDriver(cpu, gpu, copies, policy, cpu_alone)


def drive(driver, run_):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        records, converged, _ = api._iterate(driver, run_.program, run_.max_iterations,
                                             run_.tolerance, "auto", None)
    values = driver.values_to_host()
    driver.close()
    return values, records


@pytest.fixture(scope="module")
def graph():
    rng = np.random.default_rng(11)
    n, m = 3000, 15000
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    weights = rng.integers(1, 30, m).astype(np.float64)
    return garaphpy.Graph.from_arrays(src, dst, weights, max_shard_edges=400,
                                      max_page_bytes=30_000, compress=False)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    return garaphpy.Graph.load("grid:40x40", store=tmp_path_factory.mktemp("mesh") / "s",
                               max_shard_edges=512, max_page_bytes=16384, compress=False,
                               progress=False)


@functools.cache
def cpu_mode_values(graph, name):
    """The CPU mode's values (once per graph and program: several tests compare with them)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", garaphpy.NotConvergedWarning)
        values = garaphpy.run(graph, name, mode="cpu", threads=2, sources=sources_of(name)).values
    values.flags.writeable = False
    return values


@pytest.mark.parametrize("name", ["pagerank", "bfs", "sssp", "cc"])
def test_a_run_on_the_gpu_alone_has_the_gpus_own_records(graph, name, monkeypatch):
    # one stretch: the stand-in's batches (the CPU's buckets of values) are its
    # iterations, which a stretch's end would cut (the GPU's device loop, cut,
    # differs only in the batch's facts that the comparison leaves out)
    monkeypatch.setattr(config, "HYBRID_RUN_FIRST_STRETCH", 10 ** 6)
    policy = policy_with_costs(1000.0, 1e-3)
    policy.cpu_overhead = 1.0
    # one thread: an asynchronous iteration's counts do not depend on the threads' race
    run_, driver = hybrid_driver(graph, name, policy, threads=1)
    values, records = drive(driver, run_)
    assert {r.decisions["run_processors"]["choice"] for r in records
            if "run_processors" in r.decisions} == {"gpu"}
    assert "run_processors" in records[0].decisions
    # the GPU's own run over the same engine
    run_, plan, cpu_parts, first = parts(graph, name, threads=1)
    alone_values, alone_records = drive(SingleDriver(stand_in_gpu(run_, plan, cpu_parts, first)),
                                        run_)
    assert untimed(records, labels=False) == untimed(alone_records, labels=False)
    np.testing.assert_array_equal(values, alone_values)
    np.testing.assert_array_equal(run_.program.finalize(values),
                                  cpu_mode_values(graph, name))


def cpu_alone_policy() -> garaphpy.HybridPolicy:
    """The GPU 1000x dearer an iteration and a shared iteration dearer still:
    every choice is the CPU alone."""
    policy = policy_with_costs(1e-3, 1.0)
    policy.join_seconds = 1000.0
    return policy


def cpu_mode_driver(graph, name, threads: int = 1, **options):
    """The CPU mode's own driver of the run ``parts`` makes."""
    run_, plan, cpu_parts, first = parts(graph, name, threads, "cpu", **options)
    return run_, SingleDriver(CpuProcessor(api.build_cpu_engine(plan, run_.program, *cpu_parts,
                                                                first.copy())))


@pytest.mark.parametrize("name", ["pagerank", "bfs", "sssp", "cc"])
def test_a_run_on_the_cpu_alone_has_the_cpu_modes_records(graph, name, monkeypatch):
    monkeypatch.setattr(CpuAsGpu, "sparse_edge_seconds", lambda self: 1.0)
    monkeypatch.setattr(CopiesStandIn, "download_seconds", 1e-6)    # the CPU's engine pays
    # one stretch, as for the GPU alone: a stretch's end cuts the CPU's batches
    monkeypatch.setattr(config, "HYBRID_RUN_FIRST_STRETCH", 10 ** 6)
    # one thread: the asynchronous programs' counts follow the threads' race
    threads = 1
    run_, driver = hybrid_driver(graph, name, cpu_alone_policy(), threads=threads)
    values, records = drive(driver, run_)
    entry = records[0].decisions["run_processors"]
    assert entry["choice"] == "cpu" and entry["cpu_alone_engine"]["choice"] is True
    assert {r.mode for r in records} == {"cpu"}
    run_, cpu_driver = cpu_mode_driver(graph, name, threads)
    cpu_values, cpu_records = drive(cpu_driver, run_)
    assert without_seconds(untimed(records, labels=False)) == \
        without_seconds(untimed(cpu_records, labels=False))
    np.testing.assert_array_equal(values, cpu_values)
    np.testing.assert_array_equal(run_.program.finalize(values), cpu_mode_values(graph, name))


def without_seconds(rows: list[dict]) -> list[dict]:
    """``rows`` (of :func:`untimed`) without the times their decisions measured
    (the union-find start's)."""
    for row in rows:
        for entry in row["decisions"].values():
            if isinstance(entry, dict):
                entry.pop("seconds", None)
    return rows


def calls_per_iteration(make, few: int, many: int) -> float:
    """Python calls an iteration of the runs ``make(iterations)`` returns (run,
    driver) for: the calls of ``many`` iterations less those of ``few``, over
    ``many - few`` (what a run does once, at its start and end, drops out)."""
    counts = []
    for iterations in (few, many):
        run_, driver = make(iterations)
        profile = cProfile.Profile()
        profile.enable()
        _, records = drive(driver, run_)
        profile.disable()
        assert len(records) == iterations
        counts.append(sum(calls for _, calls, *_ in pstats.Stats(profile).stats.values()))
    return (counts[1] - counts[0]) / (many - few)


def test_a_run_on_the_cpu_alone_costs_the_host_what_the_cpu_mode_does(graph):
    """PageRank on the CPU alone, its stretches doubling (choices made again
    at 2, 6, 14, 30 and 62 iterations): a hybrid iteration makes the CPU
    mode's Python calls and at most two more (the stretch's test of the
    switch point); each choice made again costs calls once, not an iteration."""
    options = dict(max_iterations=None, tolerance=0.0)

    def hybrid(iterations):
        return hybrid_driver(graph, "pagerank", cpu_alone_policy(), threads=2,
                             options={**options, "max_iterations": iterations})

    def cpu(iterations):
        return cpu_mode_driver(graph, "pagerank", 2, **{**options, "max_iterations": iterations})

    hybrid(3)    # compiled, and the CPU-alone engine's kernels too
    cpu_calls = calls_per_iteration(cpu, 8, 80)
    hybrid_calls = calls_per_iteration(hybrid, 8, 80)
    # the choices made again between 8 and 80 iterations, at 14, 30 and 62
    assert hybrid_calls <= cpu_calls + 2 + 3 * 60 / 72, (hybrid_calls, cpu_calls)


def test_road_like_components_run_on_the_cpu_alone_from_its_union_find(mesh):
    """The GPU 10x faster an iteration, but the mesh's diameter against the
    CPU's one iteration: the choice is the CPU alone, whose engine starts
    from the union-find and ends after one pull."""
    policy = policy_with_costs(1e-3, 1e-4)
    run_, driver = hybrid_driver(mesh, "cc", policy)
    values, records = drive(driver, run_)
    first = records[0].decisions
    assert first["run_processors"]["choice"] == "cpu"
    assert first["run_processors"]["union_find_start"] is True
    assert first["run_processors"]["cpu_alone_engine"]["choice"] is True
    assert "cpu_union_find_start" in first
    assert len(records) == 1 and records[0].mode == "cpu"
    np.testing.assert_array_equal(run_.program.finalize(values), cpu_mode_values(mesh, "cc"))


@pytest.mark.parametrize("name", ["bfs", "sssp", "cc"])
def test_switches_between_processors_keep_the_values(graph, name, monkeypatch):
    """The CPU cheaper below f = 0.05, the GPU above (as first priced): the
    choice follows the frontier (and the host's copy, the CPU-alone
    engine's and the stand-in GPU's are handed over at each switch); the
    values are the CPU mode's."""
    monkeypatch.setattr(config, "HYBRID_RUN_STRETCH_ITERATIONS", 2)
    policy = policy_with_costs(1e-2, 1e-3)
    run_, driver = hybrid_driver(graph, name, policy, {"union_find_start": False})
    values, records = drive(driver, run_)
    choices = [r.decisions["run_processors"]["choice"] for r in records
               if "run_processors" in r.decisions]
    # BFS's frontier grows and shrinks across the switch point (SSSP's CPU takes
    # its sparse iterations in buckets of values, in one batch; CC's shrinks fast)
    assert {"cpu", "gpu"} <= set(choices) or name != "bfs"
    np.testing.assert_array_equal(run_.program.finalize(values), cpu_mode_values(graph, name))


def test_a_short_cpu_stretch_runs_on_the_hybrids_own_cpu_engine(graph, monkeypatch):
    """The CPU alone cheaper, but its run's rest estimated shorter than making
    its own engine: the hybrid run's CPU engine runs it."""
    monkeypatch.setattr(CopiesStandIn, "download_seconds", 100.0)
    policy = policy_with_costs(1e-3, 1.0)
    run_, driver = hybrid_driver(graph, "bfs", policy)
    values, records = drive(driver, run_)
    entry = records[0].decisions["run_processors"]
    assert entry["choice"] == "cpu" and entry["cpu_alone_engine"]["choice"] is False
    assert driver.alone_cpu is None and records[0].mode == "cpu"
    np.testing.assert_array_equal(run_.program.finalize(values), cpu_mode_values(graph, "bfs"))


def test_the_cpu_alone_names_its_out_edges_where_it_notifies(graph):
    """BFS notifies over the out-edge CSR: the CPU alone names it; PageRank's
    whole pulls read the pages alone: nothing named."""
    _, bfs = hybrid_driver(graph, "bfs", cpu_alone_policy())
    arrays = bfs.cpu.engine.arrays
    assert bfs.cpu_alone.edge_arrays == (arrays.out_offsets, arrays.out_targets)
    bfs.close()
    _, pagerank = hybrid_driver(graph, "pagerank", cpu_alone_policy())
    assert pagerank.cpu_alone.edge_arrays == ()
    pagerank.close()


def test_a_cold_out_edge_csr_sends_the_run_to_the_gpu(tmp_path, monkeypatch):
    """A store opened after its files left the page cache: the CPU's cheaper
    iterations lose to the reads of its cold out-edge CSR at the storage's
    speed (1 MB/s here), so the choice is the GPU alone; the values equal
    the CPU mode's."""
    rng = np.random.default_rng(5)
    n, m = 20_000, 400_000
    built = garaphpy.Graph.from_arrays(rng.integers(0, n, m), rng.integers(0, n, m),
                                       store=tmp_path / "s", max_page_bytes=400_000,
                                       compress=False)
    del built
    gc.collect()      # its maps of the files go: the kernel drops only unmapped pages
    for path in (tmp_path / "s").rglob("*"):
        if path.is_file():
            drop_from_page_cache(path)
    cold_graph = garaphpy.Graph.open(tmp_path / "s", verify="none")
    store = cold_graph.store
    cold = residency.cold_bytes([store.out_targets])
    if not cold:
        pytest.skip("this file system keeps the store's pages in memory")
    monkeypatch.setattr(config, "DISK_READ_BYTES_PER_SECOND", 1e6)
    run_, driver = hybrid_driver(cold_graph, "bfs", cpu_alone_policy(), counted=False)
    values, records = drive(driver, run_)
    entry = records[0].decisions["run_processors"]
    assert entry["cpu_cold_bytes"] > 0 and entry["cpu_read_seconds"] > 0.1
    # without its reads the CPU alone would have been the cheapest
    assert entry["cpu_seconds"] - entry["cpu_read_seconds"] < entry["gpu_seconds"]
    assert entry["choice"] == "gpu"
    expected = garaphpy.run(cold_graph, "bfs", mode="cpu", threads=2, sources=0).values
    np.testing.assert_array_equal(run_.program.finalize(values), expected)


def test_a_forced_policy_decides_every_iteration_itself(graph):
    policy = policy_with_costs(1000.0, 1e-3, force="cpu")
    run_, driver = hybrid_driver(graph, "bfs", policy)
    values, records = drive(driver, run_)
    assert not any("run_processors" in r.decisions for r in records)
    assert {r.mode for r in records} == {"cpu"}
    np.testing.assert_array_equal(run_.program.finalize(values), cpu_mode_values(graph, "bfs"))


# -- with a GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
def test_hybrid_components_on_a_grid_start_from_a_union_find_and_equal_the_cpu(mesh):
    """Either processor alone starts from its union-find (the CPU's, or the
    GPU's on its resident pages) and ends after one pull; the estimate
    priced both so."""
    result = garaphpy.run(mesh, "cc")
    record = result.iterations[0]
    entry = record.decisions["run_processors"]
    assert entry["union_find_start"] and entry["gpu_union_find_start"]
    assert entry["choice"] in ("cpu", "gpu")
    assert f"{entry['choice']}_union_find_start" in record.decisions
    assert len(result.iterations) == 1
    np.testing.assert_array_equal(result.values, cpu_mode_values(mesh, "cc"))


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["pagerank", "bfs", "sssp", "cc"])
def test_a_hybrid_run_on_the_gpu_alone_has_the_gpu_modes_records(graph, name):
    """Synchronous runs: an asynchronous SSSP's iterations follow the device's
    thread order, which moves under load (two GPU runs of it differed at one
    iteration with 16 test workers sharing the GPU)."""
    policy = policy_with_costs(1000.0, 1e-3)
    policy.cpu_overhead = 1.0
    hybrid = garaphpy.run(graph, name, mode="hybrid", policy=policy, sources=sources_of(name),
                          execution="sync")
    gpu = garaphpy.run(graph, name, mode="gpu", sources=sources_of(name), execution="sync")
    assert {r.decisions["run_processors"]["choice"] for r in hybrid.iterations
            if "run_processors" in r.decisions} == {"gpu"}
    hybrid_rows = untimed(hybrid.iterations, labels=False)
    gpu_rows = untimed(gpu.iterations, labels=False)
    assert hybrid_rows == gpu_rows
    if np.issubdtype(gpu.values.dtype, np.floating) and name == "pagerank":
        np.testing.assert_allclose(hybrid.values, gpu.values, rtol=1e-12, atol=0)
    else:
        np.testing.assert_array_equal(hybrid.values, gpu.values)
