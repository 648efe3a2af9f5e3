"""Run and build options, each declared once with its type, default, range and doc.

A run (Garaph sections 2.2-2.3, 4, 5: processors, execution, the CPU's
direction, stopping rules, host and GPU budgets, checkpoints) is configured
by :class:`RunOptions`; preprocessing (sections 2.1-2.2: cleaning, shard and
page sizes, storage directories) by :class:`BuildOptions`.  Every field of
both carries an :class:`Option` in its metadata, and everything else reads
it from there:

- the configuration file's keys (:data:`garaphpy.configfile.SCHEMA`) are
  made from the options that name a key (``config="run.mode"``): type,
  choices, range, default and help;
- :func:`garaphpy.run`'s keywords are the fields of :class:`RunOptions`
  with their defaults (a test holds the two together), and the command line
  builds a :class:`RunOptions` from the validated configuration
  (:func:`config_values`);
- :meth:`garaphpy.Graph.load` and the other constructors accept the fields
  of :class:`BuildOptions` as keywords, and the command line passes those
  the configuration sets;
- a checkpoint's run identity (:mod:`garaphpy.scheduler.checkpoint`) is the
  options marked ``identity``.

This module sits in the bottom layer (it imports no numba or numpy) so that
the store builder, the scheduler and the top-level modules can all read it,
and reading a configuration stays quick.
"""

from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass
from typing import Any, Callable

from . import config
from .errors import ConfigError

#: The largest integer the engine holds (int64); every integer key is bounded by it.
INT64_MAX = 2**63 - 1
#: Iteration counts are bounded like the checkpoint counters (int32).
MAX_ITERATIONS = 2**31 - 1

#: Which processors run the iterations.
MODES = ("cpu", "gpu", "hybrid")
#: Synchronous (values committed at the end of an iteration) or asynchronous.
EXECUTIONS = ("sync", "async")
#: The direction: Garaph's switch (the GPU's sparse-pass rule), or one forced for study.
DIRECTIONS = ("auto", "pull", "notify-pull")

#: What preprocessing does with edges (v, v).
SELF_LOOP_POLICIES = ("keep", "drop")
#: What preprocessing does with repeated (u, v) edges.
DUPLICATE_POLICIES = ("keep", "drop", "min", "max", "sum")
#: Stored edge-value types.
WEIGHT_DTYPES = ("auto", "int32", "int64", "float32", "float64", "none")
#: How Equation 2 measures a shard's contention (garaphpy.storage.layout).
REPLICATION_RULES = ("mean", "edge-weighted")

#: The kinds a configuration key can have (:class:`garaphpy.configfile.Key`);
#: options of other kinds (``callable``, ``object``, ...) are library-only.
CONFIG_KINDS = ("str", "bool", "int", "float|none", "bool|none", "bool|auto", "size", "ids",
                "list[str]", "table")


@dataclass(frozen=True)
class Option:
    """What one option is: the metadata of a :class:`RunOptions` or
    :class:`BuildOptions` field.

    Attributes
    ----------
    kind : str
        Its type, one of :data:`CONFIG_KINDS` (``size``: bytes, also written
        ``"4GiB"`` in a configuration; ``ids``: a vertex id or a list of
        them), or a library-only kind such as ``callable``.
    doc : str
        One line saying what it does and what its default means.
    choices : tuple, optional
        The values allowed.
    minimum, maximum : number, optional
        The range a configuration accepts.
    config : str, optional
        The configuration key that sets it, ``"section.key"``; None: the
        library alone sets it.
    owns_key : bool
        The key is made from this declaration.  False for an option that
        reads a key another declaration owns (a run's ``gpu_memory`` and
        ``n_streams`` read the store's), checked to agree with it.
    identity : bool
        Part of a checkpoint's run identity: a checkpoint written with
        another value is not resumed.
    content : bool
        Build options: changes the store's content, so it is part of the
        store's key (where the store goes and the memory it is built in do
        not).
    keyed_when_set : bool
        Build options added after stores existed: part of the key only when
        not at its default (nor one of ``unkeyed_values``), so that those
        stores keep their key.
    unkeyed_values : tuple
        Values besides the default left out of the key of such an option: a
        former default, whose stores keep their key (``compress``: False,
        the default before ``"auto"``).
    """

    kind: str
    doc: str
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    config: str | None = None
    owns_key: bool = True
    identity: bool = False
    content: bool = True
    keyed_when_set: bool = False
    unkeyed_values: tuple = ()

    @property
    def section(self) -> str | None:
        """The configuration section of :attr:`config`, or None."""
        return None if self.config is None else self.config.rpartition(".")[0]

    @property
    def key(self) -> str | None:
        """The key inside :attr:`section`, or None."""
        return None if self.config is None else self.config.rpartition(".")[2]


