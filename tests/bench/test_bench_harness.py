"""bench/harness.py: warm-up outside the timed trials, verification that fails
a row and the script, the JSON row and its machine fields; and the benchmark
scripts as configurations of it (tiny CPU runs, GPU scripts' --help)."""

from __future__ import annotations

import dataclasses

import json
import lzma
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import garaphpy
from bench import harness, modes_oracle
from helpers import REPOSITORY


def test_warmup_runs_are_outside_the_trials():
    calls = []

    def run():
        calls.append(time.perf_counter())
        # the warm-up calls are slow, the timed ones fast: a warm-up inside the
        # timed region would show in the trials' times
        time.sleep(0.05 if len(calls) <= 2 else 0.0)
        return len(calls)

    row = harness.measure(harness.Case("count", run), trials=3, warmup=2)
    assert len(calls) == 5
    assert row["warmup"] == 2 and row["trials"] == 3 and len(row["trials_s"]) == 3
    assert max(row["trials_s"]) < 0.04
    assert row["min_s"] == min(row["trials_s"])
    assert row["median_s"] == sorted(row["trials_s"])[1]


def test_a_cheaper_warm_up_call_replaces_run_outside_the_trials():
    calls = []
    row = harness.measure(harness.Case("warm", lambda: calls.append("run"),
                                       warm_up=lambda: calls.append("warm")),
                          trials=2, warmup=3)
    assert calls == ["warm"] * 3 + ["run"] * 2 and len(row["trials_s"]) == 2


def test_setup_runs_once_untimed_and_feeds_the_trials():
    setups, seen = [], []

    def setup():
        setups.append(1)
        time.sleep(0.05)
        return {"graph": "tiny"}

    row = harness.measure(harness.Case("with-setup", lambda context: seen.append(context),
                                       setup=setup), trials=2, warmup=1)
    assert setups == [1]
    assert seen == [{"graph": "tiny"}] * 3
    assert max(row["trials_s"]) < 0.04


def test_a_measurement_reports_its_own_seconds_and_metrics():
    row = harness.measure(harness.Case(
        "own-clock", lambda: harness.Measurement(result=1, seconds=2.5, metrics={"n": 7})),
        trials=2, warmup=0)
    assert row["trials_s"] == [2.5, 2.5]
    assert all(wall < 1.0 for wall in row["wall_s"])
    assert row["metrics"] == [{"n": 7}, {"n": 7}]


def test_verification_failure_marks_the_row_failed():
    answers = iter([4, 5, 4])
    row = harness.measure(harness.Case("verified", lambda: next(answers),
                                       verify=lambda value: value == 4 or f"got {value}"),
                          trials=3, warmup=0)
    assert row["verification"]["status"] == harness.FAILED
    assert row["verification"]["failures"] == ["trial 2: got 5"]
    assert harness.exit_status([row]) == 1

    def check(value):
        if value != 4:
            raise harness.VerificationError(f"{value} != 4")

    passed = harness.measure(harness.Case("verified", lambda: 4, verify=check), trials=2,
                             warmup=0)
    assert passed["verification"] == {"status": harness.PASSED, "failures": []}
    assert harness.exit_status([passed]) == 0
    unverified = harness.measure(harness.Case("plain", lambda: 4), trials=1, warmup=0)
    assert unverified["verification"]["status"] == harness.UNVERIFIED


def test_cases_in_turns_warm_up_first_then_alternate_their_trials():
    calls = []

    def case(name, trials=None):
        return harness.Case(name, lambda: calls.append(name), trials=trials,
                            setup=None, warm_up=lambda: calls.append(f"{name}-warm"),
                            teardown=None)

    rows = harness.measure_in_turns([case("a"), case("b"), case("c", trials=1)],
                                    trials=3, warmup=1, benchmark="turns")
    assert calls == ["a-warm", "b-warm", "c-warm", "a", "b", "c", "a", "b", "a", "b"]
    assert [row["case"] for row in rows] == ["a", "b", "c"]
    assert [len(row["trials_s"]) for row in rows] == [3, 3, 1]
    assert all(row["benchmark"] == "turns" and row["warmup"] == 1 for row in rows)


class _CannotRun(Exception):
    pass


def test_a_case_that_cannot_run_leaves_the_turns_and_the_others_go_on():
    calls, torn_down = [], []

    def failing_trial():
        calls.append("b")
        if calls.count("b") == 2:       # its warm-up ran, its first trial cannot
            raise _CannotRun("out of memory")

    cases = [harness.Case("a", lambda: calls.append("a")),
             harness.Case("b", lambda context: failing_trial(), setup=lambda: "ctx",
                          teardown=torn_down.append),
             harness.Case("c", lambda: calls.append("c"),
                          setup=lambda: (_ for _ in ()).throw(_CannotRun("no GPU")))]
    rows = harness.measure_in_turns(cases, trials=2, warmup=1, leave_on=(_CannotRun,))
    assert calls == ["a", "b", "a", "b", "a"]       # warm-ups a, b; then a, b (raises), a
    assert isinstance(rows[1], _CannotRun) and "out of memory" in str(rows[1])
    assert isinstance(rows[2], _CannotRun) and "no GPU" in str(rows[2])
    assert torn_down == ["ctx"]                     # at once, and only once
    assert len(rows[0]["trials_s"]) == 2 and rows[0]["verification"]["status"] == "unverified"
    # any other exception propagates, after the teardown of every case set up
    torn_down.clear()
    with pytest.raises(ZeroDivisionError):
        harness.measure_in_turns([harness.Case("x", lambda context: 1 / 0, setup=lambda: "x",
                                               teardown=torn_down.append)], warmup=0)
    assert torn_down == ["x"]


