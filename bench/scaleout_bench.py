"""Scaling out (issue 26): how much accuracy model mixing keeps against one learner.

**Mixing, in one process** (the model side, :mod:`streamlearn.service.mixing`): MNIST (the shipped split,
pixels in [0, 1]), one pass in a seeded order, ``MulticlassSVM()`` at its defaults. ``N`` members
take interleaved chunks of 500 rows (as a group's members take partitions) and mix as daemons do:
a member learns ``every`` rows of its share from its base, publishes its change, folds every change
published so far and goes on from the shared model. Two schedules: *in turn* (the members take
turns) and *one late* (the last member starts once the others have learned their shares: a daemon
slow to join, as seen on a loaded machine). Reported, as test accuracy:

* *one learner*: the whole stream, one model;
* *share of examples*: the fold of :mod:`streamlearn.service.mixing` (a change at ``n / (n + c)``, ``c``
  the examples folded since its base);
* *1/N*: every change at ``1/N``, and *sum*: every change at weight 1 — the two alternatives the
  fold was chosen against;
* *unmixed*: N separate models, each on its share only (the mean of their accuracies).

**Daemons on a broker** (``--only daemons``): the MNIST training rows ``--copies`` times over (each
copy in the seeded order), as compact messages of 100 rows round robin over a 6-partition topic of
a Tansu broker on loopback; then, ``--repeats`` rounds, for each ``--mix-every`` given (2,000 and
10,000) 1, 2 and 3 ``streamlearn train --mix-topic ... --mix-every N`` daemons (``MulticlassSVM()``,
no checkpoint directory) in a fresh consumer group each, and one daemon without mixing. The
benchmark reads the mixing topic as a member does and notes when each accepted change arrived:

* *seconds to all*: from starting the daemons until the accepted changes cover every record
  (start-up and the group's first rebalance included);
* *steady examples/s*: records covered between 25 % and 75 % of the stream, over that time, and
  the cores the daemons, the broker and the reader kept busy meanwhile (CPU seconds per second);
* *mixing share / bytes per change*: each daemon's time in mixing (publishing, reading, folding,
  writing the shared model) over its run, and the size of a published change;
* test accuracy of the shared model as the changes are folded (every fifth of the stream), and
  one daemon without mixing on the same topic (its examples/s while records flowed) for reference.

Two cores run the broker, the daemons and this reader here: the daemons' figures are this
machine's, not a cluster's; the cores busy say how much of the machine each setting used.

    python -m bench.scaleout_bench            # both sections, about 15 minutes
    python -m bench.scaleout_bench --quick    # the test suite's smoke run

Writes ``bench/results/scaleout.{json,md,png}``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import sys

import numpy as np

from bench.common import accuracy, broker_pid, cpu_seconds, machine, pyplot, save_results, broker_helpers
from bench.data import load

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
CHUNK = 500
SEED = 7
#: the fold's weight for a change, by name: ``None`` is streamlearn's (its share of the examples learned beside it)
FOLDS = {"share of examples": lambda members: None, "1/N": lambda members: 1 / members, "sum": lambda members: 1.0}
SCHEDULES = ("in turn", "one late")


def shares(n_rows: int, members: int) -> list[np.ndarray]:
    """Each member's rows: interleaved chunks of :data:`CHUNK` rows, in stream order."""
    chunks = np.array_split(np.arange(n_rows), max(1, n_rows // CHUNK))
    return [np.concatenate(chunks[i::members]) for i in range(members)]


def turns(parts: list, every: int, schedule: str) -> list[int]:
    """The order in which members publish (one entry per change), by :data:`SCHEDULES`."""
    rounds = max(-(-len(p) // every) for p in parts)
    if schedule == "in turn":
        return [i for _ in range(rounds) for i in range(len(parts))]
    return [i for _ in range(rounds) for i in range(len(parts) - 1)] + [len(parts) - 1] * rounds


def mixed(X, y, X_test, y_test, members: int, every: int, how: str, schedule: str) -> float:
    """One pass of ``members`` members publishing every ``every`` rows of each share (test accuracy)."""
    from streamlearn import MulticlassSVM
    from streamlearn.service.mixing import MixState

    models = [MulticlassSVM() for _ in range(members)]
    shared = MixState.of(models[0])
    bases = [shared.copy() for _ in models]
    parts, done = shares(X.shape[0], members), [0] * members
    for i in turns(parts, every, schedule):
        rows = parts[i][done[i] : done[i] + every]
        if not len(rows):
            continue
        done[i] += len(rows)
        models[i].learn_many(X[rows], y[rows])
        shared.fold(bases[i].change(models[i], examples=len(rows)), weight=FOLDS[how](members))
        shared.write_into(models[i])
        bases[i] = shared.copy()
    final = MulticlassSVM()
    shared.write_into(final)
    return accuracy(final.predict_many(X_test), y_test)


def unmixed(X, y, X_test, y_test, members: int) -> float:
    """The mean test accuracy of ``members`` separate models, each on its share."""
    from streamlearn import MulticlassSVM

    scores = []
    for part in shares(X.shape[0], members):
        model = MulticlassSVM()
        model.learn_many(X[part], y[part])
        scores.append(accuracy(model.predict_many(X_test), y_test))
    return float(np.mean(scores))


PARTITIONS = 6
ROWS_PER_MESSAGE = 100


def daemons(bootstrap: str, topic: str, ends: dict, members: int, every: int, split, workdir, repeat: int = 0) -> dict:
    """Run ``members`` mixing daemons on ``topic`` and follow the mixing topic (see the module docstring)."""
    import json
    import subprocess
    import time

    from streamlearn.connectors.kafka_clients import create_topic
    from streamlearn.connectors.mixlog import MixLog
    from streamlearn import MulticlassSVM
    from streamlearn.service.mixing import Coverage, MixState

    group, total = f"mixing-{members}-{every}-{repeat}", sum(ends.values()) * ROWS_PER_MESSAGE
    create_topic(bootstrap, f"{group}-mix", exist_ok=True)
    broker = broker_pid(bootstrap)
    reader = MixLog(bootstrap, f"{group}-mix")
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "streamlearn", "train", f"kafka://{bootstrap}/{topic}?group={group}",
                               "--mix-topic", f"{group}-mix", "--mix-every", str(every), "--idle-timeout", "5", "--quiet",
                               "--dead-letter", str(workdir / f"{group}-{i}.jsonl")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(members)]
    coverage, accepted, curve, next_offset, covered = Coverage(), [], [], 0, 0

    def cpu() -> dict:  # CPU seconds so far of the daemons, the broker and this reader
        return {"daemons": sum(cpu_seconds(proc.pid) for proc in procs), "broker": cpu_seconds(broker),
                "reader": sum(os.times()[:2])}

    marks = {}  # at a quarter and three quarters of the stream: the time, the records covered and the CPU used
    try:
        while covered < total:
            if time.perf_counter() - started > 600:
                raise RuntimeError(f"{covered:,} of {total:,} records covered after 600 s")
            if all(proc.poll() is not None for proc in procs):
                raise RuntimeError(f"the daemons ended with {covered:,} of {total:,} records covered: "
                                   + procs[0].stderr.read()[-2000:])
            publications = reader.read(next_offset)
            for _, publication in publications:
                if coverage.accept(publication["ranges"]):
                    accepted.append(publication)
                    covered += int(publication["change"]["examples"])
                    curve.append((time.perf_counter() - started, covered))
                    for share in (0.25, 0.75):
                        if share not in marks and covered >= share * total:
                            marks[share] = (*curve[-1], cpu())
            next_offset = publications[-1][0] + 1 if publications else next_offset
            time.sleep(0.02)
    finally:
        reader.close()
    summaries = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(err[-2000:])
        summaries.append(json.loads(out.strip().splitlines()[-1]))
    shared, fifths, scores = MixState.of(MulticlassSVM()), [total * k // 5 for k in range(1, 6)], []
    folded = 0
    for publication in accepted:  # the shared model as the group built it, scored every fifth of the stream
        shared.fold(publication["change"])
        folded += int(publication["change"]["examples"])
        if fifths and folded >= fifths[0]:
            model = MulticlassSVM()
            shared.write_into(model)
            scores.append((folded, accuracy(model.predict_many(split.X_test), split.y_test)))
            fifths = [m for m in fifths if m > folded]

    (t1, c1, cpu1), (t2, c2, cpu2) = marks[0.25], marks[0.75]
    steady = (c2 - c1) / (t2 - t1) if t2 - t1 >= 0.5 else None  # a stream too short for a steady state: no figure
    cores_busy = {who: (cpu2[who] - cpu1[who]) / (t2 - t1) if t2 > t1 else None for who in cpu1}
    return {"daemons": members, "every": every, "repeat": repeat, "records": total, "seconds_to_all": curve[-1][0],
            "steady_examples_per_s": steady, "steady_cores_busy": cores_busy, "curve": curve, "accuracy_curve": scores,
            "accuracy": scores[-1][1],
            "learned_per_daemon": [s["learned"] for s in summaries],
            "mixing_share": [s["mixing"]["mix_seconds"] / s["elapsed_s"] for s in summaries],
            "bytes_per_change": sum(s["mixing"]["bytes_published"] for s in summaries)
            / max(1, sum(s["mixing"]["published"] for s in summaries)),
            "changes": len(accepted)}


def alone(bootstrap: str, topic: str, group: str) -> dict:
    """One daemon without mixing on the whole topic: its examples/s while records flowed."""
    import json
    import subprocess

    done = subprocess.run([sys.executable, "-m", "streamlearn", "train", f"kafka://{bootstrap}/{topic}?group={group}",
                           "--idle-timeout", "5", "--quiet", "--dead-letter", "/dev/null"], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    return {"learned": summary["learned"], "examples_per_s": summary["learned"] / summary["data_seconds"]}


def daemon_section(split, copies: int, members_grid, intervals, repeats: int, log) -> dict:
    import tempfile

    from streamlearn.connectors.compact import encode_messages
    brokers = broker_helpers()
    local_broker = brokers.local_broker
    produce = brokers.produce
    from streamlearn.connectors.kafka_clients import create_topic
    import scipy.sparse as sp

    order = np.random.default_rng(SEED).permutation(split.X_train.shape[0])
    X = sp.vstack([sp.csr_matrix(split.X_train[order])] * copies, format="csr")
    y = np.tile(np.asarray(split.y_train, np.int64)[order], copies)
    messages = list(encode_messages(X, y, rows_per_message=ROWS_PER_MESSAGE))
    ends = {p: len(range(p, len(messages), PARTITIONS)) for p in range(PARTITIONS)}
    out = {"records": int(X.shape[0]), "copies": copies, "partitions": PARTITIONS, "repeats": repeats, "runs": [],
           "alone_runs": []}
    with local_broker() as bootstrap, tempfile.TemporaryDirectory() as workdir:
        create_topic(bootstrap, "stream", PARTITIONS)
        produce(bootstrap, "stream", messages, partitions=PARTITIONS)
        for repeat in range(repeats):  # rounds of every setting, so that a slow spell of the machine hits them alike
            out["alone_runs"].append(alone(bootstrap, "stream", f"alone-{repeat}"))
            log(f"one daemon, no mixing: {out['alone_runs'][-1]}")
            for every in intervals:
                for members in members_grid:
                    row = daemons(bootstrap, "stream", ends, members, every, split, pathlib.Path(workdir), repeat)
                    out["runs"].append(row)
                    log(f"{members} daemons, --mix-every {every}: {row['seconds_to_all']:.1f} s to all, "
                        f"{_fmt(row['steady_examples_per_s'], ',.0f')} ex/s steady, accuracy {row['accuracy']:.4f}, "
                        f"cores busy {row['steady_cores_busy']}, mixing share {row['mixing_share']}")
    out["alone"] = {"examples_per_s": statistics.median(r["examples_per_s"] for r in out["alone_runs"])}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6,000 training rows, two members, two intervals")
    parser.add_argument("--out", default=str(RESULTS), help="folder for scaleout.{json,md,png}")
    parser.add_argument("--only", choices=["mixing", "daemons"], action="append",
                        help="one section (repeatable; the other's results are kept from the existing file)")
    parser.add_argument("--copies", type=int, default=10, help="daemons: copies of the MNIST training rows in the topic")
    parser.add_argument("--repeats", type=int, default=3, help="daemons: runs of every setting (medians reported)")
    parser.add_argument("--mix-every", default="2000,10000", help="daemons: the --mix-every values to run (comma-separated)")
    args = parser.parse_args(argv)
    sections = args.only or ["mixing", "daemons"]
    path = pathlib.Path(args.out) / "scaleout.json"
    previous = json.loads(path.read_text()) if path.exists() and not args.quick else {}
    from streamlearn import MulticlassSVM

    split = load("mnist")
    order = np.random.default_rng(SEED).permutation(split.X_train.shape[0])
    X, y = split.X_train[order], split.y_train[order]
    X_test, y_test = split.X_test, split.y_test
    if args.quick:
        X, y, X_test, y_test = X[:6000], y[:6000], X_test[:2000], y_test[:2000]
    members_grid, intervals = ((2,), (500, 2000)) if args.quick else ((2, 3), (500, 2000, 10_000))
    results = {**previous, "machine": machine(), "data": "mnist"}
    provenance = results.setdefault("provenance", {})
    for section in ("mixing", "daemons"):  # each section keeps the run that made it
        if section in sections:
            provenance[section] = results["machine"]
        elif previous:
            provenance.setdefault(section, previous["machine"])

    def log(text):
        print(text, file=sys.stderr, flush=True)

    if "mixing" in sections:
        one = MulticlassSVM()
        one.learn_many(X, y)
        results.update({"rows": int(X.shape[0]), "one_learner": accuracy(one.predict_many(X_test), y_test), "by_members": {}})
        for members in members_grid:
            row = {"unmixed": unmixed(X, y, X_test, y_test, members)}
            for schedule in SCHEDULES:
                row[schedule] = {how: {str(every): mixed(X, y, X_test, y_test, members, every, how, schedule)
                                       for every in intervals} for how in FOLDS}
            results["by_members"][str(members)] = row
            log(f"{members} members: {row}")
    if "daemons" in sections:
        daemon_split = split if not args.quick else type(split)(split.name, split.X_train[:6000], split.y_train[:6000],
                                                                 split.X_test[:2000], split.y_test[:2000])
        results["daemons"] = daemon_section(daemon_split, 1 if args.quick else args.copies, (2,) if args.quick else (1, 2, 3),
                                            (500,) if args.quick else [int(e) for e in args.mix_every.split(",")],
                                            1 if args.quick else args.repeats, log)
    print(save_results(args.out, "scaleout", results, report, plot))
    return 0


def report(results: dict) -> str:
    lines = report_mixing(results) if "by_members" in results else []
    if "daemons" in results:
        lines += report_daemons(results)
    return "\n".join(lines) + "\n"


def report_daemons(results: dict) -> list[str]:
    section = results["daemons"]
    settings = sorted({(row["every"], row["daemons"]) for row in section["runs"]})

    def median(every: int, daemons: int, value) -> float | None:
        values = [value(row) for row in section["runs"] if (row["every"], row["daemons"]) == (every, daemons)]
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    def rate(row):
        return row["steady_examples_per_s"]

    lines = ["", "## Daemons on a broker", "",
             f"Commit {_made_by(results, 'daemons')}. {section['records']:,} records ({section['copies']} cop{'y' if section['copies'] == 1 else 'ies'} of the "
             f"MNIST training rows) on {section['partitions']} partitions; medians of {section.get('repeats', 1)} runs "
             f"of each setting, in rounds (every run in `scaleout.json`). One daemon without mixing learns "
             f"**{section['alone']['examples_per_s']:,.0f}** examples/s while records flow. *Cores busy*: CPU seconds "
             "per second between a quarter and three quarters of the stream, of the daemons, the broker and the "
             "benchmark's reader of the mixing topic (this machine has 2).", "",
             "| `--mix-every` | daemons | seconds to all | steady examples/s (runs) | × 1 mixing daemon | "
             "× 1 daemon without mixing | cores busy: daemons + broker + reader | test accuracy % | "
             "mixing share of time | bytes per change | changes |",
             "|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|"]
    for every, daemons in settings:
        steady, one = median(every, daemons, rate), median(every, 1, rate)
        runs = ", ".join(_fmt(rate(r), ",.0f") for r in section["runs"] if (r["every"], r["daemons"]) == (every, daemons))
        busy = {who: median(every, daemons, lambda r, who=who: (r.get("steady_cores_busy") or {}).get(who))
                for who in ("daemons", "broker", "reader")}
        busy_text = " + ".join(_fmt(busy[who], ".2f") for who in ("daemons", "broker", "reader"))
        if all(v is not None for v in busy.values()):
            busy_text += f" = {sum(busy.values()):.2f}"
        share = median(every, daemons, lambda r: statistics.mean(r["mixing_share"]))
        lines.append(f"| {every:,} | {daemons} | {median(every, daemons, lambda r: r['seconds_to_all']):.1f} | "
                     f"{_fmt(steady, ',.0f')} ({runs}) | {_fmt(steady / one if steady and one else None, '.2f')} | "
                     f"{_fmt(steady / section['alone']['examples_per_s'] if steady else None, '.2f')} | {busy_text} | "
                     f"{100 * median(every, daemons, lambda r: r['accuracy']):.2f} | {100 * share:.1f} % | "
                     f"{median(every, daemons, lambda r: r['bytes_per_change']):,.0f} | "
                     f"{median(every, daemons, lambda r: r['changes']):.0f} |")
    return lines


def _made_by(results: dict, section: str) -> str:
    """The commit (and command) of the run that made ``section``."""
    run = results.get("provenance", {}).get(section, results["machine"])
    return f"{run['commit'][:10]}{' (uncommitted changes)' if run.get('uncommitted_changes') else ''}, `{run['command']}`"


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def report_mixing(results: dict) -> list[str]:
    intervals = list(next(iter(results["by_members"].values()))[SCHEDULES[0]]["1/N"])
    lines = ["# Scaling out", "", "## Mixing in one process", "",
             f"Commit {_made_by(results, 'mixing')} (protocol in the benchmark's docstring). "
             f"MNIST, {results['rows']:,} training rows, one pass, `MulticlassSVM()`; test accuracy %. One learner on the "
             f"whole stream: **{100 * results['one_learner']:.2f}**.", "",
             "| members | schedule | fold | " + " | ".join(f"change every {int(e):,} rows" for e in intervals) + " |",
             "|---:|---|---|" + "---:|" * len(intervals)]
    for members, row in results["by_members"].items():
        for schedule in SCHEDULES:
            for how in FOLDS:
                lines.append(f"| {members} | {schedule} | {how} | "
                             + " | ".join(f"{100 * row[schedule][how][e]:.2f}" for e in intervals) + " |")
        lines.append(f"| {members} | | unmixed (mean of {members} models) | " + " | ".join(
            f"{100 * row['unmixed']:.2f}" for _ in intervals) + " |")
    return lines


def plot(results: dict, path) -> None:
    plt = pyplot()

    fig, axes = plt.subplots(1, 4, figsize=(24, 4))
    *schedules, flow, learned = axes
    for row in results.get("daemons", {}).get("runs", []):
        if row.get("repeat", 0):  # the first round of runs stands for the others
            continue
        label = f"{row['daemons']} daemon(s), --mix-every {row['every']:,}"
        flow.plot([t for t, _ in row["curve"]], [c for _, c in row["curve"]], "-", label=label)
        learned.plot([n for n, _ in row["accuracy_curve"]], [100 * a for _, a in row["accuracy_curve"]], "-o", label=label)
    flow.set_xlabel("seconds since the daemons started")
    flow.set_ylabel("records in the shared model")
    flow.set_title("daemons mixing through Kafka")
    flow.legend(fontsize=8)
    learned.set_xlabel("records in the shared model")
    learned.set_ylabel("test accuracy % of the shared model")
    learned.set_title("accuracy against examples")
    learned.legend(fontsize=8)
    for ax, schedule in zip(schedules, SCHEDULES):
        for members, row in results.get("by_members", {}).items():
            intervals = [int(e) for e in row[schedule]["1/N"]]
            for how, style in zip(FOLDS, ("-o", "-.s", "--x")):
                ax.plot(intervals, [100 * row[schedule][how][str(e)] for e in intervals], style, label=f"{members} members, {how}")
        if "one_learner" in results:
            ax.axhline(100 * results["one_learner"], color="black", label="one learner")
            ax.set_ylim(100 * results["one_learner"] - 6, 100 * results["one_learner"] + 1)
        ax.set_xscale("log")
        ax.set_xlabel("rows each member learns between mixes")
        ax.set_ylabel("test accuracy %, one pass")
        ax.set_title(f"mixing in one process: members {schedule}")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
