"""Learning curves from a runner's metrics log (JSON lines) to a PNG."""

from __future__ import annotations

import json
import warnings

from ..extras import require


def read_metrics(path) -> list[dict]:
    """The metric lines of a log. Lines that are not metric lines are skipped, and so are
    lines that are not JSON objects, with a warning that names them (a log cut short, or
    another file): a curve with a gap says more than no curve."""
    rows, bad = [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                row = json.loads(line)
            except ValueError:
                bad.append(number)
                continue
            if isinstance(row, dict) and isinstance(row.get("prequential"), dict) and "learned" in row:
                rows.append(row)
    if bad:
        shown = ", ".join(map(str, bad[:5])) + (f" and {len(bad) - 5} more" if len(bad) > 5 else "")
        warnings.warn(f"{path}: line(s) {shown} are not JSON and were skipped", stacklevel=2)
    if not rows:
        raise ValueError(f"{path} holds no metric lines")
    return rows


def plot_metrics(path, output) -> None:
    """Accuracy, macro-F1 and log-loss (prequential, and hold-out when present) against
    the number of examples learned; a dotted line marks each change the learner detected, a dash-dot
    line each switch between the averaged model and its fast tracker."""
    matplotlib = require("matplotlib", "plot", "streamlearn plot")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(path)
    x = [r["learned"] for r in rows]
    # where the learner detected a change: the first line whose count of changes is higher
    changes, switches = ([r["learned"] for before, r in zip(rows, rows[1:]) if r.get(key, 0) > before.get(key, 0)]
                         for key in ("changes", "switches"))
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, key, title in zip(axes, ("accuracy", "macro_f1", "log_loss"), ("accuracy", "macro-F1", "log-loss")):
        for part, style in (("prequential", "-"), ("holdout", "--")):
            values = [(r.get(part) or {}).get(key) for r in rows]
            points = [(a, b) for a, b in zip(x, values) if b is not None]
            if points:
                ax.plot(*zip(*points), style, marker=".", label=part)
        for at in changes:
            ax.axvline(at, color="tab:red", lw=0.8, ls=":")
        for at in switches:
            ax.axvline(at, color="tab:gray", lw=0.6, ls="-.")
        notes = [text for text, marks in (("dotted: a change detected", changes), ("dash-dot: the predictor switched", switches))
                 if marks]
        ax.set_xlabel("examples learned" + (f" ({'; '.join(notes)})" if notes else ""))
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