def test_the_row_has_the_machine_fields(tmp_path):
    path = tmp_path / "rows.jsonl"
    harness.write_rows(path, [harness.measure(harness.Case("a", lambda: 1, params={"k": 1}),
                                              trials=1, warmup=0, benchmark="demo")])
    harness.write_rows(path, [harness.measure(harness.Case("b", lambda: 2), trials=1,
                                              warmup=0, benchmark="demo")])
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["case"] for row in rows] == ["a", "b"]
    row = rows[0]
    assert row["benchmark"] == "demo" and row["params"] == {"k": 1}
    for key in ("trials_s", "median_s", "min_s", "verification", "date", "machine"):
        assert key in row
    machine = row["machine"]
    for key in ("cpu_model", "cpu_count", "memory_bytes", "gpu", "python", "numpy",
                "numba", "cupy", "git_commit"):
        assert key in machine
    assert machine["cpu_count"] == os.cpu_count()
    assert machine["memory_bytes"] > 0
    # the commit of the checkout; outside a git checkout (an unpacked archive), none
    in_checkout = subprocess.run(["git", "-C", str(harness.REPOSITORY), "rev-parse", "HEAD"],
                                 capture_output=True).returncode == 0
    assert len(machine["git_commit"].split("-")[0]) == (40 if in_checkout else 0)


SCRIPT = textwrap.dedent("""
    import argparse, sys
    from bench import harness

    parser = harness.add_common_options(argparse.ArgumentParser(), trials=2, warmup=1)
    parser.add_argument("--answer", type=int, default=4)
    args = parser.parse_args()
    rows = harness.run_cases("demo", [harness.Case(
        "answer", lambda: args.answer, verify=lambda value: value == 4)], args)
    sys.exit(harness.exit_status(rows))
""")


@pytest.mark.parametrize("answer, status", [(4, 0), (5, 1)])
def test_a_script_exits_non_zero_on_a_failed_verification(tmp_path, answer, status):
    script = tmp_path / "demo.py"
    script.write_text(SCRIPT)
    rows = tmp_path / "rows.jsonl"
    completed = subprocess.run([sys.executable, str(script), "--answer", str(answer),
                                "--repeat", "3", "--json", str(rows), "--quiet"],
                               capture_output=True, text=True, timeout=120,
                               env={**os.environ, "PYTHONPATH": str(REPOSITORY)})
    assert completed.returncode == status, completed.stderr
    row = json.loads(rows.read_text())
    assert row["trials"] == 3 and len(row["trials_s"]) == 3
    assert row["verification"]["status"] == ("passed" if status == 0 else "failed")


def run_script(subcommand: str, *arguments: str,
               timeout: int = 900) -> subprocess.CompletedProcess:
    """``python -m bench SUBCOMMAND ...`` from the repository root, as BENCHMARKS.md runs it."""
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    return subprocess.run([sys.executable, "-m", "bench", subcommand, *arguments],
                          capture_output=True, text=True, timeout=timeout,
                          env=environment, cwd=REPOSITORY)


def test_the_entry_point_lists_every_script_of_bench():
    from bench.__main__ import SUBCOMMANDS

    completed = run_script("--help", timeout=120)
    assert completed.returncode == 0, completed.stderr
    for name, (module, summary) in SUBCOMMANDS.items():
        assert f"  {name}" in completed.stdout and summary in completed.stdout
    scripts = {path.stem for path in (REPOSITORY / "bench").glob("*.py")
               if not path.stem.startswith("_") and path.stem != "harness"}
    assert scripts == {module for module, _ in SUBCOMMANDS.values()}
    unknown = run_script("no-such-benchmark", timeout=120)
    assert unknown.returncode == 2 and "no-such-benchmark" in unknown.stderr


@pytest.mark.parametrize("subcommand", ["gpu", "modes", "modes-oracle", "disk", "cpu",
                                        "checkpoint", "preprocess", "sparse-batch",
                                        "cpu-peers", "device-loop", "streamed",
                                        "packed-bytes", "compressed-pages", "tiers"])
def test_every_script_parses_help_without_a_gpu(subcommand):
    completed = run_script(subcommand, "--help", timeout=300)
    assert completed.returncode == 0, completed.stderr
    assert f"usage: python -m bench {subcommand}" in completed.stdout


def rows_of(path: Path) -> list[dict]:
    rows = harness.read_rows(path)
    assert rows, "no rows written"
    for row in rows:
        assert row["machine"]["cpu_count"] == os.cpu_count()
    return rows


