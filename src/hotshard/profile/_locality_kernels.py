"""Compiled kernels of the locality summary (numba): dense key ids, and Mattson's stack pass.

``dense_ids`` turns 64-bit key hashes into ids 0..K-1 in order of first appearance, with
their counts, in one pass over an open-addressing table (hash and id side by side, one cache
line a probe), no sort.

``stack_pass`` is Mattson's LRU stack algorithm over last-access positions: at each
reference, the keys touched since the previous reference to the same key are exactly the live
markers after its old position, so the stack distance is one count, and the marker moves to
the newest position. The markers are a bitmap (64 positions to a word) under three levels of
counts (of 1,024, 2^16 and 2^22 positions: 16 words, then 64 of the level below): a count of
the markers after a position is the popcount of the rest of its word, then of the rest of
its 16-word block, then sums of the rest of each level's group up to the newest position,
most of them empty for a recent reference, and a move is one bit and three counts each way,
with no loop. Positions are kept to 4K (when they run out, the live markers, at most K, are
renumbered 0..L-1 in order, by a scan of the bitmap and the owner of each position), so the
structure is a few bits a key and stays in cache whatever the stream's length.

Log bins are integer work: below 4,096 from a table, above from the octave (the count of
leading zeros) and the bin inside it by comparing with the integer bounds of its bins
(``locality.bin_bounds``, the one definition); no float logarithm per reference.
``joint_pass`` is the same pass, keeping instead the joint histogram of reuse-time bin and
stack-distance bin per class (what ``workload.locality_order`` corrects its reuse times by).

``window_chunk`` and ``sample_chunk`` are SHARDS (spatially hashed sampling) with an exact
window, in two passes a caller may run on two threads, one chunk behind the other: every
reference through a small exact LRU stack of the most recent keys (the same structures, over
a table of the window's keys with backward-shift deletion), then the sampled keys' references
through a stack of their own (``sampled_keys`` picks them, by a mixed hash).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["dense_ids", "joint_pass", "key_table", "log_bin", "lookup_ids", "new_shards",
           "new_stack", "pass_chunk", "sample_chunk", "sample_group", "sampled_keys",
           "stack_pass", "window_chunk"]

_ONE = np.uint64(1)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@intrinsic
def _popcount(typingctx, x):
    """Set bits of a uint64 (LLVM's ctpop: one instruction)."""
    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])
    return types.int64(types.uint64), codegen


@intrinsic
def _leading_zeros(typingctx, x):
    """Leading zero bits of a uint64 (LLVM's ctlz)."""
    def codegen(context, builder, signature, args):
        return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
    return types.int64(types.uint64), codegen


_SMALL = 4096   # values below: their bins from a table (8 KB, in L1)


@intrinsic
def _trailing_zeros(typingctx, x):
    """Trailing zero bits of a uint64 (LLVM's cttz)."""
    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))
    return types.int64(types.uint64), codegen


@njit(cache=True, inline="always")
def log_bin(value: int, lo: np.ndarray, per_octave: int) -> int:
    """Log bin of ``value`` >= 1: the last b with lo[b] <= value (``bin_bounds``'s lower
    bounds), found inside the octave of value's top bit."""
    b = per_octave * (63 - _leading_zeros(np.uint64(value)))
    out = b
    for t in range(1, per_octave):
        out += value >= lo[b + t]
    return out


@njit(cache=True)
def _small_bins(lo: np.ndarray, per_octave: int, top: int) -> np.ndarray:
    """``log_bin`` of 0.._SMALL-1, capped at ``top`` (0 for 0)."""
    small = np.zeros(_SMALL, dtype=np.int16)
    for v in range(1, _SMALL):
        small[v] = min(log_bin(v, lo, per_octave), top)
    return small


@njit(cache=True, inline="always")
def _bin(value: int, small: np.ndarray, lo: np.ndarray, per_octave: int, top: int) -> int:
    if value < _SMALL:
        return small[value]
    return min(log_bin(value, lo, per_octave), top)


