"""``streamlearn predict`` and ``streamlearn evaluate``: a checkpointed model on a source, without
learning it."""

from __future__ import annotations

import sys
import json

from .common import (EXIT_ERROR, ConfigError, EXIT_NOTHING_LEARNED, add_source_options, load_checkpointed, open_command_source,
                     top_reasons)


def _read_as_trained(args, payload: dict) -> None:
    """``predict`` / ``evaluate`` read data as the checkpoint's job read its own (label column,
    weight column, header; the format for stdin) unless the command line says otherwise."""
    reading = payload.get("runner", {}).get("reading") or {}
    for column in ("label_column", "weight_column", "id_column"):
        if getattr(args, column) is None and reading.get(column) is not None:
            setattr(args, column, reading[column])
    args.no_header = args.no_header or bool(reading.get("no_header"))
    if args.format is None and args.source == ["-"] and reading.get("format") in ("libsvm", "csv", "jsonl", "msgpack"):
        args.format = reading["format"]


def _coverage_outcome(coverage, model, judge_labels: bool = True) -> int:
    """The warnings of a prediction run's coverage on stderr; exit code 1 when no label was
    known and the labels are judged (``evaluate``; ``predict`` needs none: a warning there)."""
    for warning in coverage.warnings():
        print(f"streamlearn: warning: {warning}", file=sys.stderr)
    error = coverage.no_label_known(model)
    if error and not judge_labels:
        print(f"streamlearn: warning: {error}", file=sys.stderr)
    elif error:
        print(f"streamlearn: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def cmd_predict(args) -> int:
    import streamlearn.connectors

    from streamlearn.connectors.sinks import json_key

    from ..evaluation import FeatureCoverage

    model, payload = load_checkpointed(args.checkpoint)
    _read_as_trained(args, payload)
    source = open_command_source(args, labelled=False)
    sink = streamlearn.connectors.open_sink(args.output or "-")
    if sink.holds_lines:  # a second run's predictions after the first's would pass for one set
        if not args.overwrite:
            raise ConfigError(f"{args.output} holds lines already: --overwrite replaces them, or give another --output")
        sink.truncate(0)
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
    skipped = f"; {sum(bad.values()):,} bad records skipped ({top_reasons(bad)})" if bad else ""
    print(f"streamlearn: {n:,} predictions ({coverage.unknown_share:.1%} of the feature mass unknown to the model)"
          f"{skipped}", file=sys.stderr)
    if not n:
        print("streamlearn: nothing was predicted" + (": every record was bad (check --format, --label-column and "
                                                      "--no-header)" if bad else ": the source held no records"), file=sys.stderr)
        return EXIT_NOTHING_LEARNED
    return _coverage_outcome(coverage, model, judge_labels=False)


def cmd_evaluate(args) -> int:
    from ..evaluation import FeatureCoverage, evaluate_source

    model, payload = load_checkpointed(args.checkpoint)
    _read_as_trained(args, payload)
    coverage = FeatureCoverage()
    result = evaluate_source(model, open_command_source(args, labelled=True, until_end=True), coverage, args.weighted_metrics)  # a topic: to its end now
    print(json.dumps(result))
    if not result["n"]:
        print("streamlearn: nothing was evaluated" + (f": all {result['bad_records']:,} records were bad (check --format, "
                                                      "--label-column and --no-header)" if result["bad_records"] else
                                                      ": the source held no records"), file=sys.stderr)
        return EXIT_NOTHING_LEARNED
    return _coverage_outcome(coverage, model)


def add_predict_options(p) -> None:
    add_source_options(p)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory")
    p.add_argument("--output", help="file (JSON lines), - (stdout, default) or kafka://HOST:PORT/TOPIC")
    p.add_argument("--overwrite", action="store_true", help="replace what the --output file holds (it is refused otherwise)")
    p.add_argument("--proba", action="store_true", help="add class probabilities")
    p.add_argument("--idle-timeout", type=float, default=5.0, help="Kafka: stop after S seconds without a message")
    p.set_defaults(func=cmd_predict)


def add_evaluate_options(p) -> None:
    add_source_options(p)
    p.add_argument("--checkpoint", required=True, help="checkpoint directory")
    p.add_argument("--idle-timeout", type=float, default=5.0,
                   help="Kafka: the topic is read up to where it ends at the start; stop earlier after S seconds without a message")
    p.add_argument("--weighted-metrics", action="store_true",
                   help="count each record by its weight (default: each record once)")
    p.set_defaults(func=cmd_evaluate)
