"""river's own peer test suite, ``river.checks``, for every learner and every test parameter set.

Each check is its own test (so a failure names the check); nothing is skipped: no learner
declares ``_unit_test_skips``.
"""

from __future__ import annotations

import gc

import pytest
from river import checks

import streamlearn

pytestmark = pytest.mark.slow  # whole processes or every river check: not in the quick subset

CASES = [
    pytest.param(cls(**params), check, id=f"{name}-{i}-{check.__name__}")
    for name, cls in sorted({**streamlearn.LEARNERS, **streamlearn.REGRESSORS}.items())
    for i, params in enumerate(cls._unit_test_params())
    for check in checks.yield_checks(cls(**params))
]


@pytest.fixture(scope="module", autouse=True)
def _collector_sees_only_what_the_checks_make():
    """river's memory check calls ``gc.collect()`` twice per learner and data set, and each call walks
    the whole heap of the session (its thousands of test items among it): the objects that exist when
    the checks start are kept out of the collector's walks (``gc.freeze``) until they end. What the
    checks make is collected as before; the check measures the model's own size, not the heap."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize(("model", "check"), CASES)
def test_river_check(model, check):
    assert not model._unit_test_skips(), "no river check may be skipped"
    check(model.clone())


def test_every_learner_is_covered():
    covered = {p.values[0].__class__.__name__ for p in CASES}
    assert covered == set(streamlearn.LEARNERS) | set(streamlearn.REGRESSORS)
