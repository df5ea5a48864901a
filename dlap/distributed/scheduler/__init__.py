"""The scheduler side of the Dask engine: the registry of running solves (a scheduler plugin) and
its dashboard page."""
