"""LIBSVM / svmlight text (``label idx:value idx:value ... # comment``), parsed in bulk.

:func:`parse_libsvm_bytes` parses a whole buffer of lines in one compiled pass
(:func:`streamlearn.kernels.text.parse_libsvm`): no Python work per token. Each feature is
named by its index *as written* (an int), so ``0``-based and ``1``-based files both work;
the CSR batch it returns (a :class:`~streamlearn.batches.CsrBatch`, no SciPy) has column
``idx`` for feature ``idx``. Labels that are integers (``3``, ``-1``, ``+1``) become
Python ints, any other label is kept as its text (``"1.5"``, ``"spam"``).

Values are parsed exactly, in the compiled pass: a value whose digits form an integer of at
most 2**53 and whose decimal exponent is within ±22 with one correctly rounded IEEE operation
(Clinger's fast path); any other value of at most 18 significant digits (Python's 17-digit
``repr`` of a float among them) by the Eisel-Lemire algorithm
(:func:`streamlearn.kernels.decimal.eisel_lemire`). The rare rest (more digits, subnormals,
overflows, exact halfway cases) is handed to Python's ``float``. So every value equals
``float(text)`` bit for bit.

A bad line does not stop the parse: it is reported with its line number and reason
(``malformed``, ``non-finite``, ``missing-label``, ``empty-features``, ``label-too-long``) and
left out.

>>> chunk = parse_libsvm_bytes(b"1 1:0.5 3:2\\n2 2:1\\n")
>>> chunk.labels, chunk.X.toarray().tolist()
([1, 2], [[0.0, 0.5, 0.0, 2.0], [0.0, 0.0, 1.0, 0.0]])
>>> bad = parse_libsvm_bytes(b"1 1:nan\\n2 2:x\\n3 3:1\\n")
>>> [(e.line, e.reason) for e in bad.errors], bad.labels
([(0, 'non-finite'), (1, 'malformed')], [3])
"""

from __future__ import annotations

import importlib
import pathlib
from typing import NamedTuple

import numpy as np

from streamlearn.batches import CsrBatch
from streamlearn.kernels import compiled
from streamlearn.kernels.codes import (BAD_LABEL_TEXT, DUPLICATE_FEATURE, EMPTY_FEATURES, LABEL_TOO_LONG, LARGEST_VALUE, MALFORMED,
                                      MAX_LABEL_LENGTH, MISSING_LABEL, NON_FINITE, OK, SKIP)

#: compressed suffixes and the module opening them (imported on first use: a plain file's start-up skips them)
OPENERS = {".bz2": "bz2", ".gz": "gzip", ".xz": "lzma"}
_text = compiled("text")

REASONS = {MALFORMED: "malformed", NON_FINITE: "non-finite", MISSING_LABEL: "missing-label", EMPTY_FEATURES: "empty-features",
           LABEL_TOO_LONG: "label-too-long", DUPLICATE_FEATURE: "duplicate-feature", BAD_LABEL_TEXT: "malformed"}
MESSAGES = {
    MALFORMED: "not a LIBSVM line (label idx:value ...)",
    NON_FINITE: f"a value is NaN, infinite or beyond ±{LARGEST_VALUE:g}",
    DUPLICATE_FEATURE: "a feature index appears twice on the line",
    BAD_LABEL_TEXT: "the label is not UTF-8 text",
    MISSING_LABEL: "the line has no label",
    EMPTY_FEATURES: "the line has no features",
    LABEL_TOO_LONG: f"the label is longer than {MAX_LABEL_LENGTH} bytes",
}

POW10 = np.array([10.0**i for i in range(23)])


def compressed(path) -> bool:
    """Whether :func:`open_binary` decompresses this file (by its suffix)."""
    return pathlib.Path(path).suffix in OPENERS


def open_binary(path):
    """Open a file for reading bytes, decompressing by its suffix (.bz2, .gz, .xz)."""
    path = pathlib.Path(path)
    module = OPENERS.get(path.suffix)
    return importlib.import_module(module).open(path, "rb") if module else open(path, "rb")


class LineError(NamedTuple):
    """A line that is not a record: its index in the buffer, reason, and byte span."""

    line: int
    reason: str
    message: str
    start: int
    end: int


