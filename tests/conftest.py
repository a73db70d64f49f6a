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
