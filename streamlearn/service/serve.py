"""``streamlearn serve``: answer predictions over HTTP from the newest checkpoint of a
directory that a running ``streamlearn train`` writes, reloading each new checkpoint.

Endpoints (JSON in and out):

* ``POST /predict`` — one record ``{"x": {feature: value, ...}}`` or a list of them (a label,
  if present, is ignored; a key ``"17"`` names the integer feature 17 of a model that has it and
  no feature named ``"17"``, as one learned from LIBSVM does): ``{"prediction": label}`` or ``{"predictions": [...]}``; with
  ``?proba=1`` the probabilities of every class too. A malformed body, a value that is not a
  finite number, a body over ``max_body`` bytes: a 4xx answer with a message.
* ``GET /model`` — learner, parameters, classes, records learned, checkpoint path, sequence and age.
* ``GET /healthz`` — 200 with a model whose checkpoint is younger than ``max_age``; 503 before the
  first model is loaded and when the newest checkpoint is older than ``max_age``.
* ``GET /`` — a live page: the learning curves (prequential and held-out accuracy, throughput,
  dead letters over records learned, from ``GET /curves``) and the served model, redrawn every
  2 s with uPlot, which the package ships (``streamlearn/service/static``).
* ``GET /metrics`` — Prometheus text: requests by endpoint and status, latency histogram, model
  age, records learned, prequential accuracy and log-loss and dead letters from the last line of
  the directory's ``metrics.jsonl``, reloads and skipped (corrupt) checkpoints.

Hot reload: a thread looks at the directory every ``reload_interval`` seconds; a newer
checkpoint is loaded aside and swapped in with one reference assignment, so a request in flight
finishes on the model it started with and every answer comes from one whole checkpoint. A
corrupt newest checkpoint is skipped and reported (stderr, ``/metrics``), never served.

The HTTP stack is the standard library's ``ThreadingHTTPServer`` (one thread per connection):
no dependency, and a prediction's cost is in NumPy and the compiled kernels, which release the
GIL only partly, so an asynchronous server would not add throughput on the learner's side.

>>> import tempfile
>>> holder = ModelHolder(tempfile.mkdtemp())
>>> holder.current is None, holder.refresh()
(True, False)
"""

from __future__ import annotations

import contextlib
import json
import math
import pathlib
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from connectors.records import RecordError, check_record
from connectors.sinks import json_key

from .checkpoint import CheckpointStore, CorruptCheckpoint


#: seconds a connection may wait for the rest of a request (its headers, its body) or for the next
#: request before it is closed: a client that stalls costs a thread this long, not for ever
REQUEST_TIMEOUT = 30.0
#: the live page (``GET /``) and the chart library it draws with (uPlot, MIT licence, shipped as is)
STATIC = pathlib.Path(__file__).resolve().parent / "static"
STATIC_TYPES = {"index.html": "text/html; charset=utf-8", "uPlot.iife.min.js": "text/javascript",
                "uPlot.min.css": "text/css", "uPlot.LICENSE": "text/plain"}


class LoadedModel:
    """A learner restored from one checkpoint, with what ``/model`` reports about it."""

    def __init__(self, payload: dict):
        from .. import learner_from_state

        self.model = learner_from_state(payload["learner"])
        self.path = pathlib.Path(payload["path"])
        self.sequence = payload["sequence"]
        self.created = payload["created"]
        self.counters = payload["runner"]["counters"]
        self.info = {"learner": type(self.model).__name__, "params": self.model._get_params(),
                     "classes": [json_key(c) for c in self.model.classes], "records_learned": self.counters["learned"],
                     "checkpoint": str(self.path), "sequence": self.sequence, "created": self.created}


