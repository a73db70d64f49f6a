"""Record formats: bytes of a stream → :class:`~streamlearn.connectors.records.Batch`.

* ``libsvm`` (also ``svmlight``, ``svm``): ``label idx:value ...``, parsed in bulk by the
  compiled parser of :mod:`streamlearn.connectors.libsvm`; the batch's ``X`` is a CSR matrix whose
  column ``idx`` is feature ``idx``.
* ``jsonl``: one object per line, nested ``{"x": {name: value, ...}, "y": label}`` or flat
  ``{"species": "setosa", "petal_length": 1.4, ...}`` (the label field named by the label
  column, else ``label``, ``class``, ``target`` or ``y``; every other field a feature).
* ``csv``: a header line of column names, then one record per line, separated by ``,``,
  ``;``, tabs or ``|``; the label column is chosen by name or index (default: a column named
  ``label``, ``class``, ``target`` or ``y``, this one only where none of the others is; none is
  an error; two of the first three are ambiguous, an error too). A missing value — an empty cell, or
  ``NA``, ``N/A``, ``NaN``, ``null``, ``None``, ``?`` (:data:`MISSING_CELLS`) — is an absent feature
  (a linear model's 0), and as the label an unlabelled record.
  A file without a header (``no_header``, or a first line whose cells are numbers but for the
  label column) names its columns by index, 0, 1, ...
* ``msgpack``: a stream of msgpack maps ``{"x": {...}, "y": ...}`` (not line based), or of
  compact batches of records as CSR arrays (:mod:`streamlearn.connectors.compact`), or both.

Weights (issue 77): a nested record's ``"w"``, a flat record's or a CSV line's field or column
named by ``weight_column`` (``--weight-column``; never a feature), a compact batch's ``"w"`` array;
absent or a missing cell, the weight is 1. LIBSVM lines carry no weight (its format has no field
for one; a weighted stream is written in one of the others).
Ids likewise: a nested record's ``"id"``, the field or column ``id_column`` names (never a feature);
an id goes into its record's position (prediction lines, dead letters).

Every decoder validates each record and turns a bad one into a dead letter with its
position (source, 1-based line or record number, byte offset) instead of raising.

>>> batch = JsonLinesDecoder(labelled=True).decode(b'{"x": {"a": 1}, "y": 2}\\nnot json\\n', 0, 0, "demo")
>>> batch.X, batch.y.tolist(), [(d.position["line"], d.reason) for d in batch.dead]
([{'a': 1}], [2], [(2, 'malformed')])
"""

from __future__ import annotations

import io
import json
import pathlib
import re

import numpy as np

from streamlearn.sample_weights import weights_or_none

from .libsvm import parse_libsvm_bytes
from .compact import decode_batch, is_compact
from .records import (LABEL_FIELDS, MISSING_CELLS, Batch, BatchBuilder, DeadLetter, RecordError, canonical_label, check_features,
                      check_label, check_record, check_weight, id_of_record, label_name_in, labels_out, record_hash,
                      with_id)

FORMATS = ("libsvm", "csv", "jsonl", "msgpack")
_SUFFIXES = {
    ".svm": "libsvm", ".libsvm": "libsvm", ".svmlight": "libsvm", ".scale": "libsvm", ".t": "libsvm",
    ".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".msgpack": "msgpack", ".mpk": "msgpack",
}
_ALIASES = {"svmlight": "libsvm", "svm": "libsvm", "json": "jsonl", "ndjson": "jsonl"}


def normalize_format(fmt: str) -> str:
    """The canonical name of a format; a ``ValueError`` lists the known ones."""
    name = _ALIASES.get(fmt.lower(), fmt.lower())
    if name not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)} (and svmlight, json)")
    return name


def guess_format(path: str) -> str | None:
    """The format a file's name says (compression suffixes ignored), ``None`` when it says
    none (``news20.bz2``, ``wine.data``, ``x.txt``): then :func:`sniff_format` reads its content.

    >>> guess_format("events.jsonl.gz"), guess_format("table.CSV"), guess_format("news20.bz2")
    ('jsonl', 'csv', None)
    """
    suffixes = [s for s in pathlib.Path(path).suffixes if s not in (".bz2", ".gz", ".xz")]
    return _SUFFIXES.get(suffixes[-1].lower()) if suffixes else None


