# dlap's image: its Python environment with every extra, and the CPU kernels compiled into its
# Numba cache. Built by docker-compose.yml (docker compose up --build).
FROM nvidia/cuda:12.6.3-runtime-ubuntu24.04
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
# for UCX (docker-compose.yml says how to start it): ucxx waits with a progress thread and Python futures, not by
# spinning each process's event loop (dlap.distributed.cluster.UCX_ENVIRONMENT)
ENV UCXPY_PROGRESS_MODE=thread UCXPY_ENABLE_PYTHON_FUTURE=1
COPY . /src
RUN pip install --no-cache-dir "/src[gpu,distributed,cuda,ucx,notebook]"
# the image compiles every CPU kernel into its Numba cache; the CUDA ones need a GPU:
# `docker compose run --rm check`
RUN dlap warmup --device cpu --quiet
