"""Every choice the engine makes, each a small pure function (Garaph sections 3, 4.2, 5.1).

A reader of this file sees every switch of a run; the engines call these
functions with measured inputs and record each choice with its inputs in
the iteration record (:func:`decide`, :attr:`IterationRecord.decisions`).

* **direction** (section 4.2): pull costs T_pull whatever the frontier;
  notify-pull notifies the fraction f of the edges leaving the active
  vertices and costs about ``NOTIFY_PULL_COST_FACTOR * f * rho * T_pull``
  (rho = 1 in memory, k for pages read from secondary storage), so the CPU
  notify-pulls when f <= 1 / (NOTIFY_PULL_COST_FACTOR * rho);
* **dense or sparse notify**: a notify that marks many vertices scans a
  bitmap of |V| flags (dense), one that marks few collects them in a list;
* **sparse batch**: a CPU-alone run executes its sparse notify-pull
  iterations many to one kernel call, the smallest on one thread;
* **label shortcut**: a CPU-alone run of a program declaring
  min-label propagation over vertex ids (CC) ends each iteration with
  pointer jumping over the labels, and on a symmetric graph its first
  iteration starts from a sampled union-find's labels (Afforest);
* **source-gather precompute** (section 4.1's pull): a gather of the source
  alone that reads a per-source attribute is computed once per vertex
  before the edge loop, on the CPU and on the GPU alike;
* **fused GPU launch** (section 3): one launch over every resident shard;
* **GPU device loop**: a run on the GPU alone with resident pages
  and no aggregates may run its iterations in a loop kept on the device;
* **GPU sparse pass**: a frontier of few out-edges is notify-pulled over
  them, many iterations a round trip in the device loop;
* **alpha** (section 5.1, Equation 3): CPU only, or CPU and GPU together;
* **run processors**: a hybrid run's estimated time to finish on the GPU
  alone, the CPU alone (its own shortcuts) or both, again at each
  stretch's end (its choices before set-up: :mod:`.set_up_choice`);
* **page assignment** (section 5.1's queue, with a tail rule): whether a
  processor takes the next page or leaves the rest to the other one;
* **partition processor**: in a run over a Dask cluster, a worker whose
  resources name a GPU pulls its partitions on it.
"""

from __future__ import annotations

import math

import numpy as np

from .. import config
from ..errors import ConfigError
from ..kernels.cpu_program import SOURCE_SIDE_GATHER_PARAMETERS
from ..storage.store import neighbour_in_degree

#: Gather parameters that make a gather a function of its source vertex alone.
SOURCE_SIDE_PARAMETERS = SOURCE_SIDE_GATHER_PARAMETERS

#: Source-side gather parameters other than the value: per-vertex attributes
#: the edge loop reads at the source unless they are folded in beforehand.
SOURCE_ATTRIBUTES = SOURCE_SIDE_PARAMETERS - {"src"}


# -- recording --------------------------------------------------------------------------
# Every choice is recorded in one shape, an entry: its inputs, by keyword, and
# ``"choice"``.  An iteration's choices are entries of ``record.decisions`` by
# name; a run's constant choices are entries made once (:func:`fixed`, the
# run's :class:`~garaphpy.scheduler.plan.RunPlan`), which every record that
# used them shares (:func:`share`; read only).

def note(record, name: str, choice, **inputs) -> dict:
    """Record a choice made elsewhere with its inputs as ``record.decisions[name]``
    (kept as given: :meth:`IterationRecord.as_dict` makes them JSON-able, so
    that recording costs an iteration no more than a dict); the entry."""
    inputs["choice"] = choice
    record.decisions[name] = inputs
    return inputs


def decide(record, name: str, function, **inputs):
    """``function(**inputs)``, recorded as ``record.decisions[name]`` (:func:`note`).

    Parameters
    ----------
    record : IterationRecord
        Where the choice and its inputs are kept.
    name : str
        The decision's name (``"direction"``, ``"notify"``, ...).
    function : callable
        One of this module's decision functions.
    **inputs
        Its measured inputs, by keyword.

    Returns
    -------
    object
        The choice.
    """
    return note(record, name, function(**inputs), **inputs)["choice"]


def fixed(function, **inputs) -> dict:
    """A decision whose inputs hold for the whole run, made once: its entry
    (inputs and ``"choice"``), which the records then share (:func:`share`)."""
    inputs["choice"] = function(**inputs)
    return inputs


def share(record, name: str, entry: dict) -> None:
    """Record a run-constant choice's entry (:func:`fixed`) as
    ``record.decisions[name]``, shared, not copied (read only)."""
    record.decisions[name] = entry


# -- the CPU's direction (section 4.2) -------------------------------------------------
def active_fraction(active_out_edges: int, num_edges: int) -> float:
    """f = (sum of the out-degrees of the active vertices) / |E|."""
    return active_out_edges / num_edges if num_edges else 0.0


def choose_direction(f: float, rho: float | None = None,
                     forced: str = "auto", notify_pull: bool = True) -> str:
    """``"notify-pull"`` when f <= 1 / (NOTIFY_PULL_COST_FACTOR * rho), else ``"pull"``.

    Parameters
    ----------
    f : float
        Active fraction (:func:`active_fraction`).
    rho : float
        1 for pages in host memory, k (sequential/random read speed ratio)
        for pages on secondary storage.
    forced : {"auto", "pull", "notify-pull"}
        A forced direction (for study) wins over the threshold.
    notify_pull : bool
        False: always ``"pull"`` (:func:`notify_pull_computes_pull`).
    """
    rho = config.RHO_IN_MEMORY if rho is None else rho
    if not notify_pull:
        return "pull"
    if forced != "auto":
        return forced
    return "notify-pull" if f <= 1.0 / (config.NOTIFY_PULL_COST_FACTOR * rho) else "pull"


def notify_pull_computes_pull(apply_reads_per_iteration) -> bool:
    """Whether notify-pull (notified vertices only) gives the pull's values: not where
    apply reads what changes every vertex each iteration (an aggregate, the iteration)."""
    return not apply_reads_per_iteration


def iteration_forced_direction(forced: str, iteration: int, initially_active: str) -> str:
    """A forced notify-pull pulls the first iteration of a program whose vertices
    all start active: no notification reaches a vertex without in-edges, whose
    first apply (NN's sigmoid(0), PageRank's (1 - d) / N) only a pull makes."""
    if forced == "notify-pull" and iteration == 0 and initially_active == "all":
        return "pull"
    return forced


def iteration_direction(mode: str, f: float, rho: float, forced: str = "auto",
                        notify_pull: bool = True) -> str:
    """A hybrid run's direction: the CPU's choice when it runs alone, else pull
    (the GPU always pulls, and the CPU pulls its pages beside it)."""
    return choose_direction(f, rho, forced, notify_pull) if mode == "cpu" else "pull"


