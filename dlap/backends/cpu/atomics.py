"""Atomic steps on an integer array's entry, for CPU kernels whose threads share a few words.

Numba has atomic operations on the GPU only; these two intrinsics emit LLVM's ``cmpxchg`` and
``atomicrmw add`` (sequentially consistent: no load or store of the calling thread moves across
them), and a spin lock on an entry built from them (:func:`lock`, :func:`unlock`): the thread
team's kernels of :mod:`dlap.backends.cpu.points` lock columns, rows and their shared state with
them and count with them.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from .numba_setup import njit


def _entry(context, builder, array_type, array, index):
    return cgutils.get_item_pointer(context, builder, array_type, context.make_array(array_type)(context, builder, array),
                                    [index])


def _integer_vector(array) -> bool:
    return isinstance(array, types.Array) and array.ndim == 1 and isinstance(array.dtype, types.Integer)


@intrinsic
def compare_and_swap(typingctx, array, index, expected, new):
    """``array[index] = new`` where it equals ``expected``, in one atomic step; returns the value
    it had (``expected`` where the swap happened)."""
    if not _integer_vector(array):
        return None
    signature = array.dtype(array, types.intp, array.dtype, array.dtype)

    def codegen(context, builder, sig, args):
        array_value, at, old, value = args
        entry = _entry(context, builder, sig.args[0], array_value, at)
        return builder.extract_value(builder.cmpxchg(entry, old, value, "seq_cst", "seq_cst"), 0)

    return signature, codegen


@intrinsic
def fetch_add(typingctx, array, index, value):
    """``array[index] += value`` in one atomic step; returns the value it had."""
    if not _integer_vector(array):
        return None
    signature = array.dtype(array, types.intp, array.dtype)

    def codegen(context, builder, sig, args):
        array_value, at, added = args
        return builder.atomic_rmw("add", _entry(context, builder, sig.args[0], array_value, at), added, "seq_cst")

    return signature, codegen


@njit(cache=True, inline="always")
def lock(flags, at) -> None:
    """Wait until ``flags[at]`` is 0, then set it to 1, in one atomic step."""
    while compare_and_swap(flags, at, 0, 1) != 0:
        pass


@njit(cache=True, inline="always")
def unlock(flags, at) -> None:
    """``flags[at]`` back to 0 (the lock's holder)."""
    compare_and_swap(flags, at, 1, 0)
