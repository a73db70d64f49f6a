"""``streamlearn serve``: answer predictions over HTTP from the newest checkpoint of a directory that
a running ``streamlearn train`` writes, reloading each new checkpoint.

Endpoints (JSON in and out):

* ``POST /predict`` — one record ``{"x": {feature: value, ...}}`` or a list of them (a label,
  if present, is ignored; a key ``"17"`` names the integer feature 17 of a model that has it and
  no feature named ``"17"``, as one learned from LIBSVM does): ``{"prediction": label}`` or
  ``{"predictions": [...]}``; with ``?proba=1`` the probabilities of every class too. A malformed
  body, a value that is not a finite number (a boolean is not one), a body over ``max_body``
  bytes: a 4xx answer with a message.
* ``GET /model`` — learner, parameters, classes, records learned, checkpoint path, sequence and age.
* ``GET /healthz`` — 200 with a model whose checkpoint is younger than ``max_age``; 503 before the
  first model is loaded and when the newest checkpoint is older than ``max_age``.
* ``GET /`` — a live page: the learning curves (prequential and held-out accuracy, throughput,
  dead letters over records learned, from ``GET /curves``) and the served model, redrawn every
  2 s with uPlot, which the package ships (``streamlearn/service/static``).
* ``GET /metrics`` — Prometheus text: requests by endpoint and status, latency histogram, model
  age, records learned, prequential accuracy and log-loss and dead letters from the last line of
  the directory's ``metrics.jsonl``, reloads and skipped (corrupt) checkpoints.

Hot reload (:mod:`.holders`): a thread looks at the directory every ``reload_interval`` seconds; a
newer checkpoint is loaded aside and swapped in with one reference assignment, so a request in
flight finishes on the model it started with and every answer comes from one whole checkpoint.
A corrupt newest checkpoint is skipped and reported (stderr, ``/metrics``), never served.

The HTTP side is uvicorn's (:mod:`.server`): request parsing, keep-alive, timeouts and TLS are a
maintained server's work. The application (:mod:`.app`) is plain ASGI: ``app(checkpoint_dir)``
mounts in a user's own FastAPI or Starlette app. Optional bearer-token authentication.
"""

from ...extras import require_all  # noqa: E402

# the serve extra, whole, before anything is loaded or learned: `train --serve` fails at its start, not after training
require_all(("uvicorn", "httptools", "orjson", "prometheus_client"), "serve", "streamlearn's service")

from .app import app, create_app  # noqa: E402 - after the check above
from .holders import LiveHolder, LiveModel, LoadedModel, ModelHolder  # noqa: E402
from .prometheus import make_metrics  # noqa: E402
from .records import BadRequest, integer_names, predict  # noqa: E402
from .server import ServiceConfigError, check_exposure, read_token, serve  # noqa: E402

__all__ = ["BadRequest", "LiveHolder", "LiveModel", "LoadedModel", "ModelHolder", "ServiceConfigError", "app",
           "check_exposure", "create_app", "integer_names", "make_metrics", "predict", "read_token", "serve"]
