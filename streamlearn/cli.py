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
import json
import os
import sys
import warnings
from typing import NoReturn

from . import stopping
from .errors import StreamlearnError

# NumPy (and with it OpenBLAS) is imported by the commands, not here: main() first decides
# how many threads OpenBLAS may start (see _blas_threads_for)


#: exit codes beyond 0 and the runner's (see the module docstring)
EXIT_ERROR, EXIT_USAGE, EXIT_NOTHING_LEARNED = 1, 2, 4
LEARNER_DEFAULT = "MulticlassSVM"


class ConfigError(ValueError):
    """Bad command-line configuration: printed as one line, exit code 1."""


class UsageError(ConfigError):
    """A command line that misses what it needs (exit code 2, as argparse's own usage errors)."""


def build_learner(name: str, params: list[str]):
    """A learner from its class name and ``KEY=VALUE`` parameters, each parsed by the
    parameter's declared type (:mod:`streamlearn.params`; clear errors); only that learner's
    module is imported."""
    import streamlearn

    from .params import parse_params

    if name not in streamlearn.LEARNER_NAMES:
        raise ConfigError(f"unknown learner {name!r}; choose one of: {', '.join(sorted(streamlearn.LEARNER_NAMES))}")
    cls = getattr(streamlearn, name)
    try:
        return cls(**parse_params(cls, params))
    except (TypeError, StreamlearnError, ValueError) as error:
        raise ConfigError(f"{name}: {error}") from None


#: checkpoint cadence when none is given: (every N learned examples, every S seconds)
FILE_CADENCE = (10_000, 60.0)
KAFKA_CADENCE = (None, 10.0)  # a daemon's replay after a crash is bounded in time; counting would checkpoint 10+ times a second


def _cadence(args) -> tuple:
    """``--checkpoint-every`` and ``--checkpoint-interval``, each defaulting by source."""
    every, interval = KAFKA_CADENCE if any(s.startswith("kafka://") for s in args.source) else FILE_CADENCE
    return (every if args.checkpoint_every is None else args.checkpoint_every,
            interval if args.checkpoint_interval is None else args.checkpoint_interval)


def _source(args, labelled: bool, passes: int = 1, until_end: bool = False):
    import connectors

    return connectors.open_source(bundled_paths(args.source), args.format, labelled, args.batch_records, passes,
                                  args.label_column, getattr(args, "idle_timeout", None), until_end,
                                  getattr(args, "broker_timeout", None), subscribe=bool(getattr(args, "mix_topic", None)),
                                  no_header=args.no_header)


def bundled_paths(sources: list[str]) -> list[str]:
    """Sources with the name of a bundled data set (``letter``, ``letter.t``: see
    :mod:`streamlearn.datasets`) that is not a file here replaced by the bundled file's path."""
    from .datasets import BUNDLED

    out = []
    for source in sources:
        if source in BUNDLED and not os.path.exists(source):
            print(f"streamlearn: {source!r} is the bundled data set {BUNDLED[source]}", file=sys.stderr)
            source = str(BUNDLED[source])
        out.append(source)
    return out


