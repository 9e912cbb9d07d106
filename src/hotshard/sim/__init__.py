"""Simulation: a queueing model of a sharded service, in virtual time.

``hotshard.sim.queues`` serves one shard's requests first-in first-out on one or more workers,
optionally coalescing identical in-flight reads; ``system`` runs a whole service on them,
``detection`` replays serve's hot-key rule over its stream, ``calibrate`` fits the model to a
measured run. This package module itself imports nothing (no numpy, no numba), so the command
line can name its choices without loading the kernels.
"""

__all__: list[str] = []
