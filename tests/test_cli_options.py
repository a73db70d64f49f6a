"""Every option every ``streamlearn`` command offers, run: each subcommand's ``--help`` and a
minimal run, then each option in a run that shows its effect. A coverage test fails when an
option is added to the parser without a run here."""

from __future__ import annotations

import json
import shutil

import pytest

from streamlearn.service.checkpoint import CheckpointStore
from streamlearn.service.cli import COMMANDS, make_parser
from helpers import cli, libsvm_lines

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset


@pytest.fixture(scope="module")
def pristine_files(tmp_path_factory):
    """A LIBSVM training file with one bad line, a test file, a CSV and a model trained on the first
    (made once for the module: training it is a whole process)."""
    folder = tmp_path_factory.mktemp("cli-files")
    (folder / "train.svm").write_text("\n".join(libsvm_lines(600, seed=1)) + "\nnot a line\n")
    (folder / "test.svm").write_text("\n".join(libsvm_lines(200, seed=2)) + "\n")
    (folder / "t.csv").write_text("a,b,kind\n" + "".join(f"{i % 3},{(i * 7) % 5},{'xy'[i % 2]}\n" for i in range(60)))
    cli("train", folder / "train.svm", "--checkpoint-dir", folder / "model", "--quiet")
    return folder


@pytest.fixture
def files(pristine_files, tmp_path):
    """The module's input files (read only: a checkpoint names the files it was taken on), and each
    run's own copy of the model (a run may resume or overwrite it) in its own folder."""
    shutil.copytree(pristine_files / "model", tmp_path / "model")
    return {"train": pristine_files / "train.svm", "test": pristine_files / "test.svm", "csv": pristine_files / "t.csv",
            "model": tmp_path / "model", "dir": tmp_path}


def run_summary(result) -> dict:
    return json.loads(result.stdout.decode().splitlines()[0])


#: each option: a function running a command that uses it and checking the effect
RUNS = {}


def covers(*options):
    def register(function):
        for option in options:
            RUNS[option] = function
        return function

    return register


@covers("train:source", "train:--checkpoint-dir", "train:--quiet")
def run_train_basics(f):
    assert run_summary(cli("train", f["train"], "--checkpoint-dir", f["dir"] / "a", "--quiet"))["learned"] == 600


@covers("train:--format", "train:--label-column")
def run_format_and_label_column(f):
    renamed = f["dir"] / "table.data"
    renamed.write_text(f["csv"].read_text())
    summary = run_summary(cli("train", renamed, "--format", "csv", "--label-column", "kind", "--quiet"))
    assert summary["learned"] == 60 and summary["dead_letters"] == 0


@covers("train:--batch-records")
def run_batch_records(f):
    assert run_summary(cli("train", f["train"], "--batch-records", "7", "--quiet"))["batches"] == 601 // 7 + 1


@covers("train:--config", "train:--learner", "train:--param")
def run_config_learner_param(f):
    config = f["dir"] / "job.toml"
    config.write_text('learner = "MulticlassLogisticRegression"\nquiet = true\n[param]\nlam = 0.001\n')
    cli("train", f["train"], "--config", config, "--checkpoint-dir", f["dir"] / "b", "--param", "batch_size=2")
    state = CheckpointStore(f["dir"] / "b").load_latest()["learner"]
    assert state["class"] == "MulticlassLogisticRegression" and state["params"]["lam"] == 0.001
    assert state["params"]["batch_size"] == 2


@covers("train:--standardize")
def run_standardize(f):
    cli("train", f["train"], "--standardize", "--checkpoint-dir", f["dir"] / "c", "--quiet")
    assert CheckpointStore(f["dir"] / "c").load_latest()["learner"]["scaler"]["n_seen"] == 600


