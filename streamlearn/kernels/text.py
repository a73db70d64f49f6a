"""Compiled text kernels of the LIBSVM / svmlight reader (``streamlearn.connectors.libsvm`` is the
Python side): the bulk parser, the record hash and the line counter that cuts a stream
into pieces (the numbers' text to float64: :mod:`streamlearn.kernels.decimal`). Plain arrays in, plain arrays out; no Python objects, no I/O.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .codes import (DUPLICATE_FEATURE, EMPTY_FEATURES, LABEL_TOO_LONG, LARGEST_VALUE, MALFORMED, MAX_LABEL_LENGTH, MISSING_LABEL,
                    NON_FINITE, OK, SKIP)
from .decimal import INT_POW10, decimal_to_float, digits8, ends_token, parse_number

FNV_OFFSET = np.uint64(14695981039346656037)
FNV_PRIME = np.uint64(1099511628211)


@njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True)
def fnv1a(buf, start, end):
    """FNV-1a 64-bit hash of ``buf[start:end]`` (a stable record hash for hold-out splits)."""
    h = FNV_OFFSET
    for i in range(start, end):
        h = (h ^ np.uint64(buf[i])) * FNV_PRIME
    return h


@njit(cache=True, nogil=True, inline="always")
def _is_qid(buf, j, n):
    return j + 3 < n and buf[j] == 113 and buf[j + 1] == 105 and buf[j + 2] == 100 and buf[j + 3] == 58  # "qid:"


@njit(cache=True, nogil=True)
def _repeats(indices):
    """Whether an index appears twice (a line whose indices do not increase)."""
    ordered = np.sort(indices)
    for p in range(1, len(ordered)):
        if ordered[p] == ordered[p - 1]:
            return True
    return False


# over 80 lines: one state machine over the bytes; a call per token would cost more than the parse
@njit(cache=True, nogil=True)
def parse_libsvm(buf, pow10, with_hashes, labels_optional):
    """Parse the lines of ``buf`` (the last may lack its newline); a line ends at its
    newline, its record at a ``#``. See :func:`streamlearn.connectors.libsvm.parse_libsvm_bytes`.

    The per-line outputs are sized by a vectorised count of the newlines; the entries by
    the buffer's length / 4 (an entry ``i:v`` and its separator take at least 4 bytes): the
    part of that allocation the entries do not fill is never touched, so it costs address
    space, not memory or time (counting the colons too cost more than all the parsing after
    it saved: two counts in one loop do not vectorise)."""
    n = len(buf)
    n_lines = _count_newlines(buf, 0, n) + (1 if n and buf[n - 1] != 10 else 0)
    n_colons = n // 4 + 1
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
            while j < n and not ends_token(buf[j]):
                c = buf[j]
                if c == 58:
                    state = MISSING_LABEL
                if 48 <= c <= 57 and n_digits < 18:
                    value = value * 10 + (c - 48)
                    n_digits += 1
                else:
                    is_int = False
                j += 1
            if state == MISSING_LABEL and labels_optional:  # an unlabelled line: its first token is a feature
                state = OK
                j = i
                is_int = False
            label_end[line] = j
            if j - label_start[line] > MAX_LABEL_LENGTH:
                state = LABEL_TOO_LONG
            label_is_int[line] = is_int and n_digits > 0
            label_int[line] = -value if negative else value
            last = j
            previous = -1  # the line's last index: while they increase, no index can repeat
            increasing = True
            # idx:value pairs
            while state == OK:
                while j < n and _is_space(buf[j]):
                    j += 1
                if j == n or buf[j] == 10 or buf[j] == 35:
                    break
                if _is_qid(buf, j, n):  # SVMlight's query id (ranking data): not a feature, skipped as scikit-learn does
                    while j < n and not ends_token(buf[j]):
                        j += 1
                    last = j
                    continue
                # digits: eight at a time where eight bytes remain (digits8), byte by byte past
                # them or near the end. Written out three times (index, integer part, fraction)
                # on purpose: one helper doing both steps ran the whole parser at half the speed,
                # whether numba inlined it or LLVM called it (JIT timings on news20 and MNIST)
                index = 0
                k = j
                if k + 8 <= n:
                    index, k8 = digits8(buf, k)
                    k += k8
                    if k8 == 8:
                        while k < n and 48 <= buf[k] <= 57:
                            index = index * 10 + (np.int64(buf[k]) - 48)  # wraps past 18 digits: rejected below
                            k += 1
                else:
                    while k < n and 48 <= buf[k] <= 57:
                        index = index * 10 + (np.int64(buf[k]) - 48)
                        k += 1
                n_idx = k - j
                if n_idx == 0 or n_idx > 18 or k == n or buf[k] != 58:
                    state = MALFORMED
                    break
                k += 1
                if k == n or ends_token(buf[k]):
                    state = MALFORMED
                    break
                # plain decimals ([sign]digits[.digits], at most 15 digits) are converted
                # here, written out in the loop as the index above. Anything else goes to
                # parse_number.
                start = k
                negative = buf[k] == 45
                if negative or buf[k] == 43:
                    k += 1
                mantissa = 0
                first = k
                if k + 8 <= n:
                    mantissa, k8 = digits8(buf, k)
                    k += k8
                    if k8 == 8:
                        while k < n and 48 <= buf[k] <= 57:
                            mantissa = mantissa * 10 + (np.int64(buf[k]) - 48)
                            k += 1
                else:
                    while k < n and 48 <= buf[k] <= 57:
                        mantissa = mantissa * 10 + (np.int64(buf[k]) - 48)
                        k += 1
                n_digits = k - first
                n_fraction = 0
                if k < n and buf[k] == 46:  # '.'
                    k += 1
                    first = k
                    if k + 8 <= n:
                        fraction, k8 = digits8(buf, k)
                        mantissa = mantissa * INT_POW10[k8] + fraction
                        k += k8
                        if k8 == 8:
                            while k < n and 48 <= buf[k] <= 57:
                                mantissa = mantissa * 10 + (np.int64(buf[k]) - 48)
                                k += 1
                    else:
                        while k < n and 48 <= buf[k] <= 57:
                            mantissa = mantissa * 10 + (np.int64(buf[k]) - 48)
                            k += 1
                    n_fraction = k - first
                ends = k == n or ends_token(buf[k])
                if ends and 0 < n_digits + n_fraction <= 15:
                    number = float(mantissa) / pow10[n_fraction]  # exact operands: correctly rounded
                    number = -number if negative else number
                    kind = 0
                elif ends and n_digits + n_fraction <= 18 and mantissa > 0:  # 16-18 digits: no int64 overflow
                    number, decided = decimal_to_float(mantissa, -n_fraction, pow10)
                    number = -number if negative else number
                    kind = 0 if decided else 1
                else:
                    number, kind, k = parse_number(buf, start, n, pow10)
                if kind == 2 or (k < n and not ends_token(buf[k])):
                    state = MALFORMED
                    break
                if kind == 3 or (kind == 0 and not abs(number) <= LARGEST_VALUE):
                    state = NON_FINITE
                    break
                increasing &= index > previous
                previous = index
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
            if state == OK and not increasing and _repeats(indices[row_start:nnz]):  # summing them let one line outweigh all
                state = DUPLICATE_FEATURE
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


@njit(cache=True, nogil=True)
def value_spans(buf, line_start, line_end, indptr, slow, out_start, out_end):
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


@njit(cache=True, nogil=True)
def _count_newlines(array, lo, hi):
    """Newlines in ``array[lo:hi]``: a branch-free sum, which LLVM vectorises (~6 GB/s here;
    the same count inside a loop with an early exit ran at 1.4 GB/s)."""
    count = 0
    for c in array[lo:hi]:
        count += c == 10
    return count


@njit(cache=True, nogil=True)
def count_lines(array, start, max_lines):
    """``(end just past the max_lines-th newline at or after start, or -1; newlines seen,
    end just past the last one seen)``: counts 4 KiB blocks at vector speed, and goes byte
    by byte only through the block that holds the max_lines-th newline."""
    count = 0
    n = len(array)
    i = start
    while i + 4096 <= n:
        block = _count_newlines(array, i, i + 4096)
        if count + block >= max_lines:
            break
        count += block
        i += 4096
    while i < n:
        if array[i] == 10:
            count += 1
            if count == max_lines:
                return i + 1, count, i + 1
        i += 1
    last_end = n
    while last_end > start and array[last_end - 1] != 10:
        last_end -= 1
    return -1, count, last_end
