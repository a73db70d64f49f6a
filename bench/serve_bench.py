"""The HTTP service (issue 30): ``streamlearn serve`` under load from wrk, against in-process
``predict_many`` on the same records, in one run.

A ``MulticlassSVM`` learns news20 (one pass, checkpoints in a directory); ``streamlearn serve``
serves that directory on loopback. Measured:

* ``POST /predict`` with one record and with 1,000 records per request, at 1, 8 and 64 open
  connections, ``--seconds`` each, three interleaved runs of each (wrk, Debian's package: not our
  load generator): medians of requests/s, records/s and latency percentiles;
* in-process ``predict_many`` on the same 1,000 records (median of repeats): records/s, and the
  HTTP batch throughput as a share of it;
* single records paced near 1,000 requests/s (wrk's ``delay()``: 8 connections, ``PACE_MS`` between a
  connection's requests), in the same interleaved repeats: the median latency percentiles at that rate;
* beside each wrk row, the service's own p99 (its Prometheus histogram: from the request read to
  the answer written, to the bucket): wrk's latencies include its own scheduling on the same two
  cores;
* a hot reload under load: single-record requests at 8 connections while a new checkpoint
  lands in the directory, against the same run without one: the slowest request, the reload's
  own time (load and swap, in the service's log) and the service's memory before and after.

``--quick``: 1-second runs, 1 and 8 connections (a smoke run; its figures mean nothing). Without
wrk on the machine only the in-process rows are measured, and the report says so.

Usage::

    python -m bench.serve_bench [--seconds 10] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench.common import machine, pyplot
from bench.data import load

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}
#: wrk's pause between a connection's requests in the paced run: 8 connections at about 1,000 requests/s
PACE_MS = 5


def _seconds(text: str) -> float:
    number, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(number) * _UNITS[unit]


def parse_wrk(output: str) -> dict:
    """Requests/s, the latency percentiles and the slowest request from ``wrk --latency``'s report."""
    out = {"requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))}
    for pct in ("50", "75", "90", "99"):
        out[f"p{pct}_s"] = _seconds(re.search(rf"^\s+{pct}%\s+(\S+)", output, re.M).group(1))
    out["max_s"] = _seconds(re.search(r"Latency\s+\S+\s+\S+\s+(\S+)", output).group(1))
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    out["non_2xx"] = int(errors.group(1)) if errors else 0
    return out


def _wrk_command(url: str, script_dir: pathlib.Path, body_file: str, connections: int, seconds: float,
                 delay_ms: float | None = None) -> list:
    """wrk's command line for ``POST url`` with the body of ``body_file`` (its Lua script written
    into ``script_dir``); ``delay_ms``: each connection waits that long between its requests."""
    script = script_dir / f"post-{connections}-{delay_ms}.lua"
    script.write_text('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                      f'wrk.body = io.open("{body_file}"):read("*a")\n'
                      + (f"function delay() return {delay_ms} end\n" if delay_ms is not None else ""))
    return ["wrk", "-t", str(min(connections, 2)), "-c", str(connections), "-d", f"{max(1, round(seconds))}s", "--latency", "-s", str(script), url]


def settle(url: str, deadline_s: float = 30.0) -> None:
    """Until the service answers ``/healthz`` three times in a row within 5 ms: a run must not start
    while the service still answers the requests the previous run left queued (64 connections of
    1,000-record requests leave seconds of them)."""
    import urllib.error
    import urllib.request

    quick, deadline = 0, time.monotonic() + deadline_s
    while quick < 3 and time.monotonic() < deadline:
        started = time.perf_counter()
        try:
            urllib.request.urlopen(url.replace("/predict", "/healthz"), timeout=30).read()
        except urllib.error.HTTPError:  # a 503 (a checkpoint past --max-age) is an answer too
            pass
        quick = quick + 1 if time.perf_counter() - started < 0.005 else 0
        time.sleep(0.05)


def server_buckets(url: str) -> dict:
    """The service's own ``/predict`` latency histogram (cumulative counts by upper bound, seconds)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url.replace("/predict", "/metrics"), timeout=30).read().decode()
    return {float(s.labels["le"]): s.value for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == "streamlearn_request_seconds_bucket" and s.labels.get("endpoint") == "predict"}


def server_p99(before: dict, after: dict) -> float:
    """The 99th percentile of the requests between two histograms, as its bucket's upper bound."""
    counts = {le: after[le] - before.get(le, 0.0) for le in sorted(after)}
    total = counts[float("inf")]
    return next(le for le, n in counts.items() if n >= 0.99 * total)


def wrk(url: str, script_dir: pathlib.Path, body_file: str, connections: int, seconds: float, delay_ms: float | None = None) -> dict:
    """One wrk run (see :func:`_wrk_command`), parsed, with the service's own p99 for the same requests
    (time from the request read to the answer written, to the histogram's bucket)."""
    command = _wrk_command(url, script_dir, body_file, connections, seconds, delay_ms)
    settle(url)
    before = server_buckets(url)
    row = parse_wrk(subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60).stdout)
    row["server_p99_bucket_s"] = server_p99(before, server_buckets(url))
    return row


