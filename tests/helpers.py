"""Checks shared by the tests: scipy as the reference, and what every result must satisfy."""

import contextlib
import fractions
import math
import sys

import numpy as np
from numba.core import event
from numba.core.dispatcher import Dispatcher
from scipy.optimize import linear_sum_assignment as scipy_lsa

import dlap


def reference(cost, maximize=False):
    """scipy's objective, or the message of the ValueError it raises."""
    try:
        rows, cols = scipy_lsa(cost, maximize=maximize)
    except ValueError as e:
        return None, str(e)
    picked = np.asarray(cost)[rows, cols]
    return picked, None


def assert_valid(result, cost, maximize=False):
    """An assignment in scipy's format, avoiding forbidden pairs, with a closed optimality gap."""
    cost = np.asarray(cost)
    rows, cols = result.row_ind, result.col_ind
    assert rows.dtype == np.int64 and cols.dtype == np.int64
    assert len(rows) == len(cols) == min(cost.shape)
    assert np.all(np.diff(rows) > 0), "row_ind must be sorted and distinct"
    assert len(np.unique(cols)) == len(cols)
    assert np.isfinite(cost[rows, cols].astype(np.float64)).all(), "a forbidden pair was assigned"
    cert = result.verify()
    if not cert.optimal and not duals_beyond_floats(cost, cert):
        assert_unprovable_by_floats(result, cost, maximize, cert)


def duals_beyond_floats(cost, cert) -> bool:
    """Costs beyond 2**1022 leave float64 no room for duals, which can need three times the
    largest cost: the certificate then says the duals are not finite (and nothing else)."""
    finite = np.abs(np.asarray(cost, dtype=np.float64))
    large = finite[np.isfinite(finite)].max(initial=0.0) > 2.0**1022
    return large and all("not all finite" in p for p in cert.problems)


def assert_unprovable_by_floats(result, cost, maximize, cert):
    """A float answer the certificate does not prove: only where float64 cannot (its gap to a
    bound it computes exactly is above rtol of the costs summed, but within the resolution of
    the duals beside the matrix's largest entries), and then the answer is the exact optimum to
    that resolution (found where costs of 1e-12 sit beside entries of 8192: duals whose ulp is
    1.8e-12 cannot express the optimum's)."""
    assert np.asarray(cost).dtype.kind == "f", cert
    resolution = float_resolution(cost)
    assert cert.gap <= resolution, cert
    exact = exact_optimum(cost, maximize)
    mine = np.asarray(cost, dtype=np.float64)[result.row_ind, result.col_ind]
    assert within_resolution(exact_total(mine), exact, cost), (cert, exact)


def within_resolution(total: float, exact: float, cost) -> bool:
    """Whether ``total`` is the ``exact`` optimum to what float64 duals beside ``cost``'s largest
    entry can resolve (:func:`float_resolution`), each total rounded once (an ulp of theirs)."""
    if total == exact:
        return True
    return abs(total - exact) <= float_resolution(cost) + float(np.spacing(max(abs(total), abs(exact))))


def float_resolution(cost) -> float:
    """What float64 duals can resolve beside ``cost``'s largest finite entry, summed over the rows."""
    finite = np.abs(np.asarray(cost, dtype=np.float64))
    with np.errstate(over="ignore"):
        return min(np.shape(cost)) * float(np.spacing(finite[np.isfinite(finite)].max(initial=0.0)))


