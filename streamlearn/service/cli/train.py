"""``streamlearn train``: learn from a source, with checkpoints, metrics, dead letters, mixing and
a live service; and the diagnosis printed when it stops for bad records."""

from __future__ import annotations

import sys
import json
import os

from .common import (EXIT_ERROR, EXIT_NOTHING_LEARNED, LEARNER_DEFAULT, ConfigError, UsageError, add_security_options,
                     add_source_options, build_learner, bundled_paths, load_checkpointed, open_command_source, security_of,
                     listen_address, top_reasons)


#: checkpoint cadence when none is given: (every N learned examples, every S seconds)
FILE_CADENCE = (10_000, 60.0)


KAFKA_CADENCE = (None, 10.0)  # a daemon's replay after a crash is bounded in time; counting would checkpoint 10+ times a second


def _cadence(args) -> tuple:
    """``--checkpoint-every`` and ``--checkpoint-interval``, each defaulting by source."""
    every, interval = KAFKA_CADENCE if any(s.startswith("kafka://") for s in args.source) else FILE_CADENCE
    return (every if args.checkpoint_every is None else args.checkpoint_every,
            interval if args.checkpoint_interval is None else args.checkpoint_interval)


def _holdout(args):
    """``--holdout``: a fraction, or a path/URI evaluated in full at every checkpoint."""
    if args.holdout is None:
        return None
    import streamlearn.connectors

    try:
        return float(args.holdout)
    except ValueError:
        pass
    uri = bundled_paths([args.holdout])[0]
    # read as the training source is: the same format, label column and header
    reading = dict(fmt=args.format, label_column=args.label_column, no_header=args.no_header, weight_column=args.weight_column,
                   id_column=args.id_column)
    streamlearn.connectors.open_source(uri, labelled=True, **reading)  # fail now if it cannot be opened
    # a topic is read up to where it ends when the evaluation starts (the idle timeout is a safety net)
    return lambda: streamlearn.connectors.open_source(uri, labelled=True, batch_records=args.batch_records, idle_timeout=2.0,
                                          until_end=True, **reading)


#: --mix-every's default: examples learned between two mixes
MIX_EVERY = 10_000


def _check_train_options(args) -> None:
    """Options that contradict each other or the source: one clear line before anything starts."""
    if not args.source:
        raise UsageError("train needs a source: a file, a glob, - for stdin, or kafka://HOST:PORT/TOPIC?group=NAME "
                          "(on the command line or as `source` in --config)")
    if args.resume and args.overwrite:
        raise ConfigError("--resume continues the model of --checkpoint-dir and --overwrite replaces it: choose one")
    if args.resume and args.init_from:
        raise ConfigError("--resume continues a job where it stopped; --init-from starts a new job from a trained model: "
                          "choose one")
    if args.resume and not args.checkpoint_dir:
        raise ConfigError("--resume needs --checkpoint-dir")
    if args.proba and not args.predictions:
        raise ConfigError("--proba adds probabilities to --predictions: give --predictions SINK too")
    if args.mix_topic and not (len(args.source) == 1 and args.source[0].startswith("kafka://")):
        raise ConfigError("--mix-topic mixes the models of daemons that share a Kafka topic: the source must be "
                          "kafka://HOST:PORT/TOPIC?group=NAME")
    if args.mix_every is not None and not args.mix_topic:
        raise ConfigError("--mix-every sets how often --mix-topic mixes: give --mix-topic too")
    if args.mix_every is not None and args.mix_every < 1:
        raise ConfigError(f"--mix-every must be a positive number of examples, got {args.mix_every}")
    if args.standardize and any(p.split("=", 1)[0].strip() == "standardize" for p in args.param):
        raise ConfigError("--standardize is --param standardize=True: give one of them")
    for option, value, what in (("--checkpoint-every", args.checkpoint_every, "number of examples"),
                                ("--checkpoint-interval", args.checkpoint_interval, "number of seconds"),
                                ("--batch-records", args.batch_records, "number of records"),
                                ("--passes", args.passes, "number of passes"), ("--keep", args.keep, "number of checkpoints"),
                                ("--max-classes", args.max_classes, "number of classes")):
        if value is not None and not value > 0:
            raise ConfigError(f"{option} must be a positive {what}, got {value:g}")
    if args.max_errors is not None and args.max_errors < 0:
        raise ConfigError(f"--max-errors must be 0 or more, got {args.max_errors}")
    secured = [o for o, v in (("--token-file", args.token_file), ("--no-auth", args.no_auth), ("--certfile", args.certfile),
                              ("--keyfile", args.keyfile)) if v]
    if secured and not args.serve:
        raise ConfigError(f"{secured[0]} secures the service of --serve: give --serve [HOST]:PORT too")
    streamed = args.source[0] == "-" or args.source[0].startswith("kafka://")
    if args.passes != 1 and streamed:
        raise ConfigError(f"--passes {args.passes}: stdin and Kafka are read once; save the stream to a file for several passes")


