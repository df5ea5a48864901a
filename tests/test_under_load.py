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


THREAD_MEDIANS = """
import json, os, sys, time, numpy as np, dlap
from dlap import generate
setup, call, repeats = sys.argv[1], compile(sys.argv[2], "<call>", "eval"), int(sys.argv[3])
exec(setup)
threads = {"one": 1, "default": len(os.sched_getaffinity(0))}
times = {name: [] for name in threads}
for name, count in threads.items():  # each setting's first call, untimed (it may start a thread team)
    dlap.set_num_threads(count)
    eval(call)
for _ in range(repeats):  # alternating, so a burst of the busy processes falls on both settings
    for name, count in threads.items():
        dlap.set_num_threads(count)
        start = time.perf_counter()
        eval(call)
        times[name].append(time.perf_counter() - start)
print(json.dumps({name: float(np.median(t)) for name, t in times.items()}))
"""


def thread_medians(setup: str, call: str, repeats: int) -> dict:
    """Median seconds of ``call`` (after ``setup``) on one thread and on every core's thread, in
    a fresh interpreter, the two settings timed in turn."""
    return run_fresh(THREAD_MEDIANS, setup, call, repeats)


def test_a_small_cpu_solve_on_busy_cores_is_within_2x_of_one_thread(busy_cores):
    times = thread_medians("cost = generate.uniform(200, 1.0, seed=0)", 'dlap.solve(cost, device="cpu")', 15)
    assert times["default"] <= 2 * times["one"] + 0.001, times


def test_a_cpu_batch_on_busy_cores_is_within_2x_of_one_thread(busy_cores):
    """dlap.solve_batch spreads problems over a thread team: on cores other processes hold, the
    team must wait passively, not spin against them."""
    times = thread_medians(  # 2 M entries: solved by a thread team
        "costs = np.random.default_rng(0).random((2000, 32, 32))", 'dlap.solve_batch(costs, device="cpu")', 7)
    assert times["default"] <= 2 * times["one"] + 0.001, times
