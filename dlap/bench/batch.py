"""``dlap bench --suite batch``: batched assignment side by side, in one run, on the same batches.

Solvers: scipy in a loop (one thread) and in a thread pool (every core), lapx's ``lapjvx_batch``
(C++ threads), fastlap's ``solve_lap_batch`` (Rust, Rayon), dlap on the CPU
(:func:`dlap.solve_batch`, ``device="cpu"``) and on the GPU (host batch in and answers out, and
a batch already on the GPU). The peers are imported where present and skipped otherwise (lapx
from ``DLAP_LAPX_DIR`` as in :mod:`dlap.bench`). Timer: batch in -> every problem's assignment
out; median of ``repeat`` runs after a warm-up on a small batch. A solver's total (the sum of its
objectives) must equal scipy's: ``agrees`` in each JSON record.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..batch import solve_batch
from ..warmup import for_large_solves
from .records import Records

#: the most rows of a ragged case's matrices (0 to this many targets each)
RAGGED_MAX_ROWS = 100
#: (name, batch size, rows, columns, dtype); rows None: ragged, 0-100 targets against the columns
BATCH_CASES = [
    ("uniform float32", 256, 512, 512, "float32"),
    ("integers 0-100", 256, 512, 512, "int64"),
    ("DETR-like float32", 1024, 100, 300, "float32"),
    ("ragged 0-100 targets", 64, None, 300, "float32"),
    ("small float32", 10000, 32, 32, "float32"),
]
SOLVERS = {
    "cpu": ["scipy-loop", "scipy-threads", "lapx", "fastlap", "dlap-cpu"],
    "gpu": ["scipy-loop", "scipy-threads", "lapx", "fastlap", "dlap-cpu", "dlap-gpu", "dlap-gpu (on GPU)"],
}


def batch(case, seed: int = 0):
    """The case's batch: a (B, n, m) array, or a list of (t, m) matrices for the ragged case."""
    name, count, rows, cols, dtype = case
    rng = np.random.default_rng(seed)
    if rows is None:
        return [rng.random((int(t), cols), dtype=np.float32) for t in rng.integers(0, RAGGED_MAX_ROWS + 1, count)]
    if dtype.startswith("int"):
        return rng.integers(0, 101, (count, rows, cols)).astype(dtype)
    return rng.random((count, rows, cols), dtype=np.dtype(dtype))


def _entries(case) -> int:
    """The most entries of the case's batch."""
    _, count, rows, cols, _ = case
    return count * (RAGGED_MAX_ROWS if rows is None else rows) * cols


def _scipy_loop(problems):
    from scipy.optimize import linear_sum_assignment

    return sum(float(p[linear_sum_assignment(p)].sum()) for p in problems)


def _scipy_threads(problems):
    from scipy.optimize import linear_sum_assignment

    with ThreadPoolExecutor(os.cpu_count()) as pool:
        return sum(pool.map(lambda p: float(p[linear_sum_assignment(p)].sum()), problems))


def _lapx_batch():
    import importlib

    from .grid import lapx_module

    lapx = lapx_module()
    if lapx is None:
        return None
    module = importlib.import_module(f"{lapx.__name__}._lapjvx_batch_wp")

    def run(problems):
        if isinstance(problems, list):
            return None  # dense batches only: no ragged input
        totals = module.lapjvx_batch(np.ascontiguousarray(problems, dtype=np.float64), extend_cost=True,
                                     return_cost=True)[0]
        return float(np.sum(totals))

    return run


def _fastlap_batch():
    try:
        import fastlap
    except ImportError:
        return None
    def run(problems):
        if isinstance(problems, list):  # it refuses an empty matrix, whose total is 0 anyway
            problems = [p for p in problems if p.size]
        return float(sum(s[0] for s in fastlap.solve_lap_batch(problems)))

    return run


def _dlap(device: str):
    def run(problems):
        objective = solve_batch(problems, device=device).objective
        return float(objective.astype(np.float64).sum())

    return run


def _to_gpu(problems):
    import cupy

    return [cupy.asarray(p) for p in problems] if isinstance(problems, list) else cupy.asarray(problems)


def solvers(names):
    """(name, run, place) for each solver that is installed: ``run(batch) -> total``, ``place``
    moves the batch where the timer starts (None: the host)."""
    made = {
        "scipy-loop": lambda: _scipy_loop, "scipy-threads": lambda: _scipy_threads, "lapx": _lapx_batch,
        "fastlap": _fastlap_batch, "dlap-cpu": lambda: _dlap("cpu"), "dlap-gpu": lambda: _dlap("gpu"),
        "dlap-gpu (on GPU)": lambda: _dlap("gpu"),
    }
    chosen = []
    for name in names:
        run = made[name]()
        if run is not None:
            chosen.append((name, run, _to_gpu if name.endswith("(on GPU)") else None))
    return chosen


def run(names, repeat: int = 3, seed: int = 0, out=None, echo=print, cases=BATCH_CASES):
    """Every case with every installed solver; JSON lines to ``out``; returns the records."""
    chosen = solvers(names)
    for case in cases:  # warm-up: compile and load on a small batch of each kind
        small = batch((case[0], 4, case[2] and min(case[2], 8), min(case[3], 8), case[4]), seed)
        for _, solve, place in chosen:
            solve(place(small) if place else small)
    for_large_solves("cpu", max(_entries(case) for case in cases))  # (a large batch runs on the thread team)
    records = []
    with Records(out) as sink:
        for case in cases:
            problems = batch(case, seed)
            reference = None
            for name, solve, place in chosen:
                placed = place(problems) if place else problems
                times, total = [], None
                for _ in range(repeat):
                    start = time.perf_counter()
                    total = solve(placed)
                    times.append(time.perf_counter() - start)
                if total is None:
                    continue
                reference = total if reference is None else reference
                record = {
                    "suite": "batch", "case": case[0], "batch": case[1], "n": case[2], "m": case[3],
                    "dtype": case[4], "solver": name, "seconds": statistics.median(times), "repeat": times,
                    "total": total, "agrees": abs(total - reference) <= 1e-6 * max(abs(reference), 1.0),
                    "host": platform.node(), "threads": os.cpu_count(),
                }
                records.append(record)
                sink.write(record)
                echo(f"{case[0]} {case[1]} x {case[2] or '0-100'} x {case[3]} {name}: {record['seconds']:.4f} s"
                     + ("" if record["agrees"] else "  <-- DISAGREES"))
    return records


def table(records) -> str:
    """Markdown: one row per case, median seconds per solver, dlap's best time against the best peer."""
    names = list(dict.fromkeys(r["solver"] for r in records))
    cases = list(dict.fromkeys(r["case"] for r in records))
    head = ["batch"] + names + ["dlap best / best peer", "same totals"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in cases:
        cell = {r["solver"]: r for r in records if r["case"] == case}
        first = next(iter(cell.values()))
        label = f"{case}: {first['batch']} x {first['n'] or '0-100'} x {first['m']}"
        mine = min((r["seconds"] for s, r in cell.items() if s.startswith("dlap")), default=None)
        peer = min((r["seconds"] for s, r in cell.items() if not s.startswith("dlap")), default=None)
        row = [label] + [f"{cell[s]['seconds']:.4f}" if s in cell else "" for s in names]
        row.append(f"{mine / peer:.3f}" if mine and peer else "")
        row.append("yes" if all(r["agrees"] for r in cell.values()) else "NO")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
