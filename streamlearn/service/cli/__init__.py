"""The ``streamlearn`` command: train, predict, evaluate, inspect, plot, serve.

Examples::

    streamlearn train data.svm --learner MulticlassSVM --param lam=1e-4 --checkpoint-dir ckpt
    cat data.svm | streamlearn train - --learner MulticlassSVM --checkpoint-dir ckpt
    streamlearn train kafka://127.0.0.1:9092/events?group=learner --learner MulticlassSVM \\
        --checkpoint-dir ckpt --checkpoint-interval 10 --resume
    streamlearn predict new.svm --checkpoint ckpt --output predictions.jsonl
    streamlearn evaluate test.svm --checkpoint ckpt
    streamlearn inspect ckpt --json
    streamlearn learners MulticlassSVM        # its parameters, their types and defaults
    streamlearn plot ckpt/metrics.jsonl -o curves.png
    streamlearn serve --checkpoint-dir ckpt --port 8080

Exit codes: 0 done (also after SIGTERM/SIGINT, with a final checkpoint); 1 an error (bad
configuration, source or checkpoint: one line on stderr); 2 a usage error (unknown option,
missing argument); 3 stopped for bad records (more than ``--max-errors``, or a stream whose
first records are mostly bad); 4 nothing was learned (no valid record).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from typing import NoReturn

from ... import extras
from .. import stopping
from .common import EXIT_USAGE, ConfigError, UsageError, build_learner, use_kafka_security  # noqa: F401 - build_learner: the commands' public helper
from .scoring import add_evaluate_options, add_predict_options
from .train import add_train_options
from .views import add_inspect_options, add_learners_options, add_plot_options, add_serve_options

# NumPy (and with it OpenBLAS) is imported by the commands, not here: main() first decides
# how many threads OpenBLAS may start (see _blas_threads_for)


def _terminal_columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing ``shutil`` (and ``bz2`` and
    ``lzma`` with it, which every command's start-up would pay for argparse's formatters)."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns
    except (AttributeError, ValueError, OSError):
        return 80


class _TerminalWidth:
    """argparse's formatters, sized by :func:`_terminal_columns` (what argparse does, minus 2)."""

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, _terminal_columns() - 2 if width is None else width)


class _Formatter(_TerminalWidth, argparse.HelpFormatter):
    pass


class _RawDescriptionFormatter(_TerminalWidth, argparse.RawDescriptionHelpFormatter):
    pass


