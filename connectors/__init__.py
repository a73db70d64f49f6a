"""Sources and sinks: bytes in, validated records out (see ../shared/DESIGN.md).

A *source* is iterable and yields :class:`~streamlearn.connectors.records.Batch` objects (valid
records, dead letters, the resume position after them); ``seek(position)`` continues
from a position it yielded, ``commit(position)`` tells the upstream system that
everything before it is durably learned (a Kafka offset commit; nothing for files) and
``close()`` releases it. A *sink* has ``write(obj)``, ``sync()``, ``size()``,
``truncate(size)`` and ``close()``.

:func:`open_source` and :func:`open_sink` build them from the URIs the CLI takes:
a path or glob (several allowed), ``-`` for stdin/stdout, or
``kafka://HOST:PORT/TOPIC?group=NAME``.
"""

from __future__ import annotations

from .errors import SourceError, SourceUnavailable
from .files import FileSource, StdinSource
from .formats import FORMATS, guess_format, normalize_format
from .records import Batch, DeadLetter, RecordError
from .sinks import JsonLinesSink, NullSink


def open_source(uris, fmt: str | None = None, labelled: bool = True, batch_records: int = 1000,
                passes: int = 1, label_column=None, idle_timeout: float | None = None, until_end: bool = False,
                broker_timeout: float | None = None, subscribe: bool = False, no_header: bool = False,
                weight_column=None, id_column=None):
    """A source for one URI (``-``, ``kafka://...``) or for one or more paths/globs
    (``idle_timeout``, ``until_end``, ``broker_timeout`` and ``subscribe``: see :class:`~streamlearn.connectors.kafka.KafkaSource`;
    ``label_column``: a CSV column or a flat record's field; ``no_header``: CSV files without a header line;
    ``weight_column``: a CSV column or a flat record's field holding each record's weight — a nested
    record's is its ``"w"``, the only one a Kafka record has; ``id_column`` likewise for each record's id, a
    nested record's ``"id"``, which goes into the record's position: a Kafka record has its ``"id"`` and its
    message key there).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "d.jsonl")
    >>> _ = open(path, "w").write('{"x": {"a": 1}, "y": "cat"}\\n{"x": {"a": "?"}, "y": "dog"}\\n')
    >>> batch = next(b for b in open_source(path) if len(b) or b.dead)
    >>> batch.X, batch.y, [(d.position["line"], d.reason) for d in batch.dead]
    ([{'a': 1}], ['cat'], [(2, 'non-numeric')])
    """
    uris = [uris] if isinstance(uris, str) else list(uris)
    fmt = normalize_format(fmt) if fmt else None
    if len(uris) == 1 and uris[0] == "-":
        return StdinSource(fmt, labelled, batch_records, label_column, no_header=no_header, weight_column=weight_column,
                           id_column=id_column)
    if len(uris) == 1 and uris[0].startswith("kafka://"):
        from .kafka import KafkaSource, parse_kafka_uri

        if id_column is not None:
            raise SourceError('a Kafka record\'s id is its "id" or its message key; --id-column is for CSV and flat '
                              "records from files or stdin")
        if weight_column is not None:
            raise SourceError('a Kafka record\'s weight is its "w" ({"x": {...}, "y": label, "w": 2}); --weight-column is '
                              "for CSV and flat records from files or stdin")
        spec = parse_kafka_uri(uris[0])
        value_format = {"jsonl": "json", "msgpack": "msgpack", None: "auto"}.get(fmt)
        if value_format is None:
            raise SourceError(f"Kafka values are msgpack or JSON records, not {fmt}")
        return KafkaSource(spec["bootstrap"], spec["topic"], spec["group"], labelled, value_format, batch_records,
                           idle_timeout=idle_timeout, until_end=until_end, client=spec["client"],
                           broker_timeout=broker_timeout, subscribe=subscribe)
    if subscribe:
        raise SourceError("only a Kafka source joins a consumer group (model mixing)")
    if any(u == "-" or u.startswith("kafka://") for u in uris):
        raise SourceError("stdin and Kafka sources cannot be combined with other sources")
    return FileSource(uris, fmt, labelled, batch_records, passes, label_column, no_header, weight_column, id_column)


def open_sink(uri: str | None):
    """A sink for a path, ``-`` (stdout), ``kafka://HOST:PORT/TOPIC`` or ``None`` (discard).

    >>> sink = open_sink("-")
    >>> sink.write({"position": {"line": 3}, "prediction": "cat"})
    {"position":{"line":3},"prediction":"cat"}
    >>> sink.close()
    """
    if uri is None:
        return NullSink()
    if uri.startswith("kafka://"):
        from .kafka import KafkaSink, parse_kafka_uri

        spec = parse_kafka_uri(uri)
        if set(spec["options"]) - {"client"} or spec["client"] != "kafka-python":
            raise ValueError(f"a Kafka sink takes no options (it produces with kafka-python): {uri!r}")
        return KafkaSink(spec["bootstrap"], spec["topic"])
    return JsonLinesSink(uri)


__all__ = ["Batch", "DeadLetter", "FORMATS", "FileSource", "JsonLinesSink", "NullSink", "RecordError", "SourceError",
           "StdinSource", "guess_format", "normalize_format", "open_sink", "open_source"]