def option(default: Any = None, kind: str = "str", doc: str = "", *,
           default_factory: Callable[[], Any] | None = None, **metadata) -> Any:
    """A dataclass field declared with its :class:`Option` (``metadata["option"]``)."""
    declared = Option(kind, doc, **metadata)
    if default_factory is not None:
        return dataclasses.field(default_factory=default_factory,
                                 metadata={"option": declared})
    return dataclasses.field(default=default, metadata={"option": declared})


def declared_options(cls) -> dict[str, tuple[Any, Option]]:
    """``{field name: (default, Option)}`` of an options dataclass, in field order."""
    declared = {}
    for field in dataclasses.fields(cls):
        default = field.default_factory() if field.default_factory is not dataclasses.MISSING \
            else field.default
        declared[field.name] = (default, field.metadata["option"])
    return declared


def choices(cls, name: str) -> tuple:
    """The values option ``name`` of ``cls`` allows."""
    return declared_options(cls)[name][1].choices


def config_values(cls, settings: dict) -> dict[str, Any]:
    """The values of ``cls``'s options that a validated configuration sets,
    ``{field name: value}`` (:func:`garaphpy.configfile.validate_config`)."""
    return {name: settings[spec.section][spec.key]
            for name, (_default, spec) in declared_options(cls).items()
            if spec.config is not None}


