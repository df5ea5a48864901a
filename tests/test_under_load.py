"""Promises that break on a busy machine, tested on one: every core this process may use runs a
Python busy loop in another process while a fresh interpreter (kernels not loaded: the first call
of a process) solves.

- DGS's deadline holds within 10 ms at 0.05 s and 0.1 s, the first call included (it returns its
  greedy start, made in NumPy, while the kernels are not loaded), and once ``load_dgs_kernels``
  has run, DGS switches until the deadline binds (GEOM benefit n = 1000 outlasts it).
- A CPU solve of n = 200, and a CPU batch of 2000 problems, take at most twice the time of one
  thread (no thread team spinning against the busy processes).
"""

import json
import os
import subprocess
import sys

import pytest

#: the issue's promise: a deadline is met within this many seconds
DEADLINE_SLACK = 0.010


@pytest.fixture
def busy_cores():
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(len(os.sched_getaffinity(0)))]
    yield
    for p in burners:
        p.kill()
        p.wait()


def run_fresh(code: str, *args) -> dict:
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


DEADLINES = """
import json, sys, time, warnings, dlap
from dlap import generate
warnings.simplefilter("ignore", RuntimeWarning)  # the warning that the kernels are not loaded
def timed(cost, limit):
    start = time.perf_counter()
    result = dlap.solve(cost, maximize=True, method="dgs", time_limit=limit)
    seconds = time.perf_counter() - start
    full = sorted(result.col_ind.tolist()) == list(range(cost.shape[0]))
    return {"limit": limit, "seconds": seconds, "switches": result.stats.switches, "full": full,
            "n": cost.shape[0]}
first = [timed(generate.geometric(500, seed=s, same_points=True), limit) for s, limit in ((1, 0.05), (2, 0.1))]
dlap.load_dgs_kernels()
cost = generate.geometric(1000, seed=3, same_points=True)  # DGS takes 0.14 s on an idle core: the deadline binds
loaded = [timed(cost, limit) for _ in range(5) for limit in (0.05, 0.1)]
print(json.dumps({"first": first, "loaded": loaded}))
"""


def test_dgs_deadlines_hold_on_busy_cores_from_the_first_call(busy_cores):
    runs = run_fresh(DEADLINES)
    for record in runs["first"] + runs["loaded"]:
        assert record["full"], record
        assert record["seconds"] <= record["limit"] + DEADLINE_SLACK, record
    # with the kernels loaded DGS switches (a 50 ms call can spend its time on the mandatory passes
    # over the matrix, the reductions and the start, when the busy processes hold the cores)
    assert sum(r["switches"] > 0 for r in runs["loaded"]) >= len(runs["loaded"]) // 2, runs["loaded"]


SMALL_SOLVES = """
import json, time, numpy as np, dlap
from dlap import generate
cost = generate.uniform(200, 1.0, seed=0)
def median(threads):
    dlap.set_num_threads(threads)
    dlap.solve(cost, device="cpu")
    times = []
    for _ in range(15):
        start = time.perf_counter()
        dlap.solve(cost, device="cpu")
        times.append(time.perf_counter() - start)
    return float(np.median(times))
print(json.dumps({"one": median(1), "default": median(len(__import__("os").sched_getaffinity(0)))}))
"""


def test_a_small_cpu_solve_on_busy_cores_is_within_2x_of_one_thread(busy_cores):
    times = run_fresh(SMALL_SOLVES)
    assert times["default"] <= 2 * times["one"] + 0.001, times


BATCHES = """
import json, time, numpy as np, dlap
costs = np.random.default_rng(0).random((2000, 32, 32))  # 2 M entries: solved by a thread team
def median(threads):
    dlap.set_num_threads(threads)
    dlap.solve_batch(costs, device="cpu")
    times = []
    for _ in range(7):
        start = time.perf_counter()
        dlap.solve_batch(costs, device="cpu")
        times.append(time.perf_counter() - start)
    return float(np.median(times))
print(json.dumps({"one": median(1), "default": median(len(__import__("os").sched_getaffinity(0)))}))
"""


def test_a_cpu_batch_on_busy_cores_is_within_2x_of_one_thread(busy_cores):
    """dlap.solve_batch spreads problems over a thread team: on cores other processes hold, the
    team must wait passively, not spin against them."""
    times = run_fresh(BATCHES)
    assert times["default"] <= 2 * times["one"] + 0.001, times
