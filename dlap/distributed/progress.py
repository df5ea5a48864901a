"""What a distributed solve shows while it runs.

Rank 0 logs an event on the topic ``dlap-progress-<solve id>`` about twice a second (the fields
of a :class:`~dlap.progress.SolveProgress`: the estimated share of the work done, the stage,
matched rows, elapsed seconds; and the counters the dashboard shows); the client subscribes to it
and drives a progress bar or the caller's ``progress(update)`` callback. The events stay in the
scheduler's event log (``client.get_events(topic)``). On the dashboard the solve's tasks carry
their role in their names: ``dlap-read-zarr`` or ``dlap-cut`` (pieces of a slab),
``dlap-open-slab`` and ``dlap-write-slab`` (a slab filled piece by piece), then ``dlap-slab``
(placement, per rank) and ``dlap-solve-<method>`` (the long task of each rank).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager

from ..progress import ProgressBar, SolveProgress

_FIELDS = [f.name for f in dataclasses.fields(SolveProgress)]


@contextmanager
def watch(client, topic: str, progress):
    """Show rank 0's progress events while the block runs (``progress``: True for a tqdm bar,
    a callable receiving :class:`~dlap.progress.SolveProgress`, or None)."""
    if not progress:
        yield
        return
    with ProgressBar(progress, "dlap distributed solve", delay=0.0) as callback:

        def handler(event) -> None:
            _, message = event
            callback(SolveProgress(*(message[name] for name in _FIELDS)))

        client.subscribe_topic(topic, handler)
        try:
            yield
        finally:
            client.unsubscribe_topic(topic)
