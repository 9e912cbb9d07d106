"""A stream order with production's temporal locality: each key's references placed in time
by its popularity class's measured reuse times.

Independent draws (the IRM order) give every key its share of the stream but spread its
references evenly, so a cache sees far fewer short reuses than production gives it (web07
under an LRU of 1% of its keys: 0.22 against 0.39). Here every key gets a count first (head
keys their exact, scaled count; tail keys a multinomial draw over their class), then its
references are laid out as a renewal process: a uniform first instant, then gaps drawn from
the reuse-time histogram of the key's popularity class (``profile.locality``), on a circle of
the stream's length so the run has no edges. Sorting every reference by its instant gives the
order. The per-key counts are those of the draw, exactly; the reuse times follow production's
class by class, and with them the stack distances and the hit rates of LRU, FIFO and S3-FIFO
caches (checked against libCacheSim on real traces in the tests).

Why reuse times and not JEDI's future stack: conditioning gaps on the class keeps every
key's count exact with no retirement bookkeeping, the whole order is one compiled pass plus
one linear-time radix sort of 64-bit words (with the correction's sampled stack pass and
second draw, 11-14 M references a second on one core for 10 M references,
``benchmarks/bench_locality.py``), and on the traces tested
it lands as close to the real hit-rate curves as the stack prototype did.

A key whose class has no measured reuses (a scaled profile's rarer tail keys) gets its
references at uniform instants: the independent-reference model, the only thing known.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError
from hotshard.profile.locality import N_BINS, Locality, bin_bounds, class_of

__all__ = ["MAX_LOCALITY_EVENTS", "MAX_LOCALITY_KEYS", "even_counts", "fits_in_memory",
           "head_warp", "key_counts", "locality_positions", "locality_stream", "profile_order",
           "profile_positions"]

# A head key carrying at least this share of all requests follows its own timeline: its
# requests are split between the timeline's windows as production's were, and laid out by
# its class's reuse times inside each. Laid out over the whole run instead, by reuse times
# pooled over a class whose keys differ up to 2x in rate, a steady key's count swung 27-40%
# from window to window (the incident's profile, 3 M requests: ranks 1-11, every one),
# an artificial hot spell on its shard. A smaller key's swing is a small share of its
# shard's load, and its burst one of many (a block trace's blocks are each busy for
# minutes), which the class's reuse times carry; laying out every head key by its timeline
# was measured to cost cache fidelity (cloudphysics: FIFO at 20% of keys 0.259 against the
# trace's 0.287 at a 0.2% share; 0.5% keeps it)
TIMELINE_SHARE = 0.005
# A key list held whole in memory (drive, simulate) takes 8 bytes a reference: at most this
# many; generate streams the order (``locality_stream``) and has no such bound. Keys: the
# order's per-key state (~80 bytes a key, runs included).
MAX_LOCALITY_EVENTS = 400_000_000
MAX_LOCALITY_KEYS = 30_000_000
# The correction (``_corrected``) counts how a first stream turns reuse times into distances:
# the run itself up to this many references, else a run of this many of the same profile
# (reuse times beyond its length keep their measured weights)
CORRECTION_PREFIX = 100_000_000
# The correction counts the distances of about this many references of its first stream (an
# even sample of the references, so of P(distance | reuse time)): the step's ratios then have
# a relative noise under 1% wherever a bin holds 1/200 of a class, and a long stream's pass
# costs half as much (the distance is most of a stack step's work)
JOINT_COUNTED = 2_000_000


def even_counts(key_weight: NDArray[np.float64], sizes: NDArray[np.int64],
                events: int) -> list[tuple[int, int]]:
    """Per class: (base count of each key, how many keys get one more), as ``key_counts``
    splits the class's share."""
    from hotshard.workload.profile_sampler import largest_remainder

    class_events = largest_remainder(np.asarray(key_weight, dtype=np.float64) * sizes,
                                     int(events))
    return [divmod(int(total), int(size)) if size else (0, 0)
            for size, total in zip(sizes.tolist(), class_events.tolist(), strict=True)]