def _holdout(args):
    """``--holdout``: a fraction, or a path/URI evaluated in full at every checkpoint."""
    if args.holdout is None:
        return None
    import connectors

    try:
        return float(args.holdout)
    except ValueError:
        pass
    uri = bundled_paths([args.holdout])[0]
    # read as the training source is: the same format, label column and header
    reading = dict(fmt=args.format, label_column=args.label_column, no_header=args.no_header)
    connectors.open_source(uri, labelled=True, **reading)  # fail now if it cannot be opened
    # a topic is read up to where it ends when the evaluation starts (the idle timeout is a safety net)
    return lambda: connectors.open_source(uri, labelled=True, batch_records=args.batch_records, idle_timeout=2.0,
                                          until_end=True, **reading)


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
    if (args.resume or args.overwrite) and not args.checkpoint_dir:
        raise ConfigError(f"{'--resume' if args.resume else '--overwrite'} needs --checkpoint-dir")
    if args.proba and not args.predictions:
        raise ConfigError("--proba adds probabilities to --predictions: give --predictions SINK too")
    if args.mix_topic and not (len(args.source) == 1 and args.source[0].startswith("kafka://")):
        raise ConfigError("--mix-topic mixes the models of daemons that share a Kafka topic: the source must be "
                          "kafka://HOST:PORT/TOPIC?group=NAME")
    if args.mix_every < 1:
        raise ConfigError(f"--mix-every must be a positive number of examples, got {args.mix_every}")
    for option, value, what in (("--checkpoint-every", args.checkpoint_every, "number of examples"),
                                ("--checkpoint-interval", args.checkpoint_interval, "number of seconds"),
                                ("--batch-records", args.batch_records, "number of records"),
                                ("--passes", args.passes, "number of passes"), ("--keep", args.keep, "number of checkpoints"),
                                ("--max-classes", args.max_classes, "number of classes")):
        if value is not None and not value > 0:
            raise ConfigError(f"{option} must be a positive {what}, got {value:g}")
    if args.max_errors is not None and args.max_errors < 0:
        raise ConfigError(f"--max-errors must be 0 or more, got {args.max_errors}")
    streamed = args.source[0] == "-" or args.source[0].startswith("kafka://")
    if args.passes != 1 and streamed:
        raise ConfigError(f"--passes {args.passes}: stdin and Kafka are read once; save the stream to a file for several passes")


def _prepare_checkpoint_dir(args) -> None:
    """A fresh job refuses a ``--checkpoint-dir`` that holds checkpoints (its model would be
    buried, then pruned) unless ``--overwrite`` says to replace them."""
    if not args.checkpoint_dir:
        return
    from .checkpoint import CheckpointStore

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
    model, payload = _load(args.init_from)
    if args.param or args.learner != type(model).__name__ and args.learner != LEARNER_DEFAULT:
        print(f"streamlearn: --init-from continues the {type(model).__name__}{model._get_params()} of "
              f"{payload['path']}; --learner/--param are ignored", file=sys.stderr)
    print(f"streamlearn: starting from {payload['path']} ({payload['runner']['counters']['learned']:,} examples "
          "learned there)", file=sys.stderr)
    return model


def cmd_train(args) -> int:
    _check_train_options(args)
    holdout = _holdout(args)
    model = _initial_model(args) if args.init_from else None  # before --overwrite may clear the same directory
    _prepare_checkpoint_dir(args)
    source = _source(args, args.predictions is None, args.passes)  # with --predictions a record may lack its label
    from connectors.protocols import Prefetching

    if not args.resume and isinstance(source, Prefetching):  # resuming seeks first; a fresh run starts reading now
        source.with_hashes = isinstance(holdout, float)  # record hashes only for a hash hold-out
        source.start()  # parsing (NumPy and compiled code only) overlaps the import of the learner and river
    if model is None:
        model = _initial_model(args)
    import connectors

    from .runner import Runner, RunnerOptions

    directory = args.checkpoint_dir
    metrics_path = args.metrics or (os.path.join(directory, "metrics.jsonl") if directory else None)
    metrics = connectors.open_sink(metrics_path)
    dead_path = args.dead_letter or (os.path.join(directory, "dead_letters.jsonl") if directory else "dead_letters.jsonl")
    dead = connectors.open_sink(dead_path)
    predictions = connectors.open_sink(args.predictions) if args.predictions else None
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
                            predictions_sink=predictions, proba=args.proba, mixer=mixer, model_lock=lock,
                            progress=False if args.quiet else None)
    runner = Runner(model, source, options)
    if args.resume and runner.resume():
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
    print(json.dumps(runner.summary(), default=str), file=sys.stderr if args.predictions == "-" else sys.stdout)
    return _train_outcome(args, runner, code, dead_path)


