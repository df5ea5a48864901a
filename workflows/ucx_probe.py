"""Host-side latency of CUDA calls inside GPU workers, by Dask protocol, and who holds the GIL.

Why the Dask engine's ranks run slower in a UCX worker (README, "Protocols"): this times, in each
worker of a 2-GPU ``LocalCUDACluster``, a CuPy reduction read back with ``.item()`` (one launch
and one device-to-host sync), a stream of 3000 small launches, 20000 ``time.sleep(0)`` (each
releases the GIL and takes it back, no CUDA) and a pure Python loop. Each is timed in three
places: the worker's event loop thread (``client.run``), one of its task threads
(``client.submit``, where a rank runs), and a thread that a task starts. Off the event loop the
probe also records what the event loop thread is doing meanwhile: its CPU use (from
``/proc/self/task``), that of every other thread of the process, and the top Python frames of
the event loop thread sampled every millisecond.

A case is a protocol and, after commas, variables set for the cluster's processes: ``tcp``,
``ucx`` (ucxx's settings as ``dlap.distributed.start_cluster`` makes them,
``cluster.UCX_ENVIRONMENT``), ``ucx,UCXPY_PROGRESS_MODE=blocking,UCXPY_ENABLE_PYTHON_FUTURE=0``
(distributed-ucxx's own defaults).

    python workflows/ucx_probe.py tcp ucx ucx,UCXPY_PROGRESS_MODE=blocking,UCXPY_ENABLE_PYTHON_FUTURE=0
    UCX_TLS=^cuda_ipc python workflows/ucx_probe.py ucx
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time


def _thread_cpu() -> dict[int, tuple[str, float]]:
    """CPU seconds so far of each thread of this process, by native id: (name, seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        out[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / tick)
    return out


def _sample_event_loop(stop: threading.Event, frames: collections.Counter) -> None:
    """Count the event loop thread's top two Python frames until ``stop`` is set."""
    ident = threading.main_thread().ident
    while not stop.wait(0.001):
        frame = sys._current_frames().get(ident)
        where = []
        while frame is not None and len(where) < 2:
            code = frame.f_code
            where.append(f"{os.path.basename(code.co_filename)}:{code.co_name}:{frame.f_lineno}")
            frame = frame.f_back
        frames[" <- ".join(where)] += 1


def _timings() -> dict:
    """Microseconds per ``.item()`` round trip, per launch and per GIL release; seconds of a
    Python loop."""
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
    for _ in range(20000):
        time.sleep(0)
    release = (time.perf_counter() - start) / 20000
    start = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i
    return {"item_us": item * 1e6, "launch_us": launch * 1e6, "gil_release_us": release * 1e6,
            "python_loop_s": time.perf_counter() - start}


def probe() -> dict:
    """:func:`_timings`, plus (off the event loop thread) what the other threads did meanwhile."""
    in_loop = threading.current_thread() is threading.main_thread()
    frames: collections.Counter = collections.Counter()
    stop = threading.Event()
    sampler = None if in_loop else threading.Thread(target=_sample_event_loop, args=(stop, frames))
    before, start = _thread_cpu(), time.perf_counter()
    if sampler is not None:
        sampler.start()
    record = _timings()
    stop.set()
    if sampler is not None:
        sampler.join()
    elapsed, after = time.perf_counter() - start, _thread_cpu()
    busy = {f"{name}[{tid}]": round((cpu - before[tid][1]) / elapsed, 3)
            for tid, (name, cpu) in after.items() if tid in before and cpu - before[tid][1] > 0.02 * elapsed}
    record.update({
        "env_ucx": {k: v for k, v in os.environ.items() if k.startswith("UCX")},
        "event_loop_cpu": round((after[threading.main_thread().native_id][1]
                                 - before[threading.main_thread().native_id][1]) / elapsed, 3),
        "busy_threads": busy,  # CPU share of each thread that used > 2% of the probe's time
        "event_loop_frames": frames.most_common(4),
        "threads": sorted(t.name for t in threading.enumerate()),
    })
    return record


def in_new_thread() -> dict:
    """:func:`probe` in a thread started now (from a task thread)."""
    out = {}
    thread = threading.Thread(target=lambda: out.update(probe()), name="dlap-probe")
    thread.start()
    thread.join()
    return out


def main(cases: list[str]) -> int:
    from distributed import Client

    from dlap.distributed import start_cluster
    from dlap.distributed.cluster import worker_addresses

    for case in cases:
        protocol, *settings = case.split(",")
        saved = dict(os.environ)
        os.environ.update(dict(setting.split("=", 1) for setting in settings))
        with start_cluster(2, protocol=protocol, dashboard_address=":0") as cluster, Client(cluster) as client:
            client.run(probe)
            workers = worker_addresses(client)
            for rep in range(2):
                for worker, record in sorted(client.run(probe).items()):
                    print(json.dumps({"case": case, "where": "event loop", "rep": rep, "worker": worker,
                                      **record}), flush=True)
                for worker in workers:
                    record = client.submit(probe, workers=[worker], pure=False).result()
                    print(json.dumps({"case": case, "where": "task thread", "rep": rep, "worker": worker,
                                      **record}), flush=True)
                    record = client.submit(in_new_thread, workers=[worker], pure=False).result()
                    print(json.dumps({"case": case, "where": "new thread", "rep": rep, "worker": worker,
                                      **record}), flush=True)
        os.environ.clear()
        os.environ.update(saved)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["tcp", "ucx"]))