def key_counts(key_weight: NDArray[np.float64], sizes: NDArray[np.int64], events: int,
               rng: np.random.Generator) -> NDArray[np.int64]:
    """References per key position for a stream of ``events``: every class of equal-weight
    keys gets its share by largest remainder (exact for a head key, a class of one), split as
    evenly as integers allow over its keys (the remainder to keys drawn at random). Not a
    multinomial draw: a class of 12,000 keys seen once each would then lose a third of its
    keys to zero draws and give the rest twos, a smaller, more cacheable key set."""
    out = np.zeros(int(sizes.sum()), dtype=np.int64)
    start = 0
    for size, (base, extra) in zip(sizes.tolist(), even_counts(key_weight, sizes, events),
                                   strict=True):
        out[start:start + size] = base
        if extra:
            out[start + rng.choice(size, extra, replace=False)] += 1
        start += size
    return out


def fits_in_memory(events: int, n_keys: int) -> bool:
    """Whether a locality order of ``events`` references over ``n_keys`` keys is built."""
    return events <= MAX_LOCALITY_EVENTS and n_keys <= MAX_LOCALITY_KEYS


def _class_tables(locality: Locality) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """(class ids with measured reuses, their reuse-time CDFs over all bins)."""
    ids, rows = [], []
    for c in locality.classes:
        total = c.reuse_counts.sum()
        if total == 0:
            continue
        hist = np.zeros(N_BINS, dtype=np.float64)
        hist[c.reuse_bins] = c.reuse_counts
        ids.append(c.cls)
        rows.append(np.cumsum(hist) / total)
    if not rows:
        return np.zeros(0, dtype=np.int64), np.zeros((0, N_BINS))
    return np.asarray(ids, dtype=np.int64), np.vstack(rows)


def _rows_for(classes: NDArray[np.int64], measured: NDArray[np.int64]) -> NDArray[np.int64]:
    """Each key's CDF row: its class's, else the nearest measured class's; -1 when none."""
    if measured.size == 0:
        return np.full(classes.size, -1, dtype=np.int64)
    distance = np.abs(classes[:, None] - measured[None, :]) if classes.size < 4096 else None
    if distance is not None:
        return np.argmin(distance, axis=1).astype(np.int64)
    idx = np.clip(np.searchsorted(measured, classes), 0, measured.size - 1)
    lower = np.clip(idx - 1, 0, measured.size - 1)
    use_lower = np.abs(measured[lower] - classes) < np.abs(measured[idx] - classes)
    return np.where(use_lower, lower, idx).astype(np.int64)


