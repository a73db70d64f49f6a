"""Read LIBSVM / svmlight text (``label idx:value idx:value ...``), plain or compressed.

>>> import io
>>> X, y = parse_libsvm(io.StringIO("1 1:0.5 3:2\\n2 2:1\\n"))
>>> y, X.toarray().tolist()
(['1', '2'], [[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]])
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import pathlib

import numpy as np
import scipy.sparse as sp

from streamlearn.errors import InvalidInputError

OPENERS = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}


def open_text(path):
    """Open a text file, decompressing by its suffix (.bz2, .gz, .xz)."""
    path = pathlib.Path(path)
    return OPENERS.get(path.suffix, open)(path, "rt", encoding="utf-8")


def parse_libsvm(lines) -> tuple[sp.csr_matrix, list]:
    """Parse LIBSVM lines into a CSR matrix (1-based indices become columns ``idx - 1``)
    and the labels as strings. A malformed line raises :class:`InvalidInputError` with its
    line number; blank lines and ``#`` comments are skipped."""
    labels, indptr, indices, data = [], [0], [], []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        label, *pairs = line.split()
        try:
            for pair in pairs:
                idx, value = pair.split(":")
                indices.append(int(idx) - 1)
                data.append(float(value))
        except ValueError:
            raise InvalidInputError("malformed", f"malformed LIBSVM pair {pair!r}", row=number) from None
        labels.append(label)
        indptr.append(len(indices))
    width = max(indices) + 1 if indices else 0
    matrix = sp.csr_matrix((np.asarray(data), np.asarray(indices, np.int64), np.asarray(indptr)), shape=(len(labels), width))
    return matrix, labels


def read_libsvm(path) -> tuple[sp.csr_matrix, list]:
    """Read a LIBSVM file (see :func:`parse_libsvm`)."""
    with open_text(path) as f:
        return parse_libsvm(f)