def settling_direction(active_out_edges: int, active_vertices: int, unsettled_in_edges: int,
                       num_vertices: int, pulled_last: bool, previous_active: int,
                       rho: float | None = None, forced: str = "auto") -> str:
    """The CPU's direction for a program whose values are final once set
    (``VertexProgram.final_once_set``: its pulls skip settled vertices and
    stop at the activating in-edge, so a pull costs about the in-edges of the
    vertices not yet settled, not |E|): Beamer's direction-optimizing rule.

    From notify-pull, pull once the frontier's out-edges times
    ``config.CPU_SETTLING_PULL_FACTOR`` (Beamer's alpha, 15) and ``rho``
    exceed what a pull reads: ``unsettled_in_edges`` plus one flag per vertex
    (so that a long thin tail, a chain's, never pulls); from pull, stay while
    the frontier grows or holds more than |V| /
    ``config.CPU_SETTLING_NOTIFY_FACTOR`` (beta, 18) vertices.  A forced
    direction wins.
    """
    rho = config.RHO_IN_MEMORY if rho is None else rho
    if forced != "auto":
        return forced
    if pulled_last:
        if active_vertices >= previous_active \
                or active_vertices * config.CPU_SETTLING_NOTIFY_FACTOR > num_vertices:
            return "pull"
        return "notify-pull"
    if active_out_edges * config.CPU_SETTLING_PULL_FACTOR * rho \
            > unsettled_in_edges + num_vertices:
        return "pull"
    return "notify-pull"


def early_exit(final_once_set: bool, synchronous: bool, mode: str) -> bool:
    """Whether a run's CPU pulls skip settled vertices and stop at the activating
    in-edge: a program that declares ``final_once_set``, run synchronously on
    the CPU alone or in a hybrid run.  A hybrid
    run's CPU skips only in the iterations it runs alone, after finding the
    settled vertices again where the GPU wrote
    (:meth:`~garaphpy.scheduler.cpu_engine.CpuEngine.refresh_settled`); the
    pages it pulls beside the GPU it pulls in full."""
    return bool(final_once_set and synchronous and mode in ("cpu", "hybrid"))


def whole_settling_pull(early_exit: bool, in_memory: bool) -> bool:
    """Whether a run's pulls with early exit (:func:`early_exit`) run over the
    whole CSC in one launch, in place, listing the vertices they settle
    (:func:`garaphpy.kernels.cpu.pull_settling_whole`): the edges one CSC in
    host memory.  The settled vertices are read from a bitmap packed at each
    pull's start (the probes then never see a vertex settled during the
    pull)."""
    return bool(early_exit and in_memory)


def settling_push(early_exit: bool, reads_weights: bool) -> bool:
    """Whether a run's sparse CPU iterations run alone push from the frontier
    (:func:`garaphpy.kernels.cpu.push_settling`) rather than notify and pull:
    with early exit (:func:`early_exit`: the first settled in-neighbour gives
    a vertex its final value, so any frontier edge to it may), a gather that
    reads no edge value (the push walks the out-edges, whose values are in
    CSC order only).  The push reads the
    frontier's out-edges; the pull it replaces also reads the new vertices'
    in-edges up to a settled one (all of them, for the neighbours of a hub
    whose id comes late)."""
    return bool(early_exit and not reads_weights)


def floor_skip(declared: bool, mode: str) -> bool:
    """Whether a run's CPU pulls skip the in-edges of the vertices already as
    good as any source (:func:`garaphpy.kernels.cpu.pull_range`'s floor): a
    program that declares ``gather_no_better_than_source``, on the CPU alone
    (the floor is taken over the CPU's own values)."""
    return bool(declared and mode == "cpu")


def fused_pull(mode: str) -> bool:
    """Whether a run's CPU pulls may also make the next pull's source-side
    gathers and the next iteration's aggregates as they write each new value
    (:func:`garaphpy.kernels.cpu.pull_fused`, GAPBS's PageRank loop): on the
    CPU alone (the values it carries to the next iteration are then the
    only ones).  The run's plan takes it only where its pull precomputes the
    gathers (:func:`precompute_source_gathers`) over one CSC in host memory,
    and no other step changes the values between pulls (no early exit, label
    shortcut or floor skip: :func:`garaphpy.scheduler.plan.plan_cpu`)."""
    return bool(mode == "cpu")


def float32_contributions(declared_tolerance: float | None, run_tolerance: float | None,
                          mode: str) -> bool:
    """Whether the CPU holds its precomputed source-side gathers in float32.

    A program's ``float32_gather_tolerance`` is the least run tolerance at
    which that rounding stays below what the verifier accepts; the run's
    tolerance must be positive and at least that.  On the CPU alone (the
    GPU keeps its own in float64).
    """
    return bool(mode == "cpu" and declared_tolerance is not None
                and run_tolerance is not None and run_tolerance > 0
                and run_tolerance >= declared_tolerance)


def shortcut_labels(declared: bool, mode: str, enabled: bool = True,
                    processor: str | None = None) -> bool:
    """Whether a run's iterations on ``processor`` (default: the mode's own)
    end with pointer jumping over the labels
    (:func:`garaphpy.kernels.cpu.shortcut_labels` on the CPU,
    ``gp_shortcut_labels`` on the GPU): a program that declares
    ``shortcut_labels`` (on the GPU, with ``enabled``:
    ``config.GPU_SHORTCUT_LABELS``); on one processor alone, and in hybrid
    runs on the GPU, in the iterations it runs alone (the jumps land in its
    copy of the values, which the host downloads whole before it runs an
    iteration; iterations whose pages both processors pull do not jump, as
    the host's copy would not see it).  The CPU of a hybrid run does not
    jump: its jumps and the GPU's pages would meet in no one copy."""
    return bool(enabled and declared and (mode, processor or mode) in (
        ("cpu", "cpu"), ("gpu", "gpu"), ("hybrid", "gpu")))


def union_find_start(declared: bool, symmetric: bool, mode: str) -> bool:
    """Whether a run's first iteration starts from the labels of a sampled
    union-find (:func:`garaphpy.kernels.union_find.component_roots`,
    Afforest): a program that declares ``shortcut_labels`` (min-label
    propagation over user ids, whose fixed point on a symmetric graph is the
    smallest user id of each component), on a ``symmetric`` graph (on a
    directed one the fixed point is the smallest id that *reaches* a vertex,
    which components do not give), on the CPU alone.  The iteration's pull
    then confirms the labels: none drops, and the run ends after it."""
    return bool(declared and symmetric and mode == "cpu")


def gpu_union_find_start(declared: bool, symmetric: bool, resident: bool,
                         extra_bytes: int = 0, free_bytes: int | None = None) -> bool:
    """Whether a GPU run's first iteration starts from the labels of a sampled
    union-find on the device (``kernels/cuda/union_find.cu``, Afforest):
    a program that declares ``shortcut_labels`` on a ``symmetric`` graph (as
    :func:`union_find_start`), whose pages are all ``resident`` (the
    union-find reads the whole CSC at once; a streamed run keeps label
    propagation), and whose arrays (``extra_bytes``: a parent per vertex, the
    CSC's offsets) fit the budget left (``free_bytes``; None: unchecked).
    On the GPU alone, and in a hybrid run whose GPU runs the first iteration
    alone.  Its iteration's pull then confirms the labels.

    No switch point: a road network's label propagation took 1,103 GPU
    iterations (28.8 ms on an H200) where the CPU's union-find start took 10
    ms; it reads each vertex's first two in-edges and the rest only outside
    the largest component, less than the one pull it saves elsewhere."""
    fits = free_bytes is None or extra_bytes <= free_bytes
    return bool(declared and symmetric and resident and fits)


