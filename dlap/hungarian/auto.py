"""``method="auto"``: Jonker-Volgenant initialisation and the paper's variants, handing over to the
ε-scaling engine when the searches show structured costs.

On i.i.d. costs JV initialisation leaves a few percent of the rows free (uniform: 4% to 10%,
floats 1% to 4%), and the paper's searches augment many of them per iteration. Structured costs
leave more (geometric 14% to 21%, benefit matrices 93%, Machol-Wien 99%), and every search finds
one augmenting path after a long walk. The ε-scaling engine (:mod:`.scaling`)
is 10x to 100x faster there and slower on i.i.d. costs. Neither the free fraction alone nor the
family tells them apart (GPU uniform f = 1 and geometric both leave 10% to 15%); the two together
do: ``solve_auto`` runs the variant the device prefers (the hybrid on a GPU; on the CPU classical
or tree by the cost range) and hands a square matrix that JV left with more than
``SCALING_FREE_FRACTION`` of its rows free (``HYBRID_SCALING_FREE_FRACTION`` for the hybrid) over
to ε-scaling at the first optimality check where
more than ``SCALING_MIN_FREE_FRACTION`` are still free and the last four iterations augmented
fewer than one in ``SCALING_PATH_SHARE`` of them together (an iteration that ended in a dual
update augmented none), one of them the iteration after a dual update (:func:`stalled`). The
engine starts over from its own prices. (Not at once where JV leaves most rows free: on a GPU
JV leaves almost every row of a tie-heavy matrix free, and the hybrid matches them faster.) On the
CPU, JV's augmenting row reduction leaves i.i.d. costs under 8% of the rows free at every size
and structured ones over 10%, so the CPU hands those over at once (geometric n = 10000 as fast as
after the window, n = 3000 faster; and no variant is compiled on such a first call), the
ε-phases starting from JV's prices unless JV left most rows free (``GREEDY_START_FREE_FRACTION``:
Machol-Wien, which the greedy by regret proves optimal at once).
``stats.phase_counts["jv_free_rows"]`` records JV's free rows and ``["handover_iteration"]`` the
iteration of the hand-over.
Rectangular matrices stay with the variants where JV says i.i.d. costs (the extra columns absorb
the conflicts, and the ε-scaling engine's virtual rows cost more than they save). Where the
caller allows it, the sparse-core engine (:mod:`dlap.points.core`,
``stats.method == "sparse"``) takes instead a rectangular float matrix JV says is structured (JV left 95%
of the rows of shifted clouds and benefit matrices free, which the tree variant took 20x its time
to match), and on the CPU a square one that JV left at most ``GREEDY_START_FREE_FRACTION`` free,
structured (distances within overlapping point sets, 2.5x to 7x faster than ε-scaling; the
shifted clouds and benefit matrices above it were 2x slower there) or, from
``IID_SPARSE_MIN_ROWS`` rows, i.i.d. (1.5x to 1.8x faster than the tree variant at n = 4000 to
8000, JV included); integers only where square and spanning more than n values (the classical
variant's integers and rectangular ones were faster without it: docs/benchmarks.md, "Integer
matrices on the sparse engine"); all from ``SPARSE_MIN_ROWS`` rows: see docs/benchmarks.md, "The
sparse method on a given matrix" (:func:`for_the_sparse_engine`).
"""

from __future__ import annotations

from ..progress import Progress
from ..result import Stats
from ..timing import PhaseTimer
from .classical import run_classical
from .hybrid import run_hybrid
from .phases import initialise
from .scaling import solve_scaling
from .tree import run_tree

#: hand over to ε-scaling only where JV initialisation left more than this fraction of the rows
#: free (the hybrid: more than HYBRID_SCALING_FREE_FRACTION), ...
SCALING_FREE_FRACTION = 0.1
#: The hybrid's searches augment many paths at once on i.i.d. integer costs, so :func:`stalled`
#: alone keeps those with it, and the JV gate only has to tell uniform floats (one path per search
#: too, but JV leaves under 4% free and the hybrid is as fast) from points in 3-D, whose share
#: falls below 10% with n (the traces tests/hungarian/test_scaling.py replays:
#: benchmarks/results/hybrid-handover-trace-h200-*).
HYBRID_SCALING_FREE_FRACTION = 0.05
#: what :func:`solve_auto` returns where the sparse-core engine is to solve the matrix instead
SPARSE = "sparse"
#: ... more than this fraction is still free, ...
SCALING_MIN_FREE_FRACTION = 0.02
#: ... and the last SCALING_WINDOW iterations augmented fewer than one in this many of them
#: together (the tree variant's one-root iterations augment one path each). Uniform costs augment
#: tens to hundreds of paths in every window of four iterations; a window of two (one path and a
#: dual update) would hand them over.
SCALING_PATH_SHARE = 16
SCALING_WINDOW = 4
#: the CPU's hand-over at once starts the ε-phases from JV's prices, unless JV left more than
#: this share of the rows free (geometric 10% to 21%, 3-D 11% to 13%, disjoint clouds 76% to 93%,
#: Machol-Wien 98% and more, which the greedy by regret solves without a search); a square float
#: matrix at most this share free goes to the sparse-core engine instead
GREEDY_START_FREE_FRACTION = 0.5
#: the sparse-core engine takes no matrix of fewer rows: below, the others take a fraction of a
#: second (shifted clouds 1000 x 1130 on 2 cores: the tree variant 0.54 s, the sparse engine
#: 0.12 s), and a first call would compile its kernels too (9 s more with an empty kernel cache)
SPARSE_MIN_ROWS = 2000
#: a square float matrix of at least this many rows that JV leaves with free rows but not
#: structured goes to the sparse-core engine on the CPU (i.i.d. floats on 2 cores, JV's time
#: included: even with the tree variant at n = 2500 and 3000, 0.29 s against 0.44 s at 4000,
#: 1.07 s against 1.87 s at 8000; docs/benchmarks.md, "The sparse method on a given matrix")
IID_SPARSE_MIN_ROWS = 4000