@pytest.mark.slow
def test_checkpoint_script_on_a_tiny_graph(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("checkpoint", "--scale", "8", "--iterations", "3",
                           "--trials", "1", "--threads", "1", "--dir", str(tmp_path),
                           "--json", str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    assert "| iteration ms |" in completed.stdout
    (run,) = [row for row in rows_of(rows) if row["case"] == "pagerank-checkpointed"]
    assert run["trials"] == 1 and run["figures"]["checkpoint_s"] > 0


@pytest.mark.slow
def test_cpu_script_on_a_tiny_graph(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("cpu", "--scale", "8", "--grid", "8x8", "--only",
                           "pull,overhead", "--chain", "200", "--overhead-iterations", "20",
                           "--tiny-iterations", "5", "--threads", "1", "--trials", "1",
                           "--json", str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    names = {row["case"] for row in rows_of(rows)}
    assert {"pull/engine", "pull/bare", "pull/bare-contrib"} <= names
    assert any(name.startswith("overhead/") for name in names)


def test_compressed_pages_script_on_a_small_graph(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("compressed-pages", "rmat:10", "--threads", "1", "--trials", "1",
                           "--warmup", "0", "--store-dir", str(tmp_path), "--json", str(rows),
                           "--quiet")
    assert completed.returncode == 0, completed.stderr
    cases = {row["case"]: row for row in rows_of(rows)}
    assert set(cases) == {f"rmat:10/{name}" for name in (
        "bytes", "decode", "read/plain", "read/compressed", "stream/plain",
        "stream/compressed", "stream/stored")}
    stored = cases["rmat:10/stream/stored"]["metrics"][0]
    assert stored["bytes read"] == cases["rmat:10/stream/compressed"]["metrics"][0]["bytes read"]
    assert stored["cpu s"] >= 0
    assert all(cases[f"rmat:10/{name}"]["verification"]["status"] == "passed"
               for name in ("decode", "read/plain", "read/compressed"))
    sizes = cases["rmat:10/bytes"]["metrics"][0]
    assert sizes["plain B/edge"] > 2 * sizes["compressed B/edge"]
    assert "bytes an edge" in completed.stdout


@pytest.mark.slow
@pytest.mark.parametrize("switch, most_switched", [
    # a long thin grid: frontiers stay sparse for its 200 iterations, which batch
    # after the first config.CPU_SPARSE_BATCH_AFTER
    ("sparse_batches", 100),
    # those first ones, run alone, push
    ("settling_push", 0)])
def test_sparse_batch_script_on_a_tiny_grid(tmp_path, switch, most_switched):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("sparse-batch", "--graphs", "grid:200x10", "--programs", "bfs",
                           "--switch", switch, "--threads", "1", "--trials", "1",
                           "--store-dir", str(tmp_path), "--json", str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    cases = {row["case"]: row for row in rows_of(rows) if "verification" in row}
    assert set(cases) == {"grid:200x10/bfs/on", "grid:200x10/bfs/off"}
    assert all(row["verification"]["status"] == "passed" for row in cases.values())
    assert cases["grid:200x10/bfs/on"]["metrics"][0]["switched"] > most_switched
    assert cases["grid:200x10/bfs/off"]["metrics"][0]["switched"] == 0


@pytest.mark.gpu
def test_device_loop_script_on_a_tiny_grid(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("device-loop", "--graphs", "grid:200x10", "--programs",
                           "bfs,cc", "--trials", "1", "--store-dir", str(tmp_path),
                           "--json", str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    cases = {row["case"]: row for row in rows_of(rows) if "verification" in row}
    assert set(cases) == {f"grid:200x10/{p}/{s}" for p in ("bfs", "cc")
                          for s in ("on", "off", "graphs")}
    assert all(row["verification"]["status"] == "passed" for row in cases.values())
    assert cases["grid:200x10/bfs/on"]["metrics"][0]["looped"] > 100
    assert cases["grid:200x10/bfs/off"]["metrics"][0]["looped"] == 0
    assert cases["grid:200x10/cc/on"]["metrics"][0]["iterations"] < \
        cases["grid:200x10/cc/off"]["metrics"][0]["iterations"]
    # on: the union-find start on the device, confirmed by one pull
    assert cases["grid:200x10/cc/on"]["metrics"][0]["iterations"] == 1


@pytest.mark.gpu
def test_device_loop_script_compares_buckets_with_the_flat_loop(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("device-loop", "--graphs", "grid:60x50", "--programs",
                           "bfs,sssp", "--execution", "async", "--trials", "1",
                           "--store-dir", str(tmp_path), "--json", str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    cases = {row["case"]: row for row in rows_of(rows) if "verification" in row}
    assert set(cases) == {f"grid:60x50/{program}/{setting}" for program in ("bfs", "sssp")
                          for setting in ("on", "off", "graphs", "two-pass")} \
        | {"grid:60x50/sssp/flat"}
    assert all(row["verification"]["status"] == "passed" for row in cases.values())
    assert cases["grid:60x50/sssp/on"]["metrics"][0]["buckets"] >= 1
    assert cases["grid:60x50/sssp/flat"]["metrics"][0]["buckets"] is None
    assert cases["grid:60x50/sssp/on"]["metrics"][0]["edges"] < \
        cases["grid:60x50/sssp/flat"]["metrics"][0]["edges"]


def test_device_loop_script_wants_subways_binaries(tmp_path):
    completed = run_script("device-loop", "--subway", str(tmp_path), timeout=300)
    assert completed.returncode == 2
    assert "bfs-async" in completed.stderr


@pytest.mark.slow
def test_cpu_peers_script_on_tiny_graphs(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("cpu-peers", "--graphs", "kron,grid", "--scale", "8",
                           "--grid", "12x10", "--threads", "1", "--trials", "1",
                           "--store-dir", str(tmp_path), "--json", str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    cases = {row["case"]: row for row in rows_of(rows) if "verification" in row}
    assert set(cases) == {f"{graph}/{program}" for graph in ("kron", "grid")
                          for program in ("pagerank", "bfs", "sssp", "cc")}
    assert all(row["verification"]["status"] == "passed" for row in cases.values())
    assert cases["kron/pagerank"]["metrics"][0]["iterations"] == 20


@pytest.mark.slow
def test_cpu_peers_pagerank_to_a_tolerance(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("cpu-peers", "--graphs", "grid", "--grid", "12x10",
                           "--programs", "pagerank", "--pr-tolerance", "1e-4",
                           "--pr-iterations", "100", "--threads",
                           "1", "--trials", "1", "--store-dir", str(tmp_path), "--json",
                           str(rows), "--quiet")
    assert completed.returncode == 0, completed.stderr
    [case] = [row for row in rows_of(rows) if "verification" in row]
    assert case["verification"]["status"] == "passed"
    assert case["metrics"][0]["iterations"] < 100   # stopped at the tolerance
    refused = run_script("cpu-peers", "--pr-tolerance", "-1")
    assert refused.returncode == 2 and "--pr-tolerance -1.0" in refused.stderr


def test_cpu_peers_finds_the_hub_of_a_gapbs_serialized_graph(tmp_path):
    from bench import cpu_peers

    # GAPBS's layout: directed flag, edges, vertices, offsets, then the neighbours
    offsets = np.array([0, 2, 2, 7, 8], np.int64)
    path = tmp_path / "g.sg"
    with open(path, "wb") as file:
        file.write(np.array([0], np.uint8).tobytes())
        file.write(np.array([8, 4], np.int64).tobytes())
        file.write(offsets.tobytes())
        file.write(np.arange(8, dtype=np.int32).tobytes())
    assert cpu_peers.gapbs_hub(path) == 2
    short = tmp_path / "short.sg"
    short.write_bytes(path.read_bytes()[:30])
    with pytest.raises(ValueError, match="cut short"):
        cpu_peers.gapbs_hub(short)


def test_cpu_peers_reads_gapbs_average_time():
    from bench import cpu_peers

    output = "Read Time:           0.34472\nTrial Time:          0.01464\n" \
             "Average Time:        0.01422\n"
    assert cpu_peers.gapbs_average(output) == pytest.approx(0.01422)
    with pytest.raises(ValueError, match="Average Time"):
        cpu_peers.gapbs_average("Trial Time: 1.0\n")


def stand_in_gapbs(tmp_path: Path) -> tuple[Path, Path]:
    """(directory, log) of a stand-in GAPBS: each binary logs its arguments; the
    converter copies its edge list to the serialized file, the kernels print
    an average time."""
    gapbs = tmp_path / "gapbs"
    gapbs.mkdir()
    log = tmp_path / "calls.txt"
    for binary in ("converter", "bfs", "sssp", "cc", "pr"):
        script = gapbs / binary
        script.write_text(textwrap.dedent(f"""\
            #!/bin/sh
            echo "{binary} $*" >> {log}
            for last; do :; done
            if [ {binary} = converter ]; then cp "$2" "$last"; fi
            echo "Average Time: 0.25"
        """))
        script.chmod(0o755)
    return gapbs, log


def test_cpu_peers_gives_gapbs_the_same_grid_and_source(tmp_path):
    import argparse

    from bench import cpu_peers

    gapbs, log = stand_in_gapbs(tmp_path)
    graph = garaphpy.Graph.load("grid:4x3", store=tmp_path / "grid", progress=False)
    args = argparse.Namespace(scale=8, grid="4x3", delta=2, grid_delta=32, pr_iterations=20,
                              pr_tolerance=0.0, gapbs_trials=3)
    peer = cpu_peers.run_gapbs(gapbs, "grid", "sssp", graph, 5, args, tmp_path, threads=2)
    assert peer["seconds"] == 0.25
    calls = log.read_text().splitlines()
    edges = tmp_path / "gapbs-grid4x3.wel"
    assert calls[0] == f"converter -f {edges} -w -b {tmp_path / 'gapbs-grid4x3.wsg'}"
    assert calls[1] == (f"sssp -f {tmp_path / 'gapbs-grid4x3.wsg'} -n 3 -d 32 -r "
                        f"{int(graph.internal_ids([5])[0])}")
    written = np.loadtxt(edges, dtype=np.int64)
    in_offsets, sources, weights = graph.store.csc()
    targets = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    np.testing.assert_array_equal(written, np.column_stack([sources, targets, weights]))
    cpu_peers.run_gapbs(gapbs, "grid", "cc", graph, 5, args, tmp_path, threads=2)
    assert log.read_text().splitlines()[2:] == [
        f"converter -f {tmp_path / 'gapbs-grid4x3.el'} -b {tmp_path / 'gapbs-grid4x3.sg'}",
        f"cc -f {tmp_path / 'gapbs-grid4x3.sg'} -n 3"]
    cpu_peers.run_gapbs(gapbs, "grid", "pagerank", graph, 5, args, tmp_path, threads=2)
    args.pr_tolerance = 1e-4
    cpu_peers.run_gapbs(gapbs, "grid", "pagerank", graph, 5, args, tmp_path, threads=2)
    assert log.read_text().splitlines()[4:] == [
        f"pr -f {tmp_path / 'gapbs-grid4x3.sg'} -n 5 -i 20 -t 1e-30",
        f"pr -f {tmp_path / 'gapbs-grid4x3.sg'} -n 5 -i 20 -t 0.0001"]


def test_cpu_peers_gives_gapbs_a_road_file_with_ids_from_one(tmp_path):
    # a file in user ids 1..6 (no vertex 0), both directions of each road:
    # hashed weights, the hub as the source, the same edges and source for GAPBS
    import argparse

    from bench import cpu_peers
    from garaphpy.generators import hashed_edge_weights

    roads = np.array([[1, 2], [2, 3], [3, 4], [3, 5], [3, 6], [5, 6]])
    both = np.concatenate([roads, roads[:, ::-1]])
    path = tmp_path / "road-NE.txt.xz"
    with lzma.open(path, "wt") as file:
        file.write("# a road graph\n" + "".join(f"{u}\t{v}\n" for u, v in both))
    assert cpu_peers.graph_label(str(path)) == "road-NE"
    args = argparse.Namespace(scale=8, grid="4x3", delta=2, grid_delta=32, pr_iterations=20,
                              pr_tolerance=0.0, gapbs_trials=3)
    plain, weighted, source = cpu_peers.load_graphs(str(path), args, tmp_path)
    assert plain is weighted and source == 3          # vertex 3 has four roads
    assert sorted(plain.original_ids(np.arange(plain.num_vertices)).tolist()) == \
        [1, 2, 3, 4, 5, 6]
    gapbs, log = stand_in_gapbs(tmp_path)
    cpu_peers.run_gapbs(gapbs, str(path), "sssp", weighted, source, args, tmp_path, threads=2)
    edges = tmp_path / "gapbs-road-NE.wel"
    assert log.read_text().splitlines() == [
        f"converter -f {edges} -w -b {tmp_path / 'gapbs-road-NE.wsg'}",
        f"sssp -f {tmp_path / 'gapbs-road-NE.wsg'} -n 3 -d 32 -r "
        f"{int(weighted.internal_ids([3])[0])}"]
    written = np.loadtxt(edges, dtype=np.int64)
    in_user_ids = weighted.original_ids(written[:, :2].ravel()).reshape(-1, 2)
    expected = sorted(map(tuple, both.tolist()))
    assert sorted(map(tuple, in_user_ids.tolist())) == expected
    np.testing.assert_array_equal(
        written[:, 2], hashed_edge_weights(in_user_ids[:, 0], in_user_ids[:, 1], 255))
    assert written[:, 2].min() >= 1 and written[:, 2].max() <= 255


def test_cpu_peers_refuses_a_graph_that_is_no_file(tmp_path, capsys):
    from bench import cpu_peers

    with pytest.raises(SystemExit) as exit_:
        cpu_peers.main(["--graphs", f"grid,{tmp_path / 'absent.gr'}",
                        "--store-dir", str(tmp_path / "stores")])
    assert exit_.value.code == 2 and "absent.gr: neither kron, grid nor a file" in \
        capsys.readouterr().err
    assert not (tmp_path / "stores").exists()


def test_same_as_first_compares_every_result_with_the_first():
    from types import SimpleNamespace

    def result(values, activated=(1, 2)):
        return SimpleNamespace(values=np.array(values), iterations=[
            SimpleNamespace(activated=a) for a in activated])

    reference = {}
    exact = harness.same_as_first(reference, "the first run", counters=("activated",))
    assert exact(result([1.0, 2.0])) is None            # the first becomes the reference
    assert exact(result([1.0, 2.0])) is None
    assert exact(result([1.0, 2.0 + 1e-12])) == "values differ from the first run's"
    assert exact(result([1.0, 2.0], (1, 3))) == \
        "iteration counters differ from the first run's"
    close = harness.same_as_first(reference, "the first run", rtol=1e-9)
    assert close(result([1.0, 2.0 + 1e-12], (5,))) is None   # no counters asked
    assert close(result([1.0, 2.1])) is not None
    integers = harness.same_as_first({}, "x", rtol=0.5)
    assert integers(result([1, 2])) is None
    assert integers(result([1, 3])) is not None          # integers: bitwise, whatever rtol


def test_disk_benches_cut_a_small_store_into_pages_the_builder_accepts(tmp_path):
    # the page limit for "at least MIN_PAGES pages" is never below the page of
    # the largest shard: a small graph's rebuild ended in a ConfigError before
    from bench import disk

    first = disk.build(8, tmp_path / "first", [], None)
    page_bytes = disk.page_bytes_for(first, 1000)
    assert page_bytes % garaphpy.config.BLOCK_ALIGNMENT == 0
    again = disk.build(8, tmp_path / "again", [], page_bytes)
    assert len(again.pages) > len(first.pages)
    assert disk.page_bytes_for(first, 1) >= disk.page_data_bytes(first) // 2


def test_modes_budget_rows_one_per_fraction_below():
    from bench import modes

    assert modes.budget_rows(["above", "below"], [0.5], True) == [("above", None),
                                                                  ("below", 0.5)]
    assert modes.budget_rows(["above", "below"], [0.5, 0.25], True) == [
        ("above", None), ("below50%", 0.5), ("below25%", 0.25)]
    assert modes.budget_rows(["above", "below"], [0.5, 0.25], False) == [("above", None)]
    assert modes.budget_rows(["below"], [0.25], True) == [("below", 0.25)]


@pytest.mark.parametrize("given,complaint", [("0.5,2", "not a fraction in (0, 1)"),
                                             ("0.5,x", "is not a number"),
                                             ("0.25,0.25", "given twice")])
def test_modes_refuses_a_bad_below_fraction(given, complaint):
    completed = run_script("modes", "--budget-below", given, "--modes", "cpu", timeout=300)
    assert completed.returncode == 2
    assert f"--budget-below={given}" in completed.stderr and complaint in completed.stderr


@pytest.mark.slow
def test_modes_script_names_each_below_fraction(tmp_path):
    rows = tmp_path / "rows.jsonl"
    completed = run_script("modes", "--graphs", "grid", "--grid", "12x10", "--programs",
                           "bfs", "--below-programs", "bfs", "--modes", "cpu", "--budgets",
                           "above,below", "--budget-below", "0.5,0.25", "--trials", "1",
                           "--threads", "1", "--json", str(rows))
    assert completed.returncode == 0, completed.stderr
    table = completed.stdout
    assert "below50%" in table and "below25%" in table
    measured = [row for row in harness.read_rows(rows) if "params" in row]
    assert measured and all(row["params"]["budget"] == "above" for row in measured)


def test_modes_execution_option_reaches_every_run_and_its_row(tmp_path):
    rows = tmp_path / "rows.jsonl"
    sync = ["--execution", "sync"]
    for extra in ([], sync):
        completed = run_script("modes", "--graphs", "grid", "--grid", "12x10",
                               "--programs", "sssp", "--modes", "cpu", "--budgets", "above",
                               "--trials", "1", "--threads", "1", "--json", str(rows), *extra)
        assert completed.returncode == 0, completed.stderr
    measured = [row for row in harness.read_rows(rows) if "params" in row]
    executions = [{trial["execution"] for trial in row["metrics"]} for row in measured]
    assert executions == [{"async"}, {"sync"}]       # SSSP's own on the CPU, then the asked
    assert "iterations, sync" in completed.stderr
    assert "execution: cpu sssp sync" in completed.stdout


def _modes_with_three_cpu_modes(monkeypatch, wrong_mode=None):
    """bench/modes.py in this process, its gpu and hybrid runs made by the CPU
    (no GPU here): the order of the runs, by mode, is returned; ``wrong_mode``'s
    values are off by one at one vertex."""
    from bench import modes

    real = modes.one_run
    order = []

    def one_run(graph, program, mode, options):
        order.append(mode)
        result = real(graph, program, "cpu",
                      {k: v for k, v in options.items() if k != "gpu_memory"})
        values = np.array(result.values, copy=True)
        if mode == wrong_mode:
            values[0] += 1
        plan = result.plan if mode != "hybrid" else dataclasses.replace(
            result.plan, gpu_set_up={"choice": False, "cpu_seconds": 0.002,
                                     "gpu_seconds": 0.95, "gpu_set_up_seconds": 0.9})
        return SimpleNamespace(values=values, seconds=result.seconds, plan=plan,
                               num_iterations=result.num_iterations,
                               execution=result.execution, setup_seconds=result.setup_seconds,
                               converged=result.converged, stop_reason=result.stop_reason,
                               iterations=result.iterations)

    monkeypatch.setattr(modes, "one_run", one_run)
    monkeypatch.setattr(modes, "gpu_problem", lambda: None)
    monkeypatch.setattr(modes, "machine", modes.host_info)
    return modes, order


@pytest.mark.parametrize("interleave", [False, True])
def test_modes_interleave_runs_the_modes_trials_in_turns(tmp_path, monkeypatch, capsys,
                                                         interleave):
    modes, order = _modes_with_three_cpu_modes(monkeypatch)
    rows_file = tmp_path / "rows.jsonl"
    argv = ["--graphs", "grid", "--grid", "12x10", "--programs", "bfs", "--budgets", "above",
            "--trials", "2", "--threads", "1", "--store-dir", str(tmp_path / "st"),
            "--json", str(rows_file)] + (["--interleave"] if interleave else [])
    assert modes.main(argv) == 0
    if interleave:
        assert order == ["cpu", "gpu", "hybrid"] * 3
    else:
        assert order == ["cpu"] * 3 + ["gpu"] * 3 + ["hybrid"] * 3
    measured = [row for row in harness.read_rows(rows_file) if "params" in row]
    assert [row["case"].rsplit("/", 1)[1] for row in measured] == ["cpu", "gpu", "hybrid"]
    assert all(len(row["trials_s"]) == 2 and row["verification"]["status"] == "passed"
               for row in measured)
    summary = harness.read_rows(rows_file)[-1]["record"]
    entries = summary["rows"][0]["modes"]
    assert entries["cpu"]["check"] == {"ok": True, "reference": True, "reference_mode": "cpu"}
    assert entries["hybrid"]["check"]["ok"]
    assert entries["cpu"]["set_up_choice"] is None
    assert entries["hybrid"]["set_up_choice"] == {"chosen": "cpu", "cpu_seconds": 0.002,
                                                  "gpu_seconds": 0.95,
                                                  "gpu_set_up_seconds": 0.9}
    assert entries["hybrid"]["check"]["reference_mode"] == "cpu"
    turns = summary["rows"][0]["hybrid_over_min_per_turn"]
    if interleave:
        expected = [h / min(c, g) for h, c, g in zip(*(entries[m]["seconds"]
                                                      for m in ("hybrid", "cpu", "gpu")))]
        assert turns == pytest.approx(expected) and len(turns) == 2
    else:
        assert turns is None
    # the oracle bound beside the modes, from the median runs' iterations
    records = {m: [r["seconds"] for r in entries[m]["records"]] for m in ("cpu", "gpu")}
    expected = modes_oracle.oracle(records["cpu"], records["gpu"])
    assert summary["rows"][0]["bound_over_best"] == pytest.approx(expected["bound_over_best"])
    assert summary["rows"][0]["oracle_over_best"] == pytest.approx(expected["oracle_over_best"])
    captured = capsys.readouterr()
    assert "hyb/min(c,g)" in captured.out and "bound" in captured.out
    assert "cpu (cpu est. 2.0 ms, GPU est. 950.0 ms)" in captured.out
    assert ("in turns" in captured.err) == interleave
    assert ("turn by turn" in captured.out) == interleave


def test_modes_ratios_pair_the_hybrids_trials_with_the_faster_of_each_turn():
    from bench import modes

    def entry(*seconds, status="ok"):
        return {"status": status, "median_seconds": float(np.median(seconds)),
                "seconds": list(seconds)}

    entries = {"cpu": entry(3.0, 1.0, 3.0), "gpu": entry(2.0, 2.0, 1.0),
               "hybrid": entry(1.0, 1.5, 2.0)}
    out = modes.ratios(entries, in_turns=True)
    assert out["hybrid_over_min_per_turn"] == pytest.approx([0.5, 1.5, 2.0])
    # medians alone: hybrid 1.5 against the GPU's 2.0
    assert out["hybrid_over_min_cpu_gpu"] == pytest.approx(0.75)
    assert modes.ratios(entries)["hybrid_over_min_per_turn"] is None
    # a mode that did not run leaves the turns to the other one
    entries["gpu"] = {"status": "skipped", "reason": "no GPU"}
    assert modes.ratios(entries, in_turns=True)["hybrid_over_min_per_turn"] == \
        pytest.approx([1 / 3, 1.5, 2 / 3])
    entries["hybrid"] = {"status": "skipped", "reason": "no GPU"}
    assert modes.ratios(entries, in_turns=True)["hybrid_over_min_per_turn"] is None


def test_modes_run_choices_name_each_change_of_the_per_run_choice():
    from bench import modes

    def record(iteration, choice=None):
        decisions = {} if choice is None else {"run_processors": {"choice": choice}}
        return {"iteration": iteration, "decisions": decisions}

    records = [record(0, "cpu"), record(1), record(2, "cpu"), record(3, "gpu"), record(4)]
    assert modes.run_choices(records) == "cpu@0, gpu@3"
    assert modes.run_choices([record(0)]) == "-"


def test_modes_oracle_bound_is_in_the_row_where_both_modes_ran_alike():
    from bench import modes

    def entry(*seconds, status="ok"):
        return {"status": status, "median_seconds": sum(seconds),
                "seconds": [sum(seconds)], "records": [{"seconds": s} for s in seconds]}

    entries = {"cpu": entry(1.0, 4.0), "gpu": entry(2.0, 2.0), "hybrid": entry(2.0, 2.0)}
    out = modes.ratios(entries)
    # best single mode 4.0; oracle 1 + 2; bound 1*2/3 + 4*2/6
    assert out["oracle_over_best"] == pytest.approx(3.0 / 4.0)
    assert out["bound_over_best"] == pytest.approx((2.0 / 3.0 + 8.0 / 6.0) / 4.0)
    assert out["hybrid_over_min_cpu_gpu"] == pytest.approx(1.0)
    entries["gpu"] = entry(2.0, 2.0, 1.0)       # iterations differ: no bound
    assert modes.ratios(entries)["bound_over_best"] is None
    entries["gpu"] = {"status": "skipped", "reason": "no GPU"}
    assert modes.ratios(entries)["oracle_over_best"] is None


def test_modes_interleaved_still_catches_a_mode_with_wrong_values(tmp_path, monkeypatch):
    modes, order = _modes_with_three_cpu_modes(monkeypatch, wrong_mode="hybrid")
    argv = ["--graphs", "grid", "--grid", "12x10", "--programs", "bfs", "--budgets", "above",
            "--trials", "2", "--threads", "1", "--store-dir", str(tmp_path / "st"),
            "--interleave", "--quiet"]
    assert modes.main(argv) == 1
    assert order == ["cpu", "gpu", "hybrid"] * 3


def test_modes_interleaved_skips_a_mode_that_cannot_run_and_measures_the_rest(tmp_path,
                                                                              monkeypatch):
    modes, order = _modes_with_three_cpu_modes(monkeypatch)
    counting = modes.one_run

    def one_run(graph, program, mode, options):
        if mode == "gpu":
            order.append(mode)
            raise modes.GpuMemoryError("the budget holds no page")
        return counting(graph, program, mode, options)

    monkeypatch.setattr(modes, "one_run", one_run)
    rows_file = tmp_path / "rows.jsonl"
    argv = ["--graphs", "grid", "--grid", "12x10", "--programs", "bfs", "--budgets", "above",
            "--trials", "2", "--threads", "1", "--store-dir", str(tmp_path / "st"),
            "--interleave", "--quiet", "--json", str(rows_file)]
    assert modes.main(argv) == 0
    assert order == ["cpu", "gpu", "hybrid", "cpu", "hybrid", "cpu", "hybrid"]
    entries = harness.read_rows(rows_file)[-1]["record"]["rows"][0]["modes"]
    assert entries["gpu"]["status"] == "skipped" and "no page" in entries["gpu"]["reason"]
    assert entries["hybrid"]["status"] == "ok"


def test_modes_below_budgets_size_the_vertex_data_of_the_runs_execution(monkeypatch):
    from bench import modes

    asked = []

    def vertex_bytes(graph, program, sources, execution, n_streams):
        asked.append(execution)
        return {"sync": 1000, "async": 600}[execution], "measured"

    monkeypatch.setattr(modes, "vertex_bytes", vertex_bytes)
    sizes = [400, 300, 300]
    sssp = modes.get_program("sssp")          # async on every processor
    args = modes.argparse.Namespace(execution=None, n_streams=None)
    budget, why, sizing = modes.below_budgets(None, sssp, None, sizes, 0.5, args)
    assert why is None and budget == 600 + 500 and asked == ["async"]
    assert sizing == {"vertex_bytes": 600, "vertex_bytes_how": "measured"}
    asked.clear()
    args.execution = "sync"                   # the asked execution's vertex data
    budget, why, _ = modes.below_budgets(None, sssp, None, sizes, 0.5, args)
    assert budget == 1000 + 500 and asked == ["sync"]
    budget, why, _ = modes.below_budgets(None, sssp, None, [400], 0.5, args)
    assert budget is None and "nothing to stream" in why


def test_modes_table_marks_resident_pages_and_runs_left_to_the_cpu(capsys):
    from bench import modes

    records = [{"mode": "cpu", "gpu_pages": 0}, {"mode": "hybrid", "gpu_pages": 3},
               {"mode": "cpu", "gpu_pages": 0}]
    assert [modes.gpu_took_part(r) for r in records] == [False, True, False]
    assert modes.hybrid_switches(records) == [(1, True), (2, False)]

    def entry(seconds, streamed, gpu_iterations, execution):
        return {"status": "ok", "median_seconds": seconds, "iterations": [7],
                "streamed": streamed, "gpu_iterations": gpu_iterations,
                "execution": execution}

    row = {"program": "sssp", "graph_variant": "grid:4x4 (w)", "budget": "below",
           "budget_fraction": 0.5, "gpu_memory": 3 << 20,
           "modes": {"cpu": entry(1.0, False, 0, "async"),
                     "gpu": entry(2.0, False, 7, "async"),
                     "hybrid": entry(1.0, False, 0, "async")}}
    row.update(modes.ratios(row["modes"]))
    modes.print_table([row], ["cpu", "gpu", "hybrid"], 3)
    line = next(text for text in capsys.readouterr().out.splitlines()
                if text.startswith("sssp"))
    assert "below 3072 KiB" in line
    assert "2.0000 (2.00)*" in line and "1.0000 (1.00)c" in line
    assert "1.0000 (1.00) " in line         # the CPU alone: no budget, no mark


def test_modes_weighs_whole_calls_set_up_included(capsys):
    """The whole-call table adds each run's set-up to its iterations: a hybrid
    whose iterations are slower but whose set-up is cheaper can be the better
    call, and the ratio says so."""
    from bench import modes

    def entry(setups, seconds):
        return {"status": "ok", "setup_seconds": sorted(setups)[1],
                "whole_seconds": [a + b for a, b in zip(setups, seconds)]}

    row = {"program": "bfs", "graph_variant": "kron:22", "budget": "above",
           "modes": {"cpu": entry([0.10, 0.11, 0.12], [0.017, 0.018, 0.016]),
                     "gpu": entry([0.30, 0.31, 0.29], [0.008, 0.008, 0.009]),
                     "hybrid": entry([0.11, 0.12, 0.10], [0.019, 0.020, 0.018])}}
    for mode, entry_ in row["modes"].items():
        entry_["median_seconds"] = sorted(entry_["whole_seconds"])[1]    # ratios() reads it
    row.update(modes.ratios(row["modes"]))
    modes.print_whole_calls([row], ["cpu", "gpu", "hybrid"])
    line = next(text for text in capsys.readouterr().out.splitlines()
                if text.startswith("bfs"))
    assert row["hybrid_whole_over_min_cpu_gpu"] == pytest.approx(0.129 / 0.128)
    assert "0.1280 (0.1100)" in line and "0.3080 (0.3000)" in line and line.endswith("1.01")


def test_modes_counts_gpu_iterations_that_copy_no_page_as_the_gpus():
    """The device loop's iterations and the GPU's passes over the frontier's edges
    or its kept pages copy no page (gpu_pages 0): they are the GPU's, not the
    CPU's, in the switches, the time split and the count of GPU iterations."""
    from bench import modes

    hybrid = [{"mode": "cpu", "gpu_pages": 0, "cpu_pages": 6, "seconds": 0.002},
              {"mode": "hybrid", "gpu_pages": 3, "cpu_pages": 1, "seconds": 0.004,
               "gpu_busy_seconds": 0.003},
              {"mode": "hybrid", "gpu_pages": 0, "cpu_pages": 0, "seconds": 0.001,
               "gpu_busy_seconds": 0.0},                 # a device-loop step
              {"mode": "hybrid", "gpu_pages": 0, "cpu_pages": 6, "seconds": 0.003},
              {"mode": "cpu", "gpu_pages": 0, "cpu_pages": 6, "seconds": 0.002}]
    assert [modes.gpu_took_part(r) for r in hybrid] == [False, True, True, False, False]
    # the GPU joins at 1 and leaves at 3 (the CPU took every page): one leave, not two
    assert modes.hybrid_switches(hybrid) == [(1, True), (3, False)]
    split = modes.time_split(hybrid)
    assert split["gpu_iterations"] == 2 and split["cpu_alone_iterations"] == 3
    assert split["cpu_alone_seconds"] == pytest.approx(0.007)

    gpu_alone = [{"mode": "gpu", "gpu_pages": 12, "seconds": 0.004},
                 {"mode": "gpu", "gpu_pages": 0, "seconds": 0.003}]   # a selective pass
    split = modes.time_split(gpu_alone)
    assert split["cpu_alone_iterations"] == 0 and split["gpu_iterations"] == 2
    assert modes.hybrid_switches(gpu_alone) == []
    # records of an older JSON, without page counts: the mode decides
    assert modes.gpu_took_part({"mode": "hybrid"}) and not modes.gpu_took_part({"mode": "cpu"})


def test_modes_time_split_separates_cpu_alone_gpu_busy_dispatch_and_host(capsys):
    from bench import modes

    records = [
        {"mode": "cpu", "gpu_pages": 0, "seconds": 0.004},
        {"mode": "hybrid", "gpu_pages": 2, "seconds": 0.010, "gpu_busy_seconds": 0.006,
         "dispatch_seconds": 0.001, "cpu_busy_seconds": 0.008},
        {"mode": "gpu", "gpu_pages": 3, "seconds": 0.002, "gpu_busy_seconds": 0.0015},
        {"mode": "cpu", "gpu_pages": 0, "seconds": 0.001, "dispatch_seconds": 0.0005},
    ]
    split = modes.time_split(records)
    assert split["cpu_alone_iterations"] == 2 and split["gpu_iterations"] == 2
    assert split["cpu_alone_seconds"] == pytest.approx(0.005)
    assert split["gpu_seconds"] == pytest.approx(0.012)
    assert split["gpu_busy_seconds"] == pytest.approx(0.0075)
    assert split["dispatch_seconds"] == pytest.approx(0.001)      # of the GPU's iterations
    assert split["host_seconds"] == pytest.approx(0.012 - 0.0075 - 0.001)
    row = {"program": "sssp", "graph_variant": "rmat:10 (w)", "budget": "below",
           "modes": {"cpu": {"status": "ok", "records": records[:1]},
                     "gpu": {"status": "ok", "records": records[2:3]},
                     "hybrid": {"status": "ok", "records": records}}}
    modes.add_time_splits([row])
    assert "time_split" in row["modes"]["gpu"] and "time_split" not in row["modes"]["cpu"]
    kept = {mode: dict(entry) for mode, entry in row["modes"].items()}
    modes.print_time_split([row])
    assert row["modes"] == kept       # printing changes nothing
    out = capsys.readouterr().out
    assert "where the time goes" in out
    hybrid_line = next(line for line in out.splitlines() if " hybrid " in line)
    assert hybrid_line.split()[-7:] == ["2", "5.00", "2", "12.00", "7.50", "1.00", "3.50"]


def test_modes_kron_graph_is_the_rmat_graph_made_symmetric(tmp_path):
    from bench import modes

    args = modes.argparse.Namespace(graphs="kron", scale=8, data=str(tmp_path), snap=None,
                                    build_option=[])
    (case,) = modes.graph_cases(args, tmp_path)
    assert case.label == "kron:8" and case.kind == "kron"
    directed = garaphpy.Graph.load("rmat:8", store=tmp_path / "directed", progress=False)
    offsets, sources, _ = directed.store.csc()
    targets = np.repeat(np.arange(directed.num_vertices), np.diff(np.asarray(offsets)))
    src = directed.original_ids(np.asarray(sources, np.int64))
    dst = directed.original_ids(targets)
    both = {(int(a), int(b)) for a, b in zip(src, dst)}
    both |= {(b, a) for a, b in both}
    kron = case.graph(False)
    k_offsets, k_sources, _ = kron.store.csc()
    k_targets = np.repeat(np.arange(kron.num_vertices), np.diff(np.asarray(k_offsets)))
    edges = {(int(a), int(b)) for a, b in zip(kron.original_ids(np.asarray(k_sources, np.int64)),
                                              kron.original_ids(k_targets))}
    assert edges == both
