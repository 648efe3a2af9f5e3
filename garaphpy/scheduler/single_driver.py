"""The driver of a run on one processor: its own iterations and batches (Garaph sections 4.1, 5.1).

:class:`SingleDriver` runs every iteration of a run in mode ``cpu`` or
``gpu`` (:func:`~garaphpy.scheduler.driver.Driver` makes it), and each
stretch of a hybrid run that the per-run choice hands to one processor
alone (:class:`~garaphpy.scheduler.run_choice.Stretch`): the same code, so
that such a stretch costs the host what the processor's own mode does.
"""

from __future__ import annotations

import numpy as np

from .records import IterationRecord


class SingleDriver:
    """Runs iterations of one program on one processor: each iteration, and each
    batch of them, is the processor's own.

    Parameters
    ----------
    processor : Processor

    Attributes
    ----------
    mode : {"cpu", "gpu"}
    alone, cpu, gpu : Processor or None
        The processor (``alone``, and ``cpu`` or ``gpu`` by its kind).
    policy, vertex_state, worker : None
        A hybrid run's, which this driver has none of.
    """

    def __init__(self, processor):
        self.alone = processor
        self.mode = processor.mode
        self.cpu = processor if processor.name == "cpu" else None
        self.gpu = processor if processor.name == "gpu" else None
        self.policy = None
        self.vertex_state = None
        self.worker = None

    @property
    def page_done(self):
        """Called with (iteration, pages done) after each page (checkpoints)."""
        return self.alone.page_done

    @page_done.setter
    def page_done(self, hook) -> None:
        self.alone.page_done = hook

    @property
    def num_edges(self) -> int:
        """|E|."""
        return self.alone.num_edges

    @property
    def rho(self) -> float:
        """rho of the cost model: k when a CPU reads pages from storage (section 4.2)."""
        return self.alone.rho

    @property
    def page_source(self):
        """The run's :class:`~garaphpy.storage.page_source.PageSource`."""
        return self.alone.page_source

    def num_active(self) -> int:
        """Vertices active after the last iteration."""
        return self.alone.num_active()

    def active_out_edges(self) -> tuple[int, np.ndarray | None]:
        """Sum of the active vertices' out-degrees (and the prefix notify needs)."""
        return self.alone.active_out_edges()

    def decide(self, record: IterationRecord, direction: str) -> None:
        """The processor's direction: the CPU's Garaph switch, the GPU's pull."""
        self.alone.decide(record, direction)

    def aggregates(self, iteration: int):
        """The processor's aggregates over the committed values."""
        return self.alone.aggregates(iteration)

    def iterate(self, record: IterationRecord, prefix, aggregates) -> None:
        """One iteration of the processor."""
        self.alone.iterate(record, prefix, aggregates)

    def iterate_batch(self, first_iteration: int, max_steps: int, tolerance, active_out_edges: int,
                      direction: str = "auto") -> list[IterationRecord]:
        """The processor's batch: the CPU's small notify-pulls many to a call, the
        GPU's sparse iterations in its device loop (an empty list: none)."""
        return self.alone.iterate_batch(first_iteration, max_steps, tolerance, active_out_edges,
                                        direction)

    def bring_host_current(self) -> None:
        """Nothing: one processor holds its only copy."""

    def values_to_host(self) -> np.ndarray:
        """A copy of the committed values."""
        return self.alone.values_to_host()

    def checkpoint_state(self) -> tuple[np.ndarray, np.ndarray]:
        """The committed values and the frontier (see the checkpoint module)."""
        return self.alone.checkpoint_state()

    def values_between_pages(self) -> np.ndarray:
        """The values of an asynchronous iteration between pages."""
        return self.alone.values_between_pages()

    def restore_checkpoint(self, values: np.ndarray, frontier: np.ndarray) -> None:
        """Continue from a checkpoint's committed values and frontier."""
        self.alone.restore_checkpoint(values, frontier)

    def close(self) -> None:
        """Let the processor's queued work finish (closing twice is harmless)."""
        self.alone.close()
