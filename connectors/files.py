"""File and stdin sources.

Both read bytes, cut them into pieces of at most ``batch_records`` complete lines (or
records), decode each piece with a format decoder (:mod:`streamlearn.connectors.formats`) and yield
it as a :class:`~streamlearn.connectors.records.Batch` whose ``position`` is the byte offset just past
it, the line count and a CRC-32 of every byte consumed so far.

Resuming at a position re-reads the first ``offset`` bytes and checks their CRC-32: a file
(or a stream piped into stdin) that no longer starts with the bytes the checkpoint has
learned is refused with a clear message instead of silently learning the wrong records.
Compressed files (``.gz``, ``.bz2``, ``.xz``) are decompressed on the fly; offsets count
decompressed bytes.

>>> import tempfile, os
>>> path = os.path.join(tempfile.mkdtemp(), "tiny.svm")
>>> _ = open(path, "w").write("1 1:1\\n2 2:1\\n1 1:0.5\\n")
>>> source = FileSource([path], batch_records=2)
>>> [(len(b), b.position["pass"], b.position["offset"]) for b in source]  # the last: end of pass 0
[(2, 0, 12), (1, 0, 20), (0, 1, 0)]
"""

from __future__ import annotations

import glob
import mmap
import os
import select
import sys
import zlib

import numpy as np

from .errors import SourceError, SourceUnavailable  # noqa: F401 (re-exported: their home before streamlearn.connectors.errors)
from .formats import SNIFF_BYTES, UnknownFormat, guess_format, make_decoder, sniff_format
from .libsvm import compressed, open_binary
from . import decoding
from .decoding import (CHUNK_BYTES, ENDS_STREAM, UTF8_BOM, Cursor, TolerantReader, check_crc,
                       decode_mapped, decode_stream, decompression_errors, prefetch, skip_verified)
from .records import Batch

def expand_paths(patterns) -> list[str]:
    """Paths of several files or glob patterns, each pattern's matches sorted."""
    if isinstance(patterns, str):
        patterns = [patterns]
    paths = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise SourceError(f"no file matches {pattern!r}")
        for path in matches:
            if os.path.isdir(path):
                raise SourceError(f"{path!r} is a directory: give its files ({os.path.join(path, '*')!r} in quotes, "
                                  "or their paths)")
            if not os.path.isfile(path):
                raise SourceError(f"no such file: {path!r}")
        paths.extend(matches)
    return paths


class _ReadAhead:
    """What the file and stdin sources share: ``with_hashes`` (whether the decoder computes
    record hashes: only hash hold-outs need them) and :meth:`start`. A subclass defines
    ``_batches()``, the generator of its batches from its current position."""

    _started = None  # the iterator start() began

    _with_hashes = True
    weight_column = id_column = None  # a CSV column's or a flat record's field holding each record's weight, id

    @property
    def with_hashes(self) -> bool:
        return self._with_hashes

    @with_hashes.setter
    def with_hashes(self, value: bool) -> None:
        self._with_hashes = bool(value)
        for decoder in self._decoders.values():
            decoder.with_hashes = self._with_hashes

    def _make_decoder(self, fmt: str):
        """The decoder of a format (one per format: a decoder's state is per file anyway)."""
        if fmt not in self._decoders:
            decoder = self._decoders[fmt] = make_decoder(fmt, self.labelled, self.label_column, self.no_header,
                                                               self.weight_column, self.id_column)
            decoder.with_hashes = self._with_hashes
        return self._decoders[fmt]

    def start(self) -> None:
        """Begin reading and parsing now, in the background; the next iteration continues
        from there. ``streamlearn train`` calls it before it builds the learner, so that the
        first batches are parsed while the learner's modules load. A :meth:`seek` after it
        drops what was read ahead."""
        if self._started is None:
            self._started = prefetch(self._batches())

    def __iter__(self):
        started, self._started = self._started, None
        return started if started is not None else prefetch(self._batches())


