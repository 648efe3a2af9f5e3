"""Progress as tqdm bars where tqdm is installed and standard error is a
terminal, as plain lines otherwise (tqdm's import taken away, or output to a
pipe), and numba's compilation left out of the rate."""

from __future__ import annotations

import builtins
import io
import os
import logging
import sys
import threading

import numba
import pytest

from garaphpy import config, progress
from garaphpy.progress import Progress, bars_available, iteration_bar, log_to_stderr


class Terminal(io.StringIO):
    """A standard error that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _terminal(monkeypatch) -> Terminal:
    """Standard error as a terminal (set in the test: pytest's capture sets
    its own between fixtures and the test)."""
    stream = Terminal()
    monkeypatch.setattr(sys, "stderr", stream)
    return stream


@pytest.fixture
def no_tqdm(monkeypatch):
    real_import = builtins.__import__

    def without_tqdm(name, *args, **kwargs):
        if name == "tqdm" or name.startswith("tqdm."):
            raise ImportError("No module named 'tqdm'")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "tqdm", raising=False)
    monkeypatch.setattr(builtins, "__import__", without_tqdm)


def _count_to(task: Progress, total: int) -> None:
    for done in range(0, total + 1, total // 4):
        task.update(done, "reading")


def test_a_bar_with_rate_and_eta_on_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    terminal = _terminal(monkeypatch)
    monkeypatch.setattr(config, "PROGRESS_INTERVAL_S", 0.0)
    with log_to_stderr():
        assert bars_available()
        with Progress("preprocess", total=1000, unit="edges") as task:
            _count_to(task, 1000)
            task.note("sorting")
    text = terminal.getvalue()
    assert "preprocess" in text and "100%" in text and "edges/s" in text
    assert "<00:00" in text                     # tqdm's ETA
    assert "preprocess: sorting" in text        # a note written above the bar
    assert "1.0K edges (100%)" not in text      # no plain line beside the bar


def test_plain_lines_without_tqdm(monkeypatch, no_tqdm):
    terminal = _terminal(monkeypatch)
    monkeypatch.setattr(config, "PROGRESS_INTERVAL_S", 0.0)
    with log_to_stderr():
        assert not bars_available()
        assert iteration_bar(20) is None
        with Progress("preprocess", total=1000, unit="edges") as task:
            _count_to(task, 1000)
    lines = terminal.getvalue().splitlines()
    assert lines[-1].startswith("preprocess: reading 1.0K edges (100%), ")
    assert all("edges/s" in line for line in lines)


def test_plain_lines_when_stderr_is_not_a_terminal(monkeypatch):
    pytest.importorskip("tqdm")
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    monkeypatch.setattr(config, "PROGRESS_INTERVAL_S", 0.0)
    with log_to_stderr():
        assert not bars_available()
        with Progress("preprocess", total=1000) as task:
            _count_to(task, 1000)
    assert stream.getvalue().splitlines()[-1].startswith("preprocess: reading 1.0K edges")


def test_no_bar_for_a_library_user_without_the_command_line(monkeypatch):
    pytest.importorskip("tqdm")
    _terminal(monkeypatch)
    assert not bars_available()
    assert iteration_bar(20) is None


def test_compilation_is_left_out_of_the_rate(monkeypatch, caplog):
    monkeypatch.setattr(config, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(config, "COMPILE_SHOWN_AFTER_SECONDS", 0.0)

    @numba.njit
    def twice(x):
        return 2 * x

    with caplog.at_level(logging.INFO, logger="garaphpy"):
        with Progress("preprocess", total=10) as task:
            twice(1)                         # compiles inside the task
            compiling = task.compile_seconds
            task.update(10)
    assert compiling > 0
    line = caplog.records[-1].getMessage()
    assert "compiling" in line and "of it)" in line
    elapsed = float(line.split(", ")[-1].split(" s")[0])
    rate = 10 / max(elapsed - compiling, 1e-9)
    # the rate printed is the rate over the time not spent compiling
    assert progress.human_count(rate) in line or elapsed <= compiling + 0.05


def test_delayed_calls_run_after_their_delay_from_one_thread_unless_withdrawn():
    delayed = progress.DelayedCalls()
    made = []
    done = threading.Event()
    withdrawn = [delayed.schedule(0.05, lambda k=k: made.append(k)) for k in range(50)]
    started = {thread.ident for thread in threading.enumerate()}
    for key in withdrawn:
        delayed.withdraw(key)
    kept = delayed.schedule(0.1, lambda: (made.append("kept"), done.set()))
    early = delayed.schedule(0.0, lambda: made.append("early"))
    assert early != kept
    assert done.wait(5.0)
    assert made == ["early", "kept"]        # by deadline; none of the withdrawn
    # every schedule after the first reuses the one thread
    assert {thread.ident for thread in threading.enumerate()} - started == set()
    assert sum(thread.name == "garaphpy-delayed" for thread in threading.enumerate()) >= 1


def test_a_failing_delayed_call_leaves_the_thread_serving(caplog):
    delayed = progress.DelayedCalls()
    done = threading.Event()
    with caplog.at_level(logging.ERROR, logger="garaphpy"):
        delayed.schedule(0.0, lambda: 1 / 0)
        delayed.schedule(0.02, done.set)
        assert done.wait(5.0)
    assert any("delayed call failed" in record.getMessage() for record in caplog.records)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_delayed_calls_run_in_a_forked_child():
    delayed = progress.DelayedCalls()
    parent_done = threading.Event()
    delayed.schedule(0.0, parent_done.set)      # the parent's thread exists
    assert parent_done.wait(5.0)
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:      # pragma: no cover - the child reports through the pipe
        done = threading.Event()
        delayed.schedule(0.0, done.set)
        os.write(write_end, b"1" if done.wait(5.0) else b"0")
        os._exit(0)
    os.close(write_end)
    answer = os.read(read_end, 1)
    os.waitpid(child, 0)
    assert answer == b"1"
