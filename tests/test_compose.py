"""docker-compose.yml is valid and wires scheduler, GPU workers and a client (CI has no Docker)."""

import shutil
import subprocess
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

COMPOSE = Path(__file__).resolve().parent.parent / "docker-compose.yml"


def test_compose_services():
    spec = yaml.safe_load(COMPOSE.read_text())
    services = spec["services"]
    assert {"scheduler", "worker", "notebook"} <= set(services)
    assert "8787:8787" in services["scheduler"]["ports"]  # the dashboard
    worker = services["worker"]
    assert worker["command"].startswith("dask-cuda-worker tcp://scheduler:8786")
    # the options dlap's own local clusters use: slabs are never spilled off the GPU
    from dlap.distributed.cluster import GPU_WORKER_OPTIONS

    assert GPU_WORKER_OPTIONS == {"device_memory_limit": 0, "memory_limit": 0}
    assert "--device-memory-limit 0" in worker["command"] and "--memory-limit 0" in worker["command"]
    assert worker["ipc"] == "host"
    assert worker["volumes"] == services["notebook"]["volumes"]  # workers read the client's Zarr stores
    gpus = worker["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpus["driver"] == "nvidia" and "gpu" in gpus["capabilities"]
    assert worker["environment"]["NCCL_NVLS_ENABLE"] == "0"
    notebook = services["notebook"]
    assert notebook["environment"]["DASK_SCHEDULER_ADDRESS"] == "tcp://scheduler:8786"
    assert notebook["environment"]["DLAP_DATA"] == "/data" and "./data:/data" in notebook["volumes"]
    for service in services.values():
        assert service["image"] == "dlap:latest" and service["build"] == {"context": ".", "dockerfile": "Dockerfile"}


def test_the_image_installs_the_extras_and_checks_the_kernels_compile():
    spec = yaml.safe_load(COMPOSE.read_text())
    dockerfile = (COMPOSE.parent / "Dockerfile").read_text()
    assert '"/src[gpu,distributed,cuda,ucx,notebook]"' in dockerfile
    assert "RUN dlap warmup --device cpu" in dockerfile  # every CPU kernel, at build time
    check = spec["services"]["check"]  # the CUDA kernels, on a GPU
    assert check["command"].startswith("dlap demo") and check["profiles"] == ["check"]
    assert check["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


@pytest.mark.skipif(not (shutil.which("docker-compose") or shutil.which("docker")), reason="needs docker-compose")
def test_compose_reads_the_file():
    """``docker-compose config`` (Debian's package, which .ci/run installs) or ``docker compose
    config`` accepts the file: its schema, the anchors, the profiles, the GPU reservations."""
    command = ["docker-compose"] if shutil.which("docker-compose") else ["docker", "compose"]
    run = subprocess.run([*command, "-f", str(COMPOSE), "config", "--quiet"], capture_output=True, text=True,
                         timeout=120)
    if command == ["docker", "compose"] and "unknown" in run.stderr:
        pytest.skip("docker has no compose plugin")
    assert run.returncode == 0, run.stderr


def test_the_example_generates_on_the_workers():
    """The file's example solve has its matrix made by the workers (a family of
    generate.WORKER_FAMILIES), not on the client and shipped."""
    from dlap.generate import WORKER_FAMILIES

    (example,) = [line for line in COMPOSE.read_text().splitlines() if "dlap solve --scheduler" in line]
    family = example.split("--family", 1)[1].split()[0]
    assert family in WORKER_FAMILIES, example


def test_the_build_context_leaves_out_the_environment_and_history():
    ignored = (COMPOSE.parent / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".whl", "data"} <= set(ignored)


def test_the_distributed_notebook_joins_the_compose_scheduler():
    import json

    notebook = json.loads((COMPOSE.parent / "notebooks" / "distributed.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "code")
    assert "os.environ.get('DASK_SCHEDULER_ADDRESS')" in code and "os.environ.get('DLAP_DATA')" in code


def test_packaging_metadata():
    """One version (dlap.__version__), a license file, type information, the extras a user needs."""
    import tomllib

    import dlap

    root = COMPOSE.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())
    assert project["project"]["dynamic"] == ["version"] and "version" not in project["project"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "dlap.__version__"}
    assert dlap.__version__.count(".") == 2
    assert "BSD 3-Clause" in (root / "LICENSE").read_text() and project["project"]["license"] == "BSD-3-Clause"
    assert (root / "dlap" / "py.typed").exists() and "py.typed" in project["tool"]["setuptools"]["package-data"]["dlap"]
    extras = project["project"]["optional-dependencies"]
    assert any(d.startswith("matplotlib") for d in extras["plot"])
    assert any(d.startswith("bokeh") for d in extras["distributed"])
    assert any(d.startswith("ipywidgets") for d in extras["notebook"])
    assert any(d.startswith("dask-cuda[cu12]") for d in extras["cuda"])
