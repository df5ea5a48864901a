"""GPU DGS deadlines in a fresh process: the first call (kernels not loaded), load_dgs_kernels, then calls.

    python workflows/dgs_gpu_deadline.py   (raw output: workflows/results/dgs-gpu-deadline-20261122.log)
"""
import json, sys, time, warnings
t0 = time.perf_counter()
import cupy, numpy as np, dlap
from dlap import generate
warnings.simplefilter("ignore", RuntimeWarning)
print(f"import {time.perf_counter() - t0:.3f} s")
out = []
def timed(cost, limit, maximize, tag):
    start = time.perf_counter()
    r = dlap.solve(cost, maximize=maximize, method="dgs", time_limit=limit, device="gpu")
    s = time.perf_counter() - start
    rec = {"tag": tag, "n": cost.shape[0], "limit": limit, "seconds": round(s, 4), "over_ms": round((s - limit) * 1000, 2),
           "switches": r.stats.switches, "device": r.stats.device,
           "full": len(set(cupy.asnumpy(r.col_ind).tolist())) == cost.shape[0], "objective": r.objective}
    print(json.dumps(rec)); out.append(rec)
geo = generate.geometric(5000, seed=1)
timed(geo, 1.0, False, "first call, host matrix, kernels not loaded")
from dlap.backends import gpu_kernels
_compiled = gpu_kernels._module
def _logged(name):
    s = time.perf_counter(); m = _compiled(name); e = time.perf_counter() - s
    if e > 0.05: print(f"module {name}: {e:.3f} s", flush=True)
    return m
gpu_kernels._module = _logged
start = time.perf_counter(); dlap.load_dgs_kernels("float64", "gpu"); print(f"load_dgs_kernels gpu {time.perf_counter() - start:.3f} s")
for limit in (1.0, 0.1, 0.05):
    for _ in range(3):
        timed(geo, limit, False, "loaded, host matrix")
ben = cupy.asarray(generate.geometric(5000, seed=2, same_points=True))
for limit in (1.0, 0.1, 0.05):
    for _ in range(3):
        timed(ben, limit, True, "loaded, CuPy benefit matrix")
free = dlap.solve(ben, maximize=True, method="dgs", device="gpu")
print(json.dumps({"converged_seconds": free.stats.seconds, "switches": free.stats.switches}))
