"""bench/tiers.py: pages from disk beside the GPU and host budgets, on tiny stores."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

import garaphpy
from garaphpy import config
from garaphpy.storage.host_budget import plan_run_pages
from bench import harness, tiers

PAGE_BYTES = 8192


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """rmat:10 cut into a dozen pages, so that a quarter of them is a budget."""
    path = tmp_path_factory.mktemp("tiers") / "rmat10"
    garaphpy.Graph.load("rmat:10", store=path, progress=False, max_page_bytes=PAGE_BYTES,
                        compress=False, generator_options={"weighted": False})
    return path


def run_bench(store_dir, rows, *extra):
    return tiers.main(["--store", str(store_dir), "--graph", "rmat:10", "--readahead-bytes",
                       "16K", "--iterations", "4", "--threads", "1", "--cache-drop", "fadvise",
                       "--quiet", "--json", str(rows), *extra])


def test_cpu_pagerank_reads_exactly_the_pages_in_no_budget(store_dir, tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    assert run_bench(store_dir, rows, "--modes", "cpu") == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| program"))
    assert [cell.strip() for cell in header.strip("|").split("|")] == list(tiers.COLUMNS)
    table = [line for line in out.splitlines() if line.startswith(("| pagerank", "| bfs"))]
    assert [line.split("|")[1:3] for line in table] == [[" pagerank ", " cpu "],
                                                        [" bfs ", " cpu "]]
    assert "MB/s sequential over the store's files" in out
    assert "MB for every mode (read-ahead 0.0 MB a reader): cpu caches " in out
    assert "no disk test" not in out
    written = {row["case"]: row for row in harness.read_rows(rows)}
    assert {"sequential-before", "sequential-after", "pagerank/cpu/memory", "pagerank/cpu/disk",
            "bfs/cpu/memory", "bfs/cpu/disk", "summary"} <= set(written)
    disk = written["pagerank/cpu/disk"]["metrics"][0]
    store = garaphpy.Graph.open(store_dir).store
    cached = disk["host_cached_pages"]
    # the host caches a prefix of the pages; every other page is read every iteration
    expected = sum(info.nbytes for info in store.pages[cached:])
    assert 0 < cached < len(store.pages) and disk["must_move"] == expected
    assert disk["bytes_read"] == disk["must_move"] and disk["cache_drop"] == "fadvise"
    assert written["pagerank/cpu/memory"]["metrics"][0]["bytes_read_after_first"] == 0
    assert all(written[name]["verification"]["status"] == harness.PASSED
               for name in written if "/cpu/" in name)
    (pagerank,) = [e for e in written["summary"]["record"]["table"] if e["program"] == "pagerank"]
    assert pagerank["read_over_must_move"] == 1.0 and pagerank["time_over_model"] > 0
    assert pagerank["host_memory"] == tiers.host_budget(store, 1, 0.25, 16 << 10)
    assert 0 < pagerank["iteration_s"] <= pagerank["whole_s"]
    assert written["summary"]["record"]["hybrid_over_better"] == {}


def test_the_hybrid_is_judged_on_its_whole_call_from_disk():
    table = [{"program": "pagerank", "mode": "gpu", "whole_s": 0.25},
             {"program": "pagerank", "mode": "cpu", "whole_s": 0.20},
             {"program": "pagerank", "mode": "hybrid", "whole_s": 0.21},
             {"program": "bfs", "mode": "cpu", "whole_s": 0.1},
             {"program": "bfs", "mode": "hybrid", "whole_s": 0.1}]
    assert tiers.hybrid_over_better(table) == {"pagerank": pytest.approx(1.05)}


@pytest.mark.gpu
def test_gpu_and_hybrid_cases_give_the_cpus_values(store_dir, tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    assert run_bench(store_dir, rows, "--modes", "cpu,gpu,hybrid") == 0
    written = {row["case"]: row for row in harness.read_rows(rows)}
    # rmat:10 is directed: CC, which runs on an undirected copy, is not a default
    defaults = [p for p in tiers.PROGRAMS if p not in tiers.UNDIRECTED]
    assert {f"{p}/{m}/disk" for p in defaults for m in ("cpu", "gpu", "hybrid")} \
        <= set(written)
    assert not any(case.startswith(tuple(f"{p}/" for p in tiers.UNDIRECTED)) for case in written)
    gpu = written["pagerank/gpu/disk"]["metrics"][0]
    assert gpu["bytes_read"] == gpu["must_move"]
    assert "the GPU reads" in capsys.readouterr().out


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize("readers", [1, 2])
def test_host_budget_caches_the_fraction_of_the_pages(tmp_path, compress, readers):
    store = garaphpy.Graph.load("rmat:10", store=tmp_path / "s", progress=False,
                                compress=compress, max_page_bytes=PAGE_BYTES,
                                generator_options={"weighted": False}).store
    total = sum(info.nbytes for info in store.pages)
    largest = max(info.nbytes for info in store.pages)
    per_reader = PAGE_BYTES
    budget = tiers.host_budget(store, readers, 0.25, per_reader)
    plan, readahead = plan_run_pages(store, readers, budget, per_reader)
    assert plan.readahead_bytes == tiers.readahead_total(store, readers, per_reader)
    assert 0.25 * total - largest < plan.cached_bytes <= 0.25 * total
    assert not plan.all_cached and readahead >= per_reader
    everything, _ = plan_run_pages(store, readers, tiers.in_memory_budget(store), per_reader)
    assert everything.all_cached


def test_every_mode_runs_on_one_host_budget(tmp_path):
    """The budget of the mode of most readers (hybrid: two) for every mode: a
    mode of one reader caches what hybrid spends on its second read-ahead."""
    store = garaphpy.Graph.load("rmat:10", store=tmp_path / "s", progress=False,
                                compress=True, max_page_bytes=PAGE_BYTES,
                                generator_options={"weighted": False}).store
    per_reader = PAGE_BYTES
    budget = tiers.common_host_budget(store, ["cpu", "gpu", "hybrid"], 0.25, per_reader)
    assert budget == tiers.host_budget(store, 2, 0.25, per_reader) \
        > tiers.host_budget(store, 1, 0.25, per_reader)
    assert tiers.common_host_budget(store, ["gpu", "cpu"], 0.25, per_reader) == \
        tiers.host_budget(store, 1, 0.25, per_reader)
    one, _ = plan_run_pages(store, 1, budget, per_reader)
    two, _ = plan_run_pages(store, 2, budget, per_reader)
    assert one.cached_bytes > two.cached_bytes and not one.all_cached


def test_gpu_budget_is_the_vertex_data_the_buffers_and_the_fraction():
    wire = [3000, 5000, 2000]
    assert tiers.gpu_budget_bytes(10_000, wire, 700, 0.25) == \
        10_000 + config.N_STREAMS * 5000 + 700 + 2500


def test_kron_is_rmat_made_symmetric():
    graph = tiers.load_graph("kron:8")
    directed = garaphpy.Graph.load("rmat:8", progress=False,
                                   generator_options={"weighted": False})
    assert not graph.directed and graph.num_vertices == directed.num_vertices
    offsets, sources, _ = directed.store.csc()
    targets = np.repeat(np.arange(directed.num_vertices), np.diff(offsets))
    ids = directed.original_ids(np.arange(directed.num_vertices))
    pairs = {(int(ids[s]), int(ids[t])) for s, t in zip(sources, targets)}
    symmetric = pairs | {(t, s) for s, t in pairs}
    offsets, sources, _ = graph.store.csc()
    targets = np.repeat(np.arange(graph.num_vertices), np.diff(offsets))
    ids = graph.original_ids(np.arange(graph.num_vertices))
    assert {(int(ids[s]), int(ids[t])) for s, t in zip(sources, targets)} == symmetric


def test_the_page_cache_is_dropped_over_the_block_files(store_dir):
    assert tiers.drop_page_cache(garaphpy.Graph.open(store_dir).store, "fadvise") == "fadvise"


def test_cc_on_a_directed_graph_is_refused_by_name(store_dir, tmp_path, capsys):
    with pytest.raises(SystemExit):
        run_bench(store_dir, tmp_path / "rows.jsonl", "--modes", "cpu", "--programs", "cc")
    assert "--programs cc: rmat:10 is directed" in capsys.readouterr().err


def test_cc_reads_each_page_it_asks_for_once(tmp_path):
    """CC converges in few iterations (one, after its union-find start): a
    first iteration also fills the host's cache, and must move the pages it
    asked for outside the GPU's, each once."""
    rows = tmp_path / "rows.jsonl"
    assert tiers.main(["--graph", "kron:12", "--page-bytes", "32K", "--readahead-bytes", "64K",
                       "--programs", "cc", "--modes", "cpu", "--threads", "1",
                       "--cache-drop", "fadvise", "--quiet", "--json", str(rows)]) == 0
    disk = {row["case"]: row for row in harness.read_rows(rows)}["cc/cpu/disk"]["metrics"][0]
    assert disk["host_cached_pages"] > 0 and disk["disk_pages"] > 0
    if disk["iterations"] == 1:     # its pages in the host's tier move too
        assert disk["must_move"] > disk["must_move_first_placed"]
    assert 0 < disk["bytes_read"] == disk["must_move"]