#: bytes of a stream's start that :func:`sniff_format` reads
SNIFF_BYTES = 1 << 16
_LIBSVM_LINE = re.compile(rb"^\s*(?:[^\s:#]+(?=\s|$))?(?:\s+(?:qid:\S+|\d+:\S+))*\s*(?:#.*)?$|^\s*\d+:\S+(?:\s+\d+:\S+)*\s*(?:#.*)?$")
_HAS_PAIR = re.compile(rb"(?:^|\s)\d+:\S")
CSV_DELIMITERS = ",;\t|"


class UnknownFormat(ValueError):
    """A stream whose first bytes fit none of the formats."""


def sniff_format(head: bytes, what: str = "the stream", whole: bool = True) -> str | None:
    """The format of a stream from its first bytes (:data:`SNIFF_BYTES` are enough): the one
    most of its first 50 lines fit; ``None`` for an empty one. Raises :class:`UnknownFormat` naming what it saw. ``whole=False`` says
    ``head`` is only the stream's start: its last line may be cut short and is not judged.

    >>> [sniff_format(b) for b in (b"1 3:0.5 7:1\\n", b'{"x": {"a": 1}, "y": 2}\\n', b"a;b;label\\n1;2;x\\n", b"")]
    ['libsvm', 'jsonl', 'csv', None]
    >>> sniff_format(b"0 1:1\\n1 2:1\\n2 3", whole=False)  # a read that stopped inside a line
    'libsvm'
    >>> sniff_format(b"0 1:1\\n1 2:1 3\\n2 3:1\\n")  # a bad line among good ones: told by the majority
    'libsvm'
    """
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if not head.strip():
        return None
    if head[0] in range(0x80, 0x90) or head[0] in (0xDE, 0xDF):  # a msgpack map: a record
        return "msgpack"
    if b"\0" in head[:4096]:
        raise UnknownFormat(f"{what} holds binary data that is not a msgpack record stream: give --format if it is one")
    pieces = head.split(b"\n")
    if not whole and len(pieces) > 1:
        pieces.pop()  # a line the read cut short
    lines = [line.rstrip(b"\r") for line in pieces[:50] if line.strip()] or [head]
    # each line votes: a bad record among the sniffed lines is a dead letter later, not a refusal now
    majority = (len(lines) + 1) // 2  # at least half
    if sum(line.lstrip().startswith(b"{") for line in lines) >= majority:
        return "jsonl"
    if sum(bool(_LIBSVM_LINE.match(line)) for line in lines) >= majority and any(_HAS_PAIR.search(line) for line in lines):
        return "libsvm"
    header = lines[0].decode("utf-8", "replace")
    if any(d in header for d in CSV_DELIMITERS) and len(lines) > 1:
        return "csv"
    shown = "; ".join(repr(line[:60]) for line in lines[:3]) + ("; ..." if len(lines) > 3 else "")
    raise UnknownFormat(f"cannot tell the format of {what}: most of its first {len(lines)} lines fit no format "
                        f"({shown}): give --format (libsvm, csv, jsonl or msgpack)")


def csv_delimiter(header: str) -> str:
    """The delimiter of a CSV header line: the one of ``,;\\t|`` it holds most of (``,`` for
    a single column).

    >>> csv_delimiter("a;b;c"), csv_delimiter("a,b"), csv_delimiter("only")
    (';', ',', ',')
    """
    counts = {d: header.count(d) for d in CSV_DELIMITERS}
    best = max(counts, key=counts.get)
    return best if counts[best] else ","


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _line_position(origin: str, line: int, offset: int) -> dict:
    return {"source": origin, "line": line, "offset": offset}


class LineDecoder:
    """Base of the line formats: ``decode`` gets complete lines only. Record hashes are
    computed while ``with_hashes`` is true (only hash hold-outs need them)."""

    line_based = True
    with_hashes = True

    def __init__(self, labelled: bool = True, weight_column=None, id_column=None):
        self.labelled, self.weight_column, self.id_column = labelled, weight_column, id_column

    def new_file(self) -> None:
        """Called when a new file (or the stream) starts."""

    def export(self) -> dict:
        return {}

    def restore(self, state: dict) -> None:
        pass

    def decode(self, piece: bytes, first_line: int, offset: int, origin: str) -> Batch:
        """Records of ``piece`` (complete lines; ``first_line`` lines and ``offset`` bytes
        of this source came before it)."""
        raise NotImplementedError


