"""Every generator family, at a few sizes, solved by every configuration; generators reproducible."""

import numpy as np
import pytest

import dlap
from dlap import generate

from .configs import CONFIGS
from .helpers import assert_same_optimum

FAMILY_CASES = [
    ("uniform", 0.1), ("uniform", 1.0), ("uniform", 10.0), ("float", None), ("geometric", None),
    ("geometric-int", None), ("geometric-3d", None), ("geometric-disjoint", None),
    ("geometric-benefit", None), ("machol-wien", None), ("ties", None), ("ties", 4.0),
]


@pytest.mark.parametrize("family, f", FAMILY_CASES, ids=[f"{n}-{f}" for n, f in FAMILY_CASES])
@pytest.mark.parametrize("n", [1, 17, 120])
@pytest.mark.parametrize("options", CONFIGS)
def test_family_agrees_with_scipy(family, f, n, options):
    cost = generate.family(family, n, f, seed=n)
    assert_same_optimum(cost, family in generate.MAXIMIZE, **options)


@pytest.mark.parametrize("n", [400])
@pytest.mark.parametrize("family, f", [("uniform", 1.0), ("float", None), ("geometric", None)])
def test_default_solver_at_a_larger_size(family, f, n):
    assert_same_optimum(generate.family(family, n, f, seed=7))


def test_generators_are_seeded_and_shaped():
    np.testing.assert_array_equal(generate.uniform(50, 1.0, seed=3), generate.uniform(50, 1.0, seed=3))
    assert not np.array_equal(generate.uniform(50, 1.0, seed=3), generate.uniform(50, 1.0, seed=4))
    u = generate.uniform(200, 0.1, seed=1)
    assert u.dtype == np.int32 and u.shape == (200, 200) and u.min() >= 0 and u.max() < 20
    assert generate.uniform(10, 10, m=30).shape == (10, 30)
    # the anchors' instance definition (docs/benchmarks.md), exactly
    expected = np.random.default_rng(5).integers(0, 1000, size=(100, 100), dtype=np.int32)
    np.testing.assert_array_equal(generate.uniform(100, 10, seed=5), expected)
    g = generate.geometric(30, same_points=True)
    assert np.allclose(g, g.T) and np.all(np.diag(g) == 0)
    assert generate.geometric(20, m=7).shape == (20, 7)
    assert generate.machol_wien(3).tolist() == [[1, 2, 3], [2, 4, 6], [3, 6, 9]]
    assert set(np.unique(generate.ties(40, levels=3))) <= {0, 1, 2}
    f = generate.uniform_float(30, seed=2)
    assert f.dtype == np.float64 and 0 <= f.min() and f.max() < 1
    # the hard families: rounded distances, 3-D points, shifted clouds, a benefit matrix
    gi = generate.geometric_int(40, seed=1)
    assert gi.dtype == np.int32 and gi.max() <= 14143
    np.testing.assert_array_equal(gi, np.rint(generate.geometric(40, seed=1, scale=10000)))
    assert generate.geometric(20, dim=3, seed=1).shape == (20, 20)
    d = generate.geometric_disjoint(40, seed=1)
    assert d.shape == (40, 40) and d.min() > 0  # no column in a row's own cloud
    np.testing.assert_array_equal(generate.family("geometric-benefit", 30), generate.geometric(30, same_points=True))
    assert generate.MAXIMIZE == {"geometric-benefit"}
    assert set(np.unique(generate.family("ties", 200, 4))) == {0, 1, 2, 3}


def test_unknown_family_and_bad_sizes():
    with pytest.raises(ValueError, match="unknown family"):
        generate.family("gaussian", 10)
    with pytest.raises(ValueError, match="non-negative"):
        generate.uniform(-1)


@pytest.mark.parametrize("name", sorted(generate.POINT_FAMILIES))
def test_point_sets_of_every_family(name):
    a, b = generate.points(name, 300, 200, seed=3)
    dim = generate.POINT_FAMILIES[name]
    assert a.shape == (300, dim) and b.shape == (200, dim) and a.dtype == b.dtype == np.float64
    again = generate.points(name, 300, 200, seed=3)
    np.testing.assert_array_equal(a, again[0])  # reproducible from the seed
    assert not np.array_equal(a, generate.points(name, 300, 200, seed=4)[0])
    small = generate.points(name, 20, dim=5, dtype="float32")
    assert small[0].shape == small[1].shape == (20, 5) and small[0].dtype == np.float32
    metric = "cosine" if name == "embeddings" else "euclidean"
    assert dlap.solve_points(a, b, metric).verify().optimal


def test_the_point_families_have_their_shapes():
    a, b = generate.points("shifted", 500, seed=1)
    assert 0.4 < b[:, 0].mean() - a[:, 0].mean() < 0.6 and abs(b[:, 1].mean() - a[:, 1].mean()) < 0.1

    def nearest_neighbour(x):  # the median distance from a point to its nearest other point
        d = np.sqrt(((x[:, None, :] - x[None, :, :]) ** 2).sum(-1))
        np.fill_diagonal(d, np.inf)
        return np.median(d.min(axis=1))

    clustered, _ = generate.points("clustered", 2000, seed=1)
    uniform, _ = generate.points("uniform", 2000, seed=1)
    assert nearest_neighbour(clustered) < nearest_neighbour(uniform) / 2  # two centres, dense around them
    a, b = generate.points("embeddings", 200, seed=2)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1)
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1)
    # each column is a noisy copy of some row: the cosine optimum pairs them at a small distance
    assert dlap.solve_points(a, b, "cosine").objective / 200 < 0.2
    with pytest.raises(ValueError, match="unknown point family"):
        generate.points("gaussian", 10)
    with pytest.raises(ValueError, match="non-negative"):
        generate.points("uniform", -1)
