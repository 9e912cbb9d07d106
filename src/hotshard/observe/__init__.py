"""Production's evidence from where it lives, as ``hotshard.observations/1``.

One module per source, each a library function returning ``Observations`` with the fields its
source could fill, and a note (in ``extra.observe.notes``) for each field it could not:

- ``prometheus``: per-shard requests, CPU, errors and latency percentiles over a window, from
  the Prometheus HTTP API (presets for ``hotshard serve``, redis_exporter, node_exporter and
  any process's ``process_cpu_seconds_total``);
- ``redis_cluster``: every node's INFO at the start and the end of a window, the deltas as
  shards;
- ``k6``: k6's end-of-test summary (``--summary-export`` or ``handleSummary``'s data);
- ``locust``: Locust's ``--csv`` stats and history;
- ``dashboard_csv``: the CSV a Grafana panel's inspector exports (a time column, one column
  per series).

Nothing here invents a number: a field the source does not carry is left out, and the note
says what would fill it. Bad input raises ``InputError`` with one line naming what is missing.
This package sits beside ``drive`` and ``service`` (layer 4): it uses the observations model,
the RESP client and the duration parser, never the driver, the service or the CLI.
"""

from __future__ import annotations

__all__ = ["NOTES_KEY"]

NOTES_KEY = "observe"  # extra.observe: {"source", ..., "notes": [...]}