def assert_scipy_objective(result, cost, picked, maximize=False):
    """``result``'s objective equals scipy's (the sum of ``picked``): exactly for integers. For
    floats scipy can be the one that is wrong: where they differ, the exact optimum decides."""
    if picked.dtype.kind != "f":
        assert result.objective == picked.sum().item()
        return
    expected = exact_total(picked)
    # scipy's sum rounds too: scale by the entries either solver added (scipy's 2e-12 against
    # dlap's exact -32768 + 32768 = 0 was found by hypothesis; dlap's own certificate
    # still has to prove its objective optimal)
    mine = np.asarray(cost)[result.row_ind, result.col_ind].astype(np.float64)
    if result.objective == expected:  # (also where both overflow float64)
        return
    scale = max(exact_total(np.abs(picked)), exact_total(np.abs(mine))) or 1.0
    # below the matrix dtype's smallest normal number the certificate grants what it grants a gap
    # (dlap.certificate: ``+ tiny``): found by hypothesis, float32 [[-2, -2, 0, 0], [-2, -2, 0,
    # 1e-45], [0, -2, 1, -2]] maximised, optimum 1.4e-45 (a subnormal) against dlap's 0, a choice
    # between entries 0 and 1e-45 whose rows also hold 2, beside which float64 duals cannot see it
    tiny = float(np.finfo(np.asarray(cost).dtype).tiny)
    if abs(result.objective - expected) <= 1e-9 * scale + tiny:
        return
    # scipy can be wrong where costs of 1e-9 sit beside 1e6 (c - u - v rounds them away; found by
    # hypothesis: scipy 1e-9, optimum 2e-9 when maximised): the exact optimum decides, to the
    # resolution of the duals: a row whose entries reach 8193 has duals whose ulp is 1.8e-12, so
    # reduced costs cannot tell 0 from 1e-12 there (found by hypothesis: [[8193, 0, 1e-12, 8193],
    # [8193, 1e-12, 1e-12, 8193], [1e-12, 1e-12, -8192, 1e-12]], optimum 2e-12; every dlap method
    # took 3e-12, certified with a gap of 1.8e-13; scipy's search order happened on 2e-12)
    exact = exact_optimum(cost, maximize)
    assert within_resolution(exact_total(mine), exact, cost), (result.objective, expected, exact)


def exact_optimum(cost, maximize):
    """The optimum over every assignment, correctly rounded (±inf where none avoids the forbidden
    entries: +inf when minimising, -inf when maximising): shortest augmenting paths (Kuhn-Munkres
    with potentials) in exact rational arithmetic, so no rounding decides between assignments."""
    cost = np.asarray(cost, dtype=np.float64)
    if cost.shape[0] > cost.shape[1]:
        cost = cost.T
    n, m = cost.shape
    sign = -1 if maximize else 1
    forbidden = -math.inf if maximize else math.inf
    assert not (np.isnan(cost) | (cost == -forbidden)).any(), "a NaN, or an infinity that is no forbidden pair"
    exact = [[None if x == forbidden else sign * fractions.Fraction(x) for x in row] for row in cost.tolist()]
    zero = fractions.Fraction(0)
    u, v = [zero] * (n + 1), [zero] * (m + 1)
    row4col, way = [0] * (m + 1), [0] * (m + 1)  # 1-based rows and columns; column 0 the root
    for i in range(1, n + 1):
        row4col[0], j0 = i, 0
        least, used = [math.inf] * (m + 1), [False] * (m + 1)
        while row4col[j0]:
            used[j0], i0 = True, row4col[j0]
            delta, j1 = math.inf, None
            for j in range(1, m + 1):
                if used[j]:
                    continue
                c = exact[i0 - 1][j - 1]
                if c is not None and c - u[i0] - v[j] < least[j]:
                    least[j], way[j] = c - u[i0] - v[j], j0
                if least[j] < delta:
                    delta, j1 = least[j], j
            if j1 is None:
                return sign * math.inf
            for j in range(m + 1):
                if used[j]:
                    u[row4col[j]] += delta
                    v[j] -= delta
                elif least[j] != math.inf:
                    least[j] -= delta
            j0 = j1
        while j0:
            row4col[j0], j0 = row4col[way[j0]], way[j0]
    total = sum((exact[row4col[j] - 1][j - 1] for j in range(1, m + 1) if row4col[j]), zero)
    try:
        return float(sign * total)
    except OverflowError:
        return math.inf if sign * total > 0 else -math.inf


def exact_total(values) -> float:
    """The sum of floats, correctly rounded, in exact rational arithmetic (``±inf`` beyond
    float64's range, or with an infinite term)."""
    values = [float(x) for x in values]
    if not all(math.isfinite(x) for x in values):
        return math.fsum(x for x in values if not math.isfinite(x))  # (the finite ones may overflow)
    total = sum((fractions.Fraction(x) for x in values), fractions.Fraction(0))
    try:
        return float(total)
    except OverflowError:
        return math.inf if total > 0 else -math.inf


