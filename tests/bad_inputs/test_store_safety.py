"""Bad inputs and hostile conditions for preprocessing (issue 22, store side).

The bad-input suite: each case here once destroyed a user's file, stored a
wrong graph in silence, crashed the interpreter or left debris behind.  Every
test states the promise it checks; the suite grows with each format and
option.
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from garaphpy.errors import GraphInputError, StoreError
from garaphpy.storage import builder as builder_module
from garaphpy.storage import filesafety
from garaphpy.storage.builder import BuildOptions, build_store
from garaphpy.storage.readers import from_arrays, open_source
from garaphpy.storage.store import Store

REPO = Path(__file__).resolve().parents[2]


def small_graph(seed=0, n=200, m=3000, weighted=True):
    rng = np.random.default_rng(seed)
    weight = rng.integers(1, 100, m) if weighted else None
    return from_arrays(rng.integers(0, n, m), rng.integers(0, n, m), weight)


def build(path, source, **options):
    return build_store(source, path, BuildOptions(**options), progress=False)


def tree(directory: Path) -> dict:
    """Every file under ``directory`` with its bytes (a snapshot to compare)."""
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def leftovers(*directories: Path) -> list[str]:
    return [p.name for d in directories if d.exists() for p in d.iterdir()
            if ".tmp-" in p.name or ".old-" in p.name]


# ------------------------------------------------ 1. never destroy user data --

def test_a_users_directory_at_store_path_is_refused_untouched(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "thesis.tex").write_text("five years of work")
    before = tree(folder)
    with pytest.raises(StoreError, match=f"{folder}.*not a garaphpy store"):
        build(folder, small_graph())
    assert tree(folder) == before
    assert leftovers(tmp_path) == []


def test_store_path_dot_never_replaces_the_working_directory(tmp_path, monkeypatch):
    graph = tmp_path / "graph.el"
    graph.write_text("0 1\n1 2\n")
    (tmp_path / "run.toml").write_text('graph = "graph.el"\n')
    before = tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StoreError, match="not a garaphpy store"):
        build(Path("."), open_source(graph))
    assert tree(tmp_path) == before


def test_a_file_at_store_path_is_refused_and_not_moved_aside(tmp_path):
    target = tmp_path / "store"
    target.write_text("not a directory")
    with pytest.raises(StoreError, match=f"{target}: is a file"):
        build(target, small_graph())
    assert target.read_text() == "not a directory"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]


def test_a_symlink_at_store_path_is_refused(tmp_path):
    link = tmp_path / "store"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(StoreError, match=f"{link}: is a symbolic link"):
        build(link, small_graph())
    assert link.is_symlink()


def test_a_store_of_ours_is_replaced_but_not_with_a_users_file_inside(tmp_path):
    target = tmp_path / "store"
    build(target, small_graph(seed=1))
    rebuilt = build(target, small_graph(seed=2))          # other input: replaced
    assert not rebuilt.reused and leftovers(tmp_path) == []
    (target / "notes.txt").write_text("mine")
    with pytest.raises(StoreError, match="notes.txt"):
        build(target, small_graph(seed=3))
    assert (target / "notes.txt").read_text() == "mine"
    assert Store.open(target).num_edges == rebuilt.num_edges


def test_a_store_built_before_the_marker_is_ours_by_its_manifest(tmp_path):
    target = tmp_path / "store"
    build(target, small_graph(seed=1))
    (target / filesafety.STORE_ID).unlink()
    assert build(target, small_graph(seed=2), duplicates="keep").num_edges == 3000


def test_a_damaged_store_of_ours_is_rebuilt(tmp_path):
    target = tmp_path / "store"
    build(target, small_graph(seed=1))
    (target / "manifest.json").write_text("{ garbage")
    assert build(target, small_graph(seed=1), duplicates="keep").num_edges == 3000


def test_storage_dirs_foreign_files_are_never_deleted(tmp_path):
    storage = tmp_path / "ssd"
    storage.mkdir()
    source = small_graph()
    key = builder_module.store_key(source.identity(), BuildOptions(storage_dirs=[str(storage)]))
    clash = storage / f"store-{key[:12]}"
    clash.mkdir()
    (clash / "data.csv").write_text("precious")
    with pytest.raises(StoreError, match=f"{clash}.*storage_dirs"):
        build(tmp_path / "store", source, storage_dirs=[str(storage)])
    assert (clash / "data.csv").read_text() == "precious"
    assert not (tmp_path / "store").exists()
    assert leftovers(tmp_path, storage) == []


# ------------------------------------------------- 2. stale temporaries --

def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_stale_temporaries_of_dead_builds_are_removed_live_ones_kept(tmp_path):
    storage = tmp_path / "ssd"
    storage.mkdir()
    stale_locked = tmp_path / f".store.tmp-{dead_pid()}-abc"      # lock file, nobody holds it
    stale_locked.mkdir()
    (stale_locked / filesafety.LOCK_FILE).write_text("")
    stale_old = storage / f".store-0123456789ab.tmp-{dead_pid()}-xyz"   # older garaphpy: no lock
    stale_old.mkdir()
    (stale_old / "blocks.dat").write_bytes(b"x" * 100)
    live = tmp_path / f".store.tmp-{dead_pid()}-live"               # pid reused, lock held
    live.mkdir()
    held = filesafety.TemporaryLock(live)
    live_nolock = tmp_path / f".store.tmp-{os.getpid()}-mine"        # alive, no lock yet
    live_nolock.mkdir()
    other = tmp_path / f".other.tmp-{dead_pid()}-zzz"                # another store's
    other.mkdir()
    try:
        build(tmp_path / "store", small_graph(), storage_dirs=[str(storage)])
        assert not stale_locked.exists() and not stale_old.exists()
        assert live.exists() and live_nolock.exists() and other.exists()
    finally:
        held.release()


def test_kill_during_a_build_leaves_temporaries_the_next_build_removes(tmp_path):
    target, storage = tmp_path / "store", tmp_path / "ssd"
    storage.mkdir()
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        import numpy as np
        from garaphpy.storage.builder import build_store, BuildOptions
        from garaphpy.storage.edges import EdgeChunk, EdgeSource

        class Slow(EdgeSource):
            name = "slow"
            def chunks(self, max_edges):
                rng = np.random.default_rng(0)
                for i in range(10_000):
                    if i == 3:
                        print("started", flush=True)
                    time.sleep(0.01)
                    yield EdgeChunk(rng.integers(0, 1000, 1000), rng.integers(0, 1000, 1000))
            def identity(self):
                return {{"slow": 1}}

        build_store(Slow(), {str(target)!r}, BuildOptions(storage_dirs=[{str(storage)!r}]),
                    progress=False)
    """)
    for kill in (signal.SIGKILL, signal.SIGTERM):
        process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                   text=True)
        try:
            assert process.stdout.readline().strip() == "started"
            time.sleep(0.2)
        finally:
            process.send_signal(kill)
            process.wait()
        # the killed build's own temporaries (the next build removed the previous ones)
        assert len(leftovers(tmp_path)) == 1 and len(leftovers(storage)) == 1
    build(target, small_graph(), storage_dirs=[str(storage)])
    assert leftovers(tmp_path, storage) == []


