"""``dlap warmup`` compiles a Dask rank's kernels too: after it (its ranks' solves run one rank
alone in this process), split solves on a real CPU cluster compile and load nothing more."""

import numpy as np
import pytest
from numba.core import event

pytestmark = pytest.mark.distributed

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import dlap.distributed as dd  # noqa: E402
from dlap import warmup  # noqa: E402

from ..helpers import Compiles, kernel_versions  # noqa: E402


def test_after_warmup_split_solves_compile_nothing():
    warmup.warmup("cpu")  # (the client solves its rank placement with dlap.solve too)
    rng = np.random.default_rng(3)
    # an in-process cluster: the ranks' kernels are this process's, where the listener hears them
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        compiles = Compiles()
        event.register("numba:compile", compiles)
        try:
            for dtype in ("float64", "int32"):
                points = rng.random((90, 2)), rng.random((90, 2))
                cost = (((points[0][:, None] - points[1][None]) ** 2).sum(-1) * 1000).astype(dtype)
                for method, auto in warmup.RANK_METHODS:
                    before = kernel_versions()
                    chunks = (90, 46) if method != "classical" else (45, 90)
                    result = dd.solve(da.from_array(cost, chunks=chunks), client, method="auto" if auto else method,
                                      n_workers=2, device="cpu")
                    assert result.verify().optimal
                    added = {k for k, count in kernel_versions().items() if count != before.get(k, 0)}
                    assert not compiles.kernels and not added, (dtype, method, compiles.kernels, added)
        finally:
            event.unregister("numba:compile", compiles)
