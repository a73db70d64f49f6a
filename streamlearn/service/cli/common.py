"""What the commands share: their errors and exit codes, the learner from its name and parameters,
the source of a command line, and the model of a checkpoint directory."""

from __future__ import annotations

import argparse
import os
import sys

from ...errors import StreamlearnError


#: exit codes beyond 0 and the runner's (see the module docstring)
EXIT_ERROR, EXIT_USAGE, EXIT_NOTHING_LEARNED = 1, 2, 4


LEARNER_DEFAULT = "MulticlassSVM"


class ConfigError(ValueError):
    """Bad command-line configuration: printed as one line, exit code 1."""


class UsageError(ConfigError):
    """A command line that misses what it needs (exit code 2, as argparse's own usage errors)."""


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0 to 65535 (0: any free port), not {text!r}")
    return port


def listen_address(text: str) -> tuple[str, int]:
    """An argparse type: ``[HOST]:PORT`` (host 127.0.0.1 when left out)."""
    host, colon, port = text.rpartition(":")
    if not colon:
        raise argparse.ArgumentTypeError(f"takes [HOST]:PORT, e.g. :8080, not {text!r}")
    try:
        return host or "127.0.0.1", port_number(port)
    except argparse.ArgumentTypeError as error:
        raise argparse.ArgumentTypeError(f"takes [HOST]:PORT, e.g. :8080, not {text!r}: {error}") from None