def _prepare_checkpoint_dir(args) -> None:
    """A fresh job refuses a ``--checkpoint-dir`` that holds checkpoints (its model would be
    buried, then pruned) unless ``--overwrite`` says to replace them."""
    if not args.checkpoint_dir:
        return
    from ..checkpoint import CheckpointStore

    store = CheckpointStore(args.checkpoint_dir, args.keep)
    existing = store.paths()
    if args.resume or not existing:
        return
    if not args.overwrite and _learned_nothing(store):  # a failed start (wrong format, label column...) holds no model
        print(f"streamlearn: replacing the checkpoints of {args.checkpoint_dir}: the job that wrote them learned nothing",
              file=sys.stderr)
        args.overwrite = True
    if not args.overwrite:
        raise ConfigError(f"{args.checkpoint_dir} already holds checkpoints of a model ({existing[-1].name}): "
                          "--resume continues it, --overwrite replaces it, or choose another --checkpoint-dir")
    store.clear()


def _refuse_another_runs_lines(args, sinks) -> None:
    """A new run appends to no file that holds lines already: they are another run's, and a
    second copy of its predictions, metrics or dead letters would pass for one run's."""
    for sink in sinks:
        if sink is not None and sink.holds_lines:
            nothing = f"{args.checkpoint_dir} holds no checkpoint to resume, but " if args.resume else ""
            raise ConfigError(f"{nothing}{sink.name} holds another run's lines: --overwrite replaces them, or give "
                              "another path")
    if args.resume:
        print(f"streamlearn: nothing to resume in {args.checkpoint_dir}: a new run", file=sys.stderr)


def _check_sink_directories(args) -> None:
    """A file sink's directory must exist (a mistyped path is refused, not created); the
    checkpoint directory is made, with its parents, as the one place a run creates."""
    if args.checkpoint_dir:
        os.makedirs(args.checkpoint_dir, exist_ok=True)
    for option, path in (("--dead-letter", args.dead_letter), ("--metrics", args.metrics), ("--predictions", args.predictions)):
        if path and path != "-" and not path.startswith("kafka://"):
            parent = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(parent):
                raise ConfigError(f"{option} {path}: no directory {parent}")


def _learned_nothing(store) -> bool:
    """Whether the newest checkpoint of a directory holds a model that learned no example."""
    try:
        payload = store.load_latest()
    except ValueError:  # every checkpoint damaged: not ours to judge, --overwrite decides
        return False
    return payload is not None and not payload["runner"]["counters"].get("learned") and "mixing" not in payload


