"""Learning curves from a runner's metrics log (JSON lines) to a PNG."""

from __future__ import annotations

import json


def read_metrics(path) -> list[dict]:
    """The metric lines of a log (lines that are not metric lines are skipped)."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                row = json.loads(line)
                if "prequential" in row:
                    rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no metric lines")
    return rows


def plot_metrics(path, output) -> None:
    """Accuracy, macro-F1 and log-loss (prequential, and hold-out when present) against
    the number of examples learned."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = read_metrics(path)
    x = [r["learned"] for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for ax, key, title in zip(axes, ("accuracy", "macro_f1", "log_loss"), ("accuracy", "macro-F1", "log-loss")):
        for part, style in (("prequential", "-"), ("holdout", "--")):
            values = [(r.get(part) or {}).get(key) for r in rows]
            points = [(a, b) for a, b in zip(x, values) if b is not None]
            if points:
                ax.plot(*zip(*points), style, marker=".", label=part)
        ax.set_xlabel("examples learned")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
