"""garaphpy's benchmarks, run as ``python -m bench SUBCOMMAND [options]``.

Every script is a configuration of :mod:`bench.harness` (warm-up outside the
timed trials, a verification of every trial, one JSON row per case with the
machine that ran it).  ``python -m bench --help`` lists the subcommands;
BENCHMARKS.md gives today's figures with the command that measured each.
"""
