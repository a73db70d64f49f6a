"""The service floor: what runs a learner on a stream for months — the stream loop
(:mod:`.runner`), scoring without learning (:mod:`.evaluation`), checkpoints
(:mod:`.checkpoint`), metrics (:mod:`.metrics`), several daemons learning one model
(:mod:`.mixing`), predictions over HTTP (:mod:`.serve`), the ``streamlearn`` command
(:mod:`.cli`), and the sources and sinks of :mod:`connectors`.

The library (``streamlearn`` without this package) never imports it; this floor uses the
learners through their public surface only (``ARCHITECTURE.md``).
"""