@covers("train:--checkpoint-every", "train:--checkpoint-interval", "train:--keep")
def run_checkpoint_cadence(f):
    cli("train", f["train"], "--checkpoint-dir", f["dir"] / "d", "--checkpoint-every", "100", "--checkpoint-interval",
        "1000", "--keep", "2", "--batch-records", "50", "--quiet")
    assert len(CheckpointStore(f["dir"] / "d").paths()) == 2
    assert (f["dir"] / "d" / "metrics.jsonl").read_text().count("\n") == 7  # 6 every 100 learned, and the last


@covers("train:--resume", "train:--overwrite", "train:--init-from")
def run_resume_overwrite_init(f):
    again = cli("train", f["train"], "--checkpoint-dir", f["model"], "--resume", "--quiet")
    assert run_summary(again)["learned"] == 600  # nothing left to learn
    cli("train", f["test"], "--checkpoint-dir", f["model"], "--overwrite", "--quiet")
    assert CheckpointStore(f["model"]).load_latest()["runner"]["counters"]["learned"] == 200
    cli("train", f["train"], "--checkpoint-dir", f["dir"] / "e", "--init-from", f["model"], "--quiet")
    assert CheckpointStore(f["dir"] / "e").load_latest()["learner"]["model"]["t"] == 800


@covers("train:--max-classes")
def run_max_classes(f):
    result = cli("train", f["train"], "--max-classes", "2", "--checkpoint-dir", f["dir"] / "mc", "--quiet")
    refused = run_summary(result)["dead_reasons"]["refused-class-limit"]
    assert refused > 100 and run_summary(result)["learned"] + refused == 600  # 5 classes in the data
    assert len(CheckpointStore(f["dir"] / "mc").load_latest()["learner"]["labels"]["labels"]) == 2


@covers("train:--predictions", "train:--proba")
def run_predictions(f):
    cli("train", f["train"], "--predictions", f["dir"] / "pred.jsonl", "--proba", "--quiet")
    lines = [json.loads(l) for l in (f["dir"] / "pred.jsonl").read_text().splitlines()]
    assert len(lines) == 600 and all("proba" in l and "prediction" in l for l in lines)


@covers("train:--serve")
def run_train_serve(f):
    """The service starts with the job and stops with it (tests/test_serve.py asks it questions)."""
    result = cli("train", f["train"], "--serve", "127.0.0.1:0", "--quiet")
    assert "streamlearn: serving the live model at http://127.0.0.1:" in result.stderr.decode()
    assert run_summary(result)["learned"] == 600
    for bad in (":x", ":80000", ":-1", "8080"):
        taken = cli("train", f["train"], "--serve", bad, "--quiet", check=False)
        assert taken.returncode == 2 and b"--serve: takes [HOST]:PORT" in taken.stderr


@covers("train:--holdout")
def run_holdout(f):
    assert run_summary(cli("train", f["train"], "--holdout", "0.2", "--quiet"))["holdout_final"]["n"] > 50


@covers("train:--metrics", "train:--dead-letter", "train:--max-errors")
def run_sinks_and_max_errors(f):
    result = cli("train", f["train"], "--metrics", f["dir"] / "m.jsonl", "--dead-letter", f["dir"] / "dead.jsonl",
                 "--max-errors", "0", "--quiet", check=False)
    assert result.returncode == 3
    assert (f["dir"] / "dead.jsonl").read_text().count("\n") == 1 and (f["dir"] / "m.jsonl").exists()


@covers("train:--passes")
def run_passes(f):
    assert run_summary(cli("train", f["train"], "--passes", "3", "--quiet"))["learned"] == 1800


