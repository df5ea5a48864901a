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
  event at once, so the other ranks stop without waiting for the client to notice.

It also keeps rank 0's progress events (``log_event``), which the ``dlap`` page of the scheduler's
dashboard shows (:mod:`dlap.distributed.dashboard`).

The scheduler must be able to import dlap (it unpickles the plugin), as it must anyway: it
deserialises the solve's task graph, whose functions are dlap's (checked: a scheduler without
dlap refuses the graph).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field

from distributed.diagnostics.plugin import SchedulerPlugin

NAME = "dlap-solves"
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
    method: str = ""
    shape: tuple = ()
    started: float = field(default_factory=time.time)
    lost: list = field(default_factory=list)
    progress: dict = field(default_factory=dict)  # rank 0's last event: matched, total, its counters
    state: str = "running"
    seconds: float = 0.0


class SolveRegistry(SchedulerPlugin):
    """Scheduler plugin: the running solves by id; aborts and releases them when their client or
    a rank's worker goes away (see the module docstring)."""

    name = NAME
    idempotent = True  # registered by every solve; the first one's instance stays

    def __init__(self):
        self.solves: dict[str, RunningSolve] = {}
        self.ended: collections.deque = collections.deque(maxlen=ENDED_SHOWN)  # (solve id, solve)
        self.scheduler = None

    async def start(self, scheduler) -> None:
        from .dashboard import add_page

        self.scheduler = scheduler
        scheduler.handlers.update({"dlap_solve_begin": self.begin, "dlap_solve_end": self.end})
        add_page(scheduler, self)

    def begin(self, solve_id: str, client: str, lock_id: str, abort_event: str, workers, method: str = "",
              shape=()) -> None:
        self.solves[solve_id] = RunningSolve(client, lock_id, abort_event, tuple(workers), method, tuple(shape))

    def end(self, solve_id: str, state: str = "done") -> None:
        """The solve is over (or its client was interrupted, even while it waited for the lock):
        release its lock, held or still requested."""
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
            if worker in solve.workers:
                solve.lost.append(worker)
                self._abort(solve)

    def _release(self, solve: RunningSolve) -> None:
        locks = self.scheduler.extensions["multi_locks"]
        if solve.lock_id in locks.requests:
            locks.release(id=solve.lock_id)

    def _abort(self, solve: RunningSolve) -> None:
        events = self.scheduler.extensions["events"]
        events.event_set(name=solve.abort_event)
        self.scheduler.loop.call_later(ABORT_EVENT_LIFETIME, events.event_clear, solve.abort_event)


def install(client) -> None:
    """Install the registry on the client's scheduler (once: later calls find it there)."""
    client.register_plugin(SolveRegistry(), name=NAME)


def begin(client, solve_id: str, lock, abort_event: str, workers, method: str, shape) -> None:
    client.sync(client.scheduler.dlap_solve_begin, solve_id=solve_id, client=client.id, lock_id=lock.id,
                abort_event=abort_event, workers=list(workers), method=method, shape=list(shape))


def end(client, solve_id: str, state: str) -> None:
    """The solve is over (``state``: "done", or why not): the scheduler releases its workers'
    lock and keeps it for the dashboard page."""
    client.sync(client.scheduler.dlap_solve_end, solve_id=solve_id, state=state)


def _row(solve_id: str, solve: RunningSolve, seconds: float) -> dict:
    progress = solve.progress
    phases = progress.get("phase_seconds", {})
    return {
        "solve": solve_id, "method": solve.method, "shape": " x ".join(map(str, solve.shape)),
        "ranks": len(solve.workers), "workers": ", ".join(solve.workers), "state": solve.state,
        "phase": progress.get("phase", ""), "matched": progress.get("matched", 0),
        "total": progress.get("total", solve.shape[0] if solve.shape else 0),
        "iterations": progress.get("iterations", 0), "dual_updates": progress.get("dual_updates", 0),
        "seconds": round(seconds, 2), "collectives": progress.get("collectives", 0),
        "bytes_sent": progress.get("bytes_sent", 0),
        "phase_seconds": ", ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:4]),
    }
