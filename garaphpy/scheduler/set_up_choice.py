"""A hybrid run's choices before set-up: the GPU at all, the GPU alone (Garaph section 5.1).

Garaph shares each iteration between the CPU and the GPU (section 5.1's
queue and cost ratio alpha).  Both cost a set-up before the first iteration:
the GPU's (cupy, the CUDA context, the pages copied) about a second in a
fresh process and 45-75 ms in one that has set a GPU up before; a hybrid
run's (both engines and the start-up probe) 130-370 ms on a road network on
the H200 host, 2026-12-03, where the CPU alone's was 6-97 ms.  So before
anything is set up, a hybrid run weighs:

* whether the GPU is worth setting up at all (:func:`gpu_set_up_pays`): not
  where the CPU alone is expected to end the whole run
  (:func:`cpu_run_seconds`) sooner than the GPU's set-up
  (:func:`gpu_set_up_seconds`) and its own iterations, the work of
  each from the program's declarations and the graph's shape
  (:func:`expected_work`: a tolerance's iterations, a union-find start, a
  frontier's levels, sparse on a mesh);
* whether the GPU runs alone (:func:`gpu_alone`): where every page fits
  the GPU's budget beside the vertex data, its iterations cost a fraction
  of the CPU's (7-48x faster on every resident graph measured), and sharing
  them with the CPU never won beyond the machine's noise, so the run is the
  GPU's own, with nothing of the CPU set up.  Pages beyond the budget are
  where the CPU's share may pay (the per-iteration choice, and the per-run
  choice of :mod:`.run_choice`): for a program of whole pulls only where
  what sharing them saves exceeds the CPU's side of the set-up
  (:func:`sharing_pays`).

Where the pages do not all fit the host's budget (the storage tier, Garaph
section 2.2), each processor alone also reads from storage: every page
once, then each pass the pages its tiers leave out (the CPU alone: beyond
the host's cache; the GPU alone: beyond its budget and the host's cache,
:func:`gpu_alone_disk_bytes`), at the storage's measured speed.

Each choice is recorded with its inputs in ``RunPlan.gpu_set_up``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import config, progress
from . import decisions


@dataclass(frozen=True)
class ExpectedWork:
    """A run's work as both processors' estimates read it, before anything
    is measured.

    Attributes
    ----------
    passes : float
        Full pulls over the in-edges.
    iterations : float
        Iterations over the whole graph, each a processor's fixed cost.
    sparse_levels : float
        Iterations of a frontier too small for a whole-graph pass (a mesh's
        levels): the CPU's sparse batches, the GPU's device loop.
    """

    passes: float
    iterations: float
    sparse_levels: float = 0.0


def expected_work(*, has_tolerance: bool, max_iterations: int, levels: float,
                  weighted: bool = False, union_find: bool = False,
                  final_once_set: bool = False) -> ExpectedWork:
    """A run's :class:`ExpectedWork` from its program and the graph's shape.

    * A program with a tolerance: ``max_iterations`` whole pulls.
    * A union-find start (``union_find``): the start priced as
      ``config.HYBRID_UNION_FIND_PULLS`` pulls, then the pull that checks it.
    * A frontier program: ``levels`` (the graph shape's expected iterations,
      :func:`~garaphpy.scheduler.decisions.expected_iterations`) times
      ``config.HYBRID_WEIGHTED_ROUNDS_PER_LEVEL`` where it reads edge
      weights (``weighted``), at most ``max_iterations``.  Below
      ``config.HYBRID_SPARSE_LEVELS`` levels each is a whole pull; from
      there on (meshes) each is sparse and the edges are passed over about
      once a round; a program whose values are final once set
      (``final_once_set``) pulls each vertex once: one pass in all.
    """
    if has_tolerance:
        return ExpectedWork(float(max_iterations), float(max_iterations))
    if union_find:
        return ExpectedWork(config.HYBRID_UNION_FIND_PULLS + 1.0, 1.0)
    rounds = config.HYBRID_WEIGHTED_ROUNDS_PER_LEVEL if weighted else 1.0
    steps = min(levels * rounds, float(max_iterations))
    if levels >= config.HYBRID_SPARSE_LEVELS:
        passes = min(1.0 if final_once_set else rounds, steps)
        return ExpectedWork(passes, 0.0, steps)
    return ExpectedWork(min(1.0, steps) if final_once_set else steps, steps)


def cpu_run_seconds(num_edges: int, threads: int, passes: float,
                    edges_per_second_per_thread: float | None = None,
                    iterations: float | None = None,
                    iteration_seconds: float | None = None,
                    sparse_levels: float = 0.0, weighted: bool = False) -> float:
    """A whole run on the CPU alone before anything is measured: ``passes``
    pulls over ``num_edges`` in-edges on ``threads`` threads at
    ``edges_per_second_per_thread`` each, ``iterations`` (default
    ``passes``) of ``iteration_seconds`` each, and ``sparse_levels`` of
    ``config.HYBRID_CPU_LEVEL_SECONDS`` each, or of
    ``config.HYBRID_CPU_ROUND_SECONDS`` for a program that reads edge
    weights (``weighted``; defaults: ``config``'s
    ``HYBRID_CPU_EDGES_PER_SECOND_PER_THREAD``, ``HYBRID_CPU_ITERATION_SECONDS``)."""
    rate = edges_per_second_per_thread or config.HYBRID_CPU_EDGES_PER_SECOND_PER_THREAD
    fixed = config.HYBRID_CPU_ITERATION_SECONDS if iteration_seconds is None \
        else iteration_seconds
    level = config.HYBRID_CPU_ROUND_SECONDS if weighted else config.HYBRID_CPU_LEVEL_SECONDS
    return (passes * num_edges / (max(threads, 1) * rate)
            + (passes if iterations is None else iterations) * fixed
            + sparse_levels * level)


def gpu_run_seconds(set_up_seconds: float, sparse_levels: float = 0.0,
                    iterations: float = 0.0, passes: float = 0.0, num_edges: int = 0,
                    streamed_bytes: int = 0) -> float:
    """A whole run on the GPU alone: its set-up, ``sparse_levels`` of its
    device loop at ``config.HYBRID_LOOP_ITERATION_SECONDS`` each,
    ``iterations`` whole-graph iterations at
    ``config.HYBRID_GPU_ITERATION_SECONDS`` each beside their edges, and
    ``passes`` pulls over ``num_edges`` edges at
    ``config.HYBRID_GPU_EDGES_PER_SECOND``, each also moving
    ``streamed_bytes`` of pages beyond the GPU's budget over the bus at
    ``config.GPU_BUS_BYTES_PER_SECOND`` (PageRank's 20 iterations cost more
    than its set-up on the small SNAP graphs: 4.6 ms against 7.0 on
    ca-HepPh, H200 host, 2026-12-05)."""
    pass_seconds = num_edges / config.HYBRID_GPU_EDGES_PER_SECOND \
        + streamed_bytes / config.GPU_BUS_BYTES_PER_SECOND
    return (set_up_seconds + sparse_levels * config.HYBRID_LOOP_ITERATION_SECONDS
            + iterations * config.HYBRID_GPU_ITERATION_SECONDS + passes * pass_seconds)


def gpu_set_up_seconds(page_bytes: int, fixed_seconds: float | None = None,
                       bytes_per_second: float | None = None) -> float:
    """What setting the GPU up for a run is expected to take: ``fixed_seconds``
    (:meth:`MeasuredSetUps.fixed_seconds`; None:
    ``config.HYBRID_GPU_FIRST_SET_UP_SECONDS``) and copying ``page_bytes`` of pages at
    ``bytes_per_second`` (``config.HYBRID_GPU_SET_UP_BYTES_PER_SECOND``)."""
    if fixed_seconds is None:
        fixed_seconds = config.HYBRID_GPU_FIRST_SET_UP_SECONDS
    if bytes_per_second is None:
        bytes_per_second = config.HYBRID_GPU_SET_UP_BYTES_PER_SECOND
    return fixed_seconds + page_bytes / bytes_per_second


class MeasuredSetUps:
    """What this process measured of its GPU set-ups, for the next runs'
    :func:`gpu_set_up_seconds`.

    A process's first set-up imports cupy and makes the CUDA context (most of
    ``config.HYBRID_GPU_FIRST_SET_UP_SECONDS``); the later ones cost what a
    run's own set-up costs, and that differs by program (ca-HepPh on the H200
    host, 2026-12-04: 32 ms for PageRank, 12-14 ms for BFS, SSSP and CC).  So
    each set-up after the first is kept per program, as its whole set-up
    (validation to the first iteration) less the pages' copy at
    ``config.HYBRID_GPU_SET_UP_BYTES_PER_SECOND``.  A program's first set-up
    on a machine also compiles its GPU kernels, and one after a cold read
    pays the disk: kron22 on the H200 host (2026-12-05) measured 0.42-0.85 s
    that way against 0.0-0.14 s warm.  So a program's next set-up is priced
    at the least of its last :attr:`KEPT` (a spike counts once).

    Parameters
    ----------
    count : int
        Set-ups made so far.
    fixed : dict, optional
        Seconds of the last set-ups after the first, by program name (a
        number or a list, the latest last), the latest program last.
    """

    #: set-ups kept per program
    KEPT = 2

    def __init__(self, count: int = 0, fixed: dict | None = None):
        self.count = count
        self.fixed = {program: list(seconds) if isinstance(seconds, (list, tuple))
                      else [seconds] for program, seconds in (fixed or {}).items()}

    def note(self, program: str, seconds: float, page_bytes: int) -> None:
        """A set-up of ``program`` took ``seconds``, ``page_bytes`` of pages copied."""
        if self.count:
            kept = self.fixed.pop(program, [])
            kept.append(max(0.0, seconds - gpu_set_up_seconds(page_bytes, 0.0)))
            self.fixed[program] = kept[-self.KEPT:]
        self.count += 1

    def fixed_seconds(self, program: str) -> float:
        """The next set-up's part beside the pages' copy: the first's prior,
        else the least of ``program``'s last ones, else of the latest
        program's, else ``config.HYBRID_GPU_SET_UP_SECONDS``."""
        if not self.count:
            return config.HYBRID_GPU_FIRST_SET_UP_SECONDS
        if program in self.fixed:
            return min(self.fixed[program])
        if self.fixed:
            return min(next(reversed(self.fixed.values())))
        return config.HYBRID_GPU_SET_UP_SECONDS


