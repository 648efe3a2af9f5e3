"""Checkpoints and resume (Garaph section 2.2, "Fault Tolerance").

Crashes are real where it matters: ``python -m garaphpy.run`` in a
subprocess is killed with SIGKILL at random points after some checkpoints
exist (possibly in the middle of writing the next one), resumed, killed
again, and finally resumed to completion; synchronous programs must then
give bitwise the uninterrupted run's values and records' iteration
numbering, asynchronous ones a result their verifier accepts.  The file
format's damage detection, the refusal to resume a different run, and
Ctrl-C are tested in-process where a subprocess adds nothing.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import random
import shlex
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numba
import numpy as np
import pytest

import garaphpy
from garaphpy import api
from garaphpy.configfile import load_config
from garaphpy.errors import CheckpointError, ConfigError, RunInterrupted
from garaphpy.cli import graph_from_config, main
from garaphpy.scheduler import checkpoint
from garaphpy.scheduler.checkpoint import (CheckpointWarning, DamagedCheckpointError,
                                           list_checkpoints, read_checkpoint, write_checkpoint)
from garaphpy.scheduler.records import IterationRecord
from helpers import REPOSITORY as REPO

#: threads of every run here, in-process and in subprocesses: float sums are
#: bitwise reproducible for one thread count
THREADS = min(2, numba.config.NUMBA_NUM_THREADS)
#: seeded, so a failing kill point can be replayed; the kill's timing is not
RANDOM = random.Random(20261122)

PAGERANK = dict(graph="rmat:14", program="pagerank",
                run='tolerance = 0.0\nmax_iterations = 40\n',
                store="max_shard_edges = 2000\nmax_page_bytes = 60000\n")
#: synchronous, as asked: SSSP runs asynchronously on the CPU alone by default, whose
#: iterations vary with the threads' timing, and these tests compare iterations exactly
SSSP = dict(graph="grid:100x80", program="sssp", run='sources = 0\nexecution = "sync"\n',
            store="")
ASYNC_PAGERANK = dict(graph="rmat:14", program="pagerank",
                      run='execution = "async"\ntolerance = 1e-9\nmax_iterations = 200\n',
                      store="max_shard_edges = 2000\nmax_page_bytes = 60000\n")


def write_config(directory: Path, spec: dict, every: int | None = 1, name: str = "run.toml",
                 mode: str | None = None) -> Path:
    """A CLI configuration for ``spec``; its store is shared by the module's tests."""
    directory.mkdir(parents=True, exist_ok=True)
    store = directory.parent / f"store-{spec['graph'].replace(':', '-')}"
    checkpoints = f"checkpoint_every = {every}\n" if every is not None else ""
    mode_line = f'mode = "{mode}"\n' if mode is not None else ""
    path = directory / name
    path.write_text(f'graph = "{spec["graph"]}"\n[store]\npath = "{store}"\n{spec["store"]}'
                    f'[run]\nprogram = "{spec["program"]}"\nthreads = {THREADS}\n{mode_line}'
                    f'{spec["run"]}{checkpoints}[output]\nvalues = "values.npy"\n')
    return path


def uninterrupted(config: Path):
    """The reference: the same run, in-process, without checkpoints (in the
    configured mode)."""
    from garaphpy.programs import get_program

    settings = load_config(config)
    options = settings["run"]
    graph = graph_from_config(settings, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.NotConvergedWarning)
        return garaphpy.run(graph, get_program(options["program"]), mode=options["mode"],
                            execution=options["execution"], tolerance=options["tolerance"],
                            max_iterations=options["max_iterations"],
                            sources=options["sources"], threads=THREADS)


def start_cli(config: Path, *flags: str) -> subprocess.Popen:
    def default_sigint():  # a shell's background job inherits SIGINT ignored
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return subprocess.Popen(
        [sys.executable, "-m", "garaphpy.run", str(config), "-q", *flags], cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "NUMBA_NUM_THREADS": str(THREADS)}, preexec_fn=default_sigint)


def newest_iteration(directory: Path) -> int:
    found = list_checkpoints(directory)
    return int(found[-1].name.split("-")[1].split(".")[0]) if found else 0


