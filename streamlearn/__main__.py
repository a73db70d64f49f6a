"""``python -m streamlearn``: the embedded default job.

Streams the bundled LIBSVM ``letter`` data set (15,000 training rows, 26 classes; UCI
Letter Recognition scaled to [-1, 1] by LIBSVM) from its file into a ``MulticlassSVM``,
pass by pass, and prints held-out accuracy on the bundled 5,000-row test file after each
pass. ``--learner`` picks another learner, at its defaults (``--lam`` sets λ for the learners
that take it, ``--lam auto`` for the MCID learners),
``--passes`` the number of passes, ``--batch-rows`` the rows handed to ``learn_many`` at a time.
"""

from __future__ import annotations

import argparse
import inspect
import pathlib
import time

import numpy as np
from tqdm import tqdm

import streamlearn
from .libsvm import read_libsvm

DATA = pathlib.Path(__file__).resolve().parent / "data"


def _lam(text: str):
    """``--lam``: a number, or ``auto`` (every λ of the grid at once, see :mod:`streamlearn.mcid`)."""
    return text if text == "auto" else float(text)


def main(argv=None) -> int:
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("train", "predict", "evaluate", "inspect", "plot", "serve", "learners"):  # the CLI's commands
        from .service.cli import main as cli_main

        return cli_main(argv)
    parser = argparse.ArgumentParser(prog="python -m streamlearn", description=__doc__.split("\n\n")[1])
    parser.add_argument("--learner", default="MulticlassSVM", choices=sorted(streamlearn.LEARNERS))
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--lam", type=_lam, help='regularisation λ, or "auto" (the MCID learners; default: the learner\'s own)')
    parser.add_argument("--batch-rows", type=int, default=500, help="rows handed to learn_many at a time")
    args = parser.parse_args(argv)
    X, y = read_libsvm(DATA / "letter.scale.bz2")
    X_test, y_test = read_libsvm(DATA / "letter.scale.t.bz2")
    cls = streamlearn.LEARNERS[args.learner]
    accepted = inspect.signature(cls).parameters
    params = {"lam": args.lam} if args.lam is not None and "lam" in accepted else {}  # what the learner takes
    try:
        model = cls(**params)
    except ValueError as error:  # e.g. --lam auto for a learner without it: a usage error, not a traceback
        parser.error(str(error))
    rng = np.random.default_rng(0)
    labels, test_labels, task = np.asarray(y, dtype=object), np.asarray(y_test, dtype=object), "letter"
    if not model._multiclass:  # a binary learner: the letter A against the 25 others
        labels, test_labels, task = labels == 1, test_labels == 1, "letter, A against the rest"
    shown = ", ".join(f"{k}={v!r}" for k, v in params.items())
    print(f"{args.learner}({shown}) on {task}: {X.shape[0]:,} training rows, {X_test.shape[0]:,} held out")
    for p in range(1, args.passes + 1):
        order = rng.permutation(X.shape[0])
        start = time.perf_counter()
        for i in tqdm(range(0, len(order), args.batch_rows), desc=f"pass {p}", leave=False, disable=None):
            rows = order[i : i + args.batch_rows]
            model.learn_many(X[rows], labels[rows])
        seconds = time.perf_counter() - start
        accuracy = np.mean(model.predict_many(X_test) == test_labels)
        print(f"pass {p}: {len(order) / seconds:,.0f} examples/s, held-out accuracy {100 * accuracy:.2f}%")
    return 0


if __name__ == "__main__":
    from .service.cli import exit_now

    exit_now(main())
