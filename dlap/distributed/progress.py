"""What a distributed solve shows while it runs.

Rank 0 logs an event on the topic ``dlap-progress-<solve id>`` about twice a second
(``{"matched": rows matched, "total": rows}``); the client subscribes to it and drives a progress
bar or the caller's ``progress(matched, total)`` callback. The events stay in the scheduler's
event log (``client.get_events(topic)``). On the dashboard the solve's tasks carry their role in
their names: ``dlap-read-zarr`` or ``dlap-cut`` (pieces of a slab), ``dlap-open-slab`` and
``dlap-write-slab`` (a slab filled piece by piece), then ``dlap-slab`` (placement, per rank) and
``dlap-solve-<method>`` (the long task of each rank).
"""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def watch(client, topic: str, progress, total: int):
    """Show rank 0's progress events while the block runs (``progress``: True for a tqdm bar,
    a callable, or None)."""
    if not progress:
        yield
        return
    bar = None
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="row", desc="dlap distributed solve", leave=False)

    def handler(event) -> None:
        _, message = event
        if bar is not None:
            bar.update(message["matched"] - bar.n)
        else:
            progress(message["matched"], message["total"])

    client.subscribe_topic(topic, handler)
    try:
        yield
    finally:
        client.unsubscribe_topic(topic)
        if bar is not None:
            bar.close()
