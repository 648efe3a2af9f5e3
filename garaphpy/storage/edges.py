"""The edge-stream contract between readers, generators and the store builder.

Every input (a file in any supported format, in-memory arrays, a SciPy
matrix, a generator) is presented to the builder as an :class:`EdgeSource`:
a few declared facts plus :meth:`EdgeSource.chunks`, which streams the edges
in bounded pieces and can be called more than once (the builder reads an
input twice when it does not fit the memory budget; Garaph section 6.5
"only needs to scan the input data twice").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from ..errors import GraphInputError


@dataclass(frozen=True)
class EdgeChunk:
    """A piece of an edge stream.

    Attributes
    ----------
    src, dst : numpy.ndarray of int64 (or int32)
        Endpoints, 0-based *file* ids (a 1-based format has already been
        shifted down by one; the shift is recorded in ``EdgeSource.id_base``).
        In-memory inputs may pass views of the caller's int32 arrays.
    weight : numpy.ndarray or None
        One weight per edge (int64 for integer weights, float64 for real
        ones), or None for an unweighted input.

    Chunks may be views of the caller's data: consumers never modify them.
    """

    src: np.ndarray
    dst: np.ndarray
    weight: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.src.shape[0])


class EdgeSource:
    """Base class of every edge input.

    Attributes
    ----------
    name : str
        The path, or a description (``"<arrays>"``, ``"rmat:22"``), used in
        messages and in the manifest.
    format : str
        Short format name (``"snap"``, ``"el"``, ``"wel"``, ``"mtx"``, ``"gr"``,
        ``"sg"``, ``"wsg"``, ``"bcsr"``, ``"bwcsr"``, ``"arrays"``, ``"scipy"``,
        ``"rmat"``, ``"grid"``).
    num_vertices : int or None
        Vertex count declared by the input (Matrix Market size line, DIMACS
        ``p`` line, binary headers, generators).  Declared vertices that no
        edge touches are kept as isolated vertices and ids are not renumbered
        (file id = internal id).  None for plain edge lists: the vertices are
        then the ids that occur, renumbered in increasing order.
    num_edges_hint : int or None
        Declared or estimated number of edges (for sizing and progress).
    weight_kind : {"int", "real", None}
        Type of the weights ``chunks`` yields, or None when unweighted.
    id_base : int
        Added to an internal id (for declared-size inputs) to write results in
        the user's ids: 1 for Matrix Market and DIMACS, else 0.
    directed : bool or None
        What the input itself says about direction (a GAP ``.sg`` header, a
        symmetric Matrix Market file), None when it says nothing.
    already_symmetric : bool
        True when ``chunks`` yields both directions of every undirected edge
        (symmetric Matrix Market, undirected ``.sg``), so the builder must not
        add the reverse edges again.
    input_bytes : int or None
        Size of the input in bytes (for progress), if known.
    """

    name: str = "<input>"
    format: str = "unknown"
    num_vertices: int | None = None
    num_edges_hint: int | None = None
    weight_kind: str | None = None
    #: Real weights given as a numpy array keep its precision under
    #: ``weight_dtype="auto"`` (float64 stays float64); None for text formats.
    real_weight_dtype: np.dtype | None = None
    id_base: int = 0
    directed: bool | None = None
    already_symmetric: bool = False
    input_bytes: int | None = None

    def chunks(self, max_edges: int) -> Iterator[EdgeChunk]:
        """Yield the edges in chunks of at most ``max_edges`` edges.

        Raises
        ------
        garaphpy.errors.GraphInputError
            On malformed input, naming the file and the line or byte offset.
        """
        raise NotImplementedError

    def identity(self) -> dict:
        """A JSON-able description that changes whenever the input changes.

        Used to decide whether an existing store is up to date.  Files use
        their resolved path, size and modification time; generators their
        parameters; in-memory inputs a checksum of their contents.
        """
        raise NotImplementedError

    @property
    def weighted(self) -> bool:
        """Whether the edges carry weights."""
        return self.weight_kind is not None

    def locate_weight(self, test) -> dict | None:
        """Where the first weight for which ``test`` holds is, reading the input again.

        Parameters
        ----------
        test : callable
            Vectorized: an array of weights in, a boolean array out.

        Returns
        -------
        dict or None
            ``{"path": name, "value": weight}`` and where the edge is: ``line``
            (1-based, text files), ``offset`` (byte, binary files) or ``edge``
            (0-based index, other inputs).  None when no weight passes.
            Readers override this with their own notion of a place.
        """
        seen = 0
        for chunk in self.chunks(1 << 20):
            if chunk.weight is not None:
                hits = np.flatnonzero(test(chunk.weight))
                if hits.size:
                    k = int(hits[0])
                    return {"path": self.name, "edge": seen + k,
                            "value": chunk.weight[k].item()}
            seen += len(chunk)
        return None


def location_error(found: dict, message: str) -> GraphInputError:
    """A GraphInputError at a place :meth:`EdgeSource.locate_weight` found."""
    if "edge" in found:
        message = f"edge {found['edge']}: {message}"
    return GraphInputError(message, path=found["path"], line=found.get("line"),
                           offset=found.get("offset"))


class WeightsRoundedWarning(UserWarning):
    """Weights were stored in a narrower type than they were read in, and some changed."""


def warn_if_weights_rounded(weights: np.ndarray, requested: str, name: str,
                            block: int = 1 << 22) -> int:
    """Warn, with a :class:`WeightsRoundedWarning`, when storing ``weights`` in the
    ``requested`` weight_dtype changes any of them (float64 read, ``"float32"``
    asked for; ``"auto"`` keeps the input's precision and never warns).

    Returns the number of weights that change; the message gives it with the
    largest relative change and one example, so that a user who asked for
    ``weight_dtype="float32"`` knows what the narrowing cost.
    """
    if requested in ("auto", "none"):
        return 0
    stored_dtype = np.dtype(requested)
    if stored_dtype.kind != "f" or weights.dtype.kind != "f" \
            or stored_dtype.itemsize >= weights.dtype.itemsize:
        return 0
    changed, worst, example = 0, 0.0, None
    for start in range(0, weights.shape[0], block):
        part = np.asarray(weights[start:start + block])
        narrowed = part.astype(stored_dtype).astype(part.dtype)
        moved = np.flatnonzero(narrowed != part)
        if moved.size:
            changed += int(moved.size)
            relative = np.abs(narrowed[moved] - part[moved]) / np.maximum(
                np.abs(part[moved]), np.finfo(part.dtype).tiny)
            worst = max(worst, float(relative.max()))
            if example is None:
                k = int(moved[0])
                example = (part[k].item(), narrowed[k].item())
    if changed:
        import warnings

        warnings.warn(
            f"{name}: weight_dtype='{stored_dtype.name}' rounded {changed} of "
            f"{weights.shape[0]} weights (largest relative change {worst:.3g}; e.g. "
            f"{example[0]!r} became {example[1]!r}); use weight_dtype='auto' or "
            "'float64' to keep them", WeightsRoundedWarning, stacklevel=2)
    return changed
