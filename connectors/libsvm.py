"""LIBSVM / svmlight text (``label idx:value idx:value ... # comment``), parsed in bulk.

:func:`parse_libsvm_bytes` parses a whole buffer of lines in one compiled pass (numba):
no Python work per token. Each feature is named by its index *as written* (an int), so
``0``-based and ``1``-based files both work; the CSR matrix it returns has column
``idx`` for feature ``idx``. Labels that are integers (``3``, ``-1``, ``+1``) become
Python ints, any other label is kept as its text (``"1.5"``, ``"spam"``).

Values are parsed exactly: a value whose digits form an integer of at most 2**53 and whose
decimal exponent is within ±22 is converted in the compiled pass with one correctly rounded IEEE
operation (Clinger's fast path); any other value is handed to Python's ``float``. So
every value equals ``float(text)`` bit for bit.

A bad line does not stop the parse: it is reported with its line number and reason
(``malformed``, ``non-finite``, ``missing-label``, ``empty-features``) and left out.

>>> chunk = parse_libsvm_bytes(b"1 1:0.5 3:2\\n2 2:1\\n")
>>> chunk.labels, chunk.X.toarray().tolist()
([1, 2], [[0.0, 0.5, 0.0, 2.0], [0.0, 0.0, 1.0, 0.0]])
>>> bad = parse_libsvm_bytes(b"1 1:nan\\n2 2:x\\n3 3:1\\n")
>>> [(e.line, e.reason) for e in bad.errors], bad.labels
([(0, 'non-finite'), (1, 'malformed')], [3])
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import pathlib
from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

OPENERS = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}

# status codes of a line
OK, SKIP, MALFORMED, NON_FINITE, MISSING_LABEL, EMPTY_FEATURES = 0, 1, 2, 3, 4, 5
REASONS = {MALFORMED: "malformed", NON_FINITE: "non-finite", MISSING_LABEL: "missing-label", EMPTY_FEATURES: "empty-features"}
MESSAGES = {
    MALFORMED: "not a LIBSVM line (label idx:value ...)",
    NON_FINITE: "a value is NaN or infinite",
    MISSING_LABEL: "the line has no label",
    EMPTY_FEATURES: "the line has no features",
}

_POW10 = np.array([10.0**i for i in range(23)])
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


def compressed(path) -> bool:
    """Whether :func:`open_binary` decompresses this file (by its suffix)."""
    return pathlib.Path(path).suffix in OPENERS


def open_binary(path):
    """Open a file for reading bytes, decompressing by its suffix (.bz2, .gz, .xz)."""
    path = pathlib.Path(path)
    return OPENERS.get(path.suffix, open)(path, "rb")


@numba.njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True, nogil=True)
def fnv1a(buf, start, end):
    """FNV-1a 64-bit hash of ``buf[start:end]`` (a stable record hash for hold-out splits)."""
    h = _FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
    return h


@numba.njit(cache=True, nogil=True, inline="always")
def _digits(buf, i, n, max_digits):
    """The decimal integer at ``buf[i:]``: ``(value of its first max_digits digits,
    number of digits, end)``."""
    value = 0
    count = 0
    while i < n and 48 <= buf[i] <= 57:
        if count < max_digits:
            value = value * 10 + (np.int64(buf[i]) - 48)
        count += 1
        i += 1
    return value, count, i


@numba.njit(cache=True, nogil=True)
def _parse_number(buf, i, n, pow10):
    """Parse the decimal number that starts at ``buf[i]``, up to the first byte that cannot
    continue it (each byte is read once).

    Returns ``(value, status, end)``: status 0 = exact, 1 = needs Python's float (more than
    18 digits, a mantissa above 2**53 or a large exponent), 2 = not a number, 3 = NaN/inf spelled out;
    ``end`` is where parsing stopped (the caller checks that the token ends there)."""
    neg = False
    if buf[i] == 43 or buf[i] == 45:  # + -
        neg = buf[i] == 45
        i += 1
    if i < n and ((buf[i] | 32) == 105 or (buf[i] | 32) == 110):  # 'i' or 'n': inf, infinity, nan
        word = 0
        m = 0
        while i < n and not _ends_token(buf[i]) and m < 9:
            word = word * 256 + (buf[i] | 32)
            i += 1
            m += 1
        if word == 0x696E66 or word == 0x6E616E or word == 0x696E66696E697479:
            return 0.0, 3, i
        return 0.0, 2, i
    mantissa = 0  # every digit, leading zeros included; it cannot overflow within 18 digits
    first = i
    while i < n and 48 <= buf[i] <= 57:
        mantissa = mantissa * 10 + (np.int64(buf[i]) - 48)
        i += 1
    n_digits = i - first
    exponent = 0
    if i < n and buf[i] == 46:  # '.'
        i += 1
        first = i
        while i < n and 48 <= buf[i] <= 57:
            mantissa = mantissa * 10 + (np.int64(buf[i]) - 48)
            i += 1
        exponent = first - i
        n_digits += i - first
    if n_digits == 0:
        return 0.0, 2, i
    if i < n and (buf[i] | 32) == 101:  # e
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        e, n_exp, i = _digits(buf, i, n, 6)
        if n_exp == 0:
            return 0.0, 2, i
        if n_exp > 6:  # a long (maybe zero-padded) exponent: Python's float decides
            return 0.0, 1, i
        exponent += -e if eneg else e
    if n_digits > 18:
        return 0.0, 1, i
    if mantissa == 0:
        return -0.0 if neg else 0.0, 0, i
    # Clinger's fast path: an exact mantissa (<= 2**53) and an exact power of ten (<= 1e22)
    if mantissa > 9007199254740992 or exponent > 22 or exponent < -22:
        return 0.0, 1, i
    value = float(mantissa)
    value = value * pow10[exponent] if exponent >= 0 else value / pow10[-exponent]
    return -value if neg else value, 0, i


@numba.njit(cache=True, nogil=True, inline="always")
def _ends_token(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12 or c == 10 or c == 35


@numba.njit(cache=True, nogil=True)
def _parse(buf, n_lines, n_colons, pow10, with_hashes):
    """One pass over ``n_lines`` complete lines (``n_colons`` bounds the entries); a line
    ends at its newline, its record at a ``#``. See :func:`parse_libsvm_bytes`."""
    n = len(buf)
    line_start = np.empty(n_lines, np.int64)
    line_end = np.empty(n_lines, np.int64)
    status = np.zeros(n_lines, np.int8)
    label_start = np.zeros(n_lines, np.int64)
    label_end = np.zeros(n_lines, np.int64)
    label_int = np.zeros(n_lines, np.int64)
    label_is_int = np.zeros(n_lines, np.bool_)
    hashes = np.zeros(n_lines if with_hashes else 0, np.uint64)
    indptr = np.zeros(n_lines + 1, np.int64)
    indices = np.empty(n_colons, np.int64)
    data = np.empty(n_colons, np.float64)
    slow = np.zeros(n_colons, np.bool_)
    n_slow = 0
    nnz = 0
    pos = 0
    for line in range(n_lines):
        line_start[line] = pos
        i = pos
        while i < n and _is_space(buf[i]):
            i += 1
        row_start = nnz
        state = OK
        if i == n or buf[i] == 10 or buf[i] == 35:
            state = SKIP
        else:
            # label
            label_start[line] = i
            is_int = True
            value = 0
            negative = False
            j = i
            if buf[j] == 43 or buf[j] == 45:
                negative = buf[j] == 45
                j += 1
            n_digits = 0
            while j < n and not _ends_token(buf[j]):
                c = buf[j]
                if c == 58:
                    state = MISSING_LABEL
                if 48 <= c <= 57 and n_digits < 18:
                    value = value * 10 + (c - 48)
                    n_digits += 1
                else:
                    is_int = False
                j += 1
            label_end[line] = j
            label_is_int[line] = is_int and n_digits > 0
            label_int[line] = -value if negative else value
            last = j
            # idx:value pairs
            while state == OK:
                while j < n and _is_space(buf[j]):
                    j += 1
                if j == n or buf[j] == 10 or buf[j] == 35:
                    break
                index = 0
                k = j
                while k < n and 48 <= buf[k] <= 57:
                    index = index * 10 + (np.int64(buf[k]) - 48)  # wraps past 18 digits: rejected below
                    k += 1
                n_idx = k - j
                if n_idx == 0 or n_idx > 18 or k == n or buf[k] != 58:
                    state = MALFORMED
                    break
                k += 1
                if k == n or _ends_token(buf[k]):
                    state = MALFORMED
                    break
                # plain decimals ([sign]digits[.digits], at most 15 digits) are converted
                # here, written out in the loop: as an inlined call the same code ran at
                # half the speed. Anything else goes to _parse_number.
                start = k
                negative = buf[k] == 45
                if negative or buf[k] == 43:
                    k += 1
                mantissa = 0
                first = k
                while k < n and 48 <= buf[k] <= 57:
                    mantissa = mantissa * 10 + (np.int64(buf[k]) - 48)
                    k += 1
                n_digits = k - first
                n_fraction = 0
                if k < n and buf[k] == 46:  # '.'
                    k += 1
                    first = k
                    while k < n and 48 <= buf[k] <= 57:
                        mantissa = mantissa * 10 + (np.int64(buf[k]) - 48)
                        k += 1
                    n_fraction = k - first
                if (k == n or _ends_token(buf[k])) and 0 < n_digits + n_fraction <= 15:
                    number = float(mantissa) / pow10[n_fraction]  # exact operands: correctly rounded
                    number = -number if negative else number
                    kind = 0
                else:
                    number, kind, k = _parse_number(buf, start, n, pow10)
                if kind == 2 or (k < n and not _ends_token(buf[k])):
                    state = MALFORMED
                    break
                if kind == 3:
                    state = NON_FINITE
                    break
                indices[nnz] = index
                data[nnz] = number
                if kind == 1:  # Python converts it
                    slow[nnz] = True
                    n_slow += 1
                nnz += 1
                j = k
                last = k
            if state == OK and nnz == row_start:
                state = EMPTY_FEATURES
            if with_hashes and state == OK:
                hashes[line] = fnv1a(buf, i, last)
            i = j  # the record's bytes are read: look for the newline from where it stopped
        pos = i
        while pos < n and buf[pos] != 10:
            pos += 1
        line_end[line] = pos
        pos += 1  # past the newline
        if state != OK:
            nnz = row_start
            status[line] = state
        indptr[line + 1] = nnz
    return (line_start, line_end, status, label_start, label_end, label_int, label_is_int,
            hashes, indptr, indices[:nnz], data[:nnz], slow[:nnz], n_slow)


