"""The Dask bench: its workers take the environment it is given (OpenMP's
wait policy is read when a worker process loads it), CC's rows give its
union-find start, and a setting that is not NAME=VALUE is refused; --floor
fits a run's and an iteration's cost from paths of two lengths."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("distributed")

from bench import dask_workers  # noqa: E402


@pytest.mark.slow
def test_workers_take_the_environment_given(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    status = dask_workers.main(["--scale", "8", "--symmetric", "--workers", "2", "--threads", "1",
                                "--programs", "bfs,cc", "--trials", "1", "--warmup", "0",
                                "--worker-env", "OMP_WAIT_POLICY=PASSIVE",
                                "--json", str(rows)])
    assert status == 0
    spread = [json.loads(line) for line in rows.read_text().splitlines()
              if json.loads(line)["case"].startswith("dask-")]
    assert spread and spread[0]["verification"]["status"] == "passed"
    assert spread[0]["params"]["worker_env"] == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert spread[0]["figures"]["wait_policies"] == ["PASSIVE"]
    cc = [row for row in spread if row["params"]["program"] == "cc"]
    assert cc and cc[0]["verification"]["status"] == "passed"
    assert cc[0]["figures"]["start_ms"] > 0 and "CC start ms" in capsys.readouterr().out


def test_a_setting_without_equals_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_:
        dask_workers.main(["--worker-env", "OMP_WAIT_POLICY"])
    assert exit_.value.code == 2
    assert "--worker-env OMP_WAIT_POLICY: expected NAME=VALUE" in capsys.readouterr().err


def test_the_floor_is_fitted_from_each_trials_pair_of_paths():
    from bench import _dask_floor as dask_floor

    rows = {8: {"trials_s": [0.040, 0.050]}, 64: {"trials_s": [0.152, 0.218]}}
    floor = dask_floor.floor_of(rows, [8, 64])
    assert floor["per_iteration_ms"]["min"] == pytest.approx(2.0)
    assert floor["per_iteration_ms"]["max"] == pytest.approx(3.0)
    assert floor["per_run_ms"]["min"] == pytest.approx(24.0)
    assert floor["per_run_ms"]["max"] == pytest.approx(26.0)


@pytest.mark.slow
def test_the_floor_runs_paths_in_one_process_and_over_workers(tmp_path, capsys):
    rows = tmp_path / "rows.jsonl"
    status = dask_workers.main(["--floor", "3,6", "--workers", "2", "--threads", "1",
                                "--trials", "1", "--warmup", "0", "--json", str(rows)])
    assert status == 0
    found = {json.loads(line).get("case"): json.loads(line)
             for line in rows.read_text().splitlines()}
    spread = found["dask-2x1/path-6"]
    assert spread["verification"]["status"] == "passed"
    assert spread["metrics"][0]["iterations"] == 6
    assert {"send_ms", "wait_ms", "lag_ms"} <= set(spread["metrics"][0])
    assert "per iteration ms" in capsys.readouterr().out
