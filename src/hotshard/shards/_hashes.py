"""Compiled hash kernels over many keys at once (numba).

Keys arrive as one flat ``uint8`` buffer plus ``int64`` offsets (key i is
``data[offsets[i]:offsets[i+1]]``), the layout of an Arrow binary array. 32-bit arithmetic is
done in uint64 and masked, so it wraps exactly as Java's and C's does.
"""

from __future__ import annotations

import numpy as np
from numba import njit

M32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, nogil=True)
def _rotl32(x, r):
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & M32


@njit(cache=True, nogil=True)
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, nogil=True)
def _le32(data, p):
    """The little-endian 32-bit word at data[p:p+4]."""
    return (np.uint64(data[p]) | (np.uint64(data[p + 1]) << np.uint64(8))
            | (np.uint64(data[p + 2]) << np.uint64(16))
            | (np.uint64(data[p + 3]) << np.uint64(24)))


@njit(cache=True, nogil=True)
def _signed32(h):
    """A 32-bit word as Java's int."""
    return np.int64(h) - (np.int64(1) << 32) if h >= np.uint64(0x80000000) else np.int64(h)


# -- Redis Cluster: CRC16-XMODEM with hash tags --------------------------------------------
@njit(cache=True, nogil=True)
def _crc16_table():
    table = np.zeros(256, dtype=np.uint64)
    for i in range(256):
        crc = np.uint64(i) << np.uint64(8)
        for _ in range(8):
            if crc & np.uint64(0x8000):
                crc = ((crc << np.uint64(1)) ^ np.uint64(0x1021)) & np.uint64(0xFFFF)
            else:
                crc = (crc << np.uint64(1)) & np.uint64(0xFFFF)
        table[i] = crc
    return table


@njit(cache=True, nogil=True)
def _crc16(data, start, end, table):
    crc = np.uint64(0)
    for j in range(start, end):
        idx = ((crc >> np.uint64(8)) ^ np.uint64(data[j])) & np.uint64(0xFF)
        crc = ((crc << np.uint64(8)) & np.uint64(0xFFFF)) ^ table[idx]
    return crc


@njit(cache=True, nogil=True)
def redis_slots(data, offsets):
    """Redis Cluster slot: CRC16-XMODEM of the key, or of its first non-empty {hash tag}."""
    table = _crc16_table()
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        start = offsets[i]
        end = offsets[i + 1]
        s = start
        e = end
        for j in range(start, end):
            if data[j] == 123:  # '{'
                for k in range(j + 1, end):
                    if data[k] == 125:  # '}'
                        if k > j + 1:
                            s = j + 1
                            e = k
                        break
                break
        out[i] = np.int64(_crc16(data, s, e, table) & np.uint64(0x3FFF))
    return out


@njit(cache=True, nogil=True)
def crc16_xmodem(data, offsets):
    """Plain CRC16-XMODEM of each key (no hash tags, no slot mask)."""
    table = _crc16_table()
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = np.int64(_crc16(data, offsets[i], offsets[i + 1], table))
    return out


# -- Kafka: murmur2 -------------------------------------------------------------------------
@njit(cache=True, nogil=True)
def kafka_murmur2(data, offsets):
    """Kafka's Utils.murmur2 (seed 0x9747b28c) as a signed 32-bit int."""
    m = np.uint64(0x5BD1E995)
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        h = (np.uint64(0x9747B28C) ^ np.uint64(length)) & M32
        blocks = length // 4
        for b in range(blocks):
            p = start + 4 * b
            k = _le32(data, p)
            k = (k * m) & M32
            k ^= k >> np.uint64(24)
            k = (k * m) & M32
            h = (h * m) & M32
            h ^= k
        p = start + 4 * blocks
        rem = length % 4
        if rem == 3:
            h ^= np.uint64(data[p + 2]) << np.uint64(16)
        if rem >= 2:
            h ^= np.uint64(data[p + 1]) << np.uint64(8)
        if rem >= 1:
            h ^= np.uint64(data[p])
            h = (h * m) & M32
        h ^= h >> np.uint64(13)
        h = (h * m) & M32
        h ^= h >> np.uint64(15)
        out[i] = _signed32(h)
    return out


