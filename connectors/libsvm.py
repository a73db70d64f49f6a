"""LIBSVM / svmlight text (``label idx:value idx:value ... # comment``), parsed in bulk.

:func:`parse_libsvm_bytes` parses a whole buffer of lines in one compiled pass (numba):
no Python work per token. Each feature is named by its index *as written* (an int), so
``0``-based and ``1``-based files both work; the CSR matrix it returns has column
``idx`` for feature ``idx``. Labels that are integers (``3``, ``-1``, ``+1``) become
Python ints, any other label is kept as its text (``"1.5"``, ``"spam"``).

Values are parsed exactly: a value with at most 15 significant digits and a decimal
exponent within ±22 is converted in the compiled pass with one correctly rounded IEEE
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


def open_binary(path):
    """Open a file for reading bytes, decompressing by its suffix (.bz2, .gz, .xz)."""
    path = pathlib.Path(path)
    return OPENERS.get(path.suffix, open)(path, "rb")


@numba.njit(cache=True)
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@numba.njit(cache=True)
def fnv1a(buf, start, end):
    """FNV-1a 64-bit hash of ``buf[start:end]`` (a stable record hash for hold-out splits)."""
    h = _FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
    return h


@numba.njit(cache=True)
def _parse_number(buf, i, end, pow10):
    """Parse a decimal number at ``buf[i:end]`` (the whole token).

    Returns ``(value, status)``: status 0 = exact, 1 = needs Python's float (too many
    digits or a large exponent), 2 = not a number, 3 = NaN/inf spelled out."""
    neg = False
    if buf[i] == 43 or buf[i] == 45:  # + -
        neg = buf[i] == 45
        i += 1
    if i < end and (buf[i] | 32) in (105, 110):  # 'i' or 'n': inf, infinity, nan
        word = 0
        n = 0
        while i < end and n < 8:
            word = word * 256 + (buf[i] | 32)
            i += 1
            n += 1
        if i == end and (word == 0x696E66 or word == 0x6E616E or word == 0x696E66696E697479):
            return 0.0, 3
        return 0.0, 2
    mantissa = 0
    digits = 0
    exponent = 0
    seen_digit = False
    while i < end and 48 <= buf[i] <= 57:
        seen_digit = True
        if mantissa or buf[i] != 48:
            if digits < 18:
                mantissa = mantissa * 10 + (buf[i] - 48)
            else:
                exponent += 1
            digits += 1
        i += 1
    if i < end and buf[i] == 46:  # .
        i += 1
        while i < end and 48 <= buf[i] <= 57:
            seen_digit = True
            if mantissa or buf[i] != 48:
                if digits < 18:
                    mantissa = mantissa * 10 + (buf[i] - 48)
                    exponent -= 1
                digits += 1
            else:
                exponent -= 1
            i += 1
    if not seen_digit:
        return 0.0, 2
    if i < end and (buf[i] | 32) == 101:  # e
        i += 1
        eneg = False
        if i < end and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        if i == end:
            return 0.0, 2
        e = 0
        while i < end and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            i += 1
        exponent += -e if eneg else e
    if i != end:
        return 0.0, 2
    if mantissa == 0:
        return -0.0 if neg else 0.0, 0
    if digits > 15 or exponent > 22 or exponent < -22:
        return 0.0, 1
    value = float(mantissa)
    value = value * pow10[exponent] if exponent >= 0 else value / pow10[-exponent]
    return -value if neg else value, 0


@numba.njit(cache=True)
def _parse(buf, pow10):
    """One pass over complete lines. See :func:`parse_libsvm_bytes`."""
    n = len(buf)
    n_lines = 0
    n_colons = 0
    for i in range(n):
        if buf[i] == 10:
            n_lines += 1
        elif buf[i] == 58:
            n_colons += 1
    if n and buf[n - 1] != 10:
        n_lines += 1
    line_start = np.empty(n_lines, np.int64)
    line_end = np.empty(n_lines, np.int64)
    status = np.zeros(n_lines, np.int8)
    label_start = np.zeros(n_lines, np.int64)
    label_end = np.zeros(n_lines, np.int64)
    label_int = np.zeros(n_lines, np.int64)
    label_is_int = np.zeros(n_lines, np.bool_)
    hashes = np.zeros(n_lines, np.uint64)
    indptr = np.zeros(n_lines + 1, np.int64)
    indices = np.empty(n_colons, np.int64)
    data = np.empty(n_colons, np.float64)
    slow = np.zeros(n_colons, np.bool_)
    n_slow = 0
    nnz = 0
    pos = 0
    for line in range(n_lines):
        start = pos
        while pos < n and buf[pos] != 10:
            pos += 1
        end = pos
        pos += 1  # past the newline
        line_start[line] = start
        line_end[line] = end
        # the record: strip the comment and surrounding white space
        stop = start
        while stop < end and buf[stop] != 35:  # '#'
            stop += 1
        while stop > start and _is_space(buf[stop - 1]):
            stop -= 1
        i = start
        while i < stop and _is_space(buf[i]):
            i += 1
        if i == stop:
            status[line] = SKIP
            indptr[line + 1] = nnz
            continue
        hashes[line] = fnv1a(buf, i, stop)
        # label
        label_start[line] = i
        is_int = True
        value = 0
        negative = False
        has_colon = False
        j = i
        if buf[j] == 43 or buf[j] == 45:
            negative = buf[j] == 45
            j += 1
        n_digits = 0
        while j < stop and not _is_space(buf[j]):
            c = buf[j]
            if c == 58:
                has_colon = True
            if 48 <= c <= 57 and n_digits < 18:
                value = value * 10 + (c - 48)
                n_digits += 1
            else:
                is_int = False
            j += 1
        label_end[line] = j
        if has_colon:
            status[line] = MISSING_LABEL
            indptr[line + 1] = nnz
            continue
        label_is_int[line] = is_int and n_digits > 0
        label_int[line] = -value if negative else value
        # idx:value pairs
        row_start = nnz
        state = OK
        i = j
        while i < stop:
            while i < stop and _is_space(buf[i]):
                i += 1
            if i == stop:
                break
            k = i
            index = 0
            n_idx = 0
            while k < stop and 48 <= buf[k] <= 57:
                if n_idx < 18:
                    index = index * 10 + (buf[k] - 48)
                n_idx += 1
                k += 1
            if n_idx == 0 or n_idx > 18 or k == stop or buf[k] != 58:
                state = MALFORMED
                break
            k += 1
            v_start = k
            while k < stop and not _is_space(buf[k]):
                k += 1
            if k == v_start:
                state = MALFORMED
                break
            number, kind = _parse_number(buf, v_start, k, pow10)
            if kind == 2:
                state = MALFORMED
                break
            if kind == 3:
                state = NON_FINITE
                break
            indices[nnz] = index
            data[nnz] = number
            if kind == 1:  # Python converts it; remember where the text is
                slow[nnz] = True
                n_slow += 1
            nnz += 1
            i = k
        if state == OK and nnz == row_start:
            state = EMPTY_FEATURES
        if state != OK:
            nnz = row_start
            status[line] = state
        indptr[line + 1] = nnz
    return (line_start, line_end, status, label_start, label_end, label_int, label_is_int,
            hashes, indptr, indices[:nnz], data[:nnz], slow[:nnz], n_slow)


@numba.njit(cache=True)
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
    lines: np.ndarray  # index of each record's line in the buffer
    hashes: np.ndarray  # FNV-1a of each record's text (white space and comment stripped)
    line_ends: np.ndarray  # byte offset just past each line of the buffer (newline included)
    errors: list


def parse_libsvm_bytes(buf, width: int = 0) -> ParsedChunk:
    """Parse complete LIBSVM lines held in ``buf`` (bytes; the last line may lack its
    newline). ``width`` is a minimum number of CSR columns."""
    array = np.frombuffer(buf, np.uint8)
    (line_start, line_end, status, label_start, label_end, label_int, label_is_int,
     hashes, indptr, indices, data, slow, n_slow) = _parse(array, _POW10)
    if n_slow:
        starts, ends = np.empty(n_slow, np.int64), np.empty(n_slow, np.int64)
        _value_spans(array, line_start, line_end, indptr, slow, starts, ends)
        values = [float(buf[s:e]) for s, e in zip(starts.tolist(), ends.tolist())]
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
    if is_int.all():
        labels = label_int[lines].tolist()
    else:
        ints = label_int[lines].tolist()
        labels = [
            ints[r] if is_int[r] else buf[label_start[i] : label_end[i]].decode("utf-8", "replace")
            for r, i in enumerate(lines.tolist())
        ]
    line_ends = np.minimum(line_end + 1, len(buf))
    return ParsedChunk(X, labels, lines, hashes[lines], line_ends, errors)


def read_libsvm(path) -> tuple[sp.csr_matrix, list]:
    """Read a whole LIBSVM file (plain or compressed) into a CSR matrix and its labels.
    A bad line raises a ``ValueError`` naming its line number."""
    with open_binary(path) as f:
        chunk = parse_libsvm_bytes(f.read())
    if chunk.errors:
        first = chunk.errors[0]
        raise ValueError(f"{path}: line {first.line + 1}: {first.reason}: {first.message}")
    return chunk.X, chunk.labels
