"""Simulation: a queueing model of a sharded service, in virtual time.

``hotshard.sim.queues`` serves one shard's requests first-in first-out on one or more workers,
optionally coalescing identical in-flight reads. This package module only names things (no
numpy, no numba), so the command line can list choices without loading the kernels.
"""

__all__: list[str] = []
