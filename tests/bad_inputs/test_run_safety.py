"""The run and the command line never lose a result nor answer with a traceback.

Bad-input suite, run side: integer keys beyond what the engine holds, configs
that are not UTF-8 or are graph files, output paths that cannot be written
(refused before any work), a full disk while writing results (one line with
the bytes needed, nothing half-written), result files' modes (the umask),
SIGTERM and SIGHUP handled as Ctrl-C (a checkpoint, exit 143/129), and the
checkpoints kept until the values and records are written.  A full disk is
simulated by a file object that refuses writes beyond a number of bytes;
references come from an uninterrupted run without checkpoints.
"""

from __future__ import annotations

import errno
import json
import os
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
from garaphpy import api, output
from garaphpy.cli import graph_from_config, main
from garaphpy.configfile import SCHEMA, load_config
from garaphpy.errors import ConfigError, OutputError
from garaphpy.scheduler.checkpoint import list_checkpoints

from helpers import cache_with_programs

REPO = Path(__file__).resolve().parents[2]
THREADS = min(2, numba.config.NUMBA_NUM_THREADS)

PAGERANK = ('graph = "rmat:10"\n[store]\npath = "{store}"\n[run]\nprogram = "pagerank"\n'
            f'mode = "cpu"\nthreads = {THREADS}\ntolerance = 0.0\nmax_iterations = 12\n'
            '{extra}[output]\nvalues = "values.npy"\n')


def write_config(directory: Path, extra: str = "", store: Path | None = None) -> Path:
    """A PageRank run on rmat:10 (12 iterations) whose store is shared by the module."""
    directory.mkdir(parents=True, exist_ok=True)
    store = store or directory.parent / "store-rmat-10"
    path = directory / "run.toml"
    path.write_text(PAGERANK.format(store=store, extra=extra))
    return path


def reference_values(config: Path) -> np.ndarray:
    """The same run, in-process, without checkpoints."""
    settings = load_config(config)
    graph = graph_from_config(settings, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.NotConvergedWarning)
        result = garaphpy.run(graph, "pagerank", mode="cpu", tolerance=0.0, max_iterations=12,
                              threads=THREADS)
    order = np.argsort(result.original_ids())
    return result.values[order]


def values_of(config: Path) -> np.ndarray:
    table = np.load(config.parent / "values.npy")
    return table[table.dtype.names[1]][np.argsort(table["vertex"])]   # named after the value


def one_error_line(err: str, *names: str) -> None:
    lines = [line for line in err.splitlines() if not line.startswith("garaphpy: warning:")]
    assert len(lines) == 1 and lines[0].startswith("garaphpy: error: "), err
    assert "Traceback" not in err
    for name in names:
        assert name in lines[0], (name, err)


# ------------------------------------------------ item 1: integer keys bounded --
INTEGER_KEYS = [(section, key) for section, keys in SCHEMA.items()
                for key, spec in keys.items() if spec.kind == "int"]


@pytest.mark.parametrize("section, key", INTEGER_KEYS, ids=[f"{s}.{k}" for s, k in INTEGER_KEYS])
def test_every_integer_key_refuses_more_than_int64(section, key):
    raw = {"graph": "rmat:4", section: {key: 2**63}}
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: 9223372036854775808 is above"):
        load_config_from_dict(raw)


@pytest.mark.parametrize("section, key, value", [
    ("run", "max_iterations", 2**31),                # iteration counters are int32
    ("run", "sources", 2**63),
    ("run", "constants", {"damping": 2**64}),
    ("run", "tolerance", 10**400),                   # float() of it overflows
    ("run", "tolerance", float("nan")),
    ("store", "memory_budget", 2**63),
    ("store", "memory_budget", "9" * 400 + ".5TiB"),
])
def test_numbers_beyond_the_engine_are_refused(section, key, value):
    with pytest.raises(ConfigError, match=rf"{section}\.{key}"):
        load_config_from_dict({"graph": "rmat:4", section: {key: value}})


def load_config_from_dict(raw: dict) -> dict:
    from garaphpy.configfile import validate_config

    return validate_config(raw)