# -- Cassandra: murmur3 x64_128, first half, Java signed tail bytes -------------------------
@njit(cache=True, nogil=True)
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True, nogil=True)
def _signed_byte(b):
    """A byte as Java reads it into a long: sign-extended (0x80.. become negative)."""
    v = np.int64(b)
    if v >= 128:
        v -= 256
    return np.uint64(v)


@njit(cache=True, nogil=True)
def _murmur3_x64_first(data, start, length, seed, java_tail):
    c1 = np.uint64(0x87C37B91114253D5)
    c2 = np.uint64(0x4CF5AD432745937F)
    h1 = np.uint64(seed)
    h2 = np.uint64(seed)
    blocks = length // 16
    for b in range(blocks):
        p = start + 16 * b
        k1 = np.uint64(0)
        k2 = np.uint64(0)
        for j in range(8):
            k1 |= np.uint64(data[p + j]) << np.uint64(8 * j)
            k2 |= np.uint64(data[p + 8 + j]) << np.uint64(8 * j)
        k1 *= c1
        k1 = _rotl64(k1, 31)
        k1 *= c2
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
        k2 *= c2
        k2 = _rotl64(k2, 33)
        k2 *= c1
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
    p = start + 16 * blocks
    rem = length % 16
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    for j in range(rem - 1, 7, -1):
        byte = _signed_byte(data[p + j]) if java_tail else np.uint64(data[p + j])
        k2 ^= byte << np.uint64(8 * (j - 8))
    if rem > 8:
        k2 *= c2
        k2 = _rotl64(k2, 33)
        k2 *= c1
        h2 ^= k2
    for j in range(min(rem, 8) - 1, -1, -1):
        byte = _signed_byte(data[p + j]) if java_tail else np.uint64(data[p + j])
        k1 ^= byte << np.uint64(8 * j)
    if rem > 0:
        k1 *= c1
        k1 = _rotl64(k1, 31)
        k1 *= c2
        h1 ^= k1
    h1 ^= np.uint64(length)
    h2 ^= np.uint64(length)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    return h1


@njit(cache=True, nogil=True)
def cassandra_tokens(data, offsets):
    """Murmur3Partitioner tokens: first 64 bits of x64_128 (seed 0, signed tail bytes);
    Long.MIN_VALUE maps to Long.MAX_VALUE, as Cassandra normalises it."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    lo = np.iinfo(np.int64).min
    for i in range(n):
        h = np.int64(_murmur3_x64_first(data, offsets[i], offsets[i + 1] - offsets[i], 0, True))
        out[i] = np.iinfo(np.int64).max if h == lo else h
    return out


@njit(cache=True, nogil=True)
def murmur3_64(data, offsets):
    """Plain murmur3 x64_128 first 64 bits (unsigned tail bytes), as uint64 in int64."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = np.int64(_murmur3_x64_first(data, offsets[i], offsets[i + 1] - offsets[i], 0,
                                             False))
    return out


# -- Elasticsearch: murmur3 x86_32 ------------------------------------------------------------
@njit(cache=True, nogil=True)
def murmur3_x86_32(data, offsets, seed):
    """MurmurHash3_x86_32 as a signed 32-bit int."""
    c1 = np.uint64(0xCC9E2D51)
    c2 = np.uint64(0x1B873593)
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        h = np.uint64(seed) & M32
        blocks = length // 4
        for b in range(blocks):
            p = start + 4 * b
            k = _le32(data, p)
            k = (k * c1) & M32
            k = _rotl32(k, 15)
            k = (k * c2) & M32
            h ^= k
            h = _rotl32(h, 13)
            h = (h * np.uint64(5) + np.uint64(0xE6546B64)) & M32
        p = start + 4 * blocks
        rem = length % 4
        k = np.uint64(0)
        if rem == 3:
            k ^= np.uint64(data[p + 2]) << np.uint64(16)
        if rem >= 2:
            k ^= np.uint64(data[p + 1]) << np.uint64(8)
        if rem >= 1:
            k ^= np.uint64(data[p])
            k = (k * c1) & M32
            k = _rotl32(k, 15)
            k = (k * c2) & M32
            h ^= k
        h ^= np.uint64(length)
        h ^= h >> np.uint64(16)
        h = (h * np.uint64(0x85EBCA6B)) & M32
        h ^= h >> np.uint64(13)
        h = (h * np.uint64(0xC2B2AE35)) & M32
        h ^= h >> np.uint64(16)
        out[i] = _signed32(h)
    return out


