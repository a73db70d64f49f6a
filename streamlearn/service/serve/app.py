"""The service as an ASGI application: what ``streamlearn serve`` runs under uvicorn, and what a
user mounts in their own ASGI app (FastAPI, Starlette) with :func:`app`.

Requests are answered on the event loop itself: a prediction's cost is NumPy and the compiled
kernels, which hold the GIL for most of it, so a thread pool would add a hand-over and no
throughput — but for a body over :data:`OFF_LOOP_BYTES`, which is scored and its answer
serialised on a worker thread, so that one large request cannot hold up every other client (and
``/healthz``) for seconds: the loop keeps its turns while the thread works. A body is bounded before it is read (``Content-Length`` over ``max_body``: 413
without reading it; a chunked body is cut off at ``max_body``) and must arrive within
``BODY_TIMEOUT`` seconds (408).

With a ``token``, every endpoint but ``GET /healthz`` and the live page's own files (``/``,
``/static/``) needs ``Authorization: Bearer TOKEN`` (401 otherwise); the live page asks for the
token once and sends it with its requests. The token is compared in constant time and never
written anywhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hmac
import pathlib
import threading
import time

from .holders import ModelHolder
from .prometheus import make_metrics
from .records import BadRequest, predict
from .slices import dumps_in_slices

#: a /predict body larger than this is answered on a worker thread (see the module docstring)
OFF_LOOP_BYTES = 64 * 1024
#: seconds the whole body of a request may take to arrive once its headers have
BODY_TIMEOUT = 30.0
#: a body over --max-body is read and dropped up to this many times --max-body (the client gets its 413)
DRAIN_FACTOR = 16
#: the live page (``GET /``) and the chart library it draws with (uPlot, MIT licence, shipped as is)
STATIC = pathlib.Path(__file__).resolve().parents[1] / "static"
STATIC_TYPES = {"index.html": "text/html; charset=utf-8", "uPlot.iife.min.js": "text/javascript",
                "uPlot.min.css": "text/css", "uPlot.LICENSE": "text/plain"}
JSON_TYPE = "application/json"


def create_app(holder: ModelHolder, max_age: float | None = None, max_body: int = 1 << 20, token: str | None = None):
    """The ASGI application serving ``holder``'s model (see the module docstring)."""
    from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

    registry, requests, latency = make_metrics(holder)
    expected = f"Bearer {token}".encode() if token else None

    def model_info():
        loaded = holder.current
        if loaded is None:
            return 503, {"error": "no model loaded yet"}
        return 200, {**loaded.info, "age_seconds": time.time() - loaded.created}

    def health():
        loaded = holder.current
        if loaded is None:
            return 503, {"status": "no model loaded yet"}
        age = time.time() - loaded.created
        if max_age is not None and age > max_age:
            return 503, {"status": f"the newest checkpoint is {age:.0f} s old (--max-age {max_age:g})"}
        return 200, {"status": "ok", "sequence": loaded.sequence, "age_seconds": age}

    routes = {("GET", "/model"): model_info, ("GET", "/healthz"): health, ("GET", "/curves"): lambda: (200, holder.curves()),
              ("GET", "/metrics"): lambda: (200, generate_latest(registry))}

    def authorized(headers: list) -> bool:
        given = next((value for name, value in headers if name == b"authorization"), b"")
        return hmac.compare_digest(given, expected)

    async def answer(scope, receive) -> tuple[str, int, object]:
        method, path = scope["method"], route_path(scope)
        if method in ("GET", "HEAD") and (path == "/" or path.startswith("/static/")):
            name = "index.html" if path == "/" else path[len("/static/"):]
            if name not in STATIC_TYPES:
                return "static", 404, {"error": f"no such file: {name}"}
            return "static", 200, ([(STATIC / name).read_bytes()], STATIC_TYPES[name])
        if expected is not None and path != "/healthz" and not authorized(scope["headers"]):  # before saying what exists
            return "other", 401, {"error": "this service needs its token: Authorization: Bearer TOKEN"}
        if method == "POST" and path == "/predict":
            endpoint, work = "predict", None
        elif (method, path) in routes:
            endpoint, work = path[1:], routes[(method, path)]
        elif path == "/predict" or ("GET", path) in routes:
            allowed = "POST" if path == "/predict" else "GET"
            return "other", 405, ({"error": f"{path} takes {allowed}, not {method}"}, allowed)
        else:
            return "other", 404, {"error": f"no such endpoint: {method} {path}"}
        if work is not None:
            return (endpoint, *work())
        body = await read_body(scope, receive, max_body)
        query = scope["query_string"].decode("latin-1")
        if len(body) > OFF_LOOP_BYTES:
            return (endpoint, *await asyncio.to_thread(predict_as_json, holder, body, query))
        return (endpoint, *predict(holder, body, query))

    async def application(scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":  # a websocket: nothing here speaks it
            await send({"type": "websocket.close", "code": 1003})
            return
        start = time.perf_counter()
        try:
            endpoint, status, result = await answer(scope, receive)
        except BadRequest as error:
            endpoint, status, result = "predict", error.status, {"error": str(error)}
        except Exception as error:  # noqa: BLE001 - one bad request never takes the service down
            endpoint, status, result = "other", 500, {"error": f"{type(error).__name__}: {error}"}
        chunks, headers = encoded(status, result, CONTENT_TYPE_LATEST)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        if scope["method"] == "HEAD":
            chunks = [b""]
        for i, chunk in enumerate(chunks):
            await send({"type": "http.response.body", "body": chunk, "more_body": i + 1 < len(chunks)})
        requests.labels(endpoint, str(status)).inc()
        latency.labels(endpoint).observe(time.perf_counter() - start)

    application.holder = holder
    return application


def encoded(status: int, result, bytes_type: str) -> tuple[list[bytes], list]:
    """A response's body, in chunks, and headers: ``result`` is ``(chunks, content type)``, bytes
    (of ``bytes_type``: the metrics' text), or JSON data; a 405's is ``(JSON data, allowed method)``."""
    allow = None
    if status == 405:
        result, allow = result
    if isinstance(result, tuple):
        chunks, content_type = result
    elif isinstance(result, bytes):
        chunks, content_type = [result], bytes_type
    else:
        chunks, content_type = dumps_in_slices(result), JSON_TYPE
    size = sum(map(len, chunks))
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(size).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="streamlearn"'))
    if allow is not None:
        headers.append((b"allow", allow.encode()))
    return chunks, headers


def predict_as_json(holder, body: bytes, query: str) -> tuple[int, tuple[list[bytes], str]]:
    """:func:`~streamlearn.service.serve.records.predict`'s answer, serialised (on the worker thread
    too), with the cyclic collector paused: a large body's records and answer are a million
    objects without a cycle, which its full passes scanned, 20 ms and more at a time, holding the GIL."""
    with cyclic_collector_paused():
        status, result = predict(holder, body, query)
        return status, (dumps_in_slices(result), JSON_TYPE)


PAUSES = {"count": 0, "lock": threading.Lock()}


@contextlib.contextmanager
def cyclic_collector_paused():
    """``gc.disable()`` while any caller is inside (reference counting still frees what is not in a
    cycle); the collector runs again when the last one leaves."""
    with PAUSES["lock"]:
        PAUSES["count"] += 1
        gc.disable()
    try:
        yield
    finally:
        with PAUSES["lock"]:
            PAUSES["count"] -= 1
            if not PAUSES["count"]:
                gc.enable()


def route_path(scope) -> str:
    """The request's path below where the application is mounted (``root_path``, which ASGI servers
    and frameworks leave in ``path`` or take out of it, depending on their version)."""
    path, root = scope["path"], scope.get("root_path", "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root):]
    return path or "/"


async def read_body(scope, receive, max_body: int) -> bytes:
    """A request's body, refused with a :class:`BadRequest` past ``max_body`` bytes or when it does
    not arrive within ``BODY_TIMEOUT``. A body over ``max_body`` is never kept: up to
    ``DRAIN_FACTOR`` times ``max_body`` of it is read and dropped, so that a client still sending
    gets its 413 rather than a reset connection; a larger one (by its ``Content-Length``) is refused
    before any of it is read."""
    lengths = {value for name, value in scope["headers"] if name == b"content-length"}
    if len(lengths) > 1:
        raise BadRequest(400, f"{len(lengths)} different Content-Length headers")
    declared = int(lengths.pop()) if lengths else None
    too_long = BadRequest(413, f"the body is more than --max-body {max_body:,} bytes")
    if declared is not None and declared > DRAIN_FACTOR * max_body:
        raise too_long
    chunks, size = [], 0
    deadline = time.monotonic() + BODY_TIMEOUT
    while True:
        try:
            message = await asyncio.wait_for(receive(), max(0.0, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            raise BadRequest(408, f"the body did not arrive within {BODY_TIMEOUT:g} s") from None
        if message["type"] == "http.disconnect":
            raise BadRequest(400, "the client went away before its body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size <= max_body:
            chunks.append(chunk)
        elif size > DRAIN_FACTOR * max_body:
            raise too_long
        else:
            chunks = []  # dropped as it comes
        if not message.get("more_body", False):
            if size > max_body:
                raise too_long
            return b"".join(chunks)


async def lifespan(receive, send) -> None:
    """ASGI's start-up and shut-down messages: nothing to prepare (the holder already reloads)."""
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


def app(checkpoint_dir, *, max_age: float | None = None, max_body: int = 1 << 20, token: str | None = None,
        reload_interval: float = 1.0):
    """The service of ``checkpoint_dir`` as an ASGI application, to mount in another ASGI app
    (``starlette.routing.Mount("/model", app("ckpt"))``) or run with any ASGI server. A daemon
    thread reloads the newest checkpoint every ``reload_interval`` seconds until ``stop.set()``
    (the application's ``stop`` attribute).

    >>> import tempfile
    >>> service = app(tempfile.mkdtemp())
    >>> service.holder.current is None
    True
    >>> service.stop.set()
    """
    holder = ModelHolder(checkpoint_dir)
    holder.refresh()
    stop = threading.Event()
    threading.Thread(target=holder.watch, args=(reload_interval, stop), name="streamlearn-reload", daemon=True).start()
    application = create_app(holder, max_age, max_body, token)
    application.stop = stop
    return application
