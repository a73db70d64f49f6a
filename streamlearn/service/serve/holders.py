"""What the service serves: the newest intact checkpoint of a directory, reloaded when a newer
one is written (:class:`ModelHolder`), or a running trainer's own model (:class:`LiveHolder`,
``train --serve``); and the metrics log's curves for the live page.

>>> import tempfile
>>> holder = ModelHolder(tempfile.mkdtemp())
>>> holder.current is None, holder.refresh()
(True, False)
"""

from __future__ import annotations

import json
import pathlib
import sys
import threading

from streamlearn.connectors.sinks import json_key

from ..checkpoint import CheckpointError, CheckpointStore, restore_learner


class LoadedModel:
    """A learner restored from one checkpoint, with what ``/model`` reports about it."""

    def __init__(self, payload: dict, identity: tuple | None = None):
        self.model = restore_learner(payload)
        self.path = pathlib.Path(payload["path"])
        self.identity = identity  # the file's (path, inode, size, mtime) when it was read: see file_identity
        self.sequence = payload["sequence"]
        self.created = payload["created"]
        self.counters = payload["runner"]["counters"]
        self.info = {"learner": type(self.model).__name__, "params": self.model._get_params(),
                     "classes": [json_key(c) for c in self.model.classes], "records_learned": self.counters["learned"],
                     "checkpoint": str(self.path), "sequence": self.sequence, "created": self.created}


def file_identity(path: pathlib.Path) -> tuple:
    """What tells one checkpoint file from another of the same name: a run started over with
    ``--overwrite`` writes its sequences 1, 2, ... again, and a file copied in half-written is
    rewritten whole under its name (a new inode, size or time each time)."""
    stat = path.stat()
    return str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns


class ModelHolder:
    """The model being served: the newest intact checkpoint of ``directory`` (see the module docstring)."""

    def __init__(self, directory, log=None, metrics_path=None):
        self.store = CheckpointStore(directory)
        self.directory = pathlib.Path(directory)
        self.metrics_path = pathlib.Path(metrics_path) if metrics_path else self.directory / "metrics.jsonl"
        self.log = log or sys.stderr
        self.current: LoadedModel | None = None
        self.reloads = 0
        self.skipped: set[tuple] = set()  # identities of the corrupt checkpoints seen (each reported once)
        self._lock = threading.Lock()  # one refresh at a time
        self._curves = None  # ((size, mtime) of the metrics log, its columns)

    def refresh(self) -> bool:
        """Load the newest intact checkpoint unless it is the file served (:func:`file_identity`);
        whether it loaded one."""
        with self._lock:
            for path in reversed(self.store.paths()):
                try:
                    identity = file_identity(path)
                except FileNotFoundError:  # dropped by the trainer's --keep while we looked
                    continue
                if self.current is not None and identity == self.current.identity:
                    return False
                if identity in self.skipped:
                    continue
                try:
                    payload = self.store.load(path)
                    payload["path"] = str(path)
                    loaded = LoadedModel(payload, identity)
                except CheckpointError as error:  # damaged, or a model that cannot be rebuilt
                    self.skipped.add(identity)
                    print(f"streamlearn serve: skipped {path.name}: {error}", file=self.log, flush=True)
                    continue
                except FileNotFoundError:
                    continue
                except OSError as error:  # unreadable: skipped as a damaged one is
                    self.skipped.add(identity)
                    print(f"streamlearn serve: skipped {path.name}: {error.strerror or error}", file=self.log, flush=True)
                    continue
                self.current = loaded  # one assignment: requests in flight keep the model they took
                self.reloads += 1
                settle_garbage()
                return True
            return False

    def watch(self, interval: float, stop: threading.Event) -> None:
        """Refresh every ``interval`` seconds until ``stop`` is set (the reload thread's loop)."""
        while not stop.wait(interval):
            try:
                self.refresh()
            except Exception as error:  # noqa: BLE001 - a bad file must not end the reload thread
                print(f"streamlearn serve: reload failed: {error}", file=self.log, flush=True)

    #: most points a curve of the live page gets (a long log is thinned evenly, its last line kept)
    MAX_POINTS = 5000

    def curves(self) -> dict:
        """The metrics log as columns for the live page: records learned, prequential and
        held-out accuracy (``null`` where absent), examples/s and dead letters per line."""
        path = self.metrics_path
        try:
            stat = path.stat()
        except OSError:
            return {key: [] for key in self._CURVES}
        if self._curves is None or self._curves[0] != (stat.st_size, stat.st_mtime_ns):
            lines = []
            with open(path, "rb") as f:
                for raw in f:
                    try:
                        lines.append(json.loads(raw))
                    except ValueError:  # a line being written
                        continue
            if len(lines) > self.MAX_POINTS:
                step = -(-len(lines) // self.MAX_POINTS)
                lines = lines[::step] + ([lines[-1]] if (len(lines) - 1) % step else [])
            columns = {key: [get(line) for line in lines] for key, get in self._CURVES.items()}
            self._curves = ((stat.st_size, stat.st_mtime_ns), columns)
        return self._curves[1]

    _CURVES = {
        "learned": lambda line: line.get("learned"),
        "prequential_accuracy": lambda line: (line.get("prequential") or {}).get("accuracy"),
        "holdout_accuracy": lambda line: (line.get("holdout") or {}).get("accuracy"),
        "examples_per_s": lambda line: line.get("examples_per_s"),
        "dead_letters": lambda line: line.get("dead_letters"),
    }

    def metrics_line(self) -> dict | None:
        """The last line of the directory's metrics log (what the trainer logged at its last checkpoint)."""
        path = self.metrics_path
        try:
            with open(path, "rb") as f:
                f.seek(max(0, path.stat().st_size - 65536))
                lines = f.read().splitlines()
            return json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            return None


class LiveModel:
    """The model a running trainer is learning (``streamlearn train --serve``): read under the
    trainer's lock, which it holds while it learns a batch, so an answer never sees a
    half-learned batch. ``sequence`` counts the batches learned; ``created`` is when the last
    one was."""

    def __init__(self, runner, lock):
        self.runner, self.lock = runner, lock

    @property
    def model(self):
        return self.runner.model

    @property
    def sequence(self) -> int:
        return self.runner.counters["batches"]

    @property
    def created(self) -> float:
        return self.runner.last_update

    @property
    def counters(self) -> dict:
        return self.runner.counters

    @property
    def info(self) -> dict:
        with self.lock:
            model = self.runner.model
            return {"learner": type(model).__name__, "params": model._get_params(),
                    "classes": [json_key(c) for c in model.classes], "records_learned": self.runner.counters["learned"],
                    "checkpoint": self.runner.last_checkpoint_path, "sequence": self.sequence, "created": self.created}


class LiveHolder(ModelHolder):
    """What ``train --serve`` serves: the runner's own model (:class:`LiveModel`) once it has
    learned a record; nothing to reload."""

    def __init__(self, runner, lock, metrics_path=None, log=None):
        super().__init__(runner.store.directory if runner.store is not None else ".", log, metrics_path)
        self.live = LiveModel(runner, lock)

    @property
    def current(self):
        return self.live if self.live.runner.counters["learned"] else None

    @current.setter
    def current(self, value):  # ModelHolder.__init__ sets it
        pass

    def refresh(self) -> bool:
        return False


def settle_garbage() -> None:
    """Collect, then freeze what is alive (the model, numba's and NumPy's objects) out of the
    cyclic collector's reach: its full passes over them stalled requests for 50-200 ms."""
    import gc

    gc.collect()
    gc.freeze()
