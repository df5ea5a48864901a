"""Side-by-side timing of dlap's methods and the peers (scipy, lap, lapx) on the same instances.

Every solver gets the same host matrix; the timer runs from host matrix in to assignment out
(``timing = "host"``). GPU solvers are also timed with the matrix already on the GPU
(``timing = "device"``: CuPy matrix in, CuPy assignment out). Each run becomes one JSON record
with the fields of the core issue (``solver, method, device, family, n, f, dtype, seconds,
objective, timing``) plus ``repeat`` (all timings) and ``agrees`` (same objective as the first
solver that finished). The summary table reports the median time of the repeats.

CPU peers are skipped on an instance where their time, extrapolated as n**3 from the largest
instance of the family they solved, would pass ``peer_budget`` seconds (the anchors: "where they
finish in a minute"); a peer slower than ``SLOW_SECONDS`` runs once instead of ``repeat`` times.
"""

from __future__ import annotations

import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np

from .. import generate
from ..api import solve
from ..warmup import for_large_solves
from .records import Records

#: HyLAC hybrid on one H200, host matrix in -> assignment out (docs/benchmarks.md, "Anchors"; measured
#: 2026-11-21 by the project, one run each): the anchors the GPU benchmark compares with
HYLAC_H200 = {
    (0.1, 5000): 0.034, (1.0, 5000): 0.055, (10.0, 5000): 0.116,
    (0.1, 10000): 0.094, (1.0, 10000): 0.135, (10.0, 10000): 0.322,
    (0.1, 20000): 0.329, (1.0, 20000): 0.449, (10.0, 20000): 0.952,
    (1.0, 40000): 1.625,
}
#: the fastest peer of the anchors (docs/benchmarks.md; one H200, 2026-11-22) on the hard
#: families, (family, f, n) -> (seconds, peer): lap-solver (Guthe & Thuerck) with 16 OpenMP threads
#: or its CUDA build, and HyLAC, none of which installs from a package index
HARD_ANCHORS_H200 = {
    ("geometric-int", None, 10000): (4.46, "lap-solver OMP"),
    ("geometric", None, 5000): (1.32, "lap-solver OMP"),
    ("geometric", None, 10000): (4.18, "lap-solver OMP"),
    ("geometric-benefit", None, 2000): (0.44, "lap-solver OMP"),
    ("geometric-benefit", None, 4000): (1.49, "lap-solver OMP"),
    ("machol-wien", None, 1000): (46.0, "HyLAC"),
    ("machol-wien", None, 2000): (0.037, "lap-solver OMP"),
    ("ties", 4.0, 10000): (0.478, "lap-solver CUDA"),
}
#: ``dlap bench --device gpu``: the anchors grid, then geometric and float instances
GPU_CASES = [("uniform", f, n) for n in (5000, 10000, 20000) for f in (0.1, 1.0, 10.0)]
GPU_CASES += [("uniform", 1.0, 40000)]
GPU_CASES += [(fam, None, n) for fam in ("geometric", "float") for n in (5000, 10000, 20000)]
GPU_SOLVERS = ["dlap-gpu", "dlap-gpu-tree", "dlap-gpu-classical", "lap", "scipy"]
SLOW_SECONDS = 5.0
#: ``dlap bench --suite hard``: structured costs (distances between point sets, benefit matrices,
#: Machol-Wien, ties); sizes per device
HARD_FAMILIES = [
    "geometric", "geometric-int", "geometric-3d", "geometric-disjoint", "geometric-benefit",
    "machol-wien", "ties:4",
]
HARD_SIZES = {"cpu": [500, 1000, 2000, 4000], "gpu": [1000, 2000, 5000, 10000, 20000]}
HARD_SOLVERS = {"cpu": ["dlap", "scipy", "lap", "lapx"], "gpu": ["dlap-gpu", "scipy", "lap", "lapx"]}


@dataclass(frozen=True)
class Peer:
    """A solver in the comparison: ``run(cost, maximize) -> objective``; ``place`` puts the matrix
    where the timer starts (the host, or the GPU for ``timing = "device"``). A peer with no
    ``maximize`` of its own (``negate``) gets the negated matrix, made before the timer starts.
    ``certify(cost)`` (dlap's solvers), after the timed runs, says whether the last answer's
    certificate, recomputed from ``cost``, proves it optimal."""

    name: str
    method: str
    device: str
    run: object
    timing: str = "host"
    place: object = None
    negate: bool = False
    certify: object = None


def _dlap(method: str, device: str = "cpu", timing: str = "host") -> Peer:
    last = {}

    def run(cost, maximize=False):
        last["result"] = solve(cost, method=method, device=device, maximize=maximize)
        return last["result"].objective

    def certify(cost):
        return bool(last.pop("result").verify(cost).optimal)

    place = None
    if timing == "device":
        import cupy

        place = cupy.asarray
    name = f"dlap-gpu-{method}" if device == "gpu" else f"dlap-{method}"
    return Peer(name, method, device, run, timing, place, certify=certify)


