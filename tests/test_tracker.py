"""The fast tracker beside the averaged model (streamlearn/adaptation.py, TrackerChoice; the MCID
solver's second weight store): it takes the predictions over on a continuously drifting stream,
predictions then use its weights, and learn_many, learn_one and a restored learner agree bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from streamlearn import MulticlassLogisticRegression, MulticlassSVM, OneVsRestPegasos
from streamlearn.adaptation import CHECK_EVERY, TRACKER_LAM_FACTOR, TrackerChoice
from streamlearn.base import INTERCEPT_NAME


def _rotating(n=8000, d=6, seed=0, still=0):
    """Two classes split by a hyperplane that stays put for ``still`` examples, then turns once
    around in the rest of the ``n`` (continuous drift)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    theta = 2 * np.pi * np.maximum(np.arange(n) - still, 0) / (n - still)
    y = (np.cos(theta) * X[:, 0] + np.sin(theta) * X[:, 1] > 0).astype(np.int64)
    return X, y


def _prequential_hits(model, X, y, chunk):
    hits = np.zeros(len(y), bool)
    for start in range(0, len(y), chunk):
        scores = model.score_and_learn(X[start : start + chunk], y[start : start + chunk])
        if scores.shape[1]:
            hits[start : start + chunk] = scores.argmax(axis=1) == model.class_indices(y[start : start + chunk])
    return hits


@pytest.mark.parametrize("cls", [MulticlassLogisticRegression, MulticlassSVM, OneVsRestPegasos])
def test_the_tracker_follows_a_turning_concept_the_averaged_model_cannot(cls):
    X, y = _rotating()
    adapting, fixed = cls(bins=None), cls(adapt=False, bins=None)  # (the scores below: the weights times the raw row)
    hits, hits_fixed = _prequential_hits(adapting, X, y, 1), _prequential_hits(fixed, X, y, 1)
    assert adapting.n_switches >= 1 and adapting.tracking and fixed.n_switches == 0 and not fixed.tracking
    assert hits[4000:].mean() > 0.9, hits[4000:].mean()
    assert hits_fixed[4000:].mean() < 0.75, hits_fixed[4000:].mean()
    # predictions use the tracker's weights while it leads
    x = X[-1]
    tracker = adapting.weight_matrix()
    np.testing.assert_array_equal(tracker, adapting.tracker_store.dense())
    assert not np.allclose(tracker, adapting.weight_matrix(averaged=True))  # not the averaged model's
    row = np.zeros(adapting.feature_space.n_columns)
    row[adapting.feature_space.columns(list(range(len(x))), grow=False)] = x
    row[adapting.feature_space.columns([INTERCEPT_NAME], grow=False)] = adapting.intercept_value
    scores = adapting.decision_function_one(dict(enumerate(x)))
    np.testing.assert_allclose([scores[c] for c in adapting.classes], tracker @ row, rtol=1e-12)


def test_the_averaged_model_keeps_the_predictions_on_a_stationary_stream():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(6000, 6))
    y = (X[:, 0] - X[:, 2] > 0).astype(np.int64)
    model = MulticlassSVM()
    model.learn_many(X, y)
    assert not model.tracking
    np.testing.assert_array_equal(model.weight_matrix(), model.weight_matrix(averaged=True))


@pytest.mark.parametrize("batch_size", [1, 3])
def test_learn_many_equals_the_learn_one_loop_with_switches(batch_size):
    X, y = _rotating(n=5000)
    rows = [dict(enumerate(x)) for x in X]
    one, many = MulticlassLogisticRegression(batch_size=batch_size), MulticlassLogisticRegression(batch_size=batch_size)
    hits_one = np.zeros(len(y), bool)
    for i, (x, c) in enumerate(zip(rows, y)):
        if one.classes:
            hits_one[i] = one.predict_one(x) == c
        one.learn_one(x, c)
    hits_many = np.zeros(len(y), bool)
    for start in range(0, len(rows), 777):
        scores = many.score_and_learn(rows[start : start + 777], y[start : start + 777])
        hits_many[start : start + 777] = scores.argmax(axis=1) == many.class_indices(y[start : start + 777])
    assert one.n_switches >= 1 and one.n_switches == many.n_switches and one.tracking == many.tracking
    if batch_size == 1:  # with larger groups learn_one's predictions see the model before the group's step
        np.testing.assert_array_equal(hits_one[1:], hits_many[1:])
    np.testing.assert_array_equal(one.weight_matrix(averaged=True), many.weight_matrix(averaged=True))
    np.testing.assert_array_equal(one.tracker_store.dense(), many.tracker_store.dense())
    assert one.export_state()["model"]["tracker"]["choice"] == many.export_state()["model"]["tracker"]["choice"]


