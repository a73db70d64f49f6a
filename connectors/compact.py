"""The compact batch format: one Kafka message (or one object of a msgpack file) carries a
batch of records as CSR arrays, decoded with NumPy — no Python object per feature.

Format ``streamlearn-csr``, version 1: a msgpack map

====================  ======================================================================
``"format"``          ``"streamlearn-csr"``
``"version"``         ``1``
``"indptr"``          bin: ``n_rows + 1`` little-endian int64 row pointers (0 first, never decreasing,
                      the last equal to the number of entries)
``"indices"``         bin: little-endian int32 feature ids, one per entry (column ``j`` is feature
                      ``j``, an integer name as in LIBSVM; named features go in dict records)
``"data"``            bin: little-endian float64 values, one per entry
``"y"``               bin: ``n_rows`` little-endian int64 labels, *or* a list of labels (str, int,
                      bool, finite float; ``None`` for an unlabelled record); absent: all unlabelled
``"w"``               optional bin: ``n_rows`` little-endian float64 weights (finite, ``>= 0``); absent:
                      every row weighs 1
====================  ======================================================================

Validation is as strict as for the other formats: a message whose structure is wrong (a
missing or mistyped key, arrays of the wrong lengths, row pointers that decrease) is one dead
letter, whole; a row with a NaN, infinite or too large value, a negative feature id, no entry, a bad label
or a bad weight is a dead letter by itself (its bytes: the row as a msgpack dict record), and the other rows of
the message are learned.

>>> message = encode_batch(np.array([0, 2, 3]), np.array([0, 5, 1]), np.array([1.0, 0.5, 2.0]), np.array([7, 8]))
>>> rows = decode_batch(msgpack.unpackb(message), labelled=True)
>>> rows.X.toarray().tolist(), rows.labels.tolist(), rows.dead
([[1.0, 0.0, 0.0, 0.0, 0.0, 0.5], [0.0, 2.0, 0.0, 0.0, 0.0, 0.0]], [7, 8], [])
"""

from __future__ import annotations

from typing import NamedTuple

import msgpack
import numpy as np

from streamlearn.batches import CsrBatch
from streamlearn.kernels.codes import LARGEST_VALUE

from .records import RecordError, check_label, labels_out, record_hash

FORMAT_NAME = "streamlearn-csr"
VERSION = 1
_INDPTR, _INDICES, _DATA, _LABELS, _WEIGHTS = np.dtype("<i8"), np.dtype("<i4"), np.dtype("<f8"), np.dtype("<i8"), np.dtype("<f8")
_INT32_MAX = np.iinfo(np.int32).max


def is_compact(obj) -> bool:
    """Whether a decoded message is a compact batch (rather than a dict record or a list of them)."""
    return isinstance(obj, dict) and obj.get("format") == FORMAT_NAME


def encode_batch(indptr, indices, data, y=None, w=None) -> bytes:
    """One compact message from CSR arrays, labels (an int array, a list of labels, or
    ``None``) and weights (``None``: all 1); what producers send. Raises ``ValueError`` for arrays
    that do not fit the format."""
    indptr, indices, data = np.asarray(indptr), np.asarray(indices), np.asarray(data)
    if indptr.ndim != 1 or len(indptr) < 1 or indptr[0] != 0 or indptr[-1] != len(indices) or len(indices) != len(data):
        raise ValueError("indptr, indices and data do not describe a CSR matrix")
    if len(indices) and (indices.min() < 0 or indices.max() > _INT32_MAX):
        raise ValueError(f"feature ids must be in 0..{_INT32_MAX}")
    message = {"format": FORMAT_NAME, "version": VERSION, "indptr": indptr.astype(_INDPTR).tobytes(),
               "indices": indices.astype(_INDICES).tobytes(), "data": data.astype(_DATA).tobytes()}
    if y is not None:
        if len(y) != len(indptr) - 1:
            raise ValueError(f"{len(y)} labels for {len(indptr) - 1} rows")
        labels = np.asarray(y) if not isinstance(y, list) else None
        if labels is not None and labels.dtype.kind in "iu":
            message["y"] = labels.astype(_LABELS).tobytes()
        else:
            message["y"] = [v.item() if isinstance(v, np.generic) else v for v in (y if isinstance(y, list) else labels.tolist())]
    if w is not None:
        if len(w) != len(indptr) - 1:
            raise ValueError(f"{len(w)} weights for {len(indptr) - 1} rows")
        message["w"] = np.asarray(w, _WEIGHTS).tobytes()
    return msgpack.packb(message, use_bin_type=True)


