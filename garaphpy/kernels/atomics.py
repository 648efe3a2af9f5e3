"""Atomic operations and a spinning barrier for CPU kernels that keep their
threads for many rounds (GAPBS's delta-stepping: one OpenMP region, a
barrier per round; HyTGraph's and Garaph's CPU loops iterate the same way).

numba has no atomic operations on CPU arrays; these intrinsics emit LLVM's
(``atomicrmw``, ``cmpxchg``, atomic loads and stores) on one element of a
contiguous array.  :func:`team_rendezvous` and :func:`team_barrier` build
on them a barrier among the iterations of ``numba.prange(team)``, one per
thread: numba's OpenMP and workqueue layers run the ``team`` iterations of
such a loop on ``team`` threads at once when ``team`` is
``numba.get_num_threads()``, but no layer promises it.  So the threads
first meet at a rendezvous with a deadline: where not all of them arrive in
time (a layer that ran them one after another, or a loaded machine), the
rendezvous fails for every thread before any work is done, and the caller
runs its step-by-step kernels instead.  Past the rendezvous every thread of
the team is running, and the barriers wait without a deadline.

A thread waiting at a barrier spins on an atomic load with the CPU's pause
hint, and after :data:`SPINS_BEFORE_YIELD` spins gives its core away
(``sched_yield``) between checks, so that a preempted team member can run.
"""

from __future__ import annotations

import platform
import sys

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Spins with the pause hint before a waiting thread also yields its core.
SPINS_BEFORE_YIELD = 1 << 12

#: The rendezvous deadline, in cycles of the CPU's time-stamp counter (about
#: 0.5-1 s) and in spins where the counter reads nothing.
RENDEZVOUS_CYCLES = 2_000_000_000
RENDEZVOUS_SPINS = 1 << 24

#: Slots of the int64 ``sync`` array of :func:`team_barrier`, each on its own
#: cache line (8 int64s apart).
BARRIER_COUNT, BARRIER_GENERATION, ARRIVED = 0, 8, 16
#: The first slot free for a kernel's own shared counters.
FIRST_FREE_SLOT = 24
# added to the arrival count by a thread that gives up: the rendezvous is closed
_CLOSED = -(1 << 40)

_MACHINE = platform.machine().lower()
_POSIX = sys.platform != "win32"
_X86 = _MACHINE in ("x86_64", "amd64", "i386", "i686")
_ARM = _MACHINE in ("aarch64", "arm64")


@numba.njit(nogil=True, cache=True)
def sync_slots(own):
    """A zeroed ``sync`` array for :func:`team_barrier` and ``own`` counters of the
    caller's, slot ``k`` of which is ``FIRST_FREE_SLOT + 8 * k``."""
    return np.zeros(FIRST_FREE_SLOT + 8 * (own + 1), np.int64)


def _element_pointer(context, builder, array_type, array_value, index):
    array = context.make_array(array_type)(context, builder, array_value)
    return cgutils.get_item_pointer(context, builder, array_type, array, [index])


def _integer_like(dtype):
    if not isinstance(dtype, (types.Integer, types.Float, types.Boolean)) or \
            dtype.bitwidth not in (8, 16, 32, 64):
        return None
    return ir.IntType(dtype.bitwidth if not isinstance(dtype, types.Boolean) else 8)


def _int64_read_modify_write(operation: str):
    """The typing of an intrinsic ``(array, index, value) -> old value`` that
    applies LLVM's ``atomicrmw operation`` to an int64 array's element."""

    def typer(typingctx, array, index, value):
        if not (isinstance(array, types.Array) and array.dtype == types.int64):
            return None

        def codegen(context, builder, signature, arguments):
            pointer = _element_pointer(context, builder, signature.args[0], arguments[0],
                                       arguments[1])
            operand = context.cast(builder, arguments[2], signature.args[2], types.int64)
            return builder.atomic_rmw(operation, pointer, operand, "seq_cst")

        return types.int64(array, index, value), codegen

    typer.__name__ = typer.__qualname__ = f"atomic_{operation}"
    return typer


atomic_add = intrinsic(_int64_read_modify_write("add"))
atomic_add.__doc__ = "``array[index] += value`` atomically (int64 array); returns the old value."
atomic_min = intrinsic(_int64_read_modify_write("min"))
atomic_min.__doc__ = ("``array[index] = min(array[index], value)`` atomically (int64 array); "
                      "returns the old value.")


