"""What a user meets first: wrong values refused, precision kept,
the user's cache untouched, Ctrl-C honoured (the README's examples: tests/cli/test_docs.py),
thread defaults, stores and outputs keyed on their input, sources only where
used, weights for unweighted files."""

from __future__ import annotations

import math
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

import garaphpy
from garaphpy import VertexProgram
from garaphpy.program import ProgramError

from helpers import REPOSITORY
from references import bfs_scipy

CHAIN = (np.arange(4), np.arange(1, 5))      # 0 -> 1 -> 2 -> 3 -> 4


# -- 1. values an integer dtype cannot hold are refused, with file and line ----------

def _line_of(text):
    source = open(__file__).read().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


@pytest.mark.parametrize("returned", ["math.inf", "-math.inf", "1e30", "2**63", "-1e19"])
def test_integer_program_refuses_constant_it_cannot_hold(returned, tmp_path):
    namespace = {"VertexProgram": VertexProgram, "np": np, "math": math}
    source = (f"class P(VertexProgram):\n    value_dtype = np.int64\n    sum = 'min'\n"
              f"    def init(is_source):\n        x = {returned}\n"
              f"        return 0 if is_source else x\n"
              f"    def gather(src):\n        return src + 1\n"
              f"    def apply(value, accum):\n        return min(value, accum)\n"
              f"    def activate(new, old):\n        return new < old\n")
    path = str(tmp_path / "program.py")
    (tmp_path / "program.py").write_text(source)
    with pytest.raises(ProgramError, match=rf"^{re.escape(path)}:5: in init: .*int64"):
        exec(compile(source, path, "exec"), namespace)


def test_integer_program_refuses_nan_and_out_of_range_apply_constant():
    with pytest.raises(ProgramError, match=r"test_first_use.py:\d+: in init: math.nan"):
        class NanInit(VertexProgram):
            value_dtype = np.int32
            sum = "min"

            def init():
                return math.nan

            def gather(src):
                return src

            def apply(value, accum):
                return accum

            def activate(new, old):
                return new < old
    with pytest.raises(ProgramError) as error:
        class WideApply(VertexProgram):
            value_dtype = np.int32
            sum = "min"

            def init():
                return 0

            def gather(src):
                return src

            def apply(value, accum):
                return accum if value > 0 else 3000000000   # beyond int32

            def activate(new, old):
                return new < old
    line = _line_of("return accum if value > 0 else 3000000000")
    assert f"test_first_use.py:{line}: in apply: apply returns 3000000000" in str(error.value)


def test_integer_program_refuses_computed_init_value_at_run_time():
    class HugeInit(VertexProgram):
        value_dtype = np.int64
        sum = "min"
        initially_active = "sources"
        needs_sources = True

        def init(is_source, num_vertices):   # computed: not caught when defined
            return 0 if is_source else num_vertices * 1e300

        def gather(src):
            return src + 1

        def apply(value, accum):
            return min(value, accum)

        def activate(new, old):
            return new < old

    graph = garaphpy.Graph.from_arrays(*CHAIN)
    line = _line_of("def init(is_source, num_vertices):   # computed")
    with pytest.raises(ProgramError, match=rf"test_first_use.py:{line}: in init: init gives "
                                           r"vertex 1 the value 5e\+300"):
        garaphpy.run(graph, HugeInit, sources=[0], mode="cpu", threads=1)


def test_integer_program_with_a_sentinel_in_range_gives_depths():
    class Depth(VertexProgram):
        value_dtype = np.int64
        sum = "min"
        initially_active = "sources"
        needs_sources = True

        def init(is_source):
            return 0 if is_source else 4611686018427387904

        def gather(src):
            return src + 1

        def apply(value, accum):
            return min(value, accum)

        def activate(new, old):
            return new < old

    graph = garaphpy.Graph.from_arrays(*CHAIN)
    result = garaphpy.run(graph, Depth, sources=[0], mode="cpu", threads=1)
    np.testing.assert_array_equal(result.values, bfs_scipy(graph, [0]))


# -- 2. from_scipy / from_arrays keep the weights' precision -------------------------

