"""A partitioned run over the workers of a Dask cluster (Garaph sections 2.2, 4.1, 5; Pregel's supersteps).

The client plans the run from the store's CSC index and page table alone
(:func:`~garaphpy.distributed.partition.cut_partitions`), places one
:class:`~garaphpy.distributed.worker.PartitionWorker` per partition on the
workers (round robin), each made and wired to the others in one call to its
worker's host (:mod:`garaphpy.distributed.hosts`: an actor the client keeps
between runs), and drives synchronous iterations with small messages: each
round it sends every worker the iteration's aggregates and gets back a few
numbers (L1 change, activations, bytes sent, its share of the next
aggregates), which it reduces.  The values move worker to worker
(:mod:`garaphpy.distributed.exchange`); the client reads no edge and sees
the values once, at the end (with the run's last call where it ends the
run).

Faults: every ``checkpoint_every`` iterations each worker writes its owned
values (the same iteration for all); when a worker is lost, the run makes its
partitions again on live workers, every partition rolls back to the last
complete checkpoint (or to the initial values), and the run goes on from
there, so it ends with the values of an uninterrupted run.
"""

from __future__ import annotations

import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .. import config
from ..errors import ConfigError, GaraphError
from ..scheduler import decisions
from ..scheduler.records import IterationRecord
from .exchange import aggregate_monoids, reduce_aggregates
from .frontier import frontier_pulls
from .partition import cut_partitions, partition_bytes
from .hosts import MAKE_POLL_SECONDS, HostError, PartitionHandle, forget_hosts, hosts_on
from .worker import PartitionWorker, WorkerError, WorkerSetup

#: Seconds a client made from a scheduler address waits for the scheduler.
CONNECT_TIMEOUT_SECONDS = 10
#: Recoveries from lost workers a run makes before it gives up.
MAX_RECOVERIES = 8
#: Seconds a lost worker's peers are given to answer whether they live.
PING_TIMEOUT_SECONDS = 10
#: Seconds a worker waits for a peer to take its pairs before it counts it as lost.
EXCHANGE_TIMEOUT_SECONDS = 60.0
#: Iterations a call of the client runs at most (the records reach
#: ``on_iteration`` at each call's end).
ITERATIONS_PER_CALL = 32


class DistributedRunError(GaraphError):
    """A partitioned run cannot go on (its message names the worker or the address)."""


def import_distributed():
    """The ``distributed`` module, or a one-line error saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise ConfigError("client=/scheduler=: partitioned runs need Dask's distributed "
                          "scheduler: pip install garaphpy[dask]") from None
    return distributed


def connect(client=None, scheduler: str | None = None):
    """``(client, made_here)``: the ``dask.distributed.Client`` given, or one
    connected to ``scheduler`` (an address such as ``tcp://host:8786``)."""
    distributed = import_distributed()
    if isinstance(client, str):
        client, scheduler = None, client
    if client is not None:
        if not isinstance(client, distributed.Client):
            raise ConfigError(f"client={client!r}: expected a dask.distributed.Client or a "
                              "scheduler address")
        return client, False
    if not isinstance(scheduler, str) or not scheduler:
        raise ConfigError(f"scheduler={scheduler!r}: expected an address such as "
                          "'tcp://host:8786'")
    try:
        return distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_SECONDS,
                                  set_as_default=False), True
    except (OSError, TimeoutError, ValueError) as error:
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise DistributedRunError(f"scheduler={scheduler!r}: no Dask scheduler answered "
                                  f"there within {CONNECT_TIMEOUT_SECONDS} s ({reason})") from None


@dataclass
class PartitionedOutcome:
    """What a partitioned run gives :func:`garaphpy.api.execute` to make its Result."""

    values: np.ndarray
    records: list
    converged: bool
    stop_reason: str
    setup_seconds: float
    description: dict = field(default_factory=dict)


