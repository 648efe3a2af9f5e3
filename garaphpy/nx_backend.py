"""A NetworkX backend: ``nx.pagerank(G, backend="garaphpy")`` runs on garaphpy.

Registered through the ``networkx.backends`` entry point (``garaphpy =
garaphpy.nx_backend:BackendInterface``), as nx-cugraph and
graphblas-algorithms are; its metadata is in :mod:`_garaphpy_nx`.  A
NetworkX graph is converted once (:meth:`BackendInterface.convert_from_nx`,
cached by networkx on the graph) into a :class:`GaraphpyGraph`: a garaphpy
store (Garaph section 2.1) whose vertex ids are the positions of the nodes
in ``G``, so any hashable node works and every answer comes back keyed by
the user's nodes.  Each function runs one of garaphpy's built-in vertex
programs (Garaph section 6: PageRank, BFS, SSSP, CC) and returns what the
networkx function returns: the same dict, set or generator of sets, the
same exceptions (``NodeNotFound``, ``NetworkXNotImplemented``,
``PowerIterationFailedConvergence``, ``NetworkXPointlessConcept``).

What garaphpy cannot compute is refused with ``NotImplementedError`` (and
said by :meth:`BackendInterface.can_run` before any conversion), so that
networkx falls back to its own implementation where the user allows it
(``nx.config.fallback_to_nx``) or names the reason: weighted PageRank,
personalization, nstart, dangling, a weight function, negative weights.

Conventions that differ from networkx's: dicts of distances are ordered by
distance (networkx's: the order its search discovered the nodes in); equal
dicts either way.
"""

from __future__ import annotations

import inspect
import warnings

import numpy as np

__all__ = ["BackendInterface", "GaraphpyGraph"]

#: Automatic dispatch (``nx.config.backend_priority``) takes graphs from this many
#: edges: below it, building a store costs more than networkx's own run.
#: ``backend="garaphpy"`` always runs garaphpy.
AUTOMATIC_MIN_EDGES = 50_000

#: networkx functions whose answer ignores edge values.
_UNWEIGHTED = frozenset({"single_source_shortest_path_length", "descendants",
                         "connected_components", "number_connected_components",
                         "is_connected", "node_connected_component",
                         "weakly_connected_components", "number_weakly_connected_components"})


