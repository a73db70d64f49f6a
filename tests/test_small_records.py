"""The MCID learners' one-example road in C (streamlearn.mcid.small_records): every example it serves
leaves the model bit for bit where the general road (numba kernels, Python watch, tracker choice and
calibration) leaves it — through restarts, tracker switches, renormalisations, the intercept's settling
and the temperature's refits — and the examples it cannot serve go the general road."""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
from river.datasets import synth

import streamlearn
from streamlearn import (MulticlassLogisticRegression, MulticlassPerceptron, MulticlassSVM,
                         OneVsRestLogisticRegression, OneVsRestPegasos)
from streamlearn.binning import BINNED_COLUMNS, MAX_BINNED_NONZEROS
from streamlearn.mcid import small_records
from helpers import assert_same_state
from test_mcid_reference import learner_matrix, make_stream, reference_mcid

LEARNERS = [MulticlassLogisticRegression, MulticlassSVM, MulticlassPerceptron, OneVsRestPegasos,
            OneVsRestLogisticRegression]

needs_road = pytest.mark.skipif(small_records.compiled_road is None,
                                reason="the C road is not built (no C compiler at install)")


class CountingRoad:
    """The compiled road, counting the examples each use of it served (returned something for): its
    ``score`` answering a class ("predict") or a dict ("scores"), its ``learn``."""

    def __init__(self, road):
        self.road, self.served = road, {"predict": 0, "learn": 0, "scores": 0}

    def score(self, *args):
        out = self.road.score(*args)
        self.served["predict" if args[7] is None else "scores"] += out is not None  # (args[7]: the answer asked)
        return out

    def learn(self, *args):
        out = self.road.learn(*args)
        self.served["learn"] += out is not None
        return out


