"""How far a solve has come: an estimate of the share of its work done, for progress bars,
callbacks and the Dask dashboard.

A count of matched rows is no such estimate: an assignment's last rows cost the most (JV
initialisation matches 90% of a uniform matrix in a third of the solve, and the searches for the
last 10% take the rest). With ``f`` rows free the searches left cost about ``n ln(1 + f)`` (the
search for the k-th last row scans about ``n / k`` rows on random costs), so a stage that assigns
``n`` rows is ``1 - ln(1 + f) / ln(1 + n)`` done (:func:`assigned_share`). ε-scaling assigns every
row again in each of its phases, and the phases cost about the same (each 9% to 26% of a solve on
structured costs), so each is an equal part of what is left once its schedule is known. The
points engine's stages are its candidates, its first core solve and its pricing rounds
(:mod:`dlap.points.core`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class SolveProgress:
    """What a ``progress`` callback receives: ``fraction`` of the solve's estimated work done (0
    to 1), the ``stage`` under way, rows ``matched`` of ``total`` in the current assignment,
    ``elapsed`` seconds, and :attr:`eta`."""

    fraction: float
    stage: str
    matched: int
    total: int
    elapsed: float

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far; None before any work is done."""
        if self.fraction <= 0.0:
            return None
        return self.elapsed * (1.0 - self.fraction) / self.fraction


def assigned_share(n_free: int, n_rows: int) -> float:
    """The estimated share done of a stage that assigns ``n_rows`` rows, ``n_free`` still free."""
    if n_rows <= 0:
        return 1.0
    return 1.0 - math.log1p(max(0, min(n_free, n_rows))) / math.log1p(n_rows)


class Progress:
    """Sends :class:`SolveProgress` to ``callback`` at each new stage and at most every
    ``interval`` s within one (the end always), each stage's own share mapped into the part of
    the solve it was given (:meth:`stage`); the fraction never goes back. ``policy(n_free)``,
    asked after every optimality check of a variant, says whether to stop (``method="auto"``'s
    hand-over to ε-scaling): the variants' loops end once ``stopped``."""

    def __init__(self, callback, total: int, interval: float = 0.1, policy=None):
        self.callback, self.total, self.interval, self.policy = callback, total, interval, policy
        self.stopped = False
        self.started = self._last = time.perf_counter()
        self.name, self.lo, self.hi, self.fraction = "searches", 0.0, 1.0, 0.0
        self._sent = ""  # the stage of the last report sent

    @classmethod
    def of(cls, progress, total: int) -> Progress:
        """``progress`` itself where it is a :class:`Progress` (a stage of a larger solve), else
        one for the callback ``progress`` (or None)."""
        return progress if isinstance(progress, Progress) else cls(progress, total)

    def stage(self, name: str, lo: float | None = None, hi: float = 1.0, n_free: int | None = None) -> None:
        """The reports from here on are of stage ``name``, whose work is the part ``[lo, hi]`` of
        the solve's (``lo``: where the solve is now); with ``n_free``, a report of its start."""
        self.name, self.lo, self.hi = name, self.fraction if lo is None else lo, hi
        if n_free is not None:
            self(n_free, share=0.0)

    def check(self, n_free: int) -> None:
        """A variant's optimality check: the policy's answer, then a report."""
        if self.policy is not None:
            self.stopped = self.policy(n_free)
        self(n_free)

    def __call__(self, n_free: int, share: float | None = None, final: bool = False) -> None:
        """Report ``n_free`` rows free, the stage ``share`` done (by default
        :func:`assigned_share`), or the solve's end (``final``)."""
        share = assigned_share(n_free, self.total) if share is None else share
        self.fraction = 1.0 if final else max(self.fraction, self.lo + (self.hi - self.lo) * share)
        if self.callback is None:
            return
        now = time.perf_counter()
        if final or self.name != self._sent or now - self._last >= self.interval:
            self._last, self._sent = now, self.name
            self.callback(SolveProgress(self.fraction, "done" if final else self.name, self.total - n_free,
                                        self.total, now - self.started))


class ProgressBar:
    """``progress=True``: a tqdm bar of the estimated work (:class:`SolveProgress`), with
    the stage under way, shown once the solve has run for ``delay`` seconds; otherwise the
    caller's callback (or None)."""

    def __init__(self, progress, desc: str = "dlap solve", delay: float = 1.0):
        self.progress, self.desc, self.delay, self.bar = progress, desc, delay, None

    def __enter__(self):
        if self.progress is True:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=100, delay=self.delay, mininterval=0, desc=self.desc, leave=False,
                            bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}<{remaining} {postfix}")
            return self.update
        return self.progress or None

    def update(self, update: SolveProgress) -> None:
        """Show ``update`` (every one: :class:`Progress` sends at most ten a second)."""
        self.bar.set_postfix_str(update.stage, refresh=False)
        self.bar.update(100 * update.fraction - self.bar.n)  # update() honours the one-second delay

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
        return False
