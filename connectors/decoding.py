"""Bytes to batches, for the file and stdin sources (:mod:`streamlearn.connectors.files`): a byte stream (or a
memory-mapped file) is cut into pieces of at most ``max_records`` complete lines (or records),
the pieces are decoded on parser threads, and the batches come out in stream order, each with
the :class:`Cursor` just past it (byte offset, line count, CRC-32 of every byte consumed)."""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import sys
import threading
import weakref
import zlib

import numpy as np

from streamlearn.kernels import compiled

from .errors import SourceError
from .records import Batch, DeadLetter

_text = compiled("text")
CHUNK_BYTES = 1 << 20
UTF8_BOM = b"\xef\xbb\xbf"
#: the position of the batch that ends a damaged stream: resume after the stream, not in it
#: (the damage is met again there, and its dead letter would be written twice)
ENDS_STREAM = {"ends_stream": True}


class Cursor:
    """Bytes, lines and CRC-32 consumed from one file or stream."""

    def __init__(self, offset: int = 0, line: int = 0, crc: int = 0):
        self.offset, self.line, self.crc = offset, line, crc

    def advance(self, piece: bytes, n_lines: int) -> None:
        self.offset += len(piece)
        self.line += n_lines
        self.crc = zlib.crc32(piece, self.crc)


def cut_lines(array: np.ndarray, start: int, max_lines: int, final: bool) -> tuple[int, int]:
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


def decompression_errors() -> tuple:
    """What a truncated or damaged compressed file raises (``lzma``'s error only once an
    ``.xz`` file has loaded that module: it is imported on first use)."""
    xz = sys.modules.get("lzma")
    return (EOFError, zlib.error) if xz is None else (EOFError, zlib.error, xz.LZMAError)


class TolerantReader:
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
            except decompression_errors() as error:  # truncated gzip/bz2/xz, bad deflate or xz data
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


def decode_stream(read, decoder, origin: str, cursor: Cursor, max_records: int, ready=None):
    """Yield batches decoded from ``read(n)`` (which returns ``b""`` at the end); the
    cursor is advanced past each batch before it is yielded. Batches hold ``max_records``
    lines each, whatever sizes the reads return (so a replay cuts the same batches), except
    the last, and one cut short when the stream pauses: ``ready(seconds)`` (a pipe's) tells
    whether a read would return within that time; a read that would wait longer than
    ``GATHER_SECONDS`` first hands over the complete lines gathered so far.

    A UTF-8 byte-order mark at the start of a text stream is skipped (spreadsheet exports
    start with one). When ``read`` is a :class:`TolerantReader` that met corrupt compressed data, the bytes
    after the last complete line are not a record (a cut line such as ``2 1:0.5 3:0`` would
    pass for one): they become a single dead letter, and the stream ends there."""
    if not decoder.line_based:
        yield from _decode_records(read, decoder, origin, cursor, max_records, ready)
        return
    yield from _decode_in_order(_stream_pieces(read, decoder, origin, cursor, max_records, ready), decoder, origin, cursor)


def decode_mapped(mapped, decoder, origin: str, cursor: Cursor, max_records: int):
    """:func:`decode_stream` for a whole file mapped in memory (a plain file): its pieces are
    views on the mapping, so no byte is copied before the parser reads it."""
    array = np.frombuffer(mapped, np.uint8)
    view = memoryview(mapped)
    try:
        yield from _decode_in_order(_mapped_pieces(array, view, cursor, max_records), decoder, origin, cursor)
    finally:
        view.release()
        del array


def _mapped_pieces(array: np.ndarray, view: memoryview, cursor: Cursor, max_records: int):
    """``(piece, lines)`` of at most ``max_records`` lines each, from ``cursor.offset`` on."""
    position = cursor.offset
    if position == 0 and view[: len(UTF8_BOM)] == UTF8_BOM:  # skipped, counted: resuming re-reads it
        cursor.advance(UTF8_BOM, 0)
        position = len(UTF8_BOM)
    while position < len(array):
        end, n_lines = cut_lines(array, position, max_records, True)
        yield view[position:end], n_lines
        position = end


def _stream_pieces(read, decoder, origin: str, cursor: Cursor, max_records: int, ready=None):
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
            end, n_lines = cut_lines(array, start, max_records, final and not broken)
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


def _decode_in_order(pieces, decoder, origin: str, cursor: Cursor, window: int = PARSE_WINDOW):
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


def _done(in_flight: collections.deque, cursor: Cursor) -> Batch:
    """The oldest piece in flight, parsed; the cursor advanced past it."""
    piece, n_lines, future = in_flight.popleft()
    batch = future.result()
    cursor.advance(piece, n_lines)
    return batch


def _decode_records(read, decoder, origin: str, cursor: Cursor, max_records: int, ready=None):
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


def skip_verified(read, cursor: Cursor, what: str) -> None:
    """Read and drop ``cursor.offset`` bytes, checking them against ``cursor.crc``."""
    left, crc = cursor.offset, 0
    while left:
        data = read(min(left, CHUNK_BYTES))
        if not data:
            break
        crc = zlib.crc32(data, crc)
        left -= len(data)
    check_crc(cursor.offset - left, crc, cursor, what)


def check_crc(n_read: int, crc: int, cursor: Cursor, what: str) -> None:
    if n_read < cursor.offset:
        raise SourceError(f"{what} ends after {n_read:,} bytes, before the checkpoint's position ({cursor.offset:,} bytes)")
    if crc != cursor.crc:
        raise SourceError(f"{what} does not start with the {cursor.offset:,} bytes the checkpoint has learned (their CRC-32 differs)")