def gpu_set_up_pays(cpu_seconds: float, gpu_seconds: float,
                    margin: float | None = None) -> bool:
    """Whether a hybrid run sets the GPU up at all.  Not when the CPU alone is
    expected to finish the whole run (``cpu_seconds``) in less than
    ``margin`` times what the GPU alone is expected to take
    (``gpu_seconds``, :func:`gpu_run_seconds`, from below: its set-up and
    its device loop's levels), ``margin`` being
    ``config.HYBRID_RUN_SWITCH_MARGIN``: the CPU alone is chosen where it
    clearly finishes first."""
    margin = config.HYBRID_RUN_SWITCH_MARGIN if margin is None else margin
    return not cpu_seconds < margin * gpu_seconds


def gpu_alone(page_bytes: int, vertex_bytes: int, gpu_budget: int) -> bool:
    """Whether a hybrid run whose GPU is set up runs on it alone: every page
    (``page_bytes``) fits ``gpu_budget`` beside the vertex data
    (``vertex_bytes``, the estimate :func:`gpu_vertex_bytes` gives)."""
    return page_bytes + vertex_bytes <= gpu_budget


def sharing_pays(passes: float, cpu_pass_seconds: float, gpu_pass_seconds: float,
                 num_vertices: int) -> bool:
    """Whether a hybrid run over pages beyond the GPU's budget shares its
    pulls with the CPU rather than run on the GPU alone.  Sharing a pull at
    both processors' full rates saves the GPU ``g^2 / (c + g)`` of its ``g``
    (``c``, ``g``: a pass on each, :func:`cpu_run_seconds` and
    :func:`gpu_run_seconds` per pass), ``passes`` times; what it costs first
    is the CPU's side of the set-up (its engine, the host's vertex data
    pinned, both processors probed) at
    ``config.HYBRID_SHARING_SET_UP_SECONDS_PER_VERTEX``.  kron22 PageRank at
    a quarter of its pages on the H200 host (2026-12-05): 20 pulls would save
    at most 32 ms, the CPU's side cost 170 ms."""
    if gpu_pass_seconds <= 0 or passes <= 0:
        return False
    saved = passes * gpu_pass_seconds ** 2 / (cpu_pass_seconds + gpu_pass_seconds)
    return saved > num_vertices * config.HYBRID_SHARING_SET_UP_SECONDS_PER_VERTEX