def test_a_restored_learner_goes_on_exactly_with_the_tracker_leading():
    X, y = _rotating()
    whole, first = MulticlassSVM(), MulticlassSVM()
    whole.learn_many(X, y)
    cut = 5000 + CHECK_EVERY // 2  # between two checks: pending mistakes are part of the state
    first.learn_many(X[:cut], y[:cut])
    resumed = type(first).from_state(first.export_state())
    resumed.learn_many(X[cut:], y[cut:])
    assert whole.n_switches >= 1 and resumed.n_switches == whole.n_switches and resumed.tracking == whole.tracking
    np.testing.assert_array_equal(resumed.weight_matrix(), whole.weight_matrix())
    np.testing.assert_array_equal(resumed.tracker_store.dense(), whole.tracker_store.dense())
    assert resumed.export_state()["model"]["tracker"]["choice"] == whole.export_state()["model"]["tracker"]["choice"]


def test_the_tracker_lambda_is_a_multiple_of_the_learners():
    assert MulticlassSVM(lam=1e-3).tracker_lam == TRACKER_LAM_FACTOR * 1e-3
    assert MulticlassSVM(lam="auto").tracker_lam == TRACKER_LAM_FACTOR * MulticlassSVM.default_lam
    assert MulticlassSVM(adapt=False).tracker_store is None and MulticlassSVM(adapt=False).n_switches == 0


def test_the_choice_waits_for_a_check_and_forgets_old_mistakes():
    choice = TrackerChoice()
    choice.count(0, 3)
    assert not choice.tracking  # nothing decided between checks
    choice.check(CHECK_EVERY)
    assert not choice.tracking and choice.switches == 0
    for _ in range(200):  # the tracker's early mistakes fade; the model now errs more
        choice.count(2, 1)
        choice.check(CHECK_EVERY)
    assert choice.tracking and choice.switches == 1
    restored = TrackerChoice.restore(choice.export())
    assert restored.export() == choice.export()


@pytest.mark.slow
def test_switches_are_counted_in_the_metrics_log_inspect_metrics_and_plot(tmp_path):
    """The runner's counters carry the tracker's switches as they carry detected changes."""
    import json

    import matplotlib.pyplot as plt
    from prometheus_client import generate_latest

    from helpers import cli
    from streamlearn.service.plotting import plot_metrics
    from streamlearn.service.serve import ModelHolder, make_metrics

    X, y = _rotating(n=12000, still=4000)
    stream = tmp_path / "turning.jsonl"
    stream.write_text("".join(json.dumps({"x": {f"f{j}": v for j, v in enumerate(x.tolist())}, "y": int(c)}) + "\n"
                              for x, c in zip(X, y)))
    ck = tmp_path / "ck"
    # without bins the averaged model lags the turn long enough for the tracker to lead again and again
    cli("train", stream, "--checkpoint-dir", ck, "--checkpoint-every", "500", "--param", "bins=none", "--quiet")
    lines = [json.loads(line) for line in (ck / "metrics.jsonl").read_text().splitlines()]
    assert lines[-1]["switches"] > lines[0]["switches"]
    assert json.loads(cli("inspect", ck, "--json").stdout)["counters"]["switches"] == lines[-1]["switches"]
    text = generate_latest(make_metrics(ModelHolder(ck))[0]).decode()
    assert f"streamlearn_tracker_switches {float(lines[-1]['switches'])}" in text
    drawn = []
    real_axvline = plt.Axes.axvline
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plt.Axes, "axvline", lambda ax, x, **kw: drawn.append((x, kw["ls"])) or real_axvline(ax, x, **kw))
        plot_metrics(ck / "metrics.jsonl", tmp_path / "curve.png")
    first_switch = next(line["learned"] for before, line in zip(lines, lines[1:]) if line["switches"] > before["switches"])
    assert (first_switch, "-.") in drawn


def test_a_mix_hands_the_predictions_back_to_the_shared_model():
    X, y = _rotating()
    model = MulticlassSVM()
    model.learn_many(X, y)
    assert model.tracking
    switches, tracker = model.n_switches, model.tracker_store.dense()
    model.load_mixing_state(**model.mixing_state())
    assert not model.tracking and model.n_switches == switches + 1
    np.testing.assert_array_equal(model.tracker_store.dense(), tracker)  # its weights are kept
    np.testing.assert_array_equal(model.weight_matrix(), model.weight_matrix(averaged=True))


