"""How a run shows its progress: a tqdm bar on a terminal, a JSON line every few seconds
elsewhere, or nothing (``streamlearn train --quiet``)."""

from __future__ import annotations

import time

from streamlearn.connectors.sinks import to_json_line


def progress_reporter(log, bar: bool, quiet: bool, counters: dict, prequential, every: float):
    """A callable taking each batch (``None``: the run ended) that updates a tqdm bar (``bar``),
    writes ``{"progress": counters + accuracy}`` to ``log`` at most every ``every`` seconds, or
    (``quiet``) does nothing."""
    if quiet:
        return lambda batch: None
    if bar:
        from tqdm import tqdm

        shown = tqdm(unit=" ex", file=log, dynamic_ncols=True, smoothing=0.1)

        def update(batch):
            if batch is None:
                shown.close()
                return
            shown.update(len(batch))
            accuracy = prequential.summary()["accuracy"]
            if accuracy is not None and counters["batches"] % 10 == 0:
                shown.set_postfix(acc=f"{accuracy:.4f}", dead=counters["dead_letters"], refresh=False)

        return update
    last = [time.monotonic()]

    def log_line(batch):
        if batch is None or time.monotonic() - last[0] < every:
            return
        last[0] = time.monotonic()
        log.write(to_json_line({"progress": {**counters, "accuracy": prequential.summary()["accuracy"]}}))
        log.flush()

    return log_line
