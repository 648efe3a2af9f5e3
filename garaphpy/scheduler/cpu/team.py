"""The threads of the CPU kernels that keep a team for many rounds (Garaph section 4)."""

from __future__ import annotations

import numba


def team_size() -> int:
    """The threads of a kernel that keeps them for many rounds: numba's for
    this thread now (one iteration of ``numba.prange(team)`` each)."""
    return numba.get_num_threads()