def _corrected(cdf: NDArray[np.float64], stream, n_refs: int, counts: NDArray[np.int64],
               rows: NDArray[np.int64], measured: NDArray[np.int64],
               locality: Locality) -> NDArray[np.float64]:
    """Reuse-time CDFs reweighted so the next stream's stack distances come closer to the
    profile's, class by class: how the first ``n_refs`` references of ``stream`` (a
    ``LocalityStream``) turned each reuse-time bin into distances (the joint histogram
    P(s | r), counted on an even sample of them) is kept, and each bin's weight is multiplied
    by the mean, over the distances it produced, of target / produced (one Richardson-Lucy
    step). Per-key reuse times cannot see that in production many keys' reuses move together
    (a scan re-reads a range of blocks); this step folds what that does to distances back
    in."""
    from hotshard.profile._locality_kernels import new_stack, pass_chunk
    from hotshard.profile.locality import BINS_PER_OCTAVE, bin_lows

    lows = bin_lows()
    key_rows = np.where(rows < 0, measured.size, rows)
    used = int(np.searchsorted(lows, max(n_refs, 1), side="right"))  # bins in use
    counted = np.zeros((measured.size + 1, used, used), dtype=np.int64)
    state = new_stack(counts.size)
    every = -(-n_refs // JOINT_COUNTED)
    empty = np.zeros((1, 1), dtype=np.int64)
    first = np.zeros(measured.size + 1, dtype=np.int64)
    done = 0
    while done < n_refs:
        ids = stream.take(min(1 << 22, n_refs - done))
        if ids.size == 0:
            break
        state[-1] = pass_chunk(ids, done, key_rows, lows, BINS_PER_OCTAVE, used, every, empty,
                               empty, first, counted, *state)
        done += ids.size
    joint = np.zeros((measured.size + 1, N_BINS, N_BINS))
    joint[:, :used, :used] = counted
    targets = {c.cls: c for c in locality.classes}
    out = cdf.copy()
    for i, cls in enumerate(measured.tolist()):
        produced = joint[i]                       # [reuse bin, stack bin]
        made = produced.sum(axis=0)
        if made.sum() == 0:
            continue
        want = np.zeros(N_BINS)
        want[targets[cls].stack_bins] = targets[cls].stack_counts
        want *= made.sum() / max(want.sum(), 1.0)
        ratio = np.divide(want, made, out=np.ones(N_BINS), where=made > 0)
        per_reuse = produced.sum(axis=1)
        gain = np.divide(produced @ ratio, per_reuse, out=np.ones(N_BINS),
                         where=per_reuse > 0)
        weights = np.diff(np.concatenate([[0.0], cdf[i]])) * gain
        if weights.sum() > 0:
            out[i] = np.cumsum(weights) / weights.sum()
    return out


def locality_stream(key_weight: NDArray[np.float64], sizes: NDArray[np.int64],
                    events: int, locality: Locality, profile_events: float,
                    seed: int, *, corrections: int = 1,
                    timeline: tuple[NDArray, NDArray] | None = None, stop=None):
    """The order of an ``events``-long stream by ``locality``, as a ``LocalityStream`` that
    makes it window by window (``take(n)``: the next n key positions, as ``ClassSampler``
    numbers them), in memory that does not grow with ``events``. ``profile_events`` is the
    stream the locality was measured on: a key's class is that of its count at that scale
    (its share of traffic), and reuse times, in references, are kept as measured (a key's
    share, and so its rate in references, is kept). ``corrections``: how many times the
    stream is made again with its reuse times reweighted toward the profile's stack
    distances (``_corrected``; on a run of ``CORRECTION_PREFIX`` references when this one is
    longer); one step closes most of the gap, a second overshoots on scan-heavy traces
    (measured on cloudphysics). ``timeline``: (u, y) knots per head key (the first
    positions) and one last row for every other key: a reference at fraction u of the key's
    circle is moved to fraction y of the run, so a head key's references follow its timeline
    and the rest fill what the head leaves of each window (``head_warp``)."""
    from hotshard.workload.locality_stream import LocalityStream

    n_keys = int(np.sum(sizes))
    if n_keys > MAX_LOCALITY_KEYS:
        raise InputError(f"ordering references over {n_keys:,} keys by locality needs "
                         f"{MAX_LOCALITY_KEYS:,} keys at most (per-key state): generate with "
                         "fewer keys (${keys}), or give ${order} irm")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(0x10CA1,)))
    counts = key_counts(key_weight, sizes, events, rng)
    scale = profile_events / max(events, 1)
    classes = class_of(np.rint(counts * scale))
    measured, cdf = _class_tables(locality)
    rows = _rows_for(classes, measured)
    lo, hi = bin_bounds(np.arange(N_BINS))
    cdf = np.ascontiguousarray(cdf)
    if timeline is None:
        warp_u, warp_y, warp_row = np.zeros((0, 2)), np.zeros(2), np.zeros(0, dtype=np.int64)
    else:
        warp_u, warp_y, warp_row = _with_rest(*timeline, counts)

    def made(table: NDArray[np.float64], counts=counts, rows=rows, warp_row=warp_row):
        return LocalityStream(counts, rows, table, lo, hi - lo,
                              int(rng.integers(0, 2**31 - 1)), warp_u, warp_y, warp_row,
                              stop=stop)

    for _ in range(corrections if measured.size else 0):
        # measured on the run itself, or on a run of CORRECTION_PREFIX references of the
        # same profile (its keys' counts at that length, their classes the same scale's)
        short = min(int(events), CORRECTION_PREFIX)
        if short == int(events):
            first = made(cdf)
            c_short, r_short = counts, rows
        else:
            c_short = key_counts(key_weight, sizes, short, rng)
            r_short = _rows_for(class_of(np.rint(c_short * (profile_events / short))),
                                measured)
            # the same keys on their own rows as in the run itself (the knots are the
            # run's): chosen again from the shorter run's counts, a key near the share
            # threshold could change sides and read another key's row
            first = made(cdf, c_short, r_short, warp_row)
        cdf = np.ascontiguousarray(_corrected(cdf, first, short, c_short, r_short, measured,
                                              locality))
    return made(cdf)


