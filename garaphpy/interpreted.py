"""numba kernels run as plain Python where compiling them costs more than
the work (small inputs, a machine's first run).

Garaph's preprocessing (section 2.1) cuts shards and groups them into pages
in loops whose length is the number of shards; on a small graph that is a
handful of iterations, which Python runs in microseconds, while numba takes
a second or more to compile the loop on a machine's first build (its disk
cache makes later builds cheap).  :func:`interpreted` gives the Python
function of a dispatcher with the dispatchers it calls replaced by their
own interpreted versions, so that nothing is compiled.  ``numba.prange``
is ``range`` in Python; a kernel that needs a numba-only feature (atomics,
intrinsics) cannot be interpreted.
"""

from __future__ import annotations

import functools
import types

from numba.core.registry import CPUDispatcher


@functools.cache
def interpreted(dispatcher: CPUDispatcher) -> types.FunctionType:
    """``dispatcher``'s Python function, calling the interpreted versions of
    the dispatchers its module's globals hold (the same results, nothing
    compiled)."""
    function = dispatcher.py_func
    names = function.__code__.co_names
    replaced = {name: interpreted(value) for name, value in function.__globals__.items()
                if name in names and isinstance(value, CPUDispatcher)
                and value is not dispatcher}
    if not replaced:
        return function
    run = types.FunctionType(function.__code__, {**function.__globals__, **replaced},
                             function.__name__, function.__defaults__, function.__closure__)
    run.__doc__, run.__qualname__ = function.__doc__, function.__qualname__
    return run