# ------------------------------------------- 3. out-of-core scratch files --

OUT_OF_CORE = {"memory_budget": 40_000}   # 555 edges per group: many buckets


def sabotage_buckets(monkeypatch, damage):
    """Run ``damage(path)`` on the first non-empty bucket file before it is read."""
    original = builder_module._Buckets.load
    done = []

    def load(self, first, end, with_weight):
        if not done:
            for bucket in range(first, end):
                path = self._path(bucket, "src")
                if self.counts[bucket] and path.exists():
                    damage(path)
                    done.append(path)
                    break
        return original(self, first, end, with_weight)

    monkeypatch.setattr(builder_module._Buckets, "load", load)
    return done


@pytest.mark.parametrize("damage", ["delete", "truncate", "grow"])
def test_a_damaged_bucket_file_fails_the_build_naming_it(tmp_path, monkeypatch, damage):
    actions = {"delete": lambda p: p.unlink(),
               "truncate": lambda p: os.truncate(p, p.stat().st_size // 2),
               "grow": lambda p: p.write_bytes(p.read_bytes() * 2)}
    done = sabotage_buckets(monkeypatch, actions[damage])
    target = tmp_path / "store"
    with pytest.raises(StoreError, match="scratch file") as error:
        build(target, small_graph(m=20_000), **OUT_OF_CORE)
    assert done and str(done[0]) in str(error.value)
    assert not target.exists() and leftovers(tmp_path) == []


def test_out_of_core_build_unharmed_still_matches(tmp_path):
    in_memory = build(tmp_path / "a", small_graph(m=20_000))
    out_of_core = build(tmp_path / "b", small_graph(m=20_000), **OUT_OF_CORE)
    assert not out_of_core.manifest["built_in_memory"]
    assert [p.name for p in out_of_core.path.iterdir() if p.name.startswith(".")] == []
    for a, b in zip(in_memory.csc(), out_of_core.csc()):
        assert np.array_equal(a, b)


# ------------------------------------------------------------ 4. full disk --

def fill_disk_after(monkeypatch, quota: int):
    """Writes succeed (some short) until ``quota`` bytes, then ENOSPC."""
    written = [0]

    def write_some(fd, data):
        room = quota - written[0]
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        count = min(len(data), room, max(1, len(data) // 2))   # short writes
        count = os.write(fd, data[:count])
        written[0] += count
        return count

    monkeypatch.setattr(filesafety, "_write_some", write_some)
    return written


@pytest.mark.parametrize("quota", [10_000, 200_000])
@pytest.mark.parametrize("memory_budget", [None, 40_000])
def test_full_disk_is_one_line_naming_the_path_and_leaves_nothing(tmp_path, monkeypatch,
                                                                 quota, memory_budget):
    storage = tmp_path / "ssd"
    storage.mkdir()
    fill_disk_after(monkeypatch, quota)
    target = tmp_path / "store"
    with pytest.raises(StoreError, match=r"disk full: [\d,]+ more bytes needed") as error:
        build(target, small_graph(m=20_000), storage_dirs=[str(storage)],
              memory_budget=memory_budget)
    message = str(error.value)
    assert "\n" not in message and str(tmp_path) in message
    assert not target.exists()
    assert leftovers(tmp_path, storage) == [] and list(storage.iterdir()) == []


def test_short_writes_alone_still_give_the_same_store(tmp_path, monkeypatch):
    reference = build(tmp_path / "a", small_graph(m=20_000))
    fill_disk_after(monkeypatch, 1 << 60)
    short = build(tmp_path / "b", small_graph(m=20_000))
    for a, b in zip(reference.csc(), short.csc()):
        assert np.array_equal(a, b)


@pytest.fixture
def small_tmpfs(tmp_path):
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mount)],
                            capture_output=True)
    if result.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_really_full_tmpfs(small_tmpfs):
    target = small_tmpfs / "store"
    with pytest.raises(StoreError, match="disk full") as error:
        build(target, small_graph(n=20_000, m=200_000))
    assert str(small_tmpfs) in str(error.value)
    assert list(small_tmpfs.iterdir()) == []
