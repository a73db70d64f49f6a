"""Records, batches and dead letters: what every source hands to the runner.

A source yields :class:`Batch` objects: the valid records of a stretch of the stream
(``X`` as a :class:`~streamlearn.batches.CsrBatch` for LIBSVM, or a list of feature dicts for the other
formats), their labels, a stable hash per record (for hold-out splits), the bad records
of that stretch as :class:`DeadLetter` objects, and the resume position just past it.

:func:`check_record` is the one place where a decoded record (``{"x": {...}, "y": ...}``
from JSON, msgpack or Kafka) is validated.

>>> check_record({"x": {"a": 1.5}, "y": "cat"}, labelled=True)
({'a': 1.5}, 'cat', 1.0)
>>> check_record({"x": {"a": 1.5}, "y": "cat", "w": 3}, labelled=True)
({'a': 1.5}, 'cat', 3.0)
>>> check_record({"x": {"a": float("nan")}, "y": "cat"}, labelled=True)
Traceback (most recent call last):
...
streamlearn.connectors.records.RecordError: non-finite: value of feature 'a' is nan: NaN, infinite or beyond ±1e+150 (its square leaves the float range)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from streamlearn.errors import InvalidInputError
from streamlearn.kernels import compiled
from streamlearn.kernels.codes import LARGEST_VALUE, MAX_LABEL_LENGTH
from streamlearn.sample_weights import checked_weight, weights_or_none

_text = compiled("text")

_NUMBERS = (int, float)
_FLOAT_OR_INT = {float, int}
_NAME_TYPES = {str, int}
_MAX_LABEL_BITS = int(MAX_LABEL_LENGTH * math.log2(10))  # an int of more digits than a label may have characters


class RecordError(ValueError):
    """A record that cannot be learned: ``reason`` is a short code, the text explains."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


@dataclass
class DeadLetter:
    """A bad record: where it was, why it was refused, and its raw bytes."""

    position: dict
    reason: str
    message: str
    record: bytes

    def to_json(self) -> dict:
        try:
            raw = {"record": self.record.decode("utf-8")}
        except UnicodeDecodeError:
            import base64  # only for undecodable records

            raw = {"record_base64": base64.b64encode(self.record).decode("ascii")}
        return {"position": self.position, "reason": self.reason, "message": self.message, **raw}


@dataclass
class Batch:
    """Valid records of a stretch of the stream, its dead letters, and the position after it."""

    X: object  # streamlearn.batches.CsrBatch (LIBSVM) or list of feature dicts
    y: object  # labels: a list, or an int64 array (None for an unlabelled record when the source is not labelled)
    hashes: np.ndarray  # uint64, one per record
    locate: Callable[[int], dict]  # position of record i, for reports
    dead: list = field(default_factory=list)
    position: dict | None = None
    w: np.ndarray | None = None  # float64 weights, one per record (None: every weight 1)

    def __len__(self) -> int:
        return len(self.y)

    def take(self, mask: np.ndarray) -> "Batch":
        """The records where ``mask`` is true (dead letters and position stay with the original)."""
        rows = np.flatnonzero(mask)
        X = self.X[rows] if hasattr(self.X, "tocsr") else [self.X[i] for i in rows.tolist()]
        locate = self.locate
        y = self.y[rows] if isinstance(self.y, np.ndarray) else [self.y[i] for i in rows.tolist()]
        return Batch(X, y, self.hashes[rows], lambda i: locate(int(rows[i])), w=weights_or_none(self.w[rows]) if self.w is not None else None)

    def unlabelled(self) -> np.ndarray:
        """Mask of the records without a label (``None``)."""
        if isinstance(self.y, np.ndarray) and self.y.dtype != object:
            return np.zeros(len(self.y), bool)
        return np.array([label is None for label in self.y], bool)


def labels_out(y: list):
    """Labels as an int64 array when they are all Python ints (the learners' fast path),
    else the list itself."""
    if y and all(type(v) is int for v in y):
        try:
            return np.array(y, dtype=np.int64)
        except OverflowError:
            return y
    return y


