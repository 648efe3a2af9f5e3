"""NetworkX's metadata for the ``garaphpy`` backend (the ``networkx.backend_info`` entry point).

NetworkX calls :func:`get_info` while it is imported, on every import, once
garaphpy is installed; this package is kept apart from ``garaphpy`` (as
nx-cugraph keeps ``_nx_cugraph``) so that importing networkx does not import
garaphpy, numpy or numba.  The implementations are in
:mod:`garaphpy.nx_backend` (the ``networkx.backends`` entry point), loaded
on the first call that dispatches to it.
"""

from __future__ import annotations

#: networkx function -> what the garaphpy implementation does differently.
FUNCTIONS = {
    "pagerank": "Power iteration on garaphpy's PageRank (Garaph section 6); stops as "
                "networkx does, once the L1 change is below N * tol. Weighted PageRank "
                "(an edge weight other than 1), personalization, nstart and dangling "
                "are not implemented (NotImplementedError).",
    "single_source_shortest_path_length": "garaphpy's BFS; the dict is ordered by "
                                          "distance (networkx: BFS discovery order).",
    "single_source_dijkstra_path_length": "garaphpy's SSSP (min-plus label correction, "
                                          "weights >= 0); ordered by distance. A weight "
                                          "function is not implemented.",
    "descendants": "garaphpy's BFS.",
    "connected_components": "garaphpy's CC (min-label propagation); components in "
                            "networkx's order (that of their first node in G).",
    "number_connected_components": "garaphpy's CC.",
    "is_connected": "garaphpy's CC.",
    "node_connected_component": "garaphpy's CC.",
    "weakly_connected_components": "garaphpy's CC on the symmetrized graph; networkx's "
                                   "order.",
    "number_weakly_connected_components": "garaphpy's CC on the symmetrized graph.",
}

#: The keywords every implementation takes beside networkx's own.
ADDITIONAL_PARAMETERS = {
    "mode : str, optional": "Processors: 'hybrid', 'cpu' or 'gpu' (default: "
                            "nx.config.backends.garaphpy.mode, 'hybrid', which runs on the "
                            "CPU alone where no GPU is usable).",
    "threads : int, optional": "CPU threads (default: garaphpy's choice).",
}


def get_info() -> dict:
    """The ``networkx.backend_info`` dictionary of the garaphpy backend."""
    return {
        "backend_name": "garaphpy",
        "project": "garaphpy",
        "package": "garaphpy",
        "short_summary": "CPU-GPU co-processing graph engine after Garaph (USENIX ATC'17).",
        "default_config": {"mode": "hybrid", "threads": None},
        "functions": {name: {"additional_docs": docs,
                             "additional_parameters": dict(ADDITIONAL_PARAMETERS)}
                      for name, docs in FUNCTIONS.items()},
    }