@pytest.mark.parametrize("constructor", ["scipy", "arrays"])
def test_float64_weights_keep_their_precision(constructor):
    import scipy.sparse
    from scipy.sparse.csgraph import dijkstra

    src, dst = CHAIN
    weights = np.array([1.000000001, 2.000000003, 1e-9, 3.3333333333333335])
    matrix = scipy.sparse.csr_matrix((weights, (src, dst)), shape=(5, 5))
    graph = (garaphpy.Graph.from_scipy(matrix) if constructor == "scipy"
             else garaphpy.Graph.from_arrays(src, dst, weights, num_vertices=5))
    assert graph.store.weight_dtype == np.float64
    result = garaphpy.run(graph, "sssp", sources=[0], mode="cpu", threads=1)
    np.testing.assert_array_equal(result.values, dijkstra(matrix, indices=0))
    assert result.values[1] == 1.000000001


def test_weights_narrow_only_when_asked():
    import scipy.sparse

    src, dst = CHAIN
    matrix = scipy.sparse.csr_matrix((np.full(4, 1.000000001), (src, dst)), shape=(5, 5))
    graph = garaphpy.Graph.from_scipy(matrix, weight_dtype="float32")
    assert graph.store.weight_dtype == np.float32
    assert garaphpy.Graph.from_arrays(src, dst, np.ones(4, np.float32)).store.weight_dtype \
        == np.float32


# -- 3. no test reaches the user's cache -----------------------------------------------

@pytest.fixture(scope="module")
def module_scoped_store():
    """Built before any function-scoped fixture, as test_checkpoint's ``rmat`` is."""
    from garaphpy.paths import cache_directory

    return cache_directory().resolve(), garaphpy.Graph.load("rmat:5", progress=False)


def test_module_scoped_fixtures_build_stores_outside_the_users_cache(module_scoped_store):
    import helpers

    cache, graph = module_scoped_store
    store = graph.store.path.resolve()
    assert cache.is_relative_to(helpers.TEST_CACHE_ROOT)
    assert store.is_relative_to(helpers.TEST_CACHE_ROOT)
    assert not store.is_relative_to(helpers.USER_CACHE_DIRECTORY)
    assert not helpers.TEST_CACHE_ROOT.is_relative_to(helpers.USER_CACHE_DIRECTORY)


# -- 4. Ctrl-C while numba compiles is never swallowed -------------------------------

def _interrupt_inside_a_ctypes_callback(signal_number=None):
    """What llvmlite does while numba finalizes a function: C code calls back into
    Python; a SIGINT (or ``signal_number``) arriving there raises inside the
    callback, and ctypes drops it."""
    import ctypes
    import signal
    import threading
    import time

    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)

    def callback(a, b):
        # to this (the main) thread: a process-wide kill may land on a worker thread,
        # whose C handler can run late on a loaded machine
        signal.pthread_kill(threading.main_thread().ident, signal_number or signal.SIGINT)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:      # the handler raises here, in the callback
            pass
        return 0

    items = (ctypes.c_int * 2)(2, 1)
    ctypes.CDLL(None).qsort(items, 2, ctypes.sizeof(ctypes.c_int), compare(callback))


