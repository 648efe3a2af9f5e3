"""The library's entry to graphs: load or preprocess once, then run on the store.

:class:`Graph` wraps a preprocessed store (DESIGN.md "The store"; Garaph
section 2.1).  A graph comes from a file in any supported format, from a
generator spec (``"rmat:22"``, ``"grid:2000x2000"``), from numpy arrays or a
SciPy sparse matrix, or from an existing store directory.  Files and
generators are preprocessed into a cache directory keyed on the input and
the options, so the second load of the same input reuses the store.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import weakref
from pathlib import Path

import numpy as np

from . import generators
from .errors import ConfigError, GraphInputError
from .labels import VertexLabels, are_labels
from .paths import cache_directory  # re-exported: garaphpy.graph.cache_directory
from .storage.builder import BuildOptions, build_store, store_key
from .storage.edges import EdgeSource
from .storage.readers import from_arrays, from_scipy, open_source
from .storage.store import Store

#: The keyword options of the constructors: the fields of BuildOptions.
_BUILD_OPTION_NAMES = frozenset(field.name for field in dataclasses.fields(BuildOptions))


def default_store_path(source: EdgeSource, options: BuildOptions) -> Path:
    """Cache path of the store of ``source`` built with ``options``."""
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "-", Path(source.name).name).strip("-.") or "graph"
    key = store_key(source.identity(), options)
    return cache_directory() / "stores" / f"{stem[:60]}-{key[:16]}"


#: Identity fields that change when the same input is edited, not replaced.
_VOLATILE_IDENTITY = ("size", "mtime_ns")


def refuse_store_of_another_input(path: Path, source: EdgeSource) -> None:
    """Refuse to replace a store at ``path`` that was built from another input.

    A store given by path is rebuilt when its input changed (the same file,
    edited) or its options did; a store of a *different* input (another
    file, generator, generator seed or weight rule) is not silently
    replaced: pass ``rebuild=True`` (``--rebuild``) or another path.

    Raises
    ------
    ConfigError
        Naming the path and both inputs.
    """
    manifest_path = path / "manifest.json"
    try:
        stored = json.loads(manifest_path.read_text()).get("input", {})
    except (OSError, ValueError, AttributeError):
        return      # no readable store there: building one replaces nothing
    old = {k: v for k, v in (stored.get("identity") or {}).items()
           if k not in _VOLATILE_IDENTITY}
    new = {k: v for k, v in json.loads(json.dumps(source.identity())).items()
           if k not in _VOLATILE_IDENTITY}
    if old == new:
        return
    remedy = "give another store path, or rebuild to replace it (--rebuild, rebuild=True)"
    if stored.get("name") != source.name:
        raise ConfigError(f"store {path} holds the store of {stored.get('name')!r}, not of "
                          f"{source.name!r}; {remedy}")
    differing = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    changes = ", ".join(f"{k} {old.get(k)!r} there, {new.get(k)!r} asked" for k in differing)
    raise ConfigError(f"store {path} holds a store of {source.name!r} built with other "
                      f"options ({changes}); {remedy}")


def _build_options(options: dict) -> BuildOptions:
    unknown = set(options) - _BUILD_OPTION_NAMES
    if unknown:
        raise ConfigError(f"unknown option(s): {', '.join(sorted(unknown))} "
                          f"(known: {', '.join(sorted(_BUILD_OPTION_NAMES))})")
    build = BuildOptions(**options)
    build.storage_dirs = list(build.storage_dirs)
    build.validate()
    return build


def _both_directions(src, dst, weights):
    """Each edge (u, v) and its reverse (v, u); a self-loop once."""
    reverse = src != dst
    both_src = np.concatenate([src, dst[reverse]])
    both_dst = np.concatenate([dst, src[reverse]])
    if weights is not None:
        weights = np.concatenate([weights, weights[reverse]])
    return both_src, both_dst, weights


class Graph:
    """A preprocessed graph, ready to run vertex programs on.

    Create one with :meth:`load`, :meth:`from_arrays`, :meth:`from_scipy`,
    :meth:`from_networkx`, :meth:`from_pandas` or :meth:`open`;
    :meth:`to_scipy` gives the adjacency matrix back.

    The first run that holds every page in host memory keeps the edges there
    for the graph's later runs, which then read no page, and a GPU run whose
    pages all fit the GPU's budget keeps them on the device for the next GPU
    run of this graph (of one graph at a time; ``config.KEEP_CSC_BETWEEN_RUNS``);
    the runs also share the vertices' user ids and 0..|V|-1, made at the first
    (:attr:`original_id_array`).
    :meth:`release_memory` frees them.

    Attributes
    ----------
    store : garaphpy.storage.store.Store
        The store on disk (shards, pages, CSR, degrees, id mapping).
    """

    def __init__(self, store: Store, temporary_dir: Path | None = None,
                 ids_from: "Graph | None" = None, labels: VertexLabels | None = None):
        self.store = store
        self._temporary_dir = temporary_dir
        self._ids_from = ids_from
        self._labels = labels
        self._undirected: Graph | None = None
        if temporary_dir is not None:
            self._finalizer = weakref.finalize(self, shutil.rmtree, temporary_dir, True)

    # -- construction ------------------------------------------------------
    @classmethod
    def load(cls, graph: str | os.PathLike, *, store: str | os.PathLike | None = None,
             format: str = "auto", generator_options: dict | None = None,
             rebuild: bool = False, progress: bool = True, weights: str = "file",
             max_weight: int | None = None, store_verify: str = "auto",
             **options) -> "Graph":
        """Load a graph file or generate a graph, preprocessing it if needed.

        Parameters
        ----------
        graph : str or os.PathLike
            A file (SNAP, .el, .wel, .mtx, .gr, .sg, .wsg, .bcsr, .bwcsr,
            optionally gzip/bz2/xz compressed) or a generator spec
            ``"rmat:SCALE[:EDGE_FACTOR]"`` / ``"grid:WIDTHxHEIGHT"``.
        store : str or os.PathLike, optional
            Store directory.  Default: a cache directory (see
            :func:`cache_directory`) keyed on the input and the options.
        format : str
            Input format, ``"auto"`` to detect it from the content.
        generator_options : dict, optional
            ``seed``, ``weighted``, ``max_weight``, ``edge_factor`` for
            generator specs.
        rebuild : bool
            Preprocess again even if an up-to-date store exists.
        progress : bool
            Log progress and the load summary on long work (logger
            ``garaphpy.preprocess`` at INFO: silent unless logging is
            configured, e.g. ``logging.basicConfig(level=logging.INFO)``).
        weights : {"file", "unit", "hash"}
            Edge weights: the input's own (``file``, the default), 1 on every
            edge (``unit``), or an integer in ``1 .. max_weight`` hashed from
            each edge's user ids (``hash``, the rule the benchmarks weight
            SNAP graphs with; :func:`garaphpy.generators.hashed_edge_weights`),
            so weighted programs (SSSP, SSWP, NN, ...) run on unweighted files.
        max_weight : int, optional
            ``weights="hash"`` only (default 255).
        store_verify : {"auto", "full", "quick", "sizes", "none"}
            How an up-to-date store is checked when it is reused: ``auto``
            checks every CRC-32 the first time and only the files' sizes
            while they are unchanged since (:mod:`garaphpy.storage.verify_levels`).
        **options
            Cleaning and layout options of
            :class:`garaphpy.storage.builder.BuildOptions` (``directed``,
            ``self_loops``, ``duplicates``, ``weight_dtype``, ``storage_dirs``,
            ``memory_budget``, ``gpu_memory``, ``n_streams``, ...).
        """
        build = _build_options(options)
        source = generators.parse_generator_spec(str(graph), generator_options) \
            if isinstance(graph, str) else None
        if source is None:
            if generator_options:
                raise ConfigError(f"generator_options given, but {str(graph)!r} is not a "
                                  "generator spec")
            source = open_source(graph, format=format)
        source = generators.with_edge_weights(source, weights, max_weight)
        if store is not None and not rebuild:
            refuse_store_of_another_input(Path(store), source)
        path = Path(store) if store is not None else default_store_path(source, build)
        return cls(build_store(source, path, build, progress=progress, force=rebuild,
                               verify=store_verify))

    @classmethod
    def from_arrays(cls, src, dst, weights=None, *, num_vertices: int | None = None,
                    store: str | os.PathLike | None = None, progress: bool = False,
                    **options) -> "Graph":
        """Preprocess edges given as numpy arrays.

        Parameters
        ----------
        src, dst : array_like of integers
            Edge endpoints.  Without ``num_vertices`` they are arbitrary ids,
            renumbered (results come back in these ids).
        weights : array_like, optional
            One value per edge, stored in its own precision (float64 stays
            float64, float32 stays float32; integers as int32 when they fit,
            else int64); pass ``weight_dtype="float32"`` to narrow.
        num_vertices : int, optional
            Vertices are 0..num_vertices-1 (isolated ones included).
        store : str or os.PathLike, optional
            Where to keep the store; by default a temporary directory removed
            with the Graph.
        **options
            As for :meth:`load`.
        """
        source = from_arrays(src, dst, weights, num_vertices=num_vertices)
        return cls._from_source(source, store, progress, options)

    @classmethod
    def from_scipy(cls, matrix, *, store: str | os.PathLike | None = None,
                   progress: bool = False, **options) -> "Graph":
        """Preprocess a square SciPy sparse matrix (row = source, column = destination).

        The matrix's data are the edge weights, stored in their own precision
        (float64 stays float64); ``weight_dtype="float32"`` narrows them,
        ``weight_dtype="none"`` drops them.  Other options as for :meth:`load`.
        """
        return cls._from_source(from_scipy(matrix), store, progress, options)

    @classmethod
    def from_networkx(cls, graph, weight: str | None = "weight", *,
                      store: str | os.PathLike | None = None, progress: bool = False,
                      **options) -> "Graph":
        """Preprocess a NetworkX graph (needs the ``networkx`` extra).

        Parameters
        ----------
        graph : networkx.Graph, DiGraph, MultiGraph or MultiDiGraph
            Non-negative integer nodes (Python or numpy ints) are the
            vertex ids, kept as they are; any other nodes (strings, tuples,
            a mix) are labels, mapped to codes in networkx's node order and
            back in every output (:attr:`labels`, :meth:`user_ids`,
            ``result.to_dict()``, ``result[node]``, paths), isolated nodes
            included.  A directed graph gives a directed Graph; an
            undirected one an undirected Graph (every edge in both
            directions), or with ``directed=True`` a directed Graph holding
            both directions of every edge.  With integer ids, isolated nodes
            are kept when the ids are 0..n-1; with other integer ids a node
            without edges is refused (the store declares isolated vertices
            by a count only).
        weight : str or None, default "weight"
            The edge attribute holding the weight.  When no edge has it (or
            ``weight=None``) the Graph is unweighted; when only some edges
            have it, an error names the first edge without it.
        store : str or os.PathLike, optional
            As for :meth:`from_arrays`.
        **options
            As for :meth:`load` (``directed`` overrides the graph's own).

        Raises
        ------
        GraphInputError
            An integer node outside 0..2**63-1, an edge without the
            weight attribute, an isolated node with ids other than 0..n-1,
            or an empty graph.
        """
        name = "<networkx>"
        nodes = list(graph.nodes)
        labels = None
        if any(isinstance(node, (bool, np.bool_)) or not isinstance(node, (int, np.integer))
               for node in nodes):
            labels = VertexLabels(nodes)      # codes 0..n-1 in networkx's node order
        for node in nodes if labels is None else ():
            if not 0 <= node < 2**63:
                raise GraphInputError(f"node {node} is out of range; vertex ids must be in "
                                      "0..2**63-1 (or not integers at all: labels)", name)
        edges = list(graph.edges(data=weight if weight is not None else False))
        ends = [[edge[k] for edge in edges] for k in (0, 1)]
        if labels is None:
            src, dst = (np.fromiter(end, dtype=np.int64, count=len(edges)) for end in ends)
        else:
            src, dst = labels.codes(ends[0]), labels.codes(ends[1])
        weights = None
        if weight is not None:
            missing = [edge for edge in edges if edge[2] is None]
            if len(missing) < len(edges) and missing:
                raise GraphInputError(f"edge ({missing[0][0]!r}, {missing[0][1]!r}) has no "
                                      f"{weight!r} attribute, and other edges have one", name)
            if edges and not missing:
                weights = np.asarray([edge[2] for edge in edges])
        num_vertices = len(nodes)
        if labels is None and not (nodes and min(nodes) == 0 and max(nodes) == num_vertices - 1):
            num_vertices = None
            isolated = next((node for node in nodes if graph.degree(node) == 0), None)
            if isolated is not None:
                raise GraphInputError(
                    f"node {isolated} has no edges and the node ids are not 0..n-1; "
                    "isolated nodes are kept only with ids 0..n-1: relabel with "
                    "networkx.convert_node_labels_to_integers(G) or remove them", name)
        options.setdefault("directed", bool(graph.is_directed()))
        if options["directed"] and not graph.is_directed():
            # an undirected edge is both directions, whatever order networkx stores it in
            src, dst, weights = _both_directions(src, dst, weights)
        source = from_arrays(src, dst, weights, num_vertices=num_vertices, name=name)
        built = cls._from_source(source, store, progress, options)
        built._labels = labels
        return built

    @classmethod
    def from_pandas(cls, frame, source: str = "source", destination: str | None = None,
                    weight: str | None = None, *, target: str | None = None,
                    num_vertices: int | None = None, store: str | os.PathLike | None = None,
                    progress: bool = False, **options) -> "Graph":
        """Preprocess an edge list held in a pandas DataFrame (cuGraph's convention).

        Parameters
        ----------
        frame : pandas.DataFrame
            One row per edge.
        source, destination : str
            The columns of the edges' endpoints.  ``destination`` defaults to
            the column ``"destination"``, else ``"target"`` (networkx's
            ``to_pandas_edgelist``); ``target=`` is accepted for it.  Integer
            columns are the user's ids, kept as in :meth:`from_arrays`;
            other ids (strings...) are labels, mapped to codes in order of
            first appearance and back in every output (see
            :meth:`from_networkx`).
        weight : str, optional
            The column of edge weights; None for an unweighted graph.
        num_vertices, store, **options
            As for :meth:`from_arrays` (``directed=False`` for an undirected
            edge list).

        Raises
        ------
        GraphInputError
            Naming the column: missing (the message lists the frame's
            columns), negative or non-integer numeric ids, bad weights, or
            an empty frame.
        """
        name = "<pandas>"
        columns = getattr(frame, "columns", None)
        if columns is None:
            raise GraphInputError(f"expected a pandas DataFrame, got {type(frame).__name__}",
                                  name)
        if target is not None and destination is not None and target != destination:
            raise ConfigError(f"destination={destination!r} and target={target!r}: give one")
        destination = destination or target
        if destination is None:
            destination = "target" if "destination" not in columns and "target" in columns \
                else "destination"
        for argument, column in (("source", source), ("destination", destination),
                                 ("weight", weight)):
            if column is not None and column not in columns:
                raise GraphInputError(f"{argument}={column!r}: no such column (columns: "
                                      f"{', '.join(map(str, columns))})", name)
        ends = [frame[column].to_numpy() for column in (source, destination)]
        labels = None
        if any(are_labels(end) for end in ends):
            labels, ends = VertexLabels.of_columns(*ends)
            num_vertices = len(labels) if num_vertices is None else num_vertices
        weights = frame[weight].to_numpy() if weight is not None else None
        edges = from_arrays(ends[0], ends[1], weights, num_vertices=num_vertices, name=name,
                            arguments=(f"column {source!r}", f"column {destination!r}",
                                       f"column {weight!r}"))
        built = cls._from_source(edges, store, progress, options)
        built._labels = labels
        return built

    @classmethod
    def _from_source(cls, source: EdgeSource, store, progress: bool, options: dict) -> "Graph":
        build = _build_options(options)
        if store is not None:
            return cls(build_store(source, Path(store), build, progress=progress))
        temporary = Path(tempfile.mkdtemp(prefix="garaphpy-"))
        try:
            built = build_store(source, temporary / "store", build, progress=progress)
        except BaseException:
            shutil.rmtree(temporary, ignore_errors=True)
            raise
        return cls(built, temporary_dir=temporary)

    @classmethod
    def open(cls, path: str | os.PathLike, verify: str = "auto") -> "Graph":
        """Open an existing store directory, checked as ``verify`` says
        (``"auto"``, ``"full"``, ``"quick"``, ``"sizes"``, ``"none"``:
        :mod:`garaphpy.storage.verify_levels`)."""
        return cls(Store.open(path, verify=verify))

    # -- properties ----------------------------------------------------------
    @property
    def num_vertices(self) -> int:
        """|V|."""
        return self.store.num_vertices

    @property
    def num_edges(self) -> int:
        """|E| after cleaning (an undirected edge counts in both directions)."""
        return self.store.num_edges

    @property
    def directed(self) -> bool:
        """Whether the graph is directed (False: every edge has its reverse)."""
        return self.store.directed

    @property
    def weighted(self) -> bool:
        """Whether edges carry values."""
        return self.store.weighted

    @property
    def summary(self) -> dict:
        """Load summary: edges read, self-loops, duplicates, isolated vertices, degrees."""
        return self.store.summary

    def original_ids(self, internal=None) -> np.ndarray:
        """User ids of internal vertex ids (all by default)."""
        if self._ids_from is not None:
            return self._ids_from.original_ids(internal)
        return self.store.original_ids(internal)

    @property
    def original_id_array(self) -> np.ndarray:
        """:meth:`original_ids` of every vertex, made once and shared by the
        runs (:attr:`Store.original_id_array <garaphpy.storage.store.Store.original_id_array>`
        of :attr:`ids_store`): read only."""
        return self.ids_store.original_id_array

    @property
    def ids_store(self) -> Store:
        """The store whose id table gives :meth:`original_ids` (this graph's own,
        or, for the undirected copy of a directed graph, the original's)."""
        return self._ids_from.ids_store if self._ids_from is not None else self.store

    def internal_ids(self, original) -> np.ndarray:
        """Internal ids of user vertex ids, labels included (KeyError for unknown ids)."""
        if self._ids_from is not None:
            return self._ids_from.internal_ids(original)
        if self._labels is not None:
            original = self._labels.codes(list(np.atleast_1d(np.asarray(original, dtype=object))))
        return self.store.internal_ids(original)

    @property
    def labels(self) -> VertexLabels | None:
        """The user's non-integer vertex ids (from_networkx, from_pandas), or None."""
        return self._ids_from.labels if self._ids_from is not None else self._labels

    def user_ids(self, internal=None) -> np.ndarray:
        """The user's ids of internal ids (all by default): :meth:`original_ids`,
        or the labels for a graph made from non-integer ids (an object array)."""
        ids = self.original_ids(internal)
        labels = self.labels
        return ids if labels is None else labels.of_codes(ids)

    def release_memory(self) -> bool:
        """Free the edges a run left in host memory and on the GPU for this
        graph's later runs (``config.KEEP_CSC_BETWEEN_RUNS``; in memory, the
        CSC and the out-edges' values placed from it), the vertex
        arrays the runs share (:attr:`original_id_array`), the per-vertex
        buffers runs give back for the next (``Store.vertex_buffers``), and
        its undirected twin's (:meth:`as_undirected`); the next such run reads
        the store again.  Returns whether anything was held."""
        held = self.store.release_device_edges()
        held = self.store.release_csc() or held
        held = self.store.release_vertex_arrays() or held
        if self._undirected is not None and self._undirected is not self:
            held = self._undirected.release_memory() or held
        return held

    def as_undirected(self, progress: bool = False) -> "Graph":
        """This graph with every edge's reverse added (for programs that need it).

        The symmetrized store is built once, next to the cache, and reused;
        vertex ids are those of this graph.
        """
        if not self.directed:
            return self
        if self._undirected is None:
            in_offsets, sources, weights = self.store.csc()
            destinations = np.repeat(np.arange(self.num_vertices, dtype=sources.dtype),
                                     np.diff(in_offsets))
            source = from_arrays(sources, destinations, weights,
                                 num_vertices=self.num_vertices,
                                 name=f"{self.store.manifest['input']['name']} (undirected)")
            layout = self.store.manifest["options"]
            options = {name: layout[name] for name in (
                "self_loops", "weight_dtype", "n_streams", "shared_memory_bytes", "slot_bytes",
                "max_shard_edges", "max_shard_vertices", "max_replication", "min_shards",
                "fixed_replication", "max_page_bytes", "block_bytes", "gpu_memory",
                "compress")
                if name in layout}
            options["storage_dirs"] = [d for d in self.store.manifest.get("storage_dirs", [])
                                       if d is not None]
            build = _build_options({**options, "directed": False, "duplicates": "drop"})
            if self._temporary_dir is not None:
                path = self._temporary_dir / "undirected"
            else:
                path = default_store_path(source, build)
            self._undirected = Graph(build_store(source, path, build, progress=progress),
                                     ids_from=self)
        return self._undirected

    def to_scipy(self):
        """The adjacency matrix as a SciPy CSR array (needs scipy).

        Entry (i, j) is the edge i -> j (row = source, column =
        destination), as :meth:`from_scipy` takes it, with the edge's weight;
        an unweighted graph gives a boolean pattern.  Rows and columns are
        *internal* ids: ``self.original_ids()[i]`` is the user's id of row
        and column i; they are the same when the graph came from
        :meth:`from_scipy` or declared its ids 0..n-1 (``num_vertices``).
        An undirected graph gives a symmetric matrix.
        """
        import scipy.sparse

        in_offsets, sources, weights = self.store.csc()
        data = weights if weights is not None else np.ones(sources.shape[0], dtype=np.bool_)
        shape = (self.num_vertices, self.num_vertices)
        by_destination = scipy.sparse.csc_array(
            (data, np.asarray(sources, dtype=np.int64), np.asarray(in_offsets, dtype=np.int64)),
            shape=shape)
        return by_destination.tocsr()

    def describe(self) -> str:
        """A short human-readable summary."""
        return self.store.describe()

    def __repr__(self) -> str:
        return f"Graph({self.store!r})"