class ModelHolder:
    """The model being served: the newest intact checkpoint of ``directory`` (see the module docstring)."""

    def __init__(self, directory, log=None, metrics_path=None):
        self.store = CheckpointStore(directory)
        self.directory = pathlib.Path(directory)
        self.metrics_path = pathlib.Path(metrics_path) if metrics_path else self.directory / "metrics.jsonl"
        self.log = log or sys.stderr
        self.current: LoadedModel | None = None
        self.reloads = 0
        self.skipped: set[str] = set()  # corrupt checkpoints seen (each reported once)
        self._lock = threading.Lock()  # one refresh at a time
        self._curves = None  # ((size, mtime) of the metrics log, its columns)

    def refresh(self) -> bool:
        """Load the newest intact checkpoint if it is newer than the one served; whether it was."""
        with self._lock:
            for path in reversed(self.store.paths()):
                if self.current is not None and path == self.current.path:
                    return False
                if str(path) in self.skipped:
                    continue
                try:
                    payload = self.store.load(path)
                except CorruptCheckpoint as error:
                    self.skipped.add(str(path))
                    print(f"streamlearn serve: skipped {path.name}: {error}", file=self.log, flush=True)
                    continue
                except FileNotFoundError:  # dropped by the trainer's --keep while we looked
                    continue
                except OSError as error:  # unreadable: skipped as a damaged one is
                    self.skipped.add(str(path))
                    print(f"streamlearn serve: skipped {path.name}: {error.strerror or error}", file=self.log, flush=True)
                    continue
                payload["path"] = str(path)
                self.current = LoadedModel(payload)  # one assignment: requests in flight keep the model they took
                self.reloads += 1
                _settle_garbage()
                return True
            return False

    def watch(self, interval: float, stop: threading.Event) -> None:
        """Refresh every ``interval`` seconds until ``stop`` is set (the reload thread's loop)."""
        while not stop.wait(interval):
            try:
                self.refresh()
            except Exception as error:  # noqa: BLE001 - a bad file must not end the reload thread
                print(f"streamlearn serve: reload failed: {error}", file=self.log, flush=True)

    #: most points a curve of the live page gets (a long log is thinned evenly, its last line kept)
    MAX_POINTS = 5000

    def curves(self) -> dict:
        """The metrics log as columns for the live page: records learned, prequential and
        held-out accuracy (``null`` where absent), examples/s and dead letters per line."""
        path = self.metrics_path
        try:
            stat = path.stat()
        except OSError:
            return {key: [] for key in self._CURVES}
        if self._curves is None or self._curves[0] != (stat.st_size, stat.st_mtime_ns):
            lines = []
            with open(path, "rb") as f:
                for raw in f:
                    try:
                        lines.append(json.loads(raw))
                    except ValueError:  # a line being written
                        continue
            if len(lines) > self.MAX_POINTS:
                step = -(-len(lines) // self.MAX_POINTS)
                lines = lines[::step] + ([lines[-1]] if (len(lines) - 1) % step else [])
            columns = {key: [get(line) for line in lines] for key, get in self._CURVES.items()}
            self._curves = ((stat.st_size, stat.st_mtime_ns), columns)
        return self._curves[1]

    _CURVES = {
        "learned": lambda line: line.get("learned"),
        "prequential_accuracy": lambda line: (line.get("prequential") or {}).get("accuracy"),
        "holdout_accuracy": lambda line: (line.get("holdout") or {}).get("accuracy"),
        "examples_per_s": lambda line: line.get("examples_per_s"),
        "dead_letters": lambda line: line.get("dead_letters"),
    }

    def metrics_line(self) -> dict | None:
        """The last line of the directory's metrics log (what the trainer logged at its last checkpoint)."""
        path = self.metrics_path
        try:
            with open(path, "rb") as f:
                f.seek(max(0, path.stat().st_size - 65536))
                lines = f.read().splitlines()
            return json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            return None


class LiveModel:
    """The model a running trainer is learning (``streamlearn train --serve``): read under the
    trainer's lock, which it holds while it learns a batch, so an answer never sees a
    half-learned batch. ``sequence`` counts the batches learned; ``created`` is when the last
    one was."""

    def __init__(self, runner, lock):
        self.runner, self.lock = runner, lock

    @property
    def model(self):
        return self.runner.model

    @property
    def sequence(self) -> int:
        return self.runner.counters["batches"]

    @property
    def created(self) -> float:
        return self.runner.last_update

    @property
    def counters(self) -> dict:
        return self.runner.counters

    @property
    def info(self) -> dict:
        with self.lock:
            model = self.runner.model
            return {"learner": type(model).__name__, "params": model._get_params(),
                    "classes": [json_key(c) for c in model.classes], "records_learned": self.runner.counters["learned"],
                    "checkpoint": self.runner.last_checkpoint_path, "sequence": self.sequence, "created": self.created}


class LiveHolder(ModelHolder):
    """What ``train --serve`` serves: the runner's own model (:class:`LiveModel`) once it has
    learned a record; nothing to reload."""

    def __init__(self, runner, lock, metrics_path=None, log=None):
        super().__init__(runner.store.directory if runner.store is not None else ".", log, metrics_path)
        self.live = LiveModel(runner, lock)

    @property
    def current(self):
        return self.live if self.live.runner.counters["learned"] else None

    @current.setter
    def current(self, value):  # ModelHolder.__init__ sets it
        pass

    def refresh(self) -> bool:
        return False


def _settle_garbage() -> None:
    """Collect, then freeze what is alive (the model, numba's and NumPy's objects) out of the
    cyclic collector's reach: its full passes over them stalled requests for 50-200 ms."""
    import gc

    gc.collect()
    gc.freeze()


class BadRequest(ValueError):
    """A request the service answers with a 4xx status and this message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_records(body: bytes) -> tuple[list, bool]:
    """The feature dicts of a ``/predict`` body and whether it held a list."""
    import orjson  # ~3x the standard library's speed: a 1,000-record body is megabytes of text

    try:
        obj = orjson.loads(body)  # NaN and Infinity are not JSON: refused
    except orjson.JSONDecodeError as error:
        raise BadRequest(400, f"the body is not JSON: {error}") from None
    many = isinstance(obj, list)
    records = obj if many else [obj]
    if many and not records:
        raise BadRequest(400, "an empty list of records")
    X = []
    for i, record in enumerate(records):
        try:
            x, _ = check_record(record, labelled=False)
        except RecordError as error:
            raise BadRequest(422, f"record {i}: {error.reason}: {error.message}") from None
        X.append(x)
    return X, many


def integer_names(X: list, model):
    """The records with each key that is the decimal text of an integer (``"17"``) read as that
    integer when the model knows the integer feature and not the text: JSON keys are strings,
    and a model learned from LIBSVM, arrays or msgpack has integer feature names. For a model
    whose every name is an integer the records come back as one CSR matrix over those names
    (built with NumPy, no dict per record: the service's batch path)."""
    features = model.feature_space
    if features.n_bits is not None:  # hashing: every name has a column, nothing tells them apart
        return X
    if features.all_integer_names:
        rows = _integer_csr(X)
        if rows is not None:
            return rows
    texts = sorted(k for k in {k for x in X for k in x} if _integer_text(k))
    if not texts:
        return X
    as_text, as_int = features.columns(texts, grow=False), features.columns([int(k) for k in texts], grow=False)
    integer = {k for k, t, i in zip(texts, as_text.tolist(), as_int.tolist()) if t < 0 <= i}
    return [{int(k) if k in integer else k: v for k, v in x.items()} for x in X] if integer else X


_POWERS_OF_TEN = 10 ** np.arange(19, dtype=np.int64)


def _integer_text(key) -> bool:
    """Whether a JSON key is the canonical decimal text of a 64-bit integer (``"17"``, ``"-3"``;
    not ``"²"``, ``"017"`` or a number past int64, which stay text names)."""
    if not isinstance(key, str) or not key.isascii() or not 0 < len(key.lstrip("-")) <= 19 or not key.lstrip("-").isdigit():
        return False
    value = int(key)
    return str(value) == key and -(1 << 63) <= value < (1 << 63)


def _integer_csr(X: list):
    """Records whose keys are all decimal integers' text as a CSR matrix over those integers
    (``None`` if a key is not one, or is negative: the dict path then decides)."""
    import scipy.sparse

    keys = [k for x in X for k in x]  # JSON keys: strings
    joined = "".join(keys)
    if not keys or not joined.isascii():
        return None
    try:
        indices = np.fromiter(map(int, keys), np.int64, len(keys))
    except (ValueError, OverflowError):
        return None
    # int() also takes "017", "+3", " 3", "3_0": each is longer than the integer's own text, so the
    # texts are all canonical exactly when their lengths add up to the canonical lengths' sum
    digits = np.maximum(1, np.searchsorted(_POWERS_OF_TEN, indices, side="right"))
    if indices.min() < 0 or int(digits.sum()) != len(joined):
        return None
    data = np.fromiter((v for x in X for v in x.values()), np.float64, len(keys))
    indptr = np.zeros(len(X) + 1, np.int64)
    np.cumsum([len(x) for x in X], out=indptr[1:])
    if indices.max() >= np.iinfo(np.int32).max:  # a column past what a CSR matrix indexes: the dict path
        return None
    width = int(indices.max()) + 1
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(len(X), width))


def make_metrics(holder: ModelHolder):
    """The Prometheus registry of one service, and its request counter and latency histogram."""
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.core import GaugeMetricFamily

    registry = CollectorRegistry()
    requests = Counter("streamlearn_requests", "HTTP requests by endpoint and status", ["endpoint", "status"], registry=registry)
    latency = Histogram("streamlearn_request_seconds", "Time to answer a request", ["endpoint"], registry=registry,
                        buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5))

    class ModelCollector:
        def collect(self):
            loaded = holder.current
            yield GaugeMetricFamily("streamlearn_model_loaded", "1 once a model is served", value=float(loaded is not None))
            yield GaugeMetricFamily("streamlearn_reloads", "Checkpoints loaded so far", value=holder.reloads)
            yield GaugeMetricFamily("streamlearn_skipped_checkpoints", "Corrupt checkpoints skipped", value=len(holder.skipped))
            if loaded is not None:
                yield GaugeMetricFamily("streamlearn_model_age_seconds", "Age of the served checkpoint",
                                        value=max(0.0, time.time() - loaded.created))
                yield GaugeMetricFamily("streamlearn_model_sequence", "Sequence number of the served checkpoint", value=loaded.sequence)
                yield GaugeMetricFamily("streamlearn_records_learned", "Records learned by the served model",
                                        value=loaded.counters["learned"])
            line = holder.metrics_line()
            if line:
                prequential = line.get("prequential") or {}
                for key, name in (("accuracy", "accuracy"), ("log_loss", "log_loss")):
                    if prequential.get(key) is not None:
                        yield GaugeMetricFamily(f"streamlearn_prequential_{name}", f"Prequential {key} in the metrics log",
                                                value=prequential[key])
                yield GaugeMetricFamily("streamlearn_dead_letters", "Bad records in the metrics log", value=line.get("dead_letters", 0))
                yield GaugeMetricFamily("streamlearn_changes_detected", "Changes of the stream the learner detected (and restarted on)",
                                        value=line.get("changes", 0))
                yield GaugeMetricFamily("streamlearn_examples_per_second", "Learning rate in the metrics log",
                                        value=line.get("examples_per_s", 0.0))

    registry.register(ModelCollector())
    return registry, requests, latency


