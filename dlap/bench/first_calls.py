"""``dlap bench --suite first-calls``: what the first solve of a fresh process costs, against scipy.

For each path of ``method="auto"`` on the CPU (float, geometric and integer matrices of 1000 x
1000, a batch of 200 problems of 32 x 32), a fresh interpreter imports the solver, makes the
first call and a second one (each timed): dlap with its kernels in the disk cache ("cached"), and
with an empty cache, so that the first call compiles them ("empty"; a folder of its own through
``NUMBA_CACHE_DIR``), and scipy's ``linear_sum_assignment`` (a loop over the batch); dlap's
processes also time Numba's compilations (its ``numba:compile`` events, nested ones counted once).
Records: ``{"suite": "first-calls", "path", "solver", "cache", "import_s", "first_s", "second_s",
"compile_s"}``.
"""

from __future__ import annotations

import tempfile

import numpy as np

from .deadlines import fresh
from .records import append, machine

PATHS = ("float", "geometric", "integer", "batch")
#: what each fresh process measures
KEYS = ("import_s", "first_s", "second_s", "compile_s")

_CALLS = """
import json, sys, time
path, solver = sys.argv[1], sys.argv[2]
started = time.perf_counter()
import numpy as np
if solver == "scipy":
    from scipy.optimize import linear_sum_assignment
else:
    from dlap import linear_sum_assignment, solve_batch
imported = time.perf_counter() - started
compiling = [0, 0.0, 0.0]  # open compile events, seconds compiled, when the outermost began
if solver == "dlap":
    from numba.core import event

    class Compiles(event.Listener):
        def on_start(self, ev):
            if not compiling[0]:
                compiling[2] = time.perf_counter()
            compiling[0] += 1

        def on_end(self, ev):
            compiling[0] -= 1
            if not compiling[0]:
                compiling[1] += time.perf_counter() - compiling[2]

    event.register("numba:compile", Compiles())
rng = np.random.default_rng(0)
if path == "float":
    cost = rng.random((1000, 1000))
elif path == "geometric":
    a, b = rng.random((1000, 2)), rng.random((1000, 2))
    cost = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
elif path == "integer":
    cost = rng.integers(0, 1000, (1000, 1000))
else:
    cost = rng.random((200, 32, 32))

def call():
    if path != "batch":
        return linear_sum_assignment(cost)
    if solver == "scipy":
        return [linear_sum_assignment(c) for c in cost]
    return solve_batch(cost)

times = []
for _ in range(2):
    started = time.perf_counter()
    call()
    times.append(time.perf_counter() - started)
print(json.dumps({"import_s": imported, "first_s": times[0], "second_s": times[1],
                  "compile_s": compiling[1]}))
"""


def run(repeat: int = 3, out=None, echo=print, paths=PATHS) -> list[dict]:
    """Each of ``paths``, ``repeat`` fresh processes per solver and cache state (with an empty
    cache each compiles everything again); records appended to ``out`` (a path) as JSON lines."""
    host = machine()
    records = []
    for path in paths:
        fresh(_CALLS, path, "dlap")  # the cache holds this path's kernels before the "cached" runs
        for solver, cache, runs in (("dlap", "cached", repeat), ("dlap", "empty", repeat), ("scipy", "", repeat)):
            found = []
            for _ in range(runs):
                if cache == "empty":
                    with tempfile.TemporaryDirectory(prefix="dlap-bench-cache-") as folder:
                        found.append(fresh(_CALLS, path, solver, env={"NUMBA_CACHE_DIR": folder}))
                else:
                    found.append(fresh(_CALLS, path, solver))
            record = {"suite": "first-calls", "path": path, "solver": solver, "cache": cache, **host}
            record.update({key: [f[key] for f in found] for key in KEYS})
            records.append(record)
            echo(f"{path} {solver} {cache}: first call {np.median(record['first_s']):.3f} s")
    append(out, records)
    return records


def table(records) -> str:
    """Medians of the import, the first call (and its compilations) and the second call, and
    against scipy's: the first call, and the import with the first call."""
    def first(r):
        return float(np.median(r["first_s"]))

    def start(r):
        return float(np.median(np.add(r["import_s"], r["first_s"])))

    scipy = {r["path"]: r for r in records if r["solver"] == "scipy"}
    lines = ["| path | solver | cache | runs | import s | first call s | of which compiling s "
             "| second call s | first call / scipy's | import + first call / scipy's |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        theirs = scipy.get(r["path"]) if r["solver"] != "scipy" else None
        ratios = (f"{first(r) / first(theirs):.1f}x | {start(r) / start(theirs):.1f}x" if theirs else " | ")
        compiled = f"{np.median(r['compile_s']):.2f}" if r["solver"] != "scipy" else ""
        lines.append(f"| {r['path']} | {r['solver']} | {r['cache']} | {len(r['first_s'])} | "
                     f"{np.median(r['import_s']):.3f} | {first(r):.3f} | {compiled} "
                     f"| {np.median(r['second_s']):.4f} | {ratios} |")
    return "\n".join(lines)
