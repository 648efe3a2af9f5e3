"""Where garaphpy keeps what it caches on disk.

The default cache directory holds the stores of files and generators, the
compiled program modules and the measured read ratio of storage directories.
This module sits at the bottom of the package (it imports nothing from
garaphpy), so the storage layer and the top-level modules both read it.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_directory() -> Path:
    """Where stores of files and generators go by default.

    ``$GARAPHPY_CACHE`` if set, else ``$XDG_CACHE_HOME/garaphpy`` or
    ``~/.cache/garaphpy``.
    """
    if os.environ.get("GARAPHPY_CACHE"):
        return Path(os.environ["GARAPHPY_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "garaphpy"
