"""File and stdin sources.

Both read bytes, cut them into pieces of at most ``batch_records`` complete lines (or
records), decode each piece with a format decoder (:mod:`connectors.formats`) and yield
it as a :class:`~connectors.records.Batch` whose ``position`` is the byte offset just past
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

import concurrent.futures
import glob
import lzma
import os
import queue
import sys
import threading
import zlib

import numpy as np

from streamlearn.kernels import compiled

from .formats import guess_format, make_decoder
from .libsvm import compressed, open_binary
from .records import Batch, DeadLetter

_text = compiled("text")
CHUNK_BYTES = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"
#: the position of the batch that ends a damaged stream: resume after the stream, not in it
#: (the damage is met again there, and its dead letter would be written twice)
ENDS_STREAM = {"ends_stream": True}


class SourceError(ValueError):
    """A source that cannot be opened or resumed (the message says why)."""


class _Cursor:
    """Bytes, lines and CRC-32 consumed from one file or stream."""

    def __init__(self, offset: int = 0, line: int = 0, crc: int = 0):
        self.offset, self.line, self.crc = offset, line, crc

    def advance(self, piece: bytes, n_lines: int) -> None:
        self.offset += len(piece)
        self.line += n_lines
        self.crc = zlib.crc32(piece, self.crc)


def _cut_lines(buf: bytes, start: int, max_lines: int, final: bool) -> tuple[int, int]:
    """End of the first ``max_lines`` complete lines of ``buf[start:]`` and their count (at
    the end of the stream a last line without its newline counts as complete)."""
    end, count, last_end = _text.count_lines(np.frombuffer(buf, np.uint8), start, max_lines)
    if end >= 0:
        return end, count
    if final and len(buf) > last_end:
        return len(buf), count + 1
    return last_end, count


_PARSERS = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="streamlearn-parse")


class _TolerantReader:
    """``read(n)`` of a compressed file that ends the stream where the compressed data turns
    out corrupt or truncated, and keeps the error in ``error``: the bytes decompressed before
    that point are handed over (it gathers ``read1`` pieces: ``read`` would drop a whole
    chunk's worth with the error), the next call returns ``b""``."""

    def __init__(self, f):
        self._read1 = f.read1
        self.error: Exception | None = None

    def __call__(self, n: int) -> bytes:
        parts, size = [], 0
        while size < n and self.error is None:
            try:
                part = self._read1(n - size)
            except (EOFError, zlib.error, lzma.LZMAError) as error:  # truncated gzip/bz2/xz, bad deflate or xz data
                self.error = error
                break
            except OSError as error:  # BadGzipFile, bz2's "Invalid data stream" (no errno); a real I/O error has one
                if error.errno is not None:
                    raise
                self.error = error
                break
            if not part:
                break
            parts.append(part)
            size += len(part)
        return b"".join(parts)


def decode_stream(read, decoder, origin: str, cursor: _Cursor, max_records: int):
    """Yield batches decoded from ``read(n)`` (which returns ``b""`` at the end); the
    cursor is advanced past each batch before it is yielded.

    The pieces of one read (at most ``max_records`` lines each) of a stateless decoder
    (LIBSVM) are decoded by two threads at once; the compiled parser runs without the GIL.

    A UTF-8 byte-order mark at the start of a text stream is skipped (spreadsheet exports
    start with one). When ``read`` is a :class:`_TolerantReader` that met corrupt compressed data, the bytes
    after the last complete line are not a record (a cut line such as ``2 1:0.5 3:0`` would
    pass for one): they become a single dead letter, and the stream ends there."""
    pending = b""
    parallel = getattr(decoder, "stateless", False)
    at_start = decoder.line_based and cursor.offset == 0
    while True:
        data = read(4 * CHUNK_BYTES if parallel else CHUNK_BYTES)
        final = not data
        broken = final and getattr(read, "error", None) is not None
        buf = pending + data if pending else data
        if at_start:  # a UTF-8 byte-order mark is not part of the first line (it made "1" a label "\ufeff1")
            if len(buf) < len(UTF8_BOM) and not final and UTF8_BOM.startswith(buf):
                pending = buf  # a pipe may hand over the mark a byte at a time
                continue
            at_start = False
            if buf.startswith(UTF8_BOM):
                cursor.advance(UTF8_BOM, 0)  # counted in the offset and the CRC: resuming re-reads it
                buf = buf[len(UTF8_BOM):]
        start = 0
        if decoder.line_based:
            cuts = []
            line, offset = cursor.line, cursor.offset
            while start < len(buf):
                end, n_lines = _cut_lines(buf, start, max_records, final and not broken)
                if end == start:
                    break
                cuts.append((start, end, n_lines, line, offset))
                line, offset, start = line + n_lines, offset + end - start, end
            view = memoryview(buf) if parallel else buf  # a stateless decoder takes views: no copy per piece
            pieces = [(view[a:b], line, offset, origin) for a, b, _, line, offset in cuts]
            if parallel and len(pieces) > 1:
                batches = _PARSERS.map(lambda args: decoder.decode(*args), pieces)
            else:
                batches = (decoder.decode(*args) for args in pieces)
            for (a, b, n_lines, _, _), batch in zip(cuts, batches):
                cursor.advance(view[a:b], n_lines)
                yield batch
        else:
            while start < len(buf):
                batch, consumed, n_lines = decoder.decode(buf[start:], final, cursor.line, cursor.offset, origin, max_records)
                if consumed == 0:
                    break
                end = start + consumed
                cursor.advance(buf[start:end], n_lines)
                start = end
                yield batch
        pending = buf[start:]
        if broken:
            where = {"source": origin, "offset": cursor.offset}
            if decoder.line_based:
                where["line"] = cursor.line + 1
            yield Batch([], [], np.zeros(0, np.uint64), lambda i: {}, [DeadLetter(
                where, "undecodable", f"the compressed data is corrupt or truncated here ({read.error}); "
                f"the rest of the file cannot be read ({len(pending):,} bytes after the last complete record dropped)", pending)],
                ENDS_STREAM)
        if final:
            return


_DONE = object()


def prefetch(batches, depth: int = 2):
    """Run a batch generator in a background thread, ``depth`` batches ahead: reading and
    parsing (compiled without the GIL) overlap with learning on the other core. Errors
    are re-raised here; leaving the loop early stops the thread."""
    results: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce():
        try:
            for batch in batches:
                while not stop.is_set():
                    try:
                        results.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            results.put(_DONE)
        except BaseException as error:  # handed to the consumer
            results.put(error)

    thread = threading.Thread(target=produce, name="streamlearn-reader", daemon=True)
    thread.start()
    try:
        while True:
            item = results.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def skip_verified(read, cursor: _Cursor, what: str) -> None:
    """Read and drop ``cursor.offset`` bytes, checking them against ``cursor.crc``."""
    left, crc = cursor.offset, 0
    while left:
        data = read(min(left, CHUNK_BYTES))
        if not data:
            raise SourceError(f"{what} ends after {cursor.offset - left:,} bytes, before the checkpoint's position ({cursor.offset:,} bytes)")
        crc = zlib.crc32(data, crc)
        left -= len(data)
    if crc != cursor.crc:
        raise SourceError(f"{what} does not start with the {cursor.offset:,} bytes the checkpoint has learned (their CRC-32 differs)")


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
            if not os.path.isfile(path):
                raise SourceError(f"no such file: {path!r}")
        paths.extend(matches)
    return paths


class _HashSwitch:
    """``with_hashes``: whether the decoder computes record hashes (only hash hold-outs need them)."""

    @property
    def with_hashes(self) -> bool:
        return self.decoder.with_hashes

    @with_hashes.setter
    def with_hashes(self, value: bool) -> None:
        self.decoder.with_hashes = bool(value)


class FileSource(_HashSwitch):
    """Records from one or more files (paths or globs, read in order), ``passes`` times.

    ``fmt`` is a format name (:data:`connectors.formats.FORMATS`), guessed from the first
    file's name when ``None``."""

    kind = "file"

    def __init__(self, paths, fmt: str | None = None, labelled: bool = True, batch_records: int = 1000,
                 passes: int = 1, label_column=None):
        self.paths = expand_paths(paths)
        self.format = fmt or guess_format(self.paths[0])
        self.decoder = make_decoder(self.format, labelled, label_column)
        self.batch_records = int(batch_records)
        self.passes = int(passes)
        if self.batch_records < 1 or self.passes < 1:
            raise ValueError("batch_records and passes must be positive")
        self.name = ", ".join(self.paths)
        self._start = (0, 0, _Cursor(), {})

    def seek(self, position: dict) -> None:
        """Continue from a position yielded earlier (see the module docstring)."""
        if position.get("kind") != self.kind or position.get("files") != self.paths:
            raise SourceError(f"the checkpoint was taken on {position.get('files') or position.get('kind')}, not on {self.paths}")
        self._start = (position["pass"], position["file"], _Cursor(position["offset"], position["line"], position["crc"]),
                       position.get("decoder", {}))

    def commit(self, position: dict) -> None:
        """Files need no commit: the checkpoint holds the position."""

    def close(self) -> None:
        pass

    def _position(self, pass_, index, cursor) -> dict:
        return {"kind": self.kind, "files": self.paths, "pass": pass_, "file": index, "offset": cursor.offset,
                "line": cursor.line, "crc": cursor.crc, "decoder": self.decoder.export()}

    def __iter__(self):
        return prefetch(self._batches())

    def _batches(self):
        first_pass, first_file, start, decoder_state = self._start
        cursor = _Cursor(start.offset, start.line, start.crc)  # iterating again starts at the same place
        for pass_ in range(first_pass, self.passes):
            for index in range(first_file if pass_ == first_pass else 0, len(self.paths)):
                self.decoder.new_file()
                if cursor.offset:
                    self.decoder.restore(decoder_state)
                path = self.paths[index]
                with open_binary(path) as f:
                    read = _TolerantReader(f) if compressed(path) else f.read
                    if cursor.offset:
                        skip_verified(read, cursor, f"file {path!r}")
                    for batch in decode_stream(read, self.decoder, path, cursor, self.batch_records):
                        ends = batch.position is ENDS_STREAM
                        batch.position = self._next_file(pass_, index) if ends else self._position(pass_, index, cursor)
                        yield batch
                cursor = _Cursor()
                # the end of a file: a position that starts the next one
                yield Batch([], [], np.zeros(0, np.uint64), lambda i: {}, [], self._next_file(pass_, index))

    def _next_file(self, pass_: int, index: int) -> dict:
        if index + 1 < len(self.paths):
            return self._position(pass_, index + 1, _Cursor())
        return self._position(pass_ + 1, 0, _Cursor())


class StdinSource(_HashSwitch):
    """Records from standard input (or any binary stream), decoded as lines arrive.

    A restart with ``--resume`` re-reads and checks the bytes the checkpoint covers, then
    continues: pipe the same stream again (a pipe cannot be rewound; a stream that starts
    differently is refused with a message that says so)."""

    kind = "stdin"

    def __init__(self, fmt: str = "libsvm", labelled: bool = True, batch_records: int = 1000, label_column=None, stream=None):
        self.format = fmt
        self.decoder = make_decoder(fmt, labelled, label_column)
        self.batch_records = int(batch_records)
        if self.batch_records < 1:  # 0 read the whole stream as one batch
            raise ValueError(f"batch_records must be positive, got {batch_records!r}")
        self.stream = stream
        self.name = "stdin"
        self._cursor = _Cursor()
        self._decoder_state: dict = {}

    def _read(self):
        if self.stream is not None:
            return getattr(self.stream, "read1", self.stream.read)
        fd = sys.stdin.fileno()
        return lambda n: os.read(fd, n)

    def seek(self, position: dict) -> None:
        if position.get("kind") != self.kind:
            raise SourceError(f"the checkpoint was taken on a {position.get('kind')} source, not on stdin")
        self._cursor = _Cursor(position["offset"], position["line"], position["crc"])
        self._decoder_state = position.get("decoder", {})

    def commit(self, position: dict) -> None:
        pass

    def close(self) -> None:
        pass

    def __iter__(self):
        return prefetch(self._batches())

    def _batches(self):
        read, cursor = self._read(), _Cursor(self._cursor.offset, self._cursor.line, self._cursor.crc)
        self.decoder.new_file()
        if cursor.offset:
            skip_verified(read, cursor, "stdin")
            self.decoder.restore(self._decoder_state)
        for batch in decode_stream(read, self.decoder, "stdin", cursor, self.batch_records):
            batch.position = {"kind": self.kind, "offset": cursor.offset, "line": cursor.line, "crc": cursor.crc,
                              "decoder": self.decoder.export()}
            yield batch