def partition_processor(mode: str, gpus: float) -> str:
    """What pulls a partition of a run over a Dask cluster on a worker whose
    resources name ``gpus`` GPUs (``resources={"GPU": 1}``, Dask's own way to
    say what a worker holds): its GPU where it has one, unless the run asked
    for ``mode='cpu'`` (``mode='gpu'`` places partitions only on such
    workers).  A partition is pulled by one processor: no worker splits its
    pages between its GPU and its CPU threads."""
    return "gpu" if mode != "cpu" and gpus > 0 else "cpu"


def value_priority(declared: bool, mode: str, synchronous: bool, batches: bool,
                   in_degree_skew: float, max_skew: float | None = None) -> bool:
    """Whether a run takes its sparse iterations in order of value, in buckets
    (:func:`garaphpy.kernels.cpu.priority_iterations`; delta-stepping): a
    program that declares ``value_priority``, run asynchronously on the CPU
    with batches (:attr:`CpuEngine.batches
    <garaphpy.scheduler.cpu_engine.CpuEngine.batches>`), on a graph whose
    ``in_degree_skew`` (:func:`in_degree_skew`) is at most ``max_skew``
    (None: ``config.CPU_PRIORITY_MAX_SKEW``): on the CPU alone, or
    in a hybrid run, whose CPU takes in its batches the iterations the
    policy gives the CPU alone (:meth:`Driver._cpu_batch
    <garaphpy.scheduler.driver.Driver._cpu_batch>`); not on the GPU alone.

    Updates then wait for the smaller values that would overwrite them,
    instead of each vertex being set off again and again (SSSP on a grid:
    every vertex about 50 times).  But each bucket's step notify-pulls: a
    vertex it notifies reads all its in-edges, and the many small steps of
    buckets notify the hubs of a skewed graph step after step (rmat:20,
    skew 75: 4.8x the edges and 5x the time of the whole-frontier
    iterations; a 4-neighbour grid, skew 1.0: 1/14 of the edges, 6x
    faster; BENCHMARKS.md).  Buckets pushed in rounds
    (:func:`cpu_push_rounds`) read no in-edges, but lose on skewed graphs
    too: their out-edge weights placed once a graph (0.5 s on kron22; its
    later runs in memory reuse them) and many more iterations (SSSP on the
    H200 host, 2026-12-04, 4-16 threads, each run placing them, value
    priority against none: kron22, skew 129, 0.92 against 0.72 s at 16
    threads; web-NotreDame, skew 73, and soc-Slashdot0811, skew 11, 1.9x;
    ca-HepPh, skew 6.6, 1.3-1.5x; a 1000x1000 grid, skew 1.0, 8.7x faster)."""
    max_skew = config.CPU_PRIORITY_MAX_SKEW if max_skew is None else max_skew
    return bool(declared and mode in ("cpu", "hybrid") and not synchronous
                and batches and in_degree_skew <= max_skew)


def cpu_priority_push(declared_keeps_best: bool) -> bool:
    """Whether the CPU's steps in buckets of values (:func:`value_priority`)
    push over the frontier's out-edges when one thread takes them, rather
    than notify and pull: a program declaring ``apply_keeps_best`` (its value
    follows from the in-neighbours that changed alone).  A grid's step then
    reads the frontier's out-edges once, not the in-edges of every vertex
    they reach."""
    return bool(declared_keeps_best)


def cpu_push_rounds(push: bool, threads: int, loaded: bool) -> bool:
    """Whether a run in buckets of values that pushes (:func:`cpu_priority_push`)
    pushes every bucket in parallel rounds on threads kept across rounds
    (:func:`garaphpy.kernels.cpu.priority_push_rounds`): with two threads or
    more, on a machine not ``loaded`` (where a thread that loses its core
    holds every other at each round's barrier).  Such rounds read only the
    out-edges of the vertices they push, so the in-degree skew limit of
    :func:`value_priority` does not apply to them."""
    return bool(push and threads >= 2 and not loaded)


def in_degree_skew(in_degree) -> float:
    """The in-edges a notified vertex reads, over the mean in-degree: a vertex is
    notified in proportion to its in-degree d and then reads d in-edges, so
    the mean read is sum d^2 / sum d; 1.0 for a regular graph, far more
    for a power-law one."""
    degrees = np.asarray(in_degree)
    edges = float(degrees.sum(dtype=np.float64))
    if edges == 0:
        return 1.0
    return neighbour_in_degree(degrees) / (edges / degrees.size)


def bucket_width(configured: float | None, mean_edge_value: float | None,
                 mean_in_degree: float) -> float:
    """The width of a bucket of :func:`value_priority`: ``configured``
    (``config.CPU_BUCKET_WIDTH``) when set; else, for a gather that reads
    edge values, their mean over the mean in-degree (Meyer and Sanders'
    delta = Theta(1 / d) for weights in [0, 1], scaled by the mean weight:
    GAPBS's delta 32 on a 4-neighbour grid of weights 1..255); else 1 (the
    levels of a program adding one per edge).  A ``configured`` width that is
    not a positive finite number raises :class:`~garaphpy.errors.ConfigError`."""
    if configured is not None:
        return _positive("config.CPU_BUCKET_WIDTH", configured, "a positive number or None")
    if mean_edge_value is None or not math.isfinite(mean_edge_value) or mean_edge_value <= 0:
        return 1.0
    return float(mean_edge_value / max(mean_in_degree, 1.0))


def shortcut_every_vertex(sample_dropped: int, sample_size: int,
                          min_fraction: float | None = None) -> bool:
    """After a pull, whether the label shortcut goes over every vertex (an
    O(|V|) pass of random reads) rather than only an even sample of them: when
    at least ``min_fraction`` of the sample's labels dropped (labels that
    travel far, a high-diameter graph)."""
    min_fraction = config.CPU_SHORTCUT_MIN_DROP if min_fraction is None else min_fraction
    return sample_size > 0 and sample_dropped >= min_fraction * sample_size


# -- dense or sparse notify ---------------------------------------------------------------
def dense_notify(active_out_edges: int, num_vertices: int, early_exit: bool = False) -> bool:
    """Whether a notify marks its targets in a |V| bitmap scanned afterwards
    (True) rather than collecting them in a list: when the edges it follows,
    times ``config.NOTIFY_DENSE_FACTOR``, exceed |V|; never in a run with
    early exit (:func:`early_exit`), whose settled vertices hold a claim for
    good that only the list passes over."""
    return not early_exit and active_out_edges * config.NOTIFY_DENSE_FACTOR > num_vertices


def sparse_batches(aggregates: bool, reads_storage: bool, notify_pull: bool = True) -> bool:
    """Whether a run may batch its sparse CPU iterations (:func:`sparse_batch`):
    a program without aggregates (they would change between the steps) whose
    notify-pull gives the pull's values, its edges one CSC in host memory."""
    return not aggregates and not reads_storage and notify_pull


