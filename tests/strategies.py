"""Hypothesis strategies shared by the property tests: what breaks LAP solvers (ties, negative
costs, huge integer ranges, floats from 1e-12 to 1e12, floats that differ only in the 9th digit,
+inf forbidden pairs, rectangular shapes, the four solver dtypes), and the check every
configuration runs on them against scipy."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from .helpers import assert_same_optimum

EXAMPLES = 150
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])

shapes = st.tuples(st.integers(1, 9), st.integers(1, 9))


def matrices(dtype, elements):
    return shapes.flatmap(lambda shape: arrays(dtype, shape, elements=elements))


ties = matrices(np.int64, st.integers(-3, 3))
huge_ints = matrices(np.int64, st.integers(-(10**12), 10**12))
int32s = matrices(np.int32, st.integers(-(2**31), 2**31 - 1))
wide_floats = matrices(
    np.float64,
    st.one_of(
        st.floats(1e-12, 1e12),
        st.floats(-1e12, -1e-12),
        st.just(0.0),
    ),
)
float32s = matrices(np.float32, st.floats(-1e6, 1e6, width=32))


@st.composite
def ninth_digit(draw):
    """Costs 1 + k * 1e-9: the optimum is decided by the 9th significant digit."""
    shape = draw(shapes)
    k = draw(arrays(np.int64, shape, elements=st.integers(0, 20)))
    return 1.0 + k * 1e-9


@st.composite
def forbidden(draw):
    """Integer-valued float costs with +inf forbidden pairs; many are infeasible."""
    shape = draw(shapes)
    cost = draw(arrays(np.float64, shape, elements=st.integers(-50, 50).map(float)))
    mask = draw(arrays(np.bool_, shape, elements=st.booleans()))
    cost[mask & (np.arange(cost.size).reshape(shape) % 3 != 0)] = np.inf
    return cost


STRATEGIES = {
    "ties": ties,
    "huge-ints": huge_ints,
    "int32": int32s,
    "wide-floats": wide_floats,
    "float32": float32s,
    "ninth-digit": ninth_digit(),
    "forbidden": forbidden(),
}


def check_strategy(strategy: str, options: dict, settings_) -> None:
    """Hypothesis: ``options`` agree with scipy on ``strategy``'s matrices, maximised or not,
    transposed or not (shared by the CPU and the GPU tests)."""

    @settings_
    @given(cost=STRATEGIES[strategy], maximize=st.booleans(), transpose=st.booleans())
    def check(cost, maximize, transpose):
        if maximize and strategy == "forbidden":
            cost = -cost  # keep +inf forbidden pairs forbidden: maximising forbids -inf
        assert_same_optimum(cost.T if transpose else cost, maximize, **options)

    check()
