"""The ``garaphpy`` console command, progress through ``logging``, and the packaging.

One-line runs (``garaphpy pagerank FILE``) are checked against the TOML form
(``python -m garaphpy.run``) and against NetworkX/SciPy; bad arguments exit 2
with one line (an argparse error adds the sub-command's usage); GAPBS's
short flags (-r, -n, -s, -v) and trials; library use prints nothing while the command line prints its
progress to standard error; a built wheel carries the licence, ``py.typed``
and the console script.
"""

from __future__ import annotations

import configparser
import gzip
import importlib
import logging
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.csgraph

from garaphpy import cli, console
from garaphpy.configfile import load_config
from garaphpy.graph import Graph
from garaphpy.output import read_values
from helpers import REPOSITORY as REPO

SAMPLE = REPO / "examples" / "graphs" / "sample-web.txt.gz"


def exit_code(argv: list[str]) -> int:
    """``console.main``'s exit code, argparse's SystemExit included."""
    try:
        return console.main(argv)
    except SystemExit as stop:
        return stop.code


def sample_networkx() -> nx.DiGraph:
    graph = nx.DiGraph()
    with gzip.open(SAMPLE, "rt") as handle:
        for line in handle:
            if line.strip() and not line.startswith("#"):
                u, v = map(int, line.split())
                graph.add_edge(u, v)
    return graph


# -- one-line runs ------------------------------------------------------------
def test_pagerank_one_line_equals_toml_form_and_networkx(tmp_path):
    one_line = tmp_path / "one-line.txt"
    command = [sys.executable, "-m", "garaphpy", "pagerank", str(SAMPLE), "--mode", "cpu",
               "--constant", "damping=0.9", "--tolerance", "1e-9", "--store",
               str(tmp_path / "store"), "--output", str(one_line), "-q"]
    ran = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert ran.returncode == 0, ran.stderr
    assert "PageRank (cpu, sync): converged" in ran.stdout
    assert ran.stderr == ""                     # --quiet: no progress lines

    config = tmp_path / "pagerank.toml"
    config.write_text(f'graph = "{SAMPLE}"\n[store]\npath = "store"\n[run]\n'
                      'program = "pagerank"\nmode = "cpu"\ntolerance = 1e-9\n'
                      'constants = { damping = 0.9 }\n[output]\nvalues = "toml.txt"\n')
    assert cli.main([str(config), "-q"]) == 0
    assert one_line.read_text() == (tmp_path / "toml.txt").read_text()

    vertices, ranks = read_values(one_line)
    expected = nx.pagerank(sample_networkx(), alpha=0.9, tol=1e-12, max_iter=1000)
    assert sorted(vertices.tolist()) == sorted(expected)
    assert np.allclose(ranks, [expected[v] for v in vertices.tolist()], rtol=0, atol=1e-8)


def test_sssp_one_line_with_sources_matches_scipy(tmp_path, capsys, monkeypatch):
    rng = np.random.default_rng(5)
    n = 40
    src, dst = rng.integers(0, n, 200), rng.integers(0, n, 200)
    keep = src != dst
    src, dst = src[keep], dst[keep]
    weights = rng.integers(1, 20, src.size)
    (tmp_path / "g.wel").write_text("".join(f"{u} {v} {w}\n" for u, v, w in
                                            zip(src, dst, weights)))
    monkeypatch.chdir(tmp_path)
    assert exit_code(["sssp", "g.wel", "--source", "3", "-r", "17", "--mode", "cpu",
                      "--verify", "-q"]) == 0
    out = capsys.readouterr().out
    assert "verify: PASSED" in out
    vertices, distances = read_values(tmp_path / "results" / "g.sssp.txt")

    # duplicates = "drop" (the default) keeps the first edge's weight
    first = {}
    for u, v, w in zip(src.tolist(), dst.tolist(), weights.tolist()):
        first.setdefault((u, v), w)
    u, v = np.array(list(first)).T
    matrix = scipy.sparse.csr_array((np.array(list(first.values()), float), (u, v)),
                                    shape=(n, n))
    reference = scipy.sparse.csgraph.dijkstra(matrix, indices=[3, 17], min_only=True)
    assert np.array_equal(distances, reference[vertices])


