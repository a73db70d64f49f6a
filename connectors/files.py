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

import collections
import concurrent.futures
import glob
import mmap
import os
import queue
import select
import sys
import threading
import weakref
import zlib

import numpy as np

from streamlearn.kernels import compiled

from .errors import SourceError, SourceUnavailable  # noqa: F401 (re-exported: their home before connectors.errors)
from .formats import SNIFF_BYTES, UnknownFormat, guess_format, make_decoder, sniff_format
from .libsvm import compressed, open_binary
from .records import Batch, DeadLetter

_text = compiled("text")
CHUNK_BYTES = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"
#: the position of the batch that ends a damaged stream: resume after the stream, not in it
#: (the damage is met again there, and its dead letter would be written twice)
ENDS_STREAM = {"ends_stream": True}


class _Cursor:
    """Bytes, lines and CRC-32 consumed from one file or stream."""

    def __init__(self, offset: int = 0, line: int = 0, crc: int = 0):
        self.offset, self.line, self.crc = offset, line, crc

    def advance(self, piece: bytes, n_lines: int) -> None:
        self.offset += len(piece)
        self.line += n_lines
        self.crc = zlib.crc32(piece, self.crc)


def _cut_lines(array: np.ndarray, start: int, max_lines: int, final: bool) -> tuple[int, int]:
    """End of the first ``max_lines`` complete lines of ``array[start:]`` (bytes as uint8)
    and their count (at the end of the stream a last line without its newline counts as
    complete)."""
    end, count, last_end = _text.count_lines(array, start, max_lines)
    if end >= 0:
        return end, count
    if final and len(array) > last_end:
        return len(array), count + 1
    return last_end, count


#: how long a stream that pauses may keep gathered lines before it hands them over
GATHER_SECONDS = 0.2
_PARSERS = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="streamlearn-parse")
#: most pieces in flight at once: the learner's, and up to three parsed ahead of it (see _decode_in_order)
PARSE_WINDOW = 4


def _decompression_errors() -> tuple:
    """What a truncated or damaged compressed file raises (``lzma``'s error only once an
    ``.xz`` file has loaded that module: it is imported on first use)."""
    xz = sys.modules.get("lzma")
    return (EOFError, zlib.error) if xz is None else (EOFError, zlib.error, xz.LZMAError)


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
            except _decompression_errors() as error:  # truncated gzip/bz2/xz, bad deflate or xz data
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


def decode_stream(read, decoder, origin: str, cursor: _Cursor, max_records: int, ready=None):
    """Yield batches decoded from ``read(n)`` (which returns ``b""`` at the end); the
    cursor is advanced past each batch before it is yielded. Batches hold ``max_records``
    lines each, whatever sizes the reads return (so a replay cuts the same batches), except
    the last, and one cut short when the stream pauses: ``ready(seconds)`` (a pipe's) tells
    whether a read would return within that time; a read that would wait longer than
    ``GATHER_SECONDS`` first hands over the complete lines gathered so far.

    A UTF-8 byte-order mark at the start of a text stream is skipped (spreadsheet exports
    start with one). When ``read`` is a :class:`_TolerantReader` that met corrupt compressed data, the bytes
    after the last complete line are not a record (a cut line such as ``2 1:0.5 3:0`` would
    pass for one): they become a single dead letter, and the stream ends there."""
    if not decoder.line_based:
        yield from _decode_records(read, decoder, origin, cursor, max_records, ready)
        return
    yield from _decode_in_order(_stream_pieces(read, decoder, origin, cursor, max_records, ready), decoder, origin, cursor)


def decode_mapped(mapped, decoder, origin: str, cursor: _Cursor, max_records: int):
    """:func:`decode_stream` for a whole file mapped in memory (a plain file): its pieces are
    views on the mapping, so no byte is copied before the parser reads it."""
    array = np.frombuffer(mapped, np.uint8)
    view = memoryview(mapped)
    try:
        yield from _decode_in_order(_mapped_pieces(array, view, cursor, max_records), decoder, origin, cursor)
    finally:
        view.release()
        del array