def positive(kind):
    """An argparse type: a number of ``kind`` (int or float) above 0."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"must be a {'whole ' if kind is int else ''}number above 0, not {text!r}")
        return value

    parse.__name__ = f"positive {kind.__name__}"
    return parse


def record_format(text: str) -> str:
    """An argparse type: a record format's name (or alias), checked when parsed."""
    from streamlearn.connectors.formats import normalize_format

    try:
        return normalize_format(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_learner(name: str, params: list[str]):
    """A learner from its class name and ``KEY=VALUE`` parameters, each parsed by the
    parameter's declared type (:mod:`streamlearn.params`; clear errors); only that learner's
    module is imported."""
    import streamlearn

    from ...params import parse_params

    if name not in streamlearn.LEARNER_NAMES:
        raise ConfigError(f"unknown learner {name!r}; choose one of: {', '.join(sorted(streamlearn.LEARNER_NAMES))}")
    cls = getattr(streamlearn, name)
    try:
        return cls(**parse_params(cls, params))
    except (TypeError, StreamlearnError, ValueError) as error:
        raise ConfigError(f"{name}: {error}") from None


def open_command_source(args, labelled: bool, passes: int = 1, until_end: bool = False):
    import streamlearn.connectors

    source = streamlearn.connectors.open_source(bundled_paths(args.source), args.format, labelled, args.batch_records, passes,
                                    args.label_column, getattr(args, "idle_timeout", None), until_end,
                                    getattr(args, "broker_timeout", None), subscribe=bool(getattr(args, "mix_topic", None)),
                                    no_header=args.no_header, weight_column=args.weight_column, id_column=args.id_column)
    formats = set(getattr(source, "formats", ()))
    for option, given in (("--label-column", args.label_column is not None), ("--no-header", args.no_header),
                          ("--weight-column", args.weight_column is not None), ("--id-column", args.id_column is not None)):
        if given and formats == {"libsvm"}:  # a LIBSVM line's label is its first token; it has no header nor weight
            source.close()
            raise ConfigError(f"{option} is for CSV (and flat JSON lines); the source is LIBSVM")
    return source


def bundled_paths(sources: list[str]) -> list[str]:
    """Sources with the name of a bundled data set (``letter``, ``letter.t``: see
    :mod:`streamlearn.datasets`) that is not a file here replaced by the bundled file's path."""
    from ...datasets import BUNDLED

    out = []
    for source in sources:
        if source in BUNDLED and not os.path.exists(source):
            print(f"streamlearn: {source!r} is the bundled data set {BUNDLED[source]}", file=sys.stderr)
            source = str(BUNDLED[source])
        out.append(source)
    return out


def load_checkpointed(directory):
    from ..checkpoint import CheckpointStore, restore_learner

    payload = CheckpointStore(directory).load_latest()
    if payload is None:
        raise ConfigError(f"no checkpoint in {directory!r}")
    return restore_learner(payload), payload


def add_source_options(p, required: bool = True) -> None:
    p.add_argument("source", nargs="+" if required else "*",
                   help="file path(s) or glob(s), - for stdin, or kafka://HOST:PORT/TOPIC?group=NAME[&client=confluent]")
    p.add_argument("--format", type=record_format,
                   help="libsvm, csv, jsonl or msgpack (default: guessed from the file name, else from the first lines; stdin too)")
    p.add_argument("--label-column", help="CSV: the label column's name or 0-based index; JSON lines and msgpack: a flat "
                                          "record's label field (default: one named y, label, class or target)")
    p.add_argument("--weight-column", help="CSV: the column of each record's weight (a name or 0-based index); JSON lines "
                                           "and msgpack: a flat record's weight field (a nested record's is its \"w\"; "
                                           "absent or empty: 1; never a feature)")
    p.add_argument("--id-column", help="CSV: the column of each record's id (a name or 0-based index); JSON lines and "
                                       "msgpack: a flat record's id field (a nested record's is its \"id\"); written with "
                                       "its prediction and its dead letter, never a feature")
    p.add_argument("--no-header", action="store_true", help="CSV: the files have no header line (columns are named "
                                                            "0, 1, ...; found without it when the first line is numbers)")
    p.add_argument("--batch-records", type=int, default=1000, help="records per batch (default: 1000): the unit of reading, learning and checkpoint positions")
    p.add_argument("--kafka-security", metavar="FILE",
                   help="TLS and SASL for every Kafka connection of the command: a TOML file (security_protocol, ca_file, "
                        "cert_file, key_file, sasl_mechanism, username, password); default: the STREAMLEARN_KAFKA_* "
                        "environment variables (streamlearn.connectors.kafka_security)")


def use_kafka_security(args) -> None:
    """Every Kafka connection of this command (sources, sinks, the mixing topic) with ``--kafka-security``'s
    settings; ``args=None``: the environment's again (a command run in-process has ended)."""
    if args is None:
        if "streamlearn.connectors.kafka_security" in sys.modules:
            sys.modules["streamlearn.connectors.kafka_security"].use(None)
    elif getattr(args, "kafka_security", None):
        from streamlearn.connectors.kafka_security import KafkaSecurity, use

        use(KafkaSecurity.from_file(args.kafka_security))


def top_reasons(counts: dict, top: int = 3) -> str:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{reason} {n:,}" for reason, n in ranked[:top])
    return text + (", ..." if len(ranked) > top else "")


def add_security_options(p, what: str) -> None:
    """The options that secure an HTTP service (``serve``, ``train --serve``); ``what``: the service, in the help."""
    p.add_argument("--token-file", metavar="FILE",
                   help=f"{what} needs `Authorization: Bearer TOKEN`, TOKEN the first line of FILE (default: the "
                        "STREAMLEARN_TOKEN environment variable, if set); GET /healthz and the live page's files stay open")
    p.add_argument("--no-auth", action="store_true",
                   help=f"let {what} listen on an address other than loopback without a token")
    p.add_argument("--certfile", metavar="PEM", help=f"{what} speaks HTTPS with this certificate (chain) ...")
    p.add_argument("--keyfile", metavar="PEM", help="... and this private key")


def security_of(args, host: str) -> dict:
    """``serve``'s keywords for the token and TLS the options give, after refusing a service
    reachable from other machines without a token (see :func:`~streamlearn.service.serve.check_exposure`)."""
    from ..serve import ServiceConfigError, check_exposure, read_token

    try:
        token = read_token(args.token_file)
        check_exposure(host, token, args.no_auth)
    except ServiceConfigError as error:
        raise ConfigError(str(error)) from None
    return {"token": token, "certfile": args.certfile, "keyfile": args.keyfile}