def _initial_model(args):
    """The learner a job starts with: a new one, or with ``--init-from DIR`` the newest model
    of DIR (as Vowpal Wabbit's ``-i``: the new source is learned from its beginning)."""
    if not args.init_from:
        return build_learner(args.learner, args.param + (["standardize=True"] if args.standardize else []))
    model, payload = load_checkpointed(args.init_from)
    if args.param or args.standardize or args.learner != type(model).__name__ and args.learner != LEARNER_DEFAULT:
        print(f"streamlearn: --init-from continues the {type(model).__name__}{model._get_params()} of "
              f"{payload['path']}; --learner/--param/--standardize are ignored", file=sys.stderr)
    print(f"streamlearn: starting from {payload['path']} ({payload['runner']['counters']['learned']:,} examples "
          "learned there)", file=sys.stderr)
    return model


def cmd_train(args) -> int:
    _check_train_options(args)
    holdout = _holdout(args)
    model = _initial_model(args) if args.init_from else None  # before --overwrite may clear the same directory
    _prepare_checkpoint_dir(args)
    _check_sink_directories(args)
    source = open_command_source(args, args.predictions is None, args.passes)  # with --predictions a record may lack its label
    from streamlearn.connectors.protocols import Prefetching

    if not args.resume and isinstance(source, Prefetching):  # resuming seeks first; a fresh run starts reading now
        source.with_hashes = isinstance(holdout, float)  # record hashes only for a hash hold-out
        source.start()  # parsing (NumPy and compiled code only) overlaps the import of the learner and river
    if model is None:
        model = _initial_model(args)
    import streamlearn.connectors

    from ..runner import Runner, RunnerOptions

    directory = args.checkpoint_dir
    metrics_path = args.metrics or (os.path.join(directory, "metrics.jsonl") if directory else None)
    metrics = streamlearn.connectors.open_sink(metrics_path)
    dead_path = args.dead_letter or (os.path.join(directory, "dead_letters.jsonl") if directory else "dead_letters.jsonl")
    dead = streamlearn.connectors.open_sink(dead_path)
    predictions = streamlearn.connectors.open_sink(args.predictions) if args.predictions else None
    if args.overwrite:  # the replaced job's metrics, dead letters and predictions go with it
        for sink in (metrics, dead, predictions):
            if sink is not None:
                sink.truncate(0)
    every, interval = _cadence(args)
    import threading

    lock = threading.Lock() if args.serve else None  # held by the runner per batch, by the service per request
    mixer = _mixer(args, model) if args.mix_topic else None
    options = RunnerOptions(checkpoint_dir=directory, checkpoint_every=every, checkpoint_interval=interval, keep=args.keep,
                            holdout=holdout, metrics_sink=metrics, dead_letter_sink=dead, max_errors=args.max_errors,
                            check_start=args.max_errors is None, max_classes=args.max_classes,
                            predictions_sink=predictions, proba=args.proba, weighted_metrics=args.weighted_metrics,
                            mixer=mixer, model_lock=lock,
                            progress=False if args.quiet else None)
    runner = Runner(model, source, options)
    resumed = args.resume and runner.resume()
    if not resumed and not args.overwrite:
        _refuse_another_runs_lines(args, (metrics, dead, predictions))
    if resumed:
        restored = runner.model
        if type(restored).__name__ != args.learner or (args.param and restored._get_params() != model._get_params()):
            print(f"streamlearn: resuming the checkpoint's {type(restored).__name__}{restored._get_params()}; "
                  "--learner/--param are ignored", file=sys.stderr)
        print(f"streamlearn: resumed from {runner.last_checkpoint_path} "
              f"({runner.counters['learned']:,} examples learned)", file=sys.stderr)
    stop_service = _serve_live(args, runner, metrics_path) if args.serve else None
    try:
        code = runner.run()
    finally:
        if stop_service is not None:
            stop_service()
        runner.metrics_sink.close()
        runner.dead_letters.close()
        if predictions is not None:
            predictions.close()
    # with --predictions - stdout is the predictions stream (a shell filter): the summary goes to stderr
    summary = runner.summary()
    print(json.dumps(summary, default=str), file=sys.stderr if args.predictions == "-" else sys.stdout)
    return _train_outcome(args, runner, code, dead_path, summary)


