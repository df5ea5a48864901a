"""What the CPU clusters' engine tests check (tests/distributed/test_engine.py and its neighbours)."""

import dask.array as da
import numpy as np

import dlap.distributed as dd

from ..helpers import assert_scipy_objective, reference

#: the Hungarian variants a split solve runs
METHODS = ["classical", "hybrid", "tree"]


def check(cost, client, method, maximize=False, chunks=None):
    """The distributed solve of ``cost`` (as a dask array) raises scipy's error or reaches
    scipy's optimum with a certificate that proves it, on the workers and here."""
    picked, error = reference(cost, maximize)
    arr = da.from_array(cost, chunks=chunks or cost.shape)
    try:
        result = dd.solve(arr, client, method=method, maximize=maximize)
    except ValueError as e:
        assert error is not None, f"dlap raised {e!r}, scipy solved it"
        assert str(e) == error
        return None
    assert error is None, f"scipy raised {error!r}, dlap returned {result.objective}"
    mine = cost[result.row_ind, result.col_ind]
    assert np.isfinite(mine.astype(np.float64)).all()
    assert np.all(np.diff(result.row_ind) > 0) and len(np.unique(result.col_ind)) == len(result.col_ind)
    assert len(result.row_ind) == min(cost.shape)
    assert_scipy_objective(result, cost, picked, maximize)
    assert result.verify().optimal, result.verify()  # the ranks' certificate
    assert result.verify(cost).optimal  # the same duals, checked here against the whole matrix
    return result
