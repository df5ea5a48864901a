"""Every variant of the Dask engine on the GPUs of this host, each solved twice (cold: CuPy
compiles its kernels; warm), checked against scipy and its certificate, with the phase times.

A solve still running after ``--limit`` seconds is reported as a hang with three samples of the
ranks' Python stacks (the loop it is in), and the cluster is restarted for the next variant: the
run that found the GPU-only bugs of the classical and hybrid variants (their CSR's column
indices were 64-bit where the GPU's forward pass reads 32-bit ones).

    python workflows/dask_gpu_paths.py --n 600 --cases classical/jv hybrid/jv
"""

from __future__ import annotations

import argparse
import functools
import threading
import time

CASES = ["tree/reduction", "tree/jv", "classical/reduction", "classical/jv", "hybrid/jv", "auto/auto", "scaling/auto"]


def rank_stacks() -> list[str]:
    """On a worker: the stacks of its threads that are inside dlap."""
    import sys
    import traceback

    stacks = []
    for frame in sys._current_frames().values():
        lines = traceback.format_stack(frame)
        if any("dlap/" in line for line in lines):
            stacks.append("".join(lines[-14:]))
    return stacks


def within(client, solve, limit: float):
    """``solve()`` in a thread: its result or exception, or "HANG" (stacks printed) after ``limit`` s."""
    box = {}

    def target():
        try:
            box["result"] = solve()
        except Exception as error:  # noqa: BLE001 (reported, and the next case runs)
            box["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        for sample in range(3):
            for worker, stacks in client.run(rank_stacks).items():
                print(f"--- stack sample {sample} {worker}\n" + "\n".join(stacks), flush=True)
            time.sleep(1.0)
        return "HANG"
    return box.get("result", box.get("error"))


def main() -> None:
    import distributed
    from scipy.optimize import linear_sum_assignment

    import dlap.distributed as dd
    from dlap.generate import uniform_dask

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--limit", type=float, default=25.0, help="seconds before a solve counts as hung")
    ap.add_argument("--cases", nargs="+", default=CASES, help="method/init pairs")
    args = ap.parse_args()
    n = args.n
    cluster = dd.start_cluster(dashboard_address=None)
    client = distributed.Client(cluster)
    for case in args.cases:
        method, init = case.split("/")
        chunks = (n // 2, n) if method == "classical" else (n, n // 2)
        for attempt in ("cold", "warm"):
            cost = uniform_dask(n, 10, chunks=chunks, gpu=True, seed=3)
            start = time.perf_counter()
            solve = functools.partial(dd.solve, cost, client, method=method, init=init, device="gpu")
            result = within(client, solve, args.limit)
            seconds = time.perf_counter() - start
            if result == "HANG" or isinstance(result, Exception):
                print(f"{case} {attempt}: {result!r} after {seconds:.1f} s", flush=True)
                if result == "HANG":
                    client.close()
                    cluster.close()
                    cluster = dd.start_cluster(dashboard_address=None)
                    client = distributed.Client(cluster)
                break
            s = result.stats
            host = cost.compute().get()
            optimum = host[linear_sum_assignment(host)].sum()
            print(f"{case} {attempt}: {seconds:.2f} s ok {result.objective == optimum} cert {result.verify().optimal} "
                  f"method {s.method} ranks {s.phase_counts.get('ranks')} iters {s.iterations} "
                  f"free-after-init {n - s.initial_assignments} comm {s.phase_counts.get('communication')} | "
                  + ", ".join(f"{k} {v:.3f}" for k, v in s.phase_seconds.items() if v > 0.005), flush=True)
    client.close()
    cluster.close()


if __name__ == "__main__":
    main()
