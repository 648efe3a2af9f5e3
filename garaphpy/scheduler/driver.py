"""The iteration drivers: one run's iterations on the CPU, the GPU, or both (Garaph sections 4.1, 5.1).

:func:`Driver` makes the driver of the engines a run uses, each behind a
:class:`~garaphpy.scheduler.processors.Processor`:

* **the CPU alone** (mode ``cpu``): :class:`SingleDriver`; each iteration is
  the CPU engine's own, in the direction Garaph's switch chooses
  (notify-pull when f <= 1 / (2 rho), else pull; section 4.1); no policy,
  no GPU, no thread; small notify-pulls run many to a call
  (:meth:`SingleDriver.iterate_batch`);
* **the GPU alone** (mode ``gpu``): :class:`SingleDriver`; each iteration is
  the GPU engine's pull over every page, or, while the frontier is small, a
  sparse notify-pull in a loop kept on the device (many iterations to one
  call); no policy, no host copy to keep current;
* **both** (mode ``hybrid``):
  :class:`~garaphpy.scheduler.hybrid_driver.HybridDriver`, which divides
  each iteration between the processors by the policy
  (:class:`~garaphpy.scheduler.policy.HybridPolicy`, section 5.1).

A driver uses no name of a processor outside the protocol
(``tests/test_engine_boundaries.py``).  A one-processor iteration's record is
its engine's.
"""

from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .policy import HybridPolicy
from .processors import CpuProcessor, GpuProcessor, hybrid_processors
from .records import IterationRecord


def Driver(cpu=None, gpu=None, policy: HybridPolicy | None = None,    # noqa: N802
           cpu_alone=None):
    """The driver of a run on the engines given (a class's name: it stands for one).

    Parameters
    ----------
    cpu : CpuEngine, optional
        The CPU engine of the run, warmed up.
    gpu : GpuEngine, optional
        The GPU engine of the same run.
    policy : HybridPolicy, optional
        Divides the iterations of a run on both processors (default: a new
        :class:`HybridPolicy`); a run on one processor takes none.
    cpu_alone : CpuAlone, optional
        A run on both processors: the graph's shape and the engine of the
        CPU alone, for the per-run choice (:mod:`~garaphpy.scheduler.run_choice`).

    Returns
    -------
    SingleDriver or HybridDriver

    Raises
    ------
    garaphpy.errors.ConfigError
        Neither engine given, or a policy for a run on one processor.
    """
    if cpu is None and gpu is None:
        raise ConfigError("Driver: expected a CPU engine, a GPU engine or both; got neither")
    if cpu is not None and gpu is not None:
        from .hybrid_driver import HybridDriver     # a run on one processor needs none

        policy = HybridPolicy() if policy is None else policy
        return HybridDriver(*hybrid_processors(cpu, gpu, policy.smooth), policy, cpu_alone)
    processor = CpuProcessor(cpu) if gpu is None else GpuProcessor(gpu)
    if policy is not None:
        raise ConfigError(f"policy: a HybridPolicy divides iterations between the CPU "
                          f"and the GPU; a run on the {processor.mode.upper()} alone "
                          "takes none")
    return SingleDriver(processor)


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