def _mapped_pieces(array: np.ndarray, view: memoryview, cursor: _Cursor, max_records: int):
    """``(piece, lines)`` of at most ``max_records`` lines each, from ``cursor.offset`` on."""
    position = cursor.offset
    if position == 0 and view[: len(UTF8_BOM)] == UTF8_BOM:  # skipped, counted: resuming re-reads it
        cursor.advance(UTF8_BOM, 0)
        position = len(UTF8_BOM)
    while position < len(array):
        end, n_lines = _cut_lines(array, position, max_records, True)
        yield view[position:end], n_lines
        position = end


def _stream_pieces(read, decoder, origin: str, cursor: _Cursor, max_records: int, ready=None):
    """``(piece, lines)`` of ``max_records`` complete lines each (fewer: the last, or when
    the stream pauses, see :func:`decode_stream`), read from ``read``; at the end of a damaged
    compressed stream, the dead letter :class:`Batch` of its rest; ``None`` before a read
    that may block (a pipe waiting for input): everything parsed must be handed over first."""
    pending = b""
    waiting_end = waiting_lines = 0  # the complete lines at the start of ``pending``: fewer than max_records
    parallel = getattr(decoder, "stateless", False)
    at_start = cursor.offset == 0
    while True:
        if ready is not None and not ready(0):  # the next read waits for the writer
            if waiting_lines and not ready(GATHER_SECONDS):  # a pause: the lines gathered go now
                yield memoryview(pending)[:waiting_end], waiting_lines
                pending, waiting_end, waiting_lines = pending[waiting_end:], 0, 0
            yield None
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
        array, view = np.frombuffer(buf, np.uint8), memoryview(buf)  # a piece is a view: no copy per piece
        start = waiting_end = waiting_lines = 0
        while start < len(buf):
            end, n_lines = _cut_lines(array, start, max_records, final and not broken)
            if end == start:
                break
            if n_lines < max_records and not final:  # wait for the rest of the batch
                waiting_end, waiting_lines = end - start, n_lines
                break
            yield view[start:end], n_lines
            start = end
        pending = buf[start:]
        if broken:
            yield _damaged_rest(read.error, pending, origin)
        if final:
            return


def _damaged_rest(error, rest: bytes, origin: str) -> Batch:
    """The dead letter of what follows corrupt compressed data (its position is filled in by
    :func:`_decode_in_order`, once every piece before it is consumed)."""
    return Batch([], [], np.zeros(0, np.uint64), lambda i: {}, [DeadLetter(
        {"source": origin}, "undecodable", f"the compressed data is corrupt or truncated here ({error}); "
        f"the rest of the file cannot be read ({len(rest):,} bytes after the last complete record dropped)", rest)],
        ENDS_STREAM)


def _decode_in_order(pieces, decoder, origin: str, cursor: _Cursor, window: int = PARSE_WINDOW):
    """Decode ``(piece, lines)`` items in stream order and yield their batches, advancing the
    cursor past each piece just before its batch is yielded. A stateless decoder (LIBSVM:
    the compiled parser runs without the GIL) gets up to ``window`` pieces parsed at once on
    two threads, continuously, while the batches before them are learned; a ``None`` item
    hands over every piece in flight first (see :func:`_stream_pieces`). Other decoders get
    each piece as ``bytes``, in order."""
    parallel = getattr(decoder, "stateless", False)
    in_flight: collections.deque = collections.deque()
    # One piece is parsed ahead of the learner until the learner has to wait for one; then
    # more, up to ``window``, on both threads: a second parser thread only competes with the
    # learner while the learner is the slower side.
    ahead, started = (1 if window > 1 else 0), False
    line = offset = None  # of the next piece (the cursor trails behind the pieces in flight)
    try:
        for item in pieces:
            if item is None:
                while in_flight:
                    yield _done(in_flight, cursor)
                continue
            if isinstance(item, Batch):  # the rest of a damaged stream: after everything before it
                while in_flight:
                    yield _done(in_flight, cursor)
                where = item.dead[0].position
                where["offset"] = cursor.offset
                if decoder.line_based:
                    where["line"] = cursor.line + 1
                yield item
                continue
            piece, n_lines = item
            if line is None:
                line, offset = cursor.line, cursor.offset
            if parallel:
                in_flight.append((piece, n_lines, _PARSERS.submit(decoder.decode, piece, line, offset, origin)))
                if len(in_flight) > ahead:
                    if started and ahead < window - 1 and not in_flight[0][2].done():
                        ahead += 1  # the learner would wait: parse one more piece ahead first
                    else:
                        started = True
                        yield _done(in_flight, cursor)
            else:
                batch = decoder.decode(bytes(piece), line, offset, origin)
                cursor.advance(piece, n_lines)
                yield batch
            line, offset = line + n_lines, offset + len(piece)
        while in_flight:
            yield _done(in_flight, cursor)
    finally:  # stopped early: let the parsers finish with the pieces they hold (a mapping cannot close under them)
        for _, _, future in in_flight:
            future.cancel()
        concurrent.futures.wait([future for _, _, future in in_flight])


