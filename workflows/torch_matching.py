"""A DETR-style training step's Hungarian matching moved onto the GPU (issue 15).

DETR's matcher builds, per image, the cost of matching each of its queries to each ground-truth
object (class probability, L1 box distance, generalised IoU; here the first two) and then calls
``scipy.optimize.linear_sum_assignment`` on the CPU, one image at a time, after ``.cpu()``. With
dlap the per-image costs stay on the GPU and one ``dlap.solve_batch`` call matches the whole
batch; the indices come back as CUDA tensors for the loss.

Run: ``python workflows/torch_matching.py [--batch 64] [--queries 300] [--max-targets 100]``.
Prints both timings per step (median of ``--steps``) and checks that both matchings cost the same.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment

import dlap


def make_step(batch: int, queries: int, max_targets: int, classes: int, generator):
    """Predictions of one step (logits, boxes) and each image's targets (0 to max_targets)."""
    logits = torch.randn(batch, queries, classes, device="cuda", generator=generator)
    boxes = torch.rand(batch, queries, 4, device="cuda", generator=generator)
    counts = torch.randint(0, max_targets + 1, (batch,), generator=generator, device="cuda").tolist()
    targets = [(torch.randint(0, classes, (t,), device="cuda", generator=generator),
                torch.rand(t, 4, device="cuda", generator=generator)) for t in counts]
    return logits, boxes, targets


def matching_costs(logits, boxes, targets):
    """DETR's cost per image: -p(class) + 5 * L1(box), queries x targets (on the GPU)."""
    prob = logits.softmax(-1)
    return [-prob[b][:, labels] + 5 * torch.cdist(boxes[b], tgt_boxes, p=1)
            for b, (labels, tgt_boxes) in enumerate(targets)]


def match_with_scipy(costs):
    """What DETR does: each image's cost to the CPU, scipy per image, indices back as tensors."""
    return [tuple(torch.as_tensor(x, dtype=torch.int64) for x in linear_sum_assignment(c.detach().cpu().numpy()))
            for c in costs]


def match_with_dlap(costs):
    """One call for the batch, on the GPU; indices are CUDA tensors."""
    return list(dlap.solve_batch(costs))


def total(costs, indices) -> float:
    return sum(float(c[r.to(c.device), k.to(c.device)].sum()) for c, (r, k) in zip(costs, indices, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--max-targets", type=int, default=100)
    parser.add_argument("--classes", type=int, default=91)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", help="append the result as a JSON line here")
    args = parser.parse_args()
    generator = torch.Generator(device="cuda").manual_seed(0)
    times = {"scipy (.cpu() per image)": [], "dlap.solve_batch (on GPU)": []}
    for step in range(args.steps + 1):  # step 0 warms up (kernel compilation)
        costs = matching_costs(*make_step(args.batch, args.queries, args.max_targets, args.classes, generator))
        torch.cuda.synchronize()
        results = {}
        for name, match in zip(times, (match_with_scipy, match_with_dlap), strict=True):
            start = time.perf_counter()
            results[name] = match(costs)
            torch.cuda.synchronize()
            if step:
                times[name].append(time.perf_counter() - start)
        a, b = (total(costs, r) for r in results.values())
        assert abs(a - b) <= 1e-4 * max(1.0, abs(a)), (a, b)
        assert all(k.is_cuda for _, k in results["dlap.solve_batch (on GPU)"])
    summary = {name: statistics.median(t) for name, t in times.items()}
    print(f"batch {args.batch}, {args.queries} queries, 0-{args.max_targets} targets, median of {args.steps} steps")
    for name, seconds in summary.items():
        print(f"  {name}: {seconds * 1e3:.2f} ms")
    print(f"  speed-up: {summary['scipy (.cpu() per image)'] / summary['dlap.solve_batch (on GPU)']:.1f}x; "
          "same matching cost every step")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps({**vars(args), "seconds": summary, "gpu": torch.cuda.get_device_name()}) + "\n")


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