@njit(cache=True, inline="always")
def _probe(table: np.ndarray, shift: int, h: int) -> int:
    """The slot of hash ``h`` in ``table``: its own, or the empty one where it goes."""
    mask = (1 << shift) - 1
    j = np.int64((np.uint64(h) * _GOLDEN) >> np.uint64(64 - shift))
    while table[2 * j + 1] != 0 and table[2 * j] != h:
        j = (j + 1) & mask
    return j


@njit(cache=True)
def _fill(hashes, start, table, shift, ids, counts, k) -> tuple[int, int]:
    """Ids of hashes[start:] until the end or the table is half full: (next index, K)."""
    limit = 1 << (shift - 1)
    for i in range(start, hashes.size):
        h = hashes[i]
        j = _probe(table, shift, h)
        slot = table[2 * j + 1]
        if slot == 0:
            if k == limit:
                return i, k
            table[2 * j] = h
            k += 1
            table[2 * j + 1] = k
            slot = k
        ids[i] = slot - 1
        counts[slot - 1] += 1
    return hashes.size, k


@njit(cache=True)
def dense_ids(hashes: np.ndarray, max_keys: int = 1 << 62
              ) -> tuple[np.ndarray, int, np.ndarray]:
    """(ids, K, counts) of 64-bit key hashes (as int64): each distinct hash gets the next id
    at its first appearance. The table doubles at half full, so it stays the size of the key
    set (in cache for most), not of the stream. K is -1 (the rest unset) when the stream has
    more than ``max_keys`` (a power of two) keys: the pass stops when it finds so."""
    shift = 12
    table = np.zeros(2 << shift, dtype=np.int64)   # (hash, id + 1) side by side; 0: empty
    counts = np.zeros(1 << (shift - 1), dtype=np.int64)
    ids = np.empty(hashes.size, dtype=np.int32)
    i, k = _fill(hashes, 0, table, shift, ids, counts, 0)
    while i < hashes.size:  # half full: double, re-insert every key, go on
        if k >= max_keys:
            return ids, -1, counts
        old = table
        shift += 1
        table = np.zeros(2 << shift, dtype=np.int64)
        for s in range(old.size // 2):
            if old[2 * s + 1] != 0:
                j = _probe(table, shift, old[2 * s])
                table[2 * j] = old[2 * s]
                table[2 * j + 1] = old[2 * s + 1]
        grown = np.zeros(1 << (shift - 1), dtype=np.int64)
        grown[: counts.size] = counts
        counts = grown
        i, k = _fill(hashes, i, table, shift, ids, counts, k)
    return ids, k, counts[:k].copy()


@njit(cache=True, inline="always")
def _move(bits, c1, c2, c3, p: int, on: bool) -> None:
    """Set (``on``) or clear the marker at position ``p``, and its three counts."""
    bit = _ONE << np.uint64(p & 63)
    d = 1 if on else -1
    if on:
        bits[p >> 6] |= bit
    else:
        bits[p >> 6] &= ~bit
    c1[p >> 10] += d
    c2[p >> 16] += d
    c3[p >> 22] += d


@njit(cache=True, inline="always")
def _after(bits, c1, c2, c3, old: int, pos: int) -> int:
    """Live markers at positions old+1 .. pos-1 (none lie at pos or beyond): the rest of
    old's word, of its block (from the nearer end: forward, or the block's count less what
    lies up to old), then of each level's group, forward to the newest position."""
    w = old >> 6
    d = _popcount((bits[w] >> np.uint64(old & 63)) >> _ONE)
    top = (pos - 1) >> 6
    if top <= (w | 15) or (w & 15) >= 8:   # the rest of its 16-word block
        for q in range(w + 1, min(w | 15, top) + 1):
            d += _popcount(bits[q])
    else:
        below = _popcount(bits[w]) - d
        for q in range(w & ~15, w):
            below += _popcount(bits[q])
        d = c1[w >> 4] - below
    b, top = w >> 4, top >> 4
    d += _rest(c1, b, top)            # the rest of its 2^16-position group
    b, top = b >> 6, top >> 6
    d += _rest(c2, b, top)            # the rest of its 2^22-position group
    b, top = b >> 6, top >> 6
    for q in range(b + 1, top + 1):
        d += c3[q]
    return d


@njit(cache=True, inline="always")
def _rest(counts, b: int, top: int) -> int:
    """Sum of counts[b+1 .. min(end of b's group of 64, top)]."""
    d = 0
    for q in range(b + 1, min(b | 63, top) + 1):
        d += counts[q]
    return d


@njit(cache=True)
def _renumber(bits, c1, c2, c3, owner, marker) -> int:
    """Renumber the live markers 0..L-1 in position order; returns L."""
    old = bits.copy()
    bits[:] = 0
    c1[:] = 0
    c2[:] = 0
    c3[:] = 0
    r = 0
    for w in range(old.size):
        x = old[w]
        while x != 0:
            p = (w << 6) + _trailing_zeros(x)
            key = owner[p]
            marker[key] = r
            owner[r] = key
            _move(bits, c1, c2, c3, r, True)
            r += 1
            x &= x - _ONE
    return r


@njit(cache=True)
def _stack(n_keys: int):
    """A Mattson stack over keys 0..n_keys-1: (bits, c1, c2, c3, owner, last, cap); last[k]
    is key k's (marker position, previous reference), -1 before its first."""
    cap = 4 * n_keys + 4096
    words = (cap >> 6) + 1
    bits = np.zeros(words, dtype=np.uint64)
    c1 = np.zeros((words >> 4) + 1, dtype=np.int64)
    c2 = np.zeros((c1.size >> 6) + 1, dtype=np.int64)
    c3 = np.zeros((c2.size >> 6) + 1, dtype=np.int64)
    owner = np.empty(cap, dtype=np.int32)   # the key of each position's marker
    # per key, side by side (one cache line a reference): marker position, previous reference
    last = np.full((n_keys, 2), -1, dtype=np.int64)
    return bits, c1, c2, c3, owner, last, cap


@njit(cache=True, inline="always")
def _touch(bits, c1, c2, c3, owner, last, cap: int, key: int, i: int, pos: int,
           measure: bool = True) -> tuple[int, int, int]:
    """Reference ``i`` to ``key`` with the next marker at ``pos`` (< cap): (stack distance,
    reuse time, next pos); distance -1 for a first reference, 0 for a re-reference when not
    ``measure`` (the stack moves all the same; counting the distance is the costly part)."""
    old = last[key, 0]
    d, gap = -1, 0
    if old >= 0:
        d = _after(bits, c1, c2, c3, old, pos) if measure else 0
        gap = i - last[key, 1]
        _move(bits, c1, c2, c3, old, False)
    _move(bits, c1, c2, c3, pos, True)
    owner[pos] = key
    last[key, 0] = pos
    last[key, 1] = i
    return d, gap, pos + 1


@njit(cache=True, nogil=True)
def pass_chunk(ids: np.ndarray, i0: int, key_class: np.ndarray, lo: np.ndarray,
               per_octave: int, joint_bins: int, every: int, stack: np.ndarray,
               reuse: np.ndarray, first: np.ndarray, joint: np.ndarray, bits, c1, c2, c3,
               owner, last, cap: int, pos: int) -> int:
    """The one Mattson pass behind ``stack_pass``, ``joint_pass`` and a streamed profile,
    over one chunk of ``ids`` whose first is reference ``i0`` of the stream: counts into
    (stack, reuse, first), or joint when ``joint_bins`` > 0; only every ``every``-th
    reference is counted (all of them move the stack). The stack (``_stack``) and the next
    marker position ``pos`` carry over from chunk to chunk; returns the next ``pos``."""
    n_bins = stack.shape[1]
    top = (joint_bins if joint_bins > 0 else n_bins) - 1
    small = _small_bins(lo, per_octave, top)
    for j in range(ids.size):
        i = i0 + j
        key = ids[j]
        c = key_class[key]
        if pos == cap:
            pos = _renumber(bits, c1, c2, c3, owner, last[:, 0])
        counted = every == 1 or i % every == 0
        d, gap, pos = _touch(bits, c1, c2, c3, owner, last, cap, key, i, pos, counted)
        if not counted:
            continue
        if d < 0:
            first[c] += 1
            continue
        sb = _bin(d + 1, small, lo, per_octave, top)
        rb = _bin(gap, small, lo, per_octave, top)
        if joint_bins > 0:
            joint[c, rb, sb] += 1
        else:
            stack[c, sb] += 1
            reuse[c, rb] += 1
    return pos


def new_stack(n_keys: int) -> list:
    """A Mattson stack over keys 0..n_keys-1 for ``pass_chunk``: [bits, c1, c2, c3, owner,
    last, cap, pos]."""
    return [*_stack(n_keys), 0]


def _pass(ids: np.ndarray, n_keys: int, key_class: np.ndarray, n_classes: int, n_bins: int,
          lo: np.ndarray, per_octave: int, joint_bins: int, every: int = 1
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``pass_chunk`` over a whole stream: (stack, reuse, first, joint)."""
    stack = np.zeros((n_classes, n_bins), dtype=np.int64)
    reuse = np.zeros((n_classes, n_bins), dtype=np.int64)
    first = np.zeros(n_classes, dtype=np.int64)
    jb = max(joint_bins, 1)
    joint = np.zeros((n_classes if joint_bins > 0 else 1, jb, jb), dtype=np.int64)
    state = new_stack(n_keys)
    pass_chunk(ids, 0, key_class, lo, per_octave, joint_bins, every, stack, reuse, first,
               joint, *state)
    return stack, reuse, first, joint


def stack_pass(ids: np.ndarray, n_keys: int, key_class: np.ndarray, n_classes: int,
               n_bins: int, lo: np.ndarray, per_octave: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass over ``ids`` (dense, 0..n_keys-1, in stream order).

    Returns (stack[c, b], reuse[c, b], first[c]): per popularity class c (of the referenced
    key), the log-binned histograms (``n_bins`` bins, the last one open; ``lo``: the bins'
    lower bounds, 63 octaves of ``per_octave``) of stack distances plus one (distinct other
    keys since the key's previous reference, plus one) and of reuse times (references since
    it); first references counted apart.
    """
    stack, reuse, first, _ = _pass(ids, n_keys, key_class, n_classes, n_bins, lo,
                                   per_octave, 0)
    return stack, reuse, first


def joint_pass(ids: np.ndarray, n_keys: int, key_class: np.ndarray, n_classes: int,
               n_bins: int, lo: np.ndarray, per_octave: int, every: int = 1) -> np.ndarray:
    """joint[c, r, s]: re-references of class c with reuse-time bin r and stack-distance bin
    s (both capped at ``n_bins`` - 1), by the pass of ``stack_pass``: how a stream turns
    reuse times into distances. ``every``: count only every ``every``-th reference, an
    unbiased sample of P(s | r) (which reference is counted does not depend on its key or
    its distance) at a fraction of the cost, since counting a distance is most of a step."""
    return _pass(ids, n_keys, key_class, n_classes, 1, lo, per_octave, n_bins,
                 max(int(every), 1))[3]


@njit(cache=True, inline="always")
def _sampled(h: int, threshold: int) -> bool:
    """SHARDS' spatial filter: whether key hash ``h`` falls in the first threshold / 2^24 of
    the hash space (after a mix, so that plain integer keys spread too)."""
    m = np.uint64(h) * _GOLDEN
    m ^= m >> np.uint64(29)
    m *= np.uint64(0xBF58476D1CE4E5B9)
    m ^= m >> np.uint64(32)
    return np.int64(m & np.uint64(0xFFFFFF)) < threshold


@njit(cache=True, inline="always")
def _window_drop(table, shift: int, h: int) -> None:
    """Remove hash ``h`` from the window's table (backward-shift deletion: the entries after
    it in its probe run move up, so no tombstone is left)."""
    mask = (1 << shift) - 1
    j = _probe(table, shift, h)
    table[2 * j + 1] = 0
    k = (j + 1) & mask
    while table[2 * k + 1] != 0:
        home = np.int64((np.uint64(table[2 * k]) * _GOLDEN) >> np.uint64(64 - shift))
        # move entry k into the hole j unless its home lies cyclically in (j, k]
        if (k - home) & mask >= (k - j) & mask:
            table[2 * j] = table[2 * k]
            table[2 * j + 1] = table[2 * k + 1]
            table[2 * k + 1] = 0
            j = k
        k = (k + 1) & mask


@njit(cache=True)
def key_table(hashes: np.ndarray) -> tuple[np.ndarray, int]:
    """An open-addressing table (hash, id + 1) of distinct ``hashes``, id = place in the
    array, at most half full: (table, shift) for ``_probe``."""
    shift = 4
    while (1 << (shift - 1)) < hashes.size + 1:
        shift += 1
    table = np.zeros(2 << shift, dtype=np.int64)
    for i in range(hashes.size):
        j = _probe(table, shift, hashes[i])
        table[2 * j] = hashes[i]
        table[2 * j + 1] = i + 1
    return table, shift


@njit(cache=True, nogil=True)
def lookup_ids(hashes: np.ndarray, table: np.ndarray, shift: int) -> np.ndarray:
    """The id of each hash in ``key_table``'s table (-1 for a hash not in it)."""
    out = np.empty(hashes.size, dtype=np.int32)
    for i in range(hashes.size):
        out[i] = table[2 * _probe(table, shift, hashes[i]) + 1] - 1
    return out


@njit(cache=True)
def sampled_keys(hashes: np.ndarray, threshold: int) -> np.ndarray:
    """Whether each key hash is in SHARDS' sample (``_sampled``)."""
    out = np.empty(hashes.size, dtype=np.bool_)
    for i in range(hashes.size):
        out[i] = _sampled(hashes[i], threshold)
    return out


@njit(cache=True, inline="always")
def sample_group(h: int, groups: int) -> int:
    """Which of ``groups`` equal parts of the sample a sampled key hash falls in (hash bits
    above the sampling ones): each part is a SHARDS sample of its own, at rate / groups, so
    the parts' spread tells the sample's error."""
    m = np.uint64(h) * _GOLDEN
    m ^= m >> np.uint64(29)
    m *= np.uint64(0xBF58476D1CE4E5B9)
    m ^= m >> np.uint64(32)
    return np.int64((m >> np.uint64(24)) % np.uint64(groups))


@njit(cache=True, nogil=True)
def window_chunk(hashes: np.ndarray, i0: int, threshold: int, window: int, near, wstate,
                 whash, table, st, sampled_at: np.ndarray, sampled_d: np.ndarray) -> int:
    """SHARDS' exact window over one chunk of a stream (reference ``i0`` first): every
    reference through an exact LRU stack of the ``window`` most recent keys (the same
    structures as ``stack_pass``, over a table of the window's keys with backward-shift
    deletion), near[d] counting the references at distance d < window. The sampled ones
    (``_sampled`` at ``threshold``) are listed for ``sample_chunk``: their place in the
    chunk in ``sampled_at``, their distance in the window (-1 beyond it) in ``sampled_d``;
    returns how many. ``st``: [live, low, wpos, shift]."""
    wb, w1, w2, w3, wowner, wlast, wcap = wstate
    live, low, wpos, shift = st[0], st[1], st[2], st[3]
    m = 0
    for j in range(hashes.size):
        i = i0 + j
        h = hashes[j]
        if wpos == wcap:
            wpos = _renumber(wb, w1, w2, w3, wowner, wlast[:, 0])
            low = 0
        jt = _probe(table, shift, h)
        slot = table[2 * jt + 1] - 1
        if slot < 0:  # not in the window: the oldest key leaves it, this one enters
            if live < window:
                slot = live
                live += 1
            else:
                x = wb[low >> 6] >> np.uint64(low & 63)
                while x == 0:
                    low = (low | 63) + 1
                    x = wb[low >> 6]
                low += _trailing_zeros(x)
                slot = wowner[low]
                _move(wb, w1, w2, w3, low, False)
                wlast[slot, 0] = -1
                _window_drop(table, shift, whash[slot])
                jt = _probe(table, shift, h)
            table[2 * jt] = h
            table[2 * jt + 1] = slot + 1
            whash[slot] = h
        d, _, wpos = _touch(wb, w1, w2, w3, wowner, wlast, wcap, slot, i, wpos)
        if d >= 0:
            near[d] += 1
        if _sampled(h, threshold):
            sampled_at[m] = j
            sampled_d[m] = d
            m += 1
    st[0], st[1], st[2] = live, low, wpos
    return m


@njit(cache=True, nogil=True)
def sample_chunk(hashes: np.ndarray, i0: int, at: np.ndarray, window_d: np.ndarray, m: int,
                 ktable: np.ndarray, kshift: int, key_class: np.ndarray, lo: np.ndarray,
                 per_octave: int, window: int, rate: float, stack, reuse, first, far,
                 far_first, sstate, st) -> None:
    """SHARDS' sample over one chunk (reference ``i0`` first): the references at[0..m-1]
    of the chunk, keys sampled (``ktable``: their ids, from ``key_table``), through a Mattson
    stack of their own; a reference beyond the window (``window_d`` -1, from
    ``window_chunk``) gets the sample's distance scaled by 1 / ``rate`` (at least
    ``window``). ``window`` 0: the chunk holds the sampled references only (a sample drawn
    by the engine, ``at`` every place), every one scaled, reuse times too.

    Counts into: stack[c, b], reuse[c, b], first[c], the sampled references' histograms by
    class as ``stack_pass``; far[g, b], sampled references beyond the window by part of the
    sample (``sample_group``) and bin of their estimated distance plus one; far_first[g],
    the sampled first references. ``st``: [position]."""
    n_bins = stack.shape[1]
    groups = far.shape[0]
    top = n_bins - 1
    small = _small_bins(lo, per_octave, top)
    sb_, s1, s2, s3, sowner, slast, scap = sstate
    spos = st[0]
    for q in range(m):
        j = at[q]
        i = i0 + j
        h = hashes[j]
        d = window_d[q]
        key = ktable[2 * _probe(ktable, kshift, h) + 1] - 1
        if key < 0:
            continue  # not a counted key (the engine's sample and its key list disagree)
        c = key_class[key]
        g = sample_group(h, groups)
        if spos == scap:
            spos = _renumber(sb_, s1, s2, s3, sowner, slast[:, 0])
        ds, gap, spos = _touch(sb_, s1, s2, s3, sowner, slast, scap, key, i, spos)
        if ds < 0:
            first[c] += 1
            far_first[g] += 1
            continue
        if window == 0:
            # the sample's distance ds means ds / R to ds + 1 / R in the stream: placed in
            # that range by the reference's own hash (uniform, deterministic), so a cache
            # smaller than 1 / R sees its share of them, not none or all
            u = np.float64((np.uint64(i) * _GOLDEN) >> np.uint64(11)) / 9007199254740992.0
            d = int((ds + u) / rate)
            gap = max(int((gap - 1 + u) / rate) + 1, 1)
        elif d < 0:
            d = max(int(ds / rate), window)
        if d >= window:
            far[g, _bin(d + 1, small, lo, per_octave, top)] += 1
        stack[c, _bin(d + 1, small, lo, per_octave, top)] += 1
        reuse[c, _bin(gap, small, lo, per_octave, top)] += 1
    st[0] = spos


def new_shards(n_sampled: int, window: int) -> list:
    """SHARDS' carried state: for ``window_chunk`` the window's stack, its slots' hashes and
    table, and [live, low, wpos, shift]; for ``sample_chunk`` the sample's stack and
    [position]."""
    shift = 2
    while (1 << shift) < 4 * max(window, 1):
        shift += 1
    return [_stack(max(window, 1)), np.zeros(max(window, 1), np.int64),
            np.zeros(2 << shift, np.int64), np.array([0, 0, 0, shift], np.int64),
            _stack(n_sampled), np.zeros(1, np.int64)]