def _mixer(args, model):
    """``--mix-topic``: this daemon's side of the group's mixing (the topic is made if missing)."""
    import socket

    from streamlearn.connectors.kafka import parse_kafka_uri
    from streamlearn.connectors.mixlog import MixLog

    from ..mixing import GroupMixer, check_mixable

    try:
        check_mixable(model)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    bootstrap = parse_kafka_uri(args.source[0])["bootstrap"]
    log = MixLog(bootstrap, args.mix_topic, create=True, broker_timeout=args.broker_timeout)
    return GroupMixer(log, args.mix_every or MIX_EVERY, f"{socket.gethostname()}-{os.getpid()}")


def _likely_cause(args, runner, reasons: dict) -> str:
    """What most often makes a stream's records bad, from the dead letters' reasons and the
    first bad record's look."""
    top = max(reasons, key=reasons.get) if reasons else ""
    fmt = getattr(runner.source, "format", None)
    looks = _looks_like(runner.first_dead_record)
    if looks and fmt and looks != fmt and not top.startswith("refused"):
        return f"the records look like {looks} but were read as {fmt}: give --format {looks}"
    if top.startswith("refused-bad-label"):
        wanted = getattr(runner.model, "classes_", None)
        if wanted is not None:  # a binary learner: its two classes are a parameter
            example = _dead_label(runner.first_dead_record)
            return (f"{type(runner.model).__name__} learns the two classes {tuple(wanted)!r} (negative, positive), and "
                    f"these records' labels are others{f' (such as {example!r})' if example is not None else ''}: give "
                    "--param classes=NEGATIVE,POSITIVE with the data's two labels, or choose a multi-class learner")
        return f"the learner {type(runner.model).__name__} refuses these labels (see the dead letters' messages)"
    if top.startswith("refused"):
        return "the learner refuses these records (see the dead letters' messages)"
    if top in ("missing-label", "bad-label", "label-too-long"):
        return ("the labels are missing or unusable: check --label-column (a CSV column, or a flat JSON record's label "
                "field) or the records' \"y\"")
    if top == "non-numeric":
        return "a column or feature holds text: if it is the label, name it with --label-column"
    if top in ("malformed", "undecodable"):
        return f"the data may not be {fmt or 'in the format expected'}: give --format (libsvm, csv, jsonl, msgpack)"
    return "see the dead letters' messages"


def _dead_label(record: bytes | None):
    """The label of a refused record (its dead letter holds it as ``{"x": ..., "y": label}``)."""
    try:
        return json.loads(record)["y"]
    except (TypeError, ValueError, KeyError):
        return None


def _looks_like(record: bytes | None) -> str | None:
    """The format one bad record's bytes look like, if any."""
    if not record:
        return None
    from streamlearn.connectors.formats import UnknownFormat, sniff_format

    try:
        return sniff_format(record + b"\n")
    except UnknownFormat:
        return None


