"""The ``streamlearn`` command's entry point: it notes SIGTERM / SIGINT before anything else is
imported, so that a ``train`` stopped while it starts ends with a final checkpoint and exit
code 0. What is left unguarded is the interpreter's own start-up, before this module runs
(``bench/results/startup.md`` measures it); the rest is :func:`streamlearn.service.cli.main`."""

from __future__ import annotations

import sys

from . import stopping


def console_main():
    caught = stopping.catch() if next((a for a in sys.argv[1:] if not a.startswith("-")), None) == "train" else None
    from .cli import exit_now, main

    exit_now(main(sys.argv[1:], caught))