def locality_positions(key_weight: NDArray[np.float64], sizes: NDArray[np.int64],
                       events: int, locality: Locality, profile_events: float,
                       seed: int, *, corrections: int = 1,
                       timeline: tuple[NDArray, NDArray] | None = None) -> NDArray[np.int64]:
    """The whole order of ``locality_stream`` as one array (for runs held in memory: drive's
    and simulate's key lists).

    Raises
    ------
    InputError
        More references or keys than one process holds in memory.
    """
    n_keys = int(np.sum(sizes))
    if not fits_in_memory(events, n_keys):
        raise InputError(f"ordering {events:,} references over {n_keys:,} keys by locality "
                         f"in memory takes at most {MAX_LOCALITY_EVENTS:,} references and "
                         f"{MAX_LOCALITY_KEYS:,} keys: use fewer, or give ${{order}} irm")
    return locality_stream(key_weight, sizes, events, locality, profile_events, seed,
                           corrections=corrections, timeline=timeline).take(int(events))


def _with_rest(u: NDArray[np.float64], y: NDArray[np.float64], counts: NDArray[np.int64]
               ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """(knots, y, row of each head key): the head keys that carry at least
    ``TIMELINE_SHARE`` of the requests keep a row of their own (an event's channel, and a
    steady key large enough to heat a shard); every other key shares one last row, the
    rest's cumulative share at each window edge, what remains of the run's requests there
    once the own-row keys (at their generated counts) have taken their part."""
    head = counts[: u.shape[0]].astype(np.float64)
    total = float(counts.sum())
    shape = np.diff(y)
    own = head >= TIMELINE_SHARE * total
    rows = np.where(own, np.cumsum(own) - 1, -1).astype(np.int64)
    mine = u[own]
    taken = (np.diff(mine, axis=1) * head[own][:, None]).sum(axis=0)   # per window
    rest_in = np.maximum(shape * total - taken, 0.0)
    rest = np.concatenate([[0.0], np.cumsum(rest_in)])
    rest = rest / rest[-1] if rest[-1] > 0 else y.copy()
    return np.vstack([mine, rest[None, :]]), y, rows


def head_warp(timelines, arrivals) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """(u, y) knots of the head keys' timelines in stream fractions: u, a key's cumulative
    share of its requests at each window edge; y, the run's cumulative share of all requests
    at that instant (from the arrivals' per-minute counts, uniform without them)."""
    u = timelines.cumulative()
    edges = np.linspace(0.0, 1.0, timelines.windows + 1)
    if arrivals is None:
        return u, edges
    cum = np.concatenate([[0.0], np.cumsum(arrivals.counts)]) / max(arrivals.events, 1)
    bin_edges = np.arange(cum.size) * arrivals.resolution_s  # from the same first request
    return u, np.interp(edges * timelines.seconds, bin_edges, cum)


def profile_order(profile, sampler, events: int, seed: int, *, rescaled: bool = False,
                  shaped: bool = False, stop=None):
    """The locality order of an ``events``-long stream of ``profile`` (which must have a
    locality section), for ``sampler`` = ``from_profile(profile)``, as a ``LocalityStream``:
    the one recipe of ``generate --order locality`` and ``drive --order locality``. Head keys
    follow their timelines when the profile has them; ``shaped``: the run's arrivals follow
    the profile's per-minute shape (else the run is even in time, and a timeline's windows
    are even too). ``rescaled``: the key space was scaled (``--keys``), where the correction
    toward production's stack distances no longer applies."""
    timeline = None
    if profile.timelines is not None:
        timeline = head_warp(profile.timelines, profile.arrivals if shaped else None)
    classes = sampler.classes
    return locality_stream(classes.key_weight, classes.sizes, int(events), profile.locality,
                           float(profile.locality.events), int(seed),
                           corrections=0 if rescaled else 1, timeline=timeline, stop=stop)


def profile_positions(profile, sampler, events: int, seed: int, *, rescaled: bool = False,
                      shaped: bool = False) -> NDArray[np.int64]:
    """``profile_order`` whole, as one array (a run held in memory; ``fits_in_memory``)."""
    n_keys = int(sampler.classes.n_keys)
    if not fits_in_memory(int(events), n_keys):
        raise InputError(f"ordering {int(events):,} references over {n_keys:,} keys by "
                         f"locality in memory takes at most {MAX_LOCALITY_EVENTS:,} references "
                         f"and {MAX_LOCALITY_KEYS:,} keys: use fewer, or give ${{order}} irm")
    return profile_order(profile, sampler, events, seed, rescaled=rescaled,
                         shaped=shaped).take(int(events))