def _head(path: str) -> bytes:
    """The first :data:`SNIFF_BYTES` of a file, decompressed."""
    with open_binary(path) as f:
        try:
            return f.read(SNIFF_BYTES)
        except decompression_errors() + (OSError,):  # damaged from the start: read (and reported) as LIBSVM
            return b""


class FileSource(_ReadAhead):
    """Records from one or more files (paths or globs, read in order), ``passes`` times.

    ``fmt`` is a format name (:data:`streamlearn.connectors.formats.FORMATS`) for every file; ``None``:
    each file's own, from its name (:func:`~streamlearn.connectors.formats.guess_format`) or, when the
    name does not say, from its first bytes (:func:`~streamlearn.connectors.formats.sniff_format`). A CSV
    file's header is checked at once (a missing label column is an error before any record
    is read)."""

    kind = "file"
    blocks_on_input = True  # read in a background thread: waiting on its queue is interruptible too

    def __init__(self, paths, fmt: str | None = None, labelled: bool = True, batch_records: int = 1000,
                 passes: int = 1, label_column=None, no_header: bool = False, weight_column=None, id_column=None):
        self.paths = expand_paths(paths)
        self.labelled, self.label_column, self.no_header = labelled, label_column, no_header
        self.weight_column, self.id_column = weight_column, id_column
        self._decoders: dict = {}
        self.formats = [fmt or self._format_of(path) for path in self.paths]
        self.format = self.formats[0] if len(set(self.formats)) == 1 else "mixed"
        self.batch_records = int(batch_records)
        self.passes = int(passes)
        if self.batch_records < 1 or self.passes < 1:
            raise ValueError("batch_records and passes must be positive")
        self.name = ", ".join(self.paths)
        self._start = (0, 0, Cursor(), {})

    def replay(self) -> "FileSource":
        """A one-pass source over the same files from their beginning, with record hashes (the
        runner's final hold-out evaluation reads them again)."""
        again = object.__new__(FileSource)
        again.__dict__.update(self.__dict__, passes=1, _start=(0, 0, Cursor(), {}), _started=None, _decoders={})
        again.with_hashes = True
        return again

    def _format_of(self, path: str) -> str:
        named = guess_format(path)
        head = _head(path) if named in (None, "csv") else b""
        try:
            fmt = named or sniff_format(head, f"file {path!r}", whole=len(head) < SNIFF_BYTES) or "libsvm"  # empty: no record
        except UnknownFormat as error:
            raise SourceError(str(error)) from None
        if fmt == "csv" and head.strip():
            first = (head.removeprefix(UTF8_BOM).splitlines() or [b""])[0].decode("utf-8", "replace")  # CR-only lines too, as the decoder
            try:
                make_decoder("csv", self.labelled, self.label_column, self.no_header, self.weight_column,
                             self.id_column).set_header_line(first)
            except ValueError as error:
                raise SourceError(f"file {path!r}: {error}") from None
        return fmt

    def _decoder(self, index: int):
        return self._make_decoder(self.formats[index])

    def seek(self, position: dict) -> None:
        """Continue from a position yielded earlier (see the module docstring)."""
        if position.get("kind") != self.kind or position.get("files") != self.paths:
            raise SourceError(f"the checkpoint was taken on {position.get('files') or position.get('kind')}, not on {self.paths}")
        self._started = None
        self._start = (position["pass"], position["file"], Cursor(position["offset"], position["line"], position["crc"]),
                       position.get("decoder", {}))

    def commit(self, position: dict) -> None:
        """Files need no commit: the checkpoint holds the position."""

    def close(self) -> None:
        pass

    def _position(self, pass_, index, cursor) -> dict:
        state = self._decoder(index).export() if cursor.offset else {}
        return {"kind": self.kind, "files": self.paths, "pass": pass_, "file": index, "offset": cursor.offset,
                "line": cursor.line, "crc": cursor.crc, "decoder": state}

    def _batches(self):
        first_pass, first_file, start, decoder_state = self._start
        cursor = Cursor(start.offset, start.line, start.crc)  # iterating again starts at the same place
        for pass_ in range(first_pass, self.passes):
            for index in range(first_file if pass_ == first_pass else 0, len(self.paths)):
                decoder = self._decoder(index)
                decoder.new_file()
                if cursor.offset:
                    decoder.restore(decoder_state)
                path = self.paths[index]
                with open_binary(path) as f:
                    for batch in self._decode_file(f, path, cursor, decoder):
                        ends = batch.position is ENDS_STREAM
                        batch.position = self._next_file(pass_, index) if ends else self._position(pass_, index, cursor)
                        yield batch
                cursor = Cursor()
                # the end of a file: a position that starts the next one
                yield Batch([], [], np.zeros(0, np.uint64), lambda i: {}, [], self._next_file(pass_, index))

    def _decode_file(self, f, path: str, cursor: Cursor, decoder):
        """Batches of one open file from ``cursor`` on (checking the bytes before it). A plain
        file of a line format is mapped in memory and parsed in place (no read copies)."""
        if compressed(path) or not decoder.line_based or os.fstat(f.fileno()).st_size == 0:
            read = TolerantReader(f) if compressed(path) else f.read
            if cursor.offset:
                skip_verified(read, cursor, f"file {path!r}")
            yield from decode_stream(read, decoder, path, cursor, self.batch_records)
            return
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            mapped.madvise(mmap.MADV_SEQUENTIAL)
            if cursor.offset:
                with memoryview(mapped) as whole, whole[: cursor.offset] as prefix:
                    n_read, crc = len(prefix), zlib.crc32(prefix)
                check_crc(n_read, crc, cursor, f"file {path!r}")
            yield from decode_mapped(mapped, decoder, path, cursor, self.batch_records)
        finally:
            try:
                mapped.close()
            except BufferError:  # views still alive (an error's traceback holds some): unmapped when they go
                pass

    def _next_file(self, pass_: int, index: int) -> dict:
        if index + 1 < len(self.paths):
            return self._position(pass_, index + 1, Cursor())
        return self._position(pass_ + 1, 0, Cursor())


