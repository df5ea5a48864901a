"""docker-compose.yml is valid and wires scheduler, GPU workers and a client (CI has no Docker)."""

from pathlib import Path

import yaml

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
    assert services["notebook"]["environment"]["DASK_SCHEDULER_ADDRESS"] == "tcp://scheduler:8786"
    for service in services.values():
        assert service["image"] == "dlap:latest" and "dockerfile_inline" in service["build"]
