"""Vertex labels: user ids that are not integers (strings, tuples...).

The store keeps integer vertex ids only (Garaph section 2.1: a shard's
destinations are offsets from its first vertex), so ``Graph.from_networkx``
and ``Graph.from_pandas`` map other ids to codes 0..n-1 at the boundary, in
order of first appearance, and the Graph maps them back in every output
(``Result.to_dict``, ``to_pandas``, ``result[vertex]``, paths, verifier
reports): :class:`VertexLabels`.
"""

from __future__ import annotations

import numpy as np


def are_labels(values: np.ndarray) -> bool:
    """Whether ids held in ``values`` are labels rather than integer ids."""
    return np.asarray(values).dtype.kind in "OUSTV"


class VertexLabels:
    """The user's label of each code 0..n-1, and the code of each label.

    Parameters
    ----------
    labels : sequence
        Distinct hashable labels; ``labels[code]`` is the user's id of the
        vertex with that code.
    """

    def __init__(self, labels):
        self.labels = np.empty(len(labels), dtype=object)
        self.labels[:] = list(labels)
        self._index = {label: code for code, label in enumerate(self.labels.tolist())}
        if len(self._index) != len(self.labels):
            raise ValueError("vertex labels must be distinct")

    def __len__(self) -> int:
        return len(self.labels)

    @classmethod
    def of_columns(cls, *columns) -> tuple["VertexLabels", list[np.ndarray]]:
        """Labels of the ids in ``columns`` (first appearance first) and each
        column as int64 codes."""
        values = [np.asarray(column, dtype=object) for column in columns]
        index: dict = {}
        codes = [np.fromiter((index.setdefault(x, len(index)) for x in column.tolist()),
                             dtype=np.int64, count=column.shape[0]) for column in values]
        return cls(list(index)), codes

    def codes(self, labels) -> np.ndarray:
        """int64 codes of ``labels`` (KeyError naming an unknown one)."""
        out = np.empty(len(labels), dtype=np.int64)
        for k, label in enumerate(labels):
            try:
                out[k] = self._index[label]
            except (KeyError, TypeError):
                raise KeyError(f"vertex {label!r} is not in the graph") from None
        return out

    def of_codes(self, codes) -> np.ndarray:
        """The labels (an object array) of int codes."""
        return self.labels[np.asarray(codes, dtype=np.int64)]
