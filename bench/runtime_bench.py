"""End-to-end benchmark of the stream runtime (issue 3), in one run:

1. ``streamlearn train FILE`` on news20 and MNIST in LIBSVM text against Vowpal Wabbit
   reading the same examples in its own text format through its own driver
   (``python -m vowpalwabbit -d FILE --oaa K``); both as subprocesses, wall time measured
   from outside, medians of interleaved repeats. Two stream lengths: the training file as
   is, and the file repeated (a longer stream, where start-up is amortised). Start-up alone
   is measured on a one-line file and reported.
2. The Kafka daemon: the training records on a local Tansu broker in each wire format (msgpack
   lists of 100 dict records; compact CSR batches of 250 records), consumed by ``streamlearn
   train kafka://...`` at the default checkpoint cadence, against ``streamlearn train FILE`` on
   the same records at the same cadence: sustained examples/s while data flows, the share of
   that time spent checkpointing, and the broker's CPU.

    python -m bench.runtime_bench [--repeats 5] [--copies 8] [--kafka-seconds 40] [--only files|kafka]
    python -m bench.runtime_bench --quick --out /tmp/smoke   # a smoke run (the test suite's)

Results: bench/results/runtime.{json,md}, runtime.png, runtime_kafka.png.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from bench.common import broker_pid, cpu_seconds, machine, pyplot, broker_helpers
from bench.data import CACHE, load

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
WORK = CACHE / "runtime"


def _libsvm_text(X, labels, vw: bool = False) -> str:
    """Rows as LIBSVM (or VW) text lines, values to 6 significant digits."""
    lines = []
    for i in range(X.shape[0]):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        feats = " ".join(f"{j}:{v:.6g}" for j, v in zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist()))
        lines.append(f"{labels[i]} {'| ' if vw else ''}{feats}\n")
    return "".join(lines)


def write_texts(name: str, copies: int) -> dict:
    """The training part as LIBSVM and VW text (same rows, same order), once and repeated."""
    split = load(name)
    X, y = split.X_train, split.y_train
    labels = y - y.min() + 1  # VW's --oaa wants 1..K
    files = {}
    WORK.mkdir(parents=True, exist_ok=True)
    for reps, tag in ((1, "x1"), (copies, f"x{copies}")):
        svm, vw = WORK / f"{name}.{tag}.svm", WORK / f"{name}.{tag}.vw"
        if not svm.exists() or not vw.exists():
            svm.write_text(_libsvm_text(X, labels) * reps)
            vw.write_text(_libsvm_text(X, labels, vw=True) * reps)
        files[tag] = {"svm": svm, "vw": vw, "examples": X.shape[0] * reps}
    tiny_svm, tiny_vw = WORK / "tiny.svm", WORK / "tiny.vw"
    tiny_svm.write_text("1 1:1\n")
    tiny_vw.write_text("1 | 1:1\n")
    files["startup"] = {"svm": tiny_svm, "vw": tiny_vw, "examples": 1}
    files["n_classes"] = int(len(np.unique(y)))
    return files


def run_ours(path, extra=()) -> tuple[float, dict]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "streamlearn.service.cli", "train", str(path), "--learner", "MulticlassSVM",
                          "--quiet", *extra], capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - start, json.loads(out.strip().splitlines()[-1])


def run_vw(path, n_classes: int) -> tuple[float, float]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "vowpalwabbit", "-d", str(path), "--oaa", str(n_classes)],
                            capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - start
    loss = re.search(r"average loss = ([\d.]+)", result.stdout + result.stderr)
    return seconds, 1.0 - float(loss.group(1)) if loss else float("nan")


def file_benchmark(name: str, repeats: int, copies: int) -> dict:
    files = write_texts(name, copies)
    K = files["n_classes"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        times = {key: [] for key in ("ours", "ours_ckpt", "vw")}
        stats = {}
        for tag in ("startup", "x1", f"x{copies}"):
            t = {k: [] for k in times}
            for r in range(repeats):
                seconds, summary = run_ours(files[tag]["svm"])
                t["ours"].append(seconds)
                stats[(tag, "ours")] = summary["prequential"]["accuracy"]
                ck = pathlib.Path(tmp) / f"{tag}-{r}"
                seconds, summary = run_ours(files[tag]["svm"], ["--checkpoint-dir", str(ck)])
                t["ours_ckpt"].append(seconds)
                seconds, acc = run_vw(files[tag]["vw"], K)
                t["vw"].append(seconds)
                stats[(tag, "vw")] = acc
            rows[tag] = {
                "examples": files[tag]["examples"],
                **{f"{k}_seconds": statistics.median(v) for k, v in t.items()},
                **{f"{k}_all_seconds": v for k, v in t.items()},
                "ours_prequential_accuracy": stats[(tag, "ours")],
                "vw_progressive_accuracy": stats[(tag, "vw")],
            }
    short, long = rows["x1"], rows[f"x{copies}"]
    for row in (short, long):
        for k in ("ours", "ours_ckpt", "vw"):
            row[f"{k}_examples_per_s"] = row["examples"] / row[f"{k}_seconds"]
        row["ratio_end_to_end"] = row["ours_examples_per_s"] / row["vw_examples_per_s"]
    marginal = {}  # examples/s of the extra (copies - 1) passes: start-up cancels out
    for k in ("ours", "ours_ckpt", "vw"):
        extra = long[f"{k}_seconds"] - short[f"{k}_seconds"]
        marginal[k] = (long["examples"] - short["examples"]) / extra if extra > 0 else float("nan")
    marginal["ratio"] = marginal["ours"] / marginal["vw"]
    return {"dataset": name, "classes": K, "copies": copies, "rows": rows, "marginal_examples_per_s": marginal}


WIRES = {"dicts": "msgpack lists of 100 dict records", "compact": "compact CSR batches of 250 records (streamlearn.connectors.compact)"}


def _wire_messages(X, y, wire: str) -> list:
    from streamlearn.connectors.compact import encode_messages
    from streamlearn.connectors.kafka import encode_value

    if wire == "compact":
        return list(encode_messages(X, y, rows_per_message=250))  # ~260 kB: under the 1 MB message limit brokers default to
    messages = []
    for start in range(0, X.shape[0], 100):
        batch = []
        for i in range(start, min(start + 100, X.shape[0])):
            lo, hi = X.indptr[i], X.indptr[i + 1]
            batch.append({"x": dict(zip(map(str, X.indices[lo:hi].tolist()), X.data[lo:hi].tolist())), "y": int(y[i])})
        messages.append(encode_value(batch))
    return messages


def _broker_cpu_seconds(bootstrap: str) -> float:
    """CPU seconds the Tansu process listening on ``bootstrap`` has used."""
    pid = broker_pid(bootstrap)
    return float("nan") if pid is None else cpu_seconds(pid)


CLIENTS = ("kafka-python", "confluent")


def kafka_benchmark(name: str, seconds: float, wires=tuple(WIRES), clients=CLIENTS, probe: bool = True) -> dict:
    """Sustained daemon throughput at the default checkpoint cadence for each wire format,
    against ``streamlearn train FILE`` on the same records (a LIBSVM file of the same copies)
    with the same cadence, in the same run; the checkpoint share and the broker's CPU share.
    ``probe=False`` (a smoke run): four copies of the records, without measuring first how many
    make ``seconds`` of learning."""
    brokers = broker_helpers()
    create_topic = brokers.create_topic
    local_broker = brokers.local_broker
    produce = brokers.produce

    split = load(name)
    X, y = split.X_train.copy(), split.y_train - split.y_train.min() + 1
    X.data = np.array([float(f"{v:.6g}") for v in X.data.tolist()])  # the values write_texts writes: the same records
    out = {"dataset": name, "seconds": seconds, "wires": {}}
    copies = 1
    with local_broker() as bootstrap, tempfile.TemporaryDirectory() as tmp:
        for wire in wires:
            topic = f"bench-{wire}"
            messages = _wire_messages(X, y, wire)
            create_topic(bootstrap, topic)
            for _ in range(4):  # measure how fast the daemon goes, then produce enough data for `seconds` of learning
                produce(bootstrap, topic, messages)
            wanted = 4
            if probe:
                rate = max(_rate(_daemon(bootstrap, topic, f"probe-{client}", tmp, 2, client)) for client in clients)
                wanted = max(4, int(np.ceil(seconds * rate / X.shape[0])))
            for _ in range(wanted - 4):
                produce(bootstrap, topic, messages)
            copies = max(copies, wanted)
            for client in clients:
                cpu = _broker_cpu_seconds(bootstrap)
                summary = _daemon(bootstrap, topic, f"main-{client}", tmp, 3, client)
                out["wires"][f"{wire} / {client}"] = {**_sustained(summary), "copies": wanted,
                                                      "broker_cpu_seconds": _broker_cpu_seconds(bootstrap) - cpu}
        path = os.path.join(tmp, "records.svm")  # in the run's temporary directory: gigabytes, used once
        one_copy = _libsvm_text(split.X_train, y)
        with open(path, "w") as f:
            for _ in range(copies):
                f.write(one_copy)
        summary = json.loads(subprocess.run(
            [sys.executable, "-m", "streamlearn.service.cli", "train", str(path), "--learner", "MulticlassSVM",
             "--checkpoint-dir", os.path.join(tmp, "file"), "--checkpoint-every", str(10**12), "--checkpoint-interval", "10",
             "--quiet"], capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])
        out["file"] = {**_sustained(summary), "copies": copies}
    return out


def median_runs(runs: list) -> dict:
    """One Kafka result whose figures are the medians over ``runs`` (all kept under ``"runs"``)."""
    def middle(rows: list) -> dict:
        return {key: statistics.median(r[key] for r in rows) if isinstance(rows[0][key], (int, float)) else rows[0][key]
                for key in rows[0]}

    return {**runs[0], "repeats": len(runs), "wires": {w: middle([r["wires"][w] for r in runs]) for w in runs[0]["wires"]},
            "file": middle([r["file"] for r in runs]), "runs": runs}


def _rate(summary: dict) -> float:
    return summary["learned"] / max(summary["data_seconds"], 1e-3)


def _sustained(summary: dict) -> dict:
    data_s = summary["data_seconds"]
    return {"records": summary["learned"], "data_seconds": data_s, "examples_per_s": summary["learned"] / data_s,
            "checkpoints": summary["checkpoints"], "checkpoint_seconds_during_data": summary["checkpoint_seconds_during_data"],
            "checkpoint_share": summary["checkpoint_seconds_during_data"] / data_s,
            "prequential_accuracy": summary["prequential"]["accuracy"]}


def _daemon(bootstrap, topic, group, tmp, idle, client) -> dict:
    """``streamlearn train kafka://...`` at the default checkpoint cadence until the topic is idle."""
    out = subprocess.run([sys.executable, "-m", "streamlearn.service.cli", "train",
                          f"kafka://{bootstrap}/{topic}?group={group}&client={client}",
                          "--learner", "MulticlassSVM", "--checkpoint-dir", os.path.join(tmp, f"{topic}-{group}"),
                          "--idle-timeout", str(idle), "--quiet"], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def write_report(results: dict, out: pathlib.Path) -> None:
    lines = ["# Stream runtime benchmark (issue 3)", "",
             f"Machine: {os.cpu_count()} cores; medians of {results['repeats']} interleaved repeats; wall time of the whole command.",
             "`ours` = `streamlearn train FILE --learner MulticlassSVM` (default 1000-record batches; each example scored by the",
             "model as it stands when it arrives, then learned, as VW's progressive loss; the default λ, not a validated one);",
             "`ours+ckpt` adds `--checkpoint-dir` (checkpoint every 10,000 examples, dead letters and metrics files);",
             "`VW` = `python -m vowpalwabbit -d FILE --oaa K` on the same rows in VW text. `xN` is the training file",
             "repeated N times (one longer stream). *Marginal* is the throughput of the extra copies,",
             "(examples(xN) - examples(x1)) / (time(xN) - time(x1)): start-up cancels out.", "",
             "| data | examples | ours s | ours+ckpt s | VW s | ours ex/s | VW ex/s | ours / VW | prequential acc. ours / VW |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for entry in results["files"]:
        for tag, row in entry["rows"].items():
            if tag == "startup":
                continue
            lines.append(
                f"| {entry['dataset']} {tag} | {row['examples']:,} | {row['ours_seconds']:.2f} | {row['ours_ckpt_seconds']:.2f} | "
                f"{row['vw_seconds']:.2f} | {row['ours_examples_per_s']:,.0f} | {row['vw_examples_per_s']:,.0f} | "
                f"{row['ratio_end_to_end']:.2f}x | "
                f"{100 * row['ours_prequential_accuracy']:.2f} / {100 * row['vw_progressive_accuracy']:.2f} |")
        m = entry["marginal_examples_per_s"]
        lines.append(f"| {entry['dataset']} marginal | | | | | {m['ours']:,.0f} | {m['vw']:,.0f} | {m['ratio']:.2f}x | |")
    if results["files"]:
        start = results["files"][0]["rows"]["startup"]
        lines += ["", f"Start-up (one-line file): ours {start['ours_seconds']:.2f} s, VW {start['vw_seconds']:.2f} s.", ""]
    if results.get("kafka"):
        k = results["kafka"]
        file_rate = k["file"]["examples_per_s"]
        lines += ["## Kafka daemon", "",
                  f"{k['dataset']}: the training records (repeated to about {k['seconds']:.0f} s of learning each) on a local "
                  "Tansu broker, consumed by "
                  "`streamlearn train kafka://...` at the default checkpoint cadence, against `streamlearn train FILE` "
                  "on the same records as LIBSVM text (6 significant digits, the values the messages carry) at Kafka's "
                  f"default cadence (every 10 s), in the same run; medians of {k.get('repeats', 1)} runs, each with a fresh broker"
                  + (f", at commit {k['machine']['commit'][:10]}. " if "machine" in k else ". ")
                  + "*Broker CPU* is the Tansu process's CPU seconds over the daemon's data time.", "",
                  "| path | records | sustained ex/s | of the file path | data flowing (s) | checkpoints | checkpoint share "
                  "| broker CPU | prequential acc. |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        rows = [(f"Kafka {key.split(' / ')[1]}, {WIRES[key.split(' / ')[0]]}", r) for key, r in k["wires"].items()]
        for wire, row in rows + [("file (LIBSVM text)", k["file"])]:
            broker = f"{100 * row['broker_cpu_seconds'] / row['data_seconds']:.0f} %" if "broker_cpu_seconds" in row else ""
            lines.append(f"| {wire} | {row['records']:,} | {row['examples_per_s']:,.0f} | {100 * row['examples_per_s'] / file_rate:.0f} % | "
                         f"{row['data_seconds']:.1f} | {row['checkpoints']} | {100 * row['checkpoint_share']:.1f} % | {broker} | "
                         f"{100 * row['prequential_accuracy']:.2f} |")
        lines.append("")
    (out / "runtime.md").write_text("\n".join(lines))


def plot(results: dict, out: pathlib.Path) -> None:
    plt = pyplot()

    labels, ours, ours_ck, vw = [], [], [], []
    for entry in results["files"]:
        for tag, row in entry["rows"].items():
            if tag != "startup":
                labels.append(f"{entry['dataset']} {tag}")
                ours.append(row["ours_examples_per_s"])
                ours_ck.append(row["ours_ckpt_examples_per_s"])
                vw.append(row["vw_examples_per_s"])
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(x - 0.27, ours, 0.27, label="streamlearn train")
    ax.bar(x, ours_ck, 0.27, label="streamlearn train + checkpoints")
    ax.bar(x + 0.27, vw, 0.27, label="vowpalwabbit --oaa")
    ax.set_xticks(x, labels)
    ax.set_ylabel("examples/s, end to end (median)")
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "runtime.png", dpi=110)
    plt.close(fig)
    if results.get("kafka"):
        plot_kafka(results["kafka"], out)


def plot_kafka(k: dict, out: pathlib.Path) -> None:
    """Sustained examples/s of each Kafka wire format and client against the file path."""
    plt = pyplot()
    labels = [key.replace(" / ", "\n") for key in k["wires"]] + ["file\n(LIBSVM text)"]
    rates = [row["examples_per_s"] for row in k["wires"].values()] + [k["file"]["examples_per_s"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(range(len(rates)), rates, color=["C0"] * len(k["wires"]) + ["C2"])
    for x, rate in enumerate(rates):
        ax.text(x, rate, f"{rate / 1000:.0f}K", ha="center", va="bottom")
    ax.set_xticks(range(len(rates)), labels)
    ax.set_ylabel("examples/s sustained, checkpoints every 10 s")
    ax.set_title(f"{k['dataset']}: the Kafka daemon against the file path, same records (medians of {k.get('repeats', 1)} runs)")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "runtime_kafka.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=["news20", "mnist"])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--copies", type=int, default=8, help="the longer stream repeats the file this many times")
    parser.add_argument("--kafka-seconds", type=float, default=40.0, help="target length of the Kafka run (0: skip)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--only", choices=["files", "kafka"], help="run one section, keep the other's results")
    parser.add_argument("--kafka-repeats", type=int, default=3, help="Kafka runs (each with a fresh broker); medians reported")
    parser.add_argument("--report-only", action="store_true", help="rewrite runtime.md and the plots from runtime.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: news20, one repeat, two copies, 5 s of Kafka")
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.repeats, args.copies, args.kafka_seconds, args.kafka_repeats = ["news20"], 1, 2, 5.0, 1
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    previous = out / "runtime.json"
    if args.report_only:
        results = json.loads(previous.read_text())
        write_report(results, out)
        plot(results, out)
        return
    results = json.loads(previous.read_text()) if args.only and previous.exists() else {"files": [], "kafka": None}
    if args.only != "kafka" or "machine" not in results:  # the machine block (commit, versions): the files section's run
        results.update({"machine": machine(), "repeats": args.repeats})
    if args.only != "kafka":
        results["files"] = []
    for name in args.datasets if args.only != "kafka" else ():
        print(f"files: {name}", file=sys.stderr)
        results["files"].append(file_benchmark(name, args.repeats, args.copies))
    if args.kafka_seconds > 0 and args.only != "files":
        print("kafka", file=sys.stderr)
        runs = [kafka_benchmark(args.datasets[0], args.kafka_seconds, probe=not args.quick) for _ in range(args.kafka_repeats)]
        results["kafka"] = {**median_runs(runs), "machine": machine()}
    (out / "runtime.json").write_text(json.dumps(results, indent=1, default=str))
    write_report(results, out)
    plot(results, out)
    print((out / "runtime.md").read_text())


if __name__ == "__main__":
    main()
