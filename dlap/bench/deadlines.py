"""``dlap bench --suite deadlines``: the timed promises, measured as distributions, idle and with
every core this process may use held by a busy loop in another process.

- DGS deadlines (``time_limit``): how far past its deadline each solve ends, for the first call
  of a fresh process (its kernels not loaded) and after ``dlap.load_dgs_kernels`` (GEOM benefit
  matrices that DGS outlasts, so the deadline binds).
- The CPU's thread team under load: a small solve and a batch on one thread and on the default
  threads, timed in turn, so that a team spinning against busy cores would show.

Each measurement runs in a fresh interpreter. Records: ``{"suite": "deadlines", "load": "idle" |
"busy", "kind": ..., ...}``; the table gives medians, 90th and 99th percentiles and maxima.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import numpy as np

from .records import append, machine

#: the DGS deadlines measured, seconds
LIMITS = (0.05, 0.1)
#: GEOM benefit sizes: first calls (n = 500) and calls after loading (n = 1000, which DGS outlasts)
FIRST_N, LOADED_N = 500, 1000

_FIRST_CALLS = """
import json, sys, time, warnings, dlap
from dlap import generate
warnings.simplefilter("ignore", RuntimeWarning)
limit, seed = float(sys.argv[1]), int(sys.argv[2])
cost = generate.geometric(int(sys.argv[3]), seed=seed, same_points=True)
start = time.perf_counter()
result = dlap.solve(cost, maximize=True, method="dgs", time_limit=limit)
print(json.dumps({"over_ms": (time.perf_counter() - start - limit) * 1000, "switches": result.stats.switches}))
"""

_LOADED_CALLS = """
import json, sys, time, dlap
from dlap import generate
repeat, n = int(sys.argv[1]), int(sys.argv[2])
limits = [float(x) for x in sys.argv[3:]]
dlap.load_dgs_kernels()
cost = generate.geometric(n, seed=3, same_points=True)
over = {str(limit): [] for limit in limits}
for _ in range(repeat):
    for limit in limits:
        start = time.perf_counter()
        dlap.solve(cost, maximize=True, method="dgs", time_limit=limit)
        over[str(limit)].append((time.perf_counter() - start - limit) * 1000)
print(json.dumps(over))
"""

_THREAD_TEAM = """
import json, os, sys, time, numpy as np, dlap
from dlap import generate
repeat = int(sys.argv[1])
calls = {
    "solve n=200": (generate.uniform(200, 1.0, seed=0), lambda c: dlap.solve(c, device="cpu")),
    "batch 2000x32x32": (np.random.default_rng(0).random((2000, 32, 32)), lambda c: dlap.solve_batch(c, device="cpu")),
}
settings = {"one": 1, "default": len(os.sched_getaffinity(0))}
out = {}
for name, (cost, call) in calls.items():
    times = {s: [] for s in settings}
    for s, count in settings.items():  # each setting's first call, untimed (it may start a thread team)
        dlap.set_num_threads(count)
        call(cost)
    for _ in range(repeat):  # in turn, so a burst of the busy processes falls on both settings
        for s, count in settings.items():
            dlap.set_num_threads(count)
            start = time.perf_counter()
            call(cost)
            times[s].append((time.perf_counter() - start) * 1000)
    out[name] = times
print(json.dumps(out))
"""


def fresh(code: str, *args, env: dict | None = None) -> dict:
    """Run ``code`` in a fresh interpreter (``args`` its argv, ``env`` added to the environment) and
    return the JSON it prints."""
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env},
                          timeout=600)
    if done.returncode:
        raise RuntimeError(f"a measured process failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


@contextlib.contextmanager
def busy_cores(busy: bool):
    """A Python busy loop per core this process may use, in other processes (none when idle)."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(len(os.sched_getaffinity(0)) if busy else 0)]
    try:
        yield
    finally:
        for p in burners:
            p.kill()
            p.wait()


def run(repeat: int = 20, loads=("idle", "busy"), out=None, echo=print, first_calls: int | None = None) -> list[dict]:
    """Every measurement under every load; records appended to ``out`` (a path) as JSON lines.
    ``first_calls``: fresh processes per deadline for the first call (default ``max(3, repeat // 4)``)."""
    records = []
    host = machine()
    for load in loads:
        with busy_cores(load == "busy"):
            for limit in LIMITS:
                first = [fresh(_FIRST_CALLS, limit, seed, FIRST_N)
                         for seed in range(first_calls or max(3, repeat // 4))]
                records.append({"kind": "dgs first call", "limit": limit, "n": FIRST_N,
                                "over_ms": [r["over_ms"] for r in first]})
            loaded = fresh(_LOADED_CALLS, repeat, LOADED_N, *LIMITS)
            records += [{"kind": "dgs loaded", "limit": float(k), "n": LOADED_N, "over_ms": v} for k, v in loaded.items()]
            team = fresh(_THREAD_TEAM, repeat)
            records += [{"kind": f"{name}, {s} threads", "ms": t} for name, times in team.items() for s, t in times.items()]
        for r in records:
            r.setdefault("load", load)
            r.update(suite="deadlines", **host)
        echo(f"{load}: done")
    append(out, records)
    return records


def table(records) -> str:
    """Medians, 90th and 99th percentiles and maxima: milliseconds past the deadline (DGS), or
    milliseconds per call (the thread team)."""
    lines = ["| load | measurement | deadline | runs | median ms | p90 | p99 | max |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        values = np.array(r.get("over_ms", r.get("ms")))
        what = f"{r['kind']} (n = {r['n']}), past the deadline" if "over_ms" in r else r["kind"]
        limit = f"{r['limit'] * 1000:g} ms" if "limit" in r else ""
        lines.append(f"| {r['load']} | {what} | {limit} | {values.size} | {np.median(values):.2f} | "
                     f"{np.percentile(values, 90):.2f} | {np.percentile(values, 99):.2f} | {values.max():.2f} |")
    return "\n".join(lines)
