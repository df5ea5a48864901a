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

The scheduler must be able to import dlap (it unpickles the plugin), as it must anyway: it
deserialises the solve's task graph, whose functions are dlap's (checked: a scheduler without
dlap refuses the graph).
"""

from __future__ import annotations

from dataclasses import dataclass, field

NAME = "dlap-solves"
#: seconds an abort event set by the registry stays on the scheduler (a rank still starting finds it)
ABORT_EVENT_LIFETIME = 60.0

from distributed.diagnostics.plugin import SchedulerPlugin


@dataclass
class RunningSolve:
    client: str
    lock_id: str
    abort_event: str
    workers: tuple
    lost: list = field(default_factory=list)


class SolveRegistry(SchedulerPlugin):
    """Scheduler plugin: the running solves by id; aborts and releases them when their client or
    a rank's worker goes away (see the module docstring)."""

    name = NAME
    idempotent = True  # registered by every solve; the first one's instance stays

    def __init__(self):
        self.solves: dict[str, RunningSolve] = {}
        self.scheduler = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler
        scheduler.handlers.update({"dlap_solve_begin": self.begin, "dlap_solve_end": self.end})

    def begin(self, solve_id: str, client: str, lock_id: str, abort_event: str, workers) -> None:
        self.solves[solve_id] = RunningSolve(client, lock_id, abort_event, tuple(workers))

    def end(self, solve_id: str) -> None:
        """The solve is over (or its client was interrupted, even while it waited for the lock):
        release its lock, held or still requested."""
        solve = self.solves.pop(solve_id, None)
        if solve is not None:
            self._release(solve)

    def remove_client(self, scheduler, client: str) -> None:
        for solve_id, solve in list(self.solves.items()):
            if solve.client == client:
                del self.solves[solve_id]
                self._abort(solve)
                self._release(solve)

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


def begin(client, solve_id: str, lock, abort_event: str, workers) -> None:
    client.sync(client.scheduler.dlap_solve_begin, solve_id=solve_id, client=client.id, lock_id=lock.id,
                abort_event=abort_event, workers=list(workers))


def end(client, solve_id: str) -> None:
    """The solve is over: the scheduler forgets it and releases its workers' lock."""
    client.sync(client.scheduler.dlap_solve_end, solve_id=solve_id)
