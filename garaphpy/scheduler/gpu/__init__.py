"""The GPU engine and its parts (Garaph sections 3, 5.2): the page store, the
device vertex state, the launches and the selective transfers, behind
:class:`~garaphpy.scheduler.gpu.engine.GpuEngine`."""
