"""The label space: how arbitrary labels become class indices. A class first seen mid-stream
gets the next index and the learner grows a weight row for it; a bad label raises an
:class:`~streamlearn.errors.InvalidInputError` and leaves the space untouched.

>>> ls = LabelSpace()
>>> [ls.index(y, grow=True) for y in ["cat", "dog", "cat"]]
[0, 1, 0]
"""

from __future__ import annotations

import math

import numpy as np

from .errors import InvalidInputError


def _is_empty_label(y) -> bool:
    if y is None or (isinstance(y, str) and not y.strip()):
        return True
    return isinstance(y, float) and math.isnan(y)


class LabelSpace:
    """Maps hashable labels to class indices ``0..K-1`` in order of first appearance.

    NumPy scalars are stored as the equal Python scalar (``np.bool_(True)`` → ``True``)
    so that labels survive msgpack checkpoints. ``None``, NaN and blank strings are
    rejected as empty labels.

    Parameters
    ----------
    None: a label space starts empty.

    Attributes
    ----------
    labels
        The labels, class index order.

    Examples
    --------

    >>> labels = LabelSpace()
    >>> labels.indices(["cat", "dog", "cat", "emu"], grow=True).tolist(), labels.labels
    ([0, 1, 0, 2], ['cat', 'dog', 'emu'])
    >>> labels.normalize("  ")
    Traceback (most recent call last):
    ...
    streamlearn.errors.InvalidInputError: row 0: empty label '  '
    """

    #: integer labels below this are looked up in a table by :meth:`indices` (8 bytes each, as
    #: far as the largest label seen: 8 MiB at most; an extreme stream's ids reach 10**5-10**6)
    SMALL_INT_LABELS = 1 << 20
    _small_ints = None  # table: class of int label v at [v] (-1: none); None (an older pickle): none yet

    def __init__(self):
        # the labels' dict, made when a label is not an int (or bool) below SMALL_INT_LABELS: until
        # then the table alone finds every label (for 50,000 int labels the dict held ~4 MiB, the table 1.4)
        self._index: dict | None = None
        self._small_ints = np.zeros(0, np.int64)
        self.labels: list = []

    def __len__(self) -> int:
        return len(self.labels)

    @staticmethod
    def normalize(y, row: int = 0):
        """The stored form of label ``y``; raises for an empty or unhashable label."""
        if isinstance(y, np.generic):
            y = y.item()
        if _is_empty_label(y):
            raise InvalidInputError("empty-label", f"empty label {y!r}", row)
        try:
            hash(y)
        except TypeError:
            raise InvalidInputError("bad-label", f"label {y!r} is not hashable", row) from None
        return y

    @classmethod
    def _table_position(cls, y) -> int:
        """``y``'s place in the small-int table: ``y`` itself for an int or bool below
        :attr:`SMALL_INT_LABELS`, else -1 (for a label of another type, the dict decides)."""
        return int(y) if type(y) in (int, bool) and 0 <= y < cls.SMALL_INT_LABELS else -1

    def _dict(self) -> dict:
        """The labels' dict, made from the labels the first time it is needed."""
        if self._index is None:
            self._index = {y: k for k, y in enumerate(self.labels)}
        return self._index

    def _table_class(self, y) -> int:
        """Without a dict (every label a small int): ``y``'s class, or -1."""
        if isinstance(y, float) and y.is_integer():  # 2.0 is the label 2, as a dict would find it
            y = int(y)
        v = self._table_position(y)
        return int(self._small_ints[v]) if 0 <= v < len(self._small_ints) else -1

    _seen_classes = None  # label -> class of the labels known_class found (an older pickle: none yet)

    def known_class(self, y) -> int:
        """``index(normalize(y), grow=False)`` for a label the space knows, else -1 — also for one
        ``normalize`` refuses (the caller's general road raises then). One dict look-up for a label
        asked before: a class's index never changes, so each answer is kept.

        >>> space = LabelSpace()
        >>> space.index("cat", grow=True), space.known_class("cat"), space.known_class("dog"), space.known_class(None)
        (0, 0, -1, -1)
        """
        seen = self._seen_classes
        if seen is None:
            seen = self._seen_classes = {}
        try:
            return seen[y]
        except (KeyError, TypeError):
            pass
        try:
            k = self.index(self.normalize(y), grow=False)
        except InvalidInputError:
            return -1
        if k >= 0:
            seen[y] = k
        return k

    def _known(self, y) -> bool:
        return y in self._index if self._index is not None else self._table_class(y) >= 0

    def index(self, y, grow: bool) -> int:
        """Class index of an already normalized label (``-1`` if unknown and not growing)."""
        if self._index is None:
            v = self._table_position(y)
            if v < 0 and not grow:
                return self._table_class(y)
            if v >= 0:
                if v >= len(self._small_ints):
                    if not grow:
                        return -1
                    self._small_ints = self._grown_table(v + 1)
                k = int(self._small_ints[v])
                if k < 0 and grow:
                    k = len(self.labels)
                    self.labels.append(y)
                    self._small_ints[v] = k
                return k
        k = self._dict().get(y)
        if k is None:
            if not grow:
                return -1
            k = len(self.labels)
            self._index[y] = k
            self.labels.append(y)
            self._note_small_int(y, k)
        return k

    def _note_small_int(self, y, k: int) -> None:
        """Enter a new label in the small-int table as the dict finds it: at ``v`` when it equals
        the int ``v`` (``2``, ``2.0``, ``True`` at 1); a rebuild per new class would cost the
        table's size each time classes keep appearing."""
        if self._small_ints is None:
            return
        try:
            v = int(y)
        except (TypeError, ValueError, OverflowError):
            return
        if v == y and 0 <= v < len(self._small_ints):
            self._small_ints[v] = k

    def _fill_small_ints(self, table: np.ndarray, start: int) -> None:
        """Enter in ``table[start:]`` the class of every label equal to an int of that range, as
        the dict finds it: from the labels as one int array when they are all ints or bools
        (a look-up per int of the range costs ~0.7 µs, and the range reaches 10**6), else from
        the dict, one look-up per int."""
        try:
            labels = np.asarray(self.labels) if self.labels else np.zeros(0, np.int64)
        except (ValueError, OverflowError):  # ragged tuples, ints past int64: the dict decides
            labels = np.zeros(0, np.str_)
        if labels.ndim == 1 and labels.dtype.kind in "ib":
            labels = labels.astype(np.int64)
            inside = np.flatnonzero((labels >= start) & (labels < len(table)))
            table[labels[inside]] = inside
            return
        get = self._dict().get
        table[start:] = np.fromiter((get(v, -1) for v in range(start, len(table))), np.int64, len(table) - start)

    def _grown_table(self, needed: int) -> np.ndarray:
        """The small-int table grown to cover ``needed`` ints (doubling): its kept part is current
        (:meth:`index`, :meth:`_note_small_int`), the new range filled from the labels (without a
        dict every label is in the table already)."""
        kept = self._small_ints if self._small_ints is not None else np.zeros(0, np.int64)
        grown = np.full(min(max(needed, 2 * len(kept), 16), self.SMALL_INT_LABELS), -1, np.int64)
        grown[: len(kept)] = kept
        if self._index is not None:
            self._fill_small_ints(grown, len(kept))
        return grown

    def _small_int_classes(self, values: np.ndarray, grow: bool) -> np.ndarray | None:
        """Class indices of an int array whose labels are all below :attr:`SMALL_INT_LABELS`,
        by a table look-up (a dict look-up per distinct label costs a sort of the batch and a
        Python call each); new labels, with ``grow``, enter through :meth:`index` in order of
        first appearance, and only they; ``None`` for other arrays. The table is filled from
        the dict, so ``1`` finds a class first seen as ``True`` or ``1.0`` exactly as the dict does."""
        if not len(values) or values.min() < 0:
            return None
        needed = int(values.max()) + 1
        if needed > self.SMALL_INT_LABELS:
            return None
        if self._small_ints is None or len(self._small_ints) < needed:
            self._small_ints = self._grown_table(needed)
        classes = self._small_ints[values]
        if not grow or classes.min() >= 0:
            return classes
        unknown = values[classes < 0]
        distinct, first = np.unique(unknown, return_index=True)
        new = distinct[np.argsort(first, kind="stable")]  # in no dict entry: the table holds every int below its size
        start = len(self.labels)
        entered = new.tolist()
        if self._index is not None:
            self._index.update(zip(entered, range(start, start + len(entered))))
        self.labels.extend(entered)
        self._small_ints[new] = np.arange(start, start + len(new))
        return self._small_ints[values]

    def indices(self, ys, grow: bool) -> np.ndarray:
        """Class indices of a batch of labels (a list, an array or a Series), numbering new
        classes in order of first appearance. Call :meth:`validate_batch` first: this one
        grows the space."""
        values = np.asarray(ys) if not isinstance(ys, list) else None
        if values is not None and values.dtype.kind in "iu" and values.ndim == 1:
            known = self._small_int_classes(values, grow)
            if known is not None:
                return known
        if values is not None and values.dtype.kind in "iub" and values.ndim == 1:
            uniques, first, inverse = np.unique(values, return_index=True, return_inverse=True)
            mapped = np.empty(len(uniques), np.int64)
            for u in np.argsort(first, kind="stable"):
                mapped[u] = self.index(uniques[u].item(), grow)
            return mapped[inverse]
        labels = ys.tolist() if hasattr(ys, "tolist") else list(ys)
        return np.fromiter((self.index(self.normalize(y), grow) for y in labels), np.int64, len(labels))

    def n_new(self, ys) -> int:
        """How many distinct labels of a (validated) batch are not in the space yet."""
        values = np.asarray(ys) if not isinstance(ys, list) else None
        if values is not None and values.dtype.kind in "iub" and values.ndim == 1:
            distinct = np.unique(values).tolist()
        else:
            distinct = set(self.normalize(y) for y in (ys.tolist() if hasattr(ys, "tolist") else ys))
        return sum(1 for y in distinct if not self._known(y))

    def validate_batch(self, ys) -> int:
        """Raise for the first empty or unhashable label of a batch; return the batch length."""
        values = np.asarray(ys) if not isinstance(ys, list) else None
        if values is not None and values.dtype.kind in "iub" and values.ndim == 1:
            return len(values)  # integers and booleans are always valid labels
        labels = ys.tolist() if hasattr(ys, "tolist") else list(ys)
        for row, y in enumerate(labels):
            self.normalize(y, row)
        return len(labels)

    def take(self, indices: np.ndarray) -> np.ndarray:
        """The labels of class indices as an array of the labels' own type: int64, float64 or
        bool when every class is one of those (so that scikit-learn's metrics take it), else objects.

        >>> space = LabelSpace()
        >>> space.indices([3, 7], grow=True).tolist(), space.take(np.array([1, 0])).dtype
        ([0, 1], dtype('int64'))
        """
        kinds = set(map(type, self.labels))
        dtype = {frozenset({int}): np.int64, frozenset({float}): np.float64, frozenset({bool}): np.bool_}.get(frozenset(kinds), object)
        try:
            classes = np.array(self.labels, dtype=dtype) if dtype is not object else None
        except OverflowError:  # an integer class beyond 64 bits
            classes = None
        if classes is None:
            classes = np.empty(len(self.labels), object)
            classes[:] = self.labels
        return classes[indices]

    def export(self) -> dict:
        return {"labels": list(self.labels)}

    @classmethod
    def restore(cls, data: dict) -> "LabelSpace":
        space = cls()
        for y in data["labels"]:
            space.index(y, grow=True)
        return space