@numba.njit(cache=True, nogil=True)
def _value_spans(buf, line_start, line_end, indptr, slow, out_start, out_end):
    """Byte spans of the values flagged ``slow`` (for Python's float), in entry order."""
    m = 0
    for line in range(len(line_start)):
        lo, hi = indptr[line], indptr[line + 1]
        if lo == hi:
            continue
        entry = lo
        i = line_start[line]
        end = line_end[line]
        while i < end and entry < hi:
            if buf[i] == 58:
                j = i + 1
                while j < end and not (_is_space(buf[j]) or buf[j] == 35):
                    j += 1
                if slow[entry]:
                    out_start[m] = i + 1
                    out_end[m] = j
                    m += 1
                entry += 1
                i = j
            else:
                i += 1
    return m


class LineError(NamedTuple):
    """A line that is not a record: its index in the buffer, reason, and byte span."""

    line: int
    reason: str
    message: str
    start: int
    end: int


class ParsedChunk(NamedTuple):
    """Records of a buffer of LIBSVM lines (bad lines left out and listed in ``errors``)."""

    X: sp.csr_matrix
    labels: list
    label_array: np.ndarray | None  # the labels as int64 when they are all integers
    lines: np.ndarray  # index of each record's line in the buffer
    hashes: np.ndarray  # FNV-1a of each record's text (white space and comment stripped)
    line_ends: np.ndarray  # byte offset just past each line of the buffer (newline included)
    errors: list


