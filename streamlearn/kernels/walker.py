"""Compiled walker of msgpack dict records (``streamlearn.connectors.walker`` is the Python side): one
message value — a record ``{"x": {name: value, ...}, "y": label}`` or an array of them — read
byte by byte into CSR arrays over feature-name ids, with no Python object per feature.

Feature names live in a name table the caller keeps across messages: an open-addressing hash
table (``slots``, four int64 per slot: name id or -1, hash, arena start, length) over the names' bytes, each stored once in ``arena`` as a tag
byte (``1``: a str, its UTF-8 bytes follow; ``2``: an int, its eight little-endian bytes
follow). A name met for the first time gets the next id; the caller decodes it to a Python
object once.

The walker takes only the common, valid shape. Anything else — a key other than ``x`` and
``y``, a value that is not a finite int or float, a name met twice in one record, a label that
is not an int or a str, a truncated or trailing byte — makes it give up on the whole message
(status ``BAIL``), and the caller decodes that message the general way, so validation and
dead letters are exactly the general decoder's.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import intrinsic

from .codes import LARGEST_VALUE

OK, BAIL, FULL = 0, 1, 2
TAG_STR, TAG_INT = 1, 2
FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)
_U8, _U63 = np.uint64(8), np.uint64(63)


@intrinsic
def _as_float64(typingctx, bits):
    """The float64 whose IEEE bits are the uint64 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return types.float64(types.uint64), codegen