def sparse_batch(active_out_edges: int, num_edges: int, num_vertices: int, rho: float,
                 forced: str = "auto", direction: str | None = None) -> bool:
    """Whether a CPU-alone iteration runs in a batch of iterations
    (:func:`garaphpy.kernels.cpu.sparse_iterations`) rather than on its own.

    True (in a run that batches, :func:`sparse_batches`) when the direction
    is not forced, and the iteration would be a notify-pull
    (:func:`choose_direction`) with the sparse notify (not
    :func:`dense_notify`): the same work, without a Python round per
    iteration.  The batch kernel applies the same test before each of its
    steps, so every batched iteration is one this rule admits.  ``direction``:
    the direction already chosen by another rule (:func:`settling_direction`),
    used instead of :func:`choose_direction`.
    """
    if direction is None:
        direction = choose_direction(active_fraction(active_out_edges, num_edges), rho)
    return (forced == "auto" and direction == "notify-pull"
            and not dense_notify(active_out_edges, num_vertices))


def serial_step_edges(threads: int) -> int:
    """The most edges a part of a batched iteration runs on one thread
    (:func:`serial_step`): ``config.CPU_SERIAL_STEP_EDGES`` where set, else
    ``config.CPU_SERIAL_EDGES_PER_THREAD`` per thread of the run, counting
    at least 4 threads."""
    if config.CPU_SERIAL_STEP_EDGES is not None:
        return int(config.CPU_SERIAL_STEP_EDGES)
    return config.CPU_SERIAL_EDGES_PER_THREAD * max(4, int(threads))


def round_serial_edges(threads: int) -> int:
    """The most out-edges of a level that threads kept across levels
    (:func:`cpu_settle_rounds`) step on one thread while the others wait at
    the barrier: ``config.CPU_ROUND_SERIAL_EDGES`` where set, else
    ``config.CPU_ROUND_SERIAL_EDGES_PER_THREAD`` per thread of the run.  A
    shared level pays two barriers and its chunks' atomics, a few
    microseconds, where a parallel launch (:func:`serial_step_edges`) pays
    tens."""
    if config.CPU_ROUND_SERIAL_EDGES is not None:
        return int(config.CPU_ROUND_SERIAL_EDGES)
    return config.CPU_ROUND_SERIAL_EDGES_PER_THREAD * max(1, int(threads))


def cpu_settle_rounds(settling_push: bool, threads: int, loaded: bool) -> bool:
    """Whether a run whose sparse steps push (:func:`settling_push`, a program
    final once set) batches them on threads kept across the steps
    (:func:`garaphpy.kernels.cpu.settle_push_rounds`)
    rather than one parallel launch a step: :func:`cpu_push_rounds`'s rule
    (two threads or more, on a machine not ``loaded``)."""
    return cpu_push_rounds(settling_push, threads, loaded)


def serial_step(edges: int, serial_edges: int) -> bool:
    """Whether a part of a batched iteration runs on one thread: the notify when
    the frontier has at most ``serial_edges`` out-edges, the gather when the
    notified vertices have at most ``serial_edges`` in-edges
    (:func:`serial_step_edges`), below which a parallel launch costs
    more than it saves.  Applied inside the batch kernel; the gather's choice
    (the larger part on power-law graphs) is recorded per iteration."""
    return edges <= serial_edges


def run_execution(asked: str | None, program_execution: str) -> str:
    """A run's execution: the one asked for, else the program's (its
    ``execution``, :func:`garaphpy.program.default_execution`), on every
    processor.

    A min/max program reaches its fixed point in fewer iterations
    asynchronously.  A hybrid run needs it too: the
    CPU's batches of such a program are buckets of values, which only an
    asynchronous run takes, and a synchronous one leaves the CPU a
    notify-pull per Python round (grid:2000x2000 SSSP at half its pages on
    the H200: 4.8 s hybrid against 0.3 s on the CPU alone, and 0.27 s
    hybrid once asynchronous; BENCHMARKS.md, twenty-eighth session).  So
    does the GPU alone: with the graph resident, asynchronous SSSP took
    0.43-0.96x the synchronous run's time on rmat:22, kron:22 and
    grid:2000x2000, CC 0.72-1.0x, SSWP 0.83-1.01x (H200; BENCHMARKS.md,
    twenty-ninth session)."""
    return asked or program_execution


# -- the source-gather precompute ---------------------------------------------------------
def precompute_source_gathers(direction: str, synchronous: bool,
                              gather_parameters: frozenset, enabled: bool = True) -> bool:
    """Whether an iteration computes gather(u) once per vertex before its edge loop.

    The one rule of both processors.  True when all of these hold:

    * ``enabled`` (the GPU engine's ``precompute`` option; the CPU's plan
      turns it off only for comparison);
    * the gather is source-side (its parameters within
      :data:`SOURCE_SIDE_PARAMETERS`) and reads a per-source attribute
      besides ``src`` (:data:`SOURCE_ATTRIBUTES`): that read is a random
      access per edge the precompute removes; a gather of ``src`` alone
      reads one array either way, so the O(|V|) pass would only cost;
    * the iteration pulls: notify-pull runs on sparse active sets, where its
      work (the notified vertices' in-edges) can be far below the |V|
      gathers of a precompute;
    * the run is synchronous: an asynchronous pull must see a value updated
      in the same iteration at once, and a contribution computed at its
      start would not.

    Parameters
    ----------
    direction : {"pull", "notify-pull"}
    synchronous : bool
    gather_parameters : frozenset of str
        The parameters the program's gather asks for.
    enabled : bool
    """
    parameters = frozenset(gather_parameters)
    return bool(enabled and parameters <= SOURCE_SIDE_PARAMETERS
                and parameters & SOURCE_ATTRIBUTES
                and direction == "pull" and synchronous)


# -- the GPU's launch -------------------------------------------------------------------
def fuse_gpu_launch(resident: bool, fuse_enabled: bool, host_copies: bool,
                    synchronous: bool, checkpoints_after_pages: bool, num_pages: int) -> bool:
    """Whether an iteration the GPU runs alone is one launch over every shard.

    Only with resident pages (nothing to copy between launches), when
    enabled (``config.GPU_FUSE_RESIDENT_PAGES``), with no per-page copies
    back to the host (hybrid runs) and no per-page checkpoints (asynchronous
    runs that checkpoint after pages), and more than one page to fuse.
    """
    return bool(resident and fuse_enabled and not host_copies
                and (synchronous or not checkpoints_after_pages) and num_pages > 1)


def prefetch_next_copies(resident: bool, selective: bool) -> bool:
    """Whether a streamed run's iteration queues the next iteration's first
    page copies once its own pages are launched.

    Only with pages that stream (not all resident), and iterations that copy
    every streamed page
    (not ``selective``: a run that chooses per page may skip or compact the
    next iteration's pages, and copies made for nothing would hold the bus
    its compacted edges wait for).  The pages' images do not change between
    iterations, so a copy made early is the copy the next iteration needs.
    """
    return bool(not resident and not selective)


def device_loop(enabled: bool, resident: bool, aggregates: bool, host_copies: bool,
                checkpoints_after_pages: bool, extra_bytes: int, free_bytes: int,
                notify_pull: bool = True) -> bool:
    """Whether a GPU-alone run may keep sparse iterations in a loop on the
    device (:class:`~garaphpy.scheduler.device_loop.DeviceLoop`): when
    enabled (``config.GPU_DEVICE_LOOP``), with resident pages (every edge on
    the device, in CSC order), no aggregates (they would change between the
    loop's iterations), a notify-pull that gives the pull's values
    (:func:`notify_pull_computes_pull`), no per-page copies back to the host (hybrid runs) or
    checkpoints after pages, and room within the run's GPU budget for the
    loop's ``extra_bytes`` (the out-edges in CSR, the in-edge offsets and
    the frontier queues)."""
    return bool(enabled and resident and not aggregates and not host_copies and notify_pull
                and not checkpoints_after_pages and extra_bytes <= free_bytes)


