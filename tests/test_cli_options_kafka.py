"""The ``streamlearn`` options that talk to a Kafka broker, run as tests/test_cli_options.py runs the
others (whose coverage test counts these): a file of its own so that the whole suite runs it beside
the session with the other broker-bound files (``conftest.BESIDE_GROUPS``), as its time goes to
waiting on idle timeouts, brokers and daemons."""

from __future__ import annotations

import json

import pytest

from streamlearn.service.checkpoint import CheckpointStore
from helpers import cli
from conftest import PATIENCE
from test_cli_options import covers, run_summary

pytestmark = pytest.mark.slow  # whole processes: not in the quick subset


@covers("train:--idle-timeout", "predict:--idle-timeout", "evaluate:--idle-timeout")
def run_idle_timeouts(f):
    """A topic on the test broker: each command ends once no message came for the timeout."""
    import time

    import msgpack

    from localbroker import create_topic, produce
    from helpers import records

    broker = f["broker"]()
    create_topic(broker, "idle")
    produce(broker, "idle", [msgpack.packb(r) for r in records(100, seed=5)])
    uri = f"kafka://{broker}/idle?group=options"
    start = time.monotonic()
    assert run_summary(cli("train", uri, "--idle-timeout", "2", "--checkpoint-dir", f["dir"] / "k", "--quiet"))["learned"] == 100
    assert cli("predict", uri, "--checkpoint", f["dir"] / "k", "--idle-timeout", "2").stdout.decode().count("\n") == 100
    assert json.loads(cli("evaluate", uri, "--checkpoint", f["dir"] / "k", "--idle-timeout", "2").stdout)["n"] == 100
    assert time.monotonic() - start < 180  # three commands of a 2 s idle timeout each, niced beside the session


@covers("train:--kafka-security", "predict:--kafka-security", "evaluate:--kafka-security")
def run_kafka_security(f):
    """A topic behind TLS (tests/test_kafka_security.py tries TLS and SASL further): each command
    reads it with the settings of the file."""
    import msgpack

    from localbroker import create_topic, produce
    from helpers import broker_behind_tls, records

    with broker_behind_tls(f["dir"]) as (bootstrap, cert, _, security):
        create_topic(bootstrap, "secured", security=security)
        produce(bootstrap, "secured", [msgpack.packb(r) for r in records(80, seed=6)], security=security)
        settings = f["dir"] / "kafka.toml"
        settings.write_text(f'security_protocol = "SSL"\nca_file = "{cert}"\n')
        uri, secured = f"kafka://{bootstrap}/secured?group=s", ("--kafka-security", settings, "--idle-timeout", "2")
        assert run_summary(cli("train", uri, *secured, "--checkpoint-dir", f["dir"] / "s", "--quiet"))["learned"] == 80
        assert cli("predict", uri, "--checkpoint", f["dir"] / "s", *secured).stdout.decode().count("\n") == 80
        assert json.loads(cli("evaluate", uri, "--checkpoint", f["dir"] / "s", *secured).stdout)["n"] == 80


@covers("train:--mix-topic", "train:--mix-every")
def run_mixing(f):
    """Two daemons of one group mix one model through a mixing topic (tests/test_scaleout.py
    runs three on MNIST, with kills): both end holding every record once, in the weights' count
    and in the feature bins' statistics (the default learner bins these 5-value records)."""
    import subprocess

    import msgpack

    from localbroker import create_topic, produce
    from helpers import PYTHON, records

    broker = f["broker"]()
    create_topic(broker, "mixed", 2)
    stream = records(400, seed=6)
    produce(broker, "mixed", [msgpack.packb(r) for r in stream], partitions=2)
    daemons = [subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "train", f"kafka://{broker}/mixed?group=mixers",
                                 "--mix-topic", "mixed-mix", "--mix-every", "50", "--idle-timeout", "2",
                                 "--checkpoint-dir", str(f["dir"] / f"mix{i}"), "--quiet"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    for daemon in daemons:
        _, err = daemon.communicate(timeout=PATIENCE)
        assert daemon.returncode == 0, err
    for i in range(2):
        mixing = json.loads(cli("inspect", f["dir"] / f"mix{i}", "--json").stdout)["mixing"]
        assert mixing["examples"] == sum(mixing["by_member"].values()) == 400
        assert mixing["covered"] == {"0": 200, "1": 200}
        stats = CheckpointStore(f["dir"] / f"mix{i}").load_latest()["learner"]["bins"]["stats"]
        values = [v for r in stream for v in r["x"].values()]
        assert stats["n_seen"] == 400
        assert sum(stats["sums"]) == pytest.approx(sum(values)) and sum(stats["squares"]) == pytest.approx(sum(v * v for v in values))


@covers("train:--broker-timeout")
def run_broker_timeout(f):
    """A broker of its own, killed while the daemon waits for messages: the daemon waits
    --broker-timeout seconds, then stops with exit code 1 after a final checkpoint."""
    import subprocess
    import time

    from localbroker import LocalBroker, create_topic
    from helpers import PYTHON

    broker = LocalBroker()
    broker.start()
    try:
        create_topic(broker.bootstrap, "away")
        daemon = subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "train", f"kafka://{broker.bootstrap}/away?group=o",
                                   "--broker-timeout", "1", "--checkpoint-dir", str(f["dir"] / "bt"), "--quiet"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
    finally:
        broker.stop(crash=True)
    _, err = daemon.communicate(timeout=PATIENCE)
    assert daemon.returncode == 1 and "(--broker-timeout 1); stopping; the model is saved in" in err, err
    assert CheckpointStore(f["dir"] / "bt").load_latest() is not None


#: the runs that start the test broker (through ``f["broker"]``), or a broker behind TLS of their own
ON_THE_BROKER = {run_idle_timeouts, run_mixing, run_kafka_security}


@pytest.mark.parametrize("run", [pytest.param(run, marks=[pytest.mark.kafka] if run in ON_THE_BROKER else [], id=run.__name__)
                                 for run in (run_idle_timeouts, run_kafka_security, run_mixing, run_broker_timeout)])
def test_each_kafka_option_runs(run, tmp_path, request):
    run({"dir": tmp_path, "broker": lambda: request.getfixturevalue("broker")})
