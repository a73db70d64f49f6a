"""The commands that read what training wrote: ``inspect`` (a checkpoint), ``plot`` (the metrics
log), ``serve`` (predictions over HTTP), and ``learners`` (what ``train`` takes)."""

from __future__ import annotations

import json
import sys
import os

from .common import ConfigError, add_security_options, port_number, positive, security_of


def cmd_inspect(args) -> int:
    from ..checkpoint import CheckpointStore
    from ..metrics import ClassificationMetrics

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
    if calibration is not None and calibration["beta"] > 0:  # an MCID learner's probabilities (streamlearn.calibration)
        info["temperature"] = 1.0 / float(calibration["beta"])
    if (state["params"] or {}).get("class_weight") is not None:  # each class's weight now, read from the state
        from ...class_weights import RunningBalance, class_weights_of
        from ...labels import LabelSpace

        balance = RunningBalance.restore(state["class_balance"]) if "class_balance" in state else None
        weights = class_weights_of(state["params"]["class_weight"], LabelSpace.restore(state["labels"]), balance)
        info["class_weights"] = [[label, round(w, 6)] for label, w in weights.items()][:20]
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
         if "temperature" in info else []) + ([f"class weight {', '.join(f'{label} {w:.4g}' for label, w in info['class_weights'])}"
         f"{' ...' if info['classes'] > 20 else ''}"] if "class_weights" in info else []) + ([f"mixing       the group's model holds {info['mixing']['examples']:,} examples "
          f"({', '.join(f'{m} {n:,}' for m, n in info['mixing']['by_member'].items())}); "
          f"mixing topic folded to offset {info['mixing']['log_offset']}"] if "mixing" in info else []))


def cmd_serve(args) -> int:
    import signal
    import threading

    from ..serve import ServiceConfigError, serve

    if not os.path.isdir(args.checkpoint_dir):
        raise ConfigError(f"no checkpoint directory {args.checkpoint_dir!r} (streamlearn train --checkpoint-dir writes one)")
    security = security_of(args, args.host)
    stop = threading.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda *_: stop.set())

    def ready(listening):
        host, port = listening.server_address[:2]
        print(f"streamlearn serve: {listening.scheme}://{host}:{port}/ serving {args.checkpoint_dir}", file=sys.stderr, flush=True)

    try:
        serve(args.checkpoint_dir, args.host, args.port, args.max_age, args.max_body, args.reload_interval, ready, stop,
              **security)
    except ServiceConfigError as error:
        raise ConfigError(str(error)) from None
    return 0


def cmd_learners(args) -> int:
    """Each learner the command trains, or the named ones, with its parameters' types and defaults."""
    import streamlearn

    from ...params import describe

    names = args.names or list(streamlearn.LEARNER_NAMES)
    unknown = [n for n in names if n not in streamlearn.LEARNER_NAMES]
    if unknown:
        raise ConfigError(f"unknown learner {unknown[0]!r}; choose one of: {', '.join(streamlearn.LEARNER_NAMES)}")
    print("\n\n".join(describe(getattr(streamlearn, name)) for name in names))
    print("\ntrain takes them as --param NAME=VALUE: a bool as true/false (yes/no, on/off, 1/0), none as none, "
          "a tuple as a,b")
    return 0


def cmd_plot(args) -> int:
    from ..plotting import plot_metrics

    plot_metrics(args.metrics_file, args.output)
    print(f"streamlearn: wrote {args.output}", file=sys.stderr)
    return 0


def add_inspect_options(p) -> None:
    p.add_argument("directory")
    p.add_argument("--json", action="store_true",
                   help="print the newest checkpoint's metadata (learner, counters, positions...) as one JSON object, for scripts")
    p.set_defaults(func=cmd_inspect)


def add_serve_options(p) -> None:
    p.add_argument("--checkpoint-dir", required=True, help="the directory a streamlearn train writes its checkpoints to")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=port_number, default=8080, help="port (default: 8080; 0: any free port, printed on stderr)")
    p.add_argument("--max-age", type=positive(float), metavar="S",
                   help="/healthz answers 503 when the newest checkpoint is older than S seconds (default: never)")
    p.add_argument("--max-body", type=positive(int), default=1 << 20, metavar="BYTES",
                   help="largest /predict body accepted (default: 1 MiB; larger: 413)")
    p.add_argument("--reload-interval", type=positive(float), default=1.0, metavar="S",
                   help="look for a new checkpoint every S seconds (default: 1)")
    add_security_options(p, "the service")
    p.set_defaults(func=cmd_serve)


def add_learners_options(p) -> None:
    p.add_argument("names", nargs="*", metavar="LEARNER", help="the learners to describe (default: all)")
    p.set_defaults(func=cmd_learners)


def add_plot_options(p) -> None:
    p.add_argument("metrics_file")
    p.add_argument("-o", "--output", required=True, help="PNG file to write")
    p.set_defaults(func=cmd_plot)
