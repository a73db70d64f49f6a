"""``streamlearn serve`` and ``train --serve``: the ASGI application (:mod:`.app`) run by uvicorn,
with the reload thread, optional TLS and the bearer token.

A service bound to an address other than loopback must have a token (``--token-file`` or the
``STREAMLEARN_TOKEN`` environment variable) unless the user says ``--no-auth``: otherwise anyone
who reaches the port reads the model and its predictions.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading

from .app import create_app
from .holders import ModelHolder, settle_garbage

#: seconds a connection may wait before its request's first byte (a new one, or one kept alive
#: between requests): idle sockets must not hold the connection slots for long
KEEP_ALIVE_TIMEOUT = FIRST_BYTE_TIMEOUT = 5.0
#: seconds a request's head may take to arrive once its first byte has
REQUEST_TIMEOUT = 30.0
#: connections served at once; beyond, uvicorn answers 503 (a stalled client costs a socket, not a thread)
MAX_CONNECTIONS = 1000
#: seconds a thread holds the GIL before one waiting asks for it (Python's default: 0.005): the event
#: loop needs it a few times per request, and a large request scored on a worker thread would make
#: each of those wait the whole interval
SWITCH_INTERVAL = 0.001
#: the most bytes and header lines a request's head may have (431 beyond, before any routing or token check)
MAX_HEADER_BYTES, MAX_HEADERS = 64 * 1024, 100
HEADERS_TOO_LARGE = (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\ncontent-length: 42\r\n"
                     b"connection: close\r\n\r\nrequest headers over 64 KiB or 100 lines\r\n")
TOKEN_VARIABLE = "STREAMLEARN_TOKEN"


class BoundedHeads:
    """The head bounds of :func:`timely_protocol`'s protocol, a mixin before uvicorn's (which is
    imported only when a service starts): a head is counted as it arrives — httptools would hold a
    64 MB header in memory for the application's 401 — and refused with 431 past
    :data:`MAX_HEADER_BYTES` or :data:`MAX_HEADERS`; ``/healthz`` is let past the connection limit; a
    request whose client half-closes is answered."""

    in_headers, header_bytes = True, 0  # whether a request's head is being read, and its bytes so far
    refused = False  # a head over the bounds was answered 431

    def data_received(self, data):
        if self.in_headers:
            if not self.header_bytes:  # its first byte: the head now has the whole request timeout
                self._deadline(self.request_timeout)
            self.header_bytes += len(data)
        super().data_received(data)
        if self.in_headers and (self.header_bytes > MAX_HEADER_BYTES or len(getattr(self, "headers", ())) > MAX_HEADERS):
            self._refuse_head()

    def _refuse_head(self):
        if not self.transport.is_closing():
            self.transport.write(HEADERS_TOO_LARGE)
            self.transport.close()
        self.refused = True

    def eof_received(self):
        """A client that half-closes after its request (``nc -N``, ``shutdown(SHUT_WR)``) still gets
        the answer: the socket stays open for it, then closes (uvicorn closed it at once)."""
        cycle = getattr(self, "cycle", None)
        if cycle is None or cycle.response_complete:
            return None
        cycle.keep_alive = False
        return True

    def send_400_response(self, msg):
        if not self.refused:  # the parser's error after a refused head: it was answered
            super().send_400_response(msg)

    def on_headers_complete(self):
        self.in_headers = False
        if len(self.headers) > MAX_HEADERS or len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers) > MAX_HEADER_BYTES:
            self._refuse_head()  # a head that came whole in one read
            raise ValueError("request head over the bounds")  # stops the parser: no request reaches the app
        limit = self.limit_concurrency
        if self.url.split(b"?", 1)[0] == b"/healthz":  # its own room: answered even when every slot is taken
            self.limit_concurrency = None
        try:
            super().on_headers_complete()
        finally:
            self.limit_concurrency = limit


def timely_protocol(request_timeout: float):
    """uvicorn's HTTP protocol (httptools) with a deadline for each request's headers: uvicorn times
    only the idle wait between requests, so a client that connects and stalls, or sends its headers a
    byte at a time (slowloris), held its socket for ever; it is closed after :data:`FIRST_BYTE_TIMEOUT`
    without a byte, ``request_timeout`` once the head has begun. The head is bounded (:class:`BoundedHeads`)."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class TimelyProtocol(BoundedHeads, HttpToolsProtocol):
        headers_deadline = None

        def connection_made(self, transport):
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
                # an answer's head and body are two writes: without this the body waits for the
                # client's delayed ACK of the head, 40 ms a request on Linux
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._arm()

        def on_headers_complete(self):
            if self.headers_deadline is not None:
                self.headers_deadline.cancel()
            super().on_headers_complete()

        def on_response_complete(self):
            super().on_response_complete()
            self._arm()  # the next request's headers, on a connection kept alive

        def connection_lost(self, exc):
            if self.headers_deadline is not None:
                self.headers_deadline.cancel()
            super().connection_lost(exc)

        def _arm(self):
            self.in_headers, self.header_bytes = True, 0
            self._deadline(min(FIRST_BYTE_TIMEOUT, request_timeout))

        def _deadline(self, seconds: float):
            if self.headers_deadline is not None:
                self.headers_deadline.cancel()
            self.headers_deadline = self.loop.call_later(seconds, self._stalled)

        def _stalled(self):
            if not self.transport.is_closing():
                self.transport.close()

    TimelyProtocol.request_timeout = request_timeout
    return TimelyProtocol