def test_decode_names_who_decodes_each_consumers_pages():
    assert tiers.parse_decode("gpu=consumer") == {**config.PAGE_DECODE, "gpu": "consumer"}
    for bad in ("gpu=nobody", "disk=threads", "gpu"):
        with pytest.raises(argparse.ArgumentTypeError, match="CONSUMER=WHO"):
            tiers.parse_decode(bad)


def test_a_budget_that_holds_every_page_is_named(store_dir):
    store = garaphpy.Graph.open(store_dir).store
    args = argparse.Namespace(readahead_bytes=16 << 10, host_fraction=1.0)
    line = tiers.describe_host_budget(store, ["cpu", "hybrid"], args)
    assert f"cpu caches {len(store.pages)} of {len(store.pages)} pages (no disk test" in line
    args.host_fraction = 0.25
    assert "no disk test" not in tiers.describe_host_budget(store, ["cpu", "hybrid"], args)


def test_the_process_is_warmed_up_in_memory_and_from_storage(monkeypatch):
    runs = []
    real = tiers.run_program

    def recorded(graph, program, mode, source, args, **budgets):
        result, whole = real(graph, program, mode, source, args, **budgets)
        runs.append((program, mode, "host_memory" in budgets,
                     sum(record.bytes_read for record in result.iterations)))
        return result, whole

    monkeypatch.setattr(tiers, "run_program", recorded)
    tiers.warm_up_process(["pagerank", "bfs"], ["cpu"], False, 1)
    assert [run[:3] for run in runs] == [("pagerank", "cpu", False), ("pagerank", "cpu", True),
                                        ("bfs", "cpu", False), ("bfs", "cpu", True)]
    assert runs[0][3] == 0 < runs[1][3]     # the second reads its pages from storage