def encode_messages(X, y=None, rows_per_message: int = 1000, w=None):
    """Compact messages of ``rows_per_message`` rows each from a SciPy CSR matrix (or a
    :class:`~streamlearn.batches.CsrBatch`), its labels and its weights.

    >>> import scipy.sparse as sp
    >>> [len(m) > 0 for m in encode_messages(sp.csr_matrix(np.eye(3)), [0, 1, 2], rows_per_message=2)]
    [True, True]
    """
    if int(rows_per_message) < 1:
        raise ValueError(f"rows_per_message must be positive, got {rows_per_message!r}")
    n = X.shape[0]
    for start in range(0, n, rows_per_message):
        stop = min(start + rows_per_message, n)
        lo, hi = X.indptr[start], X.indptr[stop]
        labels = None if y is None else y[start:stop]
        yield encode_batch(X.indptr[start : stop + 1] - lo, X.indices[lo:hi], X.data[lo:hi], labels,
                           None if w is None else w[start:stop])


class DecodedRows(NamedTuple):
    """The valid rows of a compact message and its bad ones."""

    X: CsrBatch  # the valid rows
    labels: object  # int64 array or list (``None`` entries: unlabelled)
    rows: np.ndarray  # index in the message of each valid row
    hashes: np.ndarray  # uint64 record hashes of the valid rows (zeros without ``with_hashes``)
    dead: list  # (row index or None for the whole message, reason, message, raw bytes)
    weights: np.ndarray | None = None  # float64 weights of the valid rows (None: all 1)


def _array(obj: dict, key: str, dtype: np.dtype) -> np.ndarray:
    value = obj.get(key)
    if not isinstance(value, bytes):
        raise RecordError("malformed", f"compact batch: {key!r} must be binary {dtype.name} data")
    if len(value) % dtype.itemsize:
        raise RecordError("malformed", f"compact batch: {key!r} holds {len(value)} bytes, not a whole number of {dtype.name}")
    return np.frombuffer(value, dtype)


