"""Partitioned runs over the workers of a Dask cluster (beyond one machine; Garaph sections 2.2, 4.1).

``garaphpy.run(graph, program, client=client)`` (or ``scheduler=ADDRESS``)
cuts the store's pages into partitions by destination vertex range
(:mod:`.partition`), runs each on a Dask worker as an actor that pulls its
own vertices with the CPU kernels (:mod:`.worker`), exchanges only changed
values, worker to worker, with the workers that read them (:mod:`.exchange`),
and is driven by the client with small messages, with checkpoints per
partition and recovery from lost workers (:mod:`.run`).

Between runs each worker keeps a partition host and the in-edges it read
(:mod:`.hosts`, :mod:`.kept`); :func:`release_workers` lets them go.

Dask (``pip install garaphpy[dask]``) is imported only here, and only when a
partitioned run starts.
"""

from .hosts import release_workers

__all__ = ["release_workers"]