def test_one_line_settings_equal_the_toml_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = console.parser().parse_args(
        ["sssp", "g.wel", "-r", "7", "-r", "9", "--mode", "gpu", "--threads", "2",
         "--max-iterations", "50", "--tolerance", "0.5", "-s", "--format", "wel",
         "--weights", "hash", "--max-weight", "9",
         "--store", "st", "-o", "out/d.npy", "--iterations", "out/it.jsonl",
         "--constant", "a=1", "--set", "input.self_loops=drop"])
    from_flags = console.settings_from_arguments(args)
    (tmp_path / "same.toml").write_text(
        'graph = "g.wel"\n[input]\nformat = "wel"\ndirected = false\nself_loops = "drop"\n'
        'weights = "hash"\nmax_weight = 9\n'
        '[store]\npath = "st"\n[run]\nprogram = "sssp"\nsources = [7, 9]\nmode = "gpu"\n'
        'threads = 2\nmax_iterations = 50\ntolerance = 0.5\nconstants = { a = 1 }\n'
        '[output]\nvalues = "out/d.npy"\niterations = "out/it.jsonl"\n')
    assert from_flags == load_config(tmp_path / "same.toml")


@pytest.mark.parametrize("argv,needle", [
    ([], "expected a program"),
    (["pagerank"], "FILE"),
    (["pagerank", "g.el", "--threads", "0"], "--threads: 0 is below the minimum 1"),
    (["pagerank", "g.el", "--threads", "two"], "--threads"),
    (["pagerank", "g.el", "--mode", "tpu"], "--mode"),
    (["pagerank", "g.el", "--tolerance", "-1"], "--tolerance"),
    (["pagerank", "g.el", "--constant", "damping"], "NAME=NUMBER"),
    (["pagerank", "g.el", "--constant", "colour=1"], "colour"),
    (["pagerank", "g.el", "--set", "run.colour=1"], "run.colour"),
    (["sssp", "g.el", "--directed", "--undirected"], "--undirected"),
    (["pagerank", "g.el", "--frobnicate"], "--frobnicate"),
    (["pagerank", "g.el", "--max-iterations", "0"], "--max-iterations"),
    (["pagerank", "g.el", "-n", "0"], "-n/--trials"),
    (["bfs", "g.el", "-r", "first"], "'random'"),
    (["bfs", "g.el", "-r", "random", "-r", "1"], "alone"),
    (["bfs", "g.el", "--weights", "heavy"], "--weights"),
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, monkeypatch, argv, needle):
    (tmp_path / "g.el").write_text("0 1\n1 2\n")
    monkeypatch.chdir(tmp_path)
    assert exit_code(argv) == 2
    captured = capsys.readouterr()
    first, *usage = captured.err.splitlines()
    assert first.startswith("garaphpy: error: ") and needle in first
    # argparse's errors go on with the sub-command's own usage (not the top parser's)
    assert not usage or usage[0].startswith(f"usage: garaphpy {argv[0]} [-h]")
    assert captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.el"]


def test_bad_arguments_from_a_new_process(tmp_path):
    ran = subprocess.run([sys.executable, "-m", "garaphpy", "bfs", "x.el", "--mode", "tpu"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2
    first, *usage = ran.stderr.splitlines()
    assert "--mode" in first and usage[0].startswith("usage: garaphpy bfs [-h]")


def test_missing_file_exits_1_like_the_toml_form(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert exit_code(["bfs", "missing.el", "-r", "0"]) == 1
    assert "missing.el" in capsys.readouterr().err


def test_old_dash_s_source_stops_and_dash_s_is_gapbs_symmetrize(tmp_path, capsys,
                                                                monkeypatch):
    (tmp_path / "g.el").write_text("0 1\n1 2\n")
    monkeypatch.chdir(tmp_path)
    assert exit_code(["bfs", "g.el", "-s", "1"]) == 2       # once the source: now refused
    first, usage, *_ = capsys.readouterr().err.splitlines()
    assert "unrecognized arguments: 1" in first and usage.startswith("usage: garaphpy bfs")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.el"]
    args = console.parser().parse_args(["bfs", "g.el", "-s", "-r", "1"])
    settings = console.settings_from_arguments(args)
    assert settings["input"]["directed"] is False and settings["run"]["sources"] == [1]


def random_graph_with_sinks(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Edges among 0..29 whose vertices 20..29 have no out-edge; written as .el."""
    rng = np.random.default_rng(11)
    src, dst = rng.integers(0, 20, 90), rng.integers(0, 30, 90)
    path.write_text("".join(f"{u} {v}\n" for u, v in zip(src, dst)))
    return src, dst


def test_trials_with_random_sources_gapbs_style(tmp_path, capsys, monkeypatch):
    src, dst = random_graph_with_sinks(tmp_path / "g.el")
    monkeypatch.chdir(tmp_path)
    argv = ["bfs", "g.el", "-r", "random", "-n", "4", "--mode", "cpu", "-q", "-v"]
    assert exit_code(argv) == 0
    out = capsys.readouterr().out
    trials = re.findall(r"^trial (\d)/4: [\d.]+ s \(\d+ iterations, set-up [\d.]+ s, "
                        r"source (\d+)\)$", out, re.MULTILINE)
    assert [int(number) for number, _ in trials] == [1, 2, 3, 4]
    sources = [int(source) for _, source in trials]
    assert set(sources) <= set(src.tolist())          # only vertices with an out-edge
    assert re.search(r"^trials: 4, average [\d.]+ s, min [\d.]+ s, max [\d.]+ s$", out,
                     re.MULTILINE)
    assert out.count("verify: PASSED") == 4           # every trial verified, as GAPBS's -v
    # the values written are the last trial's: BFS from its source
    vertices, depths = read_values(tmp_path / "results" / "g.bfs.txt")
    matrix = scipy.sparse.csr_array((np.ones(src.size), (src, dst)), shape=(30, 30))
    reference = scipy.sparse.csgraph.shortest_path(matrix, unweighted=True,
                                                   indices=sources[-1])[vertices]
    assert np.array_equal(np.where(depths < 0, np.inf, depths), reference)
    # the same seed, the same sources
    assert exit_code(argv) == 0
    again = re.findall(r"source (\d+)\)$", capsys.readouterr().out, re.MULTILINE)
    assert [int(source) for source in again] == sources


def test_trials_refuse_checkpoints(tmp_path, capsys, monkeypatch):
    random_graph_with_sinks(tmp_path / "g.el")
    monkeypatch.chdir(tmp_path)
    assert exit_code(["bfs", "g.el", "-r", "0", "-n", "2", "--resume", "-q"]) == 2
    assert "-n/--trials" in capsys.readouterr().err


def test_weights_unit_runs_sssp_on_an_unweighted_file(tmp_path, capsys, monkeypatch):
    src, dst = random_graph_with_sinks(tmp_path / "g.el")
    monkeypatch.chdir(tmp_path)
    assert exit_code(["sssp", "g.el", "--weights", "unit", "-r", "3", "--mode", "cpu",
                      "-q"]) == 0
    # the weights are part of the graph's name, as in the TOML form
    vertices, distances = read_values(tmp_path / "results" / "g-weights-unit.sssp.txt")
    matrix = scipy.sparse.csr_array((np.ones(src.size), (src, dst)), shape=(30, 30))
    reference = scipy.sparse.csgraph.shortest_path(matrix, unweighted=True, indices=3)
    assert np.array_equal(distances, reference[vertices])


def test_run_subcommand_is_the_toml_form(tmp_path, capsys):
    config = tmp_path / "g.toml"
    config.write_text('graph = "rmat:6"\n[store]\npath = "s"\n')
    assert exit_code(["run", str(config), "-q"]) == 0
    assert "64 vertices" in capsys.readouterr().out
    assert exit_code(["run", str(config), "--set", "store.colour=1"]) == 2
    assert "store.colour" in capsys.readouterr().err


def test_console_script_is_declared_and_resolves_to_its_command():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    scripts = [line.split("=", 1) for line in
               setup["options.entry_points"]["console_scripts"].strip().splitlines()]
    targets = {name.strip(): target.strip() for name, target in scripts}
    module, function = targets["garaphpy"].split(":")
    assert getattr(importlib.import_module(module), function) is console.command


def test_every_builtin_program_is_a_subcommand():
    from garaphpy.programs import BUILTIN_PROGRAMS, program_class

    assert {program_class(c) for c in console.PROGRAM_COMMANDS} == set(BUILTIN_PROGRAMS.values())
    for command in console.PROGRAM_COMMANDS:
        args = console.parser().parse_args([command, "g.el"])
        assert args.command == command


# -- progress through logging -------------------------------------------------
def test_library_use_prints_nothing_and_logs_progress(tmp_path, capsys, caplog):
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("garaphpy").handlers)
    with caplog.at_level(logging.INFO, logger="garaphpy"):
        Graph.load("rmat:6", store=tmp_path / "s", progress=True)
        Graph.load("rmat:6", store=tmp_path / "s", progress=True)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    messages = [(r.name, r.getMessage()) for r in caplog.records]
    assert ("garaphpy.preprocess", "preprocess: reusing up-to-date store "
            f"{tmp_path / 's'}") in messages
    assert any(name == "garaphpy.preprocess" and text.startswith("preprocess: done")
               for name, text in messages)
    assert any("64 vertices" in text for _, text in messages)      # the load summary


def test_cli_prints_progress_to_stderr_and_quiet_silences_it(tmp_path, capsys):
    config = tmp_path / "g.toml"
    config.write_text('graph = "rmat:6"\n[store]\npath = "s"\n')
    before = list(logging.getLogger("garaphpy").handlers)
    assert cli.main([str(config)]) == 0
    captured = capsys.readouterr()
    assert "preprocess: done" in captured.err
    assert captured.out.count("64 vertices") == 1 and "64 vertices" not in captured.err
    assert cli.main([str(config), "--rebuild", "-q"]) == 0
    assert capsys.readouterr().err == ""
    assert logging.getLogger("garaphpy").handlers == before


# -- packaging ----------------------------------------------------------------
def test_wheel_has_license_py_typed_and_console_script(tmp_path):
    source = tmp_path / "src"
    source.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, source / name)
    for package in ("garaphpy", "_garaphpy_nx"):
        shutil.copytree(REPO / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-w", str(tmp_path / "dist"), str(source)],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("garaphpy-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "garaphpy/py.typed" in names
        assert "garaphpy/kernels/cuda/pull.cu" in names     # the GPU kernels
        assert "garaphpy/kernels/cuda/sparse.cu" in names
        assert "garaphpy/kernels/cuda/stream.cu" in names
        (license_name,) = [n for n in names if n.endswith(".dist-info/LICENSE")
                           or "/licenses/LICENSE" in n]
        assert archive.read(license_name).decode().startswith("MIT License")
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = archive.read(entry_points).decode()
        assert "garaphpy = garaphpy.console:command" in entry_points
        # the NetworkX backend, and its metadata apart from garaphpy's imports
        assert "garaphpy = garaphpy.nx_backend:BackendInterface" in entry_points
        assert "garaphpy = _garaphpy_nx:get_info" in entry_points
        assert "_garaphpy_nx/__init__.py" in names
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
        assert "License: MIT" in text
        assert 'Provides-Extra: pandas' in text and 'Provides-Extra: networkx' in text
