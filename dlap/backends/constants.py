"""The constants the Python side and the CUDA kernels share, written once here: the kernels get
them as a generated preamble (:func:`cuda_preamble`), prepended to every ``.cu`` source.

A tunable is emitted inside ``#ifndef`` so that a build with ``-D`` (an A/B of a kernel variant)
still overrides it; the kernels that take one are exact for any value (they stride over the
grid the Python side sizes with it).
"""

from __future__ import annotations

#: the slots of the GPU state's control block (``uint64[CTL_SIZE]``): counters and scalars the
#: host reads after a launch
CTL_N_FREE = 0  # rows in free_rows after the optimality check
CTL_N_Q = 1  # rows in the forest (rows_q)
CTL_N_FOREST = 2  # tree variant: covered columns (forest_cols)
CTL_N_REV = 3  # columns marked "reverse" (free columns reached)
CTL_N_PATHS = 4  # paths kept by the reverse pass
CTL_STATUS = 5  # 1: no finite edge leaves the forest (infeasible); 2: a search left no path
CTL_DUAL_UPDATES = 6  # tree and classical: dual updates; ε-scaling: searches committed
CTL_SCANNED = 7  # tree and ε-scaling: rows scanned; classical: BFS levels
CTL_LEVEL = 8  # tree: dual level reached (double bits)
CTL_THETA = 9  # classical dual update: theta (order-preserving bits)
CTL_ROTATE = 10  # three rotating slots (10, 11, 12): the tree's minimum slack, the BFS's level sizes
CTL_BID_ROUNDS = 13  # rounds of bids (bidding.cu)
CTL_BIDS = 14  # bids made in them
CTL_STAGED = 15  # classical compression: zero-slack edges staged by its first pass
CTL_OFFER_LOW = 16  # the Dask engine's tree wave (tree_offer): smallest slack (order-preserving bits)
CTL_OFFER_COUNT = 17  # its columns offered; search_offer: its first column at the minimum (n_cols - j)
CTL_OFFER_FREE = 18  # search_offer: its first free column at the minimum (n_cols - j)
CTL_SIZE = 19
CONTROL_SLOTS = {name: value for name, value in globals().items() if name.startswith("CTL_")}

#: how the classical compression (section 3.3) makes a row's zero-slack edges after a dual update:
#: keep those of the row's previous edges whose column is uncovered, keep all of them, or scan the
#: row of the matrix (backends.base.compression_plan decides; the CPU and CUDA kernels obey)
KEEP_UNCOVERED, KEEP_ROW, SCAN_ROW = 0, 1, 2
ROW_PLANS = {"KEEP_UNCOVERED": KEEP_UNCOVERED, "KEEP_ROW": KEEP_ROW, "SCAN_ROW": SCAN_ROW}

#: forest rows a block of the classical dual update's scan takes (classical.cu); the Python side
#: sizes the scan's grid with it
THETA_ROWS = 4
#: row entries an ε-scaling search thread loads at once (scaling.cu); the Python side sizes the
#: search blocks with it
SCAN_BATCH = 10
#: threads of a wide ε-scaling search block (scaling.cu), whose block agrees on its nearest column
#: before the cluster does, so it is not bound to 32 warps a cluster
SEARCH_WIDE_THREADS = 512
TUNABLES = {"THETA_ROWS": THETA_ROWS, "SCAN_BATCH": SCAN_BATCH, "SEARCH_WIDE_THREADS": SEARCH_WIDE_THREADS}
#: threads a row of the sparse-core engine's scans (points.cu: a warp, whose ballots they use); the
#: Python side launches that many threads a row
ROW_LANES = 32
SHAPES = {"ROW_LANES": ROW_LANES}


def cuda_preamble() -> str:
    """The constants above as CUDA source: the control block's slots, the row plans and the
    shapes as enums, the tunables as ``#define`` (inside ``#ifndef``)."""
    lines = ["// Generated from dlap/backends/constants.py: edit the constants there."]
    for table in (CONTROL_SLOTS, ROW_PLANS, SHAPES):
        lines.append("enum { " + ", ".join(f"{name} = {value}" for name, value in table.items()) + " };")
    for name, value in TUNABLES.items():
        lines += [f"#ifndef {name}", f"#define {name} {value}", "#endif"]
    return "\n".join(lines) + "\n"