class PartitionedRun:
    """One run over a Dask cluster's workers (see the module).

    Parameters
    ----------
    client : dask.distributed.Client
    store : garaphpy.storage.store.Store
        The graph's store, opened on the client (its page table and CSC index
        are read; its pages are not).
    program : VertexProgram
    sources : int64 array
    partitions : int or None
        P (default: one per worker).
    threads : int or None
        Kernel threads per worker (default: the worker's own).
    checkpoint_every : int
        Iterations between checkpoints (0: none; a lost worker then rolls the
        run back to its start).
    checkpoint_dir : path
        Where the partitions' checkpoints go (shared by the workers).
    program_cache : str, optional
        Where the workers keep the compiled program (default: their own cache).
    symmetric : bool
        The graph is symmetric (CC's union-find start).
    mode : {"hybrid", "cpu", "gpu"}
        The processors: ``"hybrid"``, a worker whose Dask resources name a
        GPU pulls its partitions there and the others on their CPU threads;
        ``"cpu"``, every worker on its CPU; ``"gpu"``, only the workers with
        a GPU hold partitions (:func:`~garaphpy.scheduler.decisions.partition_processor`).    float32_contributions : bool
        The CPU partitions hold their precomputed source-side gathers in
        float32 where every partition pulls on the CPU: the one-process rule
        (:func:`~garaphpy.scheduler.decisions.float32_contributions`, over the
        run's tolerance), taken by the caller.
    """

    def __init__(self, client, store, program, sources, *, partitions, threads,
                 checkpoint_every: int, checkpoint_dir: Path, program_cache: str | None = None,
                 symmetric: bool = False, mode: str = "hybrid",
                 float32_contributions: bool = False):
        self.client = client
        self.mode = mode
        self.store = store
        self.program = program
        self.sources = np.asarray(sources, np.int64)
        self.checkpoint_every = checkpoint_every
        self.checkpoint_dir = Path(checkpoint_dir)
        self.program_cache = program_cache
        self.ids_store_path = None
        #: the one-process rule (a symmetric graph, labels over user ids), taken
        #: by each partition over its own edges before the first iteration
        self.union_find_start = decisions.union_find_start(
            program.shortcut_labels, symmetric, "cpu") and frontier_pulls(program)
        self.workers = self._workers()
        count = len(self.workers) if partitions is None else partitions
        self.partitions = tuple(cut_partitions(store.in_offsets, count))
        self.threads = threads
        uses = {p for f in type(program).functions.values() for p in f.parameters}
        self.reads_weights = "weight" in uses
        self.weighted_in = "weighted_in_degree" in uses
        candidates = self._candidates(self.workers)
        self.placement = [candidates[p % len(candidates)] for p in range(len(self.partitions))]
        #: as the one process, on the CPU alone (a GPU partition keeps float64)
        self.float32_contributions = bool(float32_contributions) and all(
            self.processor(address) == "cpu" for address in self.placement)
        self._check_memory()
        #: each partition's handle (:class:`~.hosts.PartitionHandle`) and key
        self.actors: list = [None] * len(self.partitions)
        self.keys: list = [None] * len(self.partitions)
        #: worker address -> its host, for the run's partitions (:meth:`close`)
        self.hosts_used: dict = {}
        self.addresses: list = [None] * len(self.partitions)
        self.epoch = 0
        #: each partition's worker as it describes itself (at the start)
        self.worker_descriptions: list[dict] = [{} for _ in self.partitions]
        self.recoveries: list[dict] = []
        self.checkpoints: list[int] = []
        self.max_iterations = 0
        #: each partition's owned values, where the last call ended the run
        self.final_values = None

    # -- set-up ----------------------------------------------------------------------------
    def _workers(self) -> dict:
        info = self.client.scheduler_info(n_workers=-1)["workers"] \
            if _takes_n_workers(self.client) else self.client.scheduler_info()["workers"]
        if not info:
            raise DistributedRunError(f"the Dask cluster at {self.client.scheduler.address} "
                                      "has no worker")
        return dict(info)

    def _candidates(self, workers: dict) -> list[str]:
        """The workers that may hold partitions, sorted: every one, or with
        ``mode='gpu'`` those whose resources name a GPU."""
        if self.mode != "gpu":
            return sorted(workers)
        with_gpu = sorted(a for a, w in workers.items() if _gpus(w) > 0)
        if not with_gpu:
            raise DistributedRunError(
                f"mode='gpu': no worker of the Dask cluster at {self.client.scheduler.address} "
                "has a GPU resource (start one with `dask worker ADDRESS --resources GPU=1`, "
                "or Worker(..., resources={'GPU': 1}))")
        return with_gpu

    def processor(self, address: str) -> str:
        """What pulls the partitions placed on the worker at ``address``."""
        return decisions.partition_processor(self.mode, _gpus(self.workers.get(address, {})))

    def _check_memory(self) -> None:
        itemsize = np.dtype(type(self.program).value_dtype).itemsize
        need: dict[str, list] = {}
        for partition, address in zip(self.partitions, self.placement):
            need.setdefault(address, []).append(
                (partition.index, partition_bytes(self.store, partition, itemsize)))
        for address, parts in need.items():
            limit = int(self.workers[address].get("memory_limit") or 0)
            total = sum(size for _, size in parts)
            if limit and total > limit:
                indices = ", ".join(str(index) for index, _ in parts)
                raise DistributedRunError(
                    f"worker {address}: partition {indices} needs about {_mib(total)} of host "
                    f"memory, its memory limit is {_mib(limit)}; use more workers or "
                    "partitions, or workers with more memory")

    def _setup(self, index: int) -> WorkerSetup:
        address = self.placement[index]
        threads = self.threads or int(self.workers.get(address, {}).get("nthreads", 1))
        return WorkerSetup(str(self.store.path), self.program, self.partitions, index,
                           self.sources, max(1, threads), self.reads_weights, self.weighted_in,
                           self.program_cache, self.ids_store_path,
                           EXCHANGE_TIMEOUT_SECONDS, self.union_find_start,
                           self.processor(address), self.float32_contributions)

    def _make_actors(self, indices, wire: bool = False) -> list:
        """Make the partitions ``indices`` on their placed workers, all at once
        (each worker opens the store and reads its pages beside the others),
        each by its worker's host (:mod:`.hosts`: one actor call, not a Dask
        actor of its own); a lost partition's former one is let go.  With
        ``wire`` (every partition made), each is also wired to the others in
        the same call (:meth:`_wire`'s): their descriptions."""
        self._drop([(self.hosts_used.get(self.addresses[index]), self.keys[index])
                    for index in indices if self.keys[index] is not None])
        try:
            hosts = hosts_on(self.client, [self.placement[index] for index in indices],
                             live=self.workers)
        except HostError as error:
            index = next(i for i in indices if self.placement[i] == error.address)
            raise DistributedRunError(f"worker {error.address}: partition {index} could not "
                                      f"be set up: {_one_line(error.error)}") from None
        self.hosts_used.update(hosts)
        for index in indices:
            self.keys[index] = f"garaphpy-partition-{index}-{uuid.uuid4().hex[:8]}"
            # a GPU partition's coroutine methods are a CPU one's
            self.actors[index] = PartitionHandle(hosts[self.placement[index]], self.keys[index],
                                                 PartitionWorker)
        wiring = (self.actors, self.placement, self.epoch) if wire else None
        futures = {index: hosts[self.placement[index]].make(
            self.keys[index], self._setup(index), wiring) for index in indices}
        results = {}
        # the first failure as soon as it comes: a partition wired to one that
        # failed would wait for it (``hosts.MAKE_WAIT_SECONDS``)
        while len(results) < len(futures):
            for index, future in futures.items():
                if index in results or not future.done():
                    continue
                address = self.placement[index]
                try:
                    results[index] = future.result()
                except WorkerError:
                    raise
                except Exception as error:      # the worker's own failure, by its address
                    raise DistributedRunError(f"worker {address}: partition {index} could not "
                                              f"be set up: {_one_line(error)}") from None
                self.addresses[index] = address
            if len(results) < len(futures):
                time.sleep(MAKE_POLL_SECONDS)
        return [results[index] for index in futures]

    def _drop(self, made) -> None:
        """Let the partitions ``made``, (host, key) pairs, go on their workers
        (not waiting: a host whose worker is gone answers nothing)."""
        keys: dict = {}
        for host, key in made:
            if host is not None:
                keys.setdefault(id(host), (host, []))[1].append(key)
        for host, held in keys.values():
            try:
                host.drop(held)
            except Exception:       # noqa: BLE001 - the host's worker already gone
                pass

    def start(self) -> np.ndarray:
        """Make every partition's worker and wire them; the aggregates of iteration 0."""
        self.worker_descriptions = self._make_actors(range(len(self.partitions)), wire=True)
        return self._aggregates(0)

    def _wire(self) -> list[dict]:
        """Wire every partition's worker to the others; each describes itself."""
        return self._all(lambda actor: actor.wire(self.actors, self.addresses, self.epoch))

    def _share_weighted_in(self) -> None:
        if self.weighted_in:
            self._all(lambda actor: actor.share_weighted_in_degrees())
            self._all(lambda actor: actor.take_weighted_in_degrees())

    def _all(self, call) -> list:
        """``call(actor)`` on every partition's actor; the results in partition order.

        Raises
        ------
        LostWorkers
            When a call failed and some actors' workers no longer answer.
        """
        futures = []
        for actor in self.actors:
            try:
                futures.append(call(actor))
            except Exception as error:      # noqa: BLE001 - an actor known lost already
                futures.append(error)
        results, failures = [], []
        for index, future in enumerate(futures):
            try:
                if isinstance(future, Exception):
                    raise future
                results.append(future.result())
            except Exception as error:      # noqa: BLE001 - sorted out below
                results.append(None)
                failures.append((index, error))
        if failures:
            lost = self._lost()
            if lost:
                raise LostWorkers(lost)
            index, error = failures[0]
            if isinstance(error, GaraphError):
                raise error
            raise DistributedRunError(f"worker {self.addresses[index]}: partition {index} "
                                      f"failed: {_one_line(error)}") from error
        return results

    def _lost(self) -> list[int]:
        """The partitions whose actors do not answer."""
        lost = []
        for index, actor in enumerate(self.actors):
            try:
                actor.ping().result(timeout=PING_TIMEOUT_SECONDS)
            except Exception:       # noqa: BLE001 - lost, whatever the comm says
                lost.append(index)
        return lost

    def _aggregates(self, iteration: int) -> np.ndarray:
        """``iteration``'s aggregates, from every partition's share (no call
        where the program declares none)."""
        if not aggregate_monoids(self.program):
            return self._reduce([])
        rows = self._all(lambda actor: actor.partial_aggregates(iteration))
        return self._reduce([row for row in rows])

    def _reduce(self, rows: list) -> np.ndarray:
        return reduce_aggregates(rows, aggregate_monoids(self.program))

    # -- iterations ----------------------------------------------------------------------
    def iterate(self, max_iterations: int, tolerance, on_iteration=None):
        """The iterations until no vertex is active, the L1 change falls below
        ``tolerance`` or ``max_iterations``; ``(records, stopped, reason)``
        (``stopped`` False at the limit with vertices active)."""
        self.max_iterations = max_iterations
        aggregates = self.start()
        self._share_weighted_in()
        records: list[IterationRecord] = []
        union_find, union_find_seconds = None, 0.0
        # where each worker holds one partition, the start opens the first
        # iterations' call (:meth:`_start_from_union_find`)
        folded = self.union_find_start and self._one_partition_a_worker()
        self.union_find_calls = 0
        if self.union_find_start and not folded:
            started = time.perf_counter()
            try:
                union_find = self._start_from_union_find()
            except LostWorkers as lost:
                # the start only shortens the run: from the initial labels the
                # iterations reach the same ones
                _, aggregates, _ = self._recover(lost.partitions, records)
            union_find_seconds = time.perf_counter() - started
        n = self.store.num_vertices
        active = n if self.program.initially_active == "all" else int(self.sources.size)
        iteration = 0
        while iteration < max_iterations:
            if active == 0:
                return records, True, "no active vertex"
            try:
                rounds = self._rounds(iteration, self._call_end(iteration, max_iterations),
                                      aggregates, tolerance, folded)
            except LostWorkers as lost:
                folded = False      # as above: the run goes on from the initial labels
                iteration, aggregates, active = self._recover(lost.partitions, records)
                continue
            if folded:
                # the call's time, the first iteration's, took the start's
                union_find = [row.pop("union_find_start") for row in rounds[0][0]]
                folded = False
            for rows, seconds in rounds:
                record = self._record(iteration, rows, active, seconds)
                if union_find is not None:
                    record.decisions["partition_union_find_start"] = {
                        **{key: [row[key] for row in union_find]
                           for key in ("lowered", "sent_bytes", "holder_bytes",
                                       "link_bytes")},
                        "seconds": [round(row["seconds"], 6) for row in union_find],
                        "calls": self.union_find_calls,
                        "choice": True}
                    record.exchanged_bytes += sum(row["sent_bytes"] for row in union_find)
                    # the first iteration's time takes the start's, as in one process
                    record.seconds += union_find_seconds
                    union_find = None
                aggregates = self._reduce([row["aggregates"] for row in rows])
                active = record.activated
                records.append(record)
                if on_iteration is not None:
                    on_iteration(record)
                if tolerance is not None and record.l1_change < tolerance:
                    return records, True, "tolerance"
                iteration += 1
            if self.checkpoint_every and iteration % self.checkpoint_every == 0 \
                    and iteration < max_iterations and active:
                self._checkpoint(iteration, records)
        if active == 0:
            return records, True, "no active vertex"
        return records, False, "iteration limit"

    def _start_from_union_find(self) -> list[dict]:
        """Each partition's union-find, joined at the boundaries, lowers the
        labels (:class:`~garaphpy.distributed.components.UnionFindStart`), one
        call of the client a step (a worker holds two partitions, whose actors
        share a thread); each partition's row.  Where each worker holds one
        partition the start takes no call of its own: the first iterations'
        call opens with it (:meth:`~garaphpy.distributed.rounds.Rounds.iterate`,
        the workers waiting for each other's messages), and each worker goes
        on to its pull as soon as its labels are lowered, not once the
        slowest worker's are and the client has called again (``calls``: 0).
        """
        self.union_find_calls = 3
        self._all(lambda actor: actor.share_holders())
        self._all(lambda actor: actor.share_links())
        return self._all(lambda actor: actor.start_from_union_find())

    def _one_partition_a_worker(self) -> bool:
        """Whether no worker holds two partitions (their actors would share a
        thread, so a call may not wait for another's)."""
        return len(set(self.addresses)) == len(self.addresses)

    def _call_end(self, iteration: int, max_iterations: int) -> int:
        """Where a call that starts at ``iteration`` stops: at the next checkpoint,
        the iteration limit or ``ITERATIONS_PER_CALL`` iterations on (one
        iteration a call where a worker holds two partitions: see
        :mod:`garaphpy.distributed.rounds`)."""
        if not self._one_partition_a_worker():
            return iteration + 1
        end = min(max_iterations, iteration + ITERATIONS_PER_CALL)
        if self.checkpoint_every:
            end = min(end, (iteration // self.checkpoint_every + 1) * self.checkpoint_every)
        return end

    def _rounds(self, iteration: int, end: int, aggregates, tolerance,
                union_find_start: bool = False) -> list:
        """Run iterations ``iteration..end-1`` (fewer where the run stops) on
        every worker, after CC's union-find start with ``union_find_start``:
        ``[(rows, seconds), ...]``, an iteration's rows in partition order and
        its time (the slowest worker's; the first also takes what the call
        cost beyond the workers' iterations, the start's too)."""
        started = time.perf_counter()
        self.final_values = None
        if end == iteration + 1 and not union_find_start:
            rows = self._all(lambda actor: actor.step(iteration, aggregates))
            return [(rows, time.perf_counter() - started)]
        last = end >= self.max_iterations
        per_worker = self._all(lambda actor: actor.iterate(iteration, end, aggregates,
                                                           tolerance, union_find_start, last))
        # the run's end: the values came with the call (none where it goes on)
        ended = [rows[-1].pop("owned_values", None) if rows else None for rows in per_worker]
        self.final_values = ended if all(v is not None for v in ended) else None
        seconds = time.perf_counter() - started
        if len({len(rows) for rows in per_worker}) != 1:
            raise DistributedRunError(f"the workers ran {[len(r) for r in per_worker]} "
                                      f"iterations from iteration {iteration}")
        rounds = [list(rows) for rows in zip(*per_worker)]
        times = [max(row["round_seconds"] for row in rows) for rows in rounds]
        times[0] += max(0.0, seconds - sum(times))
        return list(zip(rounds, times))

    def _record(self, iteration: int, rows: list, active: int, seconds: float):
        # a partition pulls every owned vertex or its notified ones alone
        directions = [row["direction"] for row in rows]
        processors = [row.get("processor", "cpu") for row in rows]
        record = IterationRecord(iteration=iteration, mode=run_mode(processors),
                                 direction="pull" if "pull" in directions else "notify-pull",
                                 forced=False, active_fraction=1.0, rho=1.0,
                                 active_vertices=active)
        record.l1_change = float(sum(row["l1_change"] for row in rows))
        record.activated = int(sum(row["activated"] for row in rows))
        record.updated_vertices = int(sum(row["pulled"] for row in rows))
        record.edges_processed = int(sum(row["edges"] for row in rows))
        record.cpu_edges = int(sum(row["edges"] for row, processor in zip(rows, processors)
                                   if processor == "cpu"))
        record.gpu_edges = record.edges_processed - record.cpu_edges
        record.exchanged_bytes = int(sum(row["sent_bytes"] for row in rows))
        record.workers = tuple(row["address"] for row in rows)
        record.seconds = seconds
        for processor in set(processors):
            busy = max(row["pull_seconds"] for row, p in zip(rows, processors) if p == processor)
            setattr(record, f"{processor}_busy_seconds", busy)
        if self.float32_contributions:
            record.decisions["float32_contributions"] = {"choice": True}
        record.decisions["partitions"] = {
            "processors": processors,
            "changed": [row["changed"] for row in rows],
            "directions": directions,
            # a sparse step of a program with early exit pushes from the frontier
            "pushed": [bool(row.get("pushed", False)) for row in rows],
            "pulled": [row["pulled"] for row in rows],
            "edges": [row["edges"] for row in rows],
            "sent_bytes": [row["sent_bytes"] for row in rows],
            "pull_seconds": [round(row["pull_seconds"], 6) for row in rows],
            "exchange_seconds": [round(row["exchange_seconds"], 6) for row in rows],
            "choice": len(rows)}
        # the exchange's phases where the workers ran several iterations a call
        # (:mod:`.rounds`): wall-clock times, comparable between a host's workers
        for key in ("apply_seconds", "send_seconds", "wait_seconds"):
            if all(key in row for row in rows):
                record.decisions["partitions"][key] = [round(row[key], 6) for row in rows]
        for key in ("pull_end_time", "votes_time"):
            if all(key in row for row in rows):
                record.decisions["partitions"][key + "s"] = [row[key] for row in rows]
        return record

    # -- checkpoints and faults ----------------------------------------------------------
    def _checkpoint(self, iteration: int, records: list) -> None:
        directory = str(self.checkpoint_dir)
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._all(lambda actor: actor.checkpoint(iteration, directory))
        except LostWorkers:
            return      # the step that follows finds the lost worker and recovers
        for earlier in self.checkpoints:
            self._all(lambda actor, earlier=earlier: actor.discard_checkpoint(earlier,
                                                                              directory))
        self.checkpoints = [iteration]
        if records:
            records[-1].decisions["partition_checkpoint"] = {"iteration": iteration,
                                                             "choice": True}

    def _recover(self, lost: list[int], records: list):
        """Make the lost partitions again on live workers and roll every partition
        back to the last complete checkpoint; ``(iteration, aggregates, active)``
        to go on from."""
        if len(self.recoveries) >= MAX_RECOVERIES:
            raise DistributedRunError(f"workers {', '.join(self.addresses[i] for i in lost)}: "
                                      f"lost after {MAX_RECOVERIES} recoveries; giving up")
        gone = {self.addresses[index] for index in lost}
        forget_hosts(self.client, gone)
        for address in gone:
            self.hosts_used.pop(address, None)
        self.workers = {a: w for a, w in self._workers().items() if a not in gone}
        if not self.workers:
            raise DistributedRunError(f"workers {', '.join(sorted(gone))}: lost, and no live "
                                      "worker is left to take their partitions")
        load = {address: 0 for address in self._candidates(self.workers)}
        for index, address in enumerate(self.addresses):
            if index not in lost and address in load:
                load[address] += 1
        for index in lost:
            address = min(sorted(load), key=load.get)
            load[address] += 1
            self.placement[index] = address
        self._make_actors(lost)
        self.epoch += 1
        back_to = self.checkpoints[-1] if self.checkpoints else 0
        self._wire()
        directory = str(self.checkpoint_dir)
        self._all(lambda actor: actor.restore(back_to, directory, self.epoch))
        self._share_weighted_in()
        self.recoveries.append({"lost": [(i, a) for i, a in zip(lost, sorted(gone))],
                                "after_iteration": len(records), "back_to": back_to})
        del records[back_to:]
        active = records[-1].activated if records else (
            self.store.num_vertices if self.program.initially_active == "all"
            else int(self.sources.size))
        return back_to, self._aggregates(back_to), active

    def values(self) -> np.ndarray:
        """Every vertex's committed value, gathered from the partitions (brought
        by the run's last call where it ended the run: :meth:`_rounds`)."""
        if self.final_values is not None:
            return np.concatenate(self.final_values)
        return np.concatenate(self._all(lambda actor: actor.owned_values()))

    def describe(self) -> dict:
        """The partitions, where they ran, the recoveries."""
        return {"scheduler": self.client.scheduler.address,
                "partitions": [{"first_vertex": p.first_vertex, "end_vertex": p.end_vertex,
                                "edges": p.num_edges, "worker": a,
                                "processor": self.processor(a),
                                **{key: held.get(key) for key in (
                                    "threads", "numba_threads", "threading_layer",
                                    "wait_policy", "float32_contributions")}}
                               for p, a, held in zip(self.partitions, self.addresses,
                                                     self.worker_descriptions)],
                "mode": self.mode,
                "checkpoint_every": self.checkpoint_every, "recoveries": self.recoveries}

    def close(self, keep_checkpoints: bool) -> None:
        """Let the partitions go on the workers (their hosts stay for the
        client's next run); remove the checkpoints unless kept."""
        # a partition whose making failed too (its peers may wait for it)
        made = [(self.hosts_used.get(address), key)
                for address, key in zip(self.placement, self.keys) if key is not None]
        self.actors, self.keys = [], []
        self._drop(made)
        if not keep_checkpoints:
            shutil.rmtree(self.checkpoint_dir, ignore_errors=True)


class LostWorkers(Exception):
    """Some partitions' workers were lost (:attr:`partitions`)."""

    def __init__(self, partitions: list[int]):
        super().__init__(f"partitions {partitions} lost their workers")
        self.partitions = partitions


def _gpus(worker: dict) -> float:
    """The GPUs a worker's Dask resources name (``resources={"GPU": 1}``)."""
    resources = worker.get("resources") or {}
    return float(resources.get("GPU", 0) or 0)


def run_mode(processors) -> str:
    """The mode of an iteration whose partitions ran on ``processors``: one
    processor's name, or ``"hybrid"`` for both."""
    kinds = set(processors)
    return kinds.pop() if len(kinds) == 1 else "hybrid"


def _takes_n_workers(client) -> bool:
    import inspect

    return "n_workers" in inspect.signature(client.scheduler_info).parameters


def _mib(nbytes: int) -> str:
    """``nbytes`` in MiB (in KiB below one MiB)."""
    return f"{nbytes / 2**20:.1f} MiB" if nbytes >= 2**20 else f"{nbytes / 2**10:.1f} KiB"


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def run_partitioned(graph, program, sources, *, client, scheduler, partitions, threads,
                    max_iterations: int, tolerance, checkpoint_every, checkpoint_dir,
                    keep_checkpoints: bool, on_iteration=None,
                    program_cache: str | None = None, mode: str = "hybrid",
                    turned_off=frozenset()) -> PartitionedOutcome:
    """A synchronous run of ``program`` on ``graph`` over a Dask cluster's workers
    (see the module); the run's options validated by :func:`garaphpy.api.execute`."""
    setup_started = time.perf_counter()
    client, made_here = connect(client, scheduler)
    store = graph.store
    every = config.CHECKPOINT_EVERY if checkpoint_every is None else checkpoint_every
    own_directory = checkpoint_dir is None
    directory = Path(checkpoint_dir) if checkpoint_dir is not None else \
        store.path.parent / f"{store.path.name}.partitioned" / uuid.uuid4().hex[:12]
    run = None
    try:
        run = PartitionedRun(client, store, program, sources, partitions=partitions,
                             threads=threads, checkpoint_every=every,
                             checkpoint_dir=directory, program_cache=program_cache,
                             symmetric=not graph.directed, mode=mode,
                             float32_contributions="float32_contributions" not in turned_off
                             and decisions.float32_contributions(
                                 program.float32_gather_tolerance, tolerance, "cpu"))
        if graph.ids_store is not store:
            run.ids_store_path = str(graph.ids_store.path)
        setup_seconds = time.perf_counter() - setup_started
        records, stopped, reason = run.iterate(max_iterations, tolerance, on_iteration)
        values = run.values()
        description = run.describe()
    finally:
        if run is not None:
            run.close(keep_checkpoints)
        if own_directory:
            shutil.rmtree(directory.parent, ignore_errors=True) \
                if directory.parent.is_dir() and not any(directory.parent.iterdir()) else None
        if made_here:
            client.close()
    converged = stopped or bool(program.run_until_limit)
    return PartitionedOutcome(values, records, converged, reason, setup_seconds, description)
