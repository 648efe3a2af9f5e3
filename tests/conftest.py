"""Shared test setup: the `gpu` marker skips cleanly where no GPU is usable, and
every store a test builds goes to a temporary cache, never the user's."""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from pathlib import Path

import pytest

#: ../shared/data beside the repository: the real SNAP graphs (or the folder
#: named by GARAPHPY_TEST_DATA, where the tests run on another machine).
SHARED_DATA = Path(os.environ.get("GARAPHPY_TEST_DATA")
                   or Path(__file__).resolve().parents[1].parent / "shared" / "data")


@functools.cache
def gpu_available() -> str | None:
    """None when a CUDA device is usable through cupy, else the reason why not."""
    try:
        import cupy
    except Exception as error:  # ImportError, or a broken CUDA install
        return f"cupy is not importable ({error.__class__.__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as error:
        return f"no usable CUDA device ({error.__class__.__name__})"
    return None


def pytest_collection_modifyitems(config, items):
    reason = gpu_available()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


#: Variables that locate garaphpy's default cache (garaphpy.paths.cache_directory).
_CACHE_VARIABLES = ("GARAPHPY_CACHE", "XDG_CACHE_HOME")
#: The user's values of those variables, put back when the session ends.
_USER_CACHE_ENVIRONMENT: dict = {}
#: The session's temporary cache root (set in pytest_configure).
TEST_CACHE_ROOT: Path | None = None
#: Where the user's own cache is: no test may write under it.
USER_CACHE_DIRECTORY: Path | None = None


def pytest_configure(config):
    """Point the default cache at a temporary directory before any fixture of
    any scope runs (a module-scoped fixture would run before a function-scoped
    autouse one and reach the user's ~/.cache/garaphpy)."""
    global TEST_CACHE_ROOT, USER_CACHE_DIRECTORY
    from garaphpy.paths import cache_directory

    USER_CACHE_DIRECTORY = cache_directory().resolve()
    _USER_CACHE_ENVIRONMENT.update({name: os.environ.get(name) for name in _CACHE_VARIABLES})
    TEST_CACHE_ROOT = Path(tempfile.mkdtemp(prefix="garaphpy-tests-")).resolve()
    os.environ["GARAPHPY_CACHE"] = str(TEST_CACHE_ROOT / "cache")
    os.environ["XDG_CACHE_HOME"] = str(TEST_CACHE_ROOT / "xdg")


def pytest_unconfigure(config):
    for name, value in _USER_CACHE_ENVIRONMENT.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if TEST_CACHE_ROOT is not None:
        shutil.rmtree(TEST_CACHE_ROOT, ignore_errors=True)


@pytest.fixture(scope="session")
def snap(tmp_path_factory, request):
    """The example SNAP graph that ships with the project, with hashed edge
    weights (a power-law graph for SSSP); tests/programs/test_snap_graphs.py
    has its own ``snap``, the shared data's graphs."""
    import garaphpy

    path = request.config.rootpath / "examples" / "graphs" / "sample-web.txt.gz"
    return garaphpy.Graph.load(path, store=tmp_path_factory.mktemp("snap") / "s",
                               weights="hash", progress=False)


@pytest.fixture(autouse=True)
def _persistent_program_cache(request, monkeypatch):
    """Compiled programs persist across test sessions (in pytest's cache folder):
    keyed by their source and the kernels' files, so a second session of the
    fast subset (``-m "not slow"``) loads them instead of compiling again."""
    from garaphpy import api

    cache = getattr(request.config, "cache", None)
    if cache is not None:
        directory = cache.mkdir("garaphpy-programs")
        monkeypatch.setattr(api, "_program_cache_directory", lambda: directory)