def _mixer(args, model):
    """``--mix-topic``: this daemon's side of the group's mixing (the topic is made if missing)."""
    import socket

    from connectors.kafka import parse_kafka_uri
    from connectors.mixlog import MixLog

    from .mixing import GroupMixer, check_mixable

    try:
        check_mixable(model)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    bootstrap = parse_kafka_uri(args.source[0])["bootstrap"]
    log = MixLog(bootstrap, args.mix_topic, create=True, broker_timeout=args.broker_timeout)
    return GroupMixer(log, args.mix_every, f"{socket.gethostname()}-{os.getpid()}")


def _reasons(counts: dict, top: int = 3) -> str:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{reason} {n:,}" for reason, n in ranked[:top])
    return text + (", ..." if len(ranked) > top else "")


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
    from connectors.formats import UnknownFormat, sniff_format

    try:
        return sniff_format(record + b"\n")
    except UnknownFormat:
        return None


def _train_outcome(args, runner, code: int, dead_path: str) -> int:
    """The job's exit code, with one stderr line for bad records and for a job that learned nothing."""
    counters = runner.counters
    if not args.checkpoint_dir:
        print("streamlearn: the model was not saved (no --checkpoint-dir)", file=sys.stderr)
    if runner.stop_signal is not None:
        import signal

        where = (f"the model is saved in {args.checkpoint_dir}: the same command with --resume continues"
                 if args.checkpoint_dir else "the model was not saved")
        print(f"streamlearn: stopped by {signal.Signals(runner.stop_signal).name} after {counters['learned']:,} examples "
              f"learned, before the source's end; {where}", file=sys.stderr)
    if counters["dead_letters"]:
        appended = "" if args.dead_letter is None and args.checkpoint_dir else " (appended)"
        print(f"streamlearn: {counters['dead_letters']:,} bad records ({_reasons(runner.dead_reasons)}) -> "
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
        print(f"streamlearn: nothing was learned: {why}", file=sys.stderr)
        return EXIT_NOTHING_LEARNED
    return 0


def _load(directory):
    from .checkpoint import CheckpointStore

    payload = CheckpointStore(directory).load_latest()
    if payload is None:
        raise ConfigError(f"no checkpoint in {directory!r}")
    import streamlearn

    return streamlearn.learner_from_state(payload["learner"]), payload


def _read_as_trained(args, payload: dict) -> None:
    """``predict`` / ``evaluate`` read data as the checkpoint's job read its own (label column,
    header; the format for stdin) unless the command line says otherwise."""
    reading = payload.get("runner", {}).get("reading") or {}
    if args.label_column is None and reading.get("label_column") is not None:
        args.label_column = reading["label_column"]
    args.no_header = args.no_header or bool(reading.get("no_header"))
    if args.format is None and args.source == ["-"] and reading.get("format") in ("libsvm", "csv", "jsonl", "msgpack"):
        args.format = reading["format"]


def _coverage_outcome(coverage, model) -> int:
    """The warnings of a prediction run's coverage on stderr; exit code 1 when no label was known."""
    for warning in coverage.warnings():
        print(f"streamlearn: warning: {warning}", file=sys.stderr)
    error = coverage.no_label_known(model)
    if error:
        print(f"streamlearn: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def cmd_predict(args) -> int:
    import connectors

    from connectors.sinks import json_key

    from .evaluation import FeatureCoverage

    model, payload = _load(args.checkpoint)
    _read_as_trained(args, payload)
    source = _source(args, labelled=False)
    sink = connectors.open_sink(args.output or "-")
    n, bad = 0, {}
    coverage = FeatureCoverage()
    try:
        for batch in source:
            for dead in batch.dead:
                bad[dead.reason] = bad.get(dead.reason, 0) + 1
                if sum(bad.values()) <= 10:
                    print(f"streamlearn: skipped bad record at {dead.position}: {dead.reason}: {dead.message}", file=sys.stderr)
            if not len(batch):
                continue
            coverage.add(model, batch.X, batch.y)
            if args.proba:
                proba = model.predict_proba_many(batch.X).to_dict(orient="records")
            predicted = model.predict_many(batch.X)
            for i, label in enumerate(predicted.tolist()):
                out = {"position": batch.locate(i), "prediction": label}
                if args.proba:
                    out["proba"] = {json_key(label): p for label, p in proba[i].items()}
                sink.write(out)
            n += len(batch)
    finally:
        source.close()
        sink.close()
    skipped = f"; {sum(bad.values()):,} bad records skipped ({_reasons(bad)})" if bad else ""
    print(f"streamlearn: {n:,} predictions ({coverage.unknown_share:.1%} of the feature mass unknown to the model)"
          f"{skipped}", file=sys.stderr)
    if not n:
        print("streamlearn: nothing was predicted" + (": every record was bad (check --format, --label-column and "
                                                      "--no-header)" if bad else ": the source held no records"), file=sys.stderr)
        return EXIT_NOTHING_LEARNED
    return _coverage_outcome(coverage, model)


def cmd_evaluate(args) -> int:
    from .evaluation import FeatureCoverage, evaluate_source

    model, payload = _load(args.checkpoint)
    _read_as_trained(args, payload)
    coverage = FeatureCoverage()
    result = evaluate_source(model, _source(args, labelled=True, until_end=True), coverage)  # a topic: to its end now
    print(json.dumps(result))
    if not result["n"]:
        print("streamlearn: nothing was evaluated" + (f": all {result['bad_records']:,} records were bad (check --format, "
                                                      "--label-column and --no-header)" if result["bad_records"] else
                                                      ": the source held no records"), file=sys.stderr)
        return EXIT_NOTHING_LEARNED
    return _coverage_outcome(coverage, model)


def cmd_inspect(args) -> int:
    from .checkpoint import CheckpointStore
    from .metrics import ClassificationMetrics

    store = CheckpointStore(args.directory)
    payload = store.load_latest()
    if payload is None:
        raise ConfigError(f"no checkpoint in {args.directory!r}")
    state = payload["learner"]
    labels = state["labels"]["labels"]
    features = state["features"]
    info = {
        "checkpoint": payload["path"],
        "checkpoints": [p.name for p in store.paths()],
        "sequence": payload["sequence"],
        "created": payload["created"],
        "learner": state["class"],
        "params": state["params"],
        "classes": len(labels),
        "first_classes": labels[:20],
        "features": (2 ** features["n_bits"]) if features["n_bits"] else len(features["names"]),
        "pending_examples": len(state["pending"]["y"]),
        "source": payload["runner"]["source"],
        "reading": payload["runner"].get("reading"),
        "position": payload["position"],
        "counters": payload["runner"]["counters"],
        "prequential": ClassificationMetrics.restore(payload["runner"]["prequential"]).summary(),
    }
    calibration = state["model"].get("calibration") if isinstance(state.get("model"), dict) else None
    if calibration is not None:  # an MCID learner's probabilities (streamlearn.calibration)
        info["temperature"] = 1.0 / float(calibration["beta"])
    if "mixing" in payload:  # a member of a mixing group: what the group's shared model holds
        mixing = payload["mixing"]
        info["mixing"] = {"examples": mixing["examples"], "by_member": mixing["by_member"], "covered": mixing["covered"],
                          "log_offset": mixing["log_offset"], "published": mixing["published"]}
    if args.json:
        print(json.dumps(info, default=str))
    else:
        print(_inspect_text(info))
    return 0


def _inspect_text(info: dict) -> str:
    """``inspect``'s summary for a person; ``--json`` is the stable form for scripts."""
    import datetime

    created = datetime.datetime.fromtimestamp(info["created"], datetime.timezone.utc).isoformat(timespec="seconds")
    counters = ", ".join(f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in info["counters"].items())
    prequential = ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in info["prequential"].items())
    params = ", ".join(f"{k}={v!r}" for k, v in info["params"].items())
    return "\n".join([
        f"checkpoint   {info['checkpoint']} (sequence {info['sequence']}, created {created}; {len(info['checkpoints'])} kept)",
        f"learner      {info['learner']}({params})",
        f"classes      {info['classes']:,}: {', '.join(map(str, info['first_classes']))}{' ...' if info['classes'] > 20 else ''}",
        f"features     {info['features']:,}; pending examples {info['pending_examples']}",
        f"source       {info['source']}" + (f" (read as {', '.join(f'{k} {v!r}' for k, v in info['reading'].items())})"
                                             if info.get("reading") else ""),
        f"position     {json.dumps(info['position'], default=str)}",
        f"counters     {counters}",
        f"prequential  {prequential}",
    ] + ([f"temperature  {info['temperature']:.4g}: probabilities are softmax(scores / {info['temperature']:.4g})"]
         if "temperature" in info else []) + ([f"mixing       the group's model holds {info['mixing']['examples']:,} examples "
          f"({', '.join(f'{m} {n:,}' for m, n in info['mixing']['by_member'].items())}); "
          f"mixing topic folded to offset {info['mixing']['log_offset']}"] if "mixing" in info else []))


def _serve_live(args, runner, metrics_path):
    """Start ``train --serve [HOST]:PORT``: the HTTP service on the runner's own model, on a
    thread; returns the function that stops it."""
    import threading

    from .serve import LiveHolder, serve

    host, _, port = args.serve.rpartition(":")
    try:
        port = int(port)
    except ValueError:
        raise ConfigError(f"--serve takes [HOST]:PORT, e.g. :8080, not {args.serve!r}") from None
    stop, started = threading.Event(), threading.Event()
    failure: list = []

    def ready(server):
        shown_host, shown_port = server.server_address[:2]
        print(f"streamlearn: serving the live model at http://{shown_host}:{shown_port}/", file=sys.stderr, flush=True)
        started.set()

    def run():
        try:
            serve(None, host or "127.0.0.1", port, ready=ready, stop=stop,
                  holder=LiveHolder(runner, runner.model_lock, metrics_path if metrics_path != "-" else None))
        except OSError as error:  # the port is taken
            failure.append(error)
            started.set()

    thread = threading.Thread(target=run, name="streamlearn-serve", daemon=True)
    thread.start()
    started.wait()
    if failure:
        raise ConfigError(f"--serve {args.serve}: {failure[0]}")

    def stop_service():
        stop.set()
        thread.join(10)

    return stop_service


def cmd_serve(args) -> int:
    import signal
    import threading

    from .serve import serve

    if not os.path.isdir(args.checkpoint_dir):
        raise ConfigError(f"no checkpoint directory {args.checkpoint_dir!r} (streamlearn train --checkpoint-dir writes one)")
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())

    def ready(server):
        host, port = server.server_address[:2]
        print(f"streamlearn serve: http://{host}:{port}/ serving {args.checkpoint_dir}", file=sys.stderr, flush=True)

    serve(args.checkpoint_dir, args.host, args.port, args.max_age, args.max_body, args.reload_interval, ready, stop)
    return 0