def test_cli_max_iterations_of_2_63_exits_2(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text('graph = "rmat:4"\n[run]\nprogram = "pagerank"\n'
                      'max_iterations = 9223372036854775808\n')
    assert main([str(config)]) == 2
    one_error_line(capsys.readouterr().err, "run.max_iterations", "9223372036854775808")


# ---------------------------------------- item 2: configs that are not configs --
def test_config_not_utf8_is_one_line(tmp_path, capsys):
    config = tmp_path / "latin1.toml"
    config.write_bytes('graph = "caf\u00e9.el"\n'.encode("latin-1"))
    assert main([str(config)]) == 2
    one_error_line(capsys.readouterr().err, str(config), "not UTF-8")


@pytest.mark.parametrize("name, content", [
    ("graph.txt.gz", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03+\xce\xcc-\x00\x00"),
    ("graph.el", b"0 1\n1 2\n"),
    ("graph.sg", b"\x00\x00\x00\x00\x02\x00\x00\x00"),
])
def test_graph_file_given_as_config_says_so(tmp_path, capsys, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    assert main([str(path)]) == 2
    one_error_line(capsys.readouterr().err, str(path), "looks like a graph file")


# ------------------------------ items 2 and 4: outputs checked before any work --
@pytest.mark.parametrize("key, value", [
    ("output.values", "{tmp}"),                          # a directory
    ("output.values", "{tmp}/a-file/values.txt"),        # a parent is a file
    ("output.iterations", "{tmp}/a-file/deeper/it.jsonl"),
    ("run.checkpoint_dir", "{tmp}/a-file"),              # a file, not a directory
])
def test_unwritable_output_refused_before_the_graph_is_built(tmp_path, capsys, key, value):
    (tmp_path / "a-file").write_text("user data\n")
    store = tmp_path / "never-built"
    config = write_config(tmp_path / "run", store=store)
    value = value.format(tmp=tmp_path)
    assert main([str(config), "-q", "--set", f"{key}={value!r}"]) == 2
    one_error_line(capsys.readouterr().err, key, value)
    assert not store.exists()                            # refused before preprocessing
    assert (tmp_path / "a-file").read_text() == "user data\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "run"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_read_only_directory_refused_before_the_run(tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    config = write_config(tmp_path / "run", store=tmp_path / "never-built")
    code = main([str(config), "-q", "--set", f"output.values={str(locked / 'v.npy')!r}"])
    assert code == 2
    one_error_line(capsys.readouterr().err, "output.values", "Permission denied")
    assert not (tmp_path / "never-built").exists()


def test_store_cache_that_cannot_be_made_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "a-file").write_text("")
    monkeypatch.setenv("GARAPHPY_CACHE", str(tmp_path / "a-file" / "cache"))
    config = tmp_path / "run.toml"
    config.write_text('graph = "rmat:4"\n')
    assert main([str(config), "-q"]) == 2
    one_error_line(capsys.readouterr().err, "GARAPHPY_CACHE", str(tmp_path / "a-file"))


def test_other_os_errors_are_one_line_naming_the_path(tmp_path, capsys, monkeypatch):
    config = tmp_path / "run.toml"
    config.write_text(f'graph = "rmat:4"\n[store]\npath = "{tmp_path / "s"}"\n')

    def unreadable(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "s" / "x"))

    monkeypatch.setattr("garaphpy.cli.graph_from_config", unreadable)
    assert main([str(config), "-q"]) == 1
    one_error_line(capsys.readouterr().err, str(tmp_path / "s" / "x"), "Permission denied")


# ----------------------------------------- item 3: full disk, files' modes --
class _DiskWithRoom:
    """``open`` for garaphpy.output whose files take at most ``room`` bytes in all."""

    def __init__(self, room: int):
        self.room = room
        self.real_open = open

    def __call__(self, path, mode="r", *args, **kwargs):
        handle = self.real_open(path, mode, *args, **kwargs)
        if ".probe-" in Path(path).name:
            return handle
        disk = self

        class Limited:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()

            def write(self, data):
                if len(data) > disk.room:
                    handle.write(bytes(data[:disk.room]))
                    disk.room = 0
                    raise OSError(errno.ENOSPC, "No space left on device", str(path))
                disk.room -= len(data)
                return handle.write(data)

            def __getattr__(self, name):
                return getattr(handle, name)

        return Limited()


@pytest.mark.parametrize("suffix", [".txt", ".npy"])
def test_full_disk_names_the_bytes_and_leaves_the_old_file(tmp_path, monkeypatch, suffix):
    vertices = np.arange(300_000, dtype=np.int64)
    values = np.random.default_rng(5).random(vertices.size)
    whole = output.write_values(tmp_path / f"whole{suffix}", vertices, values)
    target = tmp_path / "out" / f"values{suffix}"
    target.parent.mkdir()
    target.write_text("the previous result\n")
    monkeypatch.setattr(output, "open", _DiskWithRoom(100_000), raising=False)
    with pytest.raises(OutputError) as caught:
        output.write_values(target, vertices, values)
    message = str(caught.value)
    assert str(target) in message and "no space left" in message
    assert f"needs {whole.stat().st_size:,} bytes" in message
    assert "\n" not in message
    assert target.read_text() == "the previous result\n"
    assert [p.name for p in target.parent.iterdir()] == [target.name]   # no temporary


def test_full_disk_for_iteration_records(tmp_path, monkeypatch):
    from garaphpy.scheduler.records import IterationRecord

    records = [IterationRecord(iteration=i, mode="cpu", direction="pull", forced=False,
                               active_fraction=1.0, rho=1.0, active_vertices=10)
               for i in range(50)]
    whole = output.write_iterations(tmp_path / "whole.jsonl", records)
    monkeypatch.setattr(output, "open", _DiskWithRoom(300), raising=False)
    with pytest.raises(OutputError, match=rf"needs {whole.stat().st_size:,} bytes"):
        output.write_iterations(tmp_path / "it" / "records.jsonl", records)
    assert list((tmp_path / "it").iterdir()) == []


@pytest.mark.parametrize("umask", [0o022, 0o007])
def test_result_files_follow_the_umask(tmp_path, umask):
    previous = os.umask(umask)
    try:
        values = output.write_values(tmp_path / "v.txt", np.arange(3), np.ones(3))
        records = output.write_iterations(tmp_path / "r.jsonl", [])
        probe = tmp_path / "plain"
        open(probe, "w").close()
    finally:
        os.umask(previous)
    expected = probe.stat().st_mode & 0o777
    assert expected == 0o666 & ~umask
    assert values.stat().st_mode & 0o777 == expected
    assert records.stat().st_mode & 0o777 == expected


# ---------------------- items 5 and 6: signals, checkpoints kept until written --
@pytest.fixture
def signal_at(monkeypatch):
    """``main`` whose run gets a given signal at the end of a given iteration."""
    real_run = api.run
    plan = {}

    def run_with_signal(*args, on_iteration=None, **kwargs):
        def hook(record):
            if on_iteration is not None:
                on_iteration(record)
            if record.iteration == plan.get("at"):
                os.kill(os.getpid(), plan["signal"])
        return real_run(*args, on_iteration=hook, **kwargs)

    monkeypatch.setattr(api, "run", run_with_signal)
    return plan


@pytest.mark.parametrize("number, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["SIGTERM", "SIGHUP"])
def test_stop_signal_writes_a_checkpoint_and_resumes_exactly(tmp_path, capsys, signal_at,
                                                              number, code):
    if signal.getsignal(number) == signal.SIG_IGN:
        pytest.skip(f"{number.name} is ignored in this process (started under nohup?), "
                    "and the command line rightly leaves an ignored signal ignored")
    config = write_config(tmp_path / "run", "checkpoint_every = 0\n")
    reference = reference_values(config)
    before = {n: signal.getsignal(n) for n in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    signal_at.update(at=4, signal=number)
    capsys.readouterr()
    assert main([str(config), "-q"]) == code
    err = capsys.readouterr().err
    assert f"interrupted by {number.name} after 5 iterations" in err
    checkpoints = config.parent / "values.checkpoints"
    assert [p.name for p in list_checkpoints(checkpoints)] == ["checkpoint-000000005.gck"]
    assert not (config.parent / "values.npy").exists()
    assert {n: signal.getsignal(n) for n in before} == before    # handlers restored
    command = shlex.split(err.split("resume with: ")[1].splitlines()[0])
    signal_at.clear()
    assert main(command[3:]) == 3                      # fixed iterations: "did not converge"
    np.testing.assert_array_equal(values_of(config), reference)
    assert not checkpoints.exists()


def test_sigterm_without_checkpoints_exits_143_leaving_nothing(tmp_path, capsys, signal_at):
    config = write_config(tmp_path / "run")
    signal_at.update(at=2, signal=signal.SIGTERM)
    assert main([str(config), "-q"]) == 143
    assert "garaphpy: interrupted by SIGTERM" in capsys.readouterr().err
    assert sorted(p.name for p in config.parent.iterdir()) == ["run.toml"]


@pytest.mark.parametrize("fault", ["kill", "full disk"])
def test_checkpoints_survive_until_the_results_are_written(tmp_path, capsys, monkeypatch,
                                                           fault):
    config = write_config(tmp_path / "run", "checkpoint_every = 5\n")
    reference = reference_values(config)
    checkpoints = config.parent / "values.checkpoints"
    real_write = output.write_iterations

    def failing_write(*args, **kwargs):
        assert [p.name for p in list_checkpoints(checkpoints)] == [
            "checkpoint-000000005.gck", "checkpoint-000000010.gck"]
        if fault == "kill":
            raise KeyboardInterrupt              # a kill between the values and the records
        raise OutputError(f"{args[0]}: no space left on the device: the file needs 1 bytes")

    monkeypatch.setattr(output, "write_iterations", failing_write)
    capsys.readouterr()
    assert main([str(config), "-q"]) == (130 if fault == "kill" else 1)
    err = capsys.readouterr().err
    if fault == "full disk":
        one_error_line(err, "no space left", f"checkpoints are kept in {checkpoints}")
    assert len(list_checkpoints(checkpoints)) == 2
    monkeypatch.setattr(output, "write_iterations", real_write)
    assert main([str(config), "-q", "--resume"]) == 3
    assert "resumed from" in capsys.readouterr().out
    np.testing.assert_array_equal(values_of(config), reference)
    lines = (config.parent / "values.iterations.jsonl").read_text().splitlines()
    assert [json.loads(line)["iteration"] for line in lines] == list(range(12))
    assert not checkpoints.exists()


def test_library_run_still_removes_its_checkpoints(tmp_path):
    config = write_config(tmp_path / "run")
    graph = graph_from_config(load_config(config), progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.NotConvergedWarning)
        garaphpy.run(graph, "pagerank", mode="cpu", tolerance=0.0, max_iterations=12,
                     threads=THREADS, checkpoint_dir=tmp_path / "ck", checkpoint_every=3)
        assert not (tmp_path / "ck").exists()
        garaphpy.run(graph, "pagerank", mode="cpu", tolerance=0.0, max_iterations=12,
                     threads=THREADS, checkpoint_dir=tmp_path / "kept", checkpoint_every=3,
                     keep_checkpoints=True)
    assert len(list_checkpoints(tmp_path / "kept")) >= 1


@pytest.mark.slow
def test_sigterm_to_the_process_checkpoints_and_resumes(tmp_path):
    config = tmp_path / "run" / "run.toml"
    config.parent.mkdir()
    config.write_text(
        f'graph = "rmat:14"\n[store]\npath = "{tmp_path / "store"}"\nmax_shard_edges = 2000\n'
        f'max_page_bytes = 60000\n[run]\nprogram = "pagerank"\nmode = "cpu"\n'
        f'threads = {THREADS}\ntolerance = 0.0\nmax_iterations = 40\ncheckpoint_every = 1\n'
        '[output]\nvalues = "values.npy"\n')
    env = {**os.environ, "NUMBA_NUM_THREADS": str(THREADS),
           "GARAPHPY_CACHE": str(cache_with_programs(tmp_path / "cache")),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-m", "garaphpy.run", str(config), "-q"],
                               cwd=REPO, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    checkpoints = config.parent / "values.checkpoints"
    deadline = time.monotonic() + 300
    while not (checkpoints.is_dir() and list_checkpoints(checkpoints)):
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no checkpoint within 300 s"
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 143, err
    assert "interrupted by SIGTERM" in err and "Traceback" not in err
    written = Path(err.split("checkpoint written to ")[1].split()[0])
    assert written == list_checkpoints(checkpoints)[-1]
    command = shlex.split(err.split("resume with: ")[1].splitlines()[0])
    resumed = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                             timeout=300)
    assert resumed.returncode == 3, resumed.stderr        # 40 iterations: not converged
    settings = load_config(config)
    graph = graph_from_config(settings, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", api.NotConvergedWarning)
        reference = garaphpy.run(graph, "pagerank", mode="cpu", tolerance=0.0,
                                 max_iterations=40, threads=THREADS)
    order = np.argsort(reference.original_ids())
    np.testing.assert_array_equal(values_of(config), reference.values[order])
    assert not checkpoints.exists()


# --------------------- links, shared names, leftovers and odd paths (second pass) --
BFS = ('graph = "g.el"\n[store]\npath = "st"\n[run]\nprogram = "bfs"\nmode = "cpu"\n'
       'sources = 0\n{extra}')


def bfs_config(directory: Path, extra: str = "") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "g.el").write_text("0 1\n1 2\n2 3\n")
    config = directory / "run.toml"
    config.write_text(BFS.format(extra=extra))
    return config


def test_a_symlinked_output_is_replaced_never_written_through(tmp_path, capsys):
    """``out.txt -> thesis.tex``: the link becomes a regular file of values,
    thesis.tex is untouched, and the records are named after out.txt."""
    home = tmp_path / "home"
    home.mkdir()
    thesis = home / "thesis.tex"
    thesis.write_text("five years of work")
    work = tmp_path / "work"
    config = bfs_config(work, '[output]\nvalues = "out.txt"\n')
    (work / "out.txt").symlink_to(thesis)
    assert main([str(config), "-q"]) == 0, capsys.readouterr().err
    assert thesis.read_text() == "five years of work"
    assert not (work / "out.txt").is_symlink()
    assert (work / "out.txt").read_text().splitlines()[0] == "0\t0"
    assert (work / "out.iterations.jsonl").is_file()
    assert sorted(p.name for p in home.iterdir()) == ["thesis.tex"]


def test_a_symlinked_iterations_file_is_replaced(tmp_path, capsys):
    target = tmp_path / "keep.txt"
    target.write_text("mine")
    work = tmp_path / "work"
    config = bfs_config(work, '[output]\nvalues = "out.txt"\niterations = "it.jsonl"\n')
    (work / "it.jsonl").symlink_to(target)
    assert main([str(config), "-q"]) == 0, capsys.readouterr().err
    assert target.read_text() == "mine" and not (work / "it.jsonl").is_symlink()
    assert json.loads((work / "it.jsonl").read_text().splitlines()[0])["iteration"] >= 0


def test_a_symlink_at_store_path_is_refused_even_through_the_config(tmp_path, capsys):
    real = tmp_path / "real-store"
    real.mkdir()
    work = tmp_path / "work"
    config = bfs_config(work)
    (work / "st").symlink_to(real)
    assert main([str(config), "-q"]) == 1
    assert "symbolic link" in capsys.readouterr().err
    assert list(real.iterdir()) == []


@pytest.mark.parametrize("extra,keys", [
    ('[output]\nvalues = "x.txt"\niterations = "x.txt"\n', ("output.iterations",)),
    ('[output]\nvalues = "x.txt"\niterations = "./sub/../x.txt"\n', ("output.iterations",)),
    ('[output]\nvalues = "x.txt"\n[run]\n', None),
])
def test_two_outputs_at_one_path_are_refused(tmp_path, capsys, extra, keys):
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    config = bfs_config(work, extra) if keys else None
    if keys is None:     # the values file named like the store
        config = bfs_config(work, '[output]\nvalues = "st"\n')
        keys = ("store.path",)
    assert main([str(config), "-q"]) == 2
    one_error_line(capsys.readouterr().err, *keys)
    assert not (work / "st").exists()


def test_output_temporaries_of_killed_runs_are_removed_by_the_next_write(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    target = tmp_path / "out.txt"
    stale = tmp_path / f".out.txt.tmp-{dead.pid}-0123abcd"
    stale.write_text("half")
    live = tmp_path / f".out.txt.tmp-{os.getpid()}-0123abcd"
    live.write_text("being written")
    users = tmp_path / f".out.txt.tmp-{dead.pid}-mine"
    users.write_text("a user's")
    output.write_values(target, np.arange(3), np.arange(3.0))
    assert not stale.exists() and live.exists() and users.exists()


@pytest.mark.parametrize("override,key", [
    ('store.path="a\\u0000b"', "store.path"),
    ('output.values="v\\u0000.txt"', "output.values"),
    ('store.storage_dirs=["ok", "x\\u0000"]', "store.storage_dirs"),
    ('run.checkpoint_dir="~nonexistentuser_garaphpy/ck"', "run.checkpoint_dir"),
    ('output.iterations="~nonexistentuser_garaphpy/i.jsonl"', "output.iterations"),
])
def test_odd_path_values_are_one_line_naming_the_key(tmp_path, capsys, override, key):
    config = bfs_config(tmp_path)
    assert main([str(config), "-q", "--set", override]) == 2
    one_error_line(capsys.readouterr().err, key)


@pytest.mark.parametrize("graph", ['"g\\u0000.el"', '"~nonexistentuser_garaphpy/g.el"'])
def test_an_odd_graph_path_is_one_line_naming_the_key(tmp_path, capsys, graph):
    config = tmp_path / "run.toml"
    config.write_text(f"graph = {graph}\n")
    assert main([str(config), "-q"]) == 2
    one_error_line(capsys.readouterr().err, "graph")


@pytest.mark.parametrize("text", [
    "graph = " + "[" * 5000 + "]" * 5000 + "\n",
    "graph = \"rmat:4\"\n[store]\nn_streams = " + "7" * 5000 + "\n",
    "graph = \"rmat:4\"\n[run]\nconstants = {d = " + "9" * 5000 + "}\n",
], ids=["nested-arrays", "long-integer", "long-integer-in-a-table"])
def test_deep_nesting_and_huge_integers_are_one_line(tmp_path, capsys, text):
    config = tmp_path / "run.toml"
    config.write_text(text)
    assert main([str(config), "-q"]) == 2
    err = capsys.readouterr().err
    one_error_line(err)
    assert str(config) in err


def test_tilde_is_expanded_the_same_for_a_relative_and_an_absolute_config(
        tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    config = bfs_config(work)
    monkeypatch.chdir(work)
    for named in (config, Path("run.toml")):
        settings = load_config(named, ['output.values="~/out.txt"', 'run.checkpoint_dir="~/ck"'])
        assert settings["output"]["values"] == str(home / "out.txt")
        assert settings["run"]["checkpoint_dir"] == str(home / "ck")


def test_mode_gpu_without_a_gpu_is_refused_before_the_build(tmp_path, capsys):
    from helpers import gpu_available

    if gpu_available() is None:
        pytest.skip("a GPU is usable here")
    config = bfs_config(tmp_path)
    assert main([str(config), "-q", "--set", "run.mode='gpu'"]) == 1
    one_error_line(capsys.readouterr().err, "GPU")
    assert not (tmp_path / "st").exists()


def test_the_library_refuses_max_iterations_beyond_the_limit_like_the_cli():
    graph = garaphpy.Graph.from_arrays([0, 1], [1, 2])
    with pytest.raises(ConfigError, match="max_iterations"):
        garaphpy.run(graph, "bfs", sources=0, mode="cpu", max_iterations=2**63)
