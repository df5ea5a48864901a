"""Backends: one module per device implementing the phase primitives of :mod:`.base`."""
