"""Writing results: vertex values in the user's ids, and per-iteration records.

Values go to a text file (``vertex value`` per line, in the user's original
ids, floats written so they read back exactly) or to ``.npy`` (a structured
array with fields ``vertex`` and ``value``).  Per-iteration records go to
JSON lines.  Every file is written to a temporary name and renamed into
place, so an interrupted run leaves no half-written result.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import numpy as np

_LINES_PER_WRITE = 1 << 18


def _atomic_path(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(handle)
    return Path(temporary)


def write_values(path, vertices: np.ndarray, values: np.ndarray) -> Path:
    """Write ``vertices[i] values[i]`` pairs to ``path`` (.npy or text)."""
    path = Path(path)
    temporary = _atomic_path(path)
    try:
        if path.suffix == ".npy":
            table = np.empty(vertices.size, [("vertex", np.int64), ("value", values.dtype)])
            table["vertex"] = vertices
            table["value"] = values
            with open(temporary, "wb") as handle:
                np.save(handle, table)
        else:
            float_values = values.dtype.kind == "f"
            with open(temporary, "w") as handle:
                for start in range(0, vertices.size, _LINES_PER_WRITE):
                    ids = vertices[start:start + _LINES_PER_WRITE].tolist()
                    chunk = values[start:start + _LINES_PER_WRITE].tolist()
                    if float_values:
                        lines = [f"{v}\t{x!r}" for v, x in zip(ids, chunk)]
                    else:
                        lines = [f"{v}\t{x}" for v, x in zip(ids, chunk)]
                    handle.write("\n".join(lines) + "\n")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def read_values(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a file written by :func:`write_values`: (vertices, values)."""
    path = Path(path)
    if path.suffix == ".npy":
        table = np.load(path)
        return table["vertex"], table["value"]
    data = np.loadtxt(path, dtype=str, ndmin=2)
    values = data[:, 1]
    try:
        parsed = values.astype(np.int64)
    except ValueError:
        parsed = values.astype(np.float64)
    return data[:, 0].astype(np.int64), parsed


def write_iterations(path, records) -> Path:
    """Write one JSON object per iteration record."""
    path = Path(path)
    temporary = _atomic_path(path)
    try:
        with open(temporary, "w") as handle:
            for record in records:
                handle.write(json.dumps(record.as_dict()) + "\n")
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path