def gpu_alone_disk_bytes(disk_sizes, image_sizes, gpu_held_bytes: int,
                         cache_room_bytes: int) -> int:
    """Bytes each pass after the first of a run on the GPU alone reads from
    storage: the GPU's budget keeps the longest prefix of pages whose bytes
    as stored (``disk_sizes``) fit ``gpu_held_bytes``, the host's cache the
    longest prefix of the others whose images (``image_sizes``) fit
    ``cache_room_bytes``, and the rest are read every pass (the prefix rules
    of the GPU's kept pages and of
    :func:`~garaphpy.storage.host_budget.cache_beside`)."""
    held = cached = read = 0
    gpu_full = cache_full = False
    for stored, image in zip(disk_sizes, image_sizes):
        gpu_full = gpu_full or held + stored > gpu_held_bytes
        if not gpu_full:
            held += stored
            continue
        cache_full = cache_full or cached + image > cache_room_bytes
        if cache_full:
            read += stored
        else:
            cached += image
    return read


@dataclass(frozen=True)
class StorageReads:
    """What a run on either processor alone reads from storage, where its
    pages do not all fit the host's budget.

    Attributes
    ----------
    first_bytes : int
        Every page once, as stored (the host cache's fill, the GPU's kept pages).
    cpu_pass_bytes, gpu_pass_bytes : int
        Each later pass on the CPU alone, on the GPU alone.
    bytes_per_second : float
        The storage directories' read speed.
    """

    first_bytes: int
    cpu_pass_bytes: int
    gpu_pass_bytes: int
    bytes_per_second: float

    def seconds(self, passes: float) -> tuple[float, float]:
        """The reads of ``passes`` pulls on the CPU alone and on the GPU alone, in seconds."""
        later = max(passes - 1.0, 0.0)
        return ((self.first_bytes + later * self.cpu_pass_bytes) / self.bytes_per_second,
                (self.first_bytes + later * self.gpu_pass_bytes) / self.bytes_per_second)

    def pass_seconds(self) -> tuple[float, float]:
        """A later pass's reads on the CPU alone and on the GPU alone, in seconds."""
        return (self.cpu_pass_bytes / self.bytes_per_second,
                self.gpu_pass_bytes / self.bytes_per_second)