def gpu_sparse_pass(active_out_edges: int, num_edges: int, forced: str = "auto",
                    factor: float | None = None,
                    neighbour_in_degree: float = 1.0,
                    pull_factor: float | None = None,
                    iteration: int = 0, loop_after: int = 0) -> bool:
    """Whether the GPU's next iteration is a sparse notify-pull over the
    frontier's out-edges rather than the pull over every shard.

    Forced: ``"notify-pull"`` always, ``"pull"`` never.  Otherwise sparse
    when the frontier's out-edges are at most ``|E| / factor``
    (``config.GPU_SPARSE_FACTOR``; the sparse pass reads each of them in
    random order, the pull reads every edge in order, several times faster
    per edge) and the in-edges it can be expected to pull are at most
    ``|E| / pull_factor`` (``config.GPU_SPARSE_PULL_FACTOR``): each
    out-edge notifies a vertex with ``neighbour_in_degree`` in-edges on
    average (sum of in-degrees squared / |E|: 4 on a grid, thousands on a
    power-law graph, where a few frontier edges reach hubs).  The device
    loop applies the same bound (:func:`gpu_dense_edges`) after each of its
    iterations and hands the run back to the pull when it fails.  Not before
    iteration ``loop_after`` (``config.GPU_LOOP_AFTER_ITERATIONS``): a run that
    ends in a few iterations pays less for the host's round trips than for
    entering the loop, and one of thousands loses only those first few.
    """
    if forced == "notify-pull":
        return True
    if forced == "pull" or iteration < loop_after:
        return False
    return active_out_edges <= gpu_dense_edges(num_edges, forced, factor,
                                               neighbour_in_degree, pull_factor)


def gpu_dense_edges(num_edges: int, forced: str = "auto",
                    factor: float | None = None,
                    neighbour_in_degree: float = 1.0,
                    pull_factor: float | None = None) -> int:
    """The largest frontier out-edge count :func:`gpu_sparse_pass` admits
    (the device loop's test, as a bound)."""
    factor = config.GPU_SPARSE_FACTOR if factor is None else factor
    pull_factor = config.GPU_SPARSE_PULL_FACTOR if pull_factor is None else pull_factor
    if forced == "notify-pull":
        return 2 ** 62
    if forced == "pull":
        return -1
    bounds = [num_edges / factor if factor > 0 else float(2 ** 62)]
    if pull_factor > 0:
        bounds.append(num_edges / (pull_factor * max(neighbour_in_degree, 1.0)))
    return int(min(bounds))


def gpu_push(declared: bool, enabled: bool = True) -> bool:
    """Whether the device loop's sparse iterations push over the frontier's
    out-edges (the sum's atomics into per-vertex accumulators, then an apply
    of the vertices reached) rather than notify and pull: for a program
    declaring ``apply_keeps_best`` (its values follow from the in-neighbours
    that changed alone), with ``config.GPU_SPARSE_PUSH``.  Half the edges
    read, and no hub's in-edges."""
    return bool(declared and enabled)


def gpu_value_priority(declared: bool, synchronous: bool, push: bool,
                       larger_first: bool = False, width_configured: bool = False,
                       enabled: bool = True) -> bool:
    """Whether the device loop pushes its frontier in order of value, in buckets
    (near-far delta-stepping: vertices activated above the bucket's threshold
    wait in a far queue until the frontier runs dry): a program declaring
    ``value_priority`` run asynchronously, with the push (:func:`gpu_push`),
    and ``config.GPU_VALUE_PRIORITY``.  A synchronous run keeps the records
    of the pull over every shard, iteration by iteration; this order changes
    them (not the values).

    A ``max`` program (``larger_first``: SSWP) only with a width configured
    (``config.GPU_BUCKET_WIDTH``): its values are edge values, not path sums,
    so :func:`gpu_bucket_width`'s rule makes one or two buckets, and each
    iteration pays the split for nothing (BENCHMARKS.md, grid 2000x2000 SSWP)."""
    return bool(enabled and declared and push and not synchronous
                and (width_configured or not larger_first))


#: The most frontier out-edges per thread of its grid that the device loop's
#: persistent kernel takes (:func:`gpu_persistent_launch`); unmeasured (the
#: frontiers of grids and road networks stay far below it).
PERSISTENT_EDGES_PER_THREAD = 16.0


def gpu_persistent_loop(push: bool) -> bool:
    """Whether the device loop may run its sparse iterations several to a launch,
    in a persistent cooperative kernel with grid-wide barriers between passes
    (``kernels/cuda/persistent.cu``), rather than only as CUDA graphs of a few
    launches an iteration: for the push (:func:`gpu_push`; in order of value
    too).  A launch returns after an iteration that stops the loop, or after
    ``device_loop.PERSISTENT_ITERATIONS``; a device without cooperative
    launches, or a kernel not compiled, keeps the graphs (the loop's
    ``launch`` says which ran).  A level of grid 2000x2000 BFS (3,997 levels)
    costs about 15 us in graphs (H200); with barriers instead, a few."""
    return bool(push)


def gpu_fused_push(persistent: bool, synchronous: bool, activate_is_change: bool,
                   value_bytes: int) -> bool:
    """Whether a persistent launch (:func:`gpu_persistent_loop`) runs each level as
    one pass and one grid barrier, gathers swapped straight into the values
    (``value_bytes`` 4 or 8), the stop test taken by every block (not a push, an
    apply and a last block's finish: 14 us a level on an H200): asynchronous
    runs (a synchronous one keeps the pull's records), each change activating
    (``program.activate_is_change``)."""
    return bool(persistent and not synchronous and activate_is_change
                and value_bytes in (4, 8))


def gpu_persistent_launch(frontier_out_edges: int, grid_threads: int,
                          edges_per_thread: float | None = None) -> bool:
    """Whether the device loop's next launch is its persistent kernel
    (:func:`gpu_persistent_loop`), with the frontier the host last read
    (``frontier_out_edges``): while it has at most ``edges_per_thread``
    (:data:`PERSISTENT_EDGES_PER_THREAD`) out-edges per thread of the
    kernel's grid (``grid_threads``), launches and barriers are an
    iteration's cost; a larger frontier's are its edges, which the graphs
    take as well.  (Synchronous runs: the same iterations either way.)"""
    if edges_per_thread is None:
        edges_per_thread = PERSISTENT_EDGES_PER_THREAD
    return frontier_out_edges <= edges_per_thread * max(grid_threads, 1)


def gpu_persistent_blocks(co_resident: int, multiprocessors: int,
                          blocks_per_multiprocessor: int | None) -> int:
    """Blocks of the device loop's persistent kernel: ``blocks_per_multiprocessor``
    a multiprocessor (``device_loop.PERSISTENT_BLOCKS_PER_MULTIPROCESSOR``: the
    graphs' grid, 2 an SM, so that both spread a frontier alike and the grid
    barrier waits for few blocks; None: every block that fits), at most the
    ``co_resident`` blocks a multiprocessor holds (a cooperative launch needs
    every block resident at once); 0 where none fits."""
    per_multiprocessor = co_resident if blocks_per_multiprocessor is None \
        else min(co_resident, blocks_per_multiprocessor)
    return max(0, per_multiprocessor) * max(0, multiprocessors)