def empty_batch(position: dict | None = None) -> Batch:
    """A batch without records (a source's heartbeat while the stream is idle)."""
    return Batch([], [], np.zeros(0, np.uint64), lambda i: {}, [], position)


def record_hash(raw: bytes) -> int:
    """The stable hash of a record's raw bytes (FNV-1a 64, as the LIBSVM parser computes it)."""
    return int(_text.fnv1a(np.frombuffer(raw, np.uint8), 0, len(raw)))


def _is_missing(y) -> bool:
    return y is None or (isinstance(y, str) and not y.strip()) or (isinstance(y, float) and math.isnan(y))


_NUMBER_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d{1,3})?")


def canonical_label(text: str):
    """A label read from text in its canonical form: a number written any way (``1``, ``+1``,
    ``1.0``, ``1e0``) is one label, an int when integral (as LIBSVM's ``+1/-1`` are), else a
    float; any other text stays as it is (``spam``, ``nan``, ``1_000``, digits past Python's
    int-parsing limit).

    >>> [canonical_label(t) for t in ("1", "+1", "1.0", "-1.00", "1e2", "2.5", "spam", "nan", "007")]
    [1, 1, 1, -1, 100, 2.5, 'spam', 'nan', 7]
    """
    text = text.strip()
    if len(text) > MAX_LABEL_LENGTH or not _NUMBER_TEXT.fullmatch(text):
        return text
    if text.lstrip("+-").isdigit():
        return int(text)
    value = float(text)
    if not math.isfinite(value):
        return text
    if value.is_integer():
        from decimal import Decimal

        return int(Decimal(text))  # exact, where int(value) would round past 2**53
    return value


def check_label(y):
    """A label as stored (ints, strings, bools, finite floats; at most ``MAX_LABEL_LENGTH``
    characters or digits; an integral float is the int it equals, so that ``1.0`` and ``1``
    from JSON or msgpack are one class); raises :class:`RecordError`."""
    if type(y) is float and y.is_integer() and abs(y) < 2**63:
        y = int(y)
    if _is_missing(y):
        raise RecordError("missing-label", "the record has no label")
    if (isinstance(y, str) and len(y) > MAX_LABEL_LENGTH) or (type(y) is int and y.bit_length() > _MAX_LABEL_BITS):
        raise RecordError("label-too-long", f"the label is longer than {MAX_LABEL_LENGTH} characters")
    if isinstance(y, (str, int, bool)) or (isinstance(y, float) and math.isfinite(y)):
        return y
    raise RecordError("bad-label", f"label {y!r} is not a string, an integer, a boolean or a finite number")


def check_features(x) -> dict:
    """Validate a feature dict: string or integer names, finite numeric values (not booleans), at
    least one; a ``None`` value (JSON null) is a missing value, left out."""
    if not isinstance(x, dict):
        raise RecordError("malformed", f"features must be a mapping, got {type(x).__name__}")
    if not x:
        raise RecordError("empty-features", "the record has no features")
    if set(map(type, x.values())) <= _FLOAT_OR_INT and set(map(type, x)) <= _NAME_TYPES:
        try:
            if sum(map(abs, x.values())) <= LARGEST_VALUE:
                return x  # the common case, checked at C speed (NaN makes it False; a large sum is checked below)
        except OverflowError:  # an int beyond the float range (JSON allows 10**400): found below
            pass
    if None in x.values():  # a missing value (JSON null, msgpack nil): an absent feature, as a missing CSV cell is
        x = {name: value for name, value in x.items() if value is not None or not isinstance(name, (str, int)) or
             isinstance(name, bool)}  # (a bad name stays, to be refused below)
        if not x:
            raise RecordError("empty-features", "the record has no features (every value is missing)")
    for name, value in x.items():
        if not isinstance(name, (str, int)) or isinstance(name, bool):
            raise RecordError("malformed", f"feature name {name!r} is not a string or an integer")
        if not isinstance(value, _NUMBERS) or isinstance(value, bool):  # JSON's true is not a number: 1 or 0 is
            raise RecordError("non-numeric", f"value of feature {name!r} is {value!r}, not a number")
        try:
            finite = math.isfinite(value)
        except OverflowError:
            raise RecordError("non-finite", f"value of feature {name!r} is an integer of {len(str(abs(value)))} digits, "
                                            "too large for a float") from None
        if not finite or abs(value) > LARGEST_VALUE:
            raise RecordError("non-finite", f"value of feature {name!r} is {value!r}: NaN, infinite or beyond "
                                            f"±{LARGEST_VALUE:g} (its square leaves the float range)")
    return x


