"""Time per phase (Fig. 3 of the paper), shared by every driver."""

from __future__ import annotations

import time
from contextlib import contextmanager

from .result import Stats


class PhaseTimer:
    """Times each execution of a phase into ``stats`` (Fig. 3 of the paper: time per phase).

    The backend is synchronised when a phase ends, so on a GPU a phase's time is the time of its
    own kernels, not of whatever was queued before it. Without a backend (host work in NumPy)
    there is nothing to synchronise.
    """

    def __init__(self, stats: Stats, backend=None, state=None):
        self.stats, self.backend, self.state = stats, backend, state

    @contextmanager
    def __call__(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            if self.backend is not None:
                self.backend.synchronize(self.state)
            self.stats.add(name, time.perf_counter() - start)