def storage_reads(store, host_memory: int | None, readahead_bytes: int | None,
                  gpu_memory: int | None) -> StorageReads | None:
    """:class:`StorageReads` of a run of ``store`` under its budgets (the run's
    options), one page reader a processor; None where the host's budget
    holds every page.  The GPU's budget ``gpu_memory`` holds pages beside
    its vertex data (:func:`gpu_vertex_bytes`); None: every page (it is
    resolved on the device only once the GPU is set up)."""
    from ..storage.host_budget import plan_run_pages
    from ..storage.read_ratio import disk_read_speed

    plan, _ = plan_run_pages(store, 1, host_memory, readahead_bytes)
    if plan.all_cached:
        return None
    stored = [page.disk_bytes for page in store.pages]
    gpu_pass = 0
    if gpu_memory is not None:
        gpu_pass = gpu_alone_disk_bytes(
            stored, [page.nbytes for page in store.pages],
            int(gpu_memory) - gpu_vertex_bytes(store.num_vertices),
            plan.budget_bytes - plan.fixed_bytes - plan.readahead_bytes)
    speed = plan.disk_bytes_per_s or disk_read_speed(store.storage_dirs)
    return StorageReads(sum(stored), sum(stored[k] for k in plan.streamed), gpu_pass,
                        float(speed))


