"""What a source, a sink and a record decoder promise, written down as ``typing.Protocol``\\ s
(the runner and the command rely on exactly these; :class:`~streamlearn.connectors.files.FileSource`,
:class:`~streamlearn.connectors.files.StdinSource`, :class:`~streamlearn.connectors.kafka.KafkaSource`, the sinks of
:mod:`streamlearn.connectors.sinks` and :mod:`streamlearn.connectors.kafka`, and the decoders of
:mod:`streamlearn.connectors.formats` implement them).

>>> import os, tempfile
>>> from streamlearn.connectors import FileSource, JsonLinesSink, NullSink, StdinSource
>>> from streamlearn.connectors.formats import CsvDecoder, LibsvmDecoder, MsgpackDecoder
>>> path = os.path.join(tempfile.mkdtemp(), "d.svm")
>>> _ = open(path, "w").write("1 1:1\\n")
>>> isinstance(FileSource([path]), Source), isinstance(StdinSource(), Source)
(True, True)
>>> [isinstance(FileSource([path]), capability) for capability in (Endless, Hashing, Replayable, Prefetching)]
[False, True, True, True]
>>> isinstance(NullSink(), Sink), isinstance(JsonLinesSink(path + ".jsonl"), Sink)
(True, True)
>>> isinstance(CsvDecoder(), LineDecoder), isinstance(LibsvmDecoder(), LineDecoder), isinstance(MsgpackDecoder(), RecordDecoder)
(True, True, True)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from .records import Batch


@runtime_checkable
class Source(Protocol):
    """A stream of :class:`~streamlearn.connectors.records.Batch`\\ es with resumable positions.

    Iterating yields batches in stream order, each with the position just past it (``None``
    for a heartbeat that moved nothing); iterating again after :meth:`seek` continues from that
    position. Valid records and dead letters come together: a source never raises for a bad
    record, only for a source it cannot read at all."""

    kind: str  #: ``"file"``, ``"stdin"``, ``"kafka"``: what positions it gives
    name: str  #: for reports
    blocks_on_input: bool  #: a read may wait for a writer (the runner interrupts it on a signal)

    def __iter__(self) -> Iterator[Batch]: ...

    def seek(self, position: dict) -> None:
        """Continue from a position this kind of source yielded (a checkpoint's)."""

    def commit(self, position: dict) -> None:
        """Everything before ``position`` is durably learned (Kafka: commit the offsets)."""

    def close(self) -> None: ...


@runtime_checkable
class Endless(Protocol):
    """A source that never ends by itself (a topic): the runner waits for more instead of
    taking an empty read as the end of the data."""

    endless: bool


@runtime_checkable
class Hashing(Protocol):
    """A source whose decoders can give each valid record a hash (the hash hold-out's key);
    computing them costs time, so the runner turns them off when no hash hold-out is asked for."""

    with_hashes: bool


@runtime_checkable
class Replayable(Protocol):
    """A finite source that can be read again from its beginning, with record hashes (the
    final hold-out evaluation)."""

    def replay(self) -> Source: ...


@runtime_checkable
class Prefetching(Protocol):
    """A source that can start reading and parsing in the background before its first iteration."""

    def start(self) -> None: ...


@runtime_checkable
class Sink(Protocol):
    """Where dead letters, metrics lines and predictions go, one JSON object at a time."""

    name: str

    def write(self, obj) -> None: ...

    def sync(self) -> None:
        """Make what was written durable (before a checkpoint counts it)."""

    def size(self) -> int | None:
        """How much is written, to store in a checkpoint (``None``: it cannot be cut back)."""

    def truncate(self, size: int | None) -> None:
        """Cut back to a size :meth:`size` gave (resuming after a crash)."""

    def close(self) -> None: ...


@runtime_checkable
class LineDecoder(Protocol):
    """Bytes of complete lines → one :class:`~streamlearn.connectors.records.Batch` (line formats)."""

    line_based: bool
    with_hashes: bool

    def decode(self, piece: bytes, first_line: int, offset: int, origin: str) -> Batch: ...

    def new_file(self) -> None: ...

    def export(self) -> dict:
        """The state a position must carry (a CSV file's header), for :meth:`restore`."""

    def restore(self, state: dict) -> None: ...


@runtime_checkable
class RecordDecoder(Protocol):
    """Bytes of a record stream that is not line based (msgpack) → batches."""

    line_based: bool
    with_hashes: bool

    def decode(self, buf: bytes, final: bool, first_record: int, offset: int, origin: str,
               max_records: int) -> tuple[Batch, int, int]: ...

    def new_file(self) -> None: ...

    def export(self) -> dict: ...

    def restore(self, state: dict) -> None: ...


def reading_of(source) -> dict:
    """How a source reads its records (format, label and weight columns, header): what a checkpoint keeps
    so that ``streamlearn predict`` and ``evaluate`` read other data of the same kind the same way."""
    return {"format": getattr(source, "format", None), "label_column": getattr(source, "label_column", None),
            "no_header": bool(getattr(source, "no_header", False)), "weight_column": getattr(source, "weight_column", None),
            "id_column": getattr(source, "id_column", None)}
