"""What a run returns: the values and one record per iteration.

Every decision the engine takes (:mod:`garaphpy.scheduler.decisions`) is
recorded with its inputs in :attr:`IterationRecord.decisions`, so that a run
can be studied afterwards; records are written as JSON lines by
:func:`garaphpy.output.write_iterations`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


@dataclass
class IterationRecord:
    """Statistics of one iteration.

    Attributes
    ----------
    iteration : int
        From 0.
    mode : str
        Which processors ran it: ``"cpu"``, ``"gpu"``, or ``"hybrid"`` (the
        dispatcher let both take pages; ``cpu_pages``/``gpu_pages`` say how
        many each took).
    direction : str
        ``"pull"`` or ``"notify-pull"``; ``"push"`` for a sparse iteration
        of the GPU's device loop that pushed over the frontier's out-edges
        (a program declaring ``apply_keeps_best``).
    forced : bool
        Whether the direction was forced rather than chosen.
    active_fraction : float
        f = sum of active out-degrees / |E| at the start of the iteration.
    rho : float
        The storage factor the choice used.
    active_vertices : int
        Vertices active at the start of the iteration.
    updated_vertices : int
        Vertices applied (all, in pull; the notified ones, in notify-pull).
    edges_processed : int
        In-edges gathered.
    activated : int
        Vertices active after the iteration.
    l1_change : float
        sum over updated vertices of |new - old|.
    pages : int
        Pages processed.
    gather_precomputed : bool
        Whether the pull computed the source-side gather once per vertex
        first (:func:`garaphpy.scheduler.decisions.precompute_source_gathers`).
    gpu_pages : int
        Pages the GPU processed.
    bytes_to_device, bytes_to_host : int
        Bytes copied host to device (pages) and back (updated vertex ranges).
    bytes_read : int
        Page bytes read from the storage directories during the iteration
        (runs whose host budget holds only some pages).  A cached page is
        read once, when first used, and counts in that iteration only; the
        pages read while the run sets up (in-degrees of weighted programs)
        count in no iteration.  Read-ahead dropped unused counts too.
    bytes_dropped : int
        Of ``bytes_read``, the bytes read ahead and dropped unused (a read-ahead
        for a walk that did not come, pages beyond where a walk ended).
    copy_seconds, kernel_seconds : float
        Time the GPU spent copying pages and running pull kernels (the union
        of the pages' CUDA-event windows); ``copy_seconds + kernel_seconds``
        above the iteration's GPU time is copy/compute overlap.
    alpha, ratio : float or None
        Hybrid runs: the cost ratio alpha = min(2 f rho, 1) * ratio and the
        estimate of T_pull / T_GPU it used (None before one is known).
    cpu_pages, cpu_edges, gpu_edges : int
        Pages and edges each processor pulled (``gpu_pages`` above).
    cpu_busy_seconds, gpu_busy_seconds : float
        Time each processor worked on its pages (the GPU's: the union of its
        copy and kernel windows).
    cpu_idle_seconds, gpu_idle_seconds : float
        Time each processor waited while the other still worked (hybrid).
    dispatch_seconds : float
        The dispatcher's own time: deciding, bringing a copy of the vertex
        data up to date, combining the two processors' results (no page work).
    seconds : float
        Wall time of the iteration, numba's compilation excluded.
    compile_seconds : float
        numba compiling (or loading from its cache) kernels of a path the
        run took first in this iteration, left out of ``seconds``
        (:mod:`garaphpy.compile_clock`).
    workers : tuple of str
        Partitioned runs over a Dask cluster (:mod:`garaphpy.distributed`):
        the address of the worker of each partition, in partition order
        (empty in a run on one machine).
    exchanged_bytes : int
        Partitioned runs: the bytes of the (index, value) pairs the workers
        sent one another after the iteration (each changed vertex to every
        worker whose pages read it).
    decisions : dict
        Every choice made for the iteration, by name (``"direction"``,
        ``"notify"``, ``"precompute"``, ``"fused_launch"``, ``"mode"``,
        ``"pages"``), each a dict of its inputs and its ``"choice"``
        (:func:`garaphpy.scheduler.decisions.decide`).
    """

    iteration: int
    mode: str
    direction: str
    forced: bool
    active_fraction: float
    rho: float
    active_vertices: int
    updated_vertices: int = 0
    edges_processed: int = 0
    activated: int = 0
    l1_change: float = 0.0
    pages: int = 0
    gather_precomputed: bool = False
    gpu_pages: int = 0
    bytes_to_device: int = 0
    bytes_to_host: int = 0
    bytes_read: int = 0
    bytes_dropped: int = 0
    copy_seconds: float = 0.0
    kernel_seconds: float = 0.0
    alpha: float | None = None
    ratio: float | None = None
    cpu_pages: int = 0
    cpu_edges: int = 0
    gpu_edges: int = 0
    cpu_busy_seconds: float = 0.0
    gpu_busy_seconds: float = 0.0
    cpu_idle_seconds: float = 0.0
    gpu_idle_seconds: float = 0.0
    dispatch_seconds: float = 0.0
    seconds: float = 0.0
    compile_seconds: float = 0.0
    workers: tuple = ()
    exchanged_bytes: int = 0
    decisions: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        """JSON-able dict (the decisions' sets as sorted lists, numpy scalars as
        Python's)."""
        row = asdict(self)
        row["workers"] = list(row["workers"])     # as JSON gives it back
        row["decisions"] = {name: {key: json_value(value) for key, value in entry.items()}
                            for name, entry in row["decisions"].items()}
        return row


def batch_records(common: dict, names: tuple, rows) -> list:
    """IterationRecords of a batch of iterations, made without a call to
    ``__init__`` each (thousands of them per second of a device loop).

    Parameters
    ----------
    common : dict
        Fields every record of the batch shares (besides the defaults).
    names : tuple of str
        The fields ``rows`` give, in order.
    rows : iterable of sequences
        One per record (a ``decisions`` field among them must be a new dict
        each time).
    """
    base = {f.name: f.default for f in dataclasses.fields(IterationRecord)
            if f.default is not dataclasses.MISSING}
    base.update(common)
    make = object.__new__
    records = []
    for row in rows:
        record = make(IterationRecord)
        record.__dict__.update(base)
        record.__dict__.update(zip(names, row))
        records.append(record)
    return records


def json_value(value):
    """``value`` as JSON takes it, one level into lists and dicts."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return {key: json_value(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_value(item) for item in value]
    return value


def _optional(module: str, user: str):
    """Import an optional dependency, or say which extra gives it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError:
        raise ModuleNotFoundError(f"{user} needs {module}: pip install "
                                  f"\"garaphpy[{module}]\"", name=module) from None


@dataclass
class Result:
    """The outcome of :func:`garaphpy.run`.

    Attributes
    ----------
    program : VertexProgram
        The program instance that ran.
    graph : garaphpy.Graph
    values : numpy.ndarray
        Final value of every vertex, indexed by internal id, after the
        program's ``finalize`` (use :meth:`original_ids` for the user's ids).
    sources : numpy.ndarray of int64
        Internal ids of the run's sources.
    mode, execution : str
        ``cpu``/``gpu``/``hybrid``; ``sync``/``async``.
    converged : bool
        No active vertex left, the L1 change fell below the tolerance, or a
        fixed-iteration program ran its iterations.
    stop_reason : str
        ``"no active vertex"``, ``"tolerance"``, ``"iteration limit"``.
    num_iterations : int
    iterations : list of IterationRecord
    seconds : float
        Wall time of the iterations (compilation and loading excluded).
    setup_seconds : float
        Checking the options, loading the graph into memory and making the
        engines, compilation excluded.
    compile_seconds : float
        numba compiling the run's kernels, or loading them from its disk
        cache: before the first iteration, and for a path first taken later
        (those iterations' ``compile_seconds``); in neither ``seconds`` nor
        ``setup_seconds``.
    tolerance : float or None
        The L1 tolerance the run stopped on (verifiers bound their checks by it).
    max_iterations : int
        The iteration limit of the run.
    resumed_from : str or None
        The checkpoint the run resumed from (None: it started afresh); the
        records of the iterations before it are in :attr:`iterations` too.
    plan : garaphpy.scheduler.plan.RunPlan or None
        The run's constant choices, made once before its first iteration
        (``plan.describe()``, ``plan.as_dict()``); the records hold each
        iteration's own.
    """

    program: Any
    graph: Any
    values: np.ndarray
    sources: np.ndarray
    mode: str
    execution: str
    converged: bool
    stop_reason: str
    num_iterations: int
    iterations: list = field(default_factory=list)
    seconds: float = 0.0
    setup_seconds: float = 0.0
    compile_seconds: float = 0.0
    tolerance: float | None = None
    max_iterations: int = 0
    resumed_from: str | None = None
    plan: object = None

    def original_ids(self) -> np.ndarray:
        """The user's id of every vertex, aligned with :attr:`values` (an object
        array of labels for a graph made from non-integer ids)."""
        user_ids = getattr(self.graph, "user_ids", None)
        return user_ids() if user_ids is not None else self.graph.original_ids()

    def user_values(self) -> np.ndarray:
        """:attr:`values` as outputs show them: a program whose values are vertex
        ids (CC's labels, ``values_are_vertices``) on a graph made from
        non-integer ids gives the user's labels; otherwise the values."""
        labels = getattr(self.graph, "labels", None)
        if labels is not None and getattr(self.program, "values_are_vertices", False):
            return labels.of_codes(self.values)
        return np.asarray(self.values)

    def __getitem__(self, vertex) -> object:
        """``result[vertex]``: the value of the vertex with the user's id ``vertex``,
        as a Python scalar (KeyError for an unknown id)."""
        value = self.user_values()[int(self.graph.internal_ids([vertex])[0])]
        return value.item() if isinstance(value, np.generic) else value

    def predecessors(self) -> np.ndarray:
        """Each vertex's predecessor on a path from a source, in the user's ids,
        aligned with :meth:`original_ids` (SSSP, BFS, SSWP).

        Computed after the run from the values by one pass over the in-edges
        (the program's ``predecessors``): a tight in-edge one level closer to
        a source, the least id on ties.  -1 (None for non-integer ids) marks
        the sources and the vertices no source reaches, as SciPy and cuGraph.

        Raises
        ------
        TypeError
            The program has no paths (PageRank, CC...).
        """
        internal = self._internal_predecessors()
        ids = self.original_ids()
        out = np.full(internal.shape[0], -1 if ids.dtype.kind in "iu" else None,
                      dtype=ids.dtype if ids.dtype.kind in "iu" else object)
        has = internal >= 0
        out[has] = ids[internal[has]]
        return out

    #: BFS's name for them (GAPBS, Graph500).
    parents = predecessors

    def _internal_predecessors(self) -> np.ndarray:
        finder = getattr(self.program, "predecessors", None)
        if finder is None:
            raise TypeError(f"{type(self.program).__name__} has no paths: predecessors and "
                            "path_to are for path programs (SSSP, BFS, SSWP)")
        cached = self.__dict__.get("_predecessors")
        if cached is None:
            cached = self.__dict__["_predecessors"] = finder(self.graph, self)
        return cached

    def path_to(self, vertex) -> list:
        """The vertices (user's ids) of a path from a source to ``vertex``, source
        first, along :meth:`predecessors`; ``[]`` when no source reaches it."""
        internal = self._internal_predecessors()
        v = int(self.graph.internal_ids([vertex])[0])
        sources = set(np.asarray(self.sources).tolist())
        path = [v]
        while internal[path[-1]] >= 0:
            path.append(int(internal[path[-1]]))
        if path[-1] not in sources:
            return []
        return self.original_ids()[np.array(path[::-1], dtype=np.int64)].tolist()

    @property
    def value_name(self) -> str:
        """What a value is: the program's ``value_name`` (``"value"`` for user programs)."""
        return self.program.value_name

    def to_dict(self) -> dict:
        """``{user id: value}`` of every vertex, as Python scalars.

        Ready for NetworkX: ``nx.set_node_attributes(G, result.to_dict(),
        result.value_name)``.
        """
        return dict(zip(self.original_ids().tolist(), self.user_values().tolist()))

    def to_pandas(self):
        """A pandas DataFrame with columns ``vertex`` (the user's ids) and the
        program's :attr:`value_name` (cuGraph's convention: ``pagerank``,
        ``distance``, ``depth``, ``component``...); needs the ``pandas`` extra."""
        pandas = _optional("pandas", "Result.to_pandas")
        return pandas.DataFrame({"vertex": self.original_ids(),
                                 self.value_name: self.user_values()})

    def to_series(self):
        """A pandas Series of the values indexed by the user's ids (index name
        ``vertex``, series name :attr:`value_name`); needs the ``pandas`` extra."""
        pandas = _optional("pandas", "Result.to_series")
        return pandas.Series(self.user_values(), name=self.value_name,
                             index=pandas.Index(self.original_ids(), name="vertex"))

    def to_networkx(self, graph=None, *, copy: bool = True, name: str | None = None):
        """A NetworkX graph whose nodes carry the values as attribute ``name``
        (default :attr:`value_name`); needs the ``networkx`` extra.

        Parameters
        ----------
        graph : networkx.Graph, optional
            The user's graph (the one given to ``Graph.from_networkx``): its
            nodes get the attribute, on a copy unless ``copy=False`` (then on
            ``graph`` itself, which is returned).  None: a new DiGraph (Graph
            if undirected) of this result's graph, with the edges' ``weight``.
        """
        networkx = _optional("networkx", "Result.to_networkx")
        name = name or self.value_name
        values = self.to_dict()
        if graph is None:
            matrix = self.graph.to_scipy().tocoo()
            ids = self.original_ids()
            graph = networkx.DiGraph() if self.graph.directed else networkx.Graph()
            graph.add_nodes_from(ids.tolist())
            if matrix.dtype == np.bool_:
                graph.add_edges_from(zip(ids[matrix.row].tolist(), ids[matrix.col].tolist()))
            else:
                graph.add_weighted_edges_from(zip(ids[matrix.row].tolist(),
                                                  ids[matrix.col].tolist(),
                                                  matrix.data.tolist()))
        elif copy:
            graph = graph.copy()
        missing = next((node for node in graph.nodes if node not in values), None)
        if missing is not None:
            raise KeyError(f"node {missing!r} of the networkx graph is not a vertex of the "
                           "result's graph")
        networkx.set_node_attributes(graph, values, name)
        return graph

    def summary(self) -> str:
        """A few lines for people."""
        name = type(self.program).__name__
        verdict = "converged" if self.converged else "did NOT converge"
        directions = {}
        for record in self.iterations:
            directions[record.direction] = directions.get(record.direction, 0) + 1
        split = ", ".join(f"{count} {direction}" for direction, count in directions.items())
        if self.mode == "hybrid":
            hybrid = [r for r in self.iterations if r.mode == "hybrid"]
            gpu_alone = sum(r.mode == "gpu" for r in self.iterations)
            cpu_alone = len(self.iterations) - len(hybrid) - gpu_alone
            split = (f"{cpu_alone} CPU-only, "
                     + (f"{gpu_alone} GPU-only (the per-run choice), " if gpu_alone else "")
                     + f"{len(hybrid)} hybrid "
                     f"(pages: GPU {sum(r.gpu_pages for r in hybrid)}, "
                     f"CPU {sum(r.cpu_pages for r in hybrid)})") + (f"; {split}" if split else "")
        set_up = None if self.plan is None else self.plan.gpu_set_up
        if set_up is not None and not set_up["choice"]:
            split = (f"the CPU alone, the run expected to end before the GPU's "
                     f"({set_up['cpu_seconds']:.2g} against {set_up['gpu_seconds']:.2g} s)"
                     + (f"; {split}" if split else ""))
        elif set_up is not None and set_up.get("gpu_alone"):
            why = ("every page in its budget" if set_up["page_bytes"] + set_up["vertex_bytes"]
                   <= set_up["gpu_budget"] else "sharing would not pay its set-up")
            split = f"the GPU alone, {why}" + (f"; {split}" if split else "")
        per_iteration = self.seconds / self.num_iterations * 1e3 if self.num_iterations else 0.0
        return (f"{name} ({self.mode}, {self.execution}): {verdict} after "
                f"{self.num_iterations} iterations ({self.stop_reason}); "
                f"{self.seconds:.3f} s, {per_iteration:.2f} ms/iteration"
                + (f" (compiling {self.compile_seconds:.2f} s apart)"
                   if self.compile_seconds >= 0.005 else "")
                + (f"; {split}" if split else "")
                + (f"; resumed from {self.resumed_from}" if self.resumed_from else ""))
