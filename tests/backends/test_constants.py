"""The constants the Python side and the CUDA kernels share are written once (dlap/backends/
constants.py) and reach the kernels as a generated preamble: no kernel source defines them again,
and a kernel compiled with the preamble reads the values Python has."""

import re
from importlib import resources

import pytest

from dlap.backends import constants


def _sources() -> dict[str, str]:
    folder = resources.files("dlap.backends") / "gpu" / "cuda"
    return {p.name: p.read_text() for p in folder.iterdir() if p.name.endswith((".cu", ".cuh"))}


def test_no_kernel_source_defines_a_shared_constant_again():
    names = [*constants.CONTROL_SLOTS, *constants.ROW_PLANS, *constants.TUNABLES]
    for name, source in _sources().items():
        for constant in names:
            assert not re.search(rf"#define\s+{constant}\b|\b{constant}\s*=", source), (name, constant)


def test_the_preamble_carries_every_constant():
    preamble = constants.cuda_preamble()
    for table in (constants.CONTROL_SLOTS, constants.ROW_PLANS, constants.TUNABLES):
        for name, value in table.items():
            assert re.search(rf"\b{name}\s*(=|\s)\s*{value}\b", preamble), name
    assert len(set(constants.CONTROL_SLOTS.values())) == len(constants.CONTROL_SLOTS)
    assert max(v for k, v in constants.CONTROL_SLOTS.items() if k != "CTL_SIZE") < constants.CTL_SIZE


@pytest.mark.gpu
def test_a_kernel_reads_the_values_python_has():
    import cupy

    from dlap.backends.gpu.kernels import common_source

    names = [*constants.CONTROL_SLOTS, *constants.ROW_PLANS, *constants.TUNABLES]
    body = "".join(f"out[{k}] = {name};\n" for k, name in enumerate(names))
    module = cupy.RawModule(code=common_source() + 'extern "C" __global__ void values(long long* out) {\n' + body + "}")
    out = cupy.zeros(len(names), dtype=cupy.int64)
    module.get_function("values")((1,), (1,), (out,))
    expected = {**constants.CONTROL_SLOTS, **constants.ROW_PLANS, **constants.TUNABLES}
    assert dict(zip(names, out.get().tolist(), strict=True)) == expected