def make_handler(holder: ModelHolder, max_age: float | None, max_body: int):
    """The request handler class of one service."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry, requests, latency = make_metrics(holder)

    class Handler(BaseHTTPRequestHandler):
        server_version = "streamlearn"
        protocol_version = "HTTP/1.1"  # keep-alive: a load generator's connections are reused
        disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart (Nagle + delayed ACK)
        timeout = REQUEST_TIMEOUT  # a client that stops sending mid-request loses its connection, not a thread for ever

        def parse_request(self) -> bool:
            """The standard parse, refusing HTTP/0.9 (a request line without a version: there are
            no headers to answer it with) by closing the connection."""
            if not super().parse_request():
                return False
            if self.request_version == "HTTP/0.9":
                self.close_connection = True
                return False
            return True

        def log_message(self, format, *args):  # no access log on stderr
            pass

        def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self._headers_buffer.extend((b"\r\n", body))  # headers and body in one write: one segment for a small answer
            self.flush_headers()

        def _json(self, status: int, obj) -> None:
            self._send(status, json.dumps(obj, default=str).encode())

        def _answer(self, endpoint: str, work) -> None:
            start = time.perf_counter()
            try:
                status, obj = work()
            except BadRequest as error:
                status, obj = error.status, {"error": str(error)}
            except Exception as error:  # noqa: BLE001 - one bad request never takes the service down
                status, obj = 500, {"error": f"{type(error).__name__}: {error}"}
            if isinstance(obj, bytes):
                self._send(status, obj, CONTENT_TYPE_LATEST)
            else:
                self._json(status, obj)
            requests.labels(endpoint, str(status)).inc()
            latency.labels(endpoint).observe(time.perf_counter() - start)

        def do_GET(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path == "/" or url.path.startswith("/static/"):
                self._static("index.html" if url.path == "/" else url.path[len("/static/"):])
                return
            routes = {"/model": self._model, "/healthz": self._health, "/curves": lambda: (200, holder.curves()),
                      "/metrics": lambda: (200, generate_latest(registry))}
            if url.path not in routes:
                self._answer("other", lambda: (404, {"error": f"no such endpoint: GET {url.path}"}))
                return
            self._answer(url.path[1:], routes[url.path])

        def _static(self, name: str) -> None:
            """The live page and its files, shipped in the package (no network at run time)."""
            if name not in STATIC_TYPES:
                self._json(404, {"error": f"no such file: {name}"})
                return
            self._send(200, (STATIC / name).read_bytes(), STATIC_TYPES[name])

        def do_POST(self):
            url = urllib.parse.urlsplit(self.path)
            if url.path != "/predict":
                self._drain()
                self._answer("other", lambda: (404, {"error": f"no such endpoint: POST {url.path}"}))
                return
            self._answer("predict", lambda: self._predict(url.query))

        def _drain(self) -> None:
            try:
                length = body_length(self.headers)
            except BadRequest:
                self.close_connection = True
                return
            if 0 < length <= max_body:
                self.rfile.read(length)
            elif length:
                self.close_connection = True

        def _model(self):
            loaded = holder.current
            if loaded is None:
                return 503, {"error": "no model loaded yet"}
            return 200, {**loaded.info, "age_seconds": time.time() - loaded.created}

        def _health(self):
            loaded = holder.current
            if loaded is None:
                return 503, {"status": "no model loaded yet"}
            age = time.time() - loaded.created
            if max_age is not None and age > max_age:
                return 503, {"status": f"the newest checkpoint is {age:.0f} s old (--max-age {max_age:g})"}
            return 200, {"status": "ok", "sequence": loaded.sequence, "age_seconds": age}

        def _predict(self, query: str):
            try:
                length = body_length(self.headers)
            except BadRequest:
                self.close_connection = True  # where the body ends is unknown: the connection cannot serve another request
                raise
            if length > max_body:
                self.close_connection = True
                remaining = length if length <= 16 * max_body else 0  # read and dropped: the client gets the answer, not a reset
                while remaining > 0:
                    chunk = self.rfile.read(min(1 << 16, remaining))
                    if not chunk:
                        break
                    remaining -= len(chunk)
                raise BadRequest(413, f"the body is more than --max-body {max_body:,} bytes")
            return predict(holder, self.rfile.read(length), query)

    return Handler


def body_length(headers) -> int:
    """A request's body length from its one ``Content-Length`` header: a decimal number of bytes
    (``-1``, ``abc`` or two different lengths: 400; none: 411), bounded before anything is read."""
    values = set(headers.get_all("Content-Length") or [])
    if not values:
        raise BadRequest(411, "a POST /predict needs a Content-Length")
    if len(values) > 1:
        raise BadRequest(400, f"{len(values)} different Content-Length headers")
    text = values.pop().strip()
    if not (text.isascii() and text.isdigit()):
        raise BadRequest(400, f"Content-Length {text[:40]!r} is not a number of bytes")
    return int(text)


def predict(holder: ModelHolder, body: bytes, query: str = "") -> tuple[int, dict]:
    """``POST /predict``'s answer ``(status, JSON object)`` to a request body (raises
    :class:`BadRequest`); whatever HTTP server carries it."""
    loaded = holder.current  # this request's model, whatever a reload does meanwhile
    if loaded is None:
        raise BadRequest(503, "no model loaded yet")
    X, many = parse_records(body)
    proba = urllib.parse.parse_qs(query).get("proba", ["0"])[0] not in ("0", "", "false")
    with getattr(loaded, "lock", None) or contextlib.nullcontext():  # a live model: not while a batch is learned
        model, sequence = loaded.model, loaded.sequence
        X = integer_names(X, model)
        out = [{"prediction": p} for p in model.predict_many(X).tolist()]
        probabilities = model.predict_proba_many(X).to_dict(orient="records") if proba else None
    for i, row in enumerate(out):
        if probabilities is not None:
            row["proba"] = {json_key(c): (p if math.isfinite(p) else None) for c, p in probabilities[i].items()}
        row["sequence"] = sequence
    return 200, {"predictions": out} if many else out[0]


def serve(directory, host: str = "127.0.0.1", port: int = 8080, max_age: float | None = None, max_body: int = 1 << 20,
          reload_interval: float = 1.0, ready=None, stop: threading.Event | None = None, log=None, holder=None) -> None:
    """Run the service until ``stop`` is set (or forever); ``ready(server)`` is called once it
    listens. ``holder``: what to serve instead of ``directory``'s checkpoints (a :class:`LiveHolder`)."""
    if holder is None:
        holder = ModelHolder(directory, log)
        holder.refresh()
    stop = stop or threading.Event()
    reloader = threading.Thread(target=holder.watch, args=(reload_interval, stop), name="streamlearn-reload", daemon=True)
    reloader.start()
    server = ThreadingHTTPServer((host, port), make_handler(holder, max_age, max_body))
    server.daemon_threads = True
    _settle_garbage()  # the handler's imports too
    if ready is not None:
        ready(server)
    threading.Thread(target=lambda: (stop.wait(), server.shutdown()), daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        stop.set()
        server.server_close()
