"""The CUDA kernels of the GPU backend: compiled once per process (and cached on disk by CuPy).

Sources live in ``backends/gpu/cuda/``: the generated constants (:mod:`dlap.backends.constants`)
and ``common.cuh`` are prepended to each ``.cu`` file, so the kernel cache key covers them too. Templated kernels are instantiated for the four cost
dtypes the solvers read (int32, int64, float32, float64: docs/design.md, "Rules").
"""

from __future__ import annotations

import functools
from importlib import resources

import cupy
import numpy as np

from ..constants import cuda_preamble

#: ordered() of +inf in common.cuh: the neutral element of the theta atomicMin
ORDERED_INF = np.uint64(0x7FF0000000000000 | (1 << 63))

_TYPES = {
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}
_TEMPLATES = {
    "reduction": (
        "row_minimum", "column_minimum_bands", "initial_assignment", "jv_reduction_transfer", "invalid_entries",
    ),
    "classical": ("compress_scan", "compress_fill", "classical_theta"),
    "forward": ("tree_forward_pass", "search_offer"),
    "tree": ("tree_scan",),
    "paths": (),
    "dgs": ("dgs_evaluate", "dgs_switch", "dgs_propose", "dgs_held"),
    "scaling": ("competition_bands", "row_regret", "greedy_prices", "cheapest_untaken", "lower_taken_prices",
                "scaling_phase"),
    "batch": ("batch_augmenting_paths",),
    "bidding": ("bidding_rounds", "row_minima_terms"),
    "points": ("nearest_columns", "price", "block_costs", "pair_costs", "cheapest_among"),
}
#: nvcc options of a module beyond the defaults: the points' costs are computed without FMA
#: contraction, as the CPU computes them
_OPTIONS = {"points": ("--fmad=false",)}
#: kernels templated on a cluster size too (thread block clusters need compute capability 9.0;
#: below it only clusters of one block are instantiated), and those also templated on whether its
#: blocks are wide (scaling.cu's WIDE: instantiated for the cluster sizes listed here only)
_CLUSTER_SIZES = {"scaling_phase": (1, 2, 4, 8, 16), "greedy_prices": (1, 2, 4, 8, 16)}
_WIDE_CLUSTERS = {"scaling_phase": (8, 16)}
#: the largest portable cluster; a larger one (16 blocks on Hopper) needs the kernel's
#: non-portable attribute and a device that schedules it (``cluster_sizes`` tries one)
PORTABLE_CLUSTER = 8
_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
#: modules whose kernels are launched cooperatively (CuPy sets this per module)
_COOPERATIVE = {"forward", "bidding"}
#: threads per block of the ordinary kernels, and of the persistent (one block per SM) ones
BLOCK = 256
PERSISTENT_BLOCK = 1024


def common_source() -> str:
    """The shared constants (:func:`dlap.backends.constants.cuda_preamble`) and ``common.cuh``'s
    device helpers: what every kernel source starts with (also the preamble of CuPy elementwise
    kernels that need them)."""
    return cuda_preamble() + (resources.files("dlap.backends.gpu") / "cuda" / "common.cuh").read_text()


def _source(name: str) -> str:
    return common_source() + "\n" + (resources.files("dlap.backends.gpu") / "cuda" / f"{name}.cu").read_text()


def cluster_sizes(name: str, wide: bool = False) -> tuple[int, ...]:
    """The cluster sizes kernel ``name`` is launched with on the current device (``wide``: with
    wide blocks): those instantiated, the non-portable ones where the device schedules them."""
    sizes = _instantiated(name)
    if sizes and sizes[-1] > PORTABLE_CLUSTER and not _schedules(sizes[-1], cupy.cuda.Device().id):
        sizes = tuple(c for c in sizes if c <= PORTABLE_CLUSTER)
    return tuple(c for c in sizes if c in _WIDE_CLUSTERS.get(name, ())) if wide else sizes


def _instantiated(name: str) -> tuple[int, ...]:
    """The cluster sizes kernel ``name`` is compiled for on the current device: one block below
    compute capability 9.0, which has no clusters."""
    sizes = _CLUSTER_SIZES.get(name, ())
    return sizes if int(cupy.cuda.Device().compute_capability) >= 90 else sizes[:1]


