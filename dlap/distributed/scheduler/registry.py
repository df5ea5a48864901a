"""The scheduler's record of the running solves, so that none outlives its client or its workers.

A solve holds a ``MultiLock`` on its workers (two solves never share a worker) and an abort event
that every rank's watchdog waits on. Both live on the scheduler and are released by the client,
so a client that died mid-solve (SIGKILL, SIGTERM of ``dlap solve --scheduler``, a lost network)
left the lock held and its ranks running, and every later solve waited forever (issue 14).

:class:`SolveRegistry` is a scheduler plugin, installed by the first solve on a cluster, that
ties each solve to its client and its workers:

- when the scheduler removes the client, it sets the solve's abort event (every rank aborts its
  communicator and its task ends) and releases the solve's lock, so the next solve starts at once;
- when the scheduler removes a worker that one of the solve's ranks runs on, it sets the abort
  event at once, so the other ranks stop without waiting for the client to notice;
- a solve holds the cluster on a lease that its client renews from its own event loop (every
  third of the lease): a client that stops answering without leaving (SIGSTOP, a debugger, a
  frozen host) keeps its connection open, and its solve held the workers until it resumed
  (issue 37: another client's 300 x 300 solve waited 45 s). When a lease runs out the
  registry aborts the solve, releases its lock and cancels its tasks; the client, if it ever
  resumes, gets an error that says so.

It also keeps rank 0's progress events (``log_event``), which the ``dlap`` page of the scheduler's
dashboard shows (:mod:`dlap.distributed.scheduler.dashboard`).

The scheduler must be able to import dlap (it unpickles the plugin), as it must anyway: it
deserialises the solve's task graph, whose functions are dlap's (checked: a scheduler without
dlap refuses the graph).
"""

from __future__ import annotations

import collections
import contextlib
import time
from dataclasses import dataclass, field

from distributed.diagnostics.plugin import SchedulerPlugin

from ...progress import SolveProgress

NAME = "dlap-solves"
#: seconds between the scheduler's looks at the leases
LEASE_CHECK_SECONDS = 0.5
#: seconds an abort event set by the registry stays on the scheduler (a rank still starting finds it)
ABORT_EVENT_LIFETIME = 60.0
#: ended solves the dashboard page keeps showing
ENDED_SHOWN = 10


@dataclass
class RunningSolve:
    client: str
    lock_id: str
    abort_event: str
    workers: tuple
    lease: float  # seconds: the client's dask.config dlap.solve-lease
    method: str = ""
    shape: tuple = ()
    started: float = field(default_factory=time.time)
    lost: list = field(default_factory=list)
    progress: dict = field(default_factory=dict)  # rank 0's last event: matched, total, its counters
    state: str = "running"
    seconds: float = 0.0
    renewed: float = field(default_factory=time.monotonic)  # the client's last word (scheduler's clock)
    keeps_going: bool = False  # a lost worker's share goes to the others (dlap.distributed.solve_points)


