"""Feature names' keys and order: the stable key a name is sorted by in a row
(:func:`name_keys`), and the order in which a batch's new names enter a vocabulary
(:func:`in_growth_order`)."""

from __future__ import annotations

import numpy as np


def _natural_key(name) -> tuple:
    """How a row's new names are ordered: integers, then strings, then the rest, each in its own order."""
    if type(name) is int:
        return 0, name, ""
    return (1, 0, name) if type(name) is str else (2, 0, repr(name))


def name_keys(names: list) -> np.ndarray:
    """A stable 63-bit key per feature name: the value itself for an integer name (so the
    columns of a canonical CSR matrix are already in key order), BLAKE2b of ``repr`` for
    any other name. Stable across processes, unlike Python's salted ``hash``."""
    if all(type(name) is int for name in names):  # positional columns, LIBSVM indices: vectorised
        keys = np.array(names, dtype=object if not names else None)
        if keys.dtype == np.int64 and (not len(keys) or (keys.min() >= -(1 << 62) and keys.max() < (1 << 62))):
            return keys
    keys = np.empty(len(names), np.int64)
    for i, name in enumerate(names):
        if type(name) is int and -(1 << 62) <= name < (1 << 62):
            keys[i] = name
        else:
            import hashlib  # here: a stream of integer names (LIBSVM, arrays) never needs it

            digest = hashlib.blake2b(repr(name).encode("utf-8"), digest_size=8).digest()
            keys[i] = int.from_bytes(digest, "little") >> 1
    return keys


def in_growth_order(names: list, rows: np.ndarray | int | None) -> list:
    """New, distinct names (in order of first appearance; ``rows``: the row of each one's first
    appearance, an int: all in one row; ``None``: keep the order) in the order they enter a
    vocabulary: by row, then integers by value, strings alphabetically, other names by ``repr``.

    >>> in_growth_order(["b", 3, "a", 1], [0, 0, 0, 1])
    [3, 'a', 'b', 1]
    """
    if rows is None or len(names) < 2:
        return names
    rows = [rows] * len(names) if isinstance(rows, int) else np.asarray(rows).tolist()
    return [name for _, name in sorted(zip(rows, names), key=lambda pair: (pair[0], *_natural_key(pair[1])))]