#: CSV cells that mean "no value" (any case, spaces around them ignored): a feature cell is then
#: absent (as a JSON null is), a label cell makes the record unlabelled
MISSING_CELLS = frozenset({"", "na", "n/a", "nan", "null", "none", "?"})

#: a nested record's weight field, ``{"x": {...}, "y": label, "w": 2.5}`` (a flat record's or a CSV
#: line's is the one ``--weight-column`` names); absent, the weight is 1 (as in Vowpal Wabbit's format)
WEIGHT_FIELD = "w"


def check_weight(w) -> float:
    """A record's weight as a float (``None``, a missing value: 1); a weight that is not a finite
    number ``>= 0`` (a string too, as a feature's value) raises :class:`RecordError` (``bad-weight``).

    >>> check_weight(None), check_weight(2), check_weight(0.5)
    (1.0, 2.0, 0.5)
    """
    if w is None:
        return 1.0
    try:
        return checked_weight(w)
    except InvalidInputError as error:
        raise RecordError("bad-weight", str(error)) from None


#: the names a label field or column is looked for by when none is named (any case): ``y`` only
#: where none of the others is (``x,y,z,label``: ``y`` is a coordinate, the label is ``label``)
LABEL_FIELDS = ("label", "class", "target", "y")


def label_name_in(names) -> object:
    """The label's field or column among ``names`` by :data:`LABEL_FIELDS` (``None``: none);
    ``ValueError`` when two of ``label``, ``class``, ``target`` are there (which is meant?).

    >>> label_name_in(["x", "y", "z", "label"]), label_name_in(["a", "Y"]), label_name_in(["a"])
    ('label', 'Y', None)
    """
    found: dict = {}
    for name in names:
        if isinstance(name, str) and name.strip().lower() in LABEL_FIELDS:
            found.setdefault(name.strip().lower(), name)
    unambiguous = [found[key] for key in LABEL_FIELDS[:-1] if key in found]
    if len(unambiguous) > 1:
        raise ValueError(f"{' and '.join(map(repr, unambiguous))} could each be the label: give --label-column NAME")
    return unambiguous[0] if unambiguous else found.get("y")


def record_id(value):
    """A record's id as kept (a string, an integer, or ``None`` when it has none); any other value
    raises :class:`RecordError` (``bad-id``).

    >>> record_id("order-17"), record_id(17), record_id(None)
    ('order-17', 17, None)
    """
    if value is None or (isinstance(value, (str, int)) and not isinstance(value, bool)):
        return value
    raise RecordError("bad-id", f"id {value!r} is not a string or an integer")


#: a nested record's id field, ``{"x": {...}, "y": label, "id": "order-17"}`` (a flat record's or a CSV
#: line's is the one ``--id-column`` names); it goes into the record's position, so that its prediction
#: line and its dead letter carry it
ID_FIELD = "id"