class ParsedChunk(NamedTuple):
    """Records of a buffer of LIBSVM lines (bad lines left out and listed in ``errors``)."""

    X: CsrBatch
    labels: list
    label_array: np.ndarray | None  # the labels as int64 when they are all integers
    lines: np.ndarray  # index of each record's line in the buffer
    hashes: np.ndarray  # FNV-1a of each record's text (white space and comment stripped)
    line_ends: np.ndarray  # byte offset just past each line of the buffer (newline included)
    errors: list


def parse_libsvm_bytes(buf, width: int = 0, with_hashes: bool = True, labels_optional: bool = False) -> ParsedChunk:
    """Parse complete LIBSVM lines held in ``buf`` (bytes or a memoryview; the last line may lack its
    newline). ``width`` is a minimum number of CSR columns; ``with_hashes=False`` skips
    the record hashes (zeros), which only hash hold-out splits need. ``labels_optional``: a
    line may start with its first feature (``3:11 4:16``, data to predict); its label is ``None``.

    >>> parse_libsvm_bytes(b"3:11 4:16\\n2 1:1\\n", labels_optional=True).labels
    [None, 2]
    """
    array = np.frombuffer(buf, np.uint8)
    (line_start, line_end, status, label_start, label_end, label_int, label_is_int,
     hashes, indptr, indices, data, slow, n_slow) = _text.parse_libsvm(array, POW10, bool(with_hashes), bool(labels_optional))
    if n_slow:
        starts, ends = np.empty(n_slow, np.int64), np.empty(n_slow, np.int64)
        _text.value_spans(array, line_start, line_end, indptr, slow, starts, ends)
        values = [float(bytes(buf[s:e])) for s, e in zip(starts.tolist(), ends.tolist())]
        data[slow] = values
        bad = ~(np.abs(data) <= LARGEST_VALUE)
        if bad.any():  # e.g. 1e999: finite text, infinite value
            row_of = np.repeat(np.arange(len(status)), np.diff(indptr))
            status[np.unique(row_of[bad])] = NON_FINITE
    _check_label_text(buf, status, label_start, label_end, label_is_int)
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
    needed = int(indices.max()) + 1 if len(indices) else 0
    X = CsrBatch(new_indptr, indices, data, max(width, needed), needed)  # validated: finite, indices from 0
    is_int = label_is_int[lines]
    label_array = label_int[lines] if is_int.all() else None
    if label_array is not None:
        labels = label_array.tolist()
    else:
        ints = label_int[lines].tolist()
        labels = [
            ints[r] if is_int[r] else (bytes(buf[label_start[i] : label_end[i]]).decode("utf-8") or None)
            for r, i in enumerate(lines.tolist())
        ]
    line_ends = np.minimum(line_end + 1, len(buf))
    hashes = hashes[lines] if with_hashes else np.zeros(len(lines), np.uint64)
    return ParsedChunk(X, labels, label_array, lines, hashes, line_ends, errors)


def _check_label_text(buf, status, label_start, label_end, label_is_int) -> None:
    """Mark the lines whose label is not UTF-8 (BAD_LABEL_TEXT): decoded with replacement
    characters, two different byte strings became one class."""
    text = np.flatnonzero((status == OK) & ~label_is_int)
    if not len(text):
        return
    ascii_only = not (np.frombuffer(buf, np.uint8) & 0x80).any()
    if ascii_only:
        return
    for i in text.tolist():
        try:
            bytes(buf[label_start[i] : label_end[i]]).decode("utf-8")
        except UnicodeDecodeError:
            status[i] = BAD_LABEL_TEXT


def read_libsvm(path) -> tuple["scipy.sparse.csr_matrix", list]:
    """Read a whole LIBSVM file (plain or compressed) into a SciPy CSR matrix and its
    labels. A bad line raises a ``ValueError`` naming its line number."""
    with open_binary(path) as f:
        chunk = parse_libsvm_bytes(f.read())
    if chunk.errors:
        first = chunk.errors[0]
        raise ValueError(f"{path}: line {first.line + 1}: {first.reason}: {first.message}")
    return chunk.X.tocsr(), chunk.labels
