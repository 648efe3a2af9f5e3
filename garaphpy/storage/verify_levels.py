"""How thoroughly a store is checked when it is opened, and the record of a full check.

Garaph keeps its preprocessed graph on secondary storage (section 2.1) and
reads it again on every run; a full check reads all of it (the CRC-32 of
every array and data block), which on a store of 10^8 edges costs more than
the run.  The levels of :meth:`garaphpy.storage.store.Store.open`:

``full``
    The CRC-32 of every array and of every data block (one read of the store).
``quick``
    The arrays' CRC-32 and the block files' sizes; data blocks are checked
    as pages are read.
``sizes``
    The arrays' and the block files' sizes against the manifest; data
    blocks are checked as pages are read.
``none``
    The manifest's own checksum only (and the arrays' sizes, to read them).
``auto`` (the default)
    ``sizes`` where a full check of these very files passed within
    ``config.STORE_FULL_CHECK_VALID_S`` (same sizes and modification times
    of the manifest, the arrays and the block files), in this process or an
    earlier one; ``full`` otherwise.

A full check, or a build (whose blocks are checksummed as they are written),
leaves its record in the store directory (:data:`STAMP`, written
atomically; a store in a read-only directory keeps it in the process only).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from .. import config
from ..errors import ConfigError

#: The levels ``Store.open(verify=...)`` takes.
LEVELS = ("auto", "full", "quick", "sizes", "none")
#: The record of the last full check, in the store directory.
STAMP = "verified.json"

#: Stores checked fully in this process: path -> the files' state then.
_CHECKED: dict[str, dict] = {}


def check_level(level: str, where: str = "verify") -> str:
    """``level`` if it is one of :data:`LEVELS`; a ConfigError (a ValueError)
    naming ``where`` otherwise."""
    if level not in LEVELS:
        raise ConfigError(f"{where}={level!r}: expected one of {', '.join(LEVELS)}")
    return level


def _files_state(store) -> dict:
    """(size, mtime in ns) of the manifest, each array and each block file."""
    paths = [store.path / "manifest.json"] + [store.path / name
                                              for name in store.manifest["arrays"]]
    paths += store.block_files
    state = {}
    for path in paths:
        stat = os.stat(path)
        state[str(path)] = [stat.st_size, stat.st_mtime_ns]
    return state


def resolve(level: str, store) -> str:
    """The level ``auto`` stands for on ``store`` (any other level is itself)."""
    if level != "auto":
        return level
    try:
        state = _files_state(store)
    except OSError:
        return "full"
    key = str(store.path.resolve())
    recorded = _CHECKED.get(key)
    if recorded is None:
        try:
            recorded = json.loads((store.path / STAMP).read_text())
        except (OSError, ValueError):
            return "full"
    if not isinstance(recorded, dict) or recorded.get("files") != state:
        return "full"
    age = time.time() - float(recorded.get("checked_at", 0.0))
    return "sizes" if 0 <= age <= config.STORE_FULL_CHECK_VALID_S else "full"


def record_full_check(store) -> None:
    """Remember that ``store`` passed a full check now (in the process, and in
    its directory where that can be written)."""
    try:
        recorded = {"checked_at": time.time(), "files": _files_state(store)}
    except OSError:
        return
    _CHECKED[str(store.path.resolve())] = recorded
    path = Path(store.path) / STAMP
    temporary = path.with_name(f".{STAMP}.tmp-{os.getpid()}")
    try:
        temporary.write_text(json.dumps(recorded))
        os.replace(temporary, path)
    except OSError:
        try:
            temporary.unlink()
        except OSError:
            pass
