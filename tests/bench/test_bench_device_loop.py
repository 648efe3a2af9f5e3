"""bench/device_loop.py's Subway side on a graph file named by a relative path:
the binary graph written beside the stores under the file's own name, and
Subway's values checked against a reference from SciPy."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, shortest_path

from bench import device_loop
from bench.sparse_batch import load, source_of

pytestmark = pytest.mark.skipif(os.name != "posix", reason="the fake peer is a shell script")


def fake_async_subway(directory: Path, answers: dict) -> Path:
    """Executables answering like Subway's PROGRAM-async: each writes its table
    of ``vertex value`` lines to --output and prints its processing time."""
    directory.mkdir()
    for program, values in answers.items():
        table = directory / f"{program}.txt"
        np.savetxt(table, np.stack([np.arange(values.size), values], axis=1), fmt="%d")
        script = directory / f"{program}-async"
        script.write_text(
            "#!/bin/sh\n"
            'while [ "$#" -gt 0 ]; do [ "$1" = "--output" ] && out="$2"; shift; done\n'
            f'cp "{table}" "$out"\n'
            "echo 'Processing finished in 7.5 (ms).'\n")
        script.chmod(0o755)
    return directory


def test_subway_runs_on_a_file_given_by_a_relative_path(tmp_path, monkeypatch):
    # a road-like chain 1-2-3-4 and a pair 5-6, ids from 1, both directions
    roads = np.array([[1, 2], [2, 3], [3, 4], [5, 6]])
    both = np.concatenate([roads, roads[:, ::-1]])
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "road.txt").write_text(
        "# roads\n" + "".join(f"{u}\t{v}\n" for u, v in both))
    monkeypatch.chdir(tmp_path)
    spec, store_dir = "data/road.txt", tmp_path / "stores"
    store_dir.mkdir()
    graph = load(spec, store_dir)
    source = source_of(spec, graph)
    internal = graph.internal_ids(both.ravel()).reshape(-1, 2)
    n = graph.num_vertices
    weights = graph.store.csc()[2]
    in_offsets, sources, _ = graph.store.csc()
    targets = np.repeat(np.arange(n), np.diff(in_offsets))
    matrix = sp.csr_matrix((np.asarray(weights, np.float64), (sources, targets)), shape=(n, n))
    start = int(graph.internal_ids([source])[0])
    hops = shortest_path(matrix, unweighted=True, indices=start)
    distances = shortest_path(matrix, indices=start)
    unreached = 2 ** 32 - 1
    answers = {
        "bfs": np.where(np.isfinite(hops), hops, unreached).astype(np.int64),
        "sssp": np.where(np.isfinite(distances), distances, unreached).astype(np.int64),
        "cc": np.where(np.isin(np.arange(n), breadth_first_order(
            sp.csr_matrix((np.ones(len(internal)), tuple(internal.T)), shape=(n, n)),
            int(internal[0, 0]), return_predecessors=False)), 0, 1)}
    subway = fake_async_subway(tmp_path / "subway", answers)
    references = {(spec, "bfs"): {"result": SimpleNamespace(values=hops)},
                  (spec, "sssp"): {"result": SimpleNamespace(values=distances)},
                  (spec, "cc"): {"result": SimpleNamespace(values=answers["cc"] + 10)}}
    by_case = {f"{spec}/{program}/on": {"median_s": 0.005} for program in ("bfs", "sssp", "cc")}
    args = SimpleNamespace(programs="bfs,sssp,cc", subway_trials=2)
    peers = device_loop.run_subway_peers(subway, args, {spec: graph}, store_dir, by_case,
                                         references)
    assert {key: peer["check"] for key, peer in peers.items()} == {
        f"{spec}/{program}": "ok" for program in ("bfs", "sssp", "cc")}
    assert peers[f"{spec}/bfs"]["trials_ms"] == [7.5, 7.5]
    assert (store_dir / "road.txt.bcsr").is_file() and (store_dir / "road.txt.bwcsr").is_file()
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["road.txt"]


@pytest.mark.parametrize("program, execution, expected", [
    ("bfs", "async", ("off", "on", "graphs", "two-pass")),
    ("sssp", "async", ("off", "on", "graphs", "two-pass", "flat")),
    ("bfs", "sync", ("off", "on", "graphs")),
    ("pagerank", "async", ("off", "on")),
])
def test_asynchronous_pushes_are_timed_fused_and_in_two_passes(program, execution, expected):
    """``two-pass``: the persistent kernel without its fused push, beside ``on``."""
    assert device_loop.settings(program, execution) == expected


@pytest.mark.parametrize("factor", ["0", "-4", "nan", "inf"])
def test_a_bucket_factor_that_is_not_a_positive_number_is_named(factor, capsys):
    with pytest.raises(SystemExit):
        device_loop.main(["--bucket-factor", factor])
    assert f"--bucket-factor={float(factor)}: expected a positive number" in \
        capsys.readouterr().err


def test_the_bucket_factor_reaches_the_gpus_rule(monkeypatch):
    from garaphpy import config
    from garaphpy.scheduler import decisions

    monkeypatch.setattr(config, "GPU_BUCKET_FACTOR", config.GPU_BUCKET_FACTOR)
    # the bench stops at its first graph (none can load here) after setting the factor
    monkeypatch.setattr(device_loop, "load", lambda spec, store_dir: (_ for _ in ()).throw(
        RuntimeError("stop")))
    with pytest.raises(RuntimeError, match="stop"):
        device_loop.main(["--bucket-factor", "16", "--graphs", "grid:4x4"])
    assert decisions.gpu_bucket_width(None, 128.0, 4.0) == 16.0 * 128.0 / 4.0