@intrinsic
def _as_float32(typingctx, bits):
    """The float32 whose IEEE bits are the uint32 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float32))

    return types.float32(types.uint32), codegen


@njit(cache=True, nogil=True, inline="always")
def _big_endian(buf, p, n_bytes):
    value = np.uint64(0)
    for k in range(n_bytes):
        value = (value << _U8) | np.uint64(buf[p + k])
    return value


@njit(cache=True, nogil=True, inline="always")
def _container(buf, p, n, fix_low, fix_high, code16, code32):
    """Length of a map or array header at ``p`` and the position after it (-1: not one)."""
    if p >= n:
        return -1, p
    c = buf[p]
    if fix_low <= c <= fix_high:
        return np.int64(c - fix_low), p + 1
    if c == code16 and p + 3 <= n:
        return np.int64(_big_endian(buf, p + 1, 2)), p + 3
    if c == code32 and p + 5 <= n:
        return np.int64(_big_endian(buf, p + 1, 4)), p + 5
    return -1, p


@njit(cache=True, nogil=True, inline="always")
def _string(buf, p, n):
    """``(start, end, next)`` of the str at ``p``; start -1: not a str (or truncated)."""
    c = buf[p]
    if 0xA0 <= c <= 0xBF:
        length, start = np.int64(c - 0xA0), p + 1
    elif c == 0xD9 and p + 2 <= n:
        length, start = np.int64(buf[p + 1]), p + 2
    elif c == 0xDA and p + 3 <= n:
        length, start = np.int64(_big_endian(buf, p + 1, 2)), p + 3
    elif c == 0xDB and p + 5 <= n:
        length, start = np.int64(_big_endian(buf, p + 1, 4)), p + 5
    else:
        return -1, -1, p
    if start + length > n:
        return -1, -1, p
    return start, start + length, start + length


@njit(cache=True, nogil=True, inline="always")
def _integer(buf, p, n):
    """``(value, ok, next)`` of an int at ``p`` that fits int64."""
    c = buf[p]
    if c <= 0x7F:
        return np.int64(c), True, p + 1
    if c >= 0xE0:
        return np.int64(c) - 256, True, p + 1
    sizes = (0, 0, 0, 0, 1, 2, 4, 8, 1, 2, 4, 8)  # 0xC8 + k: uint8..uint64 at k = 4..7, int8..int64 at 8..11
    k = np.int64(c) - 0xC8
    if k < 4 or k > 11 or p + 1 + sizes[k] > n:
        return 0, False, p
    raw = _big_endian(buf, p + 1, sizes[k])
    if k <= 7:
        if raw >> _U63:  # a uint64 beyond int64
            return 0, False, p
        return np.int64(raw), True, p + 1 + sizes[k]
    bits = 8 * sizes[k]
    value = np.int64(raw)
    if bits < 64 and value >= (np.int64(1) << (bits - 1)):
        value -= np.int64(1) << bits
    return value, True, p + 1 + sizes[k]


@njit(cache=True, nogil=True, inline="always")
def _number(buf, p, n):
    """``(value, ok, next)`` of a float32/float64/int at ``p``, ok when within ``LARGEST_VALUE``."""
    c = buf[p]
    if c == 0xCB and p + 9 <= n:
        value = _as_float64(_big_endian(buf, p + 1, 8))
        return value, abs(value) <= LARGEST_VALUE, p + 9
    if c == 0xCA and p + 5 <= n:
        value = np.float64(_as_float32(np.uint32(_big_endian(buf, p + 1, 4))))
        return value, abs(value) <= LARGEST_VALUE, p + 5
    integer, ok, q = _integer(buf, p, n)
    return np.float64(integer), ok, q


@njit(cache=True, nogil=True, inline="always")
def _name_id(key, length, slots, hashes, name_start, name_end, arena, counts):
    """The id of the name whose tagged bytes are ``key[:length]``, added to the table when
    new; -1 when the table is full (``counts``: names, arena bytes used). A slot is four
    int64 — id (-1: empty), hash, arena start, length — so a probe reads one cache line."""
    h = FNV_OFFSET
    for k in range(length):
        h = (h ^ np.uint64(key[k])) * FNV_PRIME
    signed = np.int64(h)
    mask = len(slots) // 4 - 1
    slot = np.int64(h & np.uint64(mask))
    while slots[4 * slot] >= 0:
        if slots[4 * slot + 1] == signed and slots[4 * slot + 3] == length:
            a = slots[4 * slot + 2]
            k = 0
            while k < length and arena[a + k] == key[k]:
                k += 1
            if k == length:
                return slots[4 * slot]
        slot = (slot + 1) & mask
    i = counts[0]
    a = counts[1]
    if 2 * (i + 1) > len(slots) // 4 or i >= len(hashes) or a + length > len(arena):
        return -1
    arena[a : a + length] = key[:length]
    name_start[i], name_end[i] = a, a + length
    hashes[i] = h
    slots[4 * slot], slots[4 * slot + 1], slots[4 * slot + 2], slots[4 * slot + 3] = i, signed, a, length
    counts[0] = i + 1
    counts[1] = a + length
    return i


# over 80 lines: one state machine over the msgpack bytes; a call per value would cost more than the walk
@njit(cache=True, nogil=True)
def walk_records(buf, slots, hashes, name_start, name_end, arena, counts, last_seen, stamp,
                 indptr, ids, values, label_int, label_start, label_end, name_key):
    """Walk one message value (see the module docstring) into ``indptr`` / ``ids`` / ``values``
    (room for ``len(buf) // 2 + 2`` entries and ``len(buf) // 9 + 2`` records: a record
    it takes spans at least 9 bytes, an entry 2) and the labels (``label_start`` -1: the int
    ``label_int``; else the str ``buf[label_start:label_end]``).

    Returns ``(status, n_records, n_entries, stamp)``: ``OK``; ``BAIL`` (not the common shape:
    decode the message the general way); ``FULL`` (grow the name table, walk again).
    ``last_seen[id]`` holds the stamp of the last record that used name ``id`` (a name twice
    in one record is found by it); ``stamp`` goes up by one per record. ``name_key``: a uint8
    scratch buffer at least ``len(buf) + 9`` long."""
    n = len(buf)
    if n == 0:
        return BAIL, 0, 0, stamp
    n_records, p = _container(buf, 0, n, 0x90, 0x9F, 0xDC, 0xDD)
    single = n_records < 0
    if single:
        n_records, p = 1, 0
    indptr[0] = 0
    e = 0
    for r in range(n_records):
        n_keys, p = _container(buf, p, n, 0x80, 0x8F, 0xDE, 0xDF)
        if n_keys != 2:
            return BAIL, 0, 0, stamp
        stamp += 1
        seen_x, seen_y = False, False
        for _ in range(2):
            if p + 2 > n or buf[p] != 0xA1 or (buf[p + 1] != 120 and buf[p + 1] != 121):  # "x" / "y"
                return BAIL, 0, 0, stamp
            key = buf[p + 1]
            p += 2
            if p >= n:
                return BAIL, 0, 0, stamp
            if key == 121:
                if seen_y:
                    return BAIL, 0, 0, stamp
                seen_y = True
                start, end, q = _string(buf, p, n)
                if start >= 0:
                    label_start[r], label_end[r] = start, end
                    p = q
                    continue
                value, ok, q = _integer(buf, p, n)
                if not ok:
                    return BAIL, 0, 0, stamp
                label_int[r], label_start[r], label_end[r] = value, -1, -1
                p = q
                continue
            if seen_x:
                return BAIL, 0, 0, stamp
            seen_x = True
            n_features, p = _container(buf, p, n, 0x80, 0x8F, 0xDE, 0xDF)
            if n_features <= 0:
                return BAIL, 0, 0, stamp
            for _ in range(n_features):
                if p >= n:
                    return BAIL, 0, 0, stamp
                start, end, q = _string(buf, p, n)
                if start >= 0:
                    name_key[0] = TAG_STR
                    length = end - start + 1
                    for k in range(start, end):
                        name_key[k - start + 1] = buf[k]
                else:
                    int_name, ok, q = _integer(buf, p, n)
                    if not ok:
                        return BAIL, 0, 0, stamp
                    name_key[0] = TAG_INT
                    length = 9
                    for k in range(8):
                        name_key[1 + k] = (np.uint64(int_name) >> np.uint64(8 * k)) & np.uint64(0xFF)
                i = _name_id(name_key, length, slots, hashes, name_start, name_end, arena, counts)
                if i < 0:
                    return FULL, 0, 0, stamp
                if last_seen[i] == stamp:  # the same name twice in one record
                    return BAIL, 0, 0, stamp
                last_seen[i] = stamp
                p = q
                if p >= n:
                    return BAIL, 0, 0, stamp
                value, ok, p = _number(buf, p, n)
                if not ok:
                    return BAIL, 0, 0, stamp
                ids[e] = i
                values[e] = value
                e += 1
        indptr[r + 1] = e
    if p != n:  # trailing bytes: msgpack.unpackb refuses them
        return BAIL, 0, 0, stamp
    return OK, n_records, e, stamp


@njit(cache=True, nogil=True)
def rehash(hashes, name_start, name_end, n_names, slots):
    """Fill an empty (ids all -1), larger ``slots`` with the table's ``n_names`` names."""
    mask = len(slots) // 4 - 1
    for i in range(n_names):
        slot = np.int64(hashes[i] & np.uint64(mask))
        while slots[4 * slot] >= 0:
            slot = (slot + 1) & mask
        slots[4 * slot], slots[4 * slot + 1] = i, np.int64(hashes[i])
        slots[4 * slot + 2], slots[4 * slot + 3] = name_start[i], name_end[i] - name_start[i]
