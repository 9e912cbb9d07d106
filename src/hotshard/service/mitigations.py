"""The mitigations the reference service runs (``hotshard.mitigations``), within its limits.

Each is off by default and can be switched at start (``hotshard serve`` flags) or at run time
(``POST /admin/mitigations``, whose body uses the fields' own names). They apply to a given list
of channels, or (``channels: "hot"``) to the channels the hot-key sketch currently reports above
``hot_share`` of recent requests.
"""

from __future__ import annotations

from typing import Any

from hotshard.errors import InputError
from hotshard.mitigations import MAX_SERVICE_REPLICAS, MAX_SPLIT_BUCKETS, Mitigations
from hotshard.service.router import check_channel

__all__ = ["MAX_BUCKETS", "MAX_REPLICAS", "SERVICE_FIELDS", "for_service", "updated"]

# the fields the service runs (a split targets channels, not a top K; its cache is real)
SERVICE_FIELDS = ("split_into", "split_bucket_ms", "replicas", "cache_ttl_s", "coalesce",
                  "channels", "hot_share")
# the limits are the mitigations' own (one definition: ``hotshard.mitigations``)
MAX_REPLICAS = MAX_SERVICE_REPLICAS
MAX_BUCKETS = MAX_SPLIT_BUCKETS


def for_service(mitigations: Mitigations) -> Mitigations:
    """``mitigations``, once checked against what the service runs and its limits.

    Raises
    ------
    InputError
        A model-only field set (``split_keys``, ``cache_hit``, ``hot_keys``), more than
        ``MAX_BUCKETS`` buckets or ``MAX_REPLICAS`` read nodes, or a malformed channel id.
    """
    m = mitigations.only(SERVICE_FIELDS, "the reference service")
    if m.split_into > MAX_BUCKETS:
        raise InputError(f"split_into must be 1 (off) to {MAX_BUCKETS}, got {m.split_into}")
    if m.replicas > MAX_REPLICAS:
        raise InputError(f"replicas must be 1 (no replica) to {MAX_REPLICAS} (the primary and "
                         f"{MAX_REPLICAS - 1} replica workers), got {m.replicas}")
    for channel in m.channels or ():
        check_channel(channel)
    return m


def updated(mitigations: Mitigations, changes: dict[str, Any]) -> Mitigations:
    """``mitigations`` with ``changes`` (the body of ``POST /admin/mitigations``) applied."""
    return for_service(mitigations.updated(changes, names=SERVICE_FIELDS))