class LibsvmDecoder(LineDecoder):
    """LIBSVM lines; integer labels come as an int64 array (the fast path downstream).
    Stateless: pieces of a stream may be decoded concurrently."""

    stateless = True

    def decode(self, piece, first_line, offset, origin):
        chunk = parse_libsvm_bytes(piece, with_hashes=self.with_hashes, labels_optional=not self.labelled)
        starts = np.concatenate([[0], chunk.line_ends[:-1]]) if len(chunk.line_ends) else chunk.line_ends
        dead = [
            DeadLetter(_line_position(origin, first_line + e.line + 1, offset + e.start), e.reason, e.message, bytes(piece[e.start : e.end]))
            for e in chunk.errors
        ]
        lines = chunk.lines

        def locate(i):
            return _line_position(origin, first_line + int(lines[i]) + 1, offset + int(starts[lines[i]]))

        labels = chunk.label_array
        if labels is None:  # "1.0" is the class of "1": canonical numbers (the parser gives integers only)
            labels = labels_out([canonical_label(v) if isinstance(v, str) else v for v in chunk.labels])
        return Batch(chunk.X, labels, chunk.hashes, locate, dead)


class _DictLineDecoder(LineDecoder):
    """Line formats whose records become feature dicts, one Python decode per line."""

    def _record(self, line: bytes):
        raise NotImplementedError

    def decode(self, piece, first_line, offset, origin):
        X, y, weights, hashes, where, dead = [], [], [], [], [], []
        start = 0
        for number, line in enumerate(piece.splitlines(keepends=True), first_line + 1):
            text = line.rstrip(b"\r\n")
            if text.strip() and not self._skip(number, text):
                try:
                    x, label, weight, rid = self._record(text)
                except RecordError as error:  # (with the record's id when it could be read)
                    dead.append(DeadLetter(with_id(_line_position(origin, number, offset + start), getattr(error, "record_id", None)),
                                           error.reason, error.message, text))
                else:
                    X.append(x)
                    y.append(label)
                    weights.append(weight)
                    hashes.append(record_hash(text.strip()) if self.with_hashes else 0)
                    where.append((number, offset + start, rid))
            start += len(line)
        hashes = np.asarray(hashes, np.uint64)

        def locate(i):
            number, at, rid = where[i]
            return with_id(_line_position(origin, number, at), rid)

        return Batch(X, labels_out(y), hashes, locate, dead, w=weights_or_none(weights))

    def _skip(self, number: int, text: bytes) -> bool:
        return False


class JsonLinesDecoder(_DictLineDecoder):
    """JSON lines, nested or flat records (see :func:`~streamlearn.connectors.records.check_record`; a flat
    record's label is the field ``label_column``, else a conventionally named one)."""

    def __init__(self, labelled: bool = True, label_column=None, weight_column=None, id_column=None):
        super().__init__(labelled, weight_column, id_column)
        self.label_column = label_column

    def _record(self, line):
        try:
            obj = json.loads(line)
        except (ValueError, UnicodeDecodeError, RecursionError) as error:  # RecursionError: nested too deeply
            raise RecordError("malformed", f"not JSON: {error}") from None
        rid = id_of_record(obj, self.id_column)
        try:
            return (*check_record(obj, self.labelled, self.label_column, self.weight_column, self.id_column), rid)
        except RecordError as error:
            error.record_id = rid
            raise


