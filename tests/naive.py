"""Slow, obviously-correct references for the tests.

Nothing here shares code with garaphpy: these are the definitions written
out with plain Python and numpy, to compare the engine's results against.
"""

from __future__ import annotations

import numpy as np


def clean_edges(src, dst, weight=None, *, directed=True, self_loops="keep",
                duplicates="drop", num_vertices=None):
    """The cleaned, renumbered edge list the store must hold.

    Returns
    -------
    dict
        ``original_ids`` (None when ``num_vertices`` is given), ``n``, and
        ``edges``: a list of (u, v, w) in internal ids sorted by (v, u), with
        duplicate policy applied as documented (``drop`` keeps the first
        occurrence in input order, where reverse edges of undirected graphs
        follow the forward edges of their chunk, as the builder reads them).
    """
    src = [int(x) for x in src]
    dst = [int(x) for x in dst]
    weights = [None] * len(src) if weight is None else [w.item() for w in np.asarray(weight)]
    edges = list(zip(src, dst, weights))
    if self_loops == "drop":
        edges = [e for e in edges if e[0] != e[1]]
    if not directed:
        edges = edges + [(v, u, w) for (u, v, w) in edges if u != v]
    if num_vertices is None:
        ids = sorted({u for u, _, _ in edges} | {v for _, v, _ in edges}
                     | set(src) | set(dst))
        index = {original: i for i, original in enumerate(ids)}
        n = len(ids)
        edges = [(index[u], index[v], w) for u, v, w in edges]
        original_ids = np.array(ids, np.int64)
    else:
        n, original_ids = num_vertices, None
    if duplicates != "keep":
        merged: dict = {}
        order = []
        for u, v, w in edges:
            if (u, v) not in merged:
                merged[(u, v)] = w
                order.append((u, v))
            elif duplicates == "min":
                merged[(u, v)] = min(merged[(u, v)], w)
            elif duplicates == "max":
                merged[(u, v)] = max(merged[(u, v)], w)
            elif duplicates == "sum":
                merged[(u, v)] = merged[(u, v)] + w
        edges = [(u, v, merged[(u, v)]) for u, v in order]
    edges.sort(key=lambda e: (e[1], e[0]))  # stable: equal (v, u) keep input order
    return {"n": n, "original_ids": original_ids, "edges": edges}


def csr_targets(n, edges):
    """Out-neighbour lists of every vertex, each sorted."""
    targets = [[] for _ in range(n)]
    for u, v, _ in edges:
        targets[u].append(v)
    return [sorted(t) for t in targets]