def _done(in_flight: collections.deque, cursor: _Cursor) -> Batch:
    """The oldest piece in flight, parsed; the cursor advanced past it."""
    piece, n_lines, future = in_flight.popleft()
    batch = future.result()
    cursor.advance(piece, n_lines)
    return batch


def _decode_records(read, decoder, origin: str, cursor: _Cursor, max_records: int, ready=None):
    """:func:`decode_stream` for a record format that is not line based (msgpack): a batch
    short of ``max_records`` records is decoded again once more bytes came (the decoder's
    state put back), unless the stream ends or pauses."""
    pending = b""
    final = False
    while not final:
        pause = bool(pending) and ready is not None and not ready(0) and not ready(GATHER_SECONDS)
        data = b"" if pause else read(CHUNK_BYTES)
        final = not data and not pause
        buf = pending + data if pending else data
        start = 0
        while start < len(buf):
            state = decoder.export()
            batch, consumed, n_records = decoder.decode(buf[start:], final, cursor.line, cursor.offset, origin, max_records)
            if consumed == 0:
                break
            if n_records < max_records and not (final or pause):  # wait for the rest of the batch
                decoder.restore(state)
                break
            end = start + consumed
            cursor.advance(buf[start:end], n_records)
            start = end
            yield batch
        pending = buf[start:]


_DONE = object()


def prefetch(batches, depth: int = 2):
    """Run a batch generator in a background thread, ``depth`` batches ahead: reading and
    parsing (compiled without the GIL) overlap with learning on the other core. The thread
    starts at once (see :meth:`_ReadAhead.start`); the returned generator hands over its
    batches and re-raises its errors. Leaving the loop early, or dropping the generator
    unstarted, stops the thread."""
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

    threading.Thread(target=produce, name="streamlearn-reader", daemon=True).start()
    handed = _hand_over(results, stop)
    weakref.finalize(handed, stop.set)  # never iterated to its end or closed: the thread still stops
    return handed


def _hand_over(results: queue.Queue, stop: threading.Event):
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
            break
        crc = zlib.crc32(data, crc)
        left -= len(data)
    _check_crc(cursor.offset - left, crc, cursor, what)


def _check_crc(n_read: int, crc: int, cursor: _Cursor, what: str) -> None:
    if n_read < cursor.offset:
        raise SourceError(f"{what} ends after {n_read:,} bytes, before the checkpoint's position ({cursor.offset:,} bytes)")
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
            decoder = self._decoders[fmt] = make_decoder(fmt, self.labelled, self.label_column, self.no_header)
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
        except _decompression_errors() + (OSError,):  # damaged from the start: read (and reported) as LIBSVM
            return b""


