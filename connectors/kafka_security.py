"""How every Kafka connection of streamlearn authenticates and encrypts: TLS (a CA file; optionally a
client certificate and its key) and SASL (``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``), with either
client, for sources, sinks, the mixing topic and topic creation alike.

Credentials never come from a ``kafka://`` URI (URIs are printed, logged and kept in checkpoints).
They come from the environment::

    STREAMLEARN_KAFKA_SECURITY_PROTOCOL   PLAINTEXT (default), SSL, SASL_PLAINTEXT or SASL_SSL
    STREAMLEARN_KAFKA_CA_FILE             the CA certificates (PEM) the broker's certificate is checked against
                                          (default: the system's)
    STREAMLEARN_KAFKA_CERT_FILE, STREAMLEARN_KAFKA_KEY_FILE   a client certificate and its key (PEM), if the broker asks
    STREAMLEARN_KAFKA_SASL_MECHANISM      PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512
    STREAMLEARN_KAFKA_USERNAME, STREAMLEARN_KAFKA_PASSWORD

or from a TOML file with the same keys in lower case without the prefix (``security_protocol``,
``ca_file``, ``cert_file``, ``key_file``, ``sasl_mechanism``, ``username``, ``password``), named by the
commands' ``--kafka-security FILE``. The password is never printed, logged, checkpointed or shown by
``inspect``: :class:`KafkaSecurity`'s ``repr`` masks it.

A broker that refuses the connection (an untrusted certificate, wrong credentials) is one clear line
and exit 1 (:func:`check_access`), not a retry loop.

>>> security = KafkaSecurity("SASL_SSL", sasl_mechanism="SCRAM-SHA-512", username="alice", password="s3cret")
>>> security
KafkaSecurity(security_protocol='SASL_SSL', sasl_mechanism='SCRAM-SHA-512', username='alice', password=***)
>>> sorted(security.confluent())
['sasl.mechanism', 'sasl.password', 'sasl.username', 'security.protocol']
"""

from __future__ import annotations

import dataclasses
import os
import socket
import ssl

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PREFIX = "STREAMLEARN_KAFKA_"
FIELDS = ("security_protocol", "ca_file", "cert_file", "key_file", "sasl_mechanism", "username", "password")
#: the environment variable of each field (``STREAMLEARN_KAFKA_SECURITY_PROTOCOL``, ``STREAMLEARN_KAFKA_CA_FILE``, ...)
VARIABLES = {field: PREFIX + field.upper() for field in FIELDS}
#: seconds :func:`check_access` gives a broker to accept a connection
ACCESS_TIMEOUT = 10.0


class KafkaAccessError(ValueError):
    """The broker refused the connection (TLS or SASL), or the security settings are wrong: one line."""


@dataclasses.dataclass(frozen=True, repr=False)
class KafkaSecurity:
    """One security configuration for every Kafka connection (see the module docstring)."""

    security_protocol: str = "PLAINTEXT"
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None

    def __post_init__(self):
        if self.security_protocol not in PROTOCOLS:
            raise KafkaAccessError(f"the Kafka security protocol is one of {', '.join(PROTOCOLS)}, not {self.security_protocol!r}")
        if self.sasl:
            if self.sasl_mechanism not in MECHANISMS:
                raise KafkaAccessError(f"{self.security_protocol} needs a SASL mechanism, one of {', '.join(MECHANISMS)}; "
                                       f"got {self.sasl_mechanism!r}")
            if not self.username or not self.password:
                raise KafkaAccessError(f"{self.security_protocol} needs a username and a password "
                                       f"({VARIABLES['username']}, {VARIABLES['password']}, or the --kafka-security file)")
        elif self.sasl_mechanism or self.username or self.password:
            raise KafkaAccessError(f"SASL credentials were given but the security protocol is {self.security_protocol}: "
                                   "say SASL_SSL or SASL_PLAINTEXT")
        if (self.cert_file is None) != (self.key_file is None):
            raise KafkaAccessError("a client certificate needs its key: give both cert_file and key_file")
        if not self.tls and (self.ca_file or self.cert_file):
            raise KafkaAccessError(f"TLS files were given but the security protocol is {self.security_protocol}: say SSL or SASL_SSL")
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, name)
            if path is not None and not os.path.isfile(path):
                raise KafkaAccessError(f"the Kafka {name.replace('_', ' ')} {path!r} is not a file")

    def __repr__(self) -> str:
        shown = [f"{f}={getattr(self, f)!r}" for f in FIELDS[:-1] if getattr(self, f) not in (None, "")]
        return f"KafkaSecurity({', '.join(shown)}{', password=***' if self.password else ''})"

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def kafka_python(self) -> dict:
        """The settings for kafka-python's consumers, producers and admin clients."""
        options = {"security_protocol": self.security_protocol}
        if self.tls:
            options.update({k: v for k, v in (("ssl_cafile", self.ca_file), ("ssl_certfile", self.cert_file),
                                              ("ssl_keyfile", self.key_file)) if v})
            options["ssl_check_hostname"] = True
        if self.sasl:
            options.update(sasl_mechanism=self.sasl_mechanism, sasl_plain_username=self.username,
                           sasl_plain_password=self.password)
        return options

    def confluent(self) -> dict:
        """The settings for confluent-kafka (librdkafka) clients."""
        options = {"security.protocol": self.security_protocol.lower()}
        if self.tls:
            options.update({k: v for k, v in (("ssl.ca.location", self.ca_file), ("ssl.certificate.location", self.cert_file),
                                              ("ssl.key.location", self.key_file)) if v})
        if self.sasl:
            options.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.username,
                            "sasl.password": self.password})
        return options if self.security_protocol != "PLAINTEXT" else {}

    @classmethod
    def from_environment(cls, environ=None) -> "KafkaSecurity":
        """The settings of the ``STREAMLEARN_KAFKA_*`` variables (PLAINTEXT when none is set)."""
        environ = os.environ if environ is None else environ
        values = {field: environ[variable] for field, variable in VARIABLES.items() if environ.get(variable)}
        return cls(**{"security_protocol": "PLAINTEXT", **values})

    @classmethod
    def from_file(cls, path) -> "KafkaSecurity":
        """The settings of a TOML file (keys: :data:`FIELDS`); its errors never quote the password."""
        import tomllib

        try:
            with open(path, "rb") as f:
                values = tomllib.load(f)
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise KafkaAccessError(f"cannot read the Kafka security file {str(path)!r}: "
                                   f"{getattr(error, 'strerror', None) or type(error).__name__}") from None
        unknown = set(values) - set(FIELDS)
        if unknown:
            raise KafkaAccessError(f"unknown keys in {str(path)!r}: {', '.join(sorted(unknown))} (known: {', '.join(FIELDS)})")
        if not all(isinstance(v, str) for v in values.values()):
            raise KafkaAccessError(f"every value of {str(path)!r} is a string")
        return cls(**values)


