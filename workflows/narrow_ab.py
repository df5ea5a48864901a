"""ε-scaling's half-width copy (``Backend.narrowed``) measured against none, side by side in one
process: each instance solved from the host with the copy and without it, alternately, median of
``--repeat``; same optimum asserted, and every answer's certificate recomputed from the matrix.

    python workflows/narrow_ab.py --device gpu --n 2000 5000 10000 --families geometric geometric-benefit
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dlap
from dlap import generate
from dlap.bench import HARD_FAMILIES


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--n", type=int, nargs="+", default=[2000])
    ap.add_argument("--families", nargs="+", default=list(HARD_FAMILIES))
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    if args.device == "gpu":
        from dlap.backends.gpu import GPUBackend as backend
    else:
        from dlap.backends.cpu import CPUBackend as backend
    narrowed = backend.narrowed
    modes = {"narrow": narrowed, "plain": lambda self, state: None}
    for family in args.families:
        name, _, levels = family.partition(":")
        maximize = name == "geometric-benefit"
        dlap.solve(generate.family(name, 300, seed=1), device=args.device, maximize=maximize)  # compile
        for n in args.n:
            cost = generate.ties(n, levels=int(levels)) if name == "ties" else generate.family(name, n, seed=0)
            dlap.solve(cost, device=args.device, maximize=maximize)  # this size's first solve compiles too
            times, last = {m: [] for m in modes}, {}
            for _ in range(args.repeat):
                for mode, method in modes.items():
                    backend.narrowed = method
                    start = time.perf_counter()
                    result = dlap.solve(cost, device=args.device, maximize=maximize)
                    times[mode].append(time.perf_counter() - start)
                    last[mode] = result
            backend.narrowed = narrowed
            a, b = last["narrow"], last["plain"]
            assert a.objective == b.objective, (family, n, a.objective, b.objective)
            certified = all(r.verify(cost).optimal for r in (a, b))
            med = {m: statistics.median(t) for m, t in times.items()}
            print(f"{family} {n} {cost.dtype}: narrow {med['narrow']:.3f} s plain {med['plain']:.3f} s "
                  f"ratio {med['narrow'] / med['plain']:.2f} | method {a.stats.method} "
                  f"narrowed {a.stats.phase_counts.get('scaling_narrowed')} scans {a.stats.phase_counts.get('rows_scanned')} "
                  f"vs {b.stats.phase_counts.get('rows_scanned')} | bids {a.stats.phase_counts.get('bids')} vs "
                  f"{b.stats.phase_counts.get('bids')} | certified {certified} | objective {a.objective!r}", flush=True)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