def stalled(window: list[int], n_free: int, n_rows: int, searching: bool) -> bool:
    """Whether the last iterations' paths (``window``, oldest first; 0: an iteration that ended in a
    dual update) say structured costs: the window is full, more than ``SCALING_MIN_FREE_FRACTION``
    of the rows are free, the window augmented fewer than one in ``SCALING_PATH_SHARE`` of them,
    and, unless the variant is ``searching`` (the tree variant, whose iterations fold their dual
    updates into the search), the window holds an iteration that followed a dual update. That last
    clause is what a dual update tells apart: on uniform costs it opens many zero-slack edges and
    the next iteration augments hundreds of paths; on structured costs a handful (uniform f = 1,
    n = 20000 ran [990, 169, 21, 1, 1] and a dual update, then about 400)."""
    if len(window) < SCALING_WINDOW or n_free <= SCALING_MIN_FREE_FRACTION * n_rows:
        return False
    followed_an_update = 0 in window[:-1]
    return (searching or followed_an_update) and sum(window) * SCALING_PATH_SHARE < n_free


def jv_says_structured(jv_free: int, n_rows: int, variant: str) -> bool:
    """Whether JV initialisation left enough rows free (``jv_free`` of ``n_rows``) for ``variant``
    to hand the matrix over once its progress stalls."""
    gate = HYBRID_SCALING_FREE_FRACTION if variant == "hybrid" else SCALING_FREE_FRACTION
    return jv_free > gate * n_rows


def jv_left_most_free(jv_free: int, n_rows: int) -> bool:
    """Whether JV left more than ``GREEDY_START_FREE_FRACTION`` of the rows free."""
    return jv_free > GREEDY_START_FREE_FRACTION * n_rows


def for_the_sparse_engine(jv_free: int, n_rows: int, square: bool, structured: bool, device: str,
                          integer: bool = False, few_values: bool = False) -> bool:
    """Whether a matrix of at least ``SPARSE_MIN_ROWS`` rows that JV left with ``jv_free`` of
    its ``n_rows`` rows free goes to the sparse-core engine: a rectangular float one JV says is
    structured; on the CPU, a square one that JV left at most ``GREEDY_START_FREE_FRACTION`` free,
    if structured or of at least ``IID_SPARSE_MIN_ROWS`` rows with any row free (i.i.d. costs,
    whose few free rows cost the tree variant a long search each), unless it is ``integer``
    with ``few_values`` (at most n: the classical variant's)."""
    if n_rows < SPARSE_MIN_ROWS or (integer and few_values):
        return False
    if not square:
        return structured and not integer
    if device != "cpu" or jv_left_most_free(jv_free, n_rows):
        return False
    return structured or (jv_free > 0 and n_rows >= IID_SPARSE_MIN_ROWS)


def solve_auto(backend, state, stats: Stats, variant: str, roots: str = "auto", progress=None,
               sparse: bool = False, integer: bool = False) -> str | None:
    """JV initialisation, then ``variant`` ("classical", "tree" or "hybrid"), or ε-scaling. With
    ``sparse`` (a caller that can run the sparse-core engine on the matrix; ``integer``: an
    integer one), a matrix for that engine (see the module docstring) is left unsolved and
    :data:`SPARSE` returned; else None."""
    phase = PhaseTimer(stats, backend, state)
    initialise(backend, state, "jv", stats, phase)
    stats.phase_counts["jv_free_rows"] = state.n_rows - stats.initial_assignments
    square = state.n_rows == state.n_cols
    structured = jv_says_structured(stats.phase_counts["jv_free_rows"], state.n_rows, variant)
    if sparse and for_the_sparse_engine(stats.phase_counts["jv_free_rows"], state.n_rows, square, structured,
                                        backend.device, integer, few_values=variant == "classical"):
        return SPARSE

    if square and structured and backend.device == "cpu":
        stats.phase_counts["handover_iteration"] = 0
        greedy = jv_left_most_free(stats.phase_counts["jv_free_rows"], state.n_rows)
        solve_scaling(backend, state, stats, progress, roots, "greedy" if greedy else "jv")
        return None

    seen = [0, 0]  # iterations and augmentations at the previous check
    recent: list[int] = []  # paths augmented by each iteration (0: it ended in a dual update)

    def hand_over(n_free: int) -> bool:
        """The policy asked at every optimality check: hand over to ε-scaling now?"""
        iterations, augmented = stats.iterations, len(stats.paths_per_iteration)
        if iterations == seen[0]:
            return False  # no iteration since the last check (JV initialisation just ended)
        recent.append(stats.paths_per_iteration[-1] if augmented > seen[1] else 0)
        seen[:] = iterations, augmented
        searching = variant == "tree" or "switch_iteration" in stats.phase_counts  # the hybrid's tree part
        return square and structured and stalled(recent[-SCALING_WINDOW:], n_free, state.n_rows, searching)

    stats.method = variant
    report = Progress(progress, state.n_rows, policy=hand_over)
    if variant == "classical":
        run_classical(backend, state, stats, phase, report)
    elif variant == "hybrid":
        run_hybrid(backend, state, stats, phase, report)
    else:
        run_tree(backend, state, stats, phase, report, roots)
    if report.stopped:
        stats.phase_counts["handover_iteration"] = stats.iterations
        report.policy = None  # asked once: ε-scaling's phases share what is left of the bar
        solve_scaling(backend, state, stats, report, roots)
        return None
    report(0, final=True)
    return None