def wait_for_checkpoint(process: subprocess.Popen, directory: Path, iteration: int,
                        timeout: float = 300.0) -> int:
    """Wait until a checkpoint after at least ``iteration`` iterations exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        newest = newest_iteration(directory)
        if newest >= iteration:
            return newest
        if process.poll() is not None:
            out, err = process.communicate()
            pytest.fail(f"the run ended (exit {process.returncode}) before checkpoint "
                        f"{iteration}; make it longer\n{out}\n{err}")
        time.sleep(0.002)
    process.kill()
    pytest.fail(f"no checkpoint {iteration} within {timeout} s")


def kill_after(config: Path, directory: Path, checkpoints_ahead: int, *flags: str) -> int:
    """Run the CLI, SIGKILL it soon after ``checkpoints_ahead`` more checkpoints; their count."""
    target = newest_iteration(directory) + checkpoints_ahead
    process = start_cli(config, *flags)
    reached = wait_for_checkpoint(process, directory, target)
    time.sleep(RANDOM.uniform(0.0, 0.01))  # anywhere in the next iteration or write
    process.kill()
    process.communicate()
    assert process.returncode == -signal.SIGKILL
    assert list_checkpoints(directory), "the run completed before the kill; make it longer"
    return reached


def values_of(config: Path) -> np.ndarray:
    table = np.load(config.parent / "values.npy")
    return table[table.dtype.names[1]]          # named after the program's value


def records_of(config: Path) -> list[dict]:
    lines = (config.parent / "values.iterations.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


# ------------------------------------------------------- the file format --
def _records(count: int) -> list[IterationRecord]:
    return [IterationRecord(iteration=i, mode="cpu", direction="pull", forced=False,
                            active_fraction=0.5, rho=1.0, active_vertices=10, l1_change=0.1 * i,
                            seconds=1e-3 * i) for i in range(count)]


IDENTITY = {"graph": {"name": "g"}, "program": "P", "value_dtype": "<f8"}


@pytest.mark.parametrize("frontier,encoding", [
    (np.arange(1000), "all"),                       # every vertex
    (np.arange(0, 1000, 3), "bitmap"),              # sorted, dense: |V| bits are smaller
    (np.array([999, 5, 17]), "list"),               # notify order kept as it is
    (np.array([3, 400]), "list"),                   # sorted, sparse: the list is smaller
    (np.zeros(0, np.int64), "list"),
])
def test_write_read_round_trip(tmp_path, frontier, encoding):
    values = np.random.default_rng(1).random(1000)
    values[7] = np.inf
    path = write_checkpoint(tmp_path, 5, IDENTITY, values, frontier, _records(5), threads=2)
    assert path.name == "checkpoint-000000005.gck"
    assert sorted(os.listdir(tmp_path)) == [path.name]     # no temporary left
    back = read_checkpoint(path)
    assert back.iteration == 5 and back.threads == 2 and back.identity == IDENTITY
    np.testing.assert_array_equal(back.values, values)
    assert back.values.dtype == values.dtype
    np.testing.assert_array_equal(back.frontier, frontier)
    assert back.frontier.dtype == np.int64
    assert [r.as_dict() for r in back.records] == [r.as_dict() for r in _records(5)]
    assert json.loads(path.read_bytes()[16:16 + int.from_bytes(
        path.read_bytes()[12:16], "little")])["frontier_encoding"] == encoding


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32, np.bool_])
def test_value_types_round_trip(tmp_path, dtype):
    values = (np.arange(77) % 5).astype(dtype)
    back = read_checkpoint(write_checkpoint(tmp_path, 1, IDENTITY, values, np.arange(3),
                                            _records(1)))
    assert back.values.dtype == dtype
    np.testing.assert_array_equal(back.values, values)


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "truncated":
        path.write_bytes(data[: len(data) * 2 // 3])
    elif how == "bit-flipped":
        data[len(data) // 2] ^= 0x10
        path.write_bytes(data)
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "header bit-flipped":
        data[20] ^= 0x01
        path.write_bytes(data)


@pytest.mark.parametrize("how,message", [("truncated", "truncated"),
                                         ("bit-flipped", "checksum mismatch"),
                                         ("empty", "truncated"),
                                         ("header bit-flipped", "checksum mismatch")])
def test_damage_is_detected_and_named(tmp_path, how, message):
    path = write_checkpoint(tmp_path, 3, IDENTITY, np.arange(5000, dtype=np.float64),
                            np.arange(5000), _records(3))
    _damage(path, how)
    with pytest.raises(DamagedCheckpointError, match=message) as caught:
        read_checkpoint(path)
    assert str(path) in str(caught.value)


def test_not_a_checkpoint(tmp_path):
    path = tmp_path / "checkpoint-000000001.gck"
    path.write_bytes(b"hello, world" * 10)
    with pytest.raises(DamagedCheckpointError, match="not a garaphpy checkpoint"):
        read_checkpoint(path)


# ----------------------------------------------------- runs, in-process --
@pytest.fixture(scope="module")
def rmat():
    return garaphpy.Graph.load("rmat:10", progress=False, max_page_bytes=20000,
                               max_shard_edges=1000)


@pytest.fixture(scope="module")
def pagerank_reference(rmat):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.NotConvergedWarning)
        return garaphpy.run(rmat, "pagerank", tolerance=0.0, max_iterations=25, threads=THREADS,
                           mode="cpu")


class Crash(Exception):
    """Stands for a fault in the middle of a run."""


def crash_at(iteration: int):
    def on_iteration(record):
        if record.iteration == iteration:
            raise Crash

    return on_iteration


def pagerank(rmat, directory, **options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.NotConvergedWarning)
        return garaphpy.run(rmat, "pagerank", tolerance=0.0, max_iterations=25,
                            threads=THREADS, checkpoint_dir=directory,
                            **{"mode": "cpu", **options})


def test_resume_after_a_crash_continues_exactly(rmat, pagerank_reference, tmp_path):
    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        pagerank(rmat, directory, checkpoint_every=3, on_iteration=crash_at(13))
    assert [p.name for p in list_checkpoints(directory)] == [
        "checkpoint-000000009.gck", "checkpoint-000000012.gck"]      # the newest 2 kept
    seen = []
    result = pagerank(rmat, directory, checkpoint_every=3, resume=True,
                      on_iteration=lambda r: seen.append(r.iteration))
    assert seen == list(range(12, 25))
    np.testing.assert_array_equal(result.values, pagerank_reference.values)
    assert [r.iteration for r in result.iterations] == list(range(25))
    assert [r.l1_change for r in result.iterations] == \
        [r.l1_change for r in pagerank_reference.iterations]
    assert result.num_iterations == 25 and result.stop_reason == "iteration limit"
    assert result.resumed_from.endswith("checkpoint-000000012.gck")
    assert "resumed from" in result.summary()
    assert not directory.exists()       # removed once the run completed


@pytest.mark.parametrize("how", ["truncated", "bit-flipped"])
def test_damaged_newest_falls_back_to_the_previous(rmat, pagerank_reference, tmp_path, how):
    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        pagerank(rmat, directory, checkpoint_every=2, on_iteration=crash_at(11))
    previous, newest = list_checkpoints(directory)
    _damage(newest, how)
    with pytest.warns(CheckpointWarning, match=newest.name) as caught:
        result = pagerank(rmat, directory, checkpoint_every=2, resume=True)
    assert how.split("-")[0] in str(caught[0].message) or "checksum" in str(caught[0].message)
    assert "trying the previous one" in str(caught[0].message)
    assert result.resumed_from == str(previous)
    np.testing.assert_array_equal(result.values, pagerank_reference.values)
    assert (directory / (newest.name + ".damaged")).exists()    # kept for inspection


def test_every_checkpoint_damaged_is_a_clear_error(rmat, tmp_path):
    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        pagerank(rmat, directory, checkpoint_every=2, on_iteration=crash_at(11))
    found = list_checkpoints(directory)
    for path, how in zip(found, ["truncated", "bit-flipped"]):
        _damage(path, how)
    with pytest.warns(CheckpointWarning), \
            pytest.raises(CheckpointError, match="no valid checkpoint") as caught:
        pagerank(rmat, directory, resume=True)
    for path in found:
        assert path.name in str(caught.value)
    assert "truncated" in str(caught.value) and "checksum mismatch" in str(caught.value)


@pytest.mark.parametrize("change,needle", [
    (dict(program_options={"damping": 0.5}), "constants"),
    (dict(execution="async"), "execution"),
    (dict(max_iterations=30), "max_iterations"),
    (dict(direction="pull"), "direction"),
])
def test_resuming_a_different_run_is_refused(rmat, tmp_path, change, needle):
    from garaphpy.programs import PageRank

    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        pagerank(rmat, directory, checkpoint_every=2, on_iteration=crash_at(5))
    change = dict(change)
    program = PageRank(**change.pop("program_options", {}))
    options = dict(tolerance=0.0, max_iterations=25, threads=THREADS, checkpoint_dir=directory,
                   resume=True, mode="cpu")
    options.update(change)
    with pytest.raises(CheckpointError, match="different run") as caught:
        garaphpy.run(rmat, program, **options)
    assert needle in str(caught.value) and "resume it with the run's own" in str(caught.value)
    assert list_checkpoints(directory)      # nothing lost by the refusal


def test_each_record_is_converted_once_however_many_checkpoints_hold_it(rmat, tmp_path,
                                                                         monkeypatch):
    """Every checkpoint holds all earlier records; converting them all again at
    each checkpoint made long checkpointed runs quadratic in their iterations."""
    conversions = []
    plain = IterationRecord.as_dict
    monkeypatch.setattr(IterationRecord, "as_dict",
                        lambda record: conversions.append(record.iteration) or plain(record))
    pagerank(rmat, tmp_path / "ck", checkpoint_every=1)
    assert len(conversions) <= 2 * 25            # each once, the newest again when next held
    rows = checkpoint.RecordRows()
    records = _records(6)
    assert rows(records[:4]) == [record.as_dict() for record in records[:4]]
    records[2] = IterationRecord(**{**records[2].as_dict(), "seconds": 9.0,
                                    "workers": ()})
    assert rows(records) == [record.as_dict() for record in records]


def test_a_checkpoint_of_an_earlier_default_execution_resumes_in_its_own(tmp_path):
    """SSSP's default execution was sync on the GPU alone before it became
    async: a checkpoint written sync resumes sync when the run asks for no
    execution (warned), and is refused when it asks for async or differs in
    more than its execution."""
    grid = garaphpy.Graph.load("grid:30x20", progress=False)
    directory = tmp_path / "ck"
    options = dict(sources=[0], mode="cpu", threads=THREADS, checkpoint_dir=directory,
                   checkpoint_every=2)
    whole = garaphpy.run(grid, "sssp", sources=[0], mode="cpu", threads=THREADS,
                         execution="sync")
    with pytest.raises(Crash):
        garaphpy.run(grid, "sssp", execution="sync", on_iteration=crash_at(5), **options)
    with pytest.raises(CheckpointError, match="execution 'sync', this run 'async'"):
        garaphpy.run(grid, "sssp", execution="async", resume=True, **options)
    with pytest.raises(CheckpointError, match="different run") as caught:
        garaphpy.run(grid, "sssp", max_iterations=10_000, resume=True, **options)
    assert "execution" in str(caught.value) and "max_iterations" in str(caught.value)
    with pytest.warns(CheckpointWarning, match="written by a sync run; resuming it sync"):
        resumed = garaphpy.run(grid, "sssp", resume=True, **options)
    assert resumed.execution == "sync" and resumed.resumed_from is not None
    assert resumed.num_iterations == whole.num_iterations
    np.testing.assert_array_equal(resumed.values, whole.values)


def test_resuming_onto_another_graph_or_program_or_sources_is_refused(tmp_path):
    grid = garaphpy.Graph.load("grid:12x10", progress=False)
    other = garaphpy.Graph.load("grid:10x12", progress=False)
    directory = tmp_path / "ck"
    with pytest.raises(Crash):
        garaphpy.run(grid, "sssp", sources=[3], threads=THREADS, checkpoint_dir=directory,
                     checkpoint_every=1, on_iteration=crash_at(4))
    for graph, program, sources, needle in [(other, "sssp", [3], "graph grid:12x10"),
                                            (grid, "sssp", [4], "sources [3], this run [4]"),
                                            (grid, "sswp", [3], "program")]:
        with pytest.raises(CheckpointError, match="refusing to resume") as caught:
            garaphpy.run(graph, program, sources=sources, threads=THREADS,
                         checkpoint_dir=directory, resume=True)
        assert needle in str(caught.value)


def test_directory_rules(rmat, tmp_path):
    directory = tmp_path / "ck"
    with pytest.warns(CheckpointWarning, match="no checkpoint to resume from.*beginning"):
        fresh = pagerank(rmat, directory, resume=True)     # killed before its first one
    np.testing.assert_array_equal(fresh.values, pagerank(rmat, None).values)
    assert list_checkpoints(directory) == []
    with pytest.raises(Crash):
        pagerank(rmat, directory, checkpoint_every=4, on_iteration=crash_at(9))
    # starting afresh over an earlier run's checkpoints would lose them
    with pytest.raises(CheckpointError, match="earlier run.*resume"):
        pagerank(rmat, directory)
    # one run per directory
    with open(directory / ".garaphpy-checkpoints.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(CheckpointError, match="another run"):
            pagerank(rmat, directory, resume=True)
    # a temporary left by a crash in the middle of a write is ignored and removed
    (directory / ".checkpoint-000000012.gck.tmp-999").write_bytes(b"half")
    pagerank(rmat, directory, resume=True)
    assert not directory.exists()


@pytest.mark.parametrize("arguments,needle", [
    (dict(checkpoint_every=-1), "checkpoint_every"),
    (dict(checkpoint_every=1.5), "checkpoint_every"),
    (dict(resume=True, checkpoint_dir=None), "checkpoint_dir"),
    (dict(resume="yes"), "resume"),
])
def test_bad_arguments_are_named(rmat, tmp_path, arguments, needle):
    options = {"checkpoint_dir": tmp_path / "ck", **arguments}
    with pytest.raises(ConfigError, match=needle):
        garaphpy.run(rmat, "pagerank", **options)


def test_async_resume_is_verified(tmp_path):
    graph = garaphpy.Graph.load("rmat:10", progress=False, max_page_bytes=20000,
                               max_shard_edges=1000)
    directory = tmp_path / "ck"
    options = dict(execution="async", tolerance=1e-9, threads=THREADS,
                   checkpoint_dir=directory, checkpoint_every=2)
    with pytest.raises(Crash):
        garaphpy.run(graph, "pagerank", on_iteration=crash_at(7), **options)
    result = garaphpy.run(graph, "pagerank", resume=True, **options)
    assert result.converged and result.iterations[0].iteration == 0
    assert result.program.verify(graph, result).ok


@pytest.mark.parametrize("name", ["pagerank", "sssp", "cc"])
def test_async_checkpoints_after_pages_resume_to_a_verified_result(tmp_path, name,
                                                                   monkeypatch):
    # CC's labels from its ids: the union-find start would end the run before the crash
    labels_from_ids = {"union_find_start", "gpu_union_find_start"}
    graph = garaphpy.Graph.load("rmat:10", progress=False, max_page_bytes=4000,
                                max_shard_edges=300, generator_options={"weighted": True})
    pages = len((graph.as_undirected() if name == "cc" else graph).store.pages)
    assert pages > 6
    directory = tmp_path / "ck"
    sources = [int(graph.original_ids(np.argmax(graph.store.out_degree)))] \
        if name == "sssp" else None
    options = dict(execution="async", threads=THREADS, sources=sources, direction="pull",
                   checkpoint_dir=directory, checkpoint_every=0, checkpoint_pages=3)
    whole = api.execute(graph, name, execution="async", threads=THREADS, sources=sources,
                        direction="pull", turned_off=labels_from_ids)
    with pytest.raises(Crash):
        api.execute(graph, name, on_iteration=crash_at(1), turned_off=labels_from_ids,
                    **options)
    written = list_checkpoints(directory)
    assert written and all(".p" in path.name for path in written)
    newest = read_checkpoint(written[-1])
    # the crash came after iteration 1: the newest is inside it, 3 pages after the one before
    assert newest.iteration == 1 and 0 < newest.pages <= pages
    previous = read_checkpoint(written[-2])
    assert (previous.iteration, previous.pages + 3) in ((1, newest.pages),
                                                        (0, newest.pages + pages))
    assert newest.frontier.size == graph.num_vertices or name == "cc"
    assert len(newest.records) == 1
    result = api.execute(graph, name, resume=True, turned_off=labels_from_ids, **options)
    assert result.converged and [r.iteration for r in result.iterations] == \
        list(range(result.num_iterations))
    assert result.program.verify(result.graph, result).ok
    if name in ("sssp", "cc"):
        np.testing.assert_array_equal(result.values, whole.values)


def test_checkpoints_after_pages_are_for_asynchronous_runs_only(rmat, tmp_path):
    with pytest.raises(ConfigError, match="only asynchronous runs checkpoint after pages"):
        garaphpy.run(rmat, "pagerank", execution="sync", checkpoint_dir=tmp_path / "c",
                     checkpoint_pages=2)
    with pytest.raises(ConfigError, match="checkpoint_pages needs checkpoint_dir"):
        garaphpy.run(rmat, "pagerank", execution="async", checkpoint_pages=2)
    with pytest.raises(ConfigError, match="checkpoint_pages=0"):
        garaphpy.run(rmat, "pagerank", execution="async", checkpoint_dir=tmp_path / "c",
                     checkpoint_pages=0)


def test_names_after_pages_sort_after_their_iteration_start(tmp_path):
    for name in ("checkpoint-000000003.p000012.gck", "checkpoint-000000003.gck",
                 "checkpoint-000000002.p000100.gck", "checkpoint-000000003.p000002.gck"):
        (tmp_path / name).write_bytes(b"")
    assert [p.name for p in list_checkpoints(tmp_path)] == [
        "checkpoint-000000002.p000100.gck", "checkpoint-000000003.gck",
        "checkpoint-000000003.p000002.gck", "checkpoint-000000003.p000012.gck"]


# ---------------------------------------------------------------- Ctrl-C --
@pytest.fixture
def sigint_raises():
    """Python's default SIGINT handler, also where the test process inherited SIG_IGN."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupt_at(iteration: int):
    def on_iteration(record):
        if record.iteration == iteration:
            os.kill(os.getpid(), signal.SIGINT)

    return on_iteration


