"""garaphpy's version, in a module of the bottom layer.

Read by setup.cfg (statically), by the package root, and by the CPU program
cache key (kernels/cpu_program), which may not import the package root.
"""

__version__ = "0.1.0"