def page_bytes(store) -> int:
    """The bytes of every page of ``store``."""
    return sum(page.nbytes for page in store.pages)


def gpu_copied_bytes(store, gpu_memory: int | None) -> int:
    """The page bytes a run copies to the GPU at its set-up: all, or what its
    budget ``gpu_memory`` holds; none where an earlier run kept the graph's
    edges on the device (``Store.kept_device_edges``)."""
    if store.kept_device_edges is not None:
        return 0
    total = page_bytes(store)
    return total if gpu_memory is None else min(total, gpu_memory)


def gpu_streamed_bytes(store, gpu_memory: int | None) -> int:
    """The page bytes a pass of a run on the GPU alone moves over the bus: the
    pages as they cross it (stored, where compressed) beyond what its budget
    ``gpu_memory`` holds beside the vertex data (:func:`gpu_vertex_bytes`);
    none where no budget is given (then the pages are taken to fit) or an
    earlier run kept the graph's edges on the device."""
    if gpu_memory is None or store.kept_device_edges is not None:
        return 0
    wire = sum(page.disk_bytes for page in store.pages)
    held = int(gpu_memory) - gpu_vertex_bytes(store.num_vertices)
    return max(0, wire - max(held, 0))


def gpu_vertex_bytes(num_vertices: int) -> int:
    """The GPU's vertex data before it is made, for the choice of
    :func:`gpu_alone`: ``config.HYBRID_GPU_VERTEX_BYTES`` a vertex."""
    return int(num_vertices * config.HYBRID_GPU_VERTEX_BYTES)