def _records(X, n: int) -> list[dict]:
    """The first ``n`` rows as feature dicts keyed by the LIBSVM index (the model's names)."""
    out = []
    for i in range(n):
        lo, hi = X.indptr[i], X.indptr[i + 1]
        out.append(dict(zip(X.indices[lo:hi].tolist(), X.data[lo:hi].tolist())))
    return out


def _rss_kib(pid: int) -> int:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _train(split, directory: pathlib.Path, rows: int) -> None:
    """``streamlearn train`` on the first ``rows`` training rows into ``directory``."""
    from bench.runtime_bench import _libsvm_text

    text = directory.parent / f"train{rows}.svm"
    text.write_text(_libsvm_text(split.X_train[:rows], split.y_train[:rows]))
    subprocess.run([sys.executable, "-m", "streamlearn.service.cli", "train", str(text), "--checkpoint-dir", str(directory), "--quiet",
                    "--overwrite"], check=True, capture_output=True)


def _start_service(directory) -> subprocess.Popen:
    service = subprocess.Popen([sys.executable, "-m", "streamlearn.service.cli", "serve", "--checkpoint-dir", str(directory), "--port", "0",
                                "--max-body", str(16 << 20), "--reload-interval", "0.2"], stderr=subprocess.PIPE, text=True)
    service.url = service.stderr.readline().split()[2].rstrip("/")
    return service


def in_process(model, records, repeats: int) -> dict:
    """``predict_many`` on the records, after a warm-up call: the median time and records/s."""
    model.predict_many(records)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model.predict_many(records)
        times.append(time.perf_counter() - start)
    n = records.shape[0] if hasattr(records, "shape") else len(records)
    return {"records": n, "median_s": statistics.median(times), "records_per_s": n / statistics.median(times)}


