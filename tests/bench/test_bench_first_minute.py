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
