"""``GET /metrics``: the service's Prometheus registry — requests by endpoint and status, latency,
and the served model's figures with the last line of the trainer's metrics log."""

from __future__ import annotations

import time


def make_metrics(holder):
    """The Prometheus registry of one service, and its request counter and latency histogram."""
    from prometheus_client import CollectorRegistry, Counter, Histogram
    from prometheus_client.core import GaugeMetricFamily

    registry = CollectorRegistry()
    requests = Counter("streamlearn_requests", "HTTP requests by endpoint and status", ["endpoint", "status"], registry=registry)
    latency = Histogram("streamlearn_request_seconds", "Time to answer a request", ["endpoint"], registry=registry,
                        buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5))

    class ModelCollector:
        def collect(self):
            loaded = holder.current
            yield GaugeMetricFamily("streamlearn_model_loaded", "1 once a model is served", value=float(loaded is not None))
            yield GaugeMetricFamily("streamlearn_reloads", "Checkpoints loaded so far", value=holder.reloads)
            yield GaugeMetricFamily("streamlearn_skipped_checkpoints", "Corrupt checkpoints skipped", value=len(holder.skipped))
            if loaded is not None:
                yield GaugeMetricFamily("streamlearn_model_age_seconds", "Age of the served checkpoint",
                                        value=max(0.0, time.time() - loaded.created))
                yield GaugeMetricFamily("streamlearn_model_sequence", "Sequence number of the served checkpoint", value=loaded.sequence)
                yield GaugeMetricFamily("streamlearn_records_learned", "Records learned by the served model",
                                        value=loaded.counters["learned"])
            line = holder.metrics_line()
            if line:
                prequential = line.get("prequential") or {}
                for key, name in (("accuracy", "accuracy"), ("log_loss", "log_loss")):
                    if prequential.get(key) is not None:
                        yield GaugeMetricFamily(f"streamlearn_prequential_{name}", f"Prequential {key} in the metrics log",
                                                value=prequential[key])
                yield GaugeMetricFamily("streamlearn_dead_letters", "Bad records in the metrics log", value=line.get("dead_letters", 0))
                yield GaugeMetricFamily("streamlearn_changes_detected", "Changes of the stream the learner detected (and restarted on)",
                                        value=line.get("changes", 0))
                yield GaugeMetricFamily("streamlearn_tracker_switches", "Times the predictions changed hands between the "
                                        "averaged model and the fast tracker", value=line.get("switches", 0))
                yield GaugeMetricFamily("streamlearn_examples_per_second", "Learning rate in the metrics log",
                                        value=line.get("examples_per_s", 0.0))

    registry.register(ModelCollector())
    return registry, requests, latency
