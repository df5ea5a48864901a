"""The k-d tree's queries (dlap/backends/cpu/kdtree.py) against the kernels that scan every pair:
the same nearest columns and the same most violated pairs, for every metric, both signs, float32 and float64
coordinates, duplicate points and ties."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dlap.backends.cpu import kdtree, points
from dlap.points.metrics import METRIC_IDS, METRICS, norms


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 120), m=st.integers(1, 120), d=st.integers(1, 5), metric=st.sampled_from(METRICS),
       sign=st.sampled_from([1.0, -1.0]), dtype=st.sampled_from([np.float32, np.float64]),
       grid=st.booleans(), leaf=st.sampled_from([1, 4, 16]), seed=st.integers(0, 2**31 - 1))
def test_the_tree_answers_as_the_scan_of_every_pair(n, m, d, metric, sign, dtype, grid, leaf, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.random((n, d)), rng.random((m, d))
    if grid:  # duplicates and ties everywhere
        a, b = np.round(a * 3) + 1.0, np.round(b * 3) + 1.0
    # the engine hands the trees float64 points (dlap/points/search.py): float32 ones widened
    a, b = ((x + 0.1).astype(dtype).astype(np.float64) for x in (a, b))
    p = 1.5 if metric == "minkowski" else 0.0
    na, nb = norms(a, metric, np), norms(b, metric, np)
    coordinates = b.astype(np.float64) / (nb[:, None] if metric == "cosine" else 1.0)
    tree = kdtree.build(np.ascontiguousarray(coordinates), leaf)
    geometry = (a, b, na, nb, METRIC_IDS[metric], p, sign)
    k = int(rng.integers(1, m + 1))
    found = []
    for query in (points.nearest_columns, lambda *x: kdtree.nearest_columns(tree, *x)):
        index, cost = np.empty((n, k), dtype=np.int64), np.empty((n, k))
        query(*geometry, k, index, cost)
        found.append((index, cost))
    np.testing.assert_array_equal(found[0][0], found[1][0])
    np.testing.assert_array_equal(found[0][1], found[1][1])
    # duals with violators scattered over every row; the kept ones compared where they were kept
    u = rng.normal(0, 1, n) + (cost.mean() if cost.size else 0)
    v = -np.abs(rng.normal(0, 1, m))
    ceilings = np.empty(tree[1].shape[0])
    kdtree.column_ceilings(tree, v, ceilings)
    cap = int(rng.integers(1, 6))
    priced = []
    for query in (points.price, lambda *x: kdtree.price(tree, ceilings, *x)):
        index, reduced, count = np.full((n, cap), -1, dtype=np.int64), np.zeros((n, cap)), np.empty(n, dtype=np.int64)
        query(*geometry, u, v, 1e-12, 0.0, index, reduced, count)
        kept = np.minimum(count, cap)[:, None] > np.arange(cap)
        priced.append((count, np.where(kept, index, -1), np.where(kept, reduced, 0.0)))
    (scan_count, *scan_lists), (tree_count, *tree_lists) = priced
    for scanned, through_tree in zip(scan_lists, tree_lists, strict=True):
        np.testing.assert_array_equal(scanned, through_tree)
    # the same counts where a row's list holds them all; where it does not, at least as many
    full = scan_count >= cap
    np.testing.assert_array_equal(scan_count[~full], tree_count[~full])
    assert np.all((tree_count[full] >= cap) & (tree_count[full] <= scan_count[full]))
