"""What the store builder may touch on disk, and how it writes.

Three rules keep preprocessing from destroying a user's files or leaving
debris behind:

* **Ownership.**  The builder replaces or deletes a directory only when it
  can prove the directory is a garaphpy store (or a storage directory's part
  of one) and holds nothing else: :func:`check_replaceable`.  The proof is
  the ``store-id`` file every store directory and every storage directory
  has held since the first store format (the store's key, 64 hex digits), or
  a manifest whose ``format`` is ``garaphpy-store``.  A file, a symbolic
  link, a directory of the user's, or a store with foreign files in it is an
  error naming the path, and nothing is touched.
* **Stale temporaries.**  A build writes into ``.NAME.tmp-PID-*``
  directories that hold an exclusive ``flock`` on a lock file while the
  build runs (:class:`TemporaryLock`).  Every build removes, beside its
  store, in its storage directories and in the cache, the temporaries
  whose lock nobody holds and whose pid is dead (the kernel drops a dead
  process's locks, ``kill -9`` included; a live build may be between creating
  its lock file and taking it), and lock-less ones (older garaphpy) only when
  their pid is dead and they hold garaphpy's marker and nothing else:
  :func:`remove_stale_temporaries`.  A folder of the user's that is merely
  named like a temporary is never touched.
* **Full writes.**  Every byte the build writes goes through
  :func:`write_fully`, which retries short writes and turns a full disk
  (or any other write error) into one :class:`~garaphpy.errors.StoreError`
  line naming the file and the bytes still to be written, and the free space
  left.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import re
import shutil
from pathlib import Path

from ..errors import StoreError
from .verify_levels import STAMP

#: The file naming a directory's store; the ownership marker.
STORE_ID = "store-id"
#: Held (flock) by the build that owns a temporary directory.
LOCK_FILE = ".build.lock"
#: Every name a store directory holds (a storage directory holds a subset).
STORE_NAMES = frozenset({"manifest.json", "shards.bin", "blocks.bin", "blocks.dat", "vertices",
                         STORE_ID, STAMP})

_KEY = re.compile(r"[0-9a-f]{64}")
#: Out-of-core scratch directories, which stores of earlier versions kept.
_SCRATCH = re.compile(r"\.scratch\.tmp-\d+-.+")


def _owned_marker(directory: Path) -> bool:
    try:
        marker = (directory / STORE_ID).read_text().strip()
    except (OSError, UnicodeDecodeError):
        marker = ""
    if _KEY.fullmatch(marker):
        return True
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("format") == "garaphpy-store"


def check_replaceable(path: Path, what: str = "store.path") -> None:
    """Raise StoreError unless ``path`` is absent, empty, or a store of ours only.

    Parameters
    ----------
    path : pathlib.Path
        A store directory, or a storage directory's part of a store.
    what : str
        The option that named the path, for the message.
    """
    if path.is_symlink():
        raise StoreError(f"{path}: is a symbolic link, not a garaphpy store directory; "
                         f"refusing to replace it (set {what} to the directory itself)")
    if not path.exists():
        return
    if not path.is_dir():
        raise StoreError(f"{path}: is a file, not a garaphpy store directory; refusing to "
                         f"replace it (choose another {what})")
    try:
        entries = sorted(entry.name for entry in path.iterdir())
    except OSError as error:
        raise StoreError(f"{path}: cannot list the directory ({error.strerror})") from None
    if not entries:
        return
    if not _owned_marker(path):
        raise StoreError(f"{path}: exists and is not a garaphpy store (no {STORE_ID} and no "
                         f"garaphpy manifest); refusing to replace it (choose another {what})")
    foreign = [name for name in entries
               if name not in STORE_NAMES and not _SCRATCH.fullmatch(name)]
    if foreign:
        raise StoreError(f"{path}: a garaphpy store that also holds {foreign[0]!r}, which is "
                         f"not part of a store; refusing to replace it (move it away)")


# ------------------------------------------------------------ store lock --

#: The content of a store's lock file (:class:`StoreLock`), by which a sweep
#: knows one that a killed build left.
STORE_LOCK_MARKER = b"garaphpy store lock\n"


class StoreLock:
    """An exclusive flock that serializes the builds and opens of one store path.

    Held from the check of what is at the path (a store of this input to
    reuse, or one to replace) through the build, the install and the
    opening of the result, so that a process only ever opens the store it
    built or found built from its own input.  The lock file
    ``.NAME.lock`` beside the store is removed on release; a process that
    was waiting on a removed file takes the lock again on the new one.
    """

    def __init__(self, path: Path):
        self.path = path.parent / f".{path.name}.lock"
        self.fd = None

    def __enter__(self) -> "StoreLock":
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                held = os.fstat(fd)
                try:
                    current = os.stat(self.path)
                except FileNotFoundError:
                    current = None
            except BaseException:
                os.close(fd)
                raise
            if current is not None and (current.st_dev, current.st_ino) == \
                    (held.st_dev, held.st_ino):
                self.fd = fd
                if held.st_size == 0:       # the marker a sweep knows it by
                    write_fully(fd, STORE_LOCK_MARKER, self.path)
                return self
            os.close(fd)    # the holder removed it as we waited: lock the new one

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None


# ------------------------------------------------------------ temporaries --

class TemporaryLock:
    """An exclusive flock on ``directory/LOCK_FILE`` while a build writes there."""

    def __init__(self, directory: Path):
        self.path = directory / LOCK_FILE
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        # blocking: another build's sweep may be testing this lock for a moment
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def release(self, unlink: bool = True) -> None:
        """Drop the lock (and its file, before the directory becomes a store)."""
        if self.fd is None:
            return
        if unlink:
            try:
                self.path.unlink()
            except FileNotFoundError:
                pass
        os.close(self.fd)
        self.fd = None


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_stale(directory: Path, pid: int) -> bool:
    lock = directory / LOCK_FILE
    try:
        fd = os.open(lock, os.O_RDWR | os.O_NOFOLLOW)
    except FileNotFoundError:
        # no lock: older garaphpy, or a build about to install it; a dead pid
        # and garaphpy's marker, nothing else inside (a user's folder of that name stays)
        if pid_alive(pid):
            return False
        try:
            check_replaceable(directory)
        except StoreError:
            return False
        return _owned_marker(directory)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False  # a live build holds it
    finally:
        os.close(fd)
    # a free lock of a live pid: a build between creating its lock file and taking it
    return not pid_alive(pid)


def remove_stale_temporaries(parent: Path, stem: str) -> list[Path]:
    """Remove the build temporaries of dead processes in ``parent``.

    Parameters
    ----------
    parent : pathlib.Path
        The store's parent directory, or a storage directory.
    stem : str
        A regular expression for the store's part of the name: temporaries
        are ``.STEM.tmp-PID-*``; leftover old stores ``.STEM.old-*`` (a kill
        between the two renames of an install) go too when they are ours.

    Returns
    -------
    list of pathlib.Path
        What was removed.
    """
    pattern = re.compile(rf"\.(?:{stem})\.(?:tmp-(\d+)-.+|old-[0-9a-f]+)", re.S)
    lock_pattern = re.compile(rf"\.(?:{stem})\.lock", re.S)
    removed = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        if lock_pattern.fullmatch(entry.name):
            if _remove_unheld_store_lock(entry):
                removed.append(entry)
            continue
        match = pattern.fullmatch(entry.name)
        if not match or entry.is_symlink() or not entry.is_dir():
            continue
        if match.group(1) is not None:
            if not _is_stale(entry, int(match.group(1))):
                continue
        else:
            try:
                check_replaceable(entry)
            except StoreError:
                continue
            if not _owned_marker(entry):
                continue
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry)
    return removed


def _remove_unheld_store_lock(path: Path) -> bool:
    """Remove a store lock file a killed build left (its marker, nobody holding it)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if os.pread(fd, len(STORE_LOCK_MARKER) + 1, 0) != STORE_LOCK_MARKER:
            return False
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path.unlink()       # held: a process that waits on it takes the lock anew
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


