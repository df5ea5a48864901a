"""Assignment.verify(): the certificate proves optimal answers and catches wrong ones."""

import dataclasses

import numpy as np
import pytest

import dlap
from dlap import generate
from dlap.certificate import certify

from .configs import CONFIGS


@pytest.mark.parametrize("options", CONFIGS)
def test_primal_equals_dual_at_the_optimum(options):
    cost = generate.uniform(60, 1.0, seed=11)
    result = dlap.solve(cost, **options)
    cert = result.verify()
    assert cert.optimal and cert.gap == 0
    assert cert.max_dual_violation == 0 and cert.max_slackness_violation == 0
    # integer costs: the solver's own duals are exact, their sum is the objective
    assert result.row_duals.sum() + result.col_duals.sum() == result.objective


@pytest.mark.parametrize("maximize", [False, True])
@pytest.mark.parametrize("shape", [(30, 30), (12, 40), (40, 12)])
def test_duals_satisfy_the_lp_conditions(shape, maximize):
    cost = generate.uniform_float(shape[0], m=shape[1], seed=3) * 100
    result = dlap.solve(cost, maximize=maximize)
    sign = -1 if maximize else 1
    reduced = sign * (cost - result.row_duals[:, None] - result.col_duals[None, :])
    assert reduced.min() >= -1e-9
    assert np.allclose(reduced[result.row_ind, result.col_ind], 0, atol=1e-9)
    assert result.verify().optimal


def test_a_wrong_assignment_is_not_certified():
    cost = generate.uniform(40, 10.0, seed=2)
    result = dlap.solve(cost)
    worse = np.roll(result.col_ind, 1)  # a valid permutation, almost surely not optimal
    wrong = dataclasses.replace(result, col_ind=worse, objective=int(cost[result.row_ind, worse].sum()))
    cert = wrong.verify()
    assert wrong.objective > result.objective
    assert not cert.optimal and cert.gap >= wrong.objective - result.objective
    assert cert.max_slackness_violation > 0
    assert "NOT proven optimal" in str(cert)


def test_stats_report_the_papers_table_2_and_fig_3():
    cost = generate.uniform(300, 1.0, seed=4)
    for options in ({"method": "tree", "roots": "all", "init": "reduction"}, {"method": "classical"}):
        stats = dlap.solve(cost, **options).stats
        assert stats.method == options["method"]
        assert stats.initial_assignments > 0
        assert stats.iterations == len(stats.paths_per_iteration) + (
            stats.dual_updates if stats.method == "classical" else 0
        )
        assert sum(stats.paths_per_iteration) == 300 - stats.initial_assignments
        assert max(stats.paths_per_iteration) > 1, "the paper's search finds several paths at once"
        for phase in ("initial_reduction", "optimality_check", "forward_pass", "reverse_pass", "augment"):
            assert stats.phase_seconds[phase] >= 0 and stats.phase_counts[phase] >= 1
        assert stats.as_dict()["paths_per_iteration"] == stats.paths_per_iteration


def test_progress_callback_reaches_all_rows():
    seen = []
    dlap.solve(generate.uniform(200, 1.0), progress=seen.append)
    assert (seen[-1].matched, seen[-1].total, seen[-1].fraction) == (200, 200, 1.0)
    assert all(update.total == 200 for update in seen)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_assignments_a_subnormal_apart_are_told_apart(dtype):
    """A gap of one subnormal unit (float32's 2**-149, float64's 2**-1074) is a gap: the float
    tolerance's floor is float64's smallest subnormal, whatever the costs' dtype (it was the
    dtype's smallest normal number, 2**-126 for float32, which certified this wrong assignment)."""
    unit = np.finfo(dtype).smallest_subnormal
    cost = np.array([[1, 2], [2, 1]], dtype=dtype) * unit
    wrong = certify(cost, [0, 1], [1, 0], float(2 * cost[0, 1]), np.zeros(2), np.full(2, float(cost[0, 1])))
    assert not wrong.optimal
    result = dlap.solve(cost)
    assert result.objective == 2 * float(unit) and result.verify().optimal


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_widened_is_exact_for_float32_subnormals(device):
    """float32 -> float64 without flushing subnormals (CuPy's own conversion flushes them)."""
    from dlap.certificate import widened

    bits = np.array([0, 1, 2, 0x7FFFFF, 0x800000, 0x3F800000, 0x80000001, 0x807FFFFF, 0x7F800000], dtype=np.uint32)
    values = bits.view(np.float32)
    array = values
    if device == "gpu":
        import cupy

        array = cupy.asarray(values)
    out = widened(array)
    out = out.get() if hasattr(out, "get") else out
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, values.astype(np.float64))
    assert (out[1:4] > 0).all() and (out[6:8] < 0).all()