def _reference_adapting(rows, y, group, model, tracker, n_classes, t, lam, tracker_lam, loss, average_weight,
                        watch, choice):
    """learn_groups_adapting written out in Python: spans cut at the multiples of CHECK_EVERY
    (adaptation.learn_watched), two calls of learn_groups per span (checked against the NumPy
    reference of 000 Alg. 1 in test_mcid_reference), adaptation.mistakes_of, the Python watch
    (PageHinkleyUp, checked against river's in test_adaptation), TrackerChoice, and the restart
    of MCIDLearner._restart / ScaledWeights.restart_average."""
    from streamlearn.adaptation import average_weight_of, learn_watched, mistakes_of, restart_step
    from streamlearn.kernels import compiled

    mcid = compiled("mcid")
    indptr, indices, data = rows
    K = model[0].shape[1]
    scores = np.full((len(y), K), -np.inf)
    state = {"t": t, "n": n_classes, "w": average_weight}

    def learn_between(first, last):
        lo, hi = first * group, last * group
        span = (indptr[lo : hi + 1], indices, data, y[lo:hi], np.ones(0), group)
        model_scores, tracker_scores = np.full((hi - lo, K), -np.inf), np.full((hi - lo, K), -np.inf)
        n_before = state["n"]
        mcid.learn_groups(*span, *tracker, d_of(model), state["n"], state["t"], tracker_lam, loss, False, False, False,
                          1e-30, 2.0, state["w"], tracker_scores)
        state["t"], state["n"], state["w"] = mcid.learn_groups(*span, *model, d_of(model), state["n"], state["t"], lam,
                                                               loss, False, False, True, 1e-4, 2.0, state["w"], model_scores)
        model_missed, tracker_missed = mistakes_of(model_scores, y[lo:hi], n_before), mistakes_of(tracker_scores, y[lo:hi], n_before)
        choice.count(model_missed.sum(), tracker_missed.sum())
        predicting = tracker_scores if choice.tracking else model_scores
        scores[lo:hi] = predicting
        return tracker_missed if choice.tracking else model_missed

    def restart():
        restarted = restart_step(state["t"], group)
        if restarted != state["t"]:
            state["t"], state["w"] = restarted, average_weight_of(restarted, 2.0)
            model[3][:] = 0.0
            model[4][:] = state["w"] * model[1]

    learn_watched(watch, (len(indptr) - 1) // group, learn_between, restart,
                  lambda: choice.check(CHECK_EVERY * group))
    return (state["t"], state["n"], state["w"]), scores


def d_of(store):
    return store[0].shape[0]


@pytest.mark.parametrize("loss", ["SOFTMAX", "CRAMMER_SINGER", "OVR_HINGE"])
@pytest.mark.parametrize("group", [1, 3])
def test_the_adapting_kernel_is_the_python_watch_tracker_and_choice_between_spans(loss, group):
    """kernels/mcid.learn_groups_adapting against _reference_adapting, on a stream whose labels are
    permuted half way (the watch restarts the schedule, the tracker takes over), from a state
    in the middle of a span, and the predicting one's scores at each row's turn."""
    from streamlearn.adaptation import ChangeWatch, fading_of, watch_params
    from streamlearn.kernels import codes, compiled

    mcid = compiled("mcid")
    rng = np.random.default_rng(7)
    n, d, K = 1500, 6, 3
    X = rng.normal(size=(n, d))
    y = np.argmax(X[:, :K], axis=1)
    y[n // 2 :] = (y[n // 2 :] + 1) % K
    y[:3] = np.arange(3)  # every class before the change (indices in order of first appearance)
    indptr = np.arange(0, n * d + 1, d, dtype=np.int64)
    rows = (indptr, np.tile(np.arange(d, dtype=np.int64), n), X.ravel())

    def stores():
        return [np.zeros((d, K)), np.ones(K), np.zeros(K), np.zeros((d, K)), np.zeros(K)]

    watch, choice = ChangeWatch(), TrackerChoice()
    watch.steps = 5  # a state in the middle of a span
    ref_model, ref_tracker = stores(), stores()
    expected, expected_scores = _reference_adapting(rows, y, group, ref_model, ref_tracker, 0, 5, 1e-3, 0.1,
                                                    getattr(codes, loss), average_weight_of_five(), watch, choice)
    assert watch.changes >= 1 and choice.switches >= 1, (watch.changes, choice.switches)

    model, tracker = stores(), stores()
    watch_state, choice_state = ChangeWatch(), TrackerChoice()
    watch_state.steps = 5
    watch_array, choice_array = watch_state.as_array(), choice_state.as_array()
    scores, spare = np.full((n, K), -np.inf), np.full((n, K), -np.inf)
    got = mcid.learn_groups_adapting(*rows, y, np.ones(0), group, *model, d, 0, 5, 1e-3, getattr(codes, loss), False, False, True,
                                     1e-4, 2.0, average_weight_of_five(), *tracker, 0.1, 1e-30, K, watch_array,
                                     watch_params(group, 2.0), choice_array, fading_of(CHECK_EVERY * group), scores, spare)
    assert got == expected
    watch_state.load_array(watch_array)
    choice_state.load_array(choice_array)
    assert watch_state.export() == watch.export() and choice_state.export() == choice.export()
    usable = (n // group) * group
    np.testing.assert_array_equal(scores[:usable], expected_scores[:usable])
    for a, b in zip(model + tracker, ref_model + ref_tracker):
        np.testing.assert_array_equal(a, b)


def average_weight_of_five():
    from streamlearn.adaptation import average_weight_of

    return average_weight_of(5, 2.0)