class SolveRegistry(SchedulerPlugin):
    """Scheduler plugin: the running solves by id; aborts and releases them when their client or
    a rank's worker goes away (see the module docstring)."""

    name = NAME
    idempotent = True  # registered by every solve; the first one's instance stays

    def __init__(self):
        self.solves: dict[str, RunningSolve] = {}
        self.checked = time.monotonic()  # the last look at the leases
        self.ended: collections.deque = collections.deque(maxlen=ENDED_SHOWN)  # (solve id, solve)
        self.scheduler = None

    async def start(self, scheduler) -> None:
        from tornado.ioloop import PeriodicCallback

        from .dashboard import add_page

        self.scheduler = scheduler
        scheduler.handlers.update({"dlap_solve_begin": self.begin, "dlap_solve_end": self.end,
                                   "dlap_solve_renew": self.renew, "dlap_solve_state": self.state})
        add_page(scheduler, self)
        self.leases = PeriodicCallback(self.expire, LEASE_CHECK_SECONDS * 1000)
        self.leases.start()

    async def close(self) -> None:
        if getattr(self, "leases", None) is not None:
            self.leases.stop()

    def begin(self, solve_id: str, client: str, lock_id: str, abort_event: str, workers, method: str = "",
              shape=(), *, lease: float, keeps_going: bool = False) -> None:
        self.solves[solve_id] = RunningSolve(client, lock_id, abort_event, tuple(workers), float(lease), method,
                                             tuple(shape), keeps_going=bool(keeps_going))

    def state(self, solve_id: str) -> str | None:
        """A solve's state: "running", or how it ended (None once it left the ended ones)."""
        if solve_id in self.solves:
            return "running"
        return next((solve.state for ended_id, solve in self.ended if ended_id == solve_id), None)

    def renew(self, solve_id: str) -> bool:
        """The client's word that it is there: the solve's lease starts again. False for a solve
        the registry no longer runs (its lease ran out)."""
        solve = self.solves.get(solve_id)
        if solve is not None:
            solve.renewed = time.monotonic()
        return solve is not None

    def expire(self) -> None:
        """End the solves whose client has not renewed their lease in time: abort their ranks,
        release their lock, cancel their tasks. Time the scheduler itself was too busy to look
        (a large graph to unpack) does not count against a lease: its client's renewals waited."""
        now = time.monotonic()
        stalled = now - self.checked - 2 * LEASE_CHECK_SECONDS
        if stalled > 0:
            for solve in self.solves.values():
                solve.renewed += stalled
        for solve_id, solve in list(self.solves.items()):
            if now - solve.renewed > solve.lease:
                del self.solves[solve_id]
                self._ended(solve_id, solve, f"lease expired: no word from the client for {solve.lease:g} s")
                self._abort(solve)
                self._release(solve)
                self._cancel(solve_id, solve.client)
        self.checked = now

    def _cancel(self, solve_id: str, client: str) -> None:
        """Cancel the tasks of a solve (their keys carry its id) that its client holds: its
        slabs would stay in the workers' memory for as long as the stopped client holds them."""
        tasks = self.scheduler.tasks
        keys = [k for k in list(tasks) if isinstance(k, str) and solve_id in k and tasks[k].who_wants]
        if keys:
            self.scheduler.stimulus_cancel(keys, client, force=True, reason="dlap solve lease expired",
                                           msg=f"dlap solve {solve_id}: its client stopped answering")

    def end(self, solve_id: str, state: str = "done") -> None:
        """The solve is over (or its client was interrupted, even while it waited for the lock):
        release its lock (a request still waiting ends by its own timeout: :meth:`_release`)."""
        solve = self.solves.pop(solve_id, None)
        if solve is not None:
            self._release(solve)
            self._ended(solve_id, solve, state)

    def remove_client(self, scheduler, client: str) -> None:
        for solve_id, solve in list(self.solves.items()):
            if solve.client == client:
                del self.solves[solve_id]
                self._abort(solve)
                self._release(solve)
                self._ended(solve_id, solve, "client gone: aborted")

    def log_event(self, topic: str, msg) -> None:
        """Rank 0's progress events (topic ``dlap-progress-<solve id>``): the page's live numbers."""
        if isinstance(topic, str) and topic.startswith("dlap-progress-"):
            solve = self.solves.get(topic.removeprefix("dlap-progress-"))
            if solve is not None and isinstance(msg, dict):
                solve.progress = msg

    def rows(self) -> list[dict]:
        """The running solves, then the ended ones, newest first: what the dashboard page shows."""
        now = time.time()
        running = [(solve_id, solve, now - solve.started) for solve_id, solve in self.solves.items()]
        ended = [(solve_id, solve, solve.seconds) for solve_id, solve in reversed(self.ended)]
        return [_row(solve_id, solve, seconds) for solve_id, solve, seconds in running + ended]

    def _ended(self, solve_id: str, solve: RunningSolve, state: str) -> None:
        solve.state = state if not solve.lost else f"worker lost: {', '.join(solve.lost)}"
        solve.seconds = time.time() - solve.started
        self.ended.append((solve_id, solve))

    def remove_worker(self, scheduler, worker: str, **kwargs) -> None:
        for solve in self.solves.values():
            if worker in solve.workers and not solve.keeps_going:
                solve.lost.append(worker)
                self._abort(solve)

    def _release(self, solve: RunningSolve) -> None:
        """Release the solve's lock where it holds it. A request still waiting is left to its
        own timeout (the client asks in turns of a third of the lease: :func:`acquire`): releasing
        it would leave its waiter on the scheduler waiting for an event no one sets."""
        locks = self.scheduler.extensions["multi_locks"]
        if solve.lock_id in locks.requests and solve.lock_id not in locks.events:
            locks.release(id=solve.lock_id)

    def _abort(self, solve: RunningSolve) -> None:
        events = self.scheduler.extensions["events"]
        events.event_set(name=solve.abort_event)
        self.scheduler.loop.call_later(ABORT_EVENT_LIFETIME, events.event_clear, solve.abort_event)


