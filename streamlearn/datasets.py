"""The data set bundled with streamlearn, as a river-style stream of ``(x, y)`` pairs.

``letter``: UCI Letter Recognition as LIBSVM distributes it (16 features scaled to [-1, 1],
26 classes): 15,000 training rows and 5,000 test rows, in ``streamlearn/data``. The
``streamlearn`` command reads them as ``letter.scale`` and ``letter.scale.t`` (also ``letter``
and ``letter.t``) when no file of that name is where it runs; ``python -m streamlearn.datasets
letter.scale`` writes one to stdout.

>>> x, y = next(iter(letter()))
>>> sorted(x)[:3], y
([1, 2, 3], 26)
>>> sum(1 for _ in letter("test"))
5000
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

DATA = pathlib.Path(__file__).resolve().parent / "data"
FILES = {"train": "letter.scale.bz2", "test": "letter.scale.t.bz2"}


def path(split: str = "train") -> pathlib.Path:
    """The bundled ``letter`` file of a split (``"train"`` or ``"test"``)."""
    if split not in FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return DATA / FILES[split]


#: the names the ``streamlearn`` command takes for the bundled files when no such file is where it runs
BUNDLED = {"letter": DATA / FILES["train"], "letter.scale": DATA / FILES["train"],
           "letter.t": DATA / FILES["test"], "letter.scale.t": DATA / FILES["test"]}


def letter(split: str = "train") -> Iterator[tuple[dict, int]]:
    """The rows of the bundled ``letter`` data set in file order: ``({feature: value}, label)``
    with LIBSVM's feature indices as names and labels 1-26."""
    from .libsvm import read_libsvm

    X, y = read_libsvm(path(split))
    for i, label in enumerate(y):
        row = X[i]
        yield dict(zip(row.indices.tolist(), row.data.tolist())), label


def main(argv=None) -> int:
    """``python -m streamlearn.datasets NAME``: a bundled file's text on stdout (for pipes)."""
    import bz2
    import sys

    names = sys.argv[1:] if argv is None else argv
    if len(names) != 1 or names[0] not in BUNDLED:
        print(f"usage: python -m streamlearn.datasets {{{','.join(BUNDLED)}}}", file=sys.stderr)
        return 2
    with bz2.open(BUNDLED[names[0]]) as f:
        while chunk := f.read(1 << 20):
            sys.stdout.buffer.write(chunk)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