def test_ctrl_c_writes_a_checkpoint_and_resumes(rmat, pagerank_reference, tmp_path,
                                                sigint_raises, capsys):
    directory = tmp_path / "ck"
    with pytest.raises(RunInterrupted) as caught:
        pagerank(rmat, directory, checkpoint_every=0, on_iteration=interrupt_at(6))
    assert caught.value.iteration == 7       # the iteration under way was finished
    assert caught.value.checkpoint == directory / "checkpoint-000000007.gck"
    assert "stopping at the end of this iteration" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler    # restored
    result = pagerank(rmat, directory, resume=True)
    np.testing.assert_array_equal(result.values, pagerank_reference.values)


def test_ctrl_c_without_checkpoints_interrupts_at_once(rmat, tmp_path, sigint_raises):
    seen = []

    def on_iteration(record):
        seen.append(record.iteration)
        interrupt_at(3)(record)

    with pytest.raises(KeyboardInterrupt) as caught:
        garaphpy.run(rmat, "pagerank", tolerance=0.0, max_iterations=25, threads=THREADS,
                     on_iteration=on_iteration)
    assert not isinstance(caught.value, RunInterrupted) and seen == [0, 1, 2, 3]


def test_a_checkpoint_that_cannot_be_written(rmat, pagerank_reference, tmp_path, monkeypatch,
                                            sigint_raises):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "write_checkpoint", full_disk)
    # periodic: the run goes on without it
    with pytest.warns(CheckpointWarning, match="No space left on device.*goes on"):
        result = pagerank(rmat, tmp_path / "ck", checkpoint_every=5)
    np.testing.assert_array_equal(result.values, pagerank_reference.values)
    # at Ctrl-C: the run stops with an error saying it has no checkpoint
    with pytest.raises(CheckpointError, match="interrupted, and .*checkpoint-000000004.gck"):
        pagerank(rmat, tmp_path / "ck", checkpoint_every=0, on_iteration=interrupt_at(3))


