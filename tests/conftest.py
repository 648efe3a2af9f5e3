"""Shared test setup: the `gpu` marker skips cleanly where no GPU is usable."""

from __future__ import annotations

import functools
import os
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


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Stores built by tests go to a temporary cache, never the user's."""
    monkeypatch.setenv("GARAPHPY_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


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
