"""Side-by-side timing of dlap's methods and the peers (scipy, lap) on the same instances.

Every solver gets the same host matrix; the timer runs from host matrix in to assignment out
(``timing = "host"``). Each run becomes one JSON record with the fields of the core issue
(``solver, method, device, family, n, f, dtype, seconds, objective, timing``) plus ``repeat``
(all timings) and ``agrees`` (same objective as the first solver that finished). The summary
table reports the median time of the repeats.
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


@dataclass(frozen=True)
class Peer:
    """A solver in the comparison: ``run(cost) -> objective``."""

    name: str
    method: str
    device: str
    run: object


def _dlap(method: str, device: str = "cpu") -> Peer:
    def run(cost):
        return solve(cost, method=method, device=device).objective

    return Peer(f"dlap-{method}", method, device, run)


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


def peers(names) -> list[Peer]:
    """Solvers by name: ``dlap`` (auto), ``dlap-tree``, ``dlap-classical``, ``scipy``, ``lap``."""
    made = []
    for name in names:
        if name in ("dlap", "dlap-auto"):
            made.append(_dlap("auto"))
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


def run(sizes, families, solver_names, repeat: int = 3, seed: int = 0, out=None, echo=print):
    """Run the grid; write JSON lines to ``out`` (a path) as they come; return the records."""
    solvers = peers(solver_names)
    for peer in solvers:  # warm up compiled code so no timing includes a JIT compile
        peer.run(generate.uniform(8, 1.0, seed=1))
        peer.run(generate.uniform_float(8, seed=1))
    records = []
    sink = open(out, "a") if out else None
    try:
        for spec in families:
            name, f = parse_family(spec)
            for n in sizes:
                cost = generate.family(name, n, f, seed=seed)
                reference = None
                for peer in solvers:
                    times, objective = [], None
                    for _ in range(repeat):
                        start = time.perf_counter()
                        objective = peer.run(cost)
                        times.append(time.perf_counter() - start)
                    reference = objective if reference is None else reference
                    record = {
                        "solver": peer.name, "method": peer.method, "device": peer.device,
                        "family": name, "n": n, "f": f, "dtype": str(cost.dtype),
                        "seconds": statistics.median(times), "objective": objective,
                        "timing": "host", "repeat": times, "agrees": _close(objective, reference),
                        "host": platform.node(),
                    }
                    records.append(record)
                    if sink:
                        sink.write(json.dumps(record) + "\n")
                        sink.flush()
                    echo(f"{name}{'' if f is None else f':{f:g}'} n={n} {peer.name}: "
                         f"{record['seconds']:.3f} s, objective {objective}"
                         + ("" if record["agrees"] else "  <-- DISAGREES"))
    finally:
        if sink:
            sink.close()
    return records


def table(records) -> str:
    """Markdown table: one row per instance, median seconds per solver, dlap's ratios to peers."""
    solvers = list(dict.fromkeys(r["solver"] for r in records))
    keys = list(dict.fromkeys((r["family"], r["f"], r["n"]) for r in records))
    dlap_name = next((s for s in solvers if s.startswith("dlap")), None)
    ratio_to = [s for s in ("lap", "scipy") if s in solvers and dlap_name]
    head = ["family", "n"] + solvers + [f"{dlap_name} / {p}" for p in ratio_to] + ["same optimum"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, f, n in keys:
        cell = {r["solver"]: r for r in records if (r["family"], r["f"], r["n"]) == (family, f, n)}
        label = family if f is None else f"{family} f={f:g}"
        row = [label, str(n)] + [f"{cell[s]['seconds']:.3f}" if s in cell else "" for s in solvers]
        for p in ratio_to:
            ok = p in cell and dlap_name in cell
            row.append(f"{cell[dlap_name]['seconds'] / cell[p]['seconds']:.2f}" if ok else "")
        row.append("yes" if all(r["agrees"] for r in cell.values()) else "NO")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)