@covers("serve:--checkpoint-dir", "serve:--host", "serve:--port", "serve:--max-age", "serve:--max-body", "serve:--reload-interval")
def run_serve(f):
    """A service over an empty directory: 503 until a model is trained into it, then reloaded
    within the interval; a body over --max-body is refused with 413."""
    import subprocess
    import time
    import urllib.error
    import urllib.request

    from helpers import PYTHON

    served = f["dir"] / "served"
    served.mkdir()
    service = subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "serve", "--checkpoint-dir", str(served), "--host", "127.0.0.1",
                                "--port", "0", "--max-age", "600", "--max-body", "100", "--reload-interval", "0.2"],
                               stderr=subprocess.PIPE, text=True)
    try:
        url = service.stderr.readline().split()[2].rstrip("/")

        def status(path, body=None):
            try:
                return urllib.request.urlopen(urllib.request.Request(url + path, data=body), timeout=30).status
            except urllib.error.HTTPError as error:
                return error.code

        assert status("/healthz") == 503
        cli("train", f["test"], "--checkpoint-dir", served, "--quiet")
        deadline = time.monotonic() + 60  # the first load imports the learner: its time follows the machine's load
        while status("/healthz") != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert status("/healthz") == 200 and status("/predict", b'{"x": {"1": 1.0}}') == 200
        assert status("/predict", json.dumps({"x": {str(j): 1.0 for j in range(1, 30)}}).encode()) == 413
    finally:
        service.terminate()
        service.communicate(timeout=30)
    assert service.returncode == 0
    for option, bad in (("--port", "80000"), ("--max-body", "0"), ("--reload-interval", "0"), ("--max-age", "-1"),
                        ("--max-age", "nan")):
        refused = cli("serve", "--checkpoint-dir", served, option, bad, check=False)
        assert refused.returncode == 2 and f"{option}: ".encode() in refused.stderr, (option, refused.stderr)


@covers("predict:source", "predict:--checkpoint", "predict:--output", "predict:--proba", "predict:--overwrite")
def run_predict(f):
    out = f["dir"] / "p.jsonl"
    cli("predict", f["test"], "--checkpoint", f["model"], "--output", out, "--proba")
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 200 and abs(sum(rows[0]["proba"].values()) - 1.0) < 1e-9
    again = cli("predict", f["test"], "--checkpoint", f["model"], "--output", out, check=False)
    assert again.returncode == 1 and b"holds lines already: --overwrite replaces them" in again.stderr
    cli("predict", f["test"], "--checkpoint", f["model"], "--output", out, "--overwrite")
    assert out.read_text().count("\n") == 200


@covers("predict:--format", "predict:--label-column", "predict:--batch-records")
def run_predict_input_options(f):
    result = cli("predict", f["csv"], "--checkpoint", f["model"], "--format", "csv", "--label-column", "kind",
                 "--batch-records", "5", check=False)
    assert result.stdout.decode().count("\n") == 60
    # other data: predict needs no labels, so labels that are no class of the model are a warning
    assert result.returncode == 0 and b"warning: none of the 60 labels is a class of the model" in result.stderr


@covers("evaluate:source", "evaluate:--checkpoint", "evaluate:--format", "evaluate:--label-column",
        "evaluate:--batch-records")
def run_evaluate(f):
    result = cli("evaluate", f["test"], "--checkpoint", f["model"], "--format", "libsvm", "--batch-records", "9")
    assert json.loads(result.stdout)["n"] == 200
    table = cli("evaluate", f["csv"], "--checkpoint", f["model"], "--label-column", "kind", check=False)
    assert json.loads(table.stdout)["n"] == 60 and table.returncode == 1  # its labels are none of the model's


@covers("train:--no-header", "predict:--no-header", "evaluate:--no-header")
def run_no_header(f):
    headerless = f["dir"] / "headerless.csv"
    headerless.write_text("".join(f"{i % 3},{(i * 7) % 5},{'xy'[i % 2]}\n" for i in range(60)))  # 'x' not a number
    model = f["dir"] / "noheader"
    summary = run_summary(cli("train", headerless, "--no-header", "--label-column", "2", "--checkpoint-dir", model, "--quiet"))
    assert summary["learned"] == 60
    assert cli("predict", headerless, "--checkpoint", model, "--no-header", "--label-column", "2").stdout.decode().count("\n") == 60
    assert json.loads(cli("evaluate", headerless, "--checkpoint", model, "--no-header", "--label-column", "2").stdout)["n"] == 60