@functools.lru_cache(maxsize=2)  # the tests only read the stream: one generation per length
def flipped_stream(n=6000, wide=False) -> tuple:
    """Sine's concept flipped three times (restarts), then a turning hyperplane (tracker switches), with
    now and then a name never seen before carrying an int value (the general road's examples), a bool
    value (the general road's always), a NumPy float (the C road's once its name is known); ``wide``: every
    seventh row with more nonzero values than bins take (``MAX_BINNED_NONZEROS``), every fifth with names on
    either side of the feature columns that have bins (``BINNED_COLUMNS``)."""
    flips = [itertools.islice(synth.Sine(seed=q, classification_function=q % 2), n // 8) for q in range(4)]
    turning = itertools.islice(synth.Hyperplane(seed=5, n_features=4, mag_change=0.05, sigma=0.5), n // 2)
    out = []
    for i, (x, y) in enumerate(itertools.chain(*flips, turning)):
        x = {f"h{j}" if isinstance(j, int) else j: v for j, v in x.items()}  # names whose order keys are not their columns' order
        if i % 97 == 0:
            x[f"new{i}"] = 1
        if i % 251 == 0:
            x["flag"] = True
        if i % 331 == 0:
            x[0] = np.float64(0.5)
        if wide and i % 7 == 0:
            x.update({f"w{j}": 0.5 + (i + j) % 3 for j in range(MAX_BINNED_NONZEROS)})
        if wide and i == 1:  # columns past those with bins (the general road registers them)
            x.update({f"v{j}": 0.5 for j in range(BINNED_COLUMNS + 60)})
        if wide and i > 1 and i % 5 == 0:
            x.update({f"v{BINNED_COLUMNS - 30 + (i + j) % 60}": 1.0 + j % 3 for j in range(6)})
        out.append((x, y))
    return tuple(out)


def test_the_road_is_built_wherever_the_ahead_of_time_kernels_are():
    if streamlearn.kernels.backend() == "aot":
        assert small_records.compiled_road is not None


SETTINGS = {"defaults": {}, "project": {"project": True, "calibrate": False, "bins": None},
            "last-iterate": {"average": False, "fit_intercept": False}, "no-adapt": {"adapt": False},
            "papers": {"adapt": False, "fit_intercept": False, "calibrate": False, "bins": None}}
#: every learner in every setting, and the two default learners with bins over rows too long for them
ROAD_CASES = [pytest.param(cls, params, id=f"{name}-{cls.__name__}") for name, params in SETTINGS.items() for cls in LEARNERS] + [
    pytest.param(cls, {"bins": 12}, id=f"bins-{cls.__name__}") for cls in (MulticlassLogisticRegression, MulticlassSVM)]


@needs_road
@pytest.mark.parametrize(("cls", "params"), ROAD_CASES)
def test_the_road_leaves_the_model_bit_for_bit_where_the_general_road_does(cls, params, monkeypatch):
    data = flipped_stream(wide=bool(params.get("bins")))
    counting = CountingRoad(small_records.compiled_road)
    monkeypatch.setattr(small_records, "compiled_road", counting)
    models, predictions = [], []
    for enabled in (True, False):
        monkeypatch.setattr(small_records, "ENABLED", enabled)
        model = cls(**params)
        model.renormalize_below = 0.5  # fold the scales into V every few steps, on both roads
        predictions.append([(model.predict_one(x), model.learn_one(x, y))[0] for x, y in data])
        models.append(model)
    assert predictions[0] == predictions[1]
    assert_same_state(models[0].export_state(), models[1].export_state())
    if params.get("adapt", True):  # restarts were exercised (and the tracker's choice: its counts are state)
        assert models[0].n_changes >= 1
        assert models[0].n_switches >= 1 or cls is not MulticlassLogisticRegression  # switches, at least there
    assert len(data) * 0.9 < counting.served["learn"] < len(data)  # most, not all, went the C road
    assert len(data) * 0.9 < counting.served["predict"] < len(data)


@needs_road
def test_probabilities_and_scores_after_the_road_are_the_general_roads(monkeypatch):
    data = flipped_stream(3000)
    models = []
    for enabled in (True, False):
        monkeypatch.setattr(small_records, "ENABLED", enabled)
        model = MulticlassLogisticRegression()
        for x, y in data:
            model.learn_one(x, y)
        models.append(model)
    probe = {"x1": 0.3, "x2": 0.7, "unseen": 2.0}
    assert models[0].temperature == models[1].temperature != 1.0  # refitted, on the same window
    assert models[0].predict_proba_one(probe) == models[1].predict_proba_one(probe)


def numpy_exp_is_the_c_librarys() -> bool:
    """Whether NumPy's float64 exponential gives the C library's bits here (math.exp is the C library's);
    on a CPU where NumPy vectorises its own, the last bit may differ."""
    values = -np.random.default_rng(0).exponential(5.0, 2000)
    return np.exp(values).tolist() == [math.exp(v) for v in values]


def led_stream(n=2000):
    """river's LED stream: 10 classes (numpy's row sum pairs terms from 8 on), int values."""
    return list(itertools.islice(synth.LED(seed=3, noise_percentage=0.1), n))


@needs_road
@pytest.mark.parametrize(("cls", "stream"), [(cls, flipped_stream) for cls in LEARNERS] +
                         [(MulticlassLogisticRegression, led_stream), (MulticlassSVM, led_stream),
                          (functools.partial(MulticlassSVM, bins=12), flipped_stream)],
                         ids=lambda v: getattr(v, "__name__", None))
def test_scores_and_probabilities_by_the_road_are_the_general_roads(cls, stream, monkeypatch):
    """decision_function_one and predict_one bit for bit; predict_proba_one too where NumPy's exponential
    is the C library's, else to the last bit but one, as the model learns, the tracker leading at times."""
    counting = CountingRoad(small_records.compiled_road)
    monkeypatch.setattr(small_records, "compiled_road", counting)
    model, compared, tracking = cls(), 0, 0
    exact = numpy_exp_is_the_c_librarys()
    for i, (x, y) in enumerate(stream(3000) if stream is flipped_stream else stream()):
        if i % 20 == 0 and model.classes:
            answers = []
            for enabled in (True, False):
                monkeypatch.setattr(small_records, "ENABLED", enabled)
                answers.append((model.decision_function_one(x), model.predict_proba_one(x), model.predict_one(x)))
            (scores, proba, label), (general_scores, general_proba, general_label) = answers
            assert scores == general_scores and label == general_label
            assert proba.keys() == general_proba.keys()
            if exact:
                assert proba == general_proba
            else:
                assert list(proba.values()) == pytest.approx(list(general_proba.values()), rel=4e-16, abs=1e-300)
            compared += 1
            tracking += model.tracking
        monkeypatch.setattr(small_records, "ENABLED", True)
        model.learn_one(x, y)
    assert tracking > 0 or cls is not MulticlassLogisticRegression or stream is led_stream
    assert counting.served["scores"] > 1.8 * compared - 20  # both calls took the road, but where a name was new


@needs_road
@pytest.mark.parametrize("cls", LEARNERS, ids=lambda c: c.__name__)
def test_the_road_is_the_papers_update(cls):
    """Through the C road alone (dicts of known names, plain floats, every class present from the
    first example), the averaged model and the tracker are Alg. 1 of the NumPy reference, with λ and
    with the tracker's 100 λ and no average, as long as no change was detected."""
    X, y = make_stream(n=400, seed=6)  # a stream on which no learner detects a change (asserted below)
    X = np.abs(X) + 0.1  # every entry nonzero: every name known after the first row
    y = np.concatenate([np.arange(6), y[6:]])
    model = cls(lam=0.05, project=True, fit_intercept=False, bins=None)
    model.learn_one({j: float(v) for j, v in enumerate(X[0])}, int(y[0]))
    counting = CountingRoad(small_records.compiled_road)
    small_records_road = small_records.compiled_road
    try:
        small_records.compiled_road = counting
        for row, label in zip(X[1:], y[1:]):
            model.learn_one({j: float(v) for j, v in enumerate(row)}, int(label))
    finally:
        small_records.compiled_road = small_records_road
    assert model.n_changes == 0 and counting.served["learn"] >= len(y) - 7  # new classes: the general road
    W_ref, W_avg_ref, _ = reference_mcid(cls.__name__, X, y, 0.05, 1, project=True, average_power=2.0)
    np.testing.assert_allclose(learner_matrix(model, X.shape[1]), W_ref, rtol=0, atol=1e-9 * max(1, np.abs(W_ref).max()))
    np.testing.assert_allclose(learner_matrix(model, X.shape[1], averaged=True), W_avg_ref, rtol=0, atol=1e-9 * max(1, np.abs(W_ref).max()))
    tracker_ref, _, _ = reference_mcid(cls.__name__, X, y, 5.0, 1, project=True)
    tracker = model.tracker_store.dense()[np.argsort(model.classes)]
    np.testing.assert_allclose(tracker, tracker_ref, rtol=0, atol=1e-9 * max(1, np.abs(tracker_ref).max()))


@needs_road
def test_examples_the_road_cannot_serve_get_the_general_roads_errors():
    model = MulticlassSVM()
    model.learn_one({"a": 1.0}, "x")
    for bad in ({"a": float("nan")}, {"a": "text"}, ["a"]):
        with pytest.raises(ValueError):
            model.learn_one(bad, "x")
        with pytest.raises(ValueError):
            model.predict_one(bad)
    assert model.n_steps == 1