@dataclass(frozen=True)
class RunOptions:
    """How one run goes: every keyword of :func:`garaphpy.run`, whose
    docstring says what each does in full.

    Each field's :class:`Option` (``declared_options(RunOptions)``) gives its
    type, range, configuration key and whether it is part of the run's
    checkpoint identity.
    """

    mode: str = option("hybrid", "str", "processors: hybrid (the dispatcher's choice), cpu or "
                       "gpu", choices=MODES, config="run.mode")
    execution: str | None = option(None, "str", "sync or async (default: the program's)",
                                   choices=EXECUTIONS, config="run.execution", identity=True)
    max_iterations: int | None = option(None, "int", "iteration limit (default: the "
                                        "program's)", minimum=1, maximum=MAX_ITERATIONS,
                                        config="run.max_iterations", identity=True)
    tolerance: float | None = option(None, "float|none", "stop once an iteration's L1 "
                                     "change is below it (default: the program's)",
                                     minimum=0.0, config="run.tolerance", identity=True)
    sources: Any = option(None, "ids", "source vertices in the user's ids (programs that "
                          "use them)", config="run.sources", identity=True)
    threads: int | None = option(None, "int", "CPU threads (default: by the graph's size, "
                                 "at most every core)", minimum=1, maximum=4096,
                                 config="run.threads")
    direction: str = option("auto", "str", "the direction: auto (Garaph's switch on the "
                            "CPU, the sparse-pass rule on the GPU), or pull or notify-pull "
                            "forced", choices=DIRECTIONS,
                            config="run.direction", identity=True)
    host_memory: int | None = option(None, "size", "host memory the run may use; pages "
                                     "beyond it are read from the storage directories every "
                                     "iteration (default: half the available memory)",
                                     config="run.host_memory")
    readahead_bytes: int | None = option(None, "size", "page buffers each processor reads "
                                         "ahead when pages come from storage (default: "
                                         "sized by the disk's measured speed)",
                                         config="run.readahead_bytes")
    read_ratio: float | None = option(None, "float|none", "k, sequential over random read "
                                      "speed of the storage directories (default: measured "
                                      "once and cached)", minimum=1.0, config="run.read_ratio")
    checkpoint_pages: int | None = option(None, "int", "asynchronous runs: also checkpoint "
                                          "after every this many pages; setting it turns "
                                          "checkpoints on", minimum=1, maximum=2**31 - 1,
                                          config="run.checkpoint_pages")
    checkpoint_every: int | None = option(None, "int", "iterations between checkpoints (0: "
                                          "only at Ctrl-C); setting it turns checkpoints "
                                          "on", minimum=0, maximum=2**31 - 1,
                                          config="run.checkpoint_every")
    checkpoint_dir: Any = option(None, "str", "where checkpoints go; setting it turns "
                                 "checkpoints on; default beside the values "
                                 "(results/<graph>.<program>.checkpoints)",
                                 config="run.checkpoint_dir")
    resume: bool = option(False, "bool", "continue from the newest valid checkpoint "
                          "(the command line's --resume)")
    keep_checkpoints: bool = option(False, "bool", "leave the checkpoints when the run "
                                    "completes, for a caller that removes them once it has "
                                    "stored the result")
    stop_signals: tuple = option((signal.SIGINT,), "signals", "with checkpoints on, the "
                                 "signals that stop the run at the end of the iteration "
                                 "after writing a checkpoint")
    gpu_memory: int | None = option(None, "size", "GPU memory the run may use, in bytes "
                                    "(default: most of the free memory)",
                                    config="store.gpu_memory", owns_key=False)
    n_streams: int | None = option(None, "int", "CUDA streams pages are pipelined on "
                                   "(default config.N_STREAMS)", minimum=1, maximum=64,
                                   config="store.n_streams", owns_key=False)
    raise_on_nonconvergence: bool = option(False, "bool", "raise NotConvergedError instead "
                                           "of warning")
    on_iteration: Callable | None = option(None, "callable", "called with each "
                                           "IterationRecord as it completes")
    policy: Any = option(None, "object", "the hybrid dispatcher's HybridPolicy (default: a "
                         "new one)")
    client: Any = option(None, "object", "a dask.distributed.Client: run partitioned over "
                         "its cluster's workers")
    scheduler: str | None = option(None, "str", "the address of a Dask scheduler "
                                   "(tcp://host:8786): run partitioned over its workers",
                                   config="run.scheduler")
    partitions: int | None = option(None, "int", "partitioned runs: partitions of the "
                                    "graph (default: one per worker)", minimum=1,
                                    maximum=2**31 - 1, config="run.partitions")

    @classmethod
    def from_arguments(cls, arguments: dict) -> "RunOptions":
        """The options among ``arguments`` (e.g. a function's ``locals()``), by field name."""
        return cls(**{field.name: arguments[field.name] for field in dataclasses.fields(cls)
                      if field.name in arguments})

    def keywords(self) -> dict[str, Any]:
        """``{field name: value}``, the keywords of :func:`garaphpy.run` (no copies)."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def identity(self) -> dict[str, Any]:
        """The options marked ``identity`` as JSON-able values, for a checkpoint.

        Called on the resolved options (the program's defaults filled in,
        the sources as internal ids, see :func:`garaphpy.run`).
        """
        encode = {"int": int, "float|none": float,
                  "ids": lambda ids: [int(v) for v in ids]}
        values = {}
        for name, (_default, spec) in declared_options(type(self)).items():
            if spec.identity:
                value = getattr(self, name)
                values[name] = None if value is None else encode.get(spec.kind, str)(value)
        return values


def identity_options() -> tuple[str, ...]:
    """The names of the :class:`RunOptions` in a checkpoint's run identity."""
    return tuple(name for name, (_default, spec) in declared_options(RunOptions).items()
                 if spec.identity)


