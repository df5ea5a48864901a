"""Checked by mypy in tests/test_typing.py (not run): the public API's types, and the calls a
type checker must refuse (each marked ``# refused``)."""

from typing import Any, assert_type

import numpy as np
from numpy.typing import NDArray

import dlap

cost = np.zeros((3, 3))
assert_type(dlap.solve(cost, method="tree", device="cpu", init="jv", roots="one"), dlap.Assignment)
assert_type(dlap.solve(cost).objective, int | float)
rows, cols = dlap.linear_sum_assignment(cost, maximize=True, method="classical")
assert_type(rows, NDArray[np.int64])
assert_type(dlap.linear_sum_assignment([[1, 2], [3, 4]])[1], NDArray[np.int64])
assert_type(dlap.linear_sum_assignment(object())[0], Any)  # CuPy, PyTorch, DLPack: answered in kind
assert_type(dlap.solve_points(cost, cost, "cityblock", device="gpu"), dlap.Assignment)
assert_type(dlap.solve_batch(np.zeros((2, 3, 3)), device="cpu"), dlap.BatchResult)
assert_type(dlap.solve(cost).verify(), dlap.Certificate)

dlap.solve(cost, method="treee")  # refused
dlap.linear_sum_assignment(cost, device="tpu")  # refused
dlap.solve_points(cost, cost, "hamming")  # refused
dlap.solve_batch(np.zeros((2, 3, 3)), device="cuda")  # refused
