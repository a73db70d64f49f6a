"""Named moments at which a test can make the process die at once, as ``kill -9`` would.

A crash test that kills at random times rarely lands inside a checkpoint write or between
two sink writes; these points make it land there on purpose. The environment variable
``STREAMLEARN_CRASH_AT=POINT:N`` kills the process (SIGKILL: no clean-up, no buffers
flushed but those the point flushes itself) the N-th time it reaches ``POINT``:

* ``checkpoint-write``: a checkpoint's temporary file is written and fsynced, not yet renamed;
* ``metrics-line``: a checkpoint's metrics line is written and synced, the checkpoint not yet saved;
* ``dead-letter``: a dead letter is written and synced, the next checkpoint not yet saved.
* ``mix-published``: a member of a mixing group has published its change, not yet folded it
  nor checkpointed (:class:`~streamlearn.service.mixing.GroupMixer`).

Unset (always, outside tests), :func:`reached` costs one comparison.

>>> reached("checkpoint-write")  # not armed: nothing happens
"""

from __future__ import annotations

import os
import signal

_ARMED = os.environ.get("STREAMLEARN_CRASH_AT")
_POINT, _, _WHEN = (_ARMED or "").partition(":")
_counts: dict[str, int] = {}


def reached(point: str, prepare=None) -> None:
    """Die here if ``STREAMLEARN_CRASH_AT`` names this point and this is its N-th time;
    ``prepare()`` first (a sink's sync, so that what was written is on disk as a real crash
    after the OS wrote it would leave it)."""
    if _ARMED is None or point != _POINT:
        return
    _counts[point] = _counts.get(point, 0) + 1
    if _counts[point] == int(_WHEN or 1):
        if prepare is not None:
            prepare()
        os.kill(os.getpid(), signal.SIGKILL)
