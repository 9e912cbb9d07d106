"""Workloads: key samplers, synthetic chat messages, scenarios (rates, events).

Only names live here (no numpy), so the command line can offer choices without loading the
samplers.
"""

# Output formats of `generate` (hotshard.workload.messages writes them).
FORMATS = ("parquet", "csv", "jsonl")
# Tail models a profile sampler draws from.
TAIL_MODES = ("power_law", "histogram")

__all__ = ["FORMATS", "TAIL_MODES"]