@pytest.fixture
def cli_interrupted_at(monkeypatch):
    """``main`` whose run gets a SIGINT at the end of a given iteration."""
    real_run = api.run
    iteration = {}

    def run_with_interrupt(*args, on_iteration=None, **kwargs):
        def hook(record):
            if on_iteration is not None:
                on_iteration(record)
            if record.iteration == iteration.get("at"):
                os.kill(os.getpid(), signal.SIGINT)
        return real_run(*args, on_iteration=hook, **kwargs)

    monkeypatch.setattr(api, "run", run_with_interrupt)
    return iteration


@pytest.mark.parametrize("every", [None, 5])
def test_cli_ctrl_c(tmp_path, every, sigint_raises, cli_interrupted_at, capsys):
    config = write_config(tmp_path / "run", PAGERANK, every=every)
    reference = uninterrupted(config)
    capsys.readouterr()
    cli_interrupted_at["at"] = 7
    assert main([str(config), "-q"]) == 130
    err = capsys.readouterr().err
    checkpoints = config.parent / "values.checkpoints"
    if every is None:       # checkpoints off: nothing written at all
        assert "garaphpy: interrupted" in err and "resume" not in err
        assert sorted(p.name for p in config.parent.iterdir()) == ["run.toml"]
        return
    assert [p.name for p in list_checkpoints(checkpoints)] == [
        "checkpoint-000000005.gck", "checkpoint-000000008.gck"]
    assert not (config.parent / "values.npy").exists()
    assert f"checkpoint written to {checkpoints / 'checkpoint-000000008.gck'}" in err
    command = shlex.split(err.split("resume with: ")[1].splitlines()[0])
    assert command[:4] == [sys.executable, "-m", "garaphpy.run", str(config.resolve())]
    assert command[-1] == "--resume"
    cli_interrupted_at.clear()
    assert main(command[3:]) == 3            # fixed iterations: "did not converge"
    assert "resumed from" in capsys.readouterr().out
    np.testing.assert_array_equal(values_of(config), reference.values)
    assert [r["iteration"] for r in records_of(config)] == list(range(40))
    assert not checkpoints.exists()