# ---------------------------------------------------------------- writing --

def _write_some(fd: int, data) -> int:
    """One ``os.write``; the single place tests inject short writes and ENOSPC."""
    return os.write(fd, data)


def _free_bytes(path: Path) -> int | None:
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def write_error(path: Path, error: OSError, remaining: int) -> StoreError:
    """One line for a failed write of ``remaining`` bytes to ``path``."""
    free = _free_bytes(Path(path).parent)
    where = f"; {free:,} bytes free there" if free is not None else ""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return StoreError(f"{path}: disk full: {remaining:,} more bytes needed for this write"
                          f"{where}; free space or choose another store.path / storage_dirs")
    return StoreError(f"{path}: cannot write ({error.strerror or error}); "
                      f"{remaining:,} bytes not written")


def write_fully(fd: int, data, path: Path) -> int:
    """Write all of ``data`` to ``fd``; StoreError naming ``path`` on failure.

    Short writes are retried for the rest; a write that stores nothing is a
    full disk.  Returns the number of bytes written.
    """
    view = memoryview(data).cast("B")
    total = len(view)
    while len(view):
        try:
            written = _write_some(fd, view)
        except OSError as error:
            raise write_error(path, error, len(view)) from None
        if written <= 0:
            raise write_error(path, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), len(view))
        view = view[written:]
    return total


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (fsync of the directory)."""
    handle = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(handle)
    finally:
        os.close(handle)


def write_file(path: Path, data, append: bool = False, sync: bool = False) -> None:
    """Create (or append to) ``path`` with ``data``, every byte checked."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as error:
        raise write_error(path, error, len(memoryview(data).cast("B"))) from None
    try:
        write_fully(fd, data, path)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
