"""What a first call compiles after a fresh install (``dlap bench --suite first-calls`` times it):
the four paths of that benchmark, in a fresh interpreter with an empty kernel cache."""

import json
import os
import subprocess
import sys

_FIRST_CALLS = """
import json
import numpy as np
from numba.core import event
import dlap

compiled = []

class Compiles(event.Listener):
    def on_start(self, ev):
        f = ev.data["dispatcher"].py_func
        compiled.append(f.__module__ + "." + f.__qualname__)

    def on_end(self, ev):
        pass

event.register("numba:compile", Compiles())
rng = np.random.default_rng(0)
a, b = rng.random((1000, 2)), rng.random((1000, 2))
found = {}
for path, call in [
    ("float", lambda: dlap.linear_sum_assignment(rng.random((1000, 1000)))),
    ("geometric", lambda: dlap.linear_sum_assignment(((a[:, None] - b[None]) ** 2).sum(-1))),
    ("integer", lambda: dlap.linear_sum_assignment(rng.integers(0, 1000, (1000, 1000)))),
    ("batch", lambda: dlap.solve_batch(rng.random((200, 32, 32)))),
]:
    del compiled[:]
    call()
    found[path] = list(compiled)
print(json.dumps(found))
"""


def test_first_calls_compile_no_allocator_and_no_unused_engine(tmp_path):
    """No kernel on these paths allocates an array (each allocation compiled NumPy's allocators
    into the first call), and the geometric path, handed to ε-scaling at once from JV's prices,
    compiles neither a Hungarian variant's kernels nor the greedy start's."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _FIRST_CALLS], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    found = json.loads(run.stdout.splitlines()[-1])
    for path, kernels in found.items():
        assert kernels, path  # an empty cache: the path compiled something
        allocators = [k for k in kernels if k.startswith("numba.np.arrayobj")]
        assert not allocators, f"{path} compiled {allocators}"
    geometric = {k.rsplit(".", 1)[-1] for k in found["geometric"]}
    assert "assign_free_rows" in geometric
    unused = {"tree_forward_pass", "classical_forward_pass", "greedy_prices", "column_competition_serial"}
    assert not geometric & unused, geometric & unused