def test_cli_resume_errors_exit_1(tmp_path, capsys):
    config = write_config(tmp_path / "run", SSSP)
    assert main([str(config), "-q", "--resume"]) == 0      # a kill before the first checkpoint
    err = capsys.readouterr().err
    assert "values.checkpoints: no checkpoint to resume from" in err and "beginning" in err
    assert (config.parent / "values.npy").is_file()
    bad = write_config(tmp_path / "bad", SSSP, every=-1)
    assert main([str(bad), "-q"]) == 2
    assert "run.checkpoint_every" in capsys.readouterr().err


def test_cli_other_run_or_every_checkpoint_damaged_exits_1(tmp_path, sigint_raises, cli_interrupted_at,
                                              capsys):
    config = write_config(tmp_path / "run", PAGERANK, every=2)
    cli_interrupted_at["at"] = 4
    assert main([str(config), "-q"]) == 130
    found = list_checkpoints(config.parent / "values.checkpoints")
    assert [p.name for p in found] == ["checkpoint-000000004.gck", "checkpoint-000000005.gck"]
    cli_interrupted_at.clear()
    capsys.readouterr()
    # another run's settings: refused, naming what differs
    assert main([str(config), "-q", "--resume", "--set", "run.constants={damping=0.5}"]) == 1
    err = capsys.readouterr().err
    assert "refusing to resume" in err and "constants {'damping': 0.85}" in err
    for path, how in zip(found, ["bit-flipped", "truncated"]):
        _damage(path, how)
    capsys.readouterr()
    cli_interrupted_at.clear()
    assert main([str(config), "-q", "--resume"]) == 1
    err = capsys.readouterr().err
    assert err.count("garaphpy: warning:") == 2
    assert "garaphpy: error:" in err and "no valid checkpoint" in err
    assert all(path.name in err for path in found)
    assert not (config.parent / "values.npy").exists()