class StdinSource(_ReadAhead):
    """Records from standard input (or any binary stream), decoded as lines arrive.

    A restart with ``--resume`` re-reads and checks the bytes the checkpoint covers, then
    continues: pipe the same stream again (a pipe cannot be rewound; a stream that starts
    differently is refused with a message that says so)."""

    kind = "stdin"
    #: a read waits for the writer: the runner interrupts it on SIGTERM/SIGINT
    blocks_on_input = True

    def __init__(self, fmt: str | None = None, labelled: bool = True, batch_records: int = 1000, label_column=None,
                 stream=None, no_header: bool = False, weight_column=None, id_column=None):
        self.format = fmt  # None: sniffed from the stream's first bytes (sniff_format)
        self.labelled, self.label_column, self.no_header = labelled, label_column, no_header
        self.weight_column, self.id_column = weight_column, id_column
        self._decoders: dict = {}
        self.batch_records = int(batch_records)
        if self.batch_records < 1:  # 0 read the whole stream as one batch
            raise ValueError(f"batch_records must be positive, got {batch_records!r}")
        self.stream = stream
        self.name = "stdin"
        self._cursor = Cursor()
        self._decoder_state: dict = {}
        self.compression = None  # "gzip", "bz2" or "xz" once the stream's first bytes showed one

    def _read(self):
        """``read(n)``, and ``ready(seconds)`` when the stream is a file descriptor that can be
        polled (``None`` otherwise: every read is taken to return at once)."""
        if self.stream is not None:
            read = getattr(self.stream, "read1", self.stream.read)
            try:
                fd = self.stream.fileno()
            except (AttributeError, OSError, ValueError):  # an in-memory stream
                return read, None
        else:
            fd = sys.stdin.fileno()
            read = lambda n: os.read(fd, n)  # noqa: E731 - what returns as soon as any bytes are there
        return read, lambda seconds: bool(select.select([fd], [], [], seconds)[0])

    def seek(self, position: dict) -> None:
        if position.get("kind") != self.kind:
            raise SourceError(f"the checkpoint was taken on a {position.get('kind')} source, not on stdin")
        self._started = None
        self._cursor = Cursor(position["offset"], position["line"], position["crc"])
        self._decoder_state = position.get("decoder", {})

    def commit(self, position: dict) -> None:
        pass

    def close(self) -> None:
        pass

    def _batches(self):
        (read, ready), cursor = self._read(), Cursor(self._cursor.offset, self._cursor.line, self._cursor.crc)
        read, ready, self.compression = decompressed(read, ready)
        if self.format is None:
            read, ready, self.format = _sniffed(read, ready)
        decoder = self._make_decoder(self.format)
        decoder.new_file()
        if cursor.offset:
            skip_verified(read, cursor, "stdin")
            decoder.restore(self._decoder_state)
        for batch in decode_stream(read, decoder, "stdin", cursor, self.batch_records, ready):
            batch.position = {"kind": self.kind, "offset": cursor.offset, "line": cursor.line, "crc": cursor.crc,
                              "decoder": decoder.export()}
            yield batch


