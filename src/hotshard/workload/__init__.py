"""Workloads: key samplers, synthetic chat messages, scenarios (rates, events).

Only names live here (no numpy), so the command line can offer choices without loading the
samplers.
"""

# Output formats of `generate` (hotshard.workload.messages writes them).
FORMATS = ("parquet", "csv", "jsonl")
# When neither the profile nor the user gives a rate: the incident's production rate.
DEFAULT_RATE = 3000.0
# Distinct synthetic user IDs in generated messages.
DEFAULT_USERS = 10_000_000
# Tail models a profile sampler draws from.
TAIL_MODES = ("power_law", "histogram")

__all__ = ["DEFAULT_RATE", "DEFAULT_USERS", "FORMATS", "TAIL_MODES"]
