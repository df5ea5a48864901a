"""CPU threads: small solves run on one thread, large ones on the limit the user sets, idle team
threads sleep instead of spinning, and the limit is settable as Numba and OpenMP users expect."""

import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import dlap
from dlap import generate, threads


def _threads_seen_during(cost, **options) -> set:
    seen = set()
    dlap.solve(cost, device="cpu", progress=lambda update: seen.add(numba.get_num_threads()), **options)
    return seen


@pytest.fixture
def limit_restored():
    saved = threads._limit
    yield
    threads._limit = saved


def test_a_small_solve_runs_on_one_thread():
    cost = generate.geometric(200, seed=1)
    before = numba.get_num_threads()
    assert _threads_seen_during(cost, method="tree") == {1}
    assert dlap.solve(cost, device="cpu").stats.threads == 1
    assert numba.get_num_threads() == before  # the caller's setting is given back


def test_a_large_solve_runs_on_the_limit(limit_restored):
    n_threads = min(2, numba.config.NUMBA_NUM_THREADS)
    dlap.set_num_threads(n_threads)
    cost = generate.geometric(1100, seed=2)[:, :1000].copy()  # 1.1M entries: above SERIAL_MAX_ENTRIES
    assert cost.size >= threads.SERIAL_MAX_ENTRIES
    assert _threads_seen_during(cost, method="tree") == {n_threads}
    dlap.set_num_threads(1)
    result = dlap.solve(cost, device="cpu", method="tree")
    assert result.stats.threads == 1
    assert result.verify().optimal


@pytest.mark.parametrize("bad", [0, -1, 1.5, "two", True, numba.config.NUMBA_NUM_THREADS + 1])
def test_set_num_threads_refuses_what_is_not_a_thread_count(bad, limit_restored):
    with pytest.raises(ValueError, match="number of threads"):
        dlap.set_num_threads(bad)


def _run(code: str, **env) -> str:
    full = {**os.environ, **env}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_environment_sets_the_limit():
    assert _run("import dlap; print(dlap.get_num_threads())", DLAP_NUM_THREADS="1") == "1"
    out = subprocess.run(
        [sys.executable, "-c", "import dlap; dlap.get_num_threads()"], capture_output=True, text=True,
        env={**os.environ, "DLAP_NUM_THREADS": "many"},
    )
    assert out.returncode != 0 and "DLAP_NUM_THREADS must be a whole number of threads" in out.stderr


def test_the_default_limit_is_the_cores_this_process_may_use():
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("CPU affinity is a Linux call")
    code = "import os, dlap; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); print(dlap.get_num_threads())"
    env = {k: v for k, v in os.environ.items() if k != "DLAP_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def test_idle_team_threads_sleep_unless_the_user_chose_otherwise():
    code = "import os, dlap; dlap.solve([[1.0, 2.0], [3.0, 4.0]], device='cpu'); print(os.environ['OMP_WAIT_POLICY'])"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "PASSIVE", out.stderr
    assert _run(code, OMP_WAIT_POLICY="ACTIVE") == "ACTIVE"


def test_threads_for_follows_the_size_rule(limit_restored):
    dlap.set_num_threads(1)
    assert threads.threads_for(threads.SERIAL_MAX_ENTRIES - 1) == 1
    assert threads.threads_for(threads.SERIAL_MAX_ENTRIES) == 1
    assert threads.threads_for(threads.SERIAL_MAX_ENTRIES, limit=3) == 3
    assert threads.threads_for(10, limit=3) == 1
    np.testing.assert_equal(dlap.get_num_threads(), 1)


CONCURRENT = """
import threading, numpy as np, numba, dlap
from scipy.optimize import linear_sum_assignment as scipy_lsa
wrong = []
def work(seed):
    rng = np.random.default_rng(seed)
    for _ in range(12):
        n = int(rng.integers(20, 100))
        cost = rng.random((n, n)) if seed % 2 else rng.integers(0, 50, (n, n + 3))
        rows, cols = scipy_lsa(cost)
        if not np.isclose(dlap.solve(cost, device="cpu").objective, cost[rows, cols].sum(), rtol=1e-12, atol=0):
            wrong.append(seed)
    batch = dlap.solve_batch(rng.random((16, 8, 8)))
    if len(batch) != 16:
        wrong.append(seed)
threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(numba.threading_layer(), wrong)
"""


@pytest.mark.parametrize("layer", ["workqueue", "default"])
def test_solves_from_many_threads_at_once_on_every_threading_layer(layer):
    """Issue 37: eight threads solving at once aborted the process (exit 134, "Concurrent access
    has been detected") under Numba's workqueue layer, which Numba falls back to where no OpenMP
    or TBB runtime exists. There dlap's CPU solves take turns; elsewhere they run at once."""
    env = {**os.environ, "NUMBA_THREADING_LAYER": layer}
    done = subprocess.run([sys.executable, "-c", CONCURRENT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    name, wrong = done.stdout.split(maxsplit=1)
    assert wrong.strip() == "[]" and (name == "workqueue") == (layer == "workqueue")