@dataclass
class BuildOptions:
    """How an input is cleaned and laid out.

    Each field's :class:`Option` (its metadata) declares its
    type, choices, range and configuration key once; the configuration
    schema and :meth:`garaphpy.Graph.load`'s options are made from them.

    Attributes
    ----------
    directed : bool or None
        False symmetrizes (adds the reverse of every edge).  None (default)
        follows the input: undirected when the input declares it (symmetric
        Matrix Market, undirected GAP graph), directed otherwise.
    self_loops : {"keep", "drop"}
        What to do with edges (v, v).  Default ``"keep"``.
    duplicates : {"keep", "drop", "min", "max", "sum"}
        Repeated (u, v) edges: keep all, keep the first, or merge them into
        one edge whose weight is the min, max or sum.  Default ``"drop"``.
    weight_dtype : {"auto", "int32", "int64", "float32", "float64", "none"}
        Stored edge-value type.  ``auto``: int32 for integer weights (int64
        when they do not fit); for real weights, float64 from text files
        and the arrays' own precision from numpy arrays and SciPy matrices
        (float64 stays float64, float32 stays float32).  ``float32`` narrows
        and warns (:class:`~garaphpy.storage.edges.WeightsRoundedWarning`)
        with how many weights it rounded.  ``none`` drops weights.
        An explicit type that cannot hold a weight (3000000000 in int32, 2.5
        in an integer type, 1e300 in float32) is a GraphInputError naming the
        file and line (or byte offset) of the first such weight; nothing is
        wrapped or truncated.
    storage_dirs : list of str
        Extra directories (one per SSD) across which page data blocks are
        spread by a hash, besides the store directory itself.
    memory_budget : int or None
        Host memory preprocessing may use, in bytes (default: a fraction of
        the available memory).  Larger inputs are built out of core.
    gpu_memory : int or None
        GPU memory pages are sized for, in bytes (default: free memory of GPU
        0 if cupy sees one, else ``config.DEFAULT_GPU_MEMORY_BYTES``).
    n_streams : int
        Pages in flight on the GPU at once.
    shared_memory_bytes, slot_bytes, max_shard_edges, max_shard_vertices, max_replication
        Shard sizing (layout.cut_shards).
    min_shards : int
        Graphs with fewer than ``min_shards * max_shard_edges`` edges get
        shards of at most ``max(|E| / min_shards, config.MIN_SHARD_EDGES)``
        edges, so that a small graph still gives the GPU enough blocks (one
        per shard) to fill its multiprocessors.
    fixed_replication : int or None
        None (default): each shard's replication factor R_i by Garaph's
        Equation 2.  A power of two R <= max_replication: every shard gets
        exactly R (and at most slots / R vertices), for studying Equation 2
        against fixed factors (Garaph Figure 9; bench/gpu.py).
    replication_rule : {"mean", "edge-weighted"}
        How Equation 2 measures a shard's contention (layout.cut_shards):
        its mean in-degree as published (default), or its edge-weighted mean
        in-degree; for study.
    replication_edges_per_thread : int
        Divides the contention (edges one pull-kernel thread combines before
        its atomic); default 1, the published Equation 2; for study.
    max_page_bytes, block_bytes : int
        Page and data block size limits.
    compress : bool or "auto"
        Store page images compressed (:mod:`garaphpy.storage.page_codec`:
        source ids as bit-packed gaps, IdxOff recomputed from the degrees),
        about 2 bytes an edge instead of 6; pages are decoded into plain
        images as they are read, so every engine runs unchanged, and a GPU
        run that streams pages ships them compressed and decodes them on the
        device (:mod:`garaphpy.kernels.gpu_codec`).  ``"auto"`` (default):
        the build measures a sample of its pages and compresses when that
        pays on this host (:func:`garaphpy.storage.decisions.compress_pages`;
        the choice and its measurement are in the manifest's
        ``layout.compress``); True forces it, False switches it off.
    """

    directed: bool | None = option(None, "bool|none", "false symmetrizes; unset follows the "
                                   "input", config="input.directed")
    self_loops: str = option("keep", "str", "edges (v, v): keep or drop",
                             choices=SELF_LOOP_POLICIES, config="input.self_loops")
    duplicates: str = option("drop", "str", "repeated (u, v) edges: keep all, keep the first, "
                             "or merge by min, max or sum",
                             choices=DUPLICATE_POLICIES,
                             config="input.duplicates")
    weight_dtype: str = option("auto", "str", "stored edge-value type (none drops weights)",
                               choices=WEIGHT_DTYPES, config="input.weight_dtype")
    storage_dirs: list[str] = option(kind="list[str]", doc="extra directories page data "
                                     "blocks are spread over by a hash",
                                     default_factory=list, config="store.storage_dirs",
                                     content=False)
    memory_budget: int | None = option(None, "size", "host memory preprocessing may use "
                                       "(default: a fraction of the available memory)",
                                       config="store.memory_budget", content=False)
    gpu_memory: int | None = option(None, "size", "GPU memory pages are sized for (default: "
                                    "most of GPU 0's free memory)", config="store.gpu_memory")
    n_streams: int = option(config.N_STREAMS, "int", "pages in flight on the GPU at once",
                            minimum=1, maximum=64, config="store.n_streams")
    shared_memory_bytes: int = option(config.SHARD_SHARED_MEMORY_BYTES, "int", "shared "
                                      "memory of one GPU block's accumulators, for cutting "
                                      "shards", minimum=1024, maximum=1 << 20,
                                      config="store.shared_memory_bytes")
    slot_bytes: int = option(config.SHARD_SLOT_BYTES, "int", "bytes of one accumulator slot "
                             "when cutting shards", minimum=1)
    max_shard_edges: int = option(config.MAX_SHARD_EDGES, "int", "edges one shard carries "
                                  "at most", minimum=1, maximum=1 << 30,
                                  config="store.max_shard_edges")
    max_shard_vertices: int = option(config.MAX_SHARD_VERTICES, "int", "vertices one shard "
                                     "holds at most (16-bit IdxOff)", minimum=1,
                                     maximum=config.MAX_SHARD_VERTICES)
    max_replication: int = option(config.MAX_REPLICATION, "int", "largest replication "
                                  "factor R_i", minimum=1)
    min_shards: int = option(config.MIN_SHARDS, "int", "small graphs are cut into at least "
                             "this many shards", minimum=1)
    fixed_replication: int | None = option(None, "int", "every shard's R (a power of two), "
                                           "for study; unset: Equation 2", minimum=1,
                                           keyed_when_set=True)
    replication_rule: str = option(config.REPLICATION_RULE, "str", "how Equation 2 measures "
                                   "contention, for study", choices=REPLICATION_RULES,
                                   keyed_when_set=True)
    replication_edges_per_thread: int = option(config.REPLICATION_EDGES_PER_THREAD, "int",
                                               "divides Equation 2's contention, for study",
                                               minimum=1, keyed_when_set=True)
    max_page_bytes: int = option(config.MAX_PAGE_BYTES, "size", "largest page",
                                 config="store.max_page_bytes")
    block_bytes: int = option(config.BLOCK_BYTES, "size", "largest data block of a page",
                              config="store.block_bytes")
    compress: bool | str = option("auto", "bool|auto", "store pages compressed (source gaps "
                                  "bit-packed, no IdxOff), decoded on reading: true, false, "
                                  "or \"auto\" (where the build measures that it pays)",
                                  config="store.compress", keyed_when_set=True,
                                  unkeyed_values=(False,))

    def validate(self) -> None:
        """Raise ConfigError naming the first invalid option."""
        if self.directed not in (None, True, False):
            raise ConfigError(f"directed={self.directed!r}: expected true, false or unset")
        for name in ("self_loops", "duplicates", "weight_dtype", "replication_rule"):
            allowed = choices(BuildOptions, name)
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name}={getattr(self, name)!r}: expected one of {allowed}")
        declared = declared_options(BuildOptions)
        for name, (default, spec) in declared.items():   # the sizes and counts
            if spec.kind in ("int", "size") and default is not None:
                value = getattr(self, name)
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise ConfigError(f"{name}={value!r}: expected a positive integer")
        for name, (default, spec) in declared.items():   # the budgets (unset: by the machine)
            if spec.kind == "size" and default is None:
                value = getattr(self, name)
                if value is not None and (not isinstance(value, int) or value < 1):
                    raise ConfigError(f"{name}={value!r}: expected a positive number of bytes")
        fixed = self.fixed_replication
        if fixed is not None and (isinstance(fixed, bool) or not isinstance(fixed, int)
                                  or fixed < 1 or fixed & (fixed - 1)
                                  or fixed > self.max_replication):
            raise ConfigError(f"fixed_replication={fixed!r}: expected a power of two in "
                              f"1..max_replication={self.max_replication}, or unset")
        if self.block_bytes % config.BLOCK_ALIGNMENT:
            raise ConfigError(f"block_bytes={self.block_bytes}: must be a multiple of "
                              f"{config.BLOCK_ALIGNMENT}")
        if not 1 <= self.max_shard_vertices <= config.MAX_SHARD_VERTICES:
            raise ConfigError(f"max_shard_vertices={self.max_shard_vertices}: must lie in "
                              f"1..{config.MAX_SHARD_VERTICES} (16-bit IdxOff)")
        if not (isinstance(self.compress, bool) or self.compress == "auto"):
            raise ConfigError(f"compress={self.compress!r}: expected true, false or \"auto\"")
        if not isinstance(self.storage_dirs, (list, tuple)):
            raise ConfigError("storage_dirs: expected a list of directories")

    def content_options(self) -> dict:
        """The options that change the store's content (part of its key)."""
        content = {}
        for name, (default, spec) in declared_options(BuildOptions).items():
            value = getattr(self, name)
            if spec.content and not (spec.keyed_when_set and (
                    value == default or value in spec.unkeyed_values)):
                content[name] = value
        content["gpu_memory"] = None  # replaced by the resolved page size
        return content
