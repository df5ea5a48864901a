"""What one step of a BFS split over two GPUs would cost in synchronisation, two ways: a host-driven
NCCL all-reduce of one value with the host reading the result (what the Dask engine's ranks do
per collective), against a flag passed between two persistent kernels over NVLink by peer
stores (device-initiated, no host in the loop). Issue 16's n = 40000 targets need the BFS split,
about 130 levels a search, 10^4 levels a solve: this says which of the two a split BFS could
afford.

    python workflows/nvlink_pingpong.py --rounds 20000

One process drives both GPUs (devices 0 and 1; peer access enabled between them).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

PINGPONG = r"""
// One thread on each GPU: the first stores round r's odd value into the other GPU's flag and
// waits for the even answer in its own; the second answers. A spin gives up after `patience`
// reads (status 1) so that a missing peer path cannot hang the GPU.
extern "C" __global__ void pingpong(volatile unsigned int* mine, volatile unsigned int* theirs, int rounds,
                                    int first, long long patience, unsigned long long* status) {
    for (int r = 0; r < rounds; ++r) {
        const unsigned int ping = 2u * r + 1u, pong = 2u * r + 2u;
        if (first) {
            *theirs = ping;
            __threadfence_system();
        }
        const unsigned int want = first ? pong : ping;
        long long spins = 0;
        while (*mine != want)
            if (++spins > patience) { status[0] = 1; return; }
        if (!first) {
            *theirs = pong;
            __threadfence_system();
        }
    }
    status[0] = 0;
}
"""


def device_pingpong(rounds: int) -> float:
    """Microseconds per round trip of a flag between two persistent kernels, by peer stores."""
    import cupy

    kernels, flags, status = [], [], []
    for d in (0, 1):
        with cupy.cuda.Device(d):
            kernels.append(cupy.RawKernel(PINGPONG, "pingpong"))
            flags.append(cupy.zeros(1, dtype=np.uint32))
            status.append(cupy.full(1, 2, dtype=np.uint64))
    for d in (0, 1):
        cupy.cuda.Device(d).synchronize()
    start = time.perf_counter()
    for d in (1, 0):  # the answering side first, so it is spinning when the first ping lands
        with cupy.cuda.Device(d):
            kernels[d]((1,), (1,), (flags[d], flags[1 - d], np.int32(rounds), np.int32(d == 0),
                                    np.int64(1 << 24), status[d]))
    for d in (0, 1):
        cupy.cuda.Device(d).synchronize()
    elapsed = time.perf_counter() - start
    codes = [int(status[d].get()[0]) for d in (0, 1)]
    if codes != [0, 0]:
        raise RuntimeError(f"the ping-pong gave up (status {codes})")
    return elapsed / rounds * 1e6


def nccl_allreduce(rounds: int) -> float:
    """Microseconds per all-reduce of one float64 over both GPUs, the host reading the result each
    time (one process, NCCL's group calls)."""
    import cupy
    from cupy.cuda import nccl

    comms = nccl.NcclCommunicator.initAll([0, 1])
    bufs, streams = [], []
    for d in (0, 1):
        with cupy.cuda.Device(d):
            bufs.append(cupy.full(1, float(d)))
            streams.append(cupy.cuda.Stream(non_blocking=True))

    def once() -> float:
        nccl.groupStart()
        for d in (0, 1):
            with cupy.cuda.Device(d):
                comms[d].allReduce(bufs[d].data.ptr, bufs[d].data.ptr, 1, nccl.NCCL_FLOAT64, nccl.NCCL_MIN,
                                   streams[d].ptr)
        nccl.groupEnd()
        with cupy.cuda.Device(0):
            return float(cupy.asnumpy(bufs[0], stream=streams[0])[0])

    for _ in range(100):
        once()
    start = time.perf_counter()
    for _ in range(rounds):
        once()
    return (time.perf_counter() - start) / rounds * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20000)
    args = ap.parse_args()
    import cupy

    for d in (0, 1):
        with cupy.cuda.Device(d):
            cupy.cuda.runtime.deviceEnablePeerAccess(1 - d)
    for _ in range(3):
        print(f"device-initiated flag round trip over NVLink: {device_pingpong(args.rounds):.2f} us", flush=True)
        print(f"NCCL all-reduce of one value, host reads it:  {nccl_allreduce(args.rounds // 10):.2f} us",
              flush=True)


if __name__ == "__main__":
    main()