#: the magic bytes that start a compressed stream, and the module that opens it
COMPRESSION_MAGIC = ((b"\x1f\x8b", "gzip"), (b"BZh", "bz2"), (b"\xfd7zXZ\x00", "lzma"))


class _Prepended:
    """A file-like ``read(n)`` over bytes already read from a stream, then the stream itself
    (what the decompressors of :func:`decompressed` read from)."""

    def __init__(self, head: bytes, read):
        self._head, self._read = head, read

    def read(self, n: int = -1) -> bytes:
        if self._head:
            size = len(self._head) if n is None or n < 0 else n
            piece, self._head = self._head[:size], self._head[size:]
            return piece
        if n is None or n < 0:
            return b"".join(iter(lambda: self._read(CHUNK_BYTES), b""))
        return self._read(n)


def decompressed(read, ready):
    """``read`` / ``ready`` of a stream, decompressed when its first bytes are gzip's, bzip2's
    or xz's magic (as files are by their names), and the compression's name (``None``: plain).
    Offsets then count decompressed bytes; a compressed stream is read as it comes, without
    the pause detection of ``ready`` (the decompressor holds bytes the descriptor no longer shows)."""
    head = b""
    while len(head) < 6:
        data = read(6 - len(head))
        if not data:
            break
        head += data
        if not any(magic.startswith(head[: len(magic)]) for magic, _ in COMPRESSION_MAGIC):
            break
    module = next((name for magic, name in COMPRESSION_MAGIC if head.startswith(magic)), None)
    raw = _Prepended(head, read)
    if module is None:
        return raw.read, (None if ready is None else lambda seconds: bool(raw._head) or ready(seconds)), None
    import importlib

    opened = importlib.import_module(module).open(raw, "rb")
    return TolerantReader(opened), None, {"lzma": "xz"}.get(module, module)


def _sniffed(read, ready):
    """The format of a stream from its first bytes (read until a few lines are there, the
    stream ends, or it pauses), and ``read`` / ``ready`` that hand those bytes over first."""
    head, ended = b"", False
    while len(head) < SNIFF_BYTES and head.count(b"\n") < 20:
        if head and ready is not None and not ready(decoding.GATHER_SECONDS):  # read at the call: a test lengthens it
            break
        data = read(SNIFF_BYTES - len(head))
        if not data:
            ended = True
            break
        head += data
    try:
        fmt = sniff_format(head, "stdin", whole=ended) or "libsvm"  # nothing at all: no record in any format
    except UnknownFormat as error:
        raise SourceError(str(error)) from None
    rest = [head]

    def read_after(n: int) -> bytes:
        if rest[0]:
            piece, rest[0] = rest[0][:n], rest[0][n:]
            return piece
        return read(n)

    return read_after, (None if ready is None else lambda seconds: bool(rest[0]) or ready(seconds)), fmt
