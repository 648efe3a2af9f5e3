"""Shared test setup: the `gpu` marker skips cleanly where no GPU is usable,
every store a test builds goes to a temporary cache, never the user's, and the
fixtures more than one test file uses (their other shared code is in
tests/helpers.py).  The storage directories' read speed is fixed
(:data:`TEST_DISK_READ_BYTES_PER_SECOND`), so that no test measures a disk
and ``store.compress = "auto"`` and the read-ahead choose alike on every host."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import garaphpy
import helpers
from garaphpy import api
from garaphpy import config as garaphpy_config
from garaphpy.scheduler import driver as driver_module
from helpers import gpu_available, is_fast


def pytest_collection_modifyitems(config, items):
    for item in items:
        if is_fast(item.nodeid) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)
    reason = gpu_available()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"GPU test: {reason}")
    for item in items:
        if item.get_closest_marker("gpu") is not None:
            item.add_marker(skip)


#: The read speed the tests' storage directories are taken to have: faster
#: than any decoder, so "auto" keeps test stores plain as its rule says
#: (:func:`garaphpy.storage.decisions.compress_pages`), whatever the host's
#: disk; the tests of the measured choice set their own.
TEST_DISK_READ_BYTES_PER_SECOND = 1e12

#: Variables that locate garaphpy's default cache (garaphpy.paths.cache_directory).
_CACHE_VARIABLES = ("GARAPHPY_CACHE", "XDG_CACHE_HOME")
#: The user's values of those variables, put back when the session ends.
_USER_CACHE_ENVIRONMENT: dict = {}


def pytest_configure(config):
    """Point the default cache at a temporary directory before any fixture of
    any scope runs (a module-scoped fixture would run before a function-scoped
    autouse one and reach the user's ~/.cache/garaphpy); both folders are kept
    in :mod:`helpers` for the tests that check them.  Its ``programs`` folder
    is pytest's (:data:`helpers.PROGRAM_CACHE`), so that a command line,
    example or bench script a test starts loads the programs that the test
    processes (both xdist workers) compiled: each costs seconds to compile.
    Hybrid runs set the GPU up whatever their size
    (:func:`helpers.gpu_set_up_unweighed`), and the disk reads at
    :data:`TEST_DISK_READ_BYTES_PER_SECOND`."""
    from garaphpy.paths import cache_directory

    helpers.USER_CACHE_DIRECTORY = cache_directory().resolve()
    _USER_CACHE_ENVIRONMENT.update({name: os.environ.get(name) for name in _CACHE_VARIABLES})
    root = Path(tempfile.mkdtemp(prefix="garaphpy-tests-")).resolve()
    helpers.TEST_CACHE_ROOT = root
    os.environ["GARAPHPY_CACHE"] = str(root / "cache")
    os.environ["XDG_CACHE_HOME"] = str(root / "xdg")
    helpers.gpu_set_up_unweighed()
    garaphpy_config.DISK_READ_BYTES_PER_SECOND = TEST_DISK_READ_BYTES_PER_SECOND
    cache = getattr(config, "cache", None)
    if cache is not None:
        helpers.PROGRAM_CACHE = cache.mkdir("garaphpy-programs")
        (root / "cache").mkdir()
        (root / "cache" / "programs").symlink_to(helpers.PROGRAM_CACHE, target_is_directory=True)


def pytest_unconfigure(config):
    api._gpu_set_up_choice = helpers.WEIGHED_GPU_SET_UP
    for name, value in _USER_CACHE_ENVIRONMENT.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if helpers.TEST_CACHE_ROOT is not None:
        shutil.rmtree(helpers.TEST_CACHE_ROOT, ignore_errors=True)


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
def _persistent_program_cache(monkeypatch):
    """Compiled programs persist across test sessions (in pytest's cache folder):
    keyed by their source and the kernels' files, so a second session of the
    fast subset (``-m "not slow"``) loads them instead of compiling again."""
    from garaphpy import api

    directory = helpers.PROGRAM_CACHE
    if directory is not None:
        monkeypatch.setattr(api, "_program_cache_directory", lambda: directory)


@pytest.fixture
def built_drivers(monkeypatch):
    """The drivers ``garaphpy.run`` builds, in order."""
    built = []
    make = driver_module.Driver

    def recorded_driver(*arguments, **keywords):
        built.append(make(*arguments, **keywords))
        return built[-1]

    monkeypatch.setattr(driver_module, "Driver", recorded_driver)
    return built


@pytest.fixture(scope="module")
def tiered():
    """A weighted graph of hubs, split vertices and runs of vertices without
    in-edges, in shards of many sizes (what the packed pull's walk over the
    column starts must get right)."""
    rng = np.random.default_rng(5)
    n = 12000
    destinations = np.concatenate([
        np.repeat(np.arange(0, 6140, 9), 17),           # 8 vertices without in-edges between
        np.full(3000, 6200),                            # a hub
        np.repeat(np.arange(6300, n), 3),
        np.repeat(np.arange(7000, 8000, 100), 300),
        np.full(20000, 11000)])                 # split over shards (duplicates go)
    sources = rng.integers(0, n, destinations.size)
    weights = rng.integers(1, 256, destinations.size)
    return garaphpy.Graph.from_arrays(sources, destinations, weights, num_vertices=n,
                                      progress=False, max_shard_edges=8192, min_shards=1,
                                      max_page_bytes=90000)


@pytest.fixture(scope="module", params=[2, 4], ids=lambda workers: f"{workers}-workers")
def dask_client(request):
    """A Dask LocalCluster of 2 or 4 worker processes, one thread each, and its
    client, for a module's partitioned runs; skipped where dask is missing."""
    distributed = pytest.importorskip("dask.distributed")
    cluster = distributed.LocalCluster(n_workers=request.param, threads_per_worker=1,
                                       processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()