def _scipy() -> Peer:
    from scipy.optimize import linear_sum_assignment

    def run(cost, maximize=False):
        rows, cols = linear_sum_assignment(cost, maximize=maximize)
        return cost[rows, cols].sum().item()

    return Peer("scipy", "lapjv-sp", "cpu", run)


def _lapjv_peer(name: str, module) -> Peer:
    """A peer with lap's ``lapjv(cost, return_cost=False)`` (lap, and lapx, which installs a
    module of the same name); it minimises only, so a maximisation gets the negated matrix."""

    def run(cost, maximize=False):
        x = module.lapjv(cost, return_cost=False, extend_cost=cost.shape[0] != cost.shape[1])[0]
        total = cost[np.arange(cost.shape[0]), x].sum().item()
        return -total if maximize else total

    return Peer(name, "lapjv", "cpu", run, negate=True)


def lapx_module():
    """lapx installs itself as ``lap`` too, so the two cannot share a site-packages: lapx is
    loaded from the folder ``DLAP_LAPX_DIR`` names (``pip install --target DIR lapx``) under the
    name ``lapx``, or from the installed ``lap`` when that one is lapx (it has ``lapjvx``)."""
    import importlib.util
    import os
    import sys

    folder = os.environ.get("DLAP_LAPX_DIR")
    if folder:
        init = os.path.join(folder, "lap", "__init__.py")
        spec = importlib.util.spec_from_file_location("lapx", init, submodule_search_locations=[os.path.dirname(init)])
        module = importlib.util.module_from_spec(spec)
        sys.modules["lapx"] = module
        spec.loader.exec_module(module)
        return module
    try:
        import lap
    except ImportError:
        return None
    return lap if hasattr(lap, "lapjvx") else None


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
            try:
                made.append(_scipy())
            except ImportError:
                print("scipy is not installed (pip install scipy): skipped")
        elif name in ("lap", "lapx"):
            module = lapx_module() if name == "lapx" else _import_lap()
            if module is None:
                print(f"{name} is not installed (pip install {name}; lapx: see DLAP_LAPX_DIR): skipped")
                continue
            made.append(_lapjv_peer(name, module))
        else:
            raise ValueError(f"unknown solver {name!r}")
    return made


def _import_lap():
    """gatagat's lap, or None (also when the installed ``lap`` is lapx's)."""
    try:
        import lap
    except ImportError:
        return None
    return None if hasattr(lap, "lapjvx") else lap


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


def columns(n: int, m_ratio: float) -> int:
    """The columns of an ``n``-row instance ``m_ratio`` times as wide (at least one)."""
    return max(1, round(n * m_ratio))


def run(cases, solver_names, repeat: int = 3, seed: int = 0, out=None, echo=print,
        timings=("host",), peer_budget: float = 60.0, m_ratio: float = 1.0):
    """Run the cases ``(family, f, n)``, each ``n x columns(n, m_ratio)``; write JSON lines to
    ``out`` (a path) as they come; return the records."""
    solvers = peers(solver_names, timings)
    warmups = [generate.uniform(WARMUP_N, 1.0, seed=1), generate.uniform_float(WARMUP_N, seed=1)]
    # every engine method="auto" picks on these families (and shapes), compiled before any timing
    warmups += [generate.family(name, WARMUP_N, f, m=columns(WARMUP_N, m_ratio))
                for name, f in dict.fromkeys((c[0], c[1]) for c in cases)]
    for peer in solvers:
        for warm in warmups:
            peer.run(peer.place(warm) if peer.place else warm)
    for device in sorted({peer.device for peer in solvers if peer.name.startswith("dlap")}):
        for warm in warmups:  # the ε-scaling engine too: "auto" may hand a larger instance over
            solve(warm, method="scaling", device=device)
        for_large_solves(device, max((n * columns(n, m_ratio) for _, _, n in cases), default=0))
    records = []
    largest = {}  # (peer, family, f) -> (n, seconds) of the largest instance a CPU peer solved
    with Records(out) as sink:
        for name, f, n in cases:
            cost = generate.family(name, n, f, seed=seed, m=columns(n, m_ratio))
            maximize = name in generate.MAXIMIZE
            reference = None
            for peer in solvers:
                seen = largest.get((peer.name, name, f))
                expected = seen[1] * (n / seen[0]) ** 3 if peer.device == "cpu" and seen else 0.0
                if expected > peer_budget:
                    echo(f"{name} n={n} {peer.name}: skipped (about {expected:.0f} s)")
                    continue
                placed = -cost if maximize and peer.negate else cost
                placed = peer.place(placed) if peer.place else placed
                times, objective = [], None
                for _ in range(repeat):
                    start = time.perf_counter()
                    objective = peer.run(placed, maximize)
                    times.append(time.perf_counter() - start)
                    if times[-1] > SLOW_SECONDS:
                        break
                certified = peer.certify(placed) if peer.certify else None
                del placed
                if peer.device == "cpu":
                    largest[(peer.name, name, f)] = (n, min(times))
                reference = objective if reference is None else reference
                record = {
                    "solver": peer.name, "method": peer.method, "device": peer.device,
                    "family": name, "n": n, "m": cost.shape[1], "f": f, "dtype": str(cost.dtype), "maximize": maximize,
                    "seconds": statistics.median(times), "objective": objective,
                    "timing": peer.timing, "repeat": times, "agrees": _close(objective, reference),
                    "certified": certified, "host": platform.node(),
                }
                records.append(record)
                sink.write(record)
                echo(f"{name}{'' if f is None else f':{f:g}'} {_size(n, cost.shape[1])} {_label(record)}: "
                     f"{record['seconds']:.3f} s, objective {objective}"
                     + ("" if record["agrees"] else "  <-- DISAGREES")
                     + ("  <-- NOT CERTIFIED" if certified is False else ""))
    return records


