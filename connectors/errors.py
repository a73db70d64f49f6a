"""The errors a source raises about itself (a bad record is never one: it becomes a dead letter)."""

from __future__ import annotations


class SourceError(ValueError):
    """A source that cannot be opened or resumed (the message says why)."""


class SourceUnavailable(SourceError):
    """A source that went away while it was read and did not come back in time (a Kafka
    broker unreachable for longer than ``broker_timeout``): the runner stops after a final
    checkpoint, and a restart with ``--resume`` goes on from there."""
