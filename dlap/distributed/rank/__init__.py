"""A rank of a Dask solve: the task each worker runs (engine), the Backend over its slab and a
communicator (backend, scaling), and the communicators (comm)."""