def install(client) -> None:
    """Install the registry on the client's scheduler (once: later calls find it there)."""
    client.register_plugin(SolveRegistry(), name=NAME)


class Lease:
    """A solve's lease, renewed from the client's event loop (which runs whatever the caller's
    thread does, and not at all in a stopped process) every third of its length."""

    def __init__(self, client, solve_id: str, seconds: float):
        from tornado.ioloop import PeriodicCallback

        self.client, self.solve_id, self.seconds = client, solve_id, seconds
        self.callback = PeriodicCallback(self._renew, seconds / 3 * 1000)
        client.loop.add_callback(self.callback.start)

    async def _renew(self) -> None:
        try:
            await self.client.scheduler.dlap_solve_renew(solve_id=self.solve_id)
        except Exception:  # the scheduler is going away: the solve ends by other means
            pass

    def stop(self) -> None:
        self.client.loop.add_callback(self.callback.stop)


def state(client, solve_id: str) -> str | None:
    """:meth:`SolveRegistry.state` of a solve, asked of the client's scheduler."""
    return client.sync(client.scheduler.dlap_solve_state, solve_id=solve_id)


def acquire(lock, lease: Lease) -> None:
    """Take the solve's workers' lock, asking in turns of a third of the lease, so that a request
    this client stopped renewing ends on the scheduler by its own timeout."""
    while not lock.acquire(timeout=lease.seconds / 3):
        pass


def begin(client, solve_id: str, lock, abort_event: str, workers, method: str, shape, keeps_going: bool = False) -> Lease:
    """Record the solve on the scheduler, on a lease its client renews until :func:`end`
    (``keeps_going``: the solve goes on without a worker that leaves)."""
    from .. import config

    seconds = config.seconds("solve-lease")  # dask.config dlap.solve-lease
    client.sync(client.scheduler.dlap_solve_begin, solve_id=solve_id, client=client.id, lock_id=lock.id,
                abort_event=abort_event, workers=list(workers), method=method, shape=list(shape), lease=seconds,
                keeps_going=keeps_going)
    return Lease(client, solve_id, seconds)


def end(client, solve_id: str, state: str, lease: Lease) -> None:
    """The solve is over (``state``: "done", or why not): the scheduler releases its workers'
    lock and keeps it for the dashboard page."""
    lease.stop()
    client.sync(client.scheduler.dlap_solve_end, solve_id=solve_id, state=state)


@contextlib.contextmanager
def registered(client, solve_id: str, lock, abort_event: str, workers, method: str, shape, keeps_going: bool = False,
               interrupted=None):
    """The solve, from :func:`install` and :func:`begin` (yields the lease) to :func:`end` with its
    state: "done", or "failed: " and the exception's type; on an exception that is not an
    ``Exception`` (KeyboardInterrupt) ``interrupted()`` is called first, to stop what it started."""
    install(client)
    lease = begin(client, solve_id, lock, abort_event, workers, method, shape, keeps_going)
    state = "done"
    try:
        yield lease
    except BaseException as e:
        state = f"failed: {type(e).__name__}"
        if interrupted is not None and not isinstance(e, Exception):
            interrupted()
        raise
    finally:
        end(client, solve_id, state, lease)


def _eta(solve: RunningSolve, progress: dict) -> str:
    """Rank 0's estimate of the seconds left, while the solve runs."""
    eta = SolveProgress(progress.get("fraction", 0.0), "", 0, 0, progress.get("elapsed", 0.0)).eta
    return "" if solve.state != "running" or eta is None else f"{eta:.0f} s"


def _row(solve_id: str, solve: RunningSolve, seconds: float) -> dict:
    progress = solve.progress
    phases = progress.get("phase_seconds", {})
    return {
        "solve": solve_id, "method": solve.method, "shape": " x ".join(map(str, solve.shape)),
        "ranks": len(solve.workers), "workers": ", ".join(solve.workers), "state": solve.state,
        "done": f"{100 * progress.get('fraction', 0.0):.0f}%", "eta": _eta(solve, progress),
        "stage": progress.get("stage", ""), "phase": progress.get("phase", ""), "matched": progress.get("matched", 0),
        "total": progress.get("total", solve.shape[0] if solve.shape else 0),
        "iterations": progress.get("iterations", 0), "dual_updates": progress.get("dual_updates", 0),
        "seconds": round(seconds, 2), "collectives": progress.get("collectives", 0),
        "bytes_sent": progress.get("bytes_sent", 0), "rounds": progress.get("rounds", ""),
        "violators": progress.get("violators", ""),
        "phase_seconds": ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:4]),
    }