def _train_outcome(args, runner, code: int, dead_path: str, summary: dict) -> int:
    """The job's exit code, with one stderr line for bad records and for a job that learned nothing."""
    counters = runner.counters
    if not args.checkpoint_dir:
        print("streamlearn: the model was not saved (no --checkpoint-dir)", file=sys.stderr)
    unknown = (summary.get("holdout_final") or {}).get("unknown_features") or 0.0
    if unknown > 0.1:  # a hold-out file of another format or feature naming scores as if the model knew nothing
        print(f"streamlearn: warning: {unknown:.0%} of the hold-out's feature mass is on features the model never learned: "
              "is --holdout FILE the kind of data the source is (its format, names and first index)?", file=sys.stderr)
    if runner.stop_signal is not None:
        import signal

        where = (f"the model is saved in {args.checkpoint_dir}: the same command with --resume continues"
                 if args.checkpoint_dir else "the model was not saved")
        print(f"streamlearn: stopped by {signal.Signals(runner.stop_signal).name} after {counters['learned']:,} examples "
              f"learned, before the source's end; {where}", file=sys.stderr)
    if counters["dead_letters"]:
        appended = "" if args.dead_letter is None and args.checkpoint_dir else " (appended)"
        print(f"streamlearn: {counters['dead_letters']:,} bad records ({top_reasons(runner.dead_reasons)}) -> "
              f"{dead_path}{appended}", file=sys.stderr)
        if code == 0 and runner.dead_reasons.get("refused-bad-label"):  # valid records the learner would not take
            print(f"streamlearn: {_likely_cause(args, runner, {'refused-bad-label': 1})}", file=sys.stderr)
    if code == EXIT_ERROR:  # the source went away for good
        saved = f"; the model is saved in {args.checkpoint_dir}: --resume goes on from there" if args.checkpoint_dir else ""
        print(f"streamlearn: {runner.stop_error}; stopping{saved}", file=sys.stderr)
        return code
    if code != 0:
        print(f"streamlearn: {runner.stop_error}; stopping ({_likely_cause(args, runner, runner.stop_error.reasons)}; "
              "--max-errors N sets how many bad records a job accepts)", file=sys.stderr)
        return code
    group_learned = runner.mixer is not None and runner.mixer.shared.examples > 0  # a member that joined after the work
    if counters["learned"] == 0 and not counters["unlabelled"] and not runner.stopped_by_signal and not group_learned:
        why = "the source held no records" if not counters["dead_letters"] else _likely_cause(args, runner, runner.dead_reasons)
        if counters["weightless"]:
            why = f"every record's weight was 0 ({counters['weightless']:,} records; a weight of 0 is not learned)"
        print(f"streamlearn: nothing was learned: {why}", file=sys.stderr)
        return EXIT_NOTHING_LEARNED
    return 0


def _serve_live(args, runner, metrics_path):
    """Start ``train --serve [HOST]:PORT``: the HTTP service on the runner's own model, on a
    thread; returns the function that stops it."""
    import threading

    from ..serve import LiveHolder, ServiceConfigError, serve

    host, port = args.serve
    security = security_of(args, host)
    stop, started = threading.Event(), threading.Event()
    failure: list = []

    def ready(listening):
        shown_host, shown_port = listening.server_address[:2]
        print(f"streamlearn: serving the live model at {listening.scheme}://{shown_host}:{shown_port}/", file=sys.stderr,
              flush=True)
        started.set()

    def run():
        try:
            serve(None, host, port, ready=ready, stop=stop,
                  holder=LiveHolder(runner, runner.model_lock, metrics_path if metrics_path != "-" else None), **security)
        except (OSError, ServiceConfigError) as error:  # the port is taken, a certificate that does not load
            failure.append(error)
            started.set()

    thread = threading.Thread(target=run, name="streamlearn-serve", daemon=True)
    thread.start()
    started.wait()
    if failure:
        raise ConfigError(f"--serve {host}:{port}: {failure[0]}")

    def stop_service():
        stop.set()
        thread.join(10)

    return stop_service