def check_record(obj, labelled: bool, label_field=None, weight_field=None, id_field=None) -> tuple[dict, object, float]:
    """Validate a decoded record; return ``(x, y, w)``. A record is nested, ``{"x": {...}, "y": label}``
    with an optional weight ``"w"``, or flat, ``{"species": "setosa", "petal_length": 1.4, ...}``:
    its label is the field ``label_field``, else the one :func:`label_name_in` finds, its weight
    the field ``weight_field`` (none given: every flat record weighs 1), and every other field is
    a feature. A record without a weight weighs 1. ``id_field``: a flat record's id field, left out of
    its features (:func:`id_of_record` reads it).

    ``y`` may be absent (``None`` is returned) when the source is not ``labelled``.

    >>> check_record({"species": "setosa", "pl": 1.4, "pw": 0.2}, True, "species")
    ({'pl': 1.4, 'pw': 0.2}, 'setosa', 1.0)
    >>> check_record({"pl": 1.4, "Label": 2.0, "cost": 5}, True, weight_field="cost")
    ({'pl': 1.4}, 2, 5.0)
    """
    if not isinstance(obj, dict):
        raise RecordError("malformed", 'a record is a mapping: {"x": {feature: value, ...}, "y": label} or flat '
                                       '{feature: value, ..., "label": label}')
    if isinstance(obj.get("x"), dict) and (label_field is None or label_field not in obj):
        x, y, w = check_features(obj["x"]), obj.get("y"), check_weight(obj.get(WEIGHT_FIELD))
    elif isinstance(obj.get("x"), (list, tuple)):  # not a flat record's coordinate: a nested record gone wrong
        raise RecordError("malformed", f'a record\'s "x" must be an object of features, {{"x": {{"f1": 0.5, ...}}}}, '
                                       f"not a {type(obj['x']).__name__}")
    else:
        w = 1.0 if weight_field is None else check_weight(obj.get(weight_field))
        if weight_field is not None or id_field is not None:
            obj = {name: value for name, value in obj.items() if name not in (weight_field, id_field)}
        x, y = _flat_record(obj, labelled, label_field)
    if labelled or not _is_missing(y):
        y = check_label(y)
    return x, y, w


def id_of_record(obj, id_field=None):
    """The id of a decoded record: a nested record's ``"id"``, a flat one's ``id_field`` (``None``: none)."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("x"), dict) and (id_field is None or id_field not in obj):
        return record_id(obj.get(ID_FIELD))
    return record_id(obj.get(id_field)) if id_field is not None else None


def with_id(place: dict, rid) -> dict:
    """A record's position with its id (when it has one)."""
    return place if rid is None else {**place, "id": rid}


def _flat_record(obj: dict, labelled: bool, label_field) -> tuple[dict, object]:
    """The features and label of a flat record (see :func:`check_record`)."""
    if label_field is None:
        try:
            label_field = label_name_in(obj)
        except ValueError as error:
            raise RecordError("ambiguous-label", str(error)) from None
    elif label_field not in obj and isinstance(label_field, str) and label_field.isdigit():
        label_field = int(label_field)  # msgpack maps may have integer keys
    if label_field is None or label_field not in obj:
        if labelled:
            named = f"field {label_field!r}" if label_field is not None else f"field named {', '.join(LABEL_FIELDS)}"
            raise RecordError("missing-label", f"the record has no label {named} (give --label-column NAME for a flat "
                                               'record, or send {"x": {...}, "y": label})')
        return check_features(obj), None
    y = obj[label_field]
    return check_features({k: v for k, v in obj.items() if k != label_field}), y


