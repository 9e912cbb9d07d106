"""Workloads: key samplers, synthetic chat messages, scenarios (rates, events).

Only names live here (no numpy), so the command line can offer choices without loading the
samplers.
"""

# Output formats of `generate` (hotshard.workload.messages writes them): whole messages as
# Parquet, CSV or JSON lines; or only their keys, in the same order, for other load tools (a
# JSON array for k6's SharedArray, a one-column CSV for JMeter's and Gatling's feeders).
FORMATS = ("parquet", "csv", "jsonl", "k6", "csv-feeder")
# When neither the profile nor the user gives a rate: the incident's production rate.
DEFAULT_RATE = 3000.0
# Distinct synthetic user IDs in generated messages.
DEFAULT_USERS = 10_000_000
# Tail models a profile sampler draws from.
TAIL_MODES = ("power_law", "histogram")

__all__ = ["DEFAULT_RATE", "DEFAULT_USERS", "FORMATS", "TAIL_MODES"]
