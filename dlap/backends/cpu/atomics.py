"""Atomic steps on an integer array's entry, for CPU kernels whose threads share a few words.

Numba has atomic operations on the GPU only; these two intrinsics emit LLVM's ``cmpxchg`` and
``atomicrmw add`` (sequentially consistent: no load or store of the calling thread moves across
them), which :func:`dlap.backends.cpu.points.bid_in_parallel` uses for its column locks and its
shared counters.
"""

from __future__ import annotations

from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


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
