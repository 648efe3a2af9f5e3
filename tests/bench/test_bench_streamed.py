"""bench/streamed.py's side of the Subway comparison, without a GPU: the graph
written in Subway's binary format (read back as Subway's shared/graph.cu
reads it), the run of a peer binary and the check of its values."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import garaphpy
from bench import streamed


@pytest.fixture(scope="module")
def graph():
    return garaphpy.Graph.load("rmat:9", progress=False, max_page_bytes=16384,
                               generator_options={"weighted": True, "seed": 3})


def read_subway(path: Path, weighted: bool):
    """Subway's reader: uint32 counts, uint32 offsets, then the edges."""
    raw = np.fromfile(path, np.uint32)
    n, m = int(raw[0]), int(raw[1])
    offsets = np.append(raw[2:2 + n], m)
    edges = raw[2 + n:]
    assert edges.size == m * (2 if weighted else 1)
    return n, offsets, edges.reshape(m, 2) if weighted else edges


def edges_by_source(graph):
    """(source, target, weight) of every edge, from the pages (CSC)."""
    store = graph.store
    rows = []
    for info in store.pages:
        page = store.read_page(info.index)
        for shard in store.page_shards(info.index):
            for e in range(int(shard["edge_begin"]) - info.edge_begin,
                           int(shard["edge_end"]) - info.edge_begin):
                target = int(shard["first_vertex"]) + int(page.idxoff[e])
                rows.append((int(page.sources[e]), target, int(page.weights[e])))
    return sorted(rows)


@pytest.mark.parametrize("weighted", [False, True])
def test_subway_graph_holds_every_edge(graph, tmp_path, weighted):
    path = tmp_path / ("g.bwcsr" if weighted else "g.bcsr")
    streamed.write_subway_graph(graph.store, path, weighted, chunk_edges=1000)
    assert not path.with_name(path.name + ".partial").exists()
    n, offsets, edges = read_subway(path, weighted)
    assert n == graph.store.num_vertices
    got = []
    for u in range(n):
        for k in range(offsets[u], offsets[u + 1]):
            if weighted:
                got.append((u, int(edges[k, 0]), int(edges[k, 1])))
            else:
                got.append((u, int(edges[k])))
    expected = edges_by_source(graph)
    if not weighted:
        expected = [(u, v) for u, v, _ in expected]
    assert sorted(got) == expected


#: A shell script stands for the peer.
posix_only = pytest.mark.skipif(os.name != "posix", reason="the fake peer is a shell script")


def fake_subway(directory: Path, values: np.ndarray, printed: str = "") -> Path:
    """An executable that answers like Subway's PROGRAM-sync: it writes
    ``vertex value`` lines to --output and prints its processing time."""
    directory.mkdir(exist_ok=True)
    table = directory / "values.txt"
    np.savetxt(table, np.stack([np.arange(values.size), values], axis=1), fmt="%d")
    for program in ("bfs", "sssp", "cc"):
        script = directory / f"{program}-sync"
        script.write_text(
            "#!/bin/sh\n"
            'while [ "$#" -gt 0 ]; do [ "$1" = "--output" ] && out="$2"; shift; done\n'
            f'cp "{table}" "$out"\n'
            f"echo 'Graph Reading finished in 0.1 (s).'\n"
            f"echo '{printed or 'Processing finished in 12.5 (ms).'}'\n")
        script.chmod(0o755)
    return directory


@posix_only
def test_a_peer_run_is_timed_and_checked(tmp_path):
    infinity = 2 ** 32 - 1
    subway = fake_subway(tmp_path / "subway", np.array([0, 1, 2, infinity]))
    output = tmp_path / "out.txt"
    assert streamed.run_subway(subway, "bfs", tmp_path / "g.bcsr", 0, output) == 12.5
    ours = np.array([0, 1, 2, np.inf])
    assert streamed.subway_matches("bfs", output, ours) is None
    assert streamed.subway_matches("bfs", output, np.array([0, 1, 3, np.inf])) == "values differ"
    assert "reached by one side" in streamed.subway_matches("sssp", output,
                                                            np.array([0, 1, 2, 5.0]))


@posix_only
def test_components_are_compared_as_partitions(tmp_path):
    subway = fake_subway(tmp_path / "subway", np.array([0, 0, 2, 2, 4]))
    output = tmp_path / "out.txt"
    streamed.run_subway(subway, "cc", tmp_path / "g.bcsr", None, output)
    assert streamed.subway_matches("cc", output, np.array([7, 7, 9, 9, 1])) is None
    assert streamed.subway_matches("cc", output, np.array([7, 7, 7, 9, 1])) == \
        "components differ"


@posix_only
def test_a_peer_time_in_seconds_is_read_in_milliseconds(tmp_path):
    """The Subway of the device machine prints 'Processing finished in 0.34639 (s).'"""
    subway = fake_subway(tmp_path / "subway", np.array([0]),
                         printed="Processing finished in 0.34639 (s).")
    milliseconds = streamed.run_subway(subway, "bfs", tmp_path / "g.bcsr", 0,
                                       tmp_path / "out.txt")
    assert milliseconds == pytest.approx(346.39)


@posix_only
def test_a_peer_that_prints_no_time_is_an_error(tmp_path):
    subway = fake_subway(tmp_path / "subway", np.array([0]), printed="crashed")
    with pytest.raises(SystemExit, match="no processing time"):
        streamed.run_subway(subway, "bfs", tmp_path / "g.bcsr", 0, tmp_path / "out.txt")


def test_weights_that_are_not_integers_are_refused(tmp_path):
    g = garaphpy.Graph.from_arrays(np.array([0, 1]), np.array([1, 2]), weights=np.array([0.5, 1.0]))
    with pytest.raises(SystemExit, match="unsigned integers"):
        streamed.write_subway_graph(g.store, tmp_path / "g.bwcsr", True)
    assert not (tmp_path / "g.bwcsr").exists()


def test_the_variants_vary_only_what_was_asked():
    asked = {"defer_selective": [False], "selective_when_pays": [True, False],
             "calibrate": [True, False]}
    auto = streamed.variant_settings(asked, "auto")
    assert [(s["selective_when_pays"], s["calibrate_transfer_rates"]) for s in auto] \
        == [(True, True), (True, False), (False, True), (False, False)]
    assert not any(s["defer_selective_arrays"] for s in auto)
    # a forced choice runs the automatic runs' options at the engine's defaults
    copy = streamed.variant_settings(asked, "copy")
    assert copy == [{"defer_selective_arrays": True, "selective_when_pays": True,
                     "calibrate_transfer_rates": True}]


def test_a_case_is_named_by_the_values_that_differ_from_configs(monkeypatch):
    defaults = dict(streamed.DEFAULTS)
    assert streamed.variant_suffix(defaults) == ""
    flipped = {key: not value for key, value in defaults.items()}
    names = {key: (on if not defaults[key] else off)
             for key, on, off, _ in streamed.VARIANTS.values()}
    assert streamed.variant_suffix(flipped) == "".join(names.values())
    # a default flipped in config flips the name: the run with the option on is
    # "/calibrated"
    monkeypatch.setitem(streamed.DEFAULTS, "calibrate_transfer_rates", False)
    assert streamed.variant_suffix({**defaults, "calibrate_transfer_rates": True}
                                   ).endswith("/calibrated")
    monkeypatch.setitem(streamed.DEFAULTS, "calibrate_transfer_rates", True)
    assert streamed.variant_suffix({**defaults, "calibrate_transfer_rates": False}
                                   ).endswith("/uncalibrated")
