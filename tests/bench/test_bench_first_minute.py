"""bench/first_minute.py's preparation, without GAPBS: its programs compiled
from a copy of its sources alone, and options refused before anything is
generated or built."""

from __future__ import annotations

import shutil
import stat

import pytest

from bench import first_minute


def test_gapbs_programs_already_there_are_used_as_they_are(tmp_path):
    for name in first_minute.GAPBS_PROGRAMS:
        (tmp_path / name).write_text("#!/bin/sh\n")
    assert first_minute.gapbs_binaries(tmp_path) == tmp_path


def test_without_programs_or_sources_the_error_names_the_missing_file(tmp_path):
    (tmp_path / "pr").write_text("#!/bin/sh\n")
    with pytest.raises(SystemExit, match=r"no converter there, and no src/converter.cc"):
        first_minute.gapbs_binaries(tmp_path)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_programs_are_compiled_from_the_sources_alone(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    for name in first_minute.GAPBS_PROGRAMS:
        (tmp_path / "src" / f"{name}.cc").write_text("int main() { return 0; }\n")
    monkeypatch.setenv("CXX", "g++")
    first_minute.gapbs_binaries(tmp_path)
    for name in first_minute.GAPBS_PROGRAMS:
        assert (tmp_path / name).stat().st_mode & stat.S_IXUSR


@pytest.mark.parametrize("option, message", [
    (["--variants", "default,gpu"], "--variants: no variant 'gpu'"),
    (["--cases", "pagerank,load"], "--cases: no case 'load'"),
    (["--build-trials", "0"], "--build-trials=0: expected >= 1"),
])
def test_a_bad_option_is_refused_before_anything_runs(tmp_path, capsys, option, message):
    with pytest.raises(SystemExit) as exit_:
        first_minute.main(["--gapbs", str(tmp_path), "--workdir", str(tmp_path / "w"),
                           *option])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_the_edge_list_is_the_text_gapbs_writes_of_its_serialized_graph(tmp_path):
    import numpy as np

    offsets = np.array([0, 2, 2, 5, 6], np.int64)         # vertex 1 without out-edges
    neighbours = np.array([3, 1, 0, 1, 3, 2], np.int32)
    path = tmp_path / "g.sg"
    with open(path, "wb") as out:
        out.write(b"\0")                                   # undirected
        np.array([neighbours.size, offsets.size - 1], np.int64).tofile(out)
        offsets.tofile(out)
        neighbours.tofile(out)
    first_minute.write_edge_list(path, tmp_path / "g.el", threads=2, edges_per_piece=4)
    expected = "".join(f"{u} {v}\n" for u in range(4)
                       for v in neighbours[offsets[u]:offsets[u + 1]].tolist())
    assert (tmp_path / "g.el").read_text() == expected


def test_a_baseline_side_runs_its_own_trees_code(tmp_path, monkeypatch):
    tree = tmp_path / "older"
    (tree / "garaphpy").mkdir(parents=True)
    (tree / "garaphpy" / "__init__.py").write_text("")
    (tree / "garaphpy" / "__main__.py").write_text("print(__file__)\n")
    edge_list = tmp_path / "g.el"
    edge_list.write_text("0 1\n")
    monkeypatch.chdir(first_minute.REPO)          # where the bench runs: another garaphpy
    side = first_minute.Garaphpy(tree, edge_list, tmp_path, threads=1, label="-baseline")
    _, output = side.timed([first_minute.sys.executable, "-m", "garaphpy"])
    assert output.strip() == str(tree / "garaphpy" / "__main__.py")