@intrinsic
def atomic_load(typingctx, array, index):
    """``array[index]`` read with acquire ordering (any 1, 2, 4 or 8-byte dtype):
    a value another thread may be writing, read whole and never cached in a
    register across iterations of a loop."""
    if not isinstance(array, types.Array):
        return None
    integer = _integer_like(array.dtype)
    if integer is None:
        return None

    def codegen(context, builder, signature, arguments):
        dtype = signature.args[0].dtype
        pointer = _element_pointer(context, builder, signature.args[0], arguments[0],
                                   arguments[1])
        pointer = builder.bitcast(pointer, integer.as_pointer())
        loaded = builder.load_atomic(pointer, "acquire", integer.width // 8)
        if isinstance(dtype, types.Float):
            return builder.bitcast(loaded, context.get_value_type(dtype))
        if isinstance(dtype, types.Boolean):
            return builder.trunc(loaded, context.get_value_type(dtype))
        return loaded

    return array.dtype(array, index), codegen


@intrinsic
def atomic_store(typingctx, array, index, value):
    """``array[index] = value`` with release ordering (int64 array)."""
    if not (isinstance(array, types.Array) and array.dtype == types.int64):
        return None

    def codegen(context, builder, signature, arguments):
        pointer = _element_pointer(context, builder, signature.args[0], arguments[0],
                                   arguments[1])
        value = context.cast(builder, arguments[2], signature.args[2], types.int64)
        builder.store_atomic(value, pointer, "release", 8)
        return context.get_dummy_value()

    return types.none(array, index, value), codegen


@intrinsic
def compare_and_swap(typingctx, array, index, expected, new):
    """Atomically replace ``array[index]`` by ``new`` if it holds ``expected``,
    bit for bit (so -0.0 is not 0.0 and a nan may match itself); returns
    whether it did.  Any 1, 2, 4 or 8-byte dtype."""
    if not isinstance(array, types.Array):
        return None
    integer = _integer_like(array.dtype)
    if integer is None:
        return None

    def codegen(context, builder, signature, arguments):
        dtype = signature.args[0].dtype
        pointer = _element_pointer(context, builder, signature.args[0], arguments[0],
                                   arguments[1])
        old = context.cast(builder, arguments[2], signature.args[2], dtype)
        new_value = context.cast(builder, arguments[3], signature.args[3], dtype)
        if isinstance(dtype, types.Boolean):
            old, new_value = builder.zext(old, integer), builder.zext(new_value, integer)
        elif isinstance(dtype, types.Float):
            old, new_value = builder.bitcast(old, integer), builder.bitcast(new_value, integer)
        pointer = builder.bitcast(pointer, integer.as_pointer())
        outcome = builder.cmpxchg(pointer, old, new_value, "seq_cst", "seq_cst")
        return builder.extract_value(outcome, 1)

    return types.boolean(array, index, expected, new), codegen


def _call_without_arguments(builder, name: str, return_type):
    function = cgutils.get_or_insert_function(builder.module,
                                              ir.FunctionType(return_type, []), name)
    return builder.call(function, [])


@intrinsic
def spin_pause(typingctx):
    """The CPU's spin-wait hint (x86 ``pause``, arm ``yield``; nothing elsewhere)."""

    def codegen(context, builder, signature, arguments):
        if _X86:
            _call_without_arguments(builder, "llvm.x86.sse2.pause", ir.VoidType())
        elif _ARM:
            hint = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [ir.IntType(32)]),
                "llvm.aarch64.hint")
            builder.call(hint, [ir.Constant(ir.IntType(32), 1)])
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def yield_core(typingctx):
    """``sched_yield()``: let another runnable thread have this core (POSIX; a
    pause hint on Windows)."""

    def codegen(context, builder, signature, arguments):
        if _POSIX:
            _call_without_arguments(builder, "sched_yield", ir.IntType(32))
        elif _X86:
            _call_without_arguments(builder, "llvm.x86.sse2.pause", ir.VoidType())
        return context.get_dummy_value()

    return types.none(), codegen


@intrinsic
def cycle_counter(typingctx):
    """The CPU's cycle counter (``llvm.readcyclecounter``; 0 where it has none)."""

    def codegen(context, builder, signature, arguments):
        return _call_without_arguments(builder, "llvm.readcyclecounter", ir.IntType(64))

    return types.int64(), codegen


@numba.njit(nogil=True, inline="always")
def _wait(spins):
    if spins < SPINS_BEFORE_YIELD:
        spin_pause()
    else:
        yield_core()


@numba.njit(nogil=True, cache=True)
def team_rendezvous(sync, team):
    """Wait until all ``team`` threads have arrived; False for every thread when
    they did not all arrive by the deadline (then no thread may go on)."""
    if atomic_add(sync, ARRIVED, 1) < 0:
        return False            # closed by a thread that gave up
    start = cycle_counter()
    spins = 0
    while True:
        arrived = atomic_load(sync, ARRIVED)
        if arrived >= team:
            return True
        if arrived < 0:
            return False
        spins += 1
        if spins > RENDEZVOUS_SPINS or cycle_counter() - start > RENDEZVOUS_CYCLES:
            # close the door unless the last thread arrived meanwhile
            if compare_and_swap(sync, ARRIVED, arrived, arrived + _CLOSED):
                return False
        _wait(spins)


@numba.njit(nogil=True, cache=True)
def team_barrier(sync, team):
    """Wait until all ``team`` threads reach this barrier (after
    :func:`team_rendezvous`); what each wrote before it is visible to all after."""
    generation = atomic_load(sync, BARRIER_GENERATION)
    if atomic_add(sync, BARRIER_COUNT, 1) == team - 1:
        atomic_store(sync, BARRIER_COUNT, 0)
        atomic_add(sync, BARRIER_GENERATION, 1)
        return
    spins = 0
    while atomic_load(sync, BARRIER_GENERATION) == generation:
        spins += 1
        _wait(spins)
