"""``dlap bench --suite dgs``: Deep Greedy Switching against dlap's exact solver, side by side.

For every instance: the exact optimum and its time (dlap's exact solver on the same device), DGS
run to convergence (time, gap to the optimum, switches, and the time of each DGS phase, to show
where it goes), and DGS stopped by deadlines of 10, 100 and 1000 ms (the objective reached).
On the GPU the matrix is placed on the device before any timer starts, so both solvers are timed
from a CuPy matrix to the assignment (no host-to-device copy in either time).

Instance families (Roverso et al., section 4): ``geometric-benefit`` is the paper's GEOM case,
maximising the distance a_ij between points i and j of one set in [0, 1000]^2; ``geometric``
minimises distances between two point sets; ``uniform`` is integers in [0, n).
"""

from __future__ import annotations

import platform
import time

from .. import generate
from ..api import solve
from ..hungarian.auto import SPARSE_MIN_ROWS
from ..options import METHODS
from ..warmup import for_large_solves
from .records import Records

#: family -> (generator(n, seed), maximize)
DGS_FAMILIES = {
    "geometric-benefit": (lambda n, seed: generate.geometric(n, seed=seed, same_points=True), True),
    "geometric": (lambda n, seed: generate.geometric(n, seed=seed), False),
    "uniform": (lambda n, seed: generate.uniform(n, 1.0, seed=seed), False),
}
DGS_SIZES = [1000, 2000, 5000, 10000, 20000]
DEADLINES = [0.01, 0.1, 1.0]
#: the exact solver is skipped where its time, extrapolated as n**3 from the largest instance of
#: the family it solved, would pass this many seconds (the GEOM benefit matrices are its worst
#: case: 184 s at n = 10000 on an H200); DGS's gap is then not known
EXACT_BUDGET = 60.0


def _gap(objective, optimum) -> float:
    return abs(objective - optimum) / max(abs(optimum), 1e-300)


def _percent(gap, digits: int = 3) -> str:
    return "unknown" if gap is None else f"{gap:.{digits}%}"


def run(sizes=None, families=None, device: str = "gpu", seed: int = 0, out=None, echo=print,
        switchings=None, exact_budget: float = EXACT_BUDGET):
    """Run the DGS benchmark; write JSON lines to ``out`` as they come; return the records."""
    sizes = sorted(sizes or DGS_SIZES)
    families = families or list(DGS_FAMILIES)
    switchings = switchings or (["parallel"] if device == "gpu" else ["parallel", "sequential"])
    place = _placer(device)
    # every exact method method="auto" may pick (by the instance: another seed's may differ; the
    # sparse engine only from SPARSE_MIN_ROWS rows), compiled at the first size before any timer starts
    exact = [m for m in METHODS if m != "dgs" and (m != "sparse" or sizes[-1] >= SPARSE_MIN_ROWS)]
    for name in families:
        make, maximize = DGS_FAMILIES[name]
        warm = place(make(sizes[0], seed + 1))
        for method in exact:
            solve(warm, maximize=maximize, device=device, method=method)
        for switching in switchings:
            solve(warm, maximize=maximize, device=device, method="dgs", switching=switching)
    for_large_solves(device, max(n * n for n in sizes))
    records = []
    largest = {}  # family -> (n, seconds) of the largest instance the exact solver solved
    with Records(out) as sink:
        for name in families:
            make, maximize = DGS_FAMILIES[name]
            for n in sizes:
                cost = place(make(n, seed))
                base = {"family": name, "n": n, "maximize": maximize, "device": device,
                        "dtype": str(cost.dtype), "host": platform.node()}
                runs, optimum = [], None
                expected = solved[1] * (n / solved[0]) ** 3 if (solved := largest.get(name)) else 0.0
                if expected <= exact_budget:
                    started = time.perf_counter()
                    exact = solve(cost, maximize=maximize, device=device)
                    largest[name] = (n, time.perf_counter() - started)
                    optimum = exact.objective
                    runs.append(("exact", None, None, exact, largest[name][1]))
                else:
                    echo(f"{name} n={n} exact: skipped (about {expected:.0f} s); gaps unknown")
                for switching in switchings:
                    # one untimed run at this size: CuPy compiles some of its own kernels per size
                    solve(cost, maximize=maximize, device=device, method="dgs", switching=switching)
                    for limit in [None] + DEADLINES:
                        started = time.perf_counter()
                        result = solve(cost, maximize=maximize, device=device, method="dgs",
                                       switching=switching, time_limit=limit)
                        runs.append(("dgs", switching, limit, result, time.perf_counter() - started))
                for solver, switching, limit, result, seconds in runs:
                    record = dict(base, solver=solver, switching=switching, time_limit=limit,
                                  seconds=seconds, objective=result.objective, optimum=optimum,
                                  gap=None if optimum is None else _gap(result.objective, optimum), switches=result.stats.switches,
                                  time_limit_reached=result.stats.time_limit_reached,
                                  phase_seconds=dict(result.stats.phase_seconds),
                                  lower_bound=result.lower_bound)
                    records.append(record)
                    sink.write(record)
                    label = solver if solver == "exact" else f"dgs-{switching}" + ("" if limit is None else f"@{limit * 1000:g}ms")
                    echo(f"{name} n={n} {label}: {seconds:.3f} s, objective {result.objective:.10g}, "
                         f"gap {_percent(record['gap'], 4)}")
                del cost
    return records


def _placer(device: str):
    if device == "gpu":
        import cupy

        return cupy.asarray
    return lambda x: x


def table(records) -> str:
    """Markdown: per instance and switching, exact time, DGS time and gap, the exact/DGS time ratio,
    the gap at each deadline, and DGS's phase times."""
    head = ["family", "n", "switching", "exact s", "DGS s", "DGS gap", "exact / DGS time"]
    head += [f"gap @ {d * 1000:g} ms" for d in DEADLINES] + ["switches", "start / evaluation / switching s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = list(dict.fromkeys((r["family"], r["n"], r["switching"]) for r in records if r["solver"] == "dgs"))
    for family, n, switching in keys:
        mine = [r for r in records if r["family"] == family and r["n"] == n]
        exact = next((r for r in mine if r["solver"] == "exact"), None)
        runs = {r["time_limit"]: r for r in mine if r["solver"] == "dgs" and r["switching"] == switching}
        full = runs[None]
        phases = full["phase_seconds"]
        split = " / ".join(f"{phases.get(p, 0.0):.3f}" for p in ("start", "full_evaluation", "switching"))
        row = [family, str(n), switching, "skipped" if exact is None else f"{exact['seconds']:.3f}",
               f"{full['seconds']:.3f}", _percent(full["gap"]),
               "" if exact is None else f"{exact['seconds'] / full['seconds']:.1f}"]
        for d in DEADLINES:
            r = runs.get(d)
            row.append("" if r is None else _percent(r["gap"]) + ("" if r["time_limit_reached"] else " (done)"))
        row += [str(full["switches"]), split]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
