"""The GPU worker's host side, without a GPU: its pairs, compaction and shares.

garaphpy.distributed.gpu_worker drives its kernels through cupy; here cupy
is a NumPy stand-in and the three kernels of ``kernels/cuda/partition.cu``
(and pull.cu's contributions) are written in NumPy for SSSP and PageRank, so
that everything around them runs as on a device: the upload, the pairs
received scattered into the device's values, the statistics and aggregate
shares read back in one copy, the changed pairs compacted (some owned
vertices, or every one), the host's copy of the values.  Two GPU partitions
and a CPU one, exchanging pairs by hand through their inboxes, must end
with the one-process run's values (SSSP exactly, PageRank within 1e-9 at
the same iteration count).  The kernels themselves run in the gpu-marked
tests of test_partitioned_gpu.py.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

import garaphpy
from garaphpy.api import execute
from garaphpy.distributed import gpu_worker, worker
from garaphpy.distributed.exchange import aggregate_monoids, reduce_aggregates
from garaphpy.distributed.partition import cut_partitions
from garaphpy.kernels import gpu as gpu_kernels
from garaphpy.programs import BUILTIN_PROGRAMS


class HostArray(np.ndarray):
    """A NumPy array with cupy's ``set`` and ``get``."""

    def set(self, array):
        assert np.shape(array) == self.shape and np.asarray(array).dtype == self.dtype
        self[...] = array

    def get(self):
        return np.array(self)


def _held(array) -> HostArray:
    return np.array(array).view(HostArray)


HOST_CUPY = types.SimpleNamespace(
    asarray=_held, zeros=lambda *a, **k: np.zeros(*a, **k).view(HostArray),
    empty=lambda *a, **k: np.empty(*a, **k).view(HostArray),
    empty_like=lambda x: np.empty_like(x).view(HostArray),
    flatnonzero=lambda x: np.flatnonzero(x).view(HostArray),
    concatenate=lambda parts: np.concatenate(parts).view(HostArray),
    cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(synchronize=lambda: None),
                               memory=types.SimpleNamespace(OutOfMemoryError=MemoryError)))


def _kernels(program: str):
    """partition.cu's kernels (and gp_contributions) in NumPy, for ``program``."""
    def pull(grid, block, arguments, shared_mem=0):
        (offsets, sources, weights, first, end, _, precomputed, values, out, contributions,
         active, out_degree, *_, aggregates, n, _, l1_total, counters) = arguments
        owned = np.arange(first, end)
        destinations = np.repeat(owned, np.diff(offsets))
        old = values[first:end]
        if program == "pagerank":
            assert precomputed == 1
            sums = np.zeros(end - first)
            np.add.at(sums, destinations - first, contributions[sources])
            new = 0.15 / n + 0.85 * (sums + aggregates[0] / n)
            activated = np.ones(end - first, np.bool_)
        else:
            assert precomputed == 0
            best = np.full(end - first, np.inf)
            np.minimum.at(best, destinations - first, values[sources] + weights)
            new = np.minimum(old, best)
            activated = new < old
        out[first:end] = new
        active[first:end] = activated
        with np.errstate(invalid="ignore"):
            l1_total[0] += np.abs(new - old).sum()
        counters[0] += np.uint64(activated.sum())
        counters[1] += np.uint64(out_degree[first:end][activated].sum())

    def contributions(grid, block, arguments, shared_mem=0):
        values, contributions, out_degree = arguments[:3]
        linked = out_degree > 0
        contributions[linked] = values[linked] / out_degree[linked]

    def commit(grid, block, arguments, shared_mem=0):
        out, values, changed, first, end = arguments
        changed[:end - first] = out[first:end] != values[first:end]
        values[first:end] = out[first:end]

    def aggregates(grid, block, arguments, shared_mem=0):
        values, out_degree = arguments[:2]
        first, end, totals = arguments[-3:]
        totals[0] += values[first:end][out_degree[first:end] == 0].sum()

    return types.SimpleNamespace(pull=pull, commit=commit, aggregates=aggregates,
                                 contributions=contributions)


