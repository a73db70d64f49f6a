"""Versioned msgpack checkpoints: save, load, list.

A checkpoint file ``ckpt-<sequence>.slc`` is::

    b"STREAMLEARN\\0" | format version (uint32, little endian) | SHA-256 | payload

where the SHA-256 covers the magic, the version and the payload (format 1 hashed the payload
only, so a flipped byte in its version field read as "another version" instead of damage;
format 1 files are still read), and the payload is msgpack: ``{"sequence", "created", "learner": learner.export_state(),
"position": the source position, "runner": counters, metrics, sink sizes}``. NumPy
arrays are msgpack extension values (dtype, shape, raw bytes), and so are integers beyond
msgpack's 64 bits (decimal text) and tuples (a label or a feature name may be either), so
every hashable label and name comes back hashable, and reading a checkpoint never unpickles code.

:class:`BackgroundWriter` writes them on a thread: the caller takes a :func:`snapshot` of the
payload (copies of its arrays and containers: milliseconds) and goes on learning while the file
is packed, hashed, written and fsynced; it learns when the file is durable (and only then commits
the position the checkpoint holds to its source).

Writing is atomic: a temporary file in the same directory is written, fsynced and renamed,
and the directory is fsynced. The newest ``keep`` checkpoints are kept. Loading takes the
newest checkpoint that is intact; a corrupt one (bad magic, checksum, truncation) is
skipped with a warning. An intact checkpoint of another format version is refused with a
message that says so — it is not silently skipped.

>>> import tempfile, numpy as np
>>> store = CheckpointStore(tempfile.mkdtemp())
>>> path = store.save({"learner": {"w": np.arange(3.0)}, "position": {"offset": 10}})
>>> store.load_latest()["learner"]["w"]
array([0., 1., 2.])
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import pathlib
import struct
import time
import warnings

import msgpack
import numpy as np

from . import failpoints

MAGIC = b"STREAMLEARN\0"
FORMAT_VERSION = 2
_HASHED_HEADER = 16  # magic and version: inside the digest since format 2
_HEADER = struct.Struct("<12sI32s")
_NDARRAY = 1
_BIG_INT = 2  # an int beyond msgpack's 64-bit integers (a label or feature name such as 10**30), as decimal text
_TUPLE = 3  # a tuple (a label, or a DataFrame's MultiIndex column name): a list would not be hashable again


class CheckpointError(ValueError):
    """A checkpoint that cannot be used (the message says why and what to do)."""


class CorruptCheckpoint(CheckpointError):
    """A checkpoint whose bytes are damaged (it is skipped when an older one exists)."""


def _encode(obj):
    if isinstance(obj, np.ndarray):
        array = np.ascontiguousarray(obj)
        if array.dtype.hasobject:
            raise TypeError("object arrays cannot be checkpointed")
        raw = memoryview(array.reshape(-1)).cast("B")  # the same bytes as tobytes(), one copy fewer
        return msgpack.ExtType(_NDARRAY, msgpack.packb([array.dtype.str, list(array.shape), raw]))
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, tuple):
        return msgpack.ExtType(_TUPLE, _pack(list(obj)))
    if type(obj) is int:  # msgpack hands over only the ints it cannot store itself
        return msgpack.ExtType(_BIG_INT, str(obj).encode("ascii"))
    raise TypeError(f"cannot checkpoint a {type(obj).__name__}")


def _decode_ext(code, data):
    if code == _NDARRAY:
        dtype, shape, raw = msgpack.unpackb(data)
        return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
    if code == _BIG_INT:
        return int(data.decode("ascii"))
    if code == _TUPLE:
        return tuple(_unpack(data))
    return msgpack.ExtType(code, data)


def _pack(obj) -> bytes:
    # surrogatepass: a str with a lone surrogate (JSON's "\ud800" decodes to one) is a valid label or name
    return msgpack.packb(obj, default=_encode, use_bin_type=True, strict_types=True, unicode_errors="surrogatepass")


def _unpack(data: bytes):
    return msgpack.unpackb(data, ext_hook=_decode_ext, raw=False, strict_map_key=False, unicode_errors="surrogatepass")


#: the checkpoints' msgpack encoding (arrays, tuples, big ints), for other messages (the mixing topic's)
pack, unpack = _pack, _unpack


def dumps(payload: dict) -> bytes:
    """The bytes of a checkpoint file holding ``payload``."""
    body = _pack(payload)
    return with_digest(FORMAT_VERSION, body)


def with_digest(version: int, body: bytes) -> bytes:
    """Header and payload of a checkpoint file of format ``version`` (2 and later)."""
    digest = hashlib.sha256(MAGIC + struct.pack("<I", version))
    digest.update(body)
    return _HEADER.pack(MAGIC, version, digest.digest()) + body


def loads(data: bytes, name: str = "checkpoint") -> dict:
    """The payload of checkpoint bytes; raises :class:`CorruptCheckpoint` or
    :class:`CheckpointError` (other format version)."""
    if len(data) < _HEADER.size or not data.startswith(MAGIC):
        raise CorruptCheckpoint(f"{name} is not a streamlearn checkpoint (bad header or truncated)")
    _, version, digest = _HEADER.unpack_from(data)
    body = memoryview(data)[_HEADER.size:]
    whole = hashlib.sha256(memoryview(data)[:_HASHED_HEADER])
    whole.update(body)
    if whole.digest() == digest:  # intact: its version field is what its writer wrote
        if version != FORMAT_VERSION:
            raise CheckpointError(
                f"{name} has checkpoint format version {version}, but this streamlearn reads version {FORMAT_VERSION}: "
                "use the streamlearn version that wrote it, or start without --resume")
        return _checked(body, name)
    if version == 1 and hashlib.sha256(body).digest() == digest:  # format 1: the payload alone was hashed
        return _checked(body, name)
    raise CorruptCheckpoint(f"{name} is corrupt (checksum mismatch)")


def _checked(body, name: str):
    """The payload of an intact file (contents that cannot be decoded are damage)."""
    try:
        return _unpack(body)
    except (ValueError, TypeError, msgpack.UnpackException) as error:
        raise CorruptCheckpoint(f"{name} has a valid checksum but its contents cannot be decoded ({error})") from None


def restore_learner(payload: dict):
    """The learner of a loaded checkpoint; a state it cannot be rebuilt from (arrays cut short,
    a part missing) is a :class:`CheckpointError` naming the file, not a traceback."""
    from .. import learner_from_state

    if not isinstance(payload.get("learner"), dict):
        raise CheckpointError(f"{payload.get('path', 'the checkpoint')} holds no model (no learner state)")
    try:
        return learner_from_state(payload["learner"])
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as error:
        raise CheckpointError(f"{payload.get('path', 'the checkpoint')}: its model cannot be restored "
                              f"({type(error).__name__}: {error})") from None


def snapshot(obj):
    """A copy of a payload that later learning cannot change: arrays copied, dicts, lists and
    tuples rebuilt (a learner's export may hold its live arrays and lists)."""
    if isinstance(obj, np.ndarray):
        return obj.copy()
    if isinstance(obj, dict):
        return {key: snapshot(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [snapshot(value) for value in obj]
    if isinstance(obj, tuple):
        return tuple(snapshot(value) for value in obj)
    return obj


def _remove(path: pathlib.Path) -> None:
    """Remove a checkpoint file; what is not one (a directory of that name) is left alone."""
    try:
        path.unlink(missing_ok=True)
    except (IsADirectoryError, PermissionError):
        pass


class BackgroundWriter:
    """Saves checkpoints of a :class:`CheckpointStore` on one thread, one at a time.

    >>> import tempfile, numpy as np
    >>> writer = BackgroundWriter(CheckpointStore(tempfile.mkdtemp()))
    >>> job = writer.submit(snapshot({"learner": {"w": np.ones(2)}, "position": None}))
    >>> job.result().name, writer.seconds > 0
    ('ckpt-000000000001.slc', True)
    >>> writer.close()
    """

    def __init__(self, store: "CheckpointStore"):
        from concurrent.futures import ThreadPoolExecutor

        self.store = store
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamlearn-checkpoint")
        self.seconds = 0.0  # spent writing, on the thread

    def _save(self, payload: dict) -> pathlib.Path:
        start = time.perf_counter()
        try:
            return self.store.save(payload)
        finally:
            self.seconds += time.perf_counter() - start

    def submit(self, payload: dict):
        """Start writing ``payload`` (a :func:`snapshot`); a future of the checkpoint's path
        (its ``result()`` raises :class:`CheckpointError` when the write failed)."""
        return self._pool.submit(self._save, payload)

    def close(self) -> None:
        """Wait for the write in flight, if any, and stop the thread."""
        self._pool.shutdown(wait=True)


class CheckpointStore:
    """The checkpoints of one directory (created on first save)."""

    def __init__(self, directory, keep: int = 3):
        self.directory = pathlib.Path(directory)
        if int(keep) < 1:
            raise ValueError(f"keep must be at least 1, got {keep!r}")
        self.keep = int(keep)

    def paths(self) -> list[pathlib.Path]:
        """Checkpoint files, oldest first."""
        return [path for path in self._named() if path.is_file()]

    def _named(self) -> list[pathlib.Path]:
        """Everything named like a checkpoint, files or not, oldest first."""
        if not self.directory.is_dir():
            return []
        return sorted(self.directory.glob("ckpt-*.slc"))

    def _next_sequence(self) -> int:
        paths = self._named()  # past a directory of a checkpoint's name too: the new file cannot replace it
        return int(paths[-1].stem.split("-")[1]) + 1 if paths else 1

    def save(self, payload: dict) -> pathlib.Path:
        """Write a new checkpoint atomically and drop the oldest beyond ``keep``."""
        self.directory.mkdir(parents=True, exist_ok=True)
        sequence = self._next_sequence()
        payload = {**payload, "sequence": sequence, "created": time.time()}
        path = self.directory / f"ckpt-{sequence:012d}.slc"
        tmp = self.directory / f".{path.name}.tmp"
        data = dumps(payload)
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError as error:  # a full disk, a quota, no permission: no partial file left behind, one clear message
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise CheckpointError(f"cannot write a checkpoint in {self.directory}: {error}; {self._advice(error)}") from None
        failpoints.reached("checkpoint-write")
        os.replace(tmp, path)
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        for old in self.paths()[: -self.keep]:
            _remove(old)
        for stale in self.directory.glob(".ckpt-*.slc.tmp"):  # left by a crash in the middle of a write
            stale.unlink(missing_ok=True)
        return path

    def _advice(self, error: OSError) -> str:
        """What to do about a failed write, by its cause."""
        previous = "the previous checkpoint is intact: " if self.paths() else "no checkpoint was written: "
        if error.errno in (errno.ENOSPC, errno.EDQUOT):
            return previous + "free space" + (", then restart with --resume" if self.paths() else " and start again")
        if error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return previous + "make the directory writable, or choose another --checkpoint-dir"
        return previous + "see the error"

    def clear(self) -> None:
        """Remove every checkpoint of the directory (``streamlearn train --overwrite``)."""
        for path in self.paths():
            _remove(path)

    def load(self, path) -> dict:
        path = pathlib.Path(path)
        payload = loads(path.read_bytes(), str(path))
        if not isinstance(payload, dict):  # intact bytes that something else wrote
            raise CorruptCheckpoint(f"{path} has a valid checksum but holds no checkpoint (a {type(payload).__name__})")
        return payload

    def load_latest(self) -> dict | None:
        """The newest intact checkpoint, or ``None`` when there is none at all.

        Corrupt ones are skipped with a warning; if every one is corrupt, raises."""
        paths = self.paths()
        for odd in sorted(set(self._named()) - set(paths)):
            warnings.warn(f"{odd} is not a checkpoint file; skipped", stacklevel=2)
        problems = []
        for path in reversed(paths):
            try:
                payload = self.load(path)
            except OSError as error:  # a directory or an unreadable file where a checkpoint should be
                warnings.warn(f"{path} is not a readable checkpoint ({error.strerror or error}); skipped", stacklevel=2)
                problems.append(f"{path}: {error.strerror or error}")
                continue
            except CorruptCheckpoint as error:
                warnings.warn(f"{error}; falling back to an older checkpoint", stacklevel=2)
                problems.append(str(error))
                continue
            payload["path"] = str(path)
            return payload
        if problems:
            raise CorruptCheckpoint("no usable checkpoint in " + str(self.directory) + ": " + "; ".join(problems))
        return None
