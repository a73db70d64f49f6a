"""Helpers shared by the runtime tests: synthetic labelled streams, model comparison,
and running the ``streamlearn`` command."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import numpy as np

import streamlearn
from streamlearn.connectors.libsvm import parse_libsvm_bytes
from conftest import PATIENCE

PYTHON = sys.executable
#: the Kafka consumer clients every broker test runs with (streamlearn.connectors.kafka_clients)
KAFKA_CLIENTS = ["kafka-python", "confluent"]


def auto_intercept_values(X) -> np.ndarray:
    """The intercept feature's value for each row of ``X`` (a 2-D array or feature dicts) learned in
    order with ``intercept_scaling="auto"``, in plain NumPy (``streamlearn.intercept``'s rule): the root
    mean square of the nonzero values of the rows so far, clipped to [0.1, 1], settled after the
    first 1,000 rows with a nonzero value; 0.1 before any. A row's value is that of the rows before it."""
    rows = [np.array(list(x.values()), float) for x in X] if isinstance(X, list) else list(np.asarray(X, float))
    mean_squares = np.array([np.mean(r[r != 0] ** 2) if np.any(r) else np.nan for r in rows])
    counted = ~np.isnan(mean_squares)
    counted &= np.cumsum(counted) <= 1000
    n = np.cumsum(counted)
    total = np.cumsum(np.where(counted, mean_squares, 0.0))
    after = np.where(n > 0, np.clip(np.sqrt(total / np.maximum(n, 1)), 0.1, 1.0), 0.1)
    return np.concatenate([[0.1], after[:-1]])


def libsvm_lines(n: int, n_classes: int = 5, n_features: int = 40, seed: int = 0) -> list[str]:
    """A learnable multi-class stream as LIBSVM lines (class-dependent feature means)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_classes, n_features))
    lines = []
    for _ in range(n):
        y = int(rng.integers(n_classes))
        active = rng.choice(n_features, size=8, replace=False)
        active.sort()
        values = centers[y, active] + 0.5 * rng.normal(size=8)
        lines.append(f"{y + 1} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in zip(active, values)))
    return lines


def records(n: int, n_classes: int = 4, seed: int = 0) -> list[dict]:
    """The same kind of stream as ``{"x": {...}, "y": ...}`` records with string names."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_classes, 12))
    out = []
    for _ in range(n):
        y = int(rng.integers(n_classes))
        active = rng.choice(12, size=5, replace=False)
        out.append({"x": {f"f{j}": float(centers[y, j] + 0.3 * rng.normal()) for j in active}, "y": f"c{y}"})
    return out


def train_reference(text: bytes, learner: str = "MulticlassSVM", **params):
    """A model trained in-process on all valid LIBSVM lines of ``text``, in one go."""
    chunk = parse_libsvm_bytes(text)
    model = streamlearn.LEARNERS[learner](**params)
    model.learn_many(chunk.X, chunk.labels)
    return model


def train_reference_records(recs: list[dict], learner: str = "MulticlassSVM", **params):
    model = streamlearn.LEARNERS[learner](**params)
    for r in recs:
        model.learn_one(r["x"], r["y"])
    return model


def assert_same_state(a, b, path="state") -> None:
    """Two learner states (``export_state()``) are equal, arrays bit for bit."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, f"{path}: shape {a.shape} != {b.shape}"
        assert a.tobytes() == b.tobytes(), f"{path}: arrays differ"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for key in a:
            assert_same_state(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (u, v) in enumerate(zip(a, b)):
            assert_same_state(u, v, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def cli(*args, input=None, check=True, timeout=PATIENCE, **kwargs) -> subprocess.CompletedProcess:
    """Run ``python -m streamlearn.service.cli ARGS`` and return the completed process."""
    result = subprocess.run([PYTHON, "-m", "streamlearn.service.cli", *map(str, args)], input=input, capture_output=True,
                            timeout=timeout, env={**os.environ, "PYTHONUNBUFFERED": "1"}, **kwargs)
    if check and result.returncode != 0:
        raise AssertionError(f"streamlearn {' '.join(map(str, args))} exited {result.returncode}:\n{result.stderr.decode()}")
    return result


def self_signed_certificate(directory):
    """A certificate for 127.0.0.1 and its key, as PEM files (cryptography: a dependency of moto)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    (directory / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "key.pem").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                          serialization.NoEncryption()))
    return directory / "cert.pem", directory / "key.pem"


@contextlib.contextmanager
def broker_behind_tls(directory, users: dict | None = None):
    """A Tansu broker of its own behind a TLS front that it advertises (tests/broker_front.py),
    with a self-signed certificate made in ``directory``: yields ``(bootstrap, certificate, key, security)``,
    ``security`` the :class:`~streamlearn.connectors.kafka_security.KafkaSecurity` that trusts it. With ``users``
    (name → password) the front also asks for a SASL login, and ``security`` logs in as the first
    user with SCRAM-SHA-512."""
    from broker_front import BrokerFront
    from streamlearn.connectors.kafka_security import KafkaSecurity
    from localbroker import LocalBroker, free_port

    cert, key = self_signed_certificate(directory)
    port = free_port()
    broker = LocalBroker(advertised_port=port)
    broker.start()
    front = BrokerFront(broker.bootstrap, port, cert, key, users)
    front.start()
    if users:
        username, password = next(iter(users.items()))
        security = KafkaSecurity("SASL_SSL", ca_file=str(cert), sasl_mechanism="SCRAM-SHA-512", username=username,
                                 password=password)
    else:
        security = KafkaSecurity("SSL", ca_file=str(cert))
    try:
        yield front.bootstrap, cert, key, security
    finally:
        front.stop()
        broker.stop()
