"""A Redis Cluster's slot map, read live: which master owns each of the 16384 slots, and each
master's replicas (CLUSTER INFO and CLUSTER SLOTS from one node, bounded as a whole).

Nodes are numbered by (host, port), so node 0 of a local cluster is its first port, as
``predict --slots-from`` and ``observe redis-cluster://`` number them.
"""

from __future__ import annotations

from typing import Any

from hotshard.cluster.resp import (
    DEFAULT_TIMEOUT,
    NodeUnreachable,
    RedisURL,
    aask_all,
    ask_all,
    node_key,
    parse_url,
)
from hotshard.errors import InputError

__all__ = ["REDIS_SLOTS", "TOPOLOGY", "atopology", "live_slot_map", "replica_map",
           "replicas_of", "slot_map_of", "topology"]

REDIS_SLOTS = 16384


TOPOLOGY = (("CLUSTER", "INFO"), ("CLUSTER", "SLOTS"))


def topology(url: str | RedisURL, *, timeout: float = DEFAULT_TIMEOUT
             ) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """CLUSTER SLOTS as sorted (first, last, master address, replica addresses), from one
    node; connecting and both exchanges (CLUSTER INFO, CLUSTER SLOTS) are bounded as a whole
    by ``timeout``, whatever the node does.

    Raises
    ------
    InputError
        The node is unreachable, silent, too slow or not Redis (NodeUnreachable), needs
        another password, is not a cluster node, or the cluster is not ``cluster_state:ok``.
    """
    url = parse_url(url)
    return _topology_rows(url, *ask_all(url, TOPOLOGY, timeout=timeout))


async def atopology(url: str | RedisURL, *, timeout: float = DEFAULT_TIMEOUT
                    ) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """``topology`` on the running event loop (no thread), bounded the same way."""
    url = parse_url(url)
    return _topology_rows(url, *await aask_all(url, TOPOLOGY, timeout=timeout))


def _topology_rows(url: RedisURL, info: Any, rows: Any
                   ) -> list[tuple[int, int, str, tuple[str, ...]]]:
    text = str(info)
    if "cluster_state:ok" not in text:
        state = next((ln for ln in text.splitlines() if ln.startswith("cluster_state")), "?")
        raise InputError(f"the cluster at {url.address} is not ok ({state.strip()}): wait "
                         "for it or fix it before measuring (`hotshard cluster status` names "
                         "the failing nodes)")
    host = url.host
    out = []
    try:
        for row in rows:  # [first, last, [ip, port, id, ...], [replica ip, port, ...]...]
            replicas = tuple(f"{r[0] or host}:{int(r[1])}" for r in row[3:])
            out.append((int(row[0]), int(row[1]), f"{row[2][0] or host}:{int(row[2][1])}",
                        replicas))
    except (TypeError, ValueError, IndexError):
        raise NodeUnreachable(f"{url.address} answered CLUSTER SLOTS with something else "
                              "than a slot map: not a Redis Cluster node") from None
    return sorted(out)


def replicas_of(rows: list[tuple[int, int, str, tuple[str, ...]]]
                ) -> dict[str, tuple[str, ...]]:
    """Each master's replica addresses, from ``topology`` rows."""
    out: dict[str, tuple[str, ...]] = {}
    for _, _, master, replicas in rows:
        out[master] = tuple(sorted(set(out.get(master, ())) | set(replicas), key=node_key))
    return out


def slot_map_of(rows: list[tuple[int, int, str, tuple[str, ...]]], where: str = "the cluster"):
    """(slot -> node index array, master addresses in index order) from ``topology`` rows.

    Nodes are numbered by (host, port), so node 0 of a local cluster is its first port.
    """
    import numpy as np

    nodes = sorted({r[2] for r in rows}, key=node_key)
    slot_node = np.full(REDIS_SLOTS, -1, dtype=np.int64)
    for first, last, address, _ in rows:
        slot_node[first:last + 1] = nodes.index(address)
    if (slot_node < 0).any():
        raise InputError(f"{where} leaves {(slot_node < 0).sum()} slots unassigned")
    return slot_node, nodes


def replica_map(url: str | RedisURL, *, timeout: float = DEFAULT_TIMEOUT
                ) -> dict[str, tuple[str, ...]]:
    """Each master's replica addresses, from a live CLUSTER SLOTS."""
    return replicas_of(topology(url, timeout=timeout))


def live_slot_map(url: str | RedisURL, *, timeout: float = DEFAULT_TIMEOUT):
    """(slot -> node index array, node addresses in index order) from a live CLUSTER SLOTS,
    fetched within ``timeout`` seconds in all (see ``topology``).

    Nodes are numbered by (host, port), so node 0 of a local cluster is its first port.
    """
    where = f"the cluster at {parse_url(url).address}"
    return slot_map_of(topology(url, timeout=timeout), where)
