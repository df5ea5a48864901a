"""The options of a solve, by name: one place for their values, their types and their check."""

from __future__ import annotations

from typing import Any, Literal, TypedDict, get_args

Method = Literal["auto", "classical", "tree", "hybrid", "scaling", "sparse", "dgs"]
Device = Literal["auto", "cpu", "gpu"]
Init = Literal["auto", "jv", "reduction"]
Roots = Literal["auto", "all", "one"]
Start = Literal["greedy", "random"]
Switching = Literal["parallel", "sequential"]


class SolveOptions(TypedDict, total=False):
    """:func:`dlap.solve`'s options, as :func:`dlap.linear_sum_assignment` passes them on."""

    method: Method
    device: Device
    init: Init
    roots: Roots
    progress: Any
    time_limit: float | None
    start: Start
    seed: Any
    switching: Switching


METHODS: tuple[str, ...] = get_args(Method)
DEVICES: tuple[str, ...] = get_args(Device)
INITS: tuple[str, ...] = get_args(Init)
ROOTS: tuple[str, ...] = get_args(Roots)
STARTS: tuple[str, ...] = get_args(Start)
SWITCHINGS: tuple[str, ...] = get_args(Switching)


def check_choice(name: str, value, allowed) -> None:
    """ValueError naming the option, its values and what was given, unless ``value`` is one of them."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")
