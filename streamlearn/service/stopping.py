"""Stop requests (SIGTERM, SIGINT) caught from the first moment of ``streamlearn train``.

The command calls :func:`catch` before it imports the learners, opens the source or
resumes a checkpoint, so a signal in that time is not Python's default death
(status 143, no checkpoint) but a request that the runner honours as soon as its loop
starts: a final checkpoint, then exit code 0 (see :class:`streamlearn.service.runner.Runner`).

>>> previous = catch()
>>> requested()
False
>>> release(previous)
"""

from __future__ import annotations

import signal

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_requests: list[int] = []


def _note(signum, frame) -> None:
    _requests.append(signum)


def catch() -> dict:
    """Note SIGTERM/SIGINT instead of dying; returns the previous handlers for :func:`release`."""
    return {s: signal.signal(s, _note) for s in SIGNALS}


def release(previous: dict) -> None:
    """Put the previous handlers back and forget the stops noted."""
    for s, handler in previous.items():
        signal.signal(s, handler)
    _requests.clear()


def first() -> int | None:
    """The first signal noted since :func:`catch` (``None``: none)."""
    return _requests[0] if _requests else None


def requested() -> bool:
    """Whether a stop was requested since :func:`catch`."""
    return bool(_requests)