def parse_libsvm_bytes(buf, width: int = 0, with_hashes: bool = True) -> ParsedChunk:
    """Parse complete LIBSVM lines held in ``buf`` (bytes or a memoryview; the last line may lack its
    newline). ``width`` is a minimum number of CSR columns; ``with_hashes=False`` skips
    the record hashes (zeros), which only hash hold-out splits need."""
    array = np.frombuffer(buf, np.uint8)
    n_lines = int(np.count_nonzero(array == 10)) + (1 if len(array) and array[-1] != 10 else 0)
    (line_start, line_end, status, label_start, label_end, label_int, label_is_int,
     hashes, indptr, indices, data, slow, n_slow) = _parse(array, n_lines, int(np.count_nonzero(array == 58)), _POW10, with_hashes)
    if n_slow:
        starts, ends = np.empty(n_slow, np.int64), np.empty(n_slow, np.int64)
        _value_spans(array, line_start, line_end, indptr, slow, starts, ends)
        values = [float(bytes(buf[s:e])) for s, e in zip(starts.tolist(), ends.tolist())]
        data[slow] = values
        bad = ~np.isfinite(data)
        if bad.any():  # e.g. 1e999: finite text, infinite value
            row_of = np.repeat(np.arange(len(status)), np.diff(indptr))
            status[np.unique(row_of[bad])] = NON_FINITE
    good = status == OK
    errors = [
        LineError(int(i), REASONS[int(status[i])], MESSAGES[int(status[i])], int(line_start[i]), int(line_end[i]))
        for i in np.flatnonzero(~good & (status != SKIP))
    ]
    lines = np.flatnonzero(good)
    lengths = np.diff(indptr)
    if errors:  # drop the entries of lines turned bad after parsing (none otherwise)
        keep = np.repeat(good, lengths)
        indices, data, lengths = indices[keep], data[keep], lengths[good]
    else:
        lengths = lengths[good]
    new_indptr = np.zeros(len(lines) + 1, np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    n_cols = max(width, int(indices.max()) + 1 if len(indices) else 0)
    X = sp.csr_matrix((data, indices, new_indptr), shape=(len(lines), n_cols))
    is_int = label_is_int[lines]
    label_array = label_int[lines] if is_int.all() else None
    if label_array is not None:
        labels = label_array.tolist()
    else:
        ints = label_int[lines].tolist()
        labels = [
            ints[r] if is_int[r] else bytes(buf[label_start[i] : label_end[i]]).decode("utf-8", "replace")
            for r, i in enumerate(lines.tolist())
        ]
    line_ends = np.minimum(line_end + 1, len(buf))
    hashes = hashes[lines] if with_hashes else np.zeros(len(lines), np.uint64)
    return ParsedChunk(X, labels, label_array, lines, hashes, line_ends, errors)


def read_libsvm(path) -> tuple[sp.csr_matrix, list]:
    """Read a whole LIBSVM file (plain or compressed) into a CSR matrix and its labels.
    A bad line raises a ``ValueError`` naming its line number."""
    with open_binary(path) as f:
        chunk = parse_libsvm_bytes(f.read())
    if chunk.errors:
        first = chunk.errors[0]
        raise ValueError(f"{path}: line {first.line + 1}: {first.reason}: {first.message}")
    return chunk.X, chunk.labels