# -- MD5 (MongoDB hashed keys, ketama) --------------------------------------------------------
_MD5_S = np.array([7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4
                  + [6, 10, 15, 21] * 4, dtype=np.int64)
_MD5_K = np.array([int(abs(np.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)],
                  dtype=np.uint64)


@njit(cache=True, nogil=True)
def md5_prefix64(data, offsets):
    """The first 8 bytes of each key's MD5 digest, read little-endian, as int64."""
    n = offsets.shape[0] - 1
    out = np.empty(n, dtype=np.int64)
    block = np.zeros(64, dtype=np.uint8)
    for i in range(n):
        start = offsets[i]
        length = offsets[i + 1] - start
        a0 = np.uint64(0x67452301)
        b0 = np.uint64(0xEFCDAB89)
        c0 = np.uint64(0x98BADCFE)
        d0 = np.uint64(0x10325476)
        total = ((length + 8) // 64 + 1) * 64
        for off in range(0, total, 64):
            for j in range(64):
                pos = off + j
                if pos < length:
                    block[j] = data[start + pos]
                elif pos == length:
                    block[j] = 0x80
                elif pos >= total - 8:
                    block[j] = np.uint8(((length * 8) >> (8 * (pos - (total - 8)))) & 0xFF)
                else:
                    block[j] = 0
            a = a0
            b = b0
            c = c0
            d = d0
            for r in range(64):
                if r < 16:
                    f = (b & c) | ((~b & M32) & d)
                    g = r
                elif r < 32:
                    f = (d & b) | ((~d & M32) & c)
                    g = (5 * r + 1) % 16
                elif r < 48:
                    f = b ^ c ^ d
                    g = (3 * r + 5) % 16
                else:
                    f = c ^ (b | (~d & M32))
                    g = (7 * r) % 16
                w = _le32(block, 4 * g)
                f = (f + a + _MD5_K[r] + w) & M32
                a = d
                d = c
                c = b
                b = (b + _rotl32(f, _MD5_S[r])) & M32
            a0 = (a0 + a) & M32
            b0 = (b0 + b) & M32
            c0 = (c0 + c) & M32
            d0 = (d0 + d) & M32
        out[i] = np.int64(a0 | (b0 << np.uint64(32)))
    return out


# -- jump consistent hash ---------------------------------------------------------------------
@njit(cache=True, nogil=True)
def jump(keys, buckets):
    """Lamping & Veach (2014) jump consistent hash of 64-bit keys into ``buckets``."""
    n = keys.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        key = np.uint64(keys[i])
        b = np.int64(-1)
        j = np.int64(0)
        while j < buckets:
            b = j
            key = key * np.uint64(2862933555777941757) + np.uint64(1)
            j = np.int64((b + 1) * (float(np.int64(1) << 31)
                                    / float((key >> np.uint64(33)) + np.uint64(1))))
        out[i] = b
    return out


@njit(cache=True, nogil=True)
def splitmix64(x):
    """A strong 64-bit mixer (for rendezvous scores)."""
    out = np.empty(x.shape[0], dtype=np.uint64)
    for i in range(x.shape[0]):
        z = np.uint64(x[i]) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        out[i] = z ^ (z >> np.uint64(31))
    return out