class _Version(argparse.Action):
    """``--version``: the version and the kernels' backend, looked up only when asked (the
    backend note imports NumPy, which ``main`` must not load before it has configured it)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from ... import __version__
        from ...kernels import backend_note

        print(f"streamlearn {__version__} ({backend_note()})")
        parser.exit()


#: each command: its one-line help and the function adding its options
COMMANDS = {
    "train": ("learn from a source, with checkpoints, metrics and dead letters", add_train_options),
    "predict": ("predict the records of a source with a checkpointed model", add_predict_options),
    "evaluate": ("accuracy, macro-F1 and log-loss of a checkpointed model on a labelled source", add_evaluate_options),
    "inspect": ("what the newest checkpoint of a directory holds", add_inspect_options),
    "plot": ("learning curves from a metrics log, as PNG", add_plot_options),
    "serve": ("answer predictions over HTTP from the newest checkpoint of a directory, reloading new ones", add_serve_options),
    "learners": ("the learners train takes, each parameter with its type and default", add_learners_options),
}


def make_parser(argv=None) -> argparse.ArgumentParser:
    """The command-line parser. Given the arguments, only the named command's options are
    added (the others' cost a millisecond of start-up for nothing); without, all of them."""
    epilog = __doc__[__doc__.index("Examples::"):].replace("Examples::", "Examples:", 1).replace("``", "")
    parser = argparse.ArgumentParser(prog="streamlearn", description="Learn multi-class linear classifiers from a stream.",
                                     epilog=epilog, formatter_class=_RawDescriptionFormatter)
    parser.add_argument("--version", action=_Version, help="show the version and how the kernels run, and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_CommandParser)
    named = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    parser.commands = {}  # each command's own parser, by name (argparse keeps them private)
    for name, (help_text, add_options) in COMMANDS.items():
        p = parser.commands[name] = sub.add_parser(name, help=help_text, formatter_class=_Formatter)
        if named not in COMMANDS or named == name:
            add_options(p)
    return parser


class _CommandParser(argparse.ArgumentParser):
    """A command's parser that lists the arguments it was given in :attr:`arguments` (argparse
    keeps its own list private): what ``--config`` keys and the option tests are checked against."""

    def __init__(self, *args, **kwargs):
        self.arguments: list[argparse.Action] = []  # first: argparse's __init__ adds --help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.arguments.append(action)
        return action


def _apply_config(parser, argv) -> None:
    """Defaults from ``train --config FILE`` (TOML; keys are option names)."""
    if "--config" not in " ".join(argv):
        return
    pre = argparse.ArgumentParser(add_help=False, formatter_class=_Formatter)
    pre.add_argument("--config")
    known, _ = pre.parse_known_args(argv)
    if not known.config:
        return
    import tomllib

    try:
        with open(known.config, "rb") as f:
            config = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read config {known.config!r}: {error}") from None
    params = [f"{k}={v!r}" for k, v in config.pop("param", {}).items()]
    defaults = {k.replace("-", "_"): v for k, v in config.items()}
    if isinstance(defaults.get("source"), str):
        defaults["source"] = [defaults["source"]]
    train = parser.commands["train"]
    unknown = set(defaults) - {action.dest for action in train.arguments}
    if unknown:
        raise ConfigError(f"unknown keys in {known.config!r}: {', '.join(sorted(unknown))}")
    train.set_defaults(**defaults, param=params)


def _one_line_warning(message, category, filename, lineno, line=None) -> str:
    return f"streamlearn: warning: {message}\n"


def _blas_threads_for(args) -> None:
    """Start OpenBLAS with one thread when ``train`` runs a first-order learner.

    The first-order learners do their work in compiled loops and make no BLAS call worth a
    thread, but OpenBLAS starts a worker per core when NumPy loads and lets it spin (and after
    each call), taking CPU from the parser threads. The least-squares learners keep BLAS's
    threads (their products and Cholesky factorisations use them). The user's own ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS`` wins, and nothing
    changes once NumPy is loaded (``main`` called in-process)."""
    if getattr(args, "command", None) != "train" or "numpy" in sys.modules:
        return
    if "OPENBLAS_NUM_THREADS" in os.environ or "OMP_NUM_THREADS" in os.environ:
        return
    from ... import FIRST_ORDER_LEARNERS

    if args.learner in FIRST_ORDER_LEARNERS:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def main(argv=None, caught: dict | None = None) -> int:
    """Run one command; ``caught``: the handlers :func:`streamlearn.service.stopping.catch` replaced, when
    the caller already catches stops (the ``streamlearn`` entry point, :mod:`streamlearn.service.console`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # train notes SIGTERM/SIGINT from here on: a stop while it starts is a final checkpoint, not death
    if caught is None and next((a for a in argv if not a.startswith("-")), None) == "train":
        caught = stopping.catch()
    previous_format, warnings.formatwarning = warnings.formatwarning, _one_line_warning  # what happened, not where
    parser = make_parser(argv)
    try:
        _apply_config(parser, argv)
        args, extra = parser.parse_known_args(argv)
        if extra:  # the command's usage, not the top level's
            parser.commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
        _blas_threads_for(args)
        use_kafka_security(args)
        return args.func(args)
    except BrokenPipeError:
        return 0
    except (UsageError, extras.MissingExtraError) as error:  # what to write, or what to install: usage
        print(f"streamlearn: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, OSError) as error:  # ConfigError, SourceError, CheckpointError, a bad format or URI; a missing
        print(f"streamlearn: error: {plain_error(error)}", file=sys.stderr)  # file, a full disk, a directory we may not write to
        return 1
    finally:
        use_kafka_security(None)
        warnings.formatwarning = previous_format
        if caught is not None:
            stopping.release(caught)


def plain_error(error: Exception) -> str:
    """An error in words: an OS error without its ``[Errno N]`` (its words and the file it names).

    >>> plain_error(FileExistsError(17, "File exists", "model"))
    "File exists: 'model'"
    """
    if isinstance(error, OSError) and error.strerror:
        names = [repr(str(name)) for name in (error.filename, error.filename2) if name is not None]
        return f"{error.strerror}: {' -> '.join(names)}" if names else error.strerror
    return str(error)


def exit_now(code: int) -> NoReturn:
    """End the process with ``code`` once a command has returned: flush stdout and stderr,
    then ``os._exit``.

    By then every file, sink, source and checkpoint the command used is closed and durable,
    and nothing is left for Python's tear-down to do but free modules, which for numba's and
    scipy's costs a sizeable share of a short command. An exception out of a command (a bug)
    never gets here: it ends the normal way, with its traceback."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader went away: as main() treats it, not an error
        pass
    os._exit(code)
