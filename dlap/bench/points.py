"""``dlap bench --suite points``: dlap.solve_points on point sets of :func:`dlap.generate.points`
(default: uniform in the unit square), beside dlap's dense engine on the same costs as a matrix
where the matrix fits. ``m_ratio`` makes the second set ``round(n * m_ratio)`` points (rectangular
problems, either orientation).

For every family and size (Euclidean, cosine for ``embeddings``, or the metric named after a colon:
``uniform:sqeuclidean``), after untimed runs that compile
every kernel (on the GPU one at the size itself: CuPy compiles some kernels per size): the
sparse-core engine's time from the points to the certified assignment's indices (points on the
device named, as NumPy or CuPy arrays, before the timer starts; the median of ``repeat`` runs),
its phases (candidates, core solve, pricing), rounds and core size (of that run), the peak memory
(the process's resident set; on the GPU the memory pool's peak too), and ``verify()``'s
all-pairs proof: through k-d trees for points of at most ``TREE_MAX_DIM`` coordinates (any
size, either device), else by a scan of every pair, on the GPU where it stays within
``VERIFY_PAIRS``. The dense engine (``dlap.solve`` on the matrix of the same costs, made on the
device) runs where the matrix has at most ``DENSE_PAIRS`` entries.
"""

from __future__ import annotations

import json
import platform
import resource
import statistics
import time

from ..api import solve
from ..generate import points
from ..points.costs import PointCosts
from ..points.metrics import check_metric
from ..points.search import TREE_MAX_DIM
from ..points.solve import solve_points
from ..warmup import for_large_solves
from .grid import columns
from .records import Records

POINTS_SIZES = [10000, 100000]
#: verify() of the GPU's points of more than TREE_MAX_DIM coordinates scans every pair: up to this many
VERIFY_PAIRS = 10**11
#: the dense engine runs where the matrix has at most this many entries (float64)
DENSE_PAIRS = {"cpu": 4 * 10**8, "gpu": 2 * 10**9}


def _points(family: str, n: int, m: int, seed: int, device: str):
    a, b = points(family, n, m, seed=seed)
    if device == "gpu":
        import cupy

        return cupy.asarray(a), cupy.asarray(b)
    return a, b


def _family_metric(spec: str) -> tuple[str, str]:
    """``family[:metric]`` -> (family, metric): Euclidean by default, cosine for ``embeddings``."""
    family, _, metric = spec.partition(":")
    metric = metric or ("cosine" if family == "embeddings" else "euclidean")
    check_metric(metric, None)
    return family, metric


def _matrix(a, b, metric: str, device: str):
    """The dense engine's input: the matrix of the points' costs, made on ``device``."""
    return PointCosts(a, b, metric, check_metric(metric, None), device)[0 : a.shape[0]]


def _synchronize(device: str) -> None:
    if device == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()


def run(sizes=None, device: str = "cpu", seed: int = 0, out=None, echo=print, families=("uniform",),
        m_ratio: float = 1.0, repeat: int = 1):
    """Run the points benchmark; write JSON lines to ``out`` as they come; return the records."""
    sizes = sorted(sizes or POINTS_SIZES)
    records = []
    families = [_family_metric(spec) for spec in families]
    for family, metric in families:  # every kernel compiled before any timer starts: both engines', then the team's
        a, b = _points(family, 300, columns(300, m_ratio), seed + 1, device)
        solve_points(a, b, metric, device=device)
        solve(_matrix(a, b, metric, device), device=device)
    for_large_solves(device, max(n * columns(n, m_ratio) for n in sizes))
    with Records(out) as sink:
        for (family, metric), n in ((spec, n) for spec in families for n in sizes):
            m = columns(n, m_ratio)
            a, b = _points(family, n, m, seed, device)
            if device == "gpu":  # one untimed run at this size: CuPy compiles some of its kernels per size
                solve_points(a, b, metric, device=device)
            times, result = _timed_runs(repeat, device, a, b, metric)
            record = {
                "suite": "points", "family": family, "metric": metric, "n": n, "m": m, "device": device,
                "host": platform.node(), "solve_s": round(statistics.median(times), 3), "repeat": times,
                "objective": result.objective,
                "phase_seconds": {k: round(v, 3) for k, v in result.stats.phase_seconds.items()},
                "phase_counts": dict(result.stats.phase_counts),
                "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            }
            if device == "gpu":
                import cupy

                record["gpu_pool_gib"] = round(cupy.get_default_memory_pool().total_bytes() / 2**30, 2)
            if device == "cpu" or a.shape[1] <= TREE_MAX_DIM or n * m <= VERIFY_PAIRS:
                started = time.perf_counter()
                record["optimal"] = bool(result.verify().optimal)
                record["verify_s"] = round(time.perf_counter() - started, 3)
            if n * m <= DENSE_PAIRS[device]:
                matrix = _matrix(a, b, metric, device)
                if device == "gpu":  # untimed at this size too
                    solve(matrix, device=device)
                _synchronize(device)
                started = time.perf_counter()
                dense = solve(matrix, device=device)
                _synchronize(device)
                record["dense_s"] = round(time.perf_counter() - started, 3)
                record["same_optimum"] = bool(abs(dense.objective - result.objective) <= 1e-9 * abs(dense.objective))
                del matrix
            echo(json.dumps(record))
            records.append(record)
            sink.write(record)
    return records


def _timed_runs(repeat: int, device: str, a, b, metric: str):
    """``repeat`` timed runs of ``solve_points`` (at least one): their seconds, as the grid suite
    records them, and the result of the run at their median (the upper one of an even count)."""
    runs = []
    for _ in range(max(1, repeat)):
        _synchronize(device)
        started = time.perf_counter()
        result = solve_points(a, b, metric, device=device)
        _synchronize(device)
        runs.append((time.perf_counter() - started, result))
    times = [seconds for seconds, _ in runs]
    return times, sorted(runs, key=lambda run: run[0])[len(runs) // 2][1]


def table(records) -> str:
    lines = ["| family | n | device | solve_points s | candidates s | core solve s | pricing s | pricing rounds | core edges "
             "| peak RSS GiB | verify s | dense engine s | same optimum |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        phases, counts = r["phase_seconds"], r["phase_counts"]
        lines.append(
            f"| {r.get('family', 'uniform')} | {_shape(r)} | {r['device']} | {r['solve_s']:.2f} | {phases.get('candidates', 0):.2f} "
            f"| {phases.get('core_solve', 0):.2f} | {phases.get('pricing', 0):.2f} | {counts.get('pricing_rounds', '')} "
            f"| {counts.get('core_edges', '')} | {r['peak_rss_gib']} | {r.get('verify_s', '')} "
            f"| {r.get('dense_s', '')} | {'yes' if r.get('same_optimum', True) and r.get('optimal', True) else 'NO'} |")
    return "\n".join(lines)


def _shape(record) -> str:
    n, m = record["n"], record.get("m", record["n"])
    return str(n) if m == n else f"{n} x {m}"