class GaraphpyGraph:
    """A NetworkX graph converted to a garaphpy store (the backend's graph type).

    Attributes
    ----------
    graph : garaphpy.Graph or None
        The store; vertex ``i`` is ``nodes[i]``.  None for a graph without
        nodes.
    nodes : list
        The user's nodes, in ``G``'s order.
    weight : str or None
        The edge attribute the weights came from; None when unweighted.
    weights_are_integers : bool
        Every weight is a Python or numpy integer (distances come back as ints).
    weights_are_one : bool
        Every weight is 1 (PageRank, which ignores edge values, may run).
    """

    __networkx_backend__ = "garaphpy"

    def __init__(self, graph, nodes: list, directed: bool, multigraph: bool,
                 weight: str | None = None, weights_are_integers: bool = True,
                 weights_are_one: bool = True, min_weight: float = 0.0):
        self.graph = graph
        self.nodes = nodes
        self.weight = weight
        self.weights_are_integers = weights_are_integers
        self.weights_are_one = weights_are_one
        self.min_weight = min_weight
        self._directed = directed
        self._multigraph = multigraph
        self._index: dict | None = None
        self.__networkx_cache__: dict = {}

    def is_directed(self) -> bool:
        return self._directed

    def is_multigraph(self) -> bool:
        return self._multigraph

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node) -> bool:
        try:
            return node in self.index
        except TypeError:          # unhashable, as networkx answers for its graphs
            return False

    @property
    def index(self) -> dict:
        """``{node: vertex id}``, made on first use."""
        if self._index is None:
            self._index = {node: position for position, node in enumerate(self.nodes)}
        return self._index

    def vertex(self, node, missing: str = "Source {} is not in G") -> int:
        """The vertex id of ``node``; ``NodeNotFound`` with networkx's ``missing``
        message where it is not a node."""
        import networkx as nx

        if node not in self:
            raise nx.NodeNotFound(missing.format(node))
        return self.index[node]

    @classmethod
    def from_networkx(cls, graph, weight: str | None = None, default=1) -> "GaraphpyGraph":
        """Convert a networkx graph, with the edge attribute ``weight`` (``default``
        where an edge lacks it) as the weights, or unweighted for None."""
        from .graph import Graph

        nodes = list(graph)
        index = {node: position for position, node in enumerate(nodes)}
        edges = graph.edges(data=weight, default=default) if weight is not None \
            else graph.edges()
        count = graph.number_of_edges()
        src = np.empty(count, dtype=np.int64)
        dst = np.empty(count, dtype=np.int64)
        values = [] if weight is not None else None
        for position, edge in enumerate(edges):
            src[position] = index[edge[0]]
            dst[position] = index[edge[1]]
            if values is not None:
                values.append(edge[2])
        integers, ones, smallest = True, True, 0.0
        weights = None
        if values is not None and values:
            integers = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                           for v in values)
            try:
                weights = np.asarray(values, dtype=np.int64 if integers else np.float64)
            except (TypeError, ValueError) as error:
                raise NotImplementedError(f"edge attribute {weight!r} holds values that are "
                                          f"not numbers ({error})") from None
            ones = bool(np.all(weights == 1))
            smallest = float(weights.min())
        converted = None
        if nodes:
            # the store keeps a self-loop of an undirected graph once, as networkx does
            converted = Graph.from_arrays(src, dst, weights, num_vertices=len(nodes),
                                          directed=bool(graph.is_directed()),
                                          duplicates="keep", self_loops="keep")
        return cls(converted, nodes, bool(graph.is_directed()), bool(graph.is_multigraph()),
                   weight if weights is not None else None, integers, ones, smallest)


def _run(G, program, **options):
    """Run a built-in program on the store; values indexed by vertex id (= node position)."""
    import networkx as nx

    from .api import GpuFallbackWarning, NotConvergedWarning, run

    config = getattr(nx.config.backends, "garaphpy", None)
    mode = options.pop("mode", None) or getattr(config, "mode", None) or "hybrid"
    threads = options.pop("threads", None) or getattr(config, "threads", None)
    with warnings.catch_warnings():
        # the default mode runs on the CPU alone where no GPU is usable: nothing to say
        warnings.simplefilter("ignore", GpuFallbackWarning)
        # each caller answers a run that did not converge as networkx does
        warnings.simplefilter("ignore", NotConvergedWarning)
        result = run(G.graph, program, mode=mode, threads=threads, **options)
    values = np.empty(len(G.nodes), dtype=np.asarray(result.values).dtype)
    values[result.original_ids()] = result.values
    return result, values


def _graph(G, weight: str | None = None) -> GaraphpyGraph:
    """``G`` as a GaraphpyGraph: itself, or converted with the weight attribute."""
    if isinstance(G, GaraphpyGraph):
        return G
    return GaraphpyGraph.from_networkx(G, weight)


def _by_distance(G: GaraphpyGraph, distances: np.ndarray, reached: np.ndarray,
                 cutoff, as_int: bool) -> dict:
    """``{node: distance}`` of the reached vertices within ``cutoff``, nearest first."""
    if cutoff is not None:
        reached = reached & (distances <= cutoff)
    vertices = np.flatnonzero(reached)
    vertices = vertices[np.argsort(distances[vertices], kind="stable")]
    values = distances[vertices].astype(np.int64 if as_int else np.float64).tolist()
    nodes = G.nodes
    return {nodes[v]: d for v, d in zip(vertices.tolist(), values)}


def _component_labels(G: GaraphpyGraph, mode=None, threads=None) -> np.ndarray:
    """CC labels by vertex id: the smallest vertex id, i.e. the first node in ``G``'s
    order, of the vertex's component."""
    if G.graph is None:
        return np.empty(0, dtype=np.int64)
    _, labels = _run(G, "cc", mode=mode, threads=threads)
    return labels


