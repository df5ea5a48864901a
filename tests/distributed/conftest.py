"""The CPU cluster the engine's test modules share, one per module."""

import pytest


@pytest.fixture(scope="module")
def client():
    """Three single-threaded CPU workers and a client of this module's own."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=3, threads_per_worker=1, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c