def cmd_learners(args) -> int:
    """Each learner the command trains, or the named ones, with its parameters' types and defaults."""
    import streamlearn

    from .params import describe

    names = args.names or list(streamlearn.LEARNER_NAMES)
    unknown = [n for n in names if n not in streamlearn.LEARNER_NAMES]
    if unknown:
        raise ConfigError(f"unknown learner {unknown[0]!r}; choose one of: {', '.join(streamlearn.LEARNER_NAMES)}")
    print("\n\n".join(describe(getattr(streamlearn, name)) for name in names))
    print("\ntrain takes them as --param NAME=VALUE: a bool as true/false (yes/no, on/off, 1/0), none as none, "
          "a tuple as a,b")
    return 0


def cmd_plot(args) -> int:
    from .plotting import plot_metrics

    plot_metrics(args.metrics_file, args.output)
    print(f"streamlearn: wrote {args.output}", file=sys.stderr)
    return 0


def _add_source_options(p, required: bool = True) -> None:
    p.add_argument("source", nargs="+" if required else "*",
                   help="file path(s) or glob(s), - for stdin, or kafka://HOST:PORT/TOPIC?group=NAME[&client=confluent]")
    p.add_argument("--format", help="libsvm, csv, jsonl or msgpack (default: guessed from the file name; libsvm for stdin)")
    p.add_argument("--label-column", help="CSV: the label column's name or 0-based index; JSON lines and msgpack: a flat "
                                          "record's label field (default: one named y, label, class or target)")
    p.add_argument("--no-header", action="store_true", help="CSV: the files have no header line (columns are named "
                                                            "0, 1, ...; found without it when the first line is numbers)")
    p.add_argument("--batch-records", type=int, default=1000, help="records per batch (default: 1000): the unit of reading, learning and checkpoint positions")


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


