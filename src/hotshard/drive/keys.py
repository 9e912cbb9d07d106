"""Which key (and read or write) each arrival carries: a function of the seed and its index.

Keys come from the samplers built earlier (a profile, or a classic spec such as ``uniform:N``
or ``zipf:0.99:1e6``). They are drawn in the schedule's blocks, block b from
``default_rng([seed, STREAM, b])``, so arrival i's key does not depend on how many processes
share the run. With a profile, the operation is chosen given the key (its exact mix for head
keys, the fitted mix for the tail) and payload sizes follow the profile's size quantiles;
``read_ratio`` overrides the mix with a flat share.

A profile with a locality section sends its keys in production's order instead
(``order="locality"``, the default when the section is there): the whole run's key positions
are laid out once per process (``workload.locality_order``, a function of the seed and the
run's expected length only), and arrival i takes position ``i mod length``: the order is built
on a circle, so a run that outlasts it (Poisson's count above its mean, or a run longer than
``MAX_ORDER``) goes round again with no seam.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard.drive.schedule import BLOCK
from hotshard.errors import HotshardError, InputError
from hotshard.workload.messages import DEFAULT_SIZE_QUANTILES, message_sizes

__all__ = ["KeySource", "load_keys"]

_KEY_STREAM = 0xC0DE
_EVENT_STREAM = 0xE7E  # the uniforms that decide which arrivals a big event takes
# Key orders a profile can be sent in (as generate's --order): auto is locality when the
# profile has a locality section.
ORDERS = ("auto", "locality", "irm")
# Longest locality order one driver process lays out (8 bytes an arrival in memory, ~3 s to
# build at ~10 M/s); a longer run goes round it again.
MAX_ORDER = 40_000_000
_OP_STREAM = 0x0B5
DEFAULT_READ_RATIO = 0.9  # a chat-history service: reads of recent history dominate


@dataclass
class KeySource:
    """Keys, read/write flags and body sizes for arrival indices.

    Build with ``load_keys``; ``batch(indices)`` is cheap when indices fall in few blocks.
    """

    spec: str
    generator: str                       # observations' key_generator: profile, uniform...
    seed: int
    read_ratio: float | None             # None: the profile's mix per key
    size_quantiles: dict[str, float]
    _sampler: Any = None
    _profile_ops: tuple | None = None    # (read column, head cumulative, tail cumulative)
    order: str = "irm"                   # what is sent: locality or irm (independent draws)
    _positions: NDArray[np.int64] | None = None  # the locality order, arrival i -> i mod len
    _make_positions: Any = None          # builds _positions on first use
    # big events (workload.timing.HotEvent): during [start, end) s into the run, ``share``
    # of the arrivals go to ``key``, by a uniform of each arrival's own (its index's)
    hot_events: tuple = ()
    _cache: dict[int, tuple[list[str], NDArray[np.bool_], NDArray[np.int64]]] = field(
        default_factory=dict)

    def _block(self, block: int) -> tuple[list[str], NDArray[np.bool_], NDArray[np.int64]]:
        cached = self._cache.get(block)
        if cached is not None:
            return cached
        if self._make_positions is not None:
            if self._positions is None:
                self._positions = self._make_positions()
            length = self._positions.size
            draws = self._positions[(np.arange(BLOCK, dtype=np.int64) + block * BLOCK)
                                    % length]
        else:
            rng = np.random.default_rng([self.seed, _KEY_STREAM, block])
            draws = self._sampler.sample(BLOCK, rng)
        if hasattr(self._sampler, "ids"):
            ids = self._sampler.ids(draws)
            keys = [str(k) for k in (ids.tolist() if hasattr(ids, "tolist")
                                     else ids.to_pylist())]
        else:
            keys = [str(k) for k in draws.tolist()]
        op_rng = np.random.default_rng([self.seed, _OP_STREAM, block])
        u = op_rng.random(BLOCK)
        if self.read_ratio is not None or self._profile_ops is None:
            ratio = DEFAULT_READ_RATIO if self.read_ratio is None else self.read_ratio
            is_read = u < ratio
        else:
            read_col, head_cum, tail_cum = self._profile_ops
            head = self._sampler.head_size
            p_read = np.where(draws < head, head_cum[np.minimum(draws, head - 1), read_col]
                              - (head_cum[np.minimum(draws, head - 1), read_col - 1]
                                 if read_col else 0.0),
                              tail_cum[read_col] - (tail_cum[read_col - 1] if read_col else 0))
            is_read = u < p_read
        sizes = message_sizes(self.size_quantiles, op_rng.random(BLOCK))
        if len(self._cache) > 4:
            self._cache.clear()
        self._cache[block] = (keys, is_read, sizes)
        return self._cache[block]

    def batch(self, indices: NDArray[np.int64], times: NDArray[np.float64] | None = None
              ) -> tuple[list[str], NDArray[np.bool_], NDArray[np.int64]]:
        """(keys, is_read, body sizes) of the given global arrival indices, due at ``times``
        (seconds into the run; with ``hot_events``, an event's share of the arrivals in its
        window go to its key, whichever process sends them)."""
        indices = np.asarray(indices, dtype=np.int64)
        keys: list[str] = []
        reads = np.empty(indices.size, dtype=bool)
        sizes = np.empty(indices.size, dtype=np.int64)
        blocks = indices // BLOCK
        for block in np.unique(blocks):
            where = np.flatnonzero(blocks == block)
            block_keys, block_reads, block_sizes = self._block(int(block))
            offsets = indices[where] - int(block) * BLOCK
            reads[where] = block_reads[offsets]
            sizes[where] = block_sizes[offsets]
            keys.extend(block_keys[o] for o in offsets.tolist())
        if blocks.size and np.any(np.diff(blocks) < 0):
            raise InputError("indices must be in increasing order")
        if self.hot_events and times is not None and indices.size:
            keys = self._with_events(indices, np.asarray(times, dtype=np.float64), keys)
        return keys, reads, sizes

    def _with_events(self, indices: NDArray[np.int64], times: NDArray[np.float64],
                     keys: list[str]) -> list[str]:
        """``keys`` with the big events' arrivals given to their keys: arrival i in an
        event's window goes to it when its own uniform (seed, index) falls in the event's
        slice of [0, 1) (``HotEvent.apply``; events at once take disjoint slices)."""
        u = np.empty(indices.size)
        blocks = indices // BLOCK
        for block in np.unique(blocks):
            where = np.flatnonzero(blocks == block)
            draws = np.random.default_rng([self.seed, _EVENT_STREAM, int(block)]).random(BLOCK)
            u[where] = draws[indices[where] - int(block) * BLOCK]
        taken = np.zeros(indices.size)
        keys = list(keys)
        for event in self.hot_events:
            hit, taken = event.apply(times, u, taken)
            for j in np.flatnonzero(hit).tolist():
                keys[j] = event.key
        return keys

    def describe(self) -> dict[str, Any]:
        return {"keys": self.spec, "key_generator": self.generator, "seed": self.seed,
                "order": self.order,
                "read_ratio": self.read_ratio if self.read_ratio is not None else
                ("by key, from the profile" if self._profile_ops else DEFAULT_READ_RATIO)}


def load_keys(spec: str, *, seed: int = 0, read_ratio: float | None = None,
              order: str = "irm", events: float | None = None,
              shaped: bool = False) -> KeySource:
    """A key source from a profile path or a distribution spec (``uniform:N``, ``zipf:S:N``,
    ``hotspot:...``, ``latest:...``, ``scrambled_zipfian:N``).

    ``order``: ``locality`` sends a profile's keys in production's order (its locality
    section), laid out for a run of ``events`` expected arrivals (``shaped``: the run's
    arrivals follow the profile's per-minute shape, so the head keys' timelines are read
    against it); ``auto`` is locality when the profile has the section, else ``irm``
    (independent draws, the only order a distribution spec has).

    Raises
    ------
    InputError
        The spec is neither an existing profile file nor a known distribution,
        ``read_ratio`` is outside [0, 1], or ``order="locality"`` without a profile's
        locality section.
    """
    if order not in ORDERS:
        raise InputError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    if read_ratio is not None and not 0 <= read_ratio <= 1:
        raise InputError(f"read_ratio must be in [0, 1], got {read_ratio!r}")
    if not isinstance(spec, str) or not spec.strip():
        raise InputError("keys must be a profile file or a distribution such as uniform:1e6")
    if os.path.exists(spec) or spec.endswith(".json"):
        from hotshard.profile.document import Profile
        from hotshard.workload.profile_sampler import from_profile, op_mix_by_key

        profile = Profile.load(spec)
        sampler = from_profile(profile)
        ops = None
        if "read" in profile.operations and read_ratio is None:
            names, head_cum, tail_cum = op_mix_by_key(profile)
            ops = (names.index("read"), head_cum, tail_cum)
        sizes = (profile.sizes or {}).get("quantiles") if isinstance(profile.sizes, dict) \
            else None
        if order == "locality" and profile.locality is None:
            raise InputError(f"{spec}: ${{order}} locality needs a profile with a locality "
                             "section (hotshard profile of event rows writes one), or give "
                             "${order} irm")
        source = KeySource(spec, "profile", seed, read_ratio,
                           dict(sizes or DEFAULT_SIZE_QUANTILES), sampler, ops)
        length = int(min(max(round(events or BLOCK), 1), MAX_ORDER))
        from hotshard.workload.locality_order import fits_in_memory

        if order == "locality" and not fits_in_memory(length, sampler.n_keys):
            raise InputError(f"{spec}: {sampler.n_keys:,} keys are too many to order by "
                             "locality in one driver process: give ${order} irm")
        if (order != "irm" and profile.locality is not None
                and fits_in_memory(length, sampler.n_keys)):

            def make() -> NDArray[np.int64]:
                from hotshard.workload.locality_order import profile_positions

                return profile_positions(profile, sampler, length, seed, shaped=shaped)

            source.order = "locality"
            source._make_positions = make
        return source
    if order == "locality":
        raise InputError(f"${{order}} locality needs a profile's locality section; {spec!r} is "
                         "a distribution, whose draws are independent: give ${order} irm")
    from hotshard.workload.generate import parse_dist

    try:
        sampler = parse_dist(spec)
    except HotshardError as e:
        raise InputError(f"keys {spec!r}: not a profile file, and {e}") from None
    return KeySource(spec, spec.split(":")[0], seed, read_ratio,
                     dict(DEFAULT_SIZE_QUANTILES), sampler)
