"""Exact colour transfer between two images, as in lap-solver's image test (Guthe & Thuerck): each
pixel of the smaller image gets one pixel of the larger, at the least total of the squared
distances between their (r, g, b, x, y), the colours scaled to [0, 1] by each image's maximum
value and the positions by its width - 1 and height - 1. Solved from the pixels with
``dlap.solve_points(..., "sqeuclidean")``, the matrix never formed, and proven optimal over every
pair; the smaller image is written with the colours of the pixels it was given.

    python workflows/colour_transfer.py img1l.ppm img9l.ppm --out transferred.ppm [--device gpu]

Images are binary PPM (P6), as in lap-solver's ``images`` directory. One JSON line goes to
stdout: the sizes, the objective, the solve's and the certificate's seconds, the verdict.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def read_ppm(path: str):
    """The pixels (height, width, 3) and the maximum value of a binary PPM (P6) file."""
    with open(path, "rb") as f:
        data = f.read()
    fields, at = [], 0
    while len(fields) < 4:  # magic, width, height, maximum; comments run to the end of their line
        while data[at : at + 1].isspace():
            at += 1
        if data[at : at + 1] == b"#":
            at = data.index(b"\n", at) + 1
            continue
        end = at
        while not data[end : end + 1].isspace():
            end += 1
        fields.append(data[at:end])
        at = end
    if fields[0] != b"P6":
        raise ValueError(f"{path}: not a binary PPM (P6) file")
    width, height, maximum = (int(x) for x in fields[1:])
    pixels = np.frombuffer(data, dtype=_sample_type(maximum), count=width * height * 3, offset=at + 1)
    return pixels.reshape(height, width, 3), maximum


def write_ppm(path: str, pixels, maximum: int) -> None:
    height, width, _ = pixels.shape
    with open(path, "wb") as f:
        f.write(b"P6\n%d %d\n%d\n" % (width, height, maximum))
        f.write(np.ascontiguousarray(pixels, dtype=_sample_type(maximum)).tobytes())


def _sample_type(maximum: int):
    """A PPM sample: one byte up to 255, else two, most significant first."""
    return np.uint8 if maximum < 256 else np.dtype(">u2")


def points(pixels, maximum: int):
    """Each pixel as (r, g, b, x, y) in [0, 1], row-major (lap-solver's pixel order)."""
    height, width, _ = pixels.shape
    y, x = np.divmod(np.arange(height * width), width)
    colour = pixels.reshape(-1, 3).astype(np.float64) / maximum
    return np.column_stack([colour, x / max(width - 1, 1), y / max(height - 1, 1)])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("images", nargs=2, help="two binary PPM images")
    parser.add_argument("--out", help="write the smaller image, its colours transferred, here (PPM)")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    args = parser.parse_args(argv)

    import dlap

    (first, first_max), (second, second_max) = (read_ppm(path) for path in args.images)
    swap = first.shape[0] * first.shape[1] > second.shape[0] * second.shape[1]
    (small, small_max), (large, large_max) = ((second, second_max), (first, first_max)) if swap else \
        ((first, first_max), (second, second_max))
    a, b = points(small, small_max), points(large, large_max)
    started = time.perf_counter()
    result = dlap.solve_points(a, b, "sqeuclidean", device=args.device)
    solve_s = time.perf_counter() - started
    started = time.perf_counter()
    certificate = result.verify()
    verify_s = time.perf_counter() - started
    if args.out:
        colours = large.reshape(-1, 3)[np.asarray(result.col_ind)]
        order = np.argsort(np.asarray(result.row_ind))
        write_ppm(args.out, colours[order].reshape(small.shape), large_max)
    print(json.dumps({"images": args.images, "pixels": [a.shape[0], b.shape[0]], "device": result.stats.device,
                      "objective": result.objective, "solve_s": round(solve_s, 3), "verify_s": round(verify_s, 3),
                      "optimal": bool(certificate.optimal),
                      "phase_seconds": {k: round(v, 3) for k, v in result.stats.phase_seconds.items()},
                      "phase_counts": dict(result.stats.phase_counts)}))
    return 0 if certificate.optimal else 1


if __name__ == "__main__":
    raise SystemExit(main())