def _train_options(p) -> None:
    from . import LEARNER_NAMES

    _add_source_options(p, required=False)
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
    p.add_argument("--overwrite", action="store_true", help="replace the checkpoints, metrics and dead letters a "
                                                            "--checkpoint-dir holds (a fresh job refuses such a directory)")
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
    p.add_argument("--serve", metavar="[HOST]:PORT",
                   help="answer predictions over HTTP from the model being learned, as streamlearn serve does from "
                        "checkpoints (HOST defaults to 127.0.0.1; PORT 0: any free port)")
    p.add_argument("--max-classes", type=int, metavar="N",
                   help="at most N classes: once the model has N, a record with a new label is a dead letter "
                        "(bounds memory against a stream of ever new labels; --param n_bits=B bounds the features)")
    p.add_argument("--passes", type=int, default=1, help="passes over file sources (default: 1; stdin and Kafka are read once)")
    p.add_argument("--idle-timeout", type=float, help="Kafka: stop after S seconds without a message (default: run forever)")
    p.add_argument("--broker-timeout", type=float, default=300.0, metavar="S",
                   help="Kafka: wait up to S seconds for a broker that went away (reported on stderr), then stop with "
                        "exit code 1 after a final checkpoint (default: 300; inf: wait for ever)")
    p.add_argument("--mix-topic", metavar="TOPIC",
                   help="Kafka: learn one model with the other daemons of the source's consumer group, mixing the "
                        "models through TOPIC (one partition, made if missing; MCID learners)")
    p.add_argument("--mix-every", type=int, default=10_000, metavar="N",
                   help="with --mix-topic: publish this daemon's change and mix every N learned examples (default: 10000; "
                        "sooner when partitions move or the topic is idle)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_train)


def _predict_options(p) -> None:
    _add_source_options(p)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory")
    p.add_argument("--output", help="file (JSON lines), - (stdout, default) or kafka://HOST:PORT/TOPIC")
    p.add_argument("--proba", action="store_true", help="add class probabilities")
    p.add_argument("--idle-timeout", type=float, default=5.0, help="Kafka: stop after S seconds without a message")
    p.set_defaults(func=cmd_predict)


def _evaluate_options(p) -> None:
    _add_source_options(p)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory")
    p.add_argument("--idle-timeout", type=float, default=5.0,
                   help="Kafka: the topic is read up to where it ends at the start; stop earlier after S seconds without a message")
    p.set_defaults(func=cmd_evaluate)


def _inspect_options(p) -> None:
    p.add_argument("directory")
    p.add_argument("--json", action="store_true",
                   help="print the newest checkpoint's metadata (learner, counters, positions...) as one JSON object, for scripts")
    p.set_defaults(func=cmd_inspect)


def _serve_options(p) -> None:
    p.add_argument("--checkpoint-dir", required=True, help="the directory a streamlearn train writes its checkpoints to")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8080, help="port (default: 8080; 0: any free port, printed on stderr)")
    p.add_argument("--max-age", type=float, metavar="S",
                   help="/healthz answers 503 when the newest checkpoint is older than S seconds (default: never)")
    p.add_argument("--max-body", type=int, default=1 << 20, metavar="BYTES",
                   help="largest /predict body accepted (default: 1 MiB; larger: 413)")
    p.add_argument("--reload-interval", type=float, default=1.0, metavar="S",
                   help="look for a new checkpoint every S seconds (default: 1)")
    p.set_defaults(func=cmd_serve)