def assert_nan_slab_refused(solve, cost):
    """A NaN in one rank's slab (``cost[-1, 3]``): ``solve(cost, method)`` raises scipy's
    message within 30 s for both variants. The entry is then repaired for the caller's next solve."""
    import time

    import pytest

    cost[-1, 3] = np.nan
    for method in ("classical", "tree"):
        start = time.perf_counter()
        with pytest.raises(ValueError, match="matrix contains invalid numeric entries"):
            solve(cost, method)
        assert time.perf_counter() - start < 30
    cost[-1, 3] = 1.0


def received_bytes(client) -> int:
    """Bytes a Dask cluster's workers have fetched from one another so far (their transfer logs)."""
    return sum(client.run(lambda dask_worker: sum(t["total"] for t in dask_worker.transfer_incoming_log)).values())


def registry_rows(client):
    """The rows of the scheduler's solve registry, what the dashboard's dlap page shows (none
    before the first solve installs it)."""
    def rows(dask_scheduler):
        registry = dask_scheduler.plugins.get("dlap-solves")
        return registry.rows() if registry else []

    return client.run_on_scheduler(rows)


@contextlib.contextmanager
def client_process(script: str, *args, lease: str = "2"):
    """A Dask client running ``script`` (``python -c``, with ``args``) in a process of its own on a
    solve lease of ``lease`` seconds (dask.config dlap.solve-lease): the tests stop it with
    SIGSTOP. Yields the process; continued and killed on exit."""
    import os
    import signal
    import subprocess

    env = {**os.environ, "DASK_DLAP__SOLVE_LEASE": lease}
    child = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
    try:
        yield child
    finally:
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait()


def assert_told_its_solve_ended(child) -> None:
    """Continue the stopped client process ``child``: it fails, told that the scheduler ended its
    solve because its lease ran out."""
    import signal

    child.send_signal(signal.SIGCONT)
    _, err = child.communicate(timeout=120)
    assert child.returncode != 0 and b"was ended by the scheduler (lease expired" in err, err.decode()[-2000:]


def solve_in_background(solve):
    """Run ``solve(progress_callback)`` in a thread; return (thread, started event, outcome dict
    that gets "result" or "error"). For the tests that kill a worker mid-solve."""
    import threading

    started, outcome = threading.Event(), {}

    def run():
        try:
            outcome["result"] = solve(lambda update: started.set())
        except Exception as e:  # the test checks what it was
            outcome["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    return thread, started, outcome


def assert_same_optimum(cost, maximize=False, **options):
    """dlap and scipy both raise the same error, or reach the same objective."""
    picked, error = reference(cost, maximize)
    try:
        result = dlap.solve(cost, maximize=maximize, **options)
    except ValueError as e:
        assert error is not None, f"dlap raised {e!r}, scipy solved it"
        assert str(e) == error
        return None
    assert error is None, f"scipy raised {error!r}, dlap returned {result.objective}"
    assert_scipy_objective(result, cost, picked, maximize)
    assert_valid(result, cost, maximize)
    return result


class Compiles(event.Listener):
    """The Numba kernels compiled (not loaded from the cache) while it is registered."""

    def __init__(self):
        self.kernels = []

    def on_start(self, ev):
        self.kernels.append(ev.data["dispatcher"].py_func.__qualname__)

    def on_end(self, ev):
        pass


def kernel_versions() -> dict:
    """How many versions each of dlap's CPU kernels holds in this process (compiled, or loaded
    from the disk cache, which raises no compile event)."""
    found = {}
    for module in [m for name, m in sys.modules.items() if name.startswith("dlap.backends.cpu.")]:
        for kernel in vars(module).values():
            for twin in (kernel, getattr(kernel, "serial", None), getattr(kernel, "parallel", None)):
                if isinstance(twin, Dispatcher):
                    found[twin.py_func.__qualname__] = len(twin.signatures)
    return found