class FileSource(_ReadAhead):
    """Records from one or more files (paths or globs, read in order), ``passes`` times.

    ``fmt`` is a format name (:data:`connectors.formats.FORMATS`) for every file; ``None``:
    each file's own, from its name (:func:`~connectors.formats.guess_format`) or, when the
    name does not say, from its first bytes (:func:`~connectors.formats.sniff_format`). A CSV
    file's header is checked at once (a missing label column is an error before any record
    is read)."""

    kind = "file"
    blocks_on_input = True  # read in a background thread: waiting on its queue is interruptible too

    def __init__(self, paths, fmt: str | None = None, labelled: bool = True, batch_records: int = 1000,
                 passes: int = 1, label_column=None, no_header: bool = False):
        self.paths = expand_paths(paths)
        self.labelled, self.label_column, self.no_header = labelled, label_column, no_header
        self._decoders: dict = {}
        self.formats = [fmt or self._format_of(path) for path in self.paths]
        self.format = self.formats[0] if len(set(self.formats)) == 1 else "mixed"
        self.batch_records = int(batch_records)
        self.passes = int(passes)
        if self.batch_records < 1 or self.passes < 1:
            raise ValueError("batch_records and passes must be positive")
        self.name = ", ".join(self.paths)
        self._start = (0, 0, _Cursor(), {})

    def replay(self) -> "FileSource":
        """A one-pass source over the same files from their beginning, with record hashes (the
        runner's final hold-out evaluation reads them again)."""
        again = object.__new__(FileSource)
        again.__dict__.update(self.__dict__, passes=1, _start=(0, 0, _Cursor(), {}), _started=None, _decoders={})
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
            first = head.removeprefix(UTF8_BOM).split(b"\n", 1)[0].rstrip(b"\r").decode("utf-8", "replace")
            try:
                make_decoder("csv", self.labelled, self.label_column, self.no_header).set_header_line(first)
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
        self._start = (position["pass"], position["file"], _Cursor(position["offset"], position["line"], position["crc"]),
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
        cursor = _Cursor(start.offset, start.line, start.crc)  # iterating again starts at the same place
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
                cursor = _Cursor()
                # the end of a file: a position that starts the next one
                yield Batch([], [], np.zeros(0, np.uint64), lambda i: {}, [], self._next_file(pass_, index))

    def _decode_file(self, f, path: str, cursor: _Cursor, decoder):
        """Batches of one open file from ``cursor`` on (checking the bytes before it). A plain
        file of a line format is mapped in memory and parsed in place (no read copies)."""
        if compressed(path) or not decoder.line_based or os.fstat(f.fileno()).st_size == 0:
            read = _TolerantReader(f) if compressed(path) else f.read
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
                _check_crc(n_read, crc, cursor, f"file {path!r}")
            yield from decode_mapped(mapped, decoder, path, cursor, self.batch_records)
        finally:
            try:
                mapped.close()
            except BufferError:  # views still alive (an error's traceback holds some): unmapped when they go
                pass

    def _next_file(self, pass_: int, index: int) -> dict:
        if index + 1 < len(self.paths):
            return self._position(pass_, index + 1, _Cursor())
        return self._position(pass_ + 1, 0, _Cursor())


class StdinSource(_ReadAhead):
    """Records from standard input (or any binary stream), decoded as lines arrive.

    A restart with ``--resume`` re-reads and checks the bytes the checkpoint covers, then
    continues: pipe the same stream again (a pipe cannot be rewound; a stream that starts
    differently is refused with a message that says so)."""

    kind = "stdin"
    #: a read waits for the writer: the runner interrupts it on SIGTERM/SIGINT
    blocks_on_input = True

    def __init__(self, fmt: str | None = None, labelled: bool = True, batch_records: int = 1000, label_column=None,
                 stream=None, no_header: bool = False):
        self.format = fmt  # None: sniffed from the stream's first bytes (sniff_format)
        self.labelled, self.label_column, self.no_header = labelled, label_column, no_header
        self._decoders: dict = {}
        self.batch_records = int(batch_records)
        if self.batch_records < 1:  # 0 read the whole stream as one batch
            raise ValueError(f"batch_records must be positive, got {batch_records!r}")
        self.stream = stream
        self.name = "stdin"
        self._cursor = _Cursor()
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
        self._cursor = _Cursor(position["offset"], position["line"], position["crc"])
        self._decoder_state = position.get("decoder", {})

    def commit(self, position: dict) -> None:
        pass

    def close(self) -> None:
        pass

    def _batches(self):
        (read, ready), cursor = self._read(), _Cursor(self._cursor.offset, self._cursor.line, self._cursor.crc)
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
    return _TolerantReader(opened), None, {"lzma": "xz"}.get(module, module)


def _sniffed(read, ready):
    """The format of a stream from its first bytes (read until a few lines are there, the
    stream ends, or it pauses), and ``read`` / ``ready`` that hand those bytes over first."""
    head, ended = b"", False
    while len(head) < SNIFF_BYTES and head.count(b"\n") < 20:
        if head and ready is not None and not ready(GATHER_SECONDS):
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