def _learners_options(p) -> None:
    p.add_argument("names", nargs="*", metavar="LEARNER", help="the learners to describe (default: all)")
    p.set_defaults(func=cmd_learners)


def _plot_options(p) -> None:
    p.add_argument("metrics_file")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.set_defaults(func=cmd_plot)


class _Version(argparse.Action):
    """``--version``: the version and the kernels' backend, looked up only when asked (the
    backend note imports NumPy, which ``main`` must not load before it has configured it)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from . import __version__
        from .kernels import backend_note

        print(f"streamlearn {__version__} ({backend_note()})")
        parser.exit()


#: each command: its one-line help and the function adding its options
COMMANDS = {
    "train": ("learn from a source, with checkpoints, metrics and dead letters", _train_options),
    "predict": ("predict the records of a source with a checkpointed model", _predict_options),
    "evaluate": ("accuracy, macro-F1 and log-loss of a checkpointed model on a labelled source", _evaluate_options),
    "inspect": ("what the newest checkpoint of a directory holds", _inspect_options),
    "plot": ("learning curves from a metrics log, as PNG", _plot_options),
    "serve": ("answer predictions over HTTP from the newest checkpoint of a directory, reloading new ones", _serve_options),
    "learners": ("the learners train takes, each parameter with its type and default", _learners_options),
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
    if getattr(args, "func", None) is not cmd_train or "numpy" in sys.modules:
        return
    if "OPENBLAS_NUM_THREADS" in os.environ or "OMP_NUM_THREADS" in os.environ:
        return
    from . import FIRST_ORDER_LEARNERS

    if args.learner in FIRST_ORDER_LEARNERS:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def main(argv=None, caught: dict | None = None) -> int:
    """Run one command; ``caught``: the handlers :func:`streamlearn.stopping.catch` replaced, when
    the caller already catches stops (the ``streamlearn`` entry point, :mod:`streamlearn.console`)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    # train notes SIGTERM/SIGINT from here on: a stop while it starts is a final checkpoint, not death
    if caught is None and next((a for a in argv if not a.startswith("-")), None) == "train":
        caught = stopping.catch()
    previous_format, warnings.formatwarning = warnings.formatwarning, _one_line_warning  # what happened, not where
    parser = make_parser(argv)
    try:
        _apply_config(parser, argv)
        args = parser.parse_args(argv)
        _blas_threads_for(args)
        return args.func(args)
    except BrokenPipeError:
        return 0
    except UsageError as error:
        print(f"streamlearn: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, OSError) as error:  # ConfigError, SourceError, CheckpointError, a bad format or URI; a missing
        print(f"streamlearn: error: {error}", file=sys.stderr)  # file, a full disk, a directory we may not write to
        return 1
    finally:
        warnings.formatwarning = previous_format
        if caught is not None:
            stopping.release(caught)


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


def console_main() -> NoReturn:
    """The ``streamlearn`` command; in-process callers (tests, notebooks) use :func:`main`."""
    exit_now(main())


if __name__ == "__main__":
    console_main()