_DEFAULT: list = []  # the command's configuration (--kafka-security), once set


def use(security: KafkaSecurity | None) -> None:
    """Make ``security`` what every Kafka connection of this process uses when given none
    (``None``: the environment's again); the ``streamlearn`` command sets it from ``--kafka-security``."""
    _DEFAULT[:] = [] if security is None else [security]


def current(security: KafkaSecurity | None = None) -> KafkaSecurity:
    """``security`` itself, else what :func:`use` set, else the environment's."""
    if security is not None:
        return security
    return _DEFAULT[0] if _DEFAULT else KafkaSecurity.from_environment()


#: (bootstrap, security, client) a broker accepted: a hold-out topic reopened at every checkpoint is not probed again
_ACCEPTED: set = set()


def check_access(bootstrap: str, security: KafkaSecurity, client: str = "kafka-python", timeout: float = ACCESS_TIMEOUT) -> None:
    """Raise :class:`KafkaAccessError` (one line) when a reachable broker of ``bootstrap`` refuses
    this configuration: its certificate is not trusted, or it refuses the SASL credentials. A broker
    that cannot be reached at all is not judged here (the sources wait for one that is away)."""
    if security.security_protocol == "PLAINTEXT" or (bootstrap, security, client) in _ACCEPTED:
        return
    host, port = _first_address(bootstrap)
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError:
        return
    with sock:
        if security.tls:
            _tls_handshake(sock, host, security, timeout)
    if security.sasl:
        reason = (_confluent_refusal if client == "confluent" else _kafka_python_refusal)(bootstrap, security, timeout)
        if reason:
            raise KafkaAccessError(f"the Kafka broker {bootstrap} refused user {security.username!r} ({security.sasl_mechanism}): "
                                   f"{reason}")
    _ACCEPTED.add((bootstrap, security, client))


def _first_address(bootstrap: str) -> tuple[str, int]:
    first = bootstrap.split(",")[0].strip()
    host, _, port = first.rpartition(":")
    return host.strip("[]"), int(port)


def _tls_handshake(sock, host: str, security: KafkaSecurity, timeout: float) -> None:
    context = ssl.create_default_context(cafile=security.ca_file)
    if security.cert_file:
        context.load_cert_chain(security.cert_file, security.key_file)
    sock.settimeout(timeout)
    try:
        with context.wrap_socket(sock, server_hostname=host):
            pass
    except ssl.SSLCertVerificationError as error:
        raise KafkaAccessError(f"the Kafka broker {host} is not trusted: {error.verify_message} "
                               f"(give the CA that signed its certificate: ca_file / {VARIABLES['ca_file']})") from None
    except (ssl.SSLError, OSError) as error:
        raise KafkaAccessError(f"no TLS connection to the Kafka broker {host}: {error}") from None


def _kafka_python_refusal(bootstrap: str, security: KafkaSecurity, timeout: float) -> str | None:
    """Why kafka-python could not bootstrap with these credentials (its last logged error), or ``None``."""
    import logging

    from kafka.admin import KafkaAdminClient

    class Errors(logging.Handler):
        def __init__(self):
            super().__init__(logging.ERROR)
            self.messages: list[str] = []

        def emit(self, record):
            self.messages.append(record.getMessage())

    seen, logger = Errors(), logging.getLogger("kafka")
    logger.addHandler(seen)
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=int(1000 * timeout),
                                 bootstrap_timeout_ms=int(1000 * timeout), **security.kafka_python())
        admin.close()
        return None
    except Exception as error:  # noqa: BLE001 - what the client says is the reason given
        said = (seen.messages[0] if seen.messages else str(error)).splitlines()[0][:200]
        return f"the SASL exchange did not complete (kafka-python: {said}); check the username, password and mechanism"
    finally:
        logger.removeHandler(seen)


def _confluent_refusal(bootstrap: str, security: KafkaSecurity, timeout: float) -> str | None:
    """Why librdkafka could not authenticate with these credentials, or ``None``."""
    import logging

    import confluent_kafka
    from confluent_kafka.admin import AdminClient

    quiet = logging.getLogger("streamlearn.kafka.probe")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False  # librdkafka's retries would print a line every 50 ms
    errors: list = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "error_cb": errors.append, "logger": quiet, **security.confluent()})
    try:
        admin.list_topics(timeout=timeout)
        return None
    except confluent_kafka.KafkaException as error:
        admin.poll(0)  # the error callbacks run here
        refused = [e for e in errors if e.name() == "_AUTHENTICATION"]  # librdkafka's local error names start with _
        return (refused[0] if refused else error.args[0]).str()[:300]
