"""bench/before_after.py: two trees' runs in turns, compared case by case."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench import before_after, harness


def test_a_tree_against_itself_gives_every_case_with_the_same_values(tmp_path):
    rows = tmp_path / "rows.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "bench", "before-after", "--baseline", str(harness.REPOSITORY),
         "--mode", "cpu", "--graphs", "rmat:8,grid:12x12", "--programs", "pagerank,sssp",
         "--threads", "1", "--trials", "1", "--warmup", "0", "--rounds", "2", "--quiet",
         "--json", str(rows)],
        cwd=harness.REPOSITORY, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(("rmat", "grid"))]
    assert len(lines) == 4 and all(line.endswith("yes") for line in lines)
    written = [json.loads(line) for line in rows.read_text().splitlines()]
    assert sorted({(row["tree"], row["graph"], row["program"]) for row in written}) == sorted(
        (tree, graph, program) for tree in ("old", "new")
        for graph in ("rmat:8", "grid:12x12") for program in ("pagerank", "sssp"))
    assert {row["round"] for row in written} == {0, 1}


def test_values_that_differ_are_said():
    rows = [{"graph": "g", "budget": "resident", "program": "sssp", "tree": tree,
             "seconds": [0.002, 0.004], "iterations": 5, "values_sum": total,
             "values_digest": 1.0} for tree, total in (("old", 3.0), ("new", 4.0))]
    (row,) = before_after.compare(rows)
    assert not row["same_values"]
    assert row["median_ratio"] == pytest.approx(1.0) and row["fastest_ratio"] == 1.0


@pytest.mark.parametrize("option, message", [
    (["--programs", "pagerank,tc"], "--programs: no program 'tc'"),
    (["--rounds", "0"], "--rounds=0: expected >= 1"),
])
def test_bad_options_are_named(tmp_path, option, message, capsys):
    with pytest.raises(SystemExit):
        before_after.main(["--baseline", str(harness.REPOSITORY), *option])
    assert message in capsys.readouterr().err


def test_a_baseline_without_garaphpy_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        before_after.main(["--baseline", str(tmp_path)])
    assert "no garaphpy/ package there" in capsys.readouterr().err
