"""Dict records of msgpack messages decoded by a compiled walker
(:mod:`streamlearn.kernels.walker`): the fast road of :class:`streamlearn.connectors.kafka.KafkaSource`
for today's record format, ``{"x": {name: value, ...}, "y": label}`` or a list of them.

The walker reads a message's bytes into CSR arrays over feature-name ids and keeps the names
in a table across messages, so a name is decoded to a Python str once per stream, not once per
record. The batch it gives, a :class:`~streamlearn.batches.NamedCsrBatch`, is learned by name
exactly as the same records as dicts are (the same vocabulary order, the same rows, the same
model bit for bit). A message it does not take (any record not valid and plain: see the kernel
module) is left to the general decoder, whose validation and dead letters are the reference.

>>> import msgpack
>>> walker = DictRecordWalker()
>>> X, y = walker.walk(msgpack.packb([{"x": {"a": 1.0, "b": 2}, "y": "cat"}, {"x": {"b": 0.5}, "y": "dog"}]))
>>> X.row_dicts(), y
([{'a': 1.0, 'b': 2.0}, {'b': 0.5}], ['cat', 'dog'])
>>> walker.walk(msgpack.packb({"x": {"a": float("nan")}, "y": 1})) is None  # not plain: the general decoder's
True
"""

from __future__ import annotations

import numpy as np

from streamlearn.batches import NamedCsrBatch
from streamlearn.kernels import compiled

from .records import RecordError, check_label, labels_out

_walker = compiled("walker")
OK, BAIL, FULL = 0, 1, 2
TAG_STR = 1
#: names kept before the table starts over (a hashed vocabulary may be unbounded)
MAX_NAMES = 1 << 22


class DictRecordWalker:
    """The walker's name table and scratch buffers; :meth:`walk` decodes one message value."""

    def __init__(self, capacity: int = 1 << 12):
        self._reset(capacity)

    def _reset(self, capacity: int) -> None:
        self._slots = np.full(4 * 2 * capacity, -1, np.int64)  # 2 slots per name, 4 int64 per slot
        self._hashes = np.zeros(capacity, np.uint64)
        self._name_start = np.zeros(capacity, np.int64)
        self._name_end = np.zeros(capacity, np.int64)
        self._last_seen = np.zeros(capacity, np.int64)
        self._arena = np.zeros(16 * capacity, np.uint8)
        self._counts = np.zeros(2, np.int64)  # names, arena bytes used
        self._stamp = 0
        self.names: list = []  # id -> name; a new list after a reset (batches keep theirs)
        self._poisoned = np.zeros(0, np.int64)  # ids of names that are not UTF-8: their records go the general way

    def _grow(self) -> None:
        """Double whatever the walk ran out of: the slots and per-name arrays, or the arena."""
        n_names, used = int(self._counts[0]), int(self._counts[1])
        if 2 * (n_names + 1) > len(self._slots) // 4 or n_names >= len(self._hashes):
            capacity = 2 * len(self._hashes)
            self._slots = np.full(4 * 2 * capacity, -1, np.int64)
            _walker.rehash(self._hashes, self._name_start, self._name_end, n_names, self._slots)
            for name in ("_hashes", "_name_start", "_name_end", "_last_seen"):
                old = getattr(self, name)
                grown = np.zeros(capacity, old.dtype)
                grown[: len(old)] = old
                setattr(self, name, grown)
        if used + (1 << 16) > len(self._arena):
            grown = np.zeros(2 * len(self._arena) + (1 << 16), np.uint8)
            grown[:used] = self._arena[:used]
            self._arena = grown

    def _scratch(self, n: int):
        """Buffers for a message of ``n`` bytes: a record the walker takes spans at least 9 bytes
        and an entry 2 (a one-byte name and value), so it never writes past these."""
        records, entries = n // 9 + 2, n // 2 + 2
        if getattr(self, "_indptr", None) is None or len(self._indptr) < records + 1 or len(self._ids) < entries:
            records, entries = max(records + 1, 1 << 12), max(entries, 1 << 15)
            self._indptr, self._label_int, self._label_start, self._label_end = (np.zeros(records, np.int64) for _ in range(4))
            self._ids, self._values = np.zeros(entries, np.int64), np.zeros(entries)
        if getattr(self, "_key", None) is None or len(self._key) < n + 9:
            self._key = np.zeros(max(n + 9, 1 << 12), np.uint8)

    def _decode_new_names(self) -> None:
        start = len(self.names)
        for i in range(start, int(self._counts[0])):
            raw = self._arena[self._name_start[i] + 1 : self._name_end[i]].tobytes()
            if self._arena[self._name_start[i]] == TAG_STR:
                try:
                    self.names.append(raw.decode("utf-8"))
                except UnicodeDecodeError:
                    self.names.append(None)
                    self._poisoned = np.append(self._poisoned, i)
            else:
                self.names.append(int.from_bytes(raw, "little", signed=True))

    def walk(self, value: bytes):
        """``(X, labels)`` of a message value (a :class:`NamedCsrBatch` and an int64 array or a
        list), or ``None`` when the message is not plain valid records (the general decoder
        then decodes it and reports what is wrong)."""
        if not value or value[:1] in (b"{", b"["):  # JSON
            return None
        if self._counts[0] > MAX_NAMES:
            self._reset(len(self._hashes) // 4)
        buf = np.frombuffer(value, np.uint8)
        self._scratch(len(buf))
        while True:
            status, n_records, n_entries, self._stamp = _walker.walk_records(
                buf, self._slots, self._hashes, self._name_start, self._name_end, self._arena, self._counts,
                self._last_seen, self._stamp, self._indptr, self._ids, self._values, self._label_int,
                self._label_start, self._label_end, self._key)
            if status != FULL:
                break
            self._grow()
        self._decode_new_names()  # also after a bail: the names it met are in the table
        if status != OK:
            return None
        ids = self._ids[:n_entries].copy()
        if len(self._poisoned) and np.isin(ids, self._poisoned).any():
            return None
        labels = self._labels(value, n_records)
        if labels is None:
            return None
        return NamedCsrBatch(self._indptr[: n_records + 1].copy(), ids, self._values[:n_entries].copy(), self.names), labels

    def _labels(self, value: bytes, n_records: int):
        starts = self._label_start[:n_records]
        if (starts < 0).all():
            return self._label_int[:n_records].copy()
        labels = []
        for r, (start, end) in enumerate(zip(starts.tolist(), self._label_end[:n_records].tolist())):
            if start < 0:
                labels.append(int(self._label_int[r]))
                continue
            try:
                labels.append(check_label(value[start:end].decode("utf-8")))
            except (UnicodeDecodeError, RecordError):
                return None
        return labels_out(labels)