class CsvDecoder(_DictLineDecoder):
    """CSV with a header line per file; ``label_column`` is a name or a 0-based index.

    One record per line: streams are cut at newlines before decoding, so a newline inside a
    quoted cell (RFC 4180 allows one) splits its record, and both halves are dead letters.
    Empty cells are missing features; the delimiter is the one of ``, ; tab |`` the header
    holds most of; a label column is found by name (``label``, ``class``, ``target``, then
    ``y``, any case: :func:`~streamlearn.connectors.records.label_name_in`) when none is given — a labelled stream without one is refused with a message
    (taking the first column had made every record of ``wine.csv`` a dead letter)."""

    def __init__(self, labelled: bool = True, label_column=None, no_header: bool = False, weight_column=None, id_column=None):
        super().__init__(labelled, weight_column, id_column)
        self.label_column, self.no_header = label_column, bool(no_header)
        self.header: list | None = None
        self.delimiter = ","
        self._label_at = self._weight_at = self._id_at = None

    def new_file(self):
        self.header, self._label_at, self._weight_at, self._id_at = None, None, None, None

    def export(self):
        return {"header": self.header, "delimiter": self.delimiter}

    def restore(self, state):
        if state.get("header") is not None:
            self.delimiter = state.get("delimiter", ",")
            self._set_header(state["header"])

    def set_header_line(self, text: str) -> bool:
        """Take a file's first line as its header (delimiter found from it, see :func:`csv_delimiter`);
        ``False`` when it is a record, the columns then named by index (see :meth:`is_data`).
        Raises a ``ValueError`` when the label column cannot be found."""
        import csv

        self.delimiter = csv_delimiter(text)
        try:
            cells = next(csv.reader([text], delimiter=self.delimiter), [])
        except csv.Error as error:
            raise ValueError(f"the first line is not a CSV header ({error})") from None
        if self.is_data(cells):
            self._set_header(list(range(len(cells))))
            return False
        self._set_header(cells)
        return True

    def is_data(self, cells: list) -> bool:
        """Whether a file's first line is a record rather than a header: ``no_header``, or every
        cell a number but the label column's (a header of numbers names no column)."""
        if self.no_header:
            return True
        label_at = int(self.label_column) if str(self.label_column).isdigit() else None
        return bool(cells) and all(_is_number(cell) for j, cell in enumerate(cells) if j != label_at)

    def _column_at(self, names: list, column, what: str):
        """The index of ``column`` (a name or a 0-based index) in the header ``names``."""
        if isinstance(column, str) and column.isdigit():
            column = int(column)
        if isinstance(column, int):
            if not 0 <= column < len(names):
                raise ValueError(f"{what} {column} is out of range for a CSV header of {len(names)} columns")
            return column
        if column in names:
            return names.index(column)
        raise ValueError(f"{what} {column!r} is not in the CSV header {names}")

    def _set_header(self, names: list) -> None:
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:  # the later column would silently overwrite the earlier one in every record
            raise ValueError(f"the CSV header names {', '.join(map(repr, duplicates))} more than once: rename the columns")
        self.header = list(names)
        column = self.label_column
        if column is None:
            column = label_name_in([str(n) if isinstance(n, str) else n for n in names])
            if column is None and self.labelled:  # taking the first column silently made every record bad
                if names and all(isinstance(n, int) for n in names):
                    raise ValueError(f"the CSV has no header line ({len(names)} columns): give --label-column INDEX")
                shown = repr(names) if len(repr(names)) <= 200 else repr(names)[:200] + "...]"
                raise ValueError(f"the CSV header {shown} has no label column (one named {', '.join(LABEL_FIELDS)}): "
                                 "give --label-column NAME or INDEX (or --no-header if the first line is a record)")
        known = column is not None and (column in names or str(column).isdigit())
        self._label_at = self._column_at(names, column, "label column") if known or self.labelled else None
        self._weight_at = None if self.weight_column is None else self._column_at(names, self.weight_column, "weight column")
        self._id_at = None if self.id_column is None else self._column_at(names, self.id_column, "id column")
        roles = [(what, at) for what, at in (("label", self._label_at), ("weight", self._weight_at), ("id", self._id_at))
                 if at is not None]
        for k, (what, at) in enumerate(roles):
            for other, elsewhere in roles[k + 1:]:
                if at == elsewhere:
                    raise ValueError(f"column {names[at]!r} cannot be both the {what} and the {other}")

    def _skip(self, number, text):
        if self.header is None:
            return self.set_header_line(text.decode("utf-8", "replace"))
        return False

    def _record(self, line):
        import csv  # here, as msgpack below: a LIBSVM stream's start-up does not pay for them

        try:
            cells = next(csv.reader(io.StringIO(line.decode("utf-8")), delimiter=self.delimiter))
        except (csv.Error, UnicodeDecodeError) as error:
            raise RecordError("malformed", f"not a CSV line: {error}") from None
        if len(cells) != len(self.header):
            raise RecordError("malformed", f"{len(cells)} cells but the header has {len(self.header)} columns")
        rid = None if self._id_at is None or cells[self._id_at].strip().lower() in MISSING_CELLS else cells[self._id_at].strip()
        try:
            return (*self._fields(cells), rid)
        except RecordError as error:  # its dead letter says whose record it was
            error.record_id = rid
            raise

    def _fields(self, cells: list) -> tuple:
        """A CSV line's features, label and weight."""
        x = {}
        for j, (name, cell) in enumerate(zip(self.header, cells)):
            if j in (self._label_at, self._weight_at, self._id_at) or cell.strip().lower() in MISSING_CELLS:
                continue
            try:
                x[name] = float(cell)
            except ValueError:
                raise RecordError("non-numeric", f"value of feature {name!r} is {cell!r}, not a number") from None
        x = check_features(x)
        label = cells[self._label_at].strip() if self._label_at is not None else None
        label = None if label is None or label.lower() in MISSING_CELLS else canonical_label(label)
        if self.labelled or label is not None:
            label = check_label(label)
        return x, label, 1.0 if self._weight_at is None else _weight_cell(cells[self._weight_at])


