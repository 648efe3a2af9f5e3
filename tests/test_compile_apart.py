"""numba's compilation is timed apart from a run's set-up and iterations.

A program whose kernels are not yet compiled in the process (a new program
class, its module cached in a fresh directory) runs BFS over a graph whose
first iteration is sparse (a notify-pull) and whose second is dense (a
pull): the pull's kernels compile during the run.  Its iterations must take
the same order of time as the warm run's, its compilation reported in
``Result.compile_seconds`` and the iteration's ``compile_seconds``; depths
are checked against SciPy's BFS.
"""

from __future__ import annotations

import logging
import sys

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

import garaphpy
from garaphpy import api
from garaphpy.compile_clock import CompileClock
from garaphpy.programs import BFS


def _fan_graph(tmp_path, leaves: int = 3000):
    """0 -> 1 -> every leaf, each leaf -> the next: sparse first, then dense."""
    leaf = np.arange(2, leaves + 2)
    sources = np.concatenate([[0], np.ones(leaves, np.int64), leaf[:-1]])
    targets = np.concatenate([[1], leaf, leaf[1:]])
    return sources, targets, garaphpy.Graph.from_arrays(sources, targets, store=tmp_path / "g")


def _reference_depths(sources, targets) -> np.ndarray:
    n = int(max(sources.max(), targets.max())) + 1
    matrix = csr_matrix((np.ones(sources.size), (sources, targets)), shape=(n, n))
    depth = shortest_path(matrix, unweighted=True, indices=0)
    return np.where(np.isinf(depth), -1, depth).astype(np.int64)


def test_compile_clock_counts_a_compilation_and_nothing_after():
    import numba

    @numba.njit
    def add_one(x):
        return x + 1

    with CompileClock() as clock:
        add_one(1)
        compiled = clock.seconds
        for _ in range(1000):
            add_one(2)
    assert compiled > 0 and clock.compiled >= 1
    assert clock.seconds == compiled
    assert clock.describe("it").startswith("compiling it: ")


@pytest.mark.slow      # compiles a fresh BFS module: 30 s on 2 idle cores
def test_first_run_iterations_exclude_compilation(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(api, "_program_cache_directory", lambda: tmp_path / "programs")
    fresh = type("FreshBFS", (BFS,), {"__module__": __name__})
    sources, targets, graph = _fan_graph(tmp_path)
    with caplog.at_level(logging.INFO, logger="garaphpy"):
        cold = garaphpy.run(graph, fresh, sources=[0], mode="cpu", threads=1)
    warm = garaphpy.run(graph, fresh, sources=[0], mode="cpu", threads=1)
    expected = _reference_depths(sources, targets)
    np.testing.assert_array_equal(cold.values, expected)
    np.testing.assert_array_equal(warm.values, expected)
    assert [r.direction for r in cold.iterations] == [r.direction for r in warm.iterations]
    assert {"pull", "notify-pull"} <= {r.direction for r in cold.iterations}
    assert cold.compile_seconds > 0.05
    # the pull's kernels compiled inside an iteration, and were left out of its time
    assert sum(r.compile_seconds for r in cold.iterations) > 0.05
    assert max(r.seconds for r in cold.iterations) \
        < 10 * max(r.seconds for r in warm.iterations) + 0.02
    assert warm.compile_seconds < cold.compile_seconds / 5
    assert "compiling" in cold.summary()
    messages = [r.getMessage() for r in caplog.records if r.name == "garaphpy.compile"]
    assert messages and messages[0].startswith("compiling FreshBFS for the CPU: ")


@pytest.mark.slow      # compiles a fresh BFS module: 30 s on 2 idle cores
def test_cli_names_the_compile_step(tmp_path, monkeypatch, capsys):
    from garaphpy.cli import main

    monkeypatch.setattr(api, "_program_cache_directory", lambda: tmp_path / "programs")
    monkeypatch.setattr(api, "_COMPILED", {})
    # a program module an earlier test of this process imported is reused, not compiled
    for name in [name for name in sys.modules if name.startswith("_garaphpy_program_BFS_")]:
        monkeypatch.delitem(sys.modules, name)
    config = tmp_path / "run.toml"
    config.write_text('graph = "grid:30x20"\n[store]\npath = "s"\n'
                      '[run]\nprogram = "bfs"\nsources = 0\nthreads = 1\n'
                      '[output]\nvalues = "d.txt"\n')
    assert main([str(config)]) == 0
    captured = capsys.readouterr()
    assert "compiling BFS for the CPU: " in captured.err
    summary = next(line for line in captured.out.splitlines() if line.startswith("BFS ("))
    assert "compiling" in summary
