"""The ``garaphpy`` console command, progress through ``logging``, and the packaging.

One-line runs (``garaphpy pagerank FILE``) are checked against the TOML form
(``python -m garaphpy.run``) and against NetworkX/SciPy; bad arguments exit 2
with one line; library use prints nothing while the command line prints its
progress to standard error; a built wheel carries the licence, ``py.typed``
and the console script.
"""

from __future__ import annotations

import configparser
import gzip
import importlib
import logging
import shutil
import subprocess
import sys
import zipfile

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
    assert exit_code(["sssp", "g.wel", "--source", "3", "-s", "17", "--mode", "cpu",
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
        ["sssp", "g.wel", "-s", "7", "-s", "9", "--mode", "gpu", "--threads", "2",
         "--max-iterations", "50", "--tolerance", "0.5", "--undirected", "--format", "wel",
         "--store", "st", "-o", "out/d.npy", "--iterations", "out/it.jsonl",
         "--constant", "a=1", "--set", "input.self_loops=drop"])
    from_flags = console.settings_from_arguments(args)
    (tmp_path / "same.toml").write_text(
        'graph = "g.wel"\n[input]\nformat = "wel"\ndirected = false\nself_loops = "drop"\n'
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
])
def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys, monkeypatch, argv, needle):
    (tmp_path / "g.el").write_text("0 1\n1 2\n")
    monkeypatch.chdir(tmp_path)
    assert exit_code(argv) == 2
    captured = capsys.readouterr()
    assert needle in captured.err
    assert captured.err.startswith("garaphpy: error: ") and captured.err.count("\n") == 1
    assert captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.el"]


def test_bad_arguments_from_a_new_process(tmp_path):
    ran = subprocess.run([sys.executable, "-m", "garaphpy", "bfs", "x.el", "--mode", "tpu"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2
    assert ran.stderr.count("\n") == 1 and "--mode" in ran.stderr


def test_missing_file_exits_1_like_the_toml_form(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert exit_code(["bfs", "missing.el", "-s", "0"]) == 1
    assert "missing.el" in capsys.readouterr().err


def test_run_subcommand_is_the_toml_form(tmp_path, capsys):
    config = tmp_path / "g.toml"
    config.write_text('graph = "rmat:6"\n[store]\npath = "s"\n')
    assert exit_code(["run", str(config), "-q"]) == 0
    assert "64 vertices" in capsys.readouterr().out
    assert exit_code(["run", str(config), "--set", "store.colour=1"]) == 2
    assert "store.colour" in capsys.readouterr().err


def test_console_script_is_declared_and_resolves_to_main():
    setup = configparser.ConfigParser()
    setup.read(REPO / "setup.cfg")
    scripts = [line.split("=", 1) for line in
               setup["options.entry_points"]["console_scripts"].strip().splitlines()]
    targets = {name.strip(): target.strip() for name, target in scripts}
    module, function = targets["garaphpy"].split(":")
    assert getattr(importlib.import_module(module), function) is console.main


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
    shutil.copytree(REPO / "garaphpy", source / "garaphpy",
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
        assert "garaphpy = garaphpy.console:main" in archive.read(entry_points).decode()
        (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = archive.read(metadata).decode()
        assert "License: MIT" in text
        assert 'Provides-Extra: pandas' in text and 'Provides-Extra: networkx' in text