@pytest.fixture(scope="module")
def rmat(tmp_path_factory):
    return garaphpy.Graph.load("rmat:8", weights="hash", max_page_bytes=2048,
                               max_shard_edges=128, progress=False,
                               store=tmp_path_factory.mktemp("host-side") / "rmat")


@pytest.mark.parametrize("program", ["sssp", "pagerank"])
def test_gpu_partitions_beside_a_cpu_one_give_the_one_process_values(rmat, program,
                                                                     monkeypatch):
    monkeypatch.setattr(gpu_kernels, "cupy_module", lambda: HOST_CUPY)
    monkeypatch.setattr(gpu_kernels, "compile_partition_kernels",
                        lambda translated, vertex_dtype: _kernels(program))
    device = gpu_kernels.DeviceInfo("stand-in", (9, 0), 132, 48 << 10, 227 << 10, 1 << 34,
                                    1 << 35)
    monkeypatch.setattr(gpu_kernels.DeviceInfo, "current", classmethod(lambda cls: device))
    source = int(np.argmax(rmat.store.out_degree))
    if program == "pagerank":
        alone = execute(rmat, "pagerank", mode="cpu", turned_off={"float32_contributions"})
    else:
        alone = garaphpy.run(rmat, program, mode="cpu", execution="sync",
                             sources=rmat.original_ids(np.array([source])))
    vertex_program = BUILTIN_PROGRAMS[program]()
    partitions = tuple(cut_partitions(rmat.store.in_offsets, 3))
    workers = []
    for index, processor in enumerate(("gpu", "cpu", "gpu")):
        setup = worker.WorkerSetup(str(rmat.store.path), vertex_program, partitions, index,
                                   np.array([source], np.int64), 1, program == "sssp", False,
                                   processor=processor)
        workers.append(gpu_worker.GpuPartitionWorker(setup) if processor == "gpu"
                       else worker.PartitionWorker(setup))
    for reader in workers:
        # the mirror lists from the edges as read (a CPU partition's pieces
        # hold its own numbering of the sources it reads)
        reads = reader.reads
        for owner in workers:
            if owner is not reader:
                owner.mirrors.set_reader(reader.index, reads[owner.index])
    monoids = aggregate_monoids(vertex_program)
    aggregates = reduce_aggregates([w.partial_aggregates(0) for w in workers], monoids)
    iteration, every_changed, some_changed = 0, False, False
    while iteration < alone.max_iterations:
        rows = [w._pull_step(iteration, aggregates) for w in workers]
        for sender, (row, changed) in zip(workers, rows):
            assert row["processor"] == sender.processor and changed.dtype == np.int64
            assert np.all(np.diff(changed) > 0)
            owned = sender.end - sender.first
            every_changed |= row["changed"] == owned
            some_changed |= 0 < row["changed"] < owned
            for reader, vertices in sender.mirrors.pairs_for(changed).items():
                workers[reader].inbox.put(0, iteration, "values",
                                          vertices.astype(rmat.store.vertex_dtype),
                                          sender.values[vertices])
        aggregates = reduce_aggregates([row["aggregates"] for row, _ in rows], monoids)
        l1_change = sum(row["l1_change"] for row, _ in rows)
        activated = sum(row["activated"] for row, _ in rows)
        iteration += 1
        if activated == 0 or (alone.tolerance is not None and l1_change < alone.tolerance):
            break
    values = np.concatenate([w.owned_values() for w in workers])
    assert iteration == alone.num_iterations
    if program == "pagerank":
        assert every_changed
        np.testing.assert_allclose(values, alone.values, rtol=1e-9, atol=0)
    else:
        assert some_changed
        np.testing.assert_array_equal(values, alone.values)
    assert workers[0].describe()["processor"] == "gpu"
