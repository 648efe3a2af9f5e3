"""Repeated runs after one build, GAPBS-style (``garaphpy PROGRAM FILE -n TRIALS -r random``).

GAPBS's benchmark loop (sbeamer/gapbs, src/benchmark.h) builds the graph
once, runs the kernel ``-n`` times, prints each trial's time and their
average, and, without ``-r``, starts each trial from a source drawn
uniformly among the vertices that have an out-edge, from a fixed seed (so
that two runs draw the same sources).  This module holds that loop's parts
for the command line: the source picker and the trial report; the runs
themselves stay :func:`garaphpy.run`'s.  The times are the iterations'
(``Result.seconds``); set-up and compilation are shown beside them.
"""

from __future__ import annotations

import numpy as np

from .errors import GraphInputError

#: The sources' seed: GAPBS's ``kRandSeed``, so that every run draws the same sources.
SOURCE_SEED = 27491095


class SourcePicker:
    """Draw source vertices uniformly among those with an out-edge (GAPBS's SourcePicker).

    Parameters
    ----------
    graph : garaphpy.Graph
    seed : int
        The generator's seed (default :data:`SOURCE_SEED`).
    """

    def __init__(self, graph, seed: int = SOURCE_SEED):
        out_degree = np.asarray(graph.store.out_degree)
        self._candidates = np.flatnonzero(out_degree > 0)
        self._original_ids = graph.original_ids()
        self._rng = np.random.default_rng(seed)

    def pick(self) -> int:
        """The next source, in the user's ids.

        Raises
        ------
        GraphInputError
            When no vertex has an out-edge.
        """
        if self._candidates.size == 0:
            raise GraphInputError("no vertex has an out-edge: no random source to start from")
        vertex = self._candidates[self._rng.integers(self._candidates.size)]
        return int(self._original_ids[vertex])


class TrialReport:
    """Each trial's time as it ends, then their summary (GAPBS's Trial/Average Time)."""

    def __init__(self, trials: int, printer=print):
        self.trials = trials
        self.seconds: list[float] = []
        self._print = printer

    def add(self, result, sources=None) -> None:
        """Record and print one trial (its sources when they were drawn)."""
        self.seconds.append(float(result.seconds))
        drawn = f", source {', '.join(map(str, sources))}" if sources else ""
        self._print(f"trial {len(self.seconds)}/{self.trials}: {result.seconds:.5f} s "
                    f"({result.num_iterations} iterations, set-up "
                    f"{result.setup_seconds:.3f} s{drawn})")

    def summary(self) -> str:
        """``trials: N, average X s, min Y s, max Z s`` over the trials recorded."""
        times = np.asarray(self.seconds)
        return (f"trials: {times.size}, average {times.mean():.5f} s, min {times.min():.5f} s, "
                f"max {times.max():.5f} s")
