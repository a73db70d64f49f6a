"""Checks of the parameters every family shares (each raises :class:`~streamlearn.errors.InvalidParameterError`
with the parameter's name and value)."""

from __future__ import annotations

from .errors import InvalidParameterError


def check_positive(name: str, value, integer: bool = False) -> None:
    """Raise :class:`InvalidParameterError` unless ``value`` is positive and finite (``lam=inf``: no step)."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not 0 < value < float("inf"):
        what = "a positive integer" if integer else "a positive finite number"
        raise InvalidParameterError(f"{name} must be {what}, got {value!r}")


def average_power_of(average: bool, average_power, default: float) -> float:
    """The averaged iterate's power: ``average_power`` as given, or ``default`` for an
    averaging learner given ``None`` (0 without averaging); a clear error for a power without
    averaging or outside [0, 10]."""
    if average_power is None:
        return float(default) if average else 0.0
    if isinstance(average_power, bool) or not isinstance(average_power, (int, float)) or not 0 <= average_power <= 10:
        raise InvalidParameterError(f"average_power must be a number between 0 and 10, got {average_power!r}")
    if average_power and not average:
        raise InvalidParameterError("average_power weights the averaged iterate: it needs average=True")
    return float(average_power)
