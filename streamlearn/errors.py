"""Errors raised by streamlearn.

Every error caused by bad input or bad arguments is a ``ValueError`` subclass, so
``except ValueError`` catches all of them, while the attributes let a stream runner
report *where* the problem was.
"""

from __future__ import annotations


class StreamlearnError(ValueError):
    """Base class of streamlearn's errors (a ``ValueError``).

    Parameters
    ----------
    message
        What was wrong and where.

    Attributes
    ----------
    args
        ``(message,)``, as every exception's.

    Examples
    --------
    Every streamlearn error is also a ``ValueError``:

    >>> from streamlearn import InvalidParameterError, StreamlearnError
    >>> issubclass(InvalidParameterError, StreamlearnError), issubclass(StreamlearnError, ValueError)
    (True, True)
    """


class InvalidInputError(StreamlearnError):
    """An example, a label or a batch that cannot be learned or scored.

    ``row`` is the position of the offending example in the call (0 for
    ``learn_one``), ``feature`` the offending feature name when there is one, and
    ``reason`` a short machine-readable reason (``"non-finite"``, ``"non-numeric"``,
    ``"empty-label"``, ``"length-mismatch"``, ``"bad-shape"``, ``"bad-type"``).
    The model is left unchanged when it is raised.

    Parameters
    ----------
    reason, message, row, feature
        As the attributes of the same names (``message`` makes the text).

    Attributes
    ----------
    reason, row, feature
        See above.

    Examples
    --------

    >>> from streamlearn import InvalidInputError, MulticlassSVM
    >>> model = MulticlassSVM()
    >>> try:
    ...     model.learn_many([{"a": 1.0}, {"a": float("nan")}], ["x", "y"])
    ... except InvalidInputError as error:
    ...     print(error.reason, error.row, error.feature, "|", error)
    non-finite 1 a | row 1, feature 'a': value nan is NaN, infinite or beyond ±1e+150 (its square leaves the float range)
    >>> model.classes  # unchanged: the batch was refused as a whole
    []
    """

    def __init__(self, reason: str, message: str, row: int | None = None, feature=None):
        where = []
        if row is not None:
            where.append(f"row {row}")
        if feature is not None:
            where.append(f"feature {feature!r}")
        prefix = (", ".join(where) + ": ") if where else ""
        super().__init__(prefix + message)
        self.reason = reason
        self.row = row
        self.feature = feature


class InvalidParameterError(StreamlearnError):
    """A learner parameter outside its domain (e.g. ``lam <= 0``).

    Parameters
    ----------
    message
        Which parameter, what it must be, what it got.

    Attributes
    ----------
    args
        ``(message,)``; the learner that raised it was not made.

    Examples
    --------
    >>> from streamlearn import ExtremeSVM, InvalidParameterError
    >>> try:
    ...     ExtremeSVM(oracle="tree")
    ... except InvalidParameterError as error:
    ...     print(error)
    oracle must be one of exact, graph, lsh, means, auto, got 'tree'
    """