def _components(G: GaraphpyGraph, labels: np.ndarray):
    """Sets of nodes, in the order of their first node in ``G`` (networkx's)."""
    order = np.argsort(labels, kind="stable")
    starts = np.flatnonzero(np.r_[True, labels[order][1:] != labels[order][:-1]]) \
        if labels.size else np.empty(0, dtype=np.int64)
    nodes = G.nodes
    for begin, end in zip(starts.tolist(), np.r_[starts[1:], labels.size].tolist()):
        yield {nodes[v] for v in order[begin:end].tolist()}


def _undirected_only(G, name: str) -> None:
    import networkx as nx

    if G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for directed type")


def _directed_only(G, name: str) -> None:
    import networkx as nx

    if not G.is_directed():
        raise nx.NetworkXNotImplemented("not implemented for undirected type")


class BackendInterface:
    """The object the ``networkx.backends`` entry point names.

    Each function takes networkx's arguments (and ``mode``, ``threads``),
    and a :class:`GaraphpyGraph` or a networkx graph (converted on the spot).
    """

    # ---- conversions -------------------------------------------------------------
    @staticmethod
    def convert_from_nx(G, edge_attrs=None, node_attrs=None, preserve_edge_attrs=False,
                        preserve_node_attrs=False, preserve_graph_attrs=False,
                        preserve_all_attrs=False, name=None, graph_name=None):
        """A networkx graph as a :class:`GaraphpyGraph`, weighted by the one edge
        attribute ``edge_attrs`` names (its default where an edge lacks it)."""
        if isinstance(G, GaraphpyGraph):
            return G
        if name in _UNWEIGHTED:
            return GaraphpyGraph.from_networkx(G)
        if isinstance(edge_attrs, str):
            edge_attrs = {edge_attrs: 1}
        if preserve_edge_attrs or preserve_all_attrs or (edge_attrs and len(edge_attrs) > 1):
            raise NotImplementedError("garaphpy keeps one numeric edge attribute, not "
                                      f"{'all' if not edge_attrs else sorted(edge_attrs)}")
        if not edge_attrs:
            return GaraphpyGraph.from_networkx(G)
        (weight, default), = edge_attrs.items()
        return GaraphpyGraph.from_networkx(G, weight, 1 if default is None else default)

    @staticmethod
    def convert_to_nx(obj, *, name=None):
        """A GaraphpyGraph back as a networkx graph (its nodes and edges, with the
        weight attribute); anything else unchanged."""
        if not isinstance(obj, GaraphpyGraph):
            return obj
        import networkx as nx

        cls = {(False, False): nx.Graph, (True, False): nx.DiGraph,
               (False, True): nx.MultiGraph, (True, True): nx.MultiDiGraph}[
            (obj.is_directed(), obj.is_multigraph())]
        graph = cls()
        graph.add_nodes_from(obj.nodes)
        if obj.graph is None:
            return graph
        matrix = obj.graph.to_scipy().tocoo()
        ids = obj.graph.original_ids()
        rows, columns = ids[matrix.row], ids[matrix.col]
        if not obj.is_directed():
            keep = rows <= columns
            rows, columns, data = rows[keep], columns[keep], matrix.data[keep]
        else:
            data = matrix.data
        nodes = obj.nodes
        if obj.weight is None:
            graph.add_edges_from((nodes[u], nodes[v]) for u, v in zip(rows.tolist(),
                                                                    columns.tolist()))
        else:
            graph.add_weighted_edges_from(
                ((nodes[u], nodes[v], w) for u, v, w in zip(rows.tolist(), columns.tolist(),
                                                            data.tolist())), obj.weight)
        return graph

    @staticmethod
    def can_run(name, args, kwargs):
        """True, or why garaphpy cannot run ``name`` with these arguments."""
        function = getattr(BackendInterface, name, None)
        if function is None:
            return False
        try:
            bound = inspect.signature(function).bind(*args, **kwargs)
        except TypeError as error:
            return str(error)
        bound.apply_defaults()
        arguments = bound.arguments
        if name == "pagerank":
            for option in ("personalization", "nstart", "dangling"):
                if arguments[option] is not None:
                    return f"pagerank's {option} is not implemented"
            if not 0 <= arguments["alpha"] < 1:
                return f"pagerank needs 0 <= alpha < 1, not {arguments['alpha']}"
            return _unit_weights(arguments["G"], arguments["weight"], "weighted pagerank")
        if "weight" in arguments:
            weight = arguments["weight"]
            if callable(weight):
                return f"{name} with a weight function is not implemented"
            return _nonnegative_weights(arguments["G"], weight, name)
        return True

    @staticmethod
    def should_run(name, args, kwargs):
        """Whether converting to garaphpy pays (automatic dispatch only): True for a
        GaraphpyGraph or a graph of :data:`AUTOMATIC_MIN_EDGES` edges or more."""
        G = args[0] if args else kwargs.get("G")
        if G is None or isinstance(G, GaraphpyGraph) or not hasattr(G, "number_of_edges"):
            return True
        if G.number_of_edges() < AUTOMATIC_MIN_EDGES:
            return (f"{G.number_of_edges()} edges: below {AUTOMATIC_MIN_EDGES}, building a "
                    "store costs more than networkx's own run")
        return True

    # ---- PageRank ----------------------------------------------------------------
    @staticmethod
    def pagerank(G, alpha=0.85, personalization=None, max_iter=100, tol=1e-06, nstart=None,
                 weight="weight", dangling=None, *, mode=None, threads=None):
        """networkx's pagerank on garaphpy's PageRank: ``{node: score}``.

        Uniform teleport and dangling mass, as networkx's default; stops once the
        L1 change of an iteration is below ``len(G) * tol`` (networkx's rule);
        ``PowerIterationFailedConvergence`` after ``max_iter`` iterations without.
        """
        import networkx as nx

        for option, value in (("personalization", personalization), ("nstart", nstart),
                              ("dangling", dangling)):
            if value is not None:
                raise NotImplementedError(f"pagerank's {option} is not implemented by garaphpy")
        G = _graph(G, weight)
        if G.weight is not None and not G.weights_are_one:
            raise NotImplementedError("weighted pagerank (edge weights other than 1) is not "
                                      "implemented by garaphpy")
        count = len(G.nodes)
        if count == 0:
            return {}
        if max_iter < 1 or not tol > 0:    # networkx's loop never meets err < N * tol
            raise nx.PowerIterationFailedConvergence(max_iter)
        from .programs import PageRank

        result, scores = _run(G, PageRank(damping=alpha), tolerance=count * tol,
                              max_iterations=max_iter, mode=mode, threads=threads)
        if not result.converged:
            raise nx.PowerIterationFailedConvergence(max_iter)
        return dict(zip(G.nodes, scores.tolist()))

    # ---- traversals --------------------------------------------------------------
    @staticmethod
    def single_source_shortest_path_length(G, source, cutoff=None, *, mode=None,
                                           threads=None):
        """``{node: hops}`` of the nodes ``source`` reaches (within ``cutoff``), by BFS."""
        G = _graph(G)
        start = G.vertex(source)
        _, depths = _run(G, "bfs", sources=[start], mode=mode, threads=threads)
        return _by_distance(G, depths, depths >= 0, cutoff, as_int=True)

    @staticmethod
    def descendants(G, source, *, mode=None, threads=None):
        """The set of nodes ``source`` reaches, itself excluded, by BFS."""
        import networkx as nx

        G = _graph(G)
        if source not in G:
            kind = "digraph" if G.is_directed() else "graph"
            raise nx.NetworkXError(f"The node {source} is not in the {kind}.")
        _, depths = _run(G, "bfs", sources=[G.index[source]], mode=mode, threads=threads)
        nodes = G.nodes
        return {nodes[v] for v in np.flatnonzero(depths > 0).tolist()}

    @staticmethod
    def single_source_dijkstra_path_length(G, source, cutoff=None, weight="weight", *,
                                           mode=None, threads=None):
        """``{node: distance}`` of the nodes ``source`` reaches (within ``cutoff``), by
        garaphpy's SSSP; ints where every weight is an int, as networkx's sums are."""
        if callable(weight):
            raise NotImplementedError("a weight function is not implemented by garaphpy")
        G = _graph(G, weight)
        start = G.vertex(source, "Node {} not found in graph")
        if G.weight is None:        # every weight 1: hops
            _, depths = _run(G, "bfs", sources=[start], mode=mode, threads=threads)
            return _by_distance(G, depths, depths >= 0, cutoff, as_int=True)
        if G.min_weight < 0:
            raise NotImplementedError("negative weights are not implemented by garaphpy "
                                      "(networkx's dijkstra does not promise them either)")
        _, distances = _run(G, "sssp", sources=[start], mode=mode, threads=threads)
        lengths = _by_distance(G, distances, np.isfinite(distances), cutoff,
                               as_int=G.weights_are_integers)
        lengths[source] = 0         # networkx's int 0, whatever the weights' type
        return lengths

    # ---- components --------------------------------------------------------------
    @staticmethod
    def connected_components(G, *, mode=None, threads=None):
        """Generate the components of an undirected graph as sets of nodes."""
        _undirected_only(G, "connected_components")
        G = _graph(G)
        yield from _components(G, _component_labels(G, mode, threads))

    @staticmethod
    def number_connected_components(G, *, mode=None, threads=None):
        """How many components an undirected graph has."""
        _undirected_only(G, "number_connected_components")
        return int(np.unique(_component_labels(_graph(G), mode, threads)).size)

    @staticmethod
    def is_connected(G, *, mode=None, threads=None):
        """Whether an undirected graph is one component (networkx refuses an empty one)."""
        import networkx as nx

        _undirected_only(G, "is_connected")
        if len(G) == 0:
            raise nx.NetworkXPointlessConcept("Connectivity is undefined for the null graph.")
        return bool(np.unique(_component_labels(_graph(G), mode, threads)).size == 1)

    @staticmethod
    def node_connected_component(G, n, *, mode=None, threads=None):
        """The set of nodes in the component of ``n`` (an undirected graph)."""
        _undirected_only(G, "node_connected_component")
        G = _graph(G)
        if n not in G:
            raise KeyError(n)                        # networkx's own answer
        vertex = G.index[n]
        labels = _component_labels(G, mode, threads)
        nodes = G.nodes
        return {nodes[v] for v in np.flatnonzero(labels == labels[vertex]).tolist()}

    @staticmethod
    def weakly_connected_components(G, *, mode=None, threads=None):
        """Generate the weakly connected components of a directed graph as sets."""
        _directed_only(G, "weakly_connected_components")
        G = _graph(G)
        yield from _components(G, _component_labels(G, mode, threads))

    @staticmethod
    def number_weakly_connected_components(G, *, mode=None, threads=None):
        """How many weakly connected components a directed graph has."""
        _directed_only(G, "number_weakly_connected_components")
        return int(np.unique(_component_labels(_graph(G), mode, threads)).size)


def _edge_values(G, weight):
    """The values of edge attribute ``weight`` (1 where missing) of a networkx graph;
    None when ``G`` is a GaraphpyGraph or unweighted."""
    if weight is None or isinstance(G, GaraphpyGraph) or not hasattr(G, "edges"):
        return None
    return (value for _, _, value in G.edges(data=weight, default=1))


def _unit_weights(G, weight, what: str):
    if isinstance(G, GaraphpyGraph):
        return True if G.weight is None or G.weights_are_one else \
            f"{what} (edge weights other than 1) is not implemented"
    values = _edge_values(G, weight)
    if values is not None and any(value != 1 for value in values):
        return f"{what} (edge weights other than 1) is not implemented"
    return True


def _nonnegative_weights(G, weight, name: str):
    if isinstance(G, GaraphpyGraph):
        return True if G.min_weight >= 0 else f"{name} with negative weights is not implemented"
    values = _edge_values(G, weight)
    try:
        if values is not None and any(value < 0 for value in values):
            return f"{name} with negative weights is not implemented"
    except TypeError:
        return f"{name}: edge attribute {weight!r} holds values that are not numbers"
    return True