@pytest.fixture
def default_sigint():
    """Python's default SIGINT handler for the test.  A suite started as a
    shell's background job (``.ci/run &``, as the local CI runs were) inherits
    SIGINT ignored, and garaphpy then rightly leaves SIGINT alone.  No test
    run before these changes it (the handler checked after each of them,
    fast and slow, 2026-11-28)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_interrupt_swallowed_by_a_compile_callback_stops_the_run(default_sigint, monkeypatch,
                                                                   capsys):
    from garaphpy import api

    real_compile = api._compiled_program

    def compile_hit_by_ctrl_c(program, **options):
        _interrupt_inside_a_ctypes_callback()
        return real_compile(program, **options)

    monkeypatch.setattr(api, "_compiled_program", compile_hit_by_ctrl_c)
    graph = garaphpy.Graph.from_arrays(*CHAIN)
    with pytest.raises(KeyboardInterrupt):
        garaphpy.run(graph, "pagerank", mode="cpu", threads=1)
    assert "Exception ignored" not in capsys.readouterr().err


def test_a_sigterm_swallowed_while_compiling_is_raised_again_as_sigterm(default_sigint):
    """The command line's SIGTERM (a SignalInterrupt) dropped by a compile
    callback comes back as itself, so the run exits 143, not Ctrl-C's 130."""
    import signal

    from garaphpy._numba_setup import KeptInterrupts
    from garaphpy.errors import SignalInterrupt

    def stop(signum, frame):
        raise SignalInterrupt(signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(SignalInterrupt) as caught:
            with KeptInterrupts():
                _interrupt_inside_a_ctypes_callback(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert caught.value.signal_number == signal.SIGTERM


@pytest.mark.parametrize("command", [["-m", "garaphpy.run", "run.toml"],
                                     ["-m", "garaphpy", "run", "run.toml"]],
                         ids=["run-module", "console"])
def test_cli_interrupted_while_compiling_exits_130(tmp_path, command):
    """Ctrl-C while numba compiles: status 130 and one line, from either command;
    no object the interrupt left half made is destroyed before the exit (a crash
    there was SIGSEGV after the "interrupted" line)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    config = tmp_path / "run.toml"
    config.write_text('graph = "rmat:8"\n[store]\npath = "store"\n'
                      '[run]\nprogram = "pagerank"\nmode = "cpu"\nthreads = 1\n')
    # a crash prints its stack
    environment = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba-cache"),
                       PYTHONFAULTHANDLER="1")
    process = subprocess.Popen(
        [sys.executable, *command, "--quiet"], env=environment, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(1.5)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=300)
    assert process.returncode == 130, out + err
    assert "garaphpy: interrupted" in err and "Traceback" not in err
    assert "done in" not in out


def test_cli_interrupt_that_left_an_exec_still_exits_130(tmp_path):
    """Under ``-m``, a KeyboardInterrupt that once left an ``exec`` of a string
    (numba compiles generated source so) made CPython kill the process with
    SIGINT as it exited, after garaphpy had handled the interrupt: exit -2,
    not 130.  Here the configuration's loader is such an exec."""
    import os
    import subprocess
    import sys

    hook = tmp_path / "hook"
    hook.mkdir()
    tested = Path(garaphpy.__file__).resolve().parents[1]      # the garaphpy under test
    (hook / "sitecustomize.py").write_text(
        f"import sys\nsys.path.insert(0, {str(tested)!r})\n"
        "import garaphpy.cli as cli\n"
        "def interrupted(*args, **kwargs):\n"
        "    exec('raise KeyboardInterrupt')\n"
        "cli.load_config = interrupted\n")
    path = [str(hook)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    result = subprocess.run(
        [sys.executable, "-m", "garaphpy.run", str(tmp_path / "run.toml")],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(path)), capture_output=True,
        text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 130, result.stdout + result.stderr
    assert "garaphpy: interrupted" in result.stderr and "Traceback" not in result.stderr


class _DroppedInDestructor:
    """Python drops an exception raised in ``__del__`` (an "Exception ignored"
    report), as it did a Ctrl-C landing in an llvmlite object's destructor."""

    def __init__(self, error):
        self.error = error

    def __del__(self):
        raise self.error


def test_cli_keeps_an_interrupt_dropped_in_a_destructor(monkeypatch):
    import signal
    import sys

    from garaphpy import cli
    from garaphpy.errors import SignalInterrupt

    reported = []

    def record(unraisable):
        reported.append(unraisable.exc_value)

    monkeypatch.setattr(sys, "unraisablehook", record)
    cli._DroppedInterrupts.check()      # none installed: nothing to raise
    for dropped, raised in ((KeyboardInterrupt(), KeyboardInterrupt),
                            (SignalInterrupt(signal.SIGTERM), SignalInterrupt)):
        with cli._DroppedInterrupts():
            cli._DroppedInterrupts.check()      # nothing dropped yet
            _DroppedInDestructor(dropped)
            _DroppedInDestructor(KeyboardInterrupt())   # a second: the first is kept
            with pytest.raises(raised) as caught:
                cli._DroppedInterrupts.check()
            assert getattr(caught.value, "signal_number", signal.SIGINT) == \
                getattr(dropped, "signal_number", signal.SIGINT)
            cli._DroppedInterrupts.check()      # raised once
    assert reported == []       # taken silently
    with cli._DroppedInterrupts():     # any other error is still reported
        _DroppedInDestructor(RuntimeError("a real destructor error"))
    assert [str(error) for error in reported] == ["a real destructor error"]
    assert sys.unraisablehook is record and cli._DroppedInterrupts.installed is None
    from garaphpy import _numba_setup

    with cli._DroppedInterrupts():      # wrapped after an interrupt: the wrapper stays
        _numba_setup.forgive_half_built_llvm_objects()
    assert getattr(sys.unraisablehook, "forgives_half_built_llvm_objects", False)


def test_cli_run_with_an_interrupt_dropped_while_loading_exits_130(tmp_path, monkeypatch,
                                                                   capsys):
    from garaphpy import cli

    real = cli.graph_from_config

    def loaded_while_a_destructor_dropped_ctrl_c(*arguments, **options):
        graph = real(*arguments, **options)
        _DroppedInDestructor(KeyboardInterrupt())
        return graph

    monkeypatch.setattr(cli, "graph_from_config", loaded_while_a_destructor_dropped_ctrl_c)
    config = tmp_path / "run.toml"
    config.write_text('graph = "rmat:6"\n[store]\npath = "store"\n'
                      '[run]\nprogram = "pagerank"\nmode = "cpu"\nthreads = 1\n')
    assert cli.main([str(config), "--quiet"]) == 130
    captured = capsys.readouterr()
    assert "garaphpy: interrupted" in captured.err and "Exception ignored" not in captured.err
    assert not (tmp_path / "results").exists()      # nothing written


def test_an_error_after_a_swallowed_interrupt_is_the_interrupt(default_sigint):
    from garaphpy import _numba_setup

    with pytest.raises(KeyboardInterrupt) as caught:
        with _numba_setup.KeptInterrupts():
            _interrupt_inside_a_ctypes_callback()
            raise RuntimeError("no compiled object yet")     # what numba raises next
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(RuntimeError, match="a bug"):        # without a Ctrl-C: itself
        with _numba_setup.KeptInterrupts():
            raise RuntimeError("a bug")


def test_store_build_hit_by_ctrl_c_in_a_callback_stops(default_sigint, monkeypatch, tmp_path):
    from garaphpy.storage import builder

    real_run = builder._Builder.run

    def run_hit_by_ctrl_c(self):
        _interrupt_inside_a_ctypes_callback()
        return real_run(self)

    monkeypatch.setattr(builder._Builder, "run", run_hit_by_ctrl_c)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(KeyboardInterrupt):
        garaphpy.Graph.from_arrays(*CHAIN)
    assert list(tmp_path.iterdir()) == []   # the temporary store is gone


_HALF_BUILT_LLVM_OBJECT = """
import llvmlite.binding.ffi as ffi
half_built = ffi.ObjectRef.__new__(ffi.ObjectRef)   # an interrupt cut __init__ short
{before}
del half_built

class Other:
    def __del__(self):
        raise RuntimeError("a real destructor error")

other = Other()
del other
"""


@pytest.mark.parametrize("forgive", [False, True])
def test_half_built_llvm_object_is_silent_only_after_an_interrupt(forgive):
    import subprocess
    import sys

    before = ("import garaphpy._numba_setup as setup\n"
              "setup.forgive_half_built_llvm_objects()\n"
              "setup.forgive_half_built_llvm_objects()" if forgive else "")
    finished = subprocess.run([sys.executable, "-c", _HALF_BUILT_LLVM_OBJECT.format(before=before)],
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert ("_as_parameter_" in finished.stderr) is not forgive
    assert finished.stderr.count("Exception ignored") == (1 if forgive else 2)
    assert "a real destructor error" in finished.stderr


def test_interrupt_while_compiling_forgives_half_built_llvm_objects(monkeypatch):
    import sys

    from garaphpy import _numba_setup

    monkeypatch.setattr(sys, "unraisablehook", sys.unraisablehook)
    with pytest.raises(KeyboardInterrupt):
        with _numba_setup.KeptInterrupts():
            _interrupt_inside_a_ctypes_callback()
            raise KeyboardInterrupt
    assert getattr(sys.unraisablehook, "forgives_half_built_llvm_objects", False)


# -- 8. sources are checked only for programs that use them --------------------------

def test_pagerank_ignores_sources_with_a_warning_instead_of_failing():
    from references import pagerank_power

    graph = garaphpy.Graph.from_arrays(np.array([10, 20, 30, 30]), np.array([20, 30, 10, 20]))
    with pytest.warns(garaphpy.IgnoredSourcesWarning, match="PageRank does not use"):
        result = garaphpy.run(graph, "pagerank", sources=[0], mode="cpu", threads=1,
                              tolerance=1e-12, max_iterations=500)
    np.testing.assert_allclose(result.values, pagerank_power(graph), atol=1e-9)


def test_programs_that_use_sources_still_check_them():
    graph = garaphpy.Graph.from_arrays(np.array([10, 20]), np.array([20, 30]))
    with pytest.raises(garaphpy.ConfigError, match="sources: .*0"):
        garaphpy.run(graph, "bfs", sources=[0], mode="cpu", threads=1)


# -- 9. weighted programs on unweighted files -----------------------------------------

SAMPLE_WEB = REPOSITORY / "examples" / "graphs" / "sample-web.txt.gz"


def _splitmix_weight(u: int, v: int, max_weight: int = 255) -> int:
    """The documented hash rule, in plain Python integers."""
    mask = (1 << 64) - 1
    z = (((u << 32) ^ v) + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return 1 + (z ^ (z >> 31)) % max_weight


def _sample_web_edges():
    import gzip

    with gzip.open(SAMPLE_WEB, "rt") as file:
        pairs = [tuple(map(int, line.split())) for line in file if not line.startswith("#")]
    return sorted(set(pairs))


@pytest.mark.parametrize("rule", ["unit", "hash"])
def test_sssp_runs_on_an_unweighted_file_with_weights_by_rule(rule):
    import scipy.sparse
    from scipy.sparse.csgraph import dijkstra

    graph = garaphpy.Graph.load(SAMPLE_WEB, weights=rule, progress=False)
    assert graph.weighted
    edges = _sample_web_edges()
    ids = sorted({u for edge in edges for u in edge})
    index = {vertex: i for i, vertex in enumerate(ids)}
    weights = [1 if rule == "unit" else _splitmix_weight(u, v) for u, v in edges]
    matrix = scipy.sparse.csr_matrix(
        (weights, ([index[u] for u, _ in edges], [index[v] for _, v in edges])),
        shape=(len(ids), len(ids)))
    source = edges[0][0]
    result = garaphpy.run(graph, "sssp", sources=[source], mode="cpu", threads=1)
    expected = dijkstra(matrix, indices=index[source])
    order = [index[int(v)] for v in graph.original_ids()]
    np.testing.assert_array_equal(result.values, expected[order])


def test_weights_rule_in_the_config(tmp_path, capsys):
    from garaphpy.cli import main

    config = tmp_path / "run.toml"
    config.write_text(f'graph = "{SAMPLE_WEB}"\n[input]\nweights = "hash"\nmax_weight = 9\n'
                      '[store]\npath = "store"\n[run]\nprogram = "sssp"\nsources = [0]\n'
                      'mode = "cpu"\nthreads = 1\nverify = true\n')
    assert main([str(config), "--quiet"]) == 0, capsys.readouterr().err
    assert "verify: PASSED" in capsys.readouterr().out
    values = np.loadtxt(tmp_path / "results" / "sample-web-weights-hash-maxweight-9.sssp.txt")
    reachable = values[:, 1][np.isfinite(values[:, 1])]
    assert reachable.max() > 9 and reachable.max() <= 9 * len(reachable)


# -- 6. threads: capped to the cores, scaled with the graph, passive on a busy machine --

def test_more_threads_than_cores_is_capped_with_a_warning():
    from garaphpy import config

    graph = garaphpy.Graph.from_arrays(*CHAIN)
    too_many = config.usable_cores() + 14
    with pytest.warns(garaphpy.ThreadsCappedWarning, match=f"threads={too_many}: .* using"):
        capped = garaphpy.run(graph, "bfs", sources=[0], mode="cpu", threads=too_many)
    np.testing.assert_array_equal(capped.values, bfs_scipy(graph, [0]))


def test_default_threads_scale_with_edges():
    import numba

    from garaphpy import api, config

    cores = min(config.usable_cores(), numba.config.NUMBA_NUM_THREADS)
    assert api._threads(None, 6_719) == 1
    assert api._threads(None, config.DEFAULT_EDGES_PER_THREAD * 2) == min(2, cores)
    assert api._threads(None, 10**12) == cores


@pytest.mark.parametrize("busy, expected", [(0.0, None), (1.5, "PASSIVE")])
def test_passive_wait_policy_only_on_a_busy_machine(monkeypatch, busy, expected):
    from garaphpy import _numba_setup

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    monkeypatch.setattr(_numba_setup, "busy_cores", lambda seconds: busy)
    _numba_setup._choose_wait_policy()
    import os

    assert os.environ.get("OMP_WAIT_POLICY") == expected
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")     # the user's choice stands
    monkeypatch.setattr(_numba_setup, "busy_cores", lambda seconds: 8.0)
    assert _numba_setup._choose_wait_policy() == "ACTIVE"


def test_the_load_sample_is_the_imports_less_this_process(monkeypatch):
    """Other processes' cores over the imports since garaphpy's own: the
    machine's busy CPU seconds less this process's (no sleep to sample)."""
    from garaphpy import config

    slept = []
    monkeypatch.setattr(config.time, "sleep", slept.append)
    # 0.4 s of imports: the machine busy 1.0 CPU-second, 0.4 of it this process's
    monkeypatch.setattr(config, "_LOAD_SAMPLE_START", [(10.0, 100.0, 3.0)])
    monkeypatch.setattr(config, "_cpu_seconds", lambda: (10.4, 101.0, 3.4))
    assert config.other_processes_busy_cores(0.05) == pytest.approx(1.5)
    assert slept == []
    # less than the sample's minimum since the start: waits for the rest
    readings = iter([(10.02, 100.0, 3.0), (10.05, 100.01, 3.0)])
    monkeypatch.setattr(config, "_cpu_seconds", lambda: next(readings))
    assert config.other_processes_busy_cores(0.05) == pytest.approx(0.2)
    assert slept == [pytest.approx(0.03)]
    monkeypatch.setattr(config, "_LOAD_SAMPLE_START", [None])      # no /proc/stat
    assert config.other_processes_busy_cores(0.05) is None


# -- 7. stores and outputs keyed so that different inputs never overwrite each other ----

def _quickstart_copy(tmp_path):
    import shutil

    examples = REPOSITORY / "examples"
    shutil.copytree(examples / "graphs", tmp_path / "graphs")
    shutil.copy(examples / "quickstart.toml", tmp_path / "quickstart.toml")
    return tmp_path / "quickstart.toml"


def test_quickstart_with_another_graph_keeps_the_first_store_and_results(tmp_path, capsys):
    from garaphpy.cli import main

    config = _quickstart_copy(tmp_path)
    assert main([str(config), "-q", "--set", "run.mode=cpu"]) == 0
    first = capsys.readouterr().out
    first_store = re.search(r"^store: (.*)$", first, re.M).group(1)
    ranks = (tmp_path / "results" / "sample-web.pagerank.txt").read_bytes()
    assert main([str(config), "-q", "--set", "run.mode=cpu", "--set", "graph=rmat:8"]) == 0
    second_store = re.search(r"^store: (.*)$", capsys.readouterr().out, re.M).group(1)
    assert second_store != first_store
    assert garaphpy.Graph.open(first_store).num_vertices == 782
    assert (tmp_path / "results" / "sample-web.pagerank.txt").read_bytes() == ranks
    assert (tmp_path / "results" / "rmat-8.pagerank.txt").is_file()


def test_a_store_path_holding_another_input_is_refused_unless_rebuild(tmp_path, capsys):
    from garaphpy.cli import main

    config = tmp_path / "run.toml"
    config.write_text(f'graph = "{SAMPLE_WEB}"\n[store]\npath = "store"\n')
    assert main([str(config), "-q"]) == 0
    capsys.readouterr()
    assert main([str(config), "-q", "--set", "graph=rmat:8"]) == 2
    error = capsys.readouterr().err
    assert f"store {tmp_path / 'store'} holds the store of '{SAMPLE_WEB}', not of 'rmat:8'" \
        in error
    assert garaphpy.Graph.open(tmp_path / "store").num_vertices == 782
    assert main([str(config), "-q", "--set", "graph=rmat:8", "--rebuild"]) == 0
    assert garaphpy.Graph.open(tmp_path / "store").num_vertices == 256


def test_weighted_and_unweighted_variants_get_their_own_outputs(tmp_path):
    from garaphpy.cli import main
    from garaphpy.output import read_values

    config = tmp_path / "run.toml"
    config.write_text('graph = "rmat:8"\n[run]\nprogram = "bfs"\nsources = [1]\n'
                      'mode = "cpu"\n')
    assert main([str(config), "-q"]) == 0
    assert main([str(config), "-q", "--set", "input.weighted=true"]) == 0
    plain = tmp_path / "results" / "rmat-8.bfs.txt"
    weighted = tmp_path / "results" / "rmat-8-weighted.bfs.txt"
    assert plain.is_file() and weighted.is_file()
    assert read_values(plain)[0].size == read_values(weighted)[0].size


@pytest.mark.parametrize("dtype, marker", [(np.int64, 2**63 - 1), (np.int32, 2**31 - 1),
                                           (np.int64, -2**63)])
def test_integer_marker_that_gather_would_wrap_is_refused_with_one_that_cannot(dtype, marker,
                                                                              tmp_path):
    namespace = {"VertexProgram": VertexProgram, "np": np, "math": math}
    source = (f"class P(VertexProgram):\n    value_dtype = np.{np.dtype(dtype).name}\n"
              f"    sum = 'min'\n"
              f"    def init(is_source):\n        return 0 if is_source else {marker}\n"
              f"    def gather(src):\n        return src + 1\n"
              f"    def apply(value, accum):\n        return min(value, accum)\n"
              f"    def activate(new, old):\n        return new < old\n")
    headroom = (int(np.iinfo(dtype).max) + 1) // 2
    # what the engine's arithmetic would do with it: wrap (numpy as numba and C)
    with np.errstate(over="ignore"):
        assert np.array([marker], dtype) + np.array([1], dtype) < 0 or marker < 0
    wraps, fits = tmp_path / "wraps.py", tmp_path / "fits.py"
    wraps.write_text(source)
    with pytest.raises(ProgramError, match=rf"wraps.py:5: in init: .*src \+ 1.*wraps.*{headroom}"):
        exec(compile(source, str(wraps), "exec"), namespace)
    # the suggested marker is accepted
    fits.write_text(source.replace(str(marker), str(headroom)))
    exec(compile(fits.read_text(), str(fits), "exec"), namespace)


def test_the_inf_message_suggests_a_marker_that_cannot_wrap():
    with pytest.raises(ProgramError) as error:
        class Inf(VertexProgram):           # noqa: F841
            value_dtype = np.int64
            sum = "min"

            def init(is_source):
                return 0 if is_source else math.inf

            def gather(src):
                return src + 1

            def apply(value, accum):
                return min(value, accum)

            def activate(new, old):
                return new < old
    message = str(error.value)
    suggested = int(re.search(r"such as (\d+)", message).group(1))
    assert suggested + 1 > 0 and np.int64(suggested) + np.int64(1) > 0, message
    assert suggested != 2**63 - 1


def test_a_store_of_the_same_input_with_other_options_names_them(tmp_path):
    from garaphpy.errors import ConfigError

    garaphpy.Graph.load(SAMPLE_WEB, store=tmp_path / "store", weights="hash")
    with pytest.raises(ConfigError) as raised:
        garaphpy.Graph.load(SAMPLE_WEB, store=tmp_path / "store")
    message = str(raised.value)
    assert message.startswith(f"store {tmp_path / 'store'} holds a store of '{SAMPLE_WEB}' "
                              "built with other options (edge_weights 'hash' there, None asked")
    assert message.endswith("give another store path, or rebuild to replace it "
                            "(--rebuild, rebuild=True)")
    assert garaphpy.Graph.load(SAMPLE_WEB, store=tmp_path / "store", rebuild=True).weighted \
        is False
