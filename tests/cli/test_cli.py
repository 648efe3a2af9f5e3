"""The command line: python -m garaphpy.run CONFIG.toml [--set KEY=VALUE ...]."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from garaphpy.configfile import load_config, parse_size
from garaphpy.errors import ConfigError
from garaphpy.cli import main
from helpers import REPOSITORY as REPO


def write_config(tmp_path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


def test_quickstart_example_runs(tmp_path, capsys):
    code = main([str(REPO / "examples" / "quickstart.toml"), "--quiet",
                 "--set", f"store.path={str(tmp_path / 'store')!r}",
                 "--set", f"output.values={str(tmp_path / 'ranks.txt')!r}"])
    out = capsys.readouterr().out
    assert code == 0
    assert "782 vertices" in out and "6,719 edges" in out
    assert (tmp_path / "store" / "manifest.json").is_file()


def test_module_entry_point_exit_codes(tmp_path):
    config = write_config(tmp_path, 'graph = "rmat:6"\n[store]\npath = "s"\n')
    ok = subprocess.run([sys.executable, "-m", "garaphpy.run", str(config)], cwd=REPO,
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "64 vertices" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "garaphpy.run", str(config), "--set",
                          "store.colour=1"], cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2
    assert "store.colour" in bad.stderr and bad.stderr.count("\n") == 1


def test_generator_and_overrides(tmp_path, capsys):
    config = write_config(tmp_path, 'graph = "grid:4x3"\n')
    assert main([str(config), "-q", "--set", "store.path='g'"]) == 0
    assert "12 vertices, 34 edges" in capsys.readouterr().out
    assert main([str(config), "-q", "--set", "graph=rmat:5", "--set", "input.seed=3",
                 "--set", "store.path='r'"]) == 0
    assert "32 vertices" in capsys.readouterr().out


def test_reuse_and_rebuild(tmp_path, capsys):
    config = write_config(tmp_path, 'graph = "rmat:6"\n[store]\npath = "s"\n')
    assert main([str(config)]) == 0
    capsys.readouterr()
    assert main([str(config)]) == 0
    assert "reusing up-to-date store" in capsys.readouterr().err
    assert main([str(config), "--rebuild"]) == 0
    assert "reusing" not in capsys.readouterr().err


@pytest.mark.parametrize("text,override,needle", [
    ('graph = "rmat:6"\n[colour]\nx = 1\n', None, "[colour]"),
    ('graph = "rmat:6"\n[store]\ncolour = 1\n', None, "store.colour"),
    ('graph = "rmat:6"\n[store]\nn_streams = "four"\n', None, "store.n_streams"),
    ('graph = "rmat:6"\n[store]\nn_streams = 0\n', None, "store.n_streams"),
    ('graph = "rmat:6"\n[input]\nduplicates = "avg"\n', None, "input.duplicates"),
    ('graph = "rmat:6"\n[store]\nmemory_budget = "lots"\n', None, "store.memory_budget"),
    ('graph = "rmat:6"\n', "store.n_streams=-1", "store.n_streams"),
    ('graph = "rmat:6"\n', "nonsense", "KEY=VALUE"),
    ('[input]\nformat = "el"\n', None, "missing key 'graph'"),
    ('graph = "rmat:x"\n', None, "rmat:x"),
    ('graph = "rmat:6"\nstore = 3\n', None, "'store'"),
    ('graph = [\n', None, "invalid TOML"),
])
def test_bad_configuration_is_named_and_exits_2(tmp_path, capsys, text, override, needle):
    config = write_config(tmp_path, text)
    argv = [str(config)] + (["--set", override] if override else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert not (tmp_path / "s").exists()


def test_missing_config_file(tmp_path, capsys):
    assert main([str(tmp_path / "nope.toml")]) == 2
    assert "nope.toml" in capsys.readouterr().err


def test_missing_graph_file_exits_1(tmp_path, capsys):
    config = write_config(tmp_path, 'graph = "missing.el"\n[store]\npath = "s"\n')
    assert main([str(config)]) == 1
    err = capsys.readouterr().err
    assert "missing.el" in err
    assert not (tmp_path / "s").exists()


def test_malformed_graph_file_names_the_line_and_leaves_no_store(tmp_path, capsys):
    with gzip.open(tmp_path / "bad.txt.gz", "wt") as handle:
        handle.write("# a comment\n0\t1\n1\t2\n2\tx\n")
    config = write_config(tmp_path, 'graph = "bad.txt.gz"\n[store]\npath = "s"\n')
    assert main([str(config)]) == 1
    err = capsys.readouterr().err
    assert "bad.txt.gz:4" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.txt.gz", "run.toml"]


def test_generator_options_on_a_file_are_rejected(tmp_path, capsys):
    (tmp_path / "g.el").write_text("0 1\n")
    config = write_config(tmp_path, 'graph = "g.el"\n[input]\nseed = 4\n')
    assert main([str(config)]) == 2
    assert "input.seed" in capsys.readouterr().err


def test_config_defaults_and_paths(tmp_path):
    config = write_config(tmp_path, 'graph = "x.el"\n[store]\npath = "stores/x"\n'
                                    'storage_dirs = ["a", "b"]\nmemory_budget = "2GiB"\n')
    settings = load_config(config)
    assert settings["store"]["path"] == str(tmp_path / "stores" / "x")
    assert settings["store"]["storage_dirs"] == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert settings["store"]["memory_budget"] == 2 << 30
    assert settings["input"]["duplicates"] == "drop"
    assert settings["store"]["n_streams"] >= 1


@pytest.mark.parametrize("text,value", [("512MiB", 512 << 20), ("4 GB", 4 * 10**9),
                                        (1024, 1024), ("1.5k", 1500)])
def test_sizes(text, value):
    assert parse_size(text, "x") == value


@pytest.mark.parametrize("text", ["-1", 0, True, "12 parsecs", ""])
def test_bad_sizes(text):
    with pytest.raises(ConfigError, match="x"):
        parse_size(text, "x")


# ------------------------------------------------------------ running programs --

def test_quickstart_runs_pagerank_and_verifies(tmp_path, capsys):
    values = tmp_path / "pr.txt"
    code = main([str(REPO / "examples" / "quickstart.toml"), "-q",
                 "--set", f"store.path={str(tmp_path / 'store')!r}",
                 "--set", f"output.values={str(values)!r}"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "PageRank (cpu, sync): converged" in out and "verify: PASSED" in out
    from garaphpy.output import read_values

    vertices, ranks = read_values(values)
    assert vertices.size == 782 and abs(ranks.sum() - 1.0) < 1e-9
    records = (tmp_path / "pr.iterations.jsonl").read_text().splitlines()
    assert len(records) >= 2 and '"direction": "pull"' in records[0]


def test_sssp_on_a_grid_writes_npy_in_user_ids(tmp_path, capsys):
    import numpy as np
    import scipy.sparse.csgraph as csgraph

    import garaphpy

    config = write_config(tmp_path, 'graph = "grid:30x20"\n[store]\npath = "s"\n'
                                    '[run]\nprogram = "sssp"\nsources = 7\n'
                                    '[output]\nvalues = "d.npy"\n')
    assert main([str(config), "-q", "--verify"]) == 0
    assert "verify: PASSED" in capsys.readouterr().out
    table = np.load(tmp_path / "d.npy")
    graph = garaphpy.Graph.open(tmp_path / "s")
    in_offsets, sources, weights = graph.store.csc()
    import scipy.sparse as sp

    destinations = np.repeat(np.arange(graph.num_vertices), np.diff(in_offsets))
    matrix = sp.csr_matrix((weights.astype(float), (sources, destinations)),
                           shape=(graph.num_vertices,) * 2)
    expected = csgraph.dijkstra(matrix, indices=[7])[0]
    assert table.dtype.names == ("vertex", "distance")      # named after the value
    np.testing.assert_array_equal(table["distance"], expected)
    assert list(table["vertex"][:3]) == [0, 1, 2]


def test_nonconvergence_exits_3_and_still_writes(tmp_path, capsys):
    config = write_config(tmp_path, 'graph = "rmat:8"\n[store]\npath = "s"\n'
                                    '[run]\nprogram = "pagerank"\nmax_iterations = 1\n'
                                    '[output]\nvalues = "pr.txt"\n')
    assert main([str(config), "-q"]) == 3
    assert "did not converge" in capsys.readouterr().err
    assert (tmp_path / "pr.txt").is_file()


@pytest.mark.parametrize("setting,needle", [
    ('program = "pagerunk"', "pagerunk"),
    ('program = "pagerank"\nconstants = { dampening = 0.5 }', "dampening"),
    ('program = "bfs"', "source"),
    ('program = "sssp"\nsources = 1', "needs edge weights"),
    ('program = "pagerank"\ndirection = "push"', "run.direction"),
    ('program = "pagerank"\nsources = "x"', "run.sources"),
])
def test_bad_run_settings_exit_2(tmp_path, capsys, setting, needle):
    config = write_config(tmp_path, f'graph = "rmat:6"\n[store]\npath = "s"\n[run]\n{setting}\n')
    assert main([str(config), "-q"]) == 2
    assert needle in capsys.readouterr().err


def test_hybrid_is_the_default_and_falls_back_to_the_cpu_with_one_warning(tmp_path, capsys,
                                                                         monkeypatch):
    import garaphpy.api
    import garaphpy.kernels.gpu as gpu
    from garaphpy.configfile import load_config as load

    def no_gpu():
        raise gpu.GpuUnavailableError("no CUDA device (test)")

    monkeypatch.setattr(gpu, "cupy_module", no_gpu)
    monkeypatch.setattr(garaphpy.api, "_FALLBACK_WARNED", False)
    config = write_config(tmp_path, 'graph = "rmat:8"\n[store]\npath = "s"\n'
                                    '[run]\nprogram = "bfs"\nsources = [0]\nverify = true\n')
    assert load(config)["run"]["mode"] == "hybrid"
    assert main([str(config), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.err.count("garaphpy: warning: mode='hybrid' runs on the CPU only: "
                              "no CUDA device (test)") == 1
    assert "(cpu, sync)" in captured.out and "verify: PASSED" in captured.out