def _label(record) -> str:
    """Column name of a record: the solver, marked when the matrix started on the GPU."""
    return record["solver"] + (" (on GPU)" if record.get("timing") == "device" else "")


def _case(record) -> tuple:
    """(family, f, n, m) of a record (``m``: ``n`` in records made before rectangular ones)."""
    return record["family"], record["f"], record["n"], record.get("m", record["n"])


def _size(n: int, m: int) -> str:
    """``n=N``, or ``N x M`` for a rectangular instance."""
    return f"n={n}" if m == n else f"{n} x {m}"


def _anchor(family, f, n):
    """(seconds, peer) of the fastest peer the anchors list for this instance on one H200, or None."""
    if family == "uniform":
        return (HYLAC_H200[(f, n)], "HyLAC hybrid") if (f, n) in HYLAC_H200 else None
    return HARD_ANCHORS_H200.get((family, f, n))


def table(records) -> str:
    """Markdown table: one row per instance, median seconds per solver, dlap's ratios to peers
    (and to the fastest peer's anchor time where the anchors have the instance)."""
    solvers = list(dict.fromkeys(_label(r) for r in records))
    keys = list(dict.fromkeys(_case(r) for r in records))
    dlap_name = next((s for s in solvers if s.startswith("dlap")), None)
    ratio_to = [s for s in ("lap", "lapx", "scipy") if s in solvers and dlap_name]
    # the anchors are one H200's times: a column for GPU runs only
    anchors = any(r["device"] == "gpu" for r in records) and any(_anchor(*k[:3]) for k in keys if k[2] == k[3])
    head = ["family", "n"] + solvers + (["best peer (the anchors)"] if anchors else [])
    head += [f"{dlap_name} / {p}" for p in ratio_to + (["best peer"] if anchors else [])]
    head += ["same optimum", "dlap certified"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, f, n, m in keys:
        cell = {_label(r): r for r in records if _case(r) == (family, f, n, m)}
        label = family if f is None else f"{family} {'levels' if family == 'ties' else 'f'}={f:g}"
        row = [label, _size(n, m).removeprefix("n=")]
        row += [f"{cell[s]['seconds']:.3f}" if s in cell else "" for s in solvers]
        anchor = _anchor(family, f, n) if m == n else None
        if anchors:
            row.append(f"{anchor[0]:.3f} ({anchor[1]})" if anchor else "")
        mine = cell[dlap_name]["seconds"] if dlap_name in cell else None
        for p in ratio_to:
            row.append(f"{mine / cell[p]['seconds']:.2f}" if mine and p in cell else "")
        if anchors:
            row.append(f"{mine / anchor[0]:.2f}" if mine and anchor else "")
        row.append("yes" if all(r["agrees"] for r in cell.values()) else "NO")
        checked = [r["certified"] for r in cell.values() if r.get("certified") is not None]
        row.append(("yes" if all(checked) else "NO") if checked else "")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(records, file) -> None:
    """PNG: seconds against n per uniform cost range, dlap's GPU solvers (both timings), the CPU
    peers and HyLAC hybrid's anchor times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranges = sorted({r["f"] for r in records if r["family"] == "uniform"})
    families = [("uniform", f) for f in ranges] + sorted({(r["family"], None) for r in records if r["family"] != "uniform"})
    fig, axes = plt.subplots(1, len(families), figsize=(4.2 * len(families), 4), squeeze=False)
    for ax, (family, f) in zip(axes[0], families, strict=True):
        mine = [r for r in records if r["family"] == family and r["f"] == f]
        for label in dict.fromkeys(_label(r) for r in mine):
            pts = sorted((r["n"], r["seconds"]) for r in mine if _label(r) == label)
            ax.plot(*zip(*pts, strict=True), marker="o", label=label)
        hylac = sorted((n, t) for (ff, n), t in HYLAC_H200.items() if family == "uniform" and ff == f)
        if hylac:
            ax.plot(*zip(*hylac, strict=True), marker="s", linestyle="--", color="black", label="HyLAC hybrid (anchors)")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="seconds",
               title=family if f is None else f"{family} f={f:g}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(file, dpi=120, format="png")