def run(seconds: float, connections: tuple, repeats: int, wrk_repeats: int) -> dict:
    import streamlearn
    from streamlearn.service.checkpoint import CheckpointStore

    split = load("news20")
    out = {"dataset": "news20", "seconds": seconds, "wrk": shutil.which("wrk") is not None, "http": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        served = tmp / "served"
        _train(split, served, split.X_train.shape[0] // 2)
        model = streamlearn.learner_from_state(CheckpointStore(served).load_latest()["learner"])
        records = _records(split.X_test, 1000)
        out["in_process"] = in_process(model, records, repeats)
        out["in_process_csr"] = in_process(model, split.X_test[:1000], repeats)  # what a NumPy user would pass
        bodies = {"1 record": json.dumps({"x": {str(k): v for k, v in records[0].items()}}),
                  "1,000 records": json.dumps([{"x": {str(k): v for k, v in r.items()}} for r in records])}
        for name, body in bodies.items():
            (tmp / f"{len(body)}.json").write_text(body)
        if not out["wrk"]:
            return out
        service = _start_service(served)
        try:
            url = f"{service.url}/predict"
            runs: dict = {}
            single = str(tmp / f"{len(bodies['1 record'])}.json")
            wrk(url, tmp, single, 8, min(2.0, seconds))  # a warm-up, not reported: the first requests are slower
            for _ in range(wrk_repeats):  # interleaved repeats, medians reported (every run kept)
                runs.setdefault("paced", []).append(wrk(url, tmp, single, 8, seconds, delay_ms=PACE_MS))
                for name, body in bodies.items():
                    for c in connections:
                        row = wrk(url, tmp, str(tmp / f"{len(body)}.json"), c, seconds)
                        row["records_per_s"] = row["requests_per_s"] * (1000 if name.startswith("1,000") else 1)
                        runs.setdefault(f"{name}, {c} connections", []).append(row)
                        print(name, c, row, file=sys.stderr)
            medians = {key: {**{k: statistics.median(r[k] for r in rows) for k in rows[0]}, "runs": rows}
                       for key, rows in runs.items()}
            out["paced"] = medians.pop("paced")
            out["http"] = medians
            # hot reload under load: the same run with and without a new checkpoint arriving
            out["no_reload"] = wrk(url, tmp, single, 8, seconds)
            fresh = tmp / "fresh"
            _train(split, fresh, split.X_train.shape[0])
            newest = CheckpointStore(fresh).paths()[-1]
            rss_before = _rss_kib(service.pid)
            loader = subprocess.Popen(_wrk_command(url, tmp, single, 8, seconds), stdout=subprocess.PIPE, text=True)
            time.sleep(seconds / 3)
            target = served / f"ckpt-{int(CheckpointStore(served).paths()[-1].stem.split('-')[1]) + 1:012d}.slc"
            shutil.copy(newest, served / ".incoming")
            os.replace(served / ".incoming", target)  # atomically, as the trainer writes
            stdout, _ = loader.communicate(timeout=seconds + 60)
            out["reload"] = {**parse_wrk(stdout), "rss_before_kib": rss_before, "rss_after_kib": _rss_kib(service.pid)}
            start = time.perf_counter()
            streamlearn.learner_from_state(CheckpointStore(served).load(target)["learner"])
            out["reload"]["load_seconds_in_process"] = time.perf_counter() - start
        finally:
            service.terminate()
            service.communicate(timeout=30)
    return out


def screenshot(out: pathlib.Path) -> str | None:
    """The live page over a letter job (5 passes, a 10 % hold-out, a checkpoint every 1,500
    examples), drawn by headless Chromium into ``out/serve_page.png``; ``None`` without Chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        return None
    from streamlearn.datasets import path

    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp) / "letter"
        subprocess.run([sys.executable, "-m", "streamlearn.service.cli", "train", str(path("train")), "--passes", "5", "--holdout", "0.1",
                        "--checkpoint-dir", str(directory), "--checkpoint-every", "1500", "--quiet"], check=True, capture_output=True)
        service = _start_service(directory)
        try:
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=8000",
                            "--window-size=1200,1000", f"--screenshot={out / 'serve_page.png'}", f"{service.url}/"],
                           capture_output=True, timeout=120)
        finally:
            service.terminate()
            service.communicate(timeout=30)
    return str(out / "serve_page.png")


def write_report(results: dict, out: pathlib.Path) -> None:
    ip = results["in_process"]
    lines = ["# HTTP service benchmark (issue 30)", "",
             f"news20, `MulticlassSVM` learned on half the training rows; `streamlearn serve` on loopback, load from wrk "
             f"({results['seconds']:g} s per row). In-process `predict_many` on the same 1,000 records: "
             f"**{ip['records_per_s']:,.0f} records/s** (median of repeats) as feature dicts, the records the requests carry; "
             f"{results['in_process_csr']['records_per_s']:,.0f} records/s as one CSR matrix.", ""]
    if not results["wrk"]:
        lines += ["wrk was not found on this machine: no HTTP rows (`apt install wrk`).", ""]
    else:
        lines += [f"Medians of {len(next(iter(results['http'].values()))['runs'])} interleaved wrk runs per row.", "",
                  "| request | connections | requests/s | records/s | of in-process | p50 ms | p99 ms | max ms | service's p99 ≤ ms |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for key, row in results["http"].items():
            name, connections = key.split(", ")
            lines.append(f"| {name} | {connections.split()[0]} | {row['requests_per_s']:,.0f} | {row['records_per_s']:,.0f} | "
                         f"{100 * row['records_per_s'] / ip['records_per_s']:.0f} % | {1000 * row['p50_s']:.2f} | "
                         f"{1000 * row['p99_s']:.2f} | {1000 * row['max_s']:.1f} | {1000 * row['server_p99_bucket_s']:g} |")
        paced, still, reload = results["paced"], results["no_reload"], results["reload"]
        lines += ["", f"Single records paced by wrk (8 connections, {PACE_MS} ms between a connection's requests; medians of "
                  f"{len(paced['runs'])} interleaved runs): "
                  f"{paced['requests_per_s']:,.0f} requests/s, p50 {1000 * paced['p50_s']:.2f} ms, "
                  f"p99 **{1000 * paced['p99_s']:.2f} ms** (the service's own: ≤ {1000 * paced['server_p99_bucket_s']:g} ms), "
                  f"max {1000 * paced['max_s']:.1f} ms.", "",
                  f"Hot reload under load (single records, 8 connections): without a reload p99 {1000 * still['p99_s']:.2f} ms, "
                  f"slowest {1000 * still['max_s']:.1f} ms; with a new checkpoint arriving mid-run p99 {1000 * reload['p99_s']:.2f} ms, "
                  f"slowest {1000 * reload['max_s']:.1f} ms ({reload['requests_per_s']:,.0f} vs {still['requests_per_s']:,.0f} "
                  f"requests/s). Loading that checkpoint takes {1000 * reload['load_seconds_in_process']:.0f} ms (on the reload "
                  f"thread; requests keep the old model meanwhile). Service RSS {reload['rss_before_kib'] / 1024:.0f} MB before, "
                  f"{reload['rss_after_kib'] / 1024:.0f} MB after.", ""]
    (out / "serve.md").write_text("\n".join(lines))


def plot(results: dict, out: pathlib.Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    rows = results["http"]
    labels = [k.replace(" connections", " c").replace(" records", "").replace(" record", "") for k in rows]
    share = [r["records_per_s"] / results["in_process"]["records_per_s"] for r in rows.values()]
    axes[0].bar(range(len(rows)), share, color=["C0" if k.startswith("1 record") else "C1" for k in rows])
    axes[0].axhline(0.5, color="grey", ls="--", lw=1)
    axes[0].set_xticks(range(len(rows)), labels, rotation=30, ha="right")
    axes[0].set_ylabel("records/s, share of in-process predict_many")
    axes[1].bar(range(len(rows)), [1000 * r["p99_s"] for r in rows.values()], color="C2")
    axes[1].set_xticks(range(len(rows)), labels, rotation=30, ha="right")
    axes[1].set_ylabel("p99 latency (ms)")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle("streamlearn serve on news20 (wrk, loopback)")
    fig.tight_layout()
    fig.savefig(out / "serve.png", dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each wrk run")
    parser.add_argument("--repeats", type=int, default=20, help="in-process repeats")
    parser.add_argument("--wrk-repeats", type=int, default=3, help="runs of each wrk row (interleaved; medians reported)")
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1-second runs, 1 and 8 connections")
    args = parser.parse_args(argv)
    connections = (1, 8) if args.quick else (1, 8, 64)
    seconds = 1.0 if args.quick else args.seconds
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {"machine": machine(), **run(seconds, connections, 3 if args.quick else args.repeats, 1 if args.quick else args.wrk_repeats)}
    (out / "serve.json").write_text(json.dumps(results, indent=1, default=str))
    write_report(results, out)
    if results["wrk"]:
        plot(results, out)
    if not args.quick:
        screenshot(out)
    print((out / "serve.md").read_text())


if __name__ == "__main__":
    main()
