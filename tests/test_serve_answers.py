"""The service's answers to careless and hostile requests (issue 74), asked of the ASGI
application in this process (no server): authentication before routing, 405 with ``Allow``,
400 for a body nested too deeply, a clear word on a record whose ``x`` is not an object."""

from __future__ import annotations

import asyncio
import json

import pytest

from streamlearn.service.serve.app import create_app
from streamlearn.service.serve.holders import ModelHolder
from test_ordinary_inputs import run

TOKEN = "t0ken-" + "y" * 20


@pytest.fixture
def served(tmp_path, capsys):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"x": {"a": i / 10}, "y": i % 2}) + "\n" for i in range(50)))
    assert run(capsys, "train", data, "--checkpoint-dir", tmp_path / "m", "--quiet")[0] == 0
    holder = ModelHolder(tmp_path / "m", log=open(tmp_path / "log", "w"))
    holder.refresh()
    return holder


def ask(application, method: str, path: str, body: bytes = b"", token: str | None = TOKEN) -> tuple[int, dict, bytes]:
    """One request to an ASGI application: status, headers, body."""
    headers = [(b"content-length", str(len(body)).encode())] + ([(b"authorization", f"Bearer {token}".encode())] if token else [])
    scope = {"type": "http", "method": method, "path": path, "query_string": b"", "headers": headers, "root_path": ""}
    sent, messages = [], [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(application(scope, receive, send))
    return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]


def test_unauthenticated_requests_learn_nothing_of_the_paths(served):
    application = create_app(served, token=TOKEN)
    for path in ("/nothing", "/model", "/predict"):
        assert ask(application, "GET", path, token=None)[0] == 401, path
    assert ask(application, "GET", "/nothing")[0] == 404
    assert ask(application, "GET", "/healthz", token=None)[0] == 200


def test_a_wrong_method_is_405_with_allow(served):
    application = create_app(served, token=TOKEN)
    status, headers, _ = ask(application, "GET", "/predict")
    assert status == 405 and headers[b"allow"] == b"POST"
    status, headers, _ = ask(application, "POST", "/model", b"{}")
    assert status == 405 and headers[b"allow"] == b"GET"


def test_a_deep_body_is_400_and_a_list_for_x_is_named(served):
    application = create_app(served, token=TOKEN)
    deep = b'{"x": {"a": ' + b"[" * 1000 + b"1" + b"]" * 1000 + b"}}"
    status, _, body = ask(application, "POST", "/predict", deep)
    assert status == 400, body
    status, _, body = ask(application, "POST", "/predict", b'{"x": [1, 2, 3]}')
    assert status == 422 and b'\\"x\\" must be an object of features' in body
    status, _, body = ask(application, "POST", "/predict", b'{"x": {"a": 0.5}}')
    assert status == 200 and json.loads(body)["prediction"] in (0, 1)