def test_cli_checkpoint_dir_key(tmp_path):
    config = write_config(tmp_path / "run", SSSP, every=None)
    settings = load_config(config, ["run.checkpoint_dir='elsewhere/ck'"])
    assert settings["run"]["checkpoint_dir"] == str(config.parent / "elsewhere" / "ck")
    from garaphpy.cli import checkpoint_directory

    values = Path(settings["output"]["values"])
    assert checkpoint_directory(settings, values, resume=False) == config.parent / "elsewhere/ck"
    settings = load_config(config)
    assert checkpoint_directory(settings, values, resume=False) is None
    assert checkpoint_directory(settings, values, resume=True) == \
        config.parent / "values.checkpoints"


# ------------------------------------------- SIGKILL and SIGINT, for real --
#: every mode the machine has: the GPU ones run where ``pytest -m gpu`` does
MODES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu),
         pytest.param("hybrid", marks=pytest.mark.gpu)]


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("spec", [PAGERANK, SSSP], ids=["pagerank", "sssp"])
def test_sigkill_at_random_points_then_resume_is_exact(tmp_path, spec, mode, capsys):
    config = write_config(tmp_path / "run", spec, mode=mode)
    checkpoints = config.parent / "values.checkpoints"
    reference = uninterrupted(config)
    first = kill_after(config, checkpoints, RANDOM.randint(2, 9))
    second = kill_after(config, checkpoints, RANDOM.randint(2, 9), "--resume")
    assert second > first
    code = main([str(config), "-q", "--resume"])
    assert code == (3 if spec is PAGERANK else 0), capsys.readouterr()
    records = records_of(config)
    assert [r["iteration"] for r in records] == list(range(reference.num_iterations))
    if mode == "cpu" or spec is not PAGERANK:
        np.testing.assert_array_equal(values_of(config), reference.values)
        assert [r["activated"] for r in records] == [r.activated for r in reference.iterations]
    else:
        # float atomics on the GPU add in a different order every run: even two
        # uninterrupted GPU runs agree only to rounding
        np.testing.assert_allclose(values_of(config), reference.values, rtol=1e-9)
    assert not checkpoints.exists()