def weigh_gpu_set_up(graph, program_name: str, options, threads: int, max_iterations: int,
                     tolerance: float | None, *, weighted: bool, shortcut_labels: bool,
                     final_once_set: bool, measured: MeasuredSetUps) -> dict:
    """A hybrid run's first choice, before cupy is imported: whether setting the
    GPU up can pay (:func:`gpu_set_up_pays`), or the CPU alone is expected to
    finish the whole run sooner than the GPU alone; its entry for
    ``RunPlan.gpu_set_up``.

    Both are priced from the work the program and the graph's shape let one
    expect (:func:`expected_work`): the CPU's at its pull rate and fixed
    costs, the GPU's from below (what this process measured of its last
    set-up, ``measured``, or the first's prior, the pages the GPU budget
    holds copied unless kept from an earlier run, and its device loop's
    sparse levels), so the CPU alone is chosen only where it clearly wins;
    both beside their reads from storage (:func:`storage_reads`).

    Parameters
    ----------
    graph : Graph
    program_name : str
        The program's class name (what ``measured`` keys its set-ups by).
    options : RunOptions
        The run's budgets: ``gpu_memory``, ``host_memory``, ``readahead_bytes``.
    threads, max_iterations : int
    tolerance : float or None
    weighted, shortcut_labels, final_once_set : bool
        The program reads edge weights the graph has; declares label
        shortcuts; its values are final once set.
    measured : MeasuredSetUps
    """
    work = expected_work(
        has_tolerance=tolerance is not None, max_iterations=max_iterations,
        levels=decisions.expected_iterations(graph.num_vertices, graph.num_edges,
                                             graph.store.in_degree_skew),
        weighted=weighted,
        union_find=decisions.union_find_start(shortcut_labels, not graph.directed, "cpu"),
        final_once_set=final_once_set)
    fixed = measured.fixed_seconds(program_name)
    set_up = gpu_set_up_seconds(gpu_copied_bytes(graph.store, options.gpu_memory), fixed)
    streamed = gpu_streamed_bytes(graph.store, options.gpu_memory)
    reads = storage_reads(graph.store, options.host_memory, options.readahead_bytes,
                          options.gpu_memory)
    cpu_reads, gpu_reads = (0.0, 0.0) if reads is None else reads.seconds(work.passes)
    cpu_pass_reads, gpu_pass_reads = (0.0, 0.0) if reads is None else reads.pass_seconds()
    entry = decisions.fixed(
        gpu_set_up_pays,
        cpu_seconds=cpu_reads + cpu_run_seconds(
            graph.num_edges, threads, work.passes, iterations=work.iterations,
            sparse_levels=work.sparse_levels, weighted=weighted),
        gpu_seconds=gpu_reads + gpu_run_seconds(
            set_up, work.sparse_levels, work.iterations, work.passes, graph.num_edges,
            streamed))
    entry.update(cpu_pass_seconds=cpu_pass_reads + cpu_run_seconds(
                     graph.num_edges, threads - 1, 1),
                 gpu_pass_seconds=gpu_pass_reads + gpu_run_seconds(
                     0.0, 0.0, 1, 1, graph.num_edges, streamed),
                 whole_pulls=tolerance is not None,
                 storage_reads=None if reads is None else dataclasses.asdict(reads))
    entry.update(passes=work.passes, iterations=work.iterations,
                 sparse_levels=work.sparse_levels, threads=threads, set_up_fixed=fixed,
                 set_ups_before=measured.count, gpu_set_up_seconds=set_up)
    if not entry["choice"]:
        progress.logger("hybrid").info(
            f"hybrid: the CPU alone (the run estimated at {entry['cpu_seconds']:.2f} s, "
            f"the GPU's at {entry['gpu_seconds']:.2f} s from below)")
    return entry


def gpu_alone_mode(graph, gpu_memory: int | None, entry: dict) -> str:
    """A hybrid run's mode once its GPU is usable (the default policy, the
    direction Garaph's): ``"gpu"`` where every page fits the GPU's budget
    ``gpu_memory`` beside the vertex data (:func:`gpu_alone`), so nothing of
    the CPU is set up, or where a program of whole pulls would not gain
    from sharing them what the CPU's side of the set-up costs
    (:func:`sharing_pays`), else ``"hybrid"``; the choice and its inputs
    added to ``entry`` (:func:`weigh_gpu_set_up`'s)."""
    pages = page_bytes(graph.store)
    vertex_bytes = gpu_vertex_bytes(graph.num_vertices)
    budget = config.gpu_budget(gpu_memory)
    fits = gpu_alone(pages, vertex_bytes, budget)
    shares = fits or not entry.get("whole_pulls") or sharing_pays(
        entry["passes"], entry["cpu_pass_seconds"], entry["gpu_pass_seconds"],
        graph.num_vertices)
    alone = fits or not shares
    entry.update(gpu_alone=alone, page_bytes=pages, vertex_bytes=vertex_bytes,
                 gpu_budget=budget, sharing_pays=not alone)
    if fits:
        progress.logger("hybrid").info(
            f"hybrid: the GPU alone (every page, {pages / 2**20:.1f} MiB, fits its "
            f"budget of {budget / 2**20:.1f} MiB)")
    elif alone:
        progress.logger("hybrid").info(
            "hybrid: the GPU alone (sharing its pulls with the CPU would save less than "
            "setting the CPU's side up costs)")
    return "gpu" if alone else "hybrid"