def gpu_bucket_width(configured: float | None, mean_edge_value: float | None,
                     mean_in_degree: float, factor: float | None = None) -> float:
    """The width of a bucket of :func:`gpu_value_priority`: ``configured``
    (``config.GPU_BUCKET_WIDTH``) when set, else ``factor`` times
    :func:`bucket_width`'s rule.  A width or factor that is not a positive
    finite number raises :class:`~garaphpy.errors.ConfigError`."""
    factor = config.GPU_BUCKET_FACTOR if factor is None else factor
    if configured is not None:
        return _positive("config.GPU_BUCKET_WIDTH", configured)
    return _positive("config.GPU_BUCKET_FACTOR", factor) * bucket_width(
        None, mean_edge_value, mean_in_degree)


def _positive(name: str, number, expected: str = "a positive number") -> float:
    """``number`` as a float, where it is a positive finite number (not a bool);
    else :class:`~garaphpy.errors.ConfigError` naming the setting ``name``."""
    if isinstance(number, bool) or not isinstance(number, (int, float)) \
            or not math.isfinite(number) or number <= 0:
        raise ConfigError(f"{name} = {number!r}: expected {expected}")
    return float(number)


def gpu_pull_edges(num_edges: int, forced: str = "auto",
                   factor: float | None = None) -> int:
    """The most in-edges a sparse iteration's notified vertices may have: the
    device loop counts them as it notifies, and calls the iteration off above
    this (on power-law graphs a few frontier edges can notify hubs whose
    in-edges are a large part of the graph; the pull over every shard reads
    them in order, in balanced blocks).  Forced notify-pull: no bound."""
    factor = config.GPU_SPARSE_PULL_FACTOR if factor is None else factor
    if forced == "notify-pull" or factor <= 0:
        return 2 ** 62
    return int(num_edges // factor)


def gpu_span_edges(num_edges: int, lanes: int, threads: int,
                   factor: float | None = None) -> int:
    """The most edges of one vertex a sparse pass gives one group of ``lanes``
    lanes: a vertex of the frontier (its out-edges) or a notified one (its
    in-edges) with more calls the iteration off.  One group takes such a
    vertex's edges ``lanes`` at a time, while the pull over every shard
    spreads all |E| edges over the grid's ``threads``; so the bound is
    ``factor`` times the pull's edges per thread (at least a warp's worth of
    rounds), per lane."""
    factor = config.GPU_SPARSE_SPAN_FACTOR if factor is None else factor
    per_thread = max(num_edges / max(threads, 1), 32.0)
    return int(factor * per_thread * lanes)


# -- streamed pages -------------------------------------------------------------
def selective_transfers(declared: bool, host_copies: bool, forced: str = "auto") -> bool:
    """Whether a run whose pages stream chooses per page and iteration how each
    reaches the GPU (skip, copy, compact or zero-copy:
    :func:`garaphpy.scheduler.gpu.transfer.choose_transfers`) rather than copying
    every streamed page: for a program declaring ``apply_keeps_best`` (a page
    no active vertex reaches then changes nothing, and pushing the active
    edges gives the pull's values), on the GPU alone (a hybrid iteration's
    pages are dealt by the dispatcher), unless ``config.GPU_TRANSFER`` forces
    ``"copy"``."""
    return bool(declared and not host_copies and forced != "copy")


def defer_selective_arrays(forced: str, packed_streams: bool, displaced_bytes: int,
                           enabled: bool = True) -> bool:
    """Whether a run whose pages stream makes the selective transfers' device
    arrays (accumulators, frontier, compacted buffer) at its first sparse
    iteration rather than at set-up, keeping more pages on the device until
    then (:func:`~garaphpy.scheduler.gpu.transfer.pages_kept_until_sparse`): with
    the automatic choice (``forced``), when every page that may stream is
    packed and pulled where it lies (``packed_streams``: a page released then
    streams from its packed host image, as the others do), and when the
    arrays' room holds pages (``displaced_bytes`` of them, > 0).  Dense
    iterations copy every streamed page whatever the plan, so a run that
    starts dense (every vertex active, as CC's does) moves fewer bytes in
    them."""
    return bool(enabled and forced == "auto" and packed_streams and displaced_bytes > 0)


def make_selective_arrays(active_vertices: int, most_vertices: int) -> bool:
    """Whether a run that deferred the selective arrays
    (:func:`defer_selective_arrays`) makes them now: when the frontier holds at
    most ``most_vertices`` (the share a selective iteration counts per page;
    a larger frontier reaches nearly every page, and every page is copied)."""
    return active_vertices <= most_vertices


def selective_pays(dense_seconds: float, sparse_seconds: float, released_seconds: float,
                   rent: float, tail: bool, dense_iterations: float | None = None
                   ) -> tuple[bool, float]:
    """Whether a sparse iteration of a run that deferred the selective arrays
    (:func:`make_selective_arrays` said it may) makes them now: a rent-or-buy
    choice.

    A selective pass would save this iteration ``dense_seconds -
    sparse_seconds`` against the pull over every page; making the arrays
    releases pages from the device, and every later dense iteration then
    copies them, ``released_seconds`` more each.  While the frontier has
    never been larger than it is now (not ``tail``: a traversal's first
    iterations, which dense ones follow) ``dense_iterations`` of those are
    expected; in the tail none.  The arrays are made once the savings
    forgone so far (``rent``, with this iteration's) reach that price, so a
    run pays at most about twice what the better of the two choices would
    have cost it in hindsight.  ``dense_iterations`` None:
    ``config.GPU_RELEASE_DENSE_ITERATIONS``.

    Returns
    -------
    tuple of (bool, float)
        Whether to make them now, and the rent after this iteration.
    """
    if dense_iterations is None:
        dense_iterations = config.GPU_RELEASE_DENSE_ITERATIONS
    saving = dense_seconds - sparse_seconds
    if saving <= 0:
        return False, rent
    rent += saving
    return rent >= released_seconds * (0.0 if tail else dense_iterations), rent


def resident_selective(loop_bytes: int, selective_bytes: int, free_bytes: int) -> bool:
    """Whether a run whose pages all fit the GPU budget chooses per page in
    its sparse iterations, as a run whose pages stream does (skip the pages
    no active vertex reaches, pull or push the others): when the device
    loop's arrays (``loop_bytes``: its out-edge CSR, and values) do not fit
    the budget's ``free_bytes`` beside the pages, and the selective arrays
    (``selective_bytes``) do.  Without either, every iteration pulls every
    page."""
    return bool(loop_bytes > free_bytes and 0 < selective_bytes <= free_bytes)


def gpu_settled_pages(final_once_set: bool, synchronous: bool, resident: bool,
                      selective: bool, reads_storage: bool) -> bool:
    """Whether a GPU run whose pages come from storage skips, every iteration,
    the pages whose destinations were all active once (or have no in-edge):
    for a program declaring ``final_once_set``, run synchronously, such a
    vertex never changes again, so the page's pull (and its copy, and its
    read from storage) changes nothing.  The CPU's pulls skip settled
    vertices the same way; this is the page-level rule for pages read from
    disk (``reads_storage``), whose read costs far more than the per-page
    count (a prefix sum over a flag per vertex, read back each iteration:
    with pages in host memory it cost kron:21 BFS at a 25% GPU budget 18%
    on an H200, 2026-12-02), in the selective iterations that skip pages
    (``selective``)."""
    return bool(final_once_set and synchronous and not resident and selective
                and reads_storage)


def selective_pushes(pinned_fits: bool, pushes_values: bool) -> tuple:
    """The pushes a selective run may choose: zero-copy reads the out-edge CSR
    (and its values) in pinned host memory, compaction gathers from it; when
    that copy does not fit the host memory left (``pinned_fits``), the host
    counts and gathers from the store's own arrays, and no push of a program
    that reads edge values is left (they are not in the CSR's order there)."""
    if pinned_fits:
        return ("compact", "zero-copy")
    return () if pushes_values else ("compact",)


def packed_pages(enabled: bool, wire_bytes: int, packed_bytes: int) -> bool:
    """Whether pages that do not all fit the GPU budget are packed
    (:mod:`garaphpy.kernels.packed`: kept packed on the device, copied packed
    when they stream, unpacked by the GPU before their pull): when
    ``config.GPU_PACKED_PAGES`` allows and packing saves at least a tenth of
    the pages' bytes."""
    return bool(enabled and packed_bytes <= 0.9 * wire_bytes)


def compressed_pages(enabled: bool, compressed_bytes: int, other_bytes: int,
                     index_bytes: int) -> bool:
    """Whether the pages a store holds compressed (:mod:`garaphpy.storage.page_codec`)
    cross the bus compressed and are decoded by the GPU before their pull
    (:mod:`garaphpy.kernels.gpu_codec`; those kept on the device stay
    compressed and are decoded at each use): when their ``compressed_bytes``
    and the CSC index the decoder reads on the device (``index_bytes``) save
    at least a tenth of the bytes the same pages take otherwise
    (``other_bytes``: packed, or as stored).  Bytes alone decide: the decode
    reads the compressed page and writes the plain one in device memory,
    whose bandwidth is some 50 times the bus's (its time is left out until
    measured on the device)."""
    return bool(enabled and compressed_bytes + index_bytes <= 0.9 * other_bytes)


def decode_buffer_edges(largest_page_edges: int, largest_shard_edges: int,
                        block_edges: int) -> int:
    """Edges a stream's buffer for decoded compressed pages holds.  A page is
    decoded and pulled a group of its shards at a time, so the buffer need
    not hold the largest page: a quarter of it (the pull of a quarter of a
    64 MiB page still spreads over some 40 shards), at least the largest
    shard with the two blocks its edges may start and end in, in whole
    blocks of ``block_edges``, and no more than the largest page.  What the
    buffers do not take the budget keeps pages in."""
    blocks = -(-max(-(-largest_page_edges // 4), largest_shard_edges + 2 * block_edges)
               // block_edges)
    return int(min(blocks, -(-largest_page_edges // block_edges) + 1) * block_edges)


def count_active_edges(active_out_edges: int, streamed_bytes: int, bus: float, count: float,
                       forced: str = "auto", active_vertices: int = 0,
                       most_vertices: int = 2 ** 62, kept_pull_seconds: float = 0.0,
                       read_seconds: float = 0.0) -> bool:
    """Whether the host counts the frontier's out-edges per page (the per-page
    choice's input), at ``count`` edges a second.  Never for a frontier of
    more than ``most_vertices`` vertices (it reaches nearly every page); else
    always for a forced choice, and for the automatic one when counting takes
    less than half the work it may spare: the streamed pages' copies, their
    reads from disk (``read_seconds``) and the kept pages' pulls."""
    if forced == "copy" or active_vertices > most_vertices:
        return False
    if forced != "auto":
        return True
    return active_out_edges / count < 0.5 * (streamed_bytes / bus + read_seconds
                                             + kept_pull_seconds)


# -- alpha: CPU only or hybrid (section 5.1) -----------------------------------------------
def paper_alpha(f: float, rho: float, ratio: float) -> float:
    """Garaph's Equation 3: alpha = min(NOTIFY_PULL_COST_FACTOR f rho, 1) * T_pull / T_GPU."""
    return min(config.NOTIFY_PULL_COST_FACTOR * f * rho, 1.0) * ratio


def notify_measures_t_notify(share: float, work: float, t_notify: float | None,
                             overhead: float) -> bool:
    """Whether a CPU notify-pull over ``share`` of the edges, which took
    ``work`` seconds beyond c_0 (``overhead``), measures T_notify.

    Yes when there is no estimate or no c_0 yet; when the work the current
    estimate predicts, ``share`` T_notify, is at least c_0; or when the
    work is more than ``config.HYBRID_NOTIFY_EXCESS`` times c_0.  Otherwise
    the iteration was almost all fixed cost, and its excess over the
    cheapest one seen, divided by a share of 1e-6, would read as the price
    of every later CPU iteration (grid:2000x2000 SSSP at half its pages:
    0.1 ms excesses and a few slow iterations climbed T_notify to 60x
    T_pull, and the CPU, cheaper than the GPU there, lost the iterations).  An estimate too high opens the gate to the iterations that
    bring it down."""
    if t_notify is None or overhead <= 0:
        return True
    return share * t_notify >= overhead or work > config.HYBRID_NOTIFY_EXCESS * overhead


def cpu_iteration_seconds(f: float, pulled: float, rho: float, t_notify: float,
                          t_pull: float, overhead: float, sync_seconds: float) -> float:
    """A CPU-only iteration's estimated cost: c_0 + min((f + p) rho T_notify,
    T_pull) + s_cpu (the measured form of alpha's numerator)."""
    return overhead + min((f + pulled) * rho * t_notify, t_pull) + sync_seconds


def gpu_iteration_seconds(f: float, num_edges: int | None, t_gpu: float,
                          sparse_overhead: float | None,
                          sparse_seconds_per_edge: float | None) -> float:
    """A GPU iteration's estimated cost: min(T_GPU, c_sparse + f |E| r_sparse),
    a dense pass or a sparse one over the frontier's f |E| out-edges (T_GPU
    alone while |E| or c_sparse is not known; no r_sparse counts as 0).  Charging T_GPU to every iteration, as the
    paper's alpha does, prices a tail iteration of a few thousand edges like
    a pass over every page, and the CPU, with the whole vertex data to copy
    first, then looks cheaper when it is not (kron:24 at a quarter of its
    pages)."""
    if not num_edges or sparse_overhead is None:
        return t_gpu
    return min(t_gpu, sparse_overhead + f * num_edges * (sparse_seconds_per_edge or 0.0))


def hybrid_mode(alpha: float | None, threshold: float = 1.0,
                forced: str | None = None) -> str:
    """``"hybrid"`` when alpha >= threshold, else ``"cpu"`` (no alpha yet: the
    CPU); a forced mode wins."""
    if forced is not None:
        return forced
    return "hybrid" if alpha is not None and alpha >= threshold else "cpu"


def switch_credit(credit: float, staying_seconds: float, switched_seconds: float,
                  switch_seconds: float) -> tuple[bool, float]:
    """Whether to switch processor now, by ski rental, and the credit after.

    The processor whose copy of the vertex data is current costs
    ``staying_seconds`` an iteration; the other would cost
    ``switched_seconds`` an iteration once its copy is brought up to date,
    which costs ``switch_seconds`` once.  Charging that copy to every
    iteration, as alpha does, never switches however many iterations the
    other processor would win; here each iteration it would win adds what
    staying lost to ``credit``, and the switch is made once the credit pays
    for the copy (so staying never costs more than twice the best choice in
    hindsight).  An iteration the other processor would not win clears the
    credit.

    Returns
    -------
    tuple of (bool, float)
        Switch now, and the credit to carry (0 after a switch).
    """
    if switched_seconds >= staying_seconds:
        return False, 0.0
    credit += staying_seconds - switched_seconds
    if credit >= switch_seconds:
        return True, 0.0
    return False, credit


def hybrid_device_loop(mode: str, cpu_joins: bool, loop_takes: bool, batches: bool,
                       forced: str = "auto") -> bool:
    """Whether a hybrid run hands its next iterations to the GPU's device loop
    (:meth:`~garaphpy.scheduler.gpu_engine.GpuEngine.iterate_batch`), as a run
    on the GPU alone would: when the policy chose the GPU (``mode``
    ``"hybrid"``) and the CPU would take no page (``cpu_joins`` False: the
    tail rule, or a policy that leaves the CPU out), the loop takes the
    iteration (``loop_takes``: resident pages, a sparse frontier, from
    ``config.GPU_LOOP_AFTER_ITERATIONS`` on), the policy lets one decision
    cover several iterations (``batches``) and the direction is not forced.
    The loop then runs until its frontier grows too large, it converges or
    the batch ends; the policy decides again after it."""
    return bool(mode == "hybrid" and not cpu_joins and loop_takes and batches
                and forced == "auto")


# -- the per-run choice: which processors finish the run -------------------------------------
#: The per-run choices, in the order a tie goes (one processor alone costs the
#: host nothing per iteration; both may share an iteration).
RUN_CHOICES = ("gpu", "cpu", "both")


def run_processors(cpu_seconds: float | None, gpu_seconds: float | None,
                   both_seconds: float | None, current: str | None = "both",
                   margin: float | None = None) -> str:
    """Which processors a hybrid run hands its next iterations to: ``"gpu"``
    (the GPU alone, in its own loop), ``"cpu"`` (the CPU alone, on its own
    driver path: its union-find start, label shortcuts and batches) or
    ``"both"`` (each iteration divided by alpha and the page queue).

    Parameters
    ----------
    cpu_seconds, gpu_seconds, both_seconds : float or None
        The estimated time to finish the run each way, from where it stands
        (a copy to bring up to date included); None: no estimate, that way
        is not weighed.
    current : {"gpu", "cpu", "both"} or None
        The choice in force (None before the first: the cheapest wins).
    margin : float, optional
        A choice other than ``current`` is taken only when its estimate is
        at most ``margin`` times ``current``'s (default
        ``config.HYBRID_RUN_SWITCH_MARGIN``); an estimate for ``current``
        that is None lets the cheapest win outright.

    Returns
    -------
    str
        The cheapest known way (ties: the GPU alone, then the CPU alone,
        then both), or ``current`` when it is within the margin or nothing
        is known (``"both"`` when nothing is and there is no ``current``).
    """
    margin = config.HYBRID_RUN_SWITCH_MARGIN if margin is None else margin
    estimates = {"cpu": cpu_seconds, "gpu": gpu_seconds, "both": both_seconds}
    known = {name: float(seconds) for name, seconds in estimates.items()
             if seconds is not None and math.isfinite(seconds)}
    if not known:
        return current or "both"
    best = min(RUN_CHOICES, key=lambda name: (known.get(name, math.inf),
                                              RUN_CHOICES.index(name)))
    if current in known and best != current and known[best] > margin * known[current]:
        return current
    return best


def expected_iterations(num_vertices: int | None, num_edges: int, in_degree_skew: float | None,
                        done: int = 0, mesh_skew: float | None = None,
                        prior: float | None = None) -> float:
    """Iterations a frontier program is expected to take from iteration
    ``done`` on, from the graph's shape: about its diameter, sqrt(|V|) for a
    mesh (an in-degree skew at most ``mesh_skew``,
    ``config.HYBRID_MESH_SKEW``: roads, grids), log(|V|) / log(|E| / |V|)
    otherwise (``prior``, ``config.HYBRID_RUN_ITERATIONS_PRIOR``, without a
    shape).  A run already past that is expected to go on as long again
    (so a wrong guess costs at most about twice the better choice in
    hindsight); at least one."""
    mesh_skew = config.HYBRID_MESH_SKEW if mesh_skew is None else mesh_skew
    prior = config.HYBRID_RUN_ITERATIONS_PRIOR if prior is None else prior
    if not num_vertices or num_vertices < 2 or in_degree_skew is None:
        total = float(prior)
    elif in_degree_skew <= mesh_skew:
        total = math.sqrt(num_vertices)
    else:
        mean_degree = max(num_edges / num_vertices, 2.0)
        total = math.log(num_vertices) / math.log(mean_degree) + 1.0
    return max(total - done, float(done), 1.0)


def cpu_alone_engine(union_find_start: bool, cpu_seconds: float | None,
                     build_seconds: float) -> bool:
    """Whether a hybrid run the per-run choice gives the CPU alone runs it on
    an engine planned for the CPU alone (made then: its own vertex state,
    ``build_seconds`` of work) rather than on the hybrid run's CPU engine:
    for its union-find start (``union_find_start``), or where the CPU's
    estimated time to finish, ``cpu_seconds``, is at least what making it
    costs (its shortcuts, fused pulls and batches then pay for it)."""
    return bool(union_find_start or (cpu_seconds is not None and cpu_seconds >= build_seconds))


def frontier_switch_point(cpu_seconds, gpu_seconds, steps: int = 24) -> float | None:
    """The frontier share f in (0, 1] at which the cheaper processor of an
    iteration changes (``cpu_seconds(f)`` and ``gpu_seconds(f)``: an
    iteration's estimated cost on each), by bisection over log f from
    2^-40 to 1; None where one is cheaper (or as cheap) over the whole
    range.  A hybrid run on one processor decides again when its frontier
    crosses it."""
    def cpu_cheaper(f: float) -> bool:
        return cpu_seconds(f) < gpu_seconds(f)

    low, high = -40.0, 0.0
    side = cpu_cheaper(2.0 ** low)
    if cpu_cheaper(1.0) == side:
        return None
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if cpu_cheaper(2.0 ** middle) == side:
            low = middle
        else:
            high = middle
    return 2.0 ** high


# -- page assignment (section 5.1's queue, with the tail rule) ------------------------------
def take_page(own_seconds: float | None, rest_seconds: float | None, own_backlog: float,
              other_backlog: float) -> bool:
    """Whether a processor takes the next page.

    Parameters
    ----------
    own_seconds : float or None
        Its estimated time for the page (None: no rate measured yet).
    rest_seconds : float or None
        The other processor's estimated time for everything queued, this
        page included.
    own_backlog, other_backlog : float
        Seconds until each finishes the pages it holds.

    Returns
    -------
    bool
        False when it would finish the page later than the other processor
        would finish the page and everything else queued.
    """
    if own_seconds is None or rest_seconds is None:
        return True
    return own_backlog + own_seconds <= other_backlog + rest_seconds
