"""Side-by-side timing of dlap's methods and the peers (scipy, lap) on the same instances.

Every solver gets the same host matrix; the timer runs from host matrix in to assignment out
(``timing = "host"``). GPU solvers are also timed with the matrix already on the GPU
(``timing = "device"``: CuPy matrix in, CuPy assignment out). Each run becomes one JSON record
with the fields of the core issue (``solver, method, device, family, n, f, dtype, seconds,
objective, timing``) plus ``repeat`` (all timings) and ``agrees`` (same objective as the first
solver that finished). The summary table reports the median time of the repeats.

CPU peers are skipped on an instance where their time, extrapolated as n**3 from the largest
instance of the family they solved, would pass ``peer_budget`` seconds (ANCHORS.md: "where they
finish in a minute"); a peer slower than ``SLOW_SECONDS`` runs once instead of ``repeat`` times.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np

from . import generate
from .api import solve


#: HyLAC hybrid on one H200, host matrix in -> assignment out (../shared/ANCHORS.md, measured
#: 2026-11-21 by the project, one run each): the anchors the GPU benchmark compares with
HYLAC_H200 = {
    (0.1, 5000): 0.034, (1.0, 5000): 0.055, (10.0, 5000): 0.116,
    (0.1, 10000): 0.094, (1.0, 10000): 0.135, (10.0, 10000): 0.322,
    (0.1, 20000): 0.329, (1.0, 20000): 0.449, (10.0, 20000): 0.952,
    (1.0, 40000): 1.625,
}
#: ``dlap bench --device gpu``: the ANCHORS.md grid, then geometric and float instances
GPU_CASES = [("uniform", f, n) for n in (5000, 10000, 20000) for f in (0.1, 1.0, 10.0)]
GPU_CASES += [("uniform", 1.0, 40000)]
GPU_CASES += [(fam, None, n) for fam in ("geometric", "float") for n in (5000, 10000, 20000)]
GPU_SOLVERS = ["dlap-gpu", "dlap-gpu-tree", "dlap-gpu-classical", "lap", "scipy"]
SLOW_SECONDS = 5.0


@dataclass(frozen=True)
class Peer:
    """A solver in the comparison: ``run(cost) -> objective``; ``place`` puts the matrix where the
    timer starts (the host, or the GPU for ``timing = "device"``)."""

    name: str
    method: str
    device: str
    run: object
    timing: str = "host"
    place: object = None


def _dlap(method: str, device: str = "cpu", timing: str = "host") -> Peer:
    def run(cost):
        return solve(cost, method=method, device=device).objective

    place = None
    if timing == "device":
        import cupy

        place = cupy.asarray
    name = f"dlap-gpu-{method}" if device == "gpu" else f"dlap-{method}"
    return Peer(name, method, device, run, timing, place)


def _scipy() -> Peer:
    from scipy.optimize import linear_sum_assignment

    def run(cost):
        rows, cols = linear_sum_assignment(cost)
        return cost[rows, cols].sum().item()

    return Peer("scipy", "lapjv-sp", "cpu", run)


def _lap() -> Peer | None:
    try:
        import lap
    except ImportError:
        return None

    def run(cost):
        x = lap.lapjv(cost, return_cost=False)[0]
        return cost[np.arange(cost.shape[0]), x].sum().item()

    return Peer("lap", "lapjv", "cpu", run)


def peers(names, timings=("host",)) -> list[Peer]:
    """Solvers by name: ``dlap`` (auto), ``dlap-tree``, ``dlap-classical``, ``dlap-hybrid``, the
    same on the GPU as ``dlap-gpu``, ``dlap-gpu-tree``, ..., and ``scipy``, ``lap``. GPU solvers
    are made once per timing in ``timings``."""
    made = []
    for name in names:
        if name in ("dlap", "dlap-auto"):
            made.append(_dlap("auto"))
        elif name.startswith("dlap-gpu"):
            method = name.removeprefix("dlap-gpu").removeprefix("-") or "auto"
            made.extend(_dlap(method, "gpu", timing) for timing in timings)
        elif name.startswith("dlap-"):
            made.append(_dlap(name.removeprefix("dlap-")))
        elif name == "scipy":
            made.append(_scipy())
        elif name == "lap":
            peer = _lap()
            if peer is None:
                print("lap is not installed (pip install lap): skipped")
                continue
            made.append(peer)
        else:
            raise ValueError(f"unknown solver {name!r}")
    return made


def parse_family(spec: str) -> tuple[str, float | None]:
    """``"uniform:10"`` -> ("uniform", 10.0); ``"float"`` -> ("float", None)."""
    name, _, f = spec.partition(":")
    return name, (float(f) if f else None)


def _close(a, b) -> bool:
    return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))


def grid(sizes, families) -> list[tuple[str, float | None, int]]:
    """The cases of every family spec (``"uniform:10"``) at every size."""
    return [(*parse_family(spec), n) for spec in families for n in sizes]


#: warm-up instance size: every phase of every method runs, so no timing includes a compile
WARMUP_N = 300


def run(cases, solver_names, repeat: int = 3, seed: int = 0, out=None, echo=print,
        timings=("host",), peer_budget: float = 60.0):
    """Run the cases ``(family, f, n)``; write JSON lines to ``out`` (a path) as they come; return
    the records."""
    solvers = peers(solver_names, timings)
    for peer in solvers:
        for warm in (generate.uniform(WARMUP_N, 1.0, seed=1), generate.uniform_float(WARMUP_N, seed=1)):
            peer.run(peer.place(warm) if peer.place else warm)
    records = []
    largest = {}  # (peer, family, f) -> (n, seconds) of the largest instance a CPU peer solved
    sink = open(out, "a") if out else None
    try:
        for name, f, n in cases:
            cost = generate.family(name, n, f, seed=seed)
            reference = None
            for peer in solvers:
                seen = largest.get((peer.name, name, f))
                expected = seen[1] * (n / seen[0]) ** 3 if peer.device == "cpu" and seen else 0.0
                if expected > peer_budget:
                    echo(f"{name} n={n} {peer.name}: skipped (about {expected:.0f} s)")
                    continue
                placed = peer.place(cost) if peer.place else cost
                times, objective = [], None
                for _ in range(repeat):
                    start = time.perf_counter()
                    objective = peer.run(placed)
                    times.append(time.perf_counter() - start)
                    if times[-1] > SLOW_SECONDS:
                        break
                del placed
                if peer.device == "cpu":
                    largest[(peer.name, name, f)] = (n, min(times))
                reference = objective if reference is None else reference
                record = {
                    "solver": peer.name, "method": peer.method, "device": peer.device,
                    "family": name, "n": n, "f": f, "dtype": str(cost.dtype),
                    "seconds": statistics.median(times), "objective": objective,
                    "timing": peer.timing, "repeat": times, "agrees": _close(objective, reference),
                    "host": platform.node(),
                }
                records.append(record)
                if sink:
                    sink.write(json.dumps(record) + "\n")
                    sink.flush()
                echo(f"{name}{'' if f is None else f':{f:g}'} n={n} {_label(record)}: "
                     f"{record['seconds']:.3f} s, objective {objective}"
                     + ("" if record["agrees"] else "  <-- DISAGREES"))
    finally:
        if sink:
            sink.close()
    return records


def _label(record) -> str:
    """Column name of a record: the solver, marked when the matrix started on the GPU."""
    return record["solver"] + (" (on GPU)" if record.get("timing") == "device" else "")


def _hylac(family, f, n):
    return HYLAC_H200.get((f, n)) if family == "uniform" else None


def table(records) -> str:
    """Markdown table: one row per instance, median seconds per solver, dlap's ratios to peers
    (and to HyLAC hybrid's ANCHORS.md time where the instance is on the ANCHORS grid)."""
    solvers = list(dict.fromkeys(_label(r) for r in records))
    keys = list(dict.fromkeys((r["family"], r["f"], r["n"]) for r in records))
    dlap_name = next((s for s in solvers if s.startswith("dlap")), None)
    ratio_to = [s for s in ("lap", "scipy") if s in solvers and dlap_name]
    anchors = any(_hylac(*k) for k in keys)
    head = ["family", "n"] + solvers + (["HyLAC hybrid (ANCHORS)"] if anchors else [])
    head += [f"{dlap_name} / {p}" for p in ratio_to + (["HyLAC"] if anchors else [])] + ["same optimum"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, f, n in keys:
        cell = {_label(r): r for r in records if (r["family"], r["f"], r["n"]) == (family, f, n)}
        label = family if f is None else f"{family} f={f:g}"
        row = [label, str(n)] + [f"{cell[s]['seconds']:.3f}" if s in cell else "" for s in solvers]
        hylac = _hylac(family, f, n)
        if anchors:
            row.append(f"{hylac:.3f}" if hylac else "")
        mine = cell[dlap_name]["seconds"] if dlap_name in cell else None
        for p in ratio_to:
            row.append(f"{mine / cell[p]['seconds']:.2f}" if mine and p in cell else "")
        if anchors:
            row.append(f"{mine / hylac:.2f}" if mine and hylac else "")
        row.append("yes" if all(r["agrees"] for r in cell.values()) else "NO")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(records, path: str) -> None:
    """PNG: seconds against n per uniform cost range, dlap's GPU solvers (both timings), the CPU
    peers and HyLAC hybrid's ANCHORS.md times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranges = sorted({r["f"] for r in records if r["family"] == "uniform"})
    families = [("uniform", f) for f in ranges] + sorted({(r["family"], None) for r in records if r["family"] != "uniform"})
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 4), squeeze=False)
    for ax, (family, f) in zip(axes[0], families):
        mine = [r for r in records if r["family"] == family and r["f"] == f]
        for label in dict.fromkeys(_label(r) for r in mine):
            pts = sorted((r["n"], r["seconds"]) for r in mine if _label(r) == label)
            ax.plot(*zip(*pts), marker="o", label=label)
        hylac = sorted((n, t) for (ff, n), t in HYLAC_H200.items() if family == "uniform" and ff == f)
        if hylac:
            ax.plot(*zip(*hylac), marker="s", linestyle="--", color="black", label="HyLAC hybrid (ANCHORS)")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="seconds",
               title=family if f is None else f"{family} f={f:g}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