class BatchBuilder:
    """Records gathered one message (or file object) at a time — dict records and compact CSR
    batches (:mod:`streamlearn.connectors.compact`) in stream order — with their dead letters, built into
    one :class:`Batch`.

    The batch's ``X`` is one CSR batch when every record came in compact batches (no Python
    object per feature on the way to the learner), else a list of feature dicts, compact rows
    turned into ``{feature id: value}`` (an integer name: the same feature as in CSR form)."""

    def __init__(self, with_hashes: bool = True):
        self.with_hashes = with_hashes
        self.dead: list = []
        self._segments: list = []  # ("dicts", X, y, hashes, places, weights) or ("rows", DecodedRows, locate)
        self._count = 0  # valid records

    def __len__(self) -> int:
        """Records so far, valid or not."""
        return self._count + len(self.dead)

    def add_record(self, x: dict, y, raw: bytes, place: dict, w: float = 1.0) -> None:
        """One valid dict record of weight ``w`` (``raw``: its bytes, for its hash)."""
        if not self._segments or self._segments[-1][0] != "dicts":
            self._segments.append(("dicts", [], [], [], [], []))
        _, X, labels, hashes, places, weights = self._segments[-1]
        X.append(x)
        labels.append(y)
        weights.append(w)
        if self.with_hashes:
            hashes.append(record_hash(raw))
        places.append(place)
        self._count += 1

    def add_compact(self, rows, place: dict) -> None:
        """A decoded compact batch (:class:`streamlearn.connectors.compact.DecodedRows`) found at ``place``:
        its bad rows as dead letters, its valid rows as records, each located by its ``index``."""
        self.dead += [DeadLetter({**place, "index": row}, reason, text, raw) for row, reason, text, raw in rows.dead]
        self.add_rows(rows, lambda row: {**place, "index": row})

    def add_rows(self, rows, locate: Callable[[int], dict]) -> None:
        """The valid rows of a compact batch (:class:`streamlearn.connectors.compact.DecodedRows`);
        ``locate(j)``: the position of its row ``j`` (an index into the whole message)."""
        if len(rows.rows):
            self._segments.append(("rows", rows, locate))
            self._count += len(rows.rows)

    def build(self) -> Batch:
        segments = self._segments
        weights = None
        if any(s[0] == "dicts" or s[1].weights is not None for s in segments):  # (not on the compact road's usual batch)
            weights = weights_or_none(np.concatenate([s[5] if s[0] == "dicts" else _row_weights(s[1]) for s in segments]))
        if segments and all(s[0] == "rows" for s in segments) and len({id(getattr(s[1].X, "names", None)) for s in segments}) == 1:
            X, y, hashes = _stack_rows([s[1] for s in segments])
        else:
            X, y, hashes = [], [], []
            for segment in segments:
                if segment[0] == "dicts":
                    X += segment[1]
                    y += segment[2]
                    hashes += segment[3]
                else:
                    rows = segment[1]
                    X += rows.X.row_dicts()
                    y += rows.labels.tolist() if isinstance(rows.labels, np.ndarray) else rows.labels
                    hashes += rows.hashes.tolist()
            y = labels_out(y)
            hashes = np.asarray(hashes, np.uint64) if self.with_hashes else np.zeros(len(y), np.uint64)
        starts = np.cumsum([0] + [len(s[2]) if s[0] == "dicts" else len(s[1].rows) for s in segments])

        def locate(i: int) -> dict:
            k = int(np.searchsorted(starts, i, side="right")) - 1
            segment = segments[k]
            if segment[0] == "dicts":
                return segment[4][i - starts[k]]
            return segment[2](int(segment[1].rows[i - starts[k]]))

        return Batch(X, y, hashes, locate, self.dead, w=weights)


def _row_weights(rows) -> np.ndarray:
    """The weights of a compact batch's valid rows (1 when it carries none)."""
    return np.ones(len(rows.rows)) if rows.weights is None else rows.weights


def _stack_rows(parts: list):
    """One CSR batch, its labels and hashes from the valid rows of several compact batches (or
    walked dict records over one name table)."""
    from streamlearn.batches import CsrBatch, NamedCsrBatch

    if len(parts) == 1:
        only = parts[0]
        return only.X, only.labels, only.hashes
    lengths = np.concatenate([np.diff(p.X.indptr) for p in parts])
    indptr = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=indptr[1:])
    indices, data = np.concatenate([p.X.indices for p in parts]), np.concatenate([p.X.data for p in parts])
    if isinstance(parts[0].X, NamedCsrBatch):  # one name table (the caller checked)
        X = NamedCsrBatch(indptr, indices, data, parts[0].X.names)
    else:
        needed = max(p.X.needed for p in parts)
        X = CsrBatch(indptr, indices, data, needed, needed)
    if all(isinstance(p.labels, np.ndarray) for p in parts):
        y = np.concatenate([p.labels for p in parts])
    else:
        y = labels_out([v for p in parts for v in (p.labels.tolist() if isinstance(p.labels, np.ndarray) else p.labels)])
    return X, y, np.concatenate([p.hashes for p in parts])
