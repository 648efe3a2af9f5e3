"""bench/before_after.py: two trees' runs in turns, compared case by case."""

from __future__ import annotations

import json

import pytest

from bench import before_after, harness


def test_a_tree_against_itself_gives_every_case_with_the_same_values(tmp_path, capsys):
    """Each tree's runs in processes of their own (the thing measured), so
    in-process here; one graph (the graphs' loop is the next test's)."""
    rows = tmp_path / "rows.jsonl"
    code = before_after.main(
        ["--baseline", str(harness.REPOSITORY), "--mode", "cpu", "--graphs", "rmat:8",
         "--programs", "pagerank,sssp", "--threads", "1", "--trials", "1", "--warmup", "0",
         "--rounds", "2", "--quiet", "--json", str(rows)])
    assert code == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rmat")]
    assert len(lines) == 2 and all(line.endswith("yes") for line in lines)
    written = [json.loads(line) for line in rows.read_text().splitlines()]
    assert sorted({(row["tree"], row["graph"], row["program"]) for row in written}) == sorted(
        (tree, "rmat:8", program) for tree in ("old", "new") for program in ("pagerank", "sssp"))
    assert {row["round"] for row in written} == {0, 1}


def test_plain_pages_are_asked_of_the_new_tree_only(tmp_path, monkeypatch):
    """--new-plain-pages builds the new tree's stores plain, the old tree's as
    it builds them (a tree older than compressed pages knows no option)."""
    commands = []

    class Done:
        returncode = 0
        stdout = json.dumps({"budget": "resident", "program": "bfs", "seconds": [0.001],
                             "iterations": 3, "values_sum": 1.0, "values_digest": 2.0,
                             "page_codec": "plain"})
        stderr = ""

    def run(command, **_):
        commands.append(command)
        return Done()

    monkeypatch.setattr(before_after.subprocess, "run", run)
    code = before_after.main(["--baseline", str(harness.REPOSITORY), "--mode", "cpu",
                              "--graphs", "rmat:8", "--programs", "bfs", "--rounds", "1",
                              "--new-plain-pages", "--quiet", "--json",
                              str(tmp_path / "rows.jsonl")])
    assert code == 0
    assert [json.loads(command[-1]) for command in commands] == [{}, {"compress": False}]


def test_the_trees_take_turns_over_every_graph(monkeypatch, capsys):
    """Round by round, old then new, then new then old, each over every graph."""
    visits = []

    def run_tree(label, tree, spec, args, store_dir):
        visits.append((label, spec))
        return [{"budget": "resident", "program": "bfs", "seconds": [0.001], "iterations": 3,
                 "values_sum": 1.0, "values_digest": 2.0, "graph": spec, "tree": label}]

    monkeypatch.setattr(before_after, "run_tree", run_tree)
    code = before_after.main(["--baseline", str(harness.REPOSITORY), "--mode", "cpu",
                              "--graphs", "rmat:8,grid:12x12", "--programs", "bfs",
                              "--rounds", "3", "--quiet"])
    assert code == 0
    assert visits == [(tree, spec) for order in (("old", "new"), ("new", "old"), ("old", "new"))
                      for tree in order for spec in ("rmat:8", "grid:12x12")]
    table = [line for line in capsys.readouterr().out.splitlines()
             if line.startswith(("rmat", "grid"))]
    assert len(table) == 2 and all(line.endswith("yes") for line in table)


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


@pytest.mark.parametrize("total, same", [(1.0 + 4e-16, True), (1.0 + 1e-9, False)])
def test_float_sums_in_another_order_are_the_same_values(total, same):
    rows = [{"graph": "g", "budget": "resident", "program": "pagerank", "tree": tree,
             "seconds": [0.002], "iterations": 20, "values_sum": value,
             "values_digest": 48.0} for tree, value in (("old", 1.0), ("new", total))]
    (row,) = before_after.compare(rows)
    assert row["same_values"] is same


def test_the_interval_says_within_slower_or_unclear():
    steady = [[1.00, 1.01, 0.99]] * 4
    assert before_after.verdict(before_after.ratio_interval(steady, steady)) == "within"
    slower = [[1.10, 1.11, 1.09]] * 4
    low, high = before_after.ratio_interval(steady, slower)
    assert 1.05 < low <= high < 1.15
    assert before_after.verdict((low, high)) == "slower"
    # one process of each tree far off: the processes' spread leaves it open
    noisy_old = [[1.0, 1.0], [1.0, 1.0], [1.3, 1.3]]
    noisy_new = [[1.0, 1.0], [1.3, 1.3], [1.3, 1.3]]
    assert before_after.verdict(before_after.ratio_interval(noisy_old, noisy_new)) == "unclear"


def test_saved_rows_of_two_runs_pool_into_one_table(tmp_path, capsys):
    """Each run's rows are processes of their own: two files of one process
    per tree give the table of both, with the interval over both processes."""
    files = []
    for call, (old, new) in enumerate([(0.010, 0.0101), (0.011, 0.0110)]):
        path = tmp_path / f"call{call}.jsonl"
        path.write_text("".join(
            json.dumps({"benchmark": "before-after", "graph": "kron:8", "budget": "resident",
                        "program": "bfs", "tree": tree, "seconds": [seconds] * 3,
                        "iterations": 4, "values_sum": 7.0, "values_digest": 9.0,
                        "round": 0}) + "\n"
            for tree, seconds in (("old", old), ("new", new))) + "\n")
        files.append(str(path))
    assert before_after.main(["--from-json", *files]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines()
               if line.startswith("kron:8")]
    assert "10.50" in line and "10.55" in line and line.endswith("yes")


@pytest.mark.parametrize("content, message", [
    (None, "--from-json {path}: No such file"),
    ("{\"benchmark\": \"before-after\"\n", "--from-json {path}:1: not JSON"),
    ("{\"benchmark\": \"tiers\"}\n", "--from-json: no before-after rows in {path}"),
])
def test_saved_rows_that_cannot_be_read_are_named(tmp_path, capsys, content, message):
    path = tmp_path / "rows.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(SystemExit):
        before_after.main(["--from-json", str(path)])
    assert message.format(path=path) in capsys.readouterr().err


def test_a_run_without_a_baseline_is_refused(capsys):
    with pytest.raises(SystemExit):
        before_after.main(["--mode", "cpu"])
    assert "--baseline DIR is required" in capsys.readouterr().err
