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

from ..errors import ConfigError
from .policy import HybridPolicy
from .processors import CpuProcessor, GpuProcessor, hybrid_processors
from .single_driver import SingleDriver

__all__ = ["Driver", "SingleDriver"]


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