def _weight_cell(cell: str) -> float:
    """The weight in a CSV cell (a missing one, :data:`MISSING_CELLS`: 1)."""
    if cell.strip().lower() in MISSING_CELLS:
        return 1.0
    try:
        value = float(cell)
    except ValueError:
        raise RecordError("bad-weight", f"weight {cell!r} is not a number") from None
    return check_weight(value)


class MsgpackDecoder:
    """A stream of msgpack records and compact batches (a compact batch counts as one record
    towards ``max_records``; its rows' positions carry their ``index`` in it). Bytes that are not msgpack cannot be resynchronised:
    they end the file (the rest of it becomes one dead letter per chunk read)."""

    line_based = False
    with_hashes = True

    def __init__(self, labelled: bool = True, label_column=None, weight_column=None, id_column=None):
        self.labelled, self.label_column, self.weight_column, self.id_column = labelled, label_column, weight_column, id_column
        self.broken = False

    def new_file(self):
        self.broken = False

    def export(self):
        return {"broken": self.broken}

    def restore(self, state):
        self.broken = bool(state.get("broken", False))

    def decode(self, buf: bytes, final: bool, first_record: int, offset: int, origin: str, max_records: int):
        """Records at the start of ``buf``: ``(batch, bytes consumed, records consumed)``."""
        builder = BatchBuilder(self.with_hashes)
        dead = builder.dead
        if self.broken:
            dead.append(DeadLetter({"source": origin, "offset": offset}, "undecodable", "after undecodable msgpack data", buf))
            return builder.build(), len(buf), 0
        import msgpack

        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(buf), 1 << 20))
        unpacker.feed(buf)
        consumed = n = 0
        while n < max_records:
            try:
                obj = unpacker.unpack()
            except msgpack.OutOfData:
                break
            except Exception as error:  # FormatError, StackError, ExtraData, ValueError...
                self.broken = True
                dead.append(DeadLetter({"source": origin, "record": first_record + n + 1, "offset": offset + consumed},
                                       "undecodable", f"not msgpack: {error}", buf[consumed:]))
                consumed = len(buf)
                break
            end = unpacker.tell()
            raw = buf[consumed:end]
            n += 1
            place = {"source": origin, "record": first_record + n, "offset": offset + consumed}
            try:
                if is_compact(obj):
                    rows = decode_batch(obj, self.labelled, self.with_hashes)
                else:
                    x, label, weight = check_record(obj, self.labelled, self.label_column, self.weight_column, self.id_column)
                    place = with_id(place, id_of_record(obj, self.id_column))
            except RecordError as error:
                dead.append(DeadLetter(place, error.reason, error.message, raw))
            else:
                if is_compact(obj):
                    builder.add_compact(rows, place)
                else:
                    builder.add_record(x, label, raw, place, weight)
            consumed = end
        if final and consumed < len(buf):
            dead.append(DeadLetter({"source": origin, "record": first_record + n + 1, "offset": offset + consumed},
                                   "malformed", "truncated msgpack record at the end of the stream", buf[consumed:]))
            consumed = len(buf)
        return builder.build(), consumed, n


def make_decoder(fmt: str, labelled: bool = True, label_column=None, no_header: bool = False, weight_column=None,
                 id_column=None):
    """A decoder for a format name (see :data:`FORMATS`); ``no_header``: CSV files have no header line;
    ``weight_column``, ``id_column``: a CSV column's or a flat record's field holding each record's weight, id."""
    fmt = normalize_format(fmt)
    if fmt == "libsvm":
        return LibsvmDecoder(labelled)
    if fmt == "jsonl":
        return JsonLinesDecoder(labelled, label_column, weight_column, id_column)
    if fmt == "csv":
        return CsvDecoder(labelled, label_column, no_header, weight_column, id_column)
    return MsgpackDecoder(labelled, label_column, weight_column, id_column)