def _structure(obj: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The arrays of a compact message, or the :class:`RecordError` that makes it dead whole."""
    if obj.get("version") != VERSION:
        raise RecordError("unsupported-version", f"compact batch version {obj.get('version')!r}; this streamlearn reads {VERSION}")
    indptr, indices, data = _array(obj, "indptr", _INDPTR), _array(obj, "indices", _INDICES), _array(obj, "data", _DATA)
    if len(indptr) < 1 or indptr[0] != 0 or indptr[-1] != len(indices) or (np.diff(indptr) < 0).any():
        raise RecordError("malformed", "compact batch: row pointers must start at 0, never decrease and end at the number of entries")
    if len(data) != len(indices):
        raise RecordError("malformed", f"compact batch: {len(indices)} feature ids but {len(data)} values")
    return indptr, indices, data


def _labels(obj: dict, n_rows: int, labelled: bool) -> tuple[object, list]:
    """The labels of a compact message (an int64 array or a list) and the rows whose label is bad."""
    y = obj.get("y")
    if isinstance(y, bytes):
        if len(y) != n_rows * _LABELS.itemsize:
            raise RecordError("malformed", f"compact batch: {len(y)} bytes of labels for {n_rows} rows")
        return np.frombuffer(y, _LABELS).astype(np.int64), []
    if y is None:
        y = [None] * n_rows
    if not isinstance(y, list) or len(y) != n_rows:
        raise RecordError("malformed", f"compact batch: 'y' must be binary int64 data or a list of {n_rows} labels")
    bad, out = [], []
    for row, label in enumerate(y):
        try:
            out.append(check_label(label) if labelled or label is not None else None)
        except RecordError as error:
            bad.append((row, error.reason, error.message))
            out.append(None)
    return out, bad


def _weights(obj: dict, n_rows: int) -> np.ndarray | None:
    """The weights of a compact message (``None`` when it has none)."""
    if obj.get("w") is None:
        return None
    weights = _array(obj, "w", _WEIGHTS)
    if len(weights) != n_rows:
        raise RecordError("malformed", f"compact batch: {len(weights)} weights for {n_rows} rows")
    return weights.astype(np.float64)


def row_record(indices: np.ndarray, data: np.ndarray, label, weight: float = 1.0) -> bytes:
    """One row as the dict record a dead letter (or a hold-out hash) holds."""
    record = {"x": dict(zip(indices.tolist(), data.tolist())), "y": label}
    if weight != 1.0:
        record["w"] = weight
    return msgpack.packb(record, use_bin_type=True)


def decode_batch(obj: dict, labelled: bool, with_hashes: bool = False) -> DecodedRows:
    """The rows of a compact message (see the module docstring); raises :class:`RecordError`
    when the message is dead whole."""
    indptr, indices, data = _structure(obj)
    n_rows = len(indptr) - 1
    labels, bad_labels = _labels(obj, n_rows, labelled)
    weights = _weights(obj, n_rows)
    lengths = np.diff(indptr)
    reasons: dict[int, tuple[str, str]] = {row: (reason, text) for row, reason, text in bad_labels}
    if weights is not None:
        for row in np.flatnonzero(~(weights >= 0) | ~np.isfinite(weights)).tolist():
            reasons.setdefault(row, ("bad-weight", f"weight {weights[row]!r} is not a finite number >= 0"))
    within = np.abs(data) <= LARGEST_VALUE  # False for NaN too
    if not (lengths.all() and within.all() and (indices >= 0).all()):
        row_of = np.repeat(np.arange(n_rows), lengths)
        for row in np.flatnonzero(lengths == 0).tolist():
            reasons.setdefault(row, ("empty-features", "the record has no features"))
        for row in np.unique(row_of[indices < 0]).tolist():
            reasons.setdefault(row, ("malformed", "a feature id is negative"))
        for row in np.unique(row_of[~within]).tolist():
            reasons.setdefault(row, ("non-finite", f"a value is NaN, infinite or beyond ±{LARGEST_VALUE:g}"))
    label_of = labels.tolist() if isinstance(labels, np.ndarray) else labels
    weight_of = [1.0] * n_rows if weights is None else weights.tolist()
    dead = [(row, reason, text, row_record(indices[indptr[row] : indptr[row + 1]], data[indptr[row] : indptr[row + 1]],
                                           label_of[row], weight_of[row]))
            for row, (reason, text) in sorted(reasons.items())]
    if reasons:
        keep = np.ones(n_rows, bool)
        keep[list(reasons)] = False
        rows = np.flatnonzero(keep)
        entries = np.repeat(keep, lengths)
        indices, data = indices[entries], data[entries]
        indptr = np.zeros(len(rows) + 1, np.int64)
        np.cumsum(lengths[rows], out=indptr[1:])
        labels = labels[rows] if isinstance(labels, np.ndarray) else [labels[r] for r in rows.tolist()]
        weights = None if weights is None else weights[rows]
    else:
        rows = np.arange(n_rows)
        indptr = indptr.astype(np.int64)
    indices = indices.astype(np.int64)
    data = data.astype(np.float64)  # a writable copy: the message's buffer is read-only
    needed = int(indices.max()) + 1 if len(indices) else 0
    if isinstance(labels, list):
        labels = labels_out(labels)
    hashes = np.zeros(len(rows), np.uint64)
    if with_hashes:
        label_of = labels.tolist() if isinstance(labels, np.ndarray) else labels
        weight_of = [1.0] * len(rows) if weights is None else weights.tolist()
        for r in range(len(rows)):
            hashes[r] = record_hash(row_record(indices[indptr[r] : indptr[r + 1]], data[indptr[r] : indptr[r + 1]], label_of[r],
                                               weight_of[r]))
    return DecodedRows(CsrBatch(indptr, indices, data, needed, needed), labels, rows, hashes, dead, weights)
