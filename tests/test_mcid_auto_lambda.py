"""``lam="auto"``: one model per λ of ``AUTO_LAMBDAS`` on the same stream, predictions by the one
with the best t²-weighted progressive accuracy (streamlearn/mcid.py's module docstring).

Each candidate is checked against a learner run alone with that λ, and the leader against
a selection recomputed from those learners' own test-then-train scores."""

from __future__ import annotations

import numpy as np
import pytest

import streamlearn
from streamlearn import InvalidParameterError, MulticlassLogisticRegression, MulticlassSVM
from streamlearn.adaptation import CHECK_EVERY
from streamlearn.mcid import AUTO_LAMBDAS


def _stream(n=600, d=30, k=5, seed=0):
    """Classes that appear over time and a noise level at which λ matters."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(k, d))
    y = rng.integers(0, k, n)
    y[: n // 4] %= 3  # the last two classes appear after the first quarter
    X = centres[y] + 2.0 * rng.normal(size=(n, d))
    return X, y


@pytest.mark.parametrize("cls", [MulticlassSVM, MulticlassLogisticRegression])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_every_candidate_is_the_learner_with_its_lambda_and_the_leader_has_the_best_weighted_hits(cls, batch_size):
    X, y = _stream()
    # without restarts: the leader's mistakes restart every candidate, which a learner alone does not see
    auto = cls(lam="auto", batch_size=batch_size, adapt=False)
    alone = [cls(lam=lam, batch_size=batch_size, adapt=False) for lam in AUTO_LAMBDAS]
    merit = np.zeros(len(AUTO_LAMBDAS))
    leader = 0  # the leader changes only once a step that is a multiple of CHECK_EVERY is learned
    leaders = []
    # chunks of a multiple of every batch size: no row is left pending between calls, so the merits
    # recomputed here count every row at its step, as the learner does
    for start in range(0, len(y), 48):
        Xb, yb = X[start : start + 48], y[start : start + 48]
        n_learned = (auto.n_pending + len(yb)) // batch_size * batch_size - auto.n_pending
        got = auto.score_and_learn(Xb, yb)
        scores = [model.score_and_learn(Xb, yb) for model in alone]
        hits = [s.argmax(axis=1) == model.class_indices(yb) for s, model in zip(scores, alone)]
        step = (start + np.arange(len(yb))) // batch_size + 1
        for r in range(n_learned):  # each learned row: scored by the leader in force at its step
            np.testing.assert_array_equal(got[r], scores[leader][r])
            for i in range(len(AUTO_LAMBDAS)):
                merit[i] += float(step[r]) ** 2 * hits[i][r]
            if (r + 1) % batch_size == 0 and step[r] % CHECK_EVERY == 0:
                leader = int(np.argmax(merit))
        # rows left pending are scored by the model as it is after the step, its leader's
        np.testing.assert_array_equal(got[n_learned:], scores[leader][n_learned:])
        assert auto.selected_lam == AUTO_LAMBDAS[leader]
        leaders.append(auto.selected_lam)
    for i, model in enumerate(alone):
        np.testing.assert_array_equal(auto.candidate_stores[i].dense(), model.weight_store.dense())
    best = alone[AUTO_LAMBDAS.index(auto.selected_lam)]
    np.testing.assert_array_equal(auto.weight_matrix(), best.weight_matrix())
    assert list(auto.predict_many(X[:100])) == list(best.predict_many(X[:100]))
    assert auto.n_steps == best.n_steps


def test_auto_moves_away_from_the_default_when_another_lambda_predicts_better():
    """Noisy labels (30 % flipped), where the strongest regularisation predicts best."""
    rng = np.random.default_rng(1)
    centres = rng.normal(size=(10, 50))
    y = rng.integers(0, 10, 3000)
    X = centres[y] + 3.0 * rng.normal(size=(3000, 50))
    y = np.where(rng.random(3000) < 0.3, rng.integers(0, 10, 3000), y)
    auto = MulticlassSVM(lam="auto", fit_intercept=False)  # the stream is built for a model through the origin
    auto.learn_many(X, y)
    accuracy = {}
    for lam in AUTO_LAMBDAS:
        model = MulticlassSVM(lam=lam, fit_intercept=False)
        hits = model.score_and_learn(X, y).argmax(axis=1) == model.class_indices(y)
        accuracy[lam] = hits[1500:].mean()
    assert accuracy[1e-3] > accuracy[1e-4] + 0.01, accuracy  # the stream is one where λ matters
    assert auto.selected_lam == 1e-3, accuracy


def test_auto_resumes_bit_for_bit_from_its_state():
    X, y = _stream()
    whole = MulticlassSVM(lam="auto", batch_size=2)
    whole.learn_many(X, y)
    first = MulticlassSVM(lam="auto", batch_size=2)
    first.learn_many(X[:301], y[:301])  # one row left pending
    resumed = streamlearn.learner_from_state(first.export_state())
    resumed.learn_many(X[301:], y[301:])
    assert resumed.selected_lam == whole.selected_lam
    np.testing.assert_array_equal(resumed.candidate_merits, whole.candidate_merits)
    for a, b in zip(resumed.candidate_stores, whole.candidate_stores):
        np.testing.assert_array_equal(a.dense(), b.dense())


@pytest.mark.parametrize("bad", ["Auto", "", "1e-4", 0.0, float("nan")])
def test_lam_other_than_a_positive_number_or_auto_is_refused(bad):
    with pytest.raises(InvalidParameterError, match="lam must be"):
        MulticlassSVM(lam=bad)


def test_lam_none_is_the_learners_default():
    assert MulticlassSVM(lam=None).selected_lam == MulticlassSVM.default_lam == 3e-4


def test_a_state_with_the_wrong_number_of_candidates_is_refused():
    model = MulticlassSVM(lam="auto")
    model.learn_one({"a": 1.0}, "x")
    state = model.export_state()
    state["model"]["other_candidates"] = state["model"]["other_candidates"][:1]
    with pytest.raises(ValueError, match="weight sets"):
        streamlearn.learner_from_state(state)


def test_cli_trains_with_lam_auto(tmp_path, capsys):
    from streamlearn.service.checkpoint import CheckpointStore
    from streamlearn.service.cli import main

    X, y = _stream(n=200)
    path = tmp_path / "train.svm"
    path.write_text("".join(f"{label} " + " ".join(f"{j}:{v:.4f}" for j, v in enumerate(row)) + "\n"
                            for row, label in zip(X, y)))
    assert main(["train", str(path), "--learner", "MulticlassSVM", "--param", "lam=auto",
                 "--checkpoint-dir", str(tmp_path / "ckpt")]) == 0
    payload = CheckpointStore(str(tmp_path / "ckpt")).load_latest()
    model = streamlearn.learner_from_state(payload["learner"])
    assert model.lam == "auto" and model.selected_lam in AUTO_LAMBDAS and model.n_steps == 200