def add_train_options(p) -> None:
    from ... import LEARNER_NAMES

    add_source_options(p, required=False)
    p.add_argument("--config", help="a TOML file whose keys stand in for these options (source too; [param] table for --param)")
    p.add_argument("--learner", default=LEARNER_DEFAULT, metavar="NAME",
                   help=f"the learner: {', '.join(LEARNER_NAMES)} (default: {LEARNER_DEFAULT})")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="learner parameter, repeatable (e.g. lam=1e-4, average=false), read by its type: "
                        "`streamlearn learners NAME` lists them")
    p.add_argument("--standardize", action="store_true", help="scale every feature online to zero mean and unit variance, "
                                                              "learned and checkpointed with the model: for dense, unscaled "
                                                              "features (the learner's standardize=True)")
    p.add_argument("--checkpoint-dir", help="directory for checkpoints (and, by default, metrics.jsonl and dead_letters.jsonl); "
                                            "without it the model is not saved")
    p.add_argument("--checkpoint-every", type=int, help="checkpoint every N learned examples (default: 10000 for files "
                                                        "and stdin; Kafka: none, see --checkpoint-interval)")
    p.add_argument("--checkpoint-interval", type=float, help="... and every S seconds (default: 60 for files and stdin, "
                                                             "10 for Kafka)")
    p.add_argument("--keep", type=int, default=3, help="checkpoints kept (default: 3)")
    p.add_argument("--resume", action="store_true", help="continue from the newest intact checkpoint in --checkpoint-dir")
    p.add_argument("--overwrite", action="store_true", help="replace the checkpoints, metrics, dead letters and "
                        "predictions of an earlier run (a fresh job refuses a directory or file that holds them)")
    p.add_argument("--init-from", metavar="DIR", help="start from the newest model in checkpoint directory DIR (its learner "
                                                      "and parameters) and learn the source from its beginning")
    p.add_argument("--holdout", help="a fraction (hash split of the stream, never learned) or a labelled source evaluated at each checkpoint")
    p.add_argument("--metrics", help="metrics log (JSON lines; default: CHECKPOINT_DIR/metrics.jsonl)")
    p.add_argument("--dead-letter", help="bad records go here: a file (JSON lines) or kafka://HOST:PORT/TOPIC "
                                         "(default: CHECKPOINT_DIR/dead_letters.jsonl, else ./dead_letters.jsonl)")
    p.add_argument("--max-errors", type=int, help="stop with exit code 3 after more than N bad records (default: only "
                                                  "a stream whose first 100 records are mostly bad is stopped)")
    p.add_argument("--predictions", metavar="SINK",
                   help="write every record's prediction, made before it is learned, with its position: a file (JSON "
                        "lines), - for stdout, or kafka://HOST:PORT/TOPIC; a record without a label is then predicted and "
                        "not learned (without --predictions it is a bad record)")
    p.add_argument("--proba", action="store_true", help="with --predictions: each class's probability too")
    p.add_argument("--weighted-metrics", action="store_true", help="count each record by its weight in the prequential and "
                   "hold-out metrics (default: each record once — weights are how the stream is learned)")
    p.add_argument("--serve", metavar="[HOST]:PORT", type=listen_address,
                   help="answer predictions over HTTP from the model being learned, as streamlearn serve does from "
                        "checkpoints (HOST defaults to 127.0.0.1; PORT 0: any free port)")
    add_security_options(p, "--serve")
    p.add_argument("--max-classes", type=int, metavar="N",
                   help="at most N classes: once the model has N, a record with a new label is a dead letter "
                        "(bounds memory against a stream of ever new labels; --param n_bits=B bounds the features)")
    p.add_argument("--passes", type=int, default=1, help="passes over file sources (default: 1; stdin and Kafka are read once)")
    p.add_argument("--idle-timeout", type=float, help="Kafka: stop after S seconds without a message (default: run forever)")
    p.add_argument("--broker-timeout", type=float, default=300.0, metavar="S",
                   help="Kafka: wait up to S seconds for a broker that went away (reported on stderr), then stop with "
                        "exit code 1 after a final checkpoint (default: 300; inf: wait for ever); a broker never "
                        "reached is waited for up to S seconds, at most 30")
    p.add_argument("--mix-topic", metavar="TOPIC",
                   help="Kafka: learn one model with the other daemons of the source's consumer group, mixing the "
                        "models through TOPIC (one partition, made if missing; MCID learners)")
    p.add_argument("--mix-every", type=int, metavar="N",
                   help="with --mix-topic: publish this daemon's change and mix every N learned examples (default: 10000; "
                        "sooner when partitions move or the topic is idle)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)
