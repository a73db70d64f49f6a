"""Kafka message values to batches: a value is msgpack or JSON (``value_format="auto"`` tells them
apart by the first byte) holding one record ``{"x": {...}, "y": ...}``, a list of records, or a
compact batch (:mod:`streamlearn.connectors.compact`); a value that does not decode, or a record that does not
validate, becomes a dead letter with its partition, offset and index in the message."""

from __future__ import annotations

import json

import msgpack
import numpy as np

from .compact import DecodedRows, decode_batch, is_compact
from .records import Batch, BatchBuilder, DeadLetter, RecordError, check_record, id_of_record, with_id


def decode_value(value: bytes, value_format: str = "auto"):
    """A message value as Python data (msgpack or JSON); raises :class:`RecordError`."""
    if value is None:
        raise RecordError("malformed", "the message has no value")
    use_json = value_format == "json" or (value_format == "auto" and value[:1] in (b"{", b"["))
    try:
        if use_json:
            return json.loads(value)
        return msgpack.unpackb(value, raw=False, strict_map_key=False)
    except Exception as error:
        raise RecordError("undecodable", f"not {'JSON' if use_json else 'msgpack'}: {error}") from None


def encode_value(obj, value_format: str = "msgpack") -> bytes:
    """Encode a record (or a list of records) as a message value."""
    if value_format == "json":
        return json.dumps(obj).encode("utf-8")
    return msgpack.packb(obj, use_bin_type=True)


class MessageDecoder(BatchBuilder):
    """Records and dead letters of consumed messages (``.topic``, ``.partition``,
    ``.offset``, ``.value``), added one message at a time: a dict record, a list of them, or a
    compact batch (:mod:`streamlearn.connectors.compact`); record hashes (for hash hold-outs) only
    ``with_hashes``."""

    def __init__(self, labelled: bool, value_format: str = "auto", with_hashes: bool = True, walker=None):
        super().__init__(with_hashes)
        self.labelled, self.value_format = labelled, value_format
        # the compiled road for plain msgpack dict records (record hashes and unlabelled records go the general way)
        self.walker = walker if labelled and not with_hashes and value_format != "json" else None

    def add(self, message) -> None:
        where = {"topic": message.topic, "partition": message.partition, "offset": message.offset}
        if getattr(message, "key", None) is not None:
            where.update(_key_field(message.key))
        walked = self.walker.walk(message.value) if self.walker is not None else None
        if walked is not None:
            X, labels = walked
            self.add_compact(DecodedRows(X, labels, np.arange(X.shape[0]), np.zeros(X.shape[0], np.uint64), []), where)
            return
        try:
            obj = decode_value(message.value, self.value_format)
            if is_compact(obj):
                rows = decode_batch(obj, self.labelled, self.with_hashes)
        except RecordError as error:
            self.dead.append(DeadLetter(where, error.reason, error.message, message.value or b""))
            return
        if is_compact(obj):
            self.add_compact(rows, where)
            return
        records = obj if isinstance(obj, list) else [obj]
        for index, record in enumerate(records):
            spot = {**where, "index": index}
            try:
                x, label, weight = check_record(record, self.labelled)
                spot = with_id(spot, id_of_record(record))
            except RecordError as error:
                self.dead.append(DeadLetter(spot, error.reason, error.message, _record_bytes(message.value, records, record)))
                continue
            self.add_record(x, label, _record_bytes(message.value, records, record) if self.with_hashes else b"", spot, weight)


def _key_field(key: bytes) -> dict:
    """A message key in a record's position: ``{"key": text}``, or ``{"key_base64": ...}``
    for a key that is not UTF-8."""
    try:
        return {"key": key.decode("utf-8")}
    except UnicodeDecodeError:
        import base64

        return {"key_base64": base64.b64encode(key).decode("ascii")}


def decode_messages(messages, labelled: bool, value_format: str = "auto", with_hashes: bool = True, walker=None) -> Batch:
    """Records and dead letters of consumed messages (``.topic``, ``.partition``, ``.offset``,
    ``.value``); record hashes (for hash hold-outs) only ``with_hashes``; plain dict records
    through ``walker`` (a :class:`~streamlearn.connectors.walker.DictRecordWalker`) when one is given."""
    builder = MessageDecoder(labelled, value_format, with_hashes, walker)
    for message in messages:
        builder.add(message)
    return builder.build()


def _record_bytes(value: bytes, records: list, record) -> bytes:
    """The bytes of one record of a message (for its dead letter or its hold-out hash): the
    value itself for a single record, else the record re-encoded as msgpack — or as JSON when
    msgpack cannot hold it (a JSON record may carry an int beyond 64 bits, a label 10**30, or
    a string with a lone surrogate, "\ud800")."""
    if len(records) == 1:
        return value
    try:
        return encode_value(record)
    except (OverflowError, UnicodeEncodeError):
        return encode_value(record, "json")