@covers("train:--weight-column", "predict:--weight-column", "evaluate:--weight-column", "train:--weighted-metrics",
        "evaluate:--weighted-metrics")
def run_weight_column(f):
    weighted = f["dir"] / "weighted.csv"  # the t.csv rows with a cost column
    weighted.write_text("a,b,cost,kind\n" + "".join(f"{i % 3},{(i * 7) % 5},{i % 3},{'xy'[i % 2]}\n" for i in range(60)))
    summary = run_summary(cli("train", weighted, "--label-column", "kind", "--weight-column", "cost", "--checkpoint-dir",
                              f["dir"] / "w", "--quiet"))
    assert (summary["learned"], summary["weightless"]) == (40, 20)  # cost 0: not learned
    # a model of t.csv reads the cost column as a weight, not as a feature it never learned
    cli("train", f["csv"], "--label-column", "kind", "--checkpoint-dir", f["dir"] / "t", "--quiet")
    read = [json.loads(cli("evaluate", weighted, "--checkpoint", f["dir"] / "t", *option).stdout)["unknown_features"]
            for option in ([], ["--weight-column", "cost"])]
    assert read[0] > 0.2 and read[1] == 0.0
    plain = cli("predict", weighted, "--checkpoint", f["dir"] / "t")
    told = cli("predict", weighted, "--checkpoint", f["dir"] / "t", "--weight-column", "cost")
    assert b"never seen" in plain.stderr and b"never seen" not in told.stderr and told.stdout.count(b"\n") == 60
    # --weighted-metrics: the cost-0 records weigh nothing in the figures, and the weight is reported
    counted = run_summary(cli("train", weighted, "--label-column", "kind", "--weight-column", "cost", "--checkpoint-dir",
                              f["dir"] / "wm", "--quiet", "--weighted-metrics"))
    assert counted["prequential"]["weight"] == sum(i % 3 for i in range(60)) - 1  # (less the first: no prediction)
    figures = json.loads(cli("evaluate", weighted, "--checkpoint", f["dir"] / "wm", "--weighted-metrics").stdout)
    assert figures["weight"] == sum(i % 3 for i in range(60)) and figures["n"] == 60


@covers("train:--id-column", "predict:--id-column", "evaluate:--id-column")
def run_id_column(f):
    keyed = f["dir"] / "keyed.csv"  # the t.csv rows with an id column
    keyed.write_text("a,b,ref,kind\n" + "".join(f"{i % 3},{(i * 7) % 5},{1000 + i},{'xy'[i % 2]}\n" for i in range(60)))
    cli("train", keyed, "--label-column", "kind", "--id-column", "ref", "--checkpoint-dir", f["dir"] / "k", "--quiet",
        "--predictions", f["dir"] / "k.jsonl")
    ids = [json.loads(line)["position"]["id"] for line in (f["dir"] / "k.jsonl").read_text().splitlines()]
    assert ids == [str(1000 + i) for i in range(60)]
    cli("train", f["csv"], "--label-column", "kind", "--checkpoint-dir", f["dir"] / "t2", "--quiet")  # a model without ids
    told = cli("predict", keyed, "--checkpoint", f["dir"] / "t2", "--id-column", "ref")
    assert [json.loads(line)["position"]["id"] for line in told.stdout.decode().splitlines()] == ids
    read = [json.loads(cli("evaluate", keyed, "--checkpoint", f["dir"] / "t2", *option).stdout)["unknown_features"]
            for option in ([], ["--id-column", "ref"])]
    assert read[0] > 0.5 and read[1] == 0.0  # the ids are not read as a feature the model never learned


