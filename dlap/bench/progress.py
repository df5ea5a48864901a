"""``dlap bench --suite progress``: how honest a solve's progress estimate is (:mod:`dlap.progress`).

Each case is solved once (after a small solve of the same kind, so no compilation is timed) with
a callback that records every :class:`~dlap.SolveProgress` it is sent: the seconds since the
call, the estimated share of the work done, and the share of rows matched (what dlap reported
before the estimate). Per case, against the share of the solve's time gone by at each report:
the largest and the median gap of the estimate and of matched rows, and the ETA's error at the
reports nearest 25%, 50% and 75% of the solve (``elapsed + eta`` against the solve's time).
Records: ``{"suite": "progress", "case", "device", "seconds", "reports": [[s, estimate,
matched share], ...]}``.
"""

from __future__ import annotations

import time

import numpy as np

from .. import generate
from ..warmup import for_large_solves
from .records import append, machine

#: name -> (what it solves, the same on a small instance: loads every kernel the case uses)
CASES = {
    "float 8000, auto": ("float", 8000, {}),
    "uniform 12000 f=1, auto": ("uniform", 12000, {}),
    "geometric 3000, auto (hands over)": ("geometric", 3000, {}),
    "geometric-benefit 2500, scaling": ("geometric-benefit", 2500, {"method": "scaling"}),
    "points 50000, solve_points": ("points", 50000, {}),
}


def _solver(family: str, n: int, options: dict, device: str):
    import dlap

    rng = np.random.default_rng(1)
    if family == "points":
        a, b = rng.random((n, 2)), rng.random((n, 2))
        return lambda progress: dlap.solve_points(a, b, device=device, progress=progress)
    if family == "float":
        cost = rng.random((n, n))
    elif family == "uniform":
        cost = generate.uniform(n, 1.0, seed=1)
    else:
        cost = generate.family(family, n, seed=1)
    maximize = family in generate.MAXIMIZE
    return lambda progress: dlap.solve(cost, maximize=maximize, device=device, progress=progress, **options)


def _timed(solve) -> tuple[list, float]:
    """``solve``'s reports ``[s, estimate, matched share]``, and its seconds."""
    reports = []
    started = time.perf_counter()
    solve(lambda update: reports.append(
        [time.perf_counter() - started, update.fraction, update.matched / max(1, update.total)]))
    return reports, time.perf_counter() - started


def run(cases: dict | None = None, device: str = "cpu", out=None, echo=print) -> list[dict]:
    """Each of ``cases`` (as :data:`CASES`, the default) once; records appended to ``out``."""
    host = machine()
    records = []
    cases = cases or CASES
    for family, n, options in cases.values():  # every kernel compiled or loaded before any timer starts
        _solver(family, max(64, n // 20), options, device)(None)
    for_large_solves(device, max(n * n for _, n, _ in cases.values()))  # (points: n x n pairs)
    for name, (family, n, options) in cases.items():
        reports, seconds = _timed(_solver(family, n, options, device))
        records.append({"suite": "progress", "case": name, "device": device, "seconds": seconds,
                        "reports": reports, **host})
        echo(f"{name}: {seconds:.2f} s, {len(reports)} reports")
    append(out, records)
    return records


def gaps(record: dict) -> dict:
    """The estimate's and matched rows' gaps to the share of time gone by, and the ETA's error
    (the predicted end over the actual one, minus 1) at 25%, 50% and 75% of the solve."""
    reports = np.asarray(record["reports"])
    seconds = record["seconds"]
    within = reports[reports[:, 0] < seconds]
    share = within[:, 0] / seconds
    found = {"estimate": np.abs(within[:, 1] - share), "matched": np.abs(within[:, 2] - share)}
    eta = {}
    for point in (0.25, 0.5, 0.75):
        s, fraction = within[np.argmin(np.abs(share - point))][:2]
        eta[point] = None if fraction <= 0 else (s / fraction) / seconds - 1
    return {"gaps": found, "eta": eta}


def table(records) -> str:
    """One row per case: reports, the largest and median gaps of the estimate and of matched rows,
    and the ETA's error."""
    lines = ["| case | s | reports | estimate: largest gap | median gap | matched rows: largest gap | "
             "median gap | ETA error at 25% / 50% / 75% of the time |", "|---|---|---|---|---|---|---|---|"]
    for r in records:
        found = gaps(r)
        estimate, matched = found["gaps"]["estimate"], found["gaps"]["matched"]
        errors = " / ".join("-" if e is None else f"{100 * e:+.0f}%" for e in found["eta"].values())
        lines.append(f"| {r['case']} | {r['seconds']:.2f} | {len(r['reports'])} | {estimate.max():.2f} | "
                     f"{np.median(estimate):.2f} | {matched.max():.2f} | {np.median(matched):.2f} | {errors} |")
    return "\n".join(lines)