class ServiceConfigError(ValueError):
    """A service that cannot start as asked (a token missing or unreadable, a certificate without its key)."""


def read_token(token_file: str | None) -> str | None:
    """The bearer token: the first line of ``token_file``, else ``$STREAMLEARN_TOKEN``, else ``None``.
    The token itself never appears in an error."""
    if token_file:
        try:
            with open(token_file, encoding="utf-8") as f:
                token = f.readline().strip()
        except (OSError, UnicodeDecodeError) as error:
            raise ServiceConfigError(f"cannot read the token file {token_file!r}: {getattr(error, 'strerror', None) or error}") from None
        if not token:
            raise ServiceConfigError(f"the token file {token_file!r} is empty")
        return token
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    return token or None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, token: str | None, no_auth: bool) -> None:
    """Refuse a service reachable from other machines without a token, unless ``no_auth`` says so."""
    if token is None and not no_auth and not is_loopback(host):
        raise ServiceConfigError(f"serving on {host} without a token lets anyone who reaches the port read the model: "
                                 f"give --token-file FILE (or ${TOKEN_VARIABLE}), or say --no-auth")


class Listening:
    """What ``ready`` is given: the address the service listens on (``server_address``) and its scheme."""

    def __init__(self, sock: socket.socket, tls: bool):
        self.server_address = sock.getsockname()
        self.scheme = "https" if tls else "http"


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (``port`` 0: one the system picks)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as error:
        sock.close()
        raise ServiceConfigError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    return sock


def serve(directory, host: str = "127.0.0.1", port: int = 8080, max_age: float | None = None, max_body: int = 1 << 20,
          reload_interval: float = 1.0, ready=None, stop: threading.Event | None = None, log=None, holder=None,
          token: str | None = None, certfile: str | None = None, keyfile: str | None = None,
          request_timeout: float = REQUEST_TIMEOUT) -> None:
    """Run the service until ``stop`` is set (or forever); ``ready(listening)`` is called once it
    listens (:class:`Listening`). ``holder``: what to serve instead of ``directory``'s checkpoints
    (a :class:`~.holders.LiveHolder`). ``certfile`` / ``keyfile``: serve HTTPS. A request's headers
    must arrive within ``request_timeout`` seconds, its body within :data:`~.app.BODY_TIMEOUT`."""
    import uvicorn

    if (certfile is None) != (keyfile is None):
        raise ServiceConfigError("TLS needs both --certfile and --keyfile")
    if holder is None:
        holder = ModelHolder(directory, log)
        holder.refresh()
    stop = stop or threading.Event()
    threading.Thread(target=holder.watch, args=(reload_interval, stop), name="streamlearn-reload", daemon=True).start()
    config = uvicorn.Config(create_app(holder, max_age, max_body, token), lifespan="off", log_level="critical",
                            access_log=False, server_header=False, timeout_keep_alive=KEEP_ALIVE_TIMEOUT,
                            http=timely_protocol(request_timeout),
                            limit_concurrency=MAX_CONNECTIONS, ssl_certfile=certfile, ssl_keyfile=keyfile)
    if certfile is not None:
        try:
            config.load()  # the certificate and key are read now: a bad pair is one line, before anything listens
        except (OSError, ValueError) as error:
            raise ServiceConfigError(f"cannot use --certfile {certfile!r} / --keyfile {keyfile!r}: {error}") from None
    server = uvicorn.Server(config)
    sock = bind(host, port)
    threading.Thread(target=lambda: (stop.wait(), setattr(server, "should_exit", True)), daemon=True).start()
    settle_garbage()  # the application's imports too
    sys.setswitchinterval(SWITCH_INTERVAL)
    if ready is not None:
        ready(Listening(sock, certfile is not None))
    try:
        server.run(sockets=[sock])
    finally:
        stop.set()
        sock.close()