@functools.cache
def _schedules(cluster: int, device_id: int) -> bool:
    """Whether the device launches a cluster of ``cluster`` blocks (a non-portable size: Hopper's
    GPCs hold 16 only where enough of their multiprocessors are enabled): a greedy start of no
    rows, which only passes its cluster barriers, is launched to see."""
    dummy = cupy.zeros(max(1, cluster), dtype=np.int64)
    try:
        kernel("scaling", "greedy_prices", np.int32, cluster)((cluster,), (32,), (
            dummy, np.int32(0), np.int32(cluster), dummy, dummy, dummy, dummy, np.int32(0), np.int32(0)))
        cupy.cuda.Device(device_id).synchronize()
    except (cupy.cuda.driver.CUDADriverError, cupy.cuda.runtime.CUDARuntimeError):
        return False
    return True


def build_module(name: str, options: tuple[str, ...] = ()) -> cupy.RawModule:
    """``name``.cu with every instantiation its kernels are launched with, compiled with extra
    nvcc ``options`` (the workflows' ``-D`` variants: a profiled build, an A/B of a constant)."""
    expressions = [
        f"{k}<{', '.join(_template_args(k, t, c, wide))}>"
        for k in _TEMPLATES[name] for t in _TYPES.values() for c in (_instantiated(k) or (None,))
        for wide in (False, True) if not wide or c in _WIDE_CLUSTERS.get(k, ())
    ]
    return cupy.RawModule(
        code=_source(name), options=("-std=c++17", *options), name_expressions=expressions,
        enable_cooperative_groups=name in _COOPERATIVE,
    )


@functools.cache
def _module(name: str) -> cupy.RawModule:
    return build_module(name, _OPTIONS.get(name, ()))


def kernel(source: str, name: str, dtype=None, cluster: int | None = None, wide: bool = False):
    """The kernel ``name`` of ``source``.cu, instantiated for the cost dtype if it is a template
    (and for a cluster size and block width, for the kernels of ``_CLUSTER_SIZES``)."""
    args = _template_args(name, None if dtype is None else _TYPES[np.dtype(dtype)], cluster, wide)
    function = _module(source).get_function(f"{name}<{', '.join(args)}>" if args else name)
    if cluster is not None and cluster > PORTABLE_CLUSTER:
        cupy.cuda.driver.funcSetAttribute(function.kernel.ptr, _NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
    return function


def _template_args(name: str, type_name: str | None, cluster: int | None, wide: bool) -> list[str]:
    """The template arguments of kernel ``name``: the cost type, then for the kernels of
    ``_CLUSTER_SIZES`` the cluster size, and for those of ``_WIDE_CLUSTERS`` whether the blocks are wide."""
    args = [] if type_name is None else [type_name]
    if cluster is not None:
        args.append(str(cluster))
        if name in _WIDE_CLUSTERS:
            args.append("true" if wide else "false")
    return args


def blocks(n: int, block: int = BLOCK) -> int:
    """Blocks for one thread per item (at least one block)."""
    return max(1, -(-int(n) // block))


@functools.cache
def multiprocessors(device_id: int) -> int:
    return cupy.cuda.runtime.getDeviceProperties(device_id)["multiProcessorCount"]


@functools.cache
def shared_memory_limit(device_id: int) -> int:
    """Bytes of shared memory one block can have on this device (after opting in)."""
    return cupy.cuda.runtime.getDeviceProperties(device_id)["sharedMemPerBlockOptin"]


def shared_fits(nbytes: int, device_id: int) -> bool:
    """Whether one block can have ``nbytes`` of dynamic shared memory, beside room for the
    kernels' static shared memory."""
    return nbytes <= shared_memory_limit(device_id) - 4096


def shared_launch(kernel, nbytes: int, device_id: int) -> int:
    """The dynamic shared memory to launch ``kernel`` with: ``nbytes`` where one block can have
    them (raising the kernel's limit past the default 48 KB), else 0 (the kernel then works in
    device memory)."""
    if not shared_fits(nbytes, device_id):
        return 0
    if nbytes > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = nbytes
    return nbytes


def launch_persistent(source: str, name: str, dtype, args, device_id: int) -> None:
    """Launch a persistent kernel (the forward passes of forward.cu, the rounds of bids of
    bidding.cu) cooperatively: one 1024-thread block per multiprocessor, all resident at once,
    which the grid-wide barrier of common.cuh needs."""
    kernel(source, name, dtype)((multiprocessors(device_id),), (PERSISTENT_BLOCK,), args)