@pytest.mark.slow
@pytest.mark.parametrize("after_pages", [False, True], ids=["iterations", "pages"])
@pytest.mark.parametrize("mode", MODES)
def test_sigkill_then_resume_async_is_verified(tmp_path, mode, after_pages, capsys):
    spec = dict(ASYNC_PAGERANK)
    if after_pages:
        spec["run"] += "checkpoint_pages = 3\n"
    config = write_config(tmp_path / "run", spec, mode=mode,
                          every=0 if after_pages else 1)
    checkpoints = config.parent / "values.checkpoints"
    kill_after(config, checkpoints, RANDOM.randint(2, 9))
    assert main([str(config), "-q", "--resume", "--verify"]) == 0
    out = capsys.readouterr().out
    assert f"PageRank ({mode}, async): converged" in out and "verify: PASSED" in out
    records = records_of(config)
    assert [r["iteration"] for r in records] == list(range(len(records)))


@pytest.mark.slow
def test_sigint_to_the_process_writes_a_checkpoint_and_prints_the_command(tmp_path):
    config = write_config(tmp_path / "run", PAGERANK, every=3)
    checkpoints = config.parent / "values.checkpoints"
    reference = uninterrupted(config)
    process = start_cli(config)
    wait_for_checkpoint(process, checkpoints, 6)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    written = err.split("checkpoint written to ")[1].split()[0]
    assert Path(written) == list_checkpoints(checkpoints)[-1]
    command = shlex.split(err.split("resume with: ")[1].splitlines()[0])
    resumed = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                             env={**os.environ, "NUMBA_NUM_THREADS": str(THREADS)})
    assert resumed.returncode == 3, resumed.stderr
    np.testing.assert_array_equal(values_of(config), reference.values)