@covers("learners:names")
def run_learners(f):
    text = cli("learners", "PrimalGradientSolver", "MulticlassPGS").stdout.decode()
    assert text.startswith("PrimalGradientSolver: ") and "\nMulticlassPGS: " in text and "    classes: tuple" in text
    # each parameter with the first sentence of its description (issue 73: a list of names without a word)
    described = [line for line in text.splitlines() if line.startswith("        ")]
    assert len(described) >= 10 and all(len(line) < 130 for line in described) and "        The norm, in (1, 2]." in text


@covers("inspect:directory", "inspect:--json")
def run_inspect(f):
    assert json.loads(cli("inspect", f["model"], "--json").stdout)["counters"]["learned"] == 600
    text = cli("inspect", f["model"]).stdout.decode()
    assert "learned 600" in text and text.startswith("checkpoint ")


@covers("plot:metrics_file", "plot:--output")
def run_plot(f):
    cli("plot", f["model"] / "metrics.jsonl", "-o", f["dir"] / "curves.png")
    assert (f["dir"] / "curves.png").read_bytes()[:4] == b"\x89PNG"


@covers("serve:--token-file", "serve:--no-auth", "serve:--certfile", "serve:--keyfile", "train:--token-file", "train:--no-auth",
        "train:--certfile", "train:--keyfile")
def run_service_security(f):
    """The token and HTTPS options of both services (tests/test_serve.py tries them further)."""
    import ssl
    import subprocess
    import urllib.error
    import urllib.request

    from helpers import PYTHON, self_signed_certificate

    (f["dir"] / "token").write_text("t0ken-" + "z" * 20)
    cert, key = self_signed_certificate(f["dir"])
    trusting = ssl.create_default_context(cafile=str(cert))

    def status(url, token=None):
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            return urllib.request.urlopen(request, timeout=30, context=trusting).status
        except urllib.error.HTTPError as error:
            return error.code

    service = subprocess.Popen([PYTHON, "-m", "streamlearn.service.cli", "serve", "--checkpoint-dir", str(f["model"]), "--port", "0",
                                "--host", "0.0.0.0", "--no-auth", "--token-file", str(f["dir"] / "token"),
                                "--certfile", str(cert), "--keyfile", str(key)], stderr=subprocess.PIPE, text=True)
    try:
        port = service.stderr.readline().split()[2].rstrip("/").rsplit(":", 1)[1]
        url = f"https://127.0.0.1:{port}/model"
        assert status(url) == 401 and status(url, "t0ken-" + "z" * 20) == 200
    finally:
        service.terminate()
        service.wait(timeout=30)
    result = cli("train", f["train"], "--serve", "0.0.0.0:0", "--no-auth", "--token-file", f["dir"] / "token",
                 "--certfile", cert, "--keyfile", key, "--quiet")
    assert "serving the live model at https://0.0.0.0:" in result.stderr.decode() and run_summary(result)["learned"] == 600


def parser_options() -> set:
    """``command:option`` for every option (and positional) of every command."""
    options = set()
    for command in COMMANDS:
        for action in make_parser([command]).commands[command].arguments:
            if action.dest == "help":
                continue
            options.add(f"{command}:{action.option_strings[-1] if action.option_strings else action.dest}")
    return options


def test_every_option_of_every_command_has_a_run_here():
    import test_cli_options_kafka

    assert test_cli_options_kafka.covers is covers  # its runs register themselves in RUNS
    missing = parser_options() - set(RUNS)
    assert missing == set(), "options without a run in tests/test_cli_options.py or test_cli_options_kafka.py"


@pytest.mark.parametrize("run", [run for run in dict.fromkeys(RUNS.values()) if run.__module__ == __name__],
                         ids=lambda run: run.__name__)
def test_each_option_runs(run, files):
    run(files)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_has_help(command):
    result = cli(command, "--help")
    assert result.returncode == 0 and b"usage: streamlearn " + command.encode() in result.stdout
