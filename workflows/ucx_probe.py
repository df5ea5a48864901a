"""Host-side latency of CUDA calls inside GPU workers, by Dask protocol.

Why the Dask engine's ranks run slower in a UCX worker (README, "Protocols"): this times, in each
worker of a 2-GPU ``LocalCUDACluster``, a CuPy reduction read back with ``.item()`` (one launch
and one device-to-host sync), a stream of 3000 small launches, and a pure Python loop. Each is
timed in three places: the worker's event loop thread (``client.run``), one of its task threads
(``client.submit``, where a rank runs), and a thread that a task starts.

    python workflows/ucx_probe.py tcp ucx > workflows/results/probe.log
    UCX_TLS=^cuda_ipc python workflows/ucx_probe.py ucx
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


def probe() -> dict:
    """Microseconds per ``.item()`` round trip and per launch, seconds of a Python loop."""
    import cupy

    x = cupy.arange(1000)
    for _ in range(200):  # warm up: kernels compiled, memory pool filled
        x.sum().item()
    start = time.perf_counter()
    for _ in range(3000):
        x.sum().item()
    item = (time.perf_counter() - start) / 3000
    start = time.perf_counter()
    for _ in range(3000):
        x += 1
    cupy.cuda.Stream.null.synchronize()
    launch = (time.perf_counter() - start) / 3000
    start = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i
    return {"env_ucx": {k: v for k, v in os.environ.items() if k.startswith("UCX")}, "item_us": item * 1e6,
            "launch_us": launch * 1e6, "python_loop_s": time.perf_counter() - start,
            "threads": sorted(t.name for t in threading.enumerate())}


def in_new_thread() -> dict:
    """:func:`probe` in a thread started now (from a task thread)."""
    out = {}
    thread = threading.Thread(target=lambda: out.update(probe()), name="dlap-probe")
    thread.start()
    thread.join()
    return out


def main(protocols: list[str]) -> int:
    from distributed import Client

    from dlap.distributed import start_cluster
    from dlap.distributed.cluster import worker_addresses

    for protocol in protocols:
        with start_cluster(2, protocol=protocol, dashboard_address=":0") as cluster, Client(cluster) as client:
            client.run(probe)
            workers = worker_addresses(client)
            for rep in range(2):
                for worker, record in sorted(client.run(probe).items()):
                    print(json.dumps({"protocol": protocol, "where": "event loop", "rep": rep, "worker": worker,
                                      **record}), flush=True)
                for worker in workers:
                    record = client.submit(probe, workers=[worker], pure=False).result()
                    print(json.dumps({"protocol": protocol, "where": "task thread", "rep": rep, "worker": worker,
                                      **record}), flush=True)
                    record = client.submit(in_new_thread, workers=[worker], pure=False).result()
                    print(json.dumps({"protocol": protocol, "where": "new thread", "rep": rep, "worker": worker,
                                      **record}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["tcp", "ucx"]))
