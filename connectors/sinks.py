"""Sinks for dead letters, predictions and metrics: JSON lines to a file or stdout, or a
Kafka topic (:class:`streamlearn.connectors.kafka.KafkaSink`).

A file sink knows its size, so the runner can store it in a checkpoint and, on resume,
cut the file back to it: lines written after the last checkpoint are written again by
the replay, never twice.
"""

from __future__ import annotations

import json
import os
import sys


def _default(obj):
    if hasattr(obj, "item"):  # NumPy scalars
        return obj.item()
    return str(obj)


def to_json_line(obj) -> str:
    """One JSON line (NumPy scalars as numbers, anything else unknown as its ``str``)."""
    return json.dumps(obj, default=_default, separators=(",", ":")) + "\n"


def json_key(label):
    """A class label as a JSON object key: JSON keys are strings, and ``json`` turns only
    str/int/float/bool/None into one; a tuple label ``("a", 1)`` becomes ``'["a", 1]'``, the
    text of the JSON value the label itself is written as."""
    return label if label is None or isinstance(label, (str, int, float, bool)) else json.dumps(label, default=str)


class JsonLinesSink:
    """Appends JSON lines to a file (``-`` is stdout). The file is created on the first
    write, so a run without bad records leaves no empty dead-letter file behind."""

    def __init__(self, path: str):
        self.name = path
        self._file = sys.stdout if path == "-" else None

    def _open(self):
        if self._file is None:  # no directory is made: a mistyped path is an error, not a new tree
            self._file = open(self.name, "a", encoding="utf-8")
        return self._file

    @property
    def holds_lines(self) -> bool:
        """Whether the file exists with something in it (another run's lines: see ``train``)."""
        return self._file is not sys.stdout and os.path.isfile(self.name) and os.path.getsize(self.name) > 0

    def write(self, obj) -> None:
        self._open().write(to_json_line(obj))

    def sync(self) -> None:
        """Flush, and fsync a file, so that what the next checkpoint counts is durable."""
        if self._file is None:
            return
        self._file.flush()
        if self._file is not sys.stdout:
            os.fsync(self._file.fileno())

    def size(self) -> int | None:
        if self._file is sys.stdout:
            return None
        if self._file is None:
            return os.path.getsize(self.name) if os.path.exists(self.name) else 0
        return self._file.tell()

    def truncate(self, size: int | None) -> None:
        """Cut the file back to ``size`` bytes (what a checkpoint recorded)."""
        if size is None or self._file is sys.stdout or not os.path.exists(self.name):
            return
        if os.path.getsize(self.name) > size:
            if self._file is not None:
                self._file.flush()
            os.truncate(self.name, size)
            if self._file is not None:
                self._file.seek(size)

    def close(self) -> None:
        if self._file is sys.stdout:
            self._file.flush()
        elif self._file is not None:
            self._file.close()
            self._file = None


class NullSink:
    """Discards everything (no dead-letter file asked for and none wanted)."""

    name = "none"

    def write(self, obj) -> None:
        pass

    def sync(self) -> None:
        pass

    def size(self):
        return None

    def truncate(self, size) -> None:
        pass

    holds_lines = False

    def close(self) -> None:
        pass
