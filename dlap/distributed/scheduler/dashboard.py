"""The ``dlap`` page of the Dask dashboard: the solves the scheduler runs, as they run.

Served by the scheduler's own dashboard at ``/dlap`` (``http://scheduler:8787/dlap``), built as
distributed builds its pages (a Bokeh document in the dashboard's page template, refreshed by a
periodic callback) and added by the solve registry (:mod:`dlap.distributed.scheduler.registry`) when the
first solve installs it. One row per solve, running ones first, then the last ended ones: its
method and shape, its ranks and their workers, its state, the estimated share of its work done
and the time left (:mod:`dlap.progress`), its stage, the phase rank 0 timed last, matched
rows against n, iterations, dual updates, seconds, the collectives rank 0 made and the bytes it
sent, the pricing rounds and violators of a points solve (:func:`dlap.distributed.solve_points`),
and its longest phases. The numbers are rank 0's progress events (one per
``engine.PROGRESS_INTERVAL``; a points solve's client sends one per stage), which the registry keeps.

A scheduler without the dashboard (no bokeh, or ``dashboard=False``) simply gets no page.
"""

from __future__ import annotations

import html

ROUTE = "/dlap"
#: milliseconds between refreshes of the page
REFRESH_MS = 500
COLUMNS = [
    ("solve", "solve"), ("state", "state"), ("method", "method"), ("shape", "n x m"), ("ranks", "ranks"),
    ("done", "done (estimated)"), ("eta", "time left"), ("stage", "stage"), ("phase", "phase (last timed)"),
    ("matched", "matched rows"), ("total", "of n"), ("iterations", "iterations"),
    ("dual_updates", "dual updates"), ("seconds", "seconds"), ("collectives", "collectives (rank 0)"),
    ("bytes_sent", "bytes sent (rank 0)"), ("rounds", "pricing rounds"), ("violators", "violators"),
    ("phase_seconds", "longest phases (s)"), ("workers", "workers"),
]


def add_page(scheduler, registry) -> bool:
    """Add the page to ``scheduler``'s dashboard (False where it has none)."""
    application = getattr(scheduler, "http_application", None)
    if application is None:
        return False
    try:
        from distributed.dashboard.core import BokehApplication
        from distributed.dashboard.scheduler import template_variables
    except ImportError:  # no bokeh: distributed serves no dashboard either
        return False
    from tornado.ioloop import IOLoop

    def page(scheduler, extra, doc):
        solves_doc(registry, extra, doc)

    prefix = getattr(scheduler, "http_prefix", None) or ""
    bokeh_app = BokehApplication({ROUTE: page}, scheduler, prefix=prefix,
                                 template_variables=template_variables(scheduler))
    application.add_application(bokeh_app)
    bokeh_app.initialize(IOLoop.current())
    return True


def solves_doc(registry, extra, doc) -> None:
    """The Bokeh document of the page: a heading and an HTML table of
    :meth:`SolveRegistry.rows`, rewritten by a periodic callback. (An HTML table in a ``Div``
    rather than a ``DataTable``: in Bokeh 3.9 the DataTable kept its first rows on screen while
    its source changed.)"""
    from bokeh.layouts import column
    from bokeh.models import Div
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    heading = Div(text="<h2>dlap: exact assignment solves on this cluster</h2>"
                       "<p>Rank 0's progress, every half second; running solves first, then the last ended.</p>")
    table = Div(text=solves_table(registry.rows()), sizing_mode="stretch_width")

    def refresh() -> None:
        table.text = solves_table(registry.rows())

    doc.title = "Dask: dlap"
    doc.add_root(column(heading, table, sizing_mode="stretch_width"))
    doc.add_periodic_callback(refresh, REFRESH_MS)
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME


def solves_table(rows) -> str:
    """The solves as an HTML table (one row per solve, :data:`COLUMNS`)."""
    cell = "padding: 2px 10px; border-bottom: 1px solid #ddd; text-align: left"
    head = "".join(f'<th style="{cell}">{html.escape(title)}</th>' for _, title in COLUMNS)
    body = "".join(
        "<tr>" + "".join(f'<td style="{cell}">{html.escape(str(row[key]))}</td>' for key, _ in COLUMNS) + "</tr>"
        for row in rows
    )
    if not rows:
        body = f'<tr><td style="{cell}" colspan="{len(COLUMNS)}">no solve yet</td></tr>'
    return f'<table style="border-collapse: collapse; font-size: 13px"><tr>{head}</tr>{body}</table>'
