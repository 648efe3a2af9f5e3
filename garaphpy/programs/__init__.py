"""The built-in vertex programs (Garaph section 6: PR, SSSP, CC, NN, HS, CS; plus BFS, SSWP).

Each program is a :class:`garaphpy.program.VertexProgram` in its own module,
whose docstring gives its exact definition, constants, value type, what
"unreachable" means and its default execution mode, and which ships a
verifier that checks a result by a method other than the engine's (GAPBS's
habit):

==============  ========================  =====  ==========  ==================================
name            class                     sum    value       unreachable / note
==============  ========================  =====  ==========  ==================================
pagerank        PageRank                  add    float64     (all scored); L1 tolerance 1e-4
delta_pagerank  DeltaPageRank             add    float64     (all scored); L1 bound 1e-4, async
sssp            SSSP                      min    float64     +inf; weights >= 0
bfs             BFS                       min    int64       -1 (engine sentinel 2**62)
cc              ConnectedComponents       min    int64       label = smallest user id
sswp            SSWP                      max    float64     0; sources +inf; weights >= 0
nn              NeuralNetwork             add    float64     10 fixed iterations
hs              HeatSimulation            add    float64     0; sources held at 1
cs              CircuitSimulation         add    float64     0 V; sources 1 V, ground 0 V
==============  ========================  =====  ==========  ==================================

Aliases: ``pr``, ``delta_pr``/``pagerank_delta``,
``components``/``connected_components``/``wcc``, ``widest_path``, ``neural``,
``heat``, ``circuit``.  Names are matched
case-insensitively, ``-`` and ``_`` alike.

What a verifier assumes of a result
-----------------------------------
``program.verify(graph, result)`` returns a
:class:`garaphpy.program.VerifyReport`.  It uses numpy only (never the
engine, scipy or networkx), reads the graph page by page from
``graph.store``, and reads these attributes of ``result``:

``values``
    numpy array of |V| values indexed by *internal* vertex id, after
    :meth:`~garaphpy.program.VertexProgram.finalize` (what users see).
``sources``
    internal ids of the run's sources, an int64 array (possibly empty).
``num_iterations``
    iterations the run executed (NN replays that many).
``converged``
    whether the run stopped on its own criterion (informational).
``program``
    the instance that ran, with its ``constants``.
``tolerance`` (optional)
    the L1 tolerance the run stopped on, when it overrode the program's
    class attribute; fixed-point verifiers derive their bound from it.

A verifier checks the definition of the instance it is called on
(``self.constants``); call it as ``result.program.verify(graph, result)``.
An unweighted graph counts every edge weight as 1.

"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from ..errors import ConfigError
from ..program import ProgramError, VertexProgram

if TYPE_CHECKING:
    from .bfs import BFS
    from .circuit import CircuitSimulation
    from .components import ConnectedComponents
    from .delta_pagerank import DeltaPageRank
    from .heat import HeatSimulation
    from .neural import NeuralNetwork
    from .pagerank import PageRank
    from .sssp import SSSP
    from .sswp import SSWP

#: Canonical name -> (module, class) of each built-in program.
_DEFINED_IN = {
    "pagerank": ("pagerank", "PageRank"),
    "delta_pagerank": ("delta_pagerank", "DeltaPageRank"),
    "sssp": ("sssp", "SSSP"),
    "bfs": ("bfs", "BFS"),
    "cc": ("components", "ConnectedComponents"),
    "sswp": ("sswp", "SSWP"),
    "nn": ("neural", "NeuralNetwork"),
    "hs": ("heat", "HeatSimulation"),
    "cs": ("circuit", "CircuitSimulation"),
}


class _BuiltinPrograms(Mapping):
    """Canonical name -> program class, each program's module imported when
    the program is first asked for: defining a program class checks its
    functions (milliseconds each), and a run needs one program."""

    def __getitem__(self, name: str) -> type[VertexProgram]:
        module, class_name = _DEFINED_IN[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), class_name)

    def __contains__(self, name: object) -> bool:     # a name alone imports nothing
        return name in _DEFINED_IN

    def __iter__(self) -> Iterator[str]:
        return iter(_DEFINED_IN)

    def __len__(self) -> int:
        return len(_DEFINED_IN)

    def __repr__(self) -> str:
        return f"BUILTIN_PROGRAMS({', '.join(_DEFINED_IN)})"


#: Canonical name -> program class (a read-only mapping).
BUILTIN_PROGRAMS: Mapping[str, type[VertexProgram]] = _BuiltinPrograms()


def __getattr__(name: str):
    # the classes, PageRank, SSSP, ...: imported on first use as BUILTIN_PROGRAMS's
    for canonical, (_, class_name) in _DEFINED_IN.items():
        if class_name == name:
            return BUILTIN_PROGRAMS[canonical]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: Other accepted names -> canonical name.
ALIASES = {
    "pr": "pagerank",
    "delta_pr": "delta_pagerank",
    "pagerank_delta": "delta_pagerank",
    "components": "cc",
    "connected_components": "cc",
    "wcc": "cc",
    "widest_path": "sswp",
    "neural": "nn",
    "heat": "hs",
    "circuit": "cs",
}

__all__ = ["BUILTIN_PROGRAMS", "ALIASES", "get_program", "program_class", "PageRank",
           "DeltaPageRank", "SSSP", "BFS", "ConnectedComponents", "SSWP", "NeuralNetwork",
           "HeatSimulation", "CircuitSimulation"]


def program_class(name: str) -> type[VertexProgram]:
    """The built-in program class called ``name`` (or an alias).

    Raises
    ------
    ConfigError
        ``name`` is not a built-in program; the message lists the known ones.
    """
    if not isinstance(name, str):
        raise ConfigError(f"program name must be a string, got {type(name).__name__}")
    key = name.strip().lower().replace("-", "_")
    key = ALIASES.get(key, key)
    try:
        return BUILTIN_PROGRAMS[key]
    except KeyError:
        raise ConfigError(f"unknown program {name!r} (built-in: "
                          f"{', '.join(BUILTIN_PROGRAMS)}; aliases: "
                          f"{', '.join(sorted(ALIASES))})") from None


def get_program(name: str, **constants) -> VertexProgram:
    """An instance of the built-in program ``name`` with ``constants`` overridden.

    Parameters
    ----------
    name : str
        A key of :data:`BUILTIN_PROGRAMS` or :data:`ALIASES` (case-insensitive).
    **constants
        Values for the program's constants, e.g. ``damping=0.9``.

    Raises
    ------
    ConfigError
        Unknown program, unknown constant, or a constant of the wrong type
        or out of its range; the message names it.
    """
    cls = program_class(name)
    try:
        return cls(**constants)
    except ProgramError as error:
        raise ConfigError(f"program {name!r}: {error}") from None
