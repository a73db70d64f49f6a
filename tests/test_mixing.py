"""Model mixing (streamlearn.service.mixing): the fold is the identity for one member, the average of
the members' models for several from one base at weight 1/N, each change weighted by its share of
the examples learned beside it, keyed by names, and a mixed model learns on exactly as the model
it was written from."""

import copy
import time

import numpy as np
import pytest

from streamlearn import (ExtremeSVM, MulticlassLogisticRegression, MulticlassPerceptron, MulticlassSVM,
                         OneVsRestLogisticRegression, OneVsRestPegasos)
from streamlearn.service.checkpoint import pack, unpack
from streamlearn.service.mixing import MixState, check_mixable

MIXABLE = [MulticlassSVM, MulticlassLogisticRegression, MulticlassPerceptron, OneVsRestPegasos,
           OneVsRestLogisticRegression]


def dict_stream(n: int, seed: int, n_features: int = 30, n_classes: int = 5):
    """Dict rows whose names come in a seed-dependent order (members meet them differently)."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(n_classes, n_features))
    names = [f"f{j}" for j in rng.permutation(n_features)]
    y = rng.integers(n_classes, size=n)
    X = []
    for i in range(n):
        values = centers[y[i]] + rng.normal(size=n_features)
        keep = rng.random(n_features) < 0.3
        X.append({names[j]: float(values[j]) for j in np.flatnonzero(keep)})
    return X, [f"class-{k}" for k in y]


def aligned(model, labels: list, features: list, averaged: bool) -> np.ndarray:
    """The model's weights (or averaged sum) as a ``labels × features`` array, by name."""
    W = model.weight_store.dense_average(1.0) if averaged else model.weight_store.dense()
    out = np.zeros((len(labels), len(features)))
    rows = {label: i for i, label in enumerate(model.classes)}
    cols = {name: j for j, name in enumerate(model.feature_keys)}  # (with bins, their columns too)
    for i, label in enumerate(labels):
        for j, name in enumerate(features):
            if label in rows and name in cols:
                out[i, j] = W[rows[label], cols[name]]
    return out


@pytest.mark.parametrize("cls", MIXABLE)
def test_one_member_mixing_changes_nothing_and_the_model_learns_on_as_before(cls):
    X, y = dict_stream(600, seed=1)
    model = cls(lam=1e-3)
    model.learn_many(X[:100], y[:100])
    base = MixState.of(model)
    model.learn_many(X[100:300], y[100:300])
    twin = copy.deepcopy(model)
    assert base.fold(base.change(model, examples=200)) == 1.0  # nothing learned beside it: taken whole
    base.write_into(model)
    for averaged in (False, True):
        np.testing.assert_allclose(model.weight_matrix(averaged), twin.weight_matrix(averaged), rtol=1e-12, atol=1e-12)
    assert model.n_steps == twin.n_steps and base.examples == 200
    model.learn_many(X[300:], y[300:])  # the written state (scale 1, A = 0) goes on like the original
    twin.learn_many(X[300:], y[300:])
    for averaged in (False, True):
        np.testing.assert_allclose(model.weight_matrix(averaged), twin.weight_matrix(averaged), rtol=1e-9, atol=1e-9)
    # (predictions may differ by design: a mix hands them back from a member's fast tracker to the shared model)
    assert model.intercept_value == twin.intercept_value


@pytest.mark.parametrize("members", [2, 3])
def test_changes_from_one_base_fold_into_the_average_of_the_members_models(members):
    X, y = dict_stream(60, seed=2)
    start = MulticlassSVM(lam=1e-3)
    start.learn_many(X[:60], y[:60])
    base = MixState.of(start)
    models = []
    for i in range(members):  # each its own part, meeting names in its own order
        model = copy.deepcopy(start)
        part_X, part_y = dict_stream(280, seed=10 + i)
        model.learn_many(part_X, part_y)
        models.append(model)
    shared = base.copy()
    for model in models:
        shared.fold(base.change(model), weight=1 / members)
    labels, features = shared.labels, shared.features
    for averaged, got in ((False, shared.W), (True, shared.S)):
        mean = sum(aligned(m, labels, features, averaged) for m in models) / members
        np.testing.assert_allclose(got, mean, rtol=1e-12, atol=1e-12)
    assert shared.t == pytest.approx(sum(m.n_steps for m in models) / members, rel=1e-12)
    expected_weight = start.average_weight + sum(m.average_weight - start.average_weight for m in models) / members
    assert shared.average_weight == pytest.approx(expected_weight, rel=1e-12)
    written = [copy.deepcopy(m) for m in models]
    for model in written:
        shared.write_into(model)
    probe, _ = dict_stream(40, seed=99)
    predictions = [model.predict_many(probe) for model in written]
    assert all(list(p) == list(predictions[0]) for p in predictions)  # one model, whatever the member's name order


def test_hashed_features_mix_by_column():
    X, y = dict_stream(400, seed=3)
    start = MulticlassSVM(lam=1e-3, n_bits=6)
    base = MixState.of(start)
    a, b = copy.deepcopy(start), copy.deepcopy(start)
    a.learn_many(X[:200], y[:200])
    b.learn_many(X[200:], y[200:])
    shared = base.copy()
    for model in (a, b):
        shared.fold(base.change(model), weight=0.5)
    assert shared.features == a.feature_keys and shared.features[:: a.bins + 1] == list(range(64))  # each column, its bins
    rows_b = [b.classes.index(label) for label in shared.labels]
    rows_a = [a.classes.index(label) for label in shared.labels]
    np.testing.assert_allclose(shared.W, (a.weight_store.dense()[rows_a] + b.weight_store.dense()[rows_b]) / 2, atol=1e-12)


def test_a_change_travels_through_msgpack():
    X, y = dict_stream(200, seed=4)
    model = MulticlassLogisticRegression()
    base = MixState.of(model)
    model.learn_many(X, y)
    change = base.change(model, examples=200)
    travelled = unpack(pack(change))
    mixed, direct = base.copy(), base.copy()
    mixed.fold(travelled)
    direct.fold(change)
    np.testing.assert_array_equal(mixed.W, direct.W)
    np.testing.assert_array_equal(mixed.S, direct.S)
    assert (mixed.t, mixed.examples, mixed.labels, mixed.features) == (direct.t, 200, direct.labels, direct.features)


@pytest.mark.parametrize(("model", "message"), [
    (ExtremeSVM(), "ExtremeSVM cannot mix"),
    (MulticlassSVM(lam="auto"), "give it one λ"),
    (MulticlassSVM(standardize=True), "statistics do not mix"),
])
def test_learners_that_cannot_mix_are_refused_with_the_reason(model, message):
    with pytest.raises(ValueError, match=message):
        check_mixable(model)
    with pytest.raises(ValueError, match=message):
        MixState.of(model)


@pytest.mark.parametrize("weight", [0.0, -0.5, 1.5])
def test_a_weight_outside_0_1_is_refused(weight):
    state = MixState.of(MulticlassSVM())
    with pytest.raises(ValueError, match="weight must be in"):
        state.fold(state.change(MulticlassSVM()), weight=weight)


def test_each_change_is_weighted_by_its_share_of_the_examples_learned_beside_it():
    """Changes folded since a change's base were learned beside it: it takes n / (n + their
    examples). Members publishing in turn settle at 1/N each after the first round; a member
    left reading alone is taken whole, so it learns exactly as one learner would."""
    X, y = dict_stream(2400, seed=6)
    members = [MulticlassSVM(lam=1e-3) for _ in range(3)]
    shared = MixState.of(members[0])
    bases = [shared.copy() for _ in members]
    weights, start = [], 0

    def turn(i: int, n: int) -> float:
        nonlocal start
        members[i].learn_many(X[start : start + n], y[start : start + n])
        start += n
        weight = shared.fold(bases[i].change(members[i], examples=n))
        shared.write_into(members[i])
        bases[i] = shared.copy()
        return weight

    for _ in range(3):  # three rounds of three members taking turns, 200 examples each
        weights.append([turn(i, 200) for i in range(3)])
    assert weights[0] == pytest.approx([1, 1 / 2, 1 / 3]) and weights[1] == weights[2] == pytest.approx([1 / 3] * 3)
    assert turn(1, 100) == pytest.approx(100 / (100 + 200))  # member 2 folded 200 since member 1's base
    assert shared.examples == 1900
    alone = MulticlassSVM(lam=1e-3)  # the last member reads on alone: each change whole, as one learner
    shared.write_into(alone)
    for _ in range(2):
        assert turn(1, 200) == 1.0
    alone.learn_many(X[1900:2300], y[1900:2300])
    for averaged in (False, True):
        np.testing.assert_allclose(aligned(members[1], alone.classes, alone.feature_space.names, averaged),
                                   aligned(alone, alone.classes, alone.feature_space.names, averaged), rtol=1e-9, atol=1e-9)


def _restarted(model, X, y) -> None:
    """Make ``model`` see the classes of ``y`` swap until its watch restarts its schedule."""
    before = model.n_changes
    swapped = [f"class-{(int(label.split('-')[1]) + 1) % 5}" for label in y]
    model.learn_many(X, swapped)
    assert model.n_changes > before, "the class swap was not detected: the test needs a restart"


def test_members_that_restart_at_once_keep_a_positive_schedule_and_learn_on():
    """Two members learn the same change from one base and both restart their schedules (t and
    Σc go down); the second folds beside the first at 1/2. Added as differences the two drops
    would take t below 0 (a division by zero at the next step); blended, t and Σc stay between
    the members' own, and the shared model learns on."""
    X, y = dict_stream(6000, seed=8)
    members = [MulticlassSVM(lam=1e-3) for _ in range(2)]
    for member in members:
        member.learn_many(X[:4000], y[:4000])
    base = MixState.of(members[0])
    for i, member in enumerate(members):
        _restarted(member, X[4000 + 1000 * i : 5000 + 1000 * i], y[4000 + 1000 * i : 5000 + 1000 * i])
    states = [MixState.of(member) for member in members]
    changes = [base.change(member, examples=1000) for member in members]
    assert all(change["restarted"] for change in changes)
    shared = base.copy()
    assert [shared.fold(change) for change in changes] == [1.0, 0.5]
    assert min(s.t for s in states) <= shared.t <= max(s.t for s in states)
    assert min(s.average_weight for s in states) <= shared.average_weight <= max(s.average_weight for s in states)
    model = MulticlassSVM(lam=1e-3)
    shared.write_into(model)
    model.learn_many(X[:200], y[:200])
    assert np.isfinite(model.weight_matrix(True)).all()


def test_a_restarted_change_taken_whole_is_the_member_exactly():
    X, y = dict_stream(5000, seed=9)
    member = MulticlassSVM(lam=1e-3)
    member.learn_many(X[:4000], y[:4000])
    base = MixState.of(member)
    _restarted(member, X[4000:], y[4000:])
    shared = base.copy()
    assert shared.fold(base.change(member, examples=1000)) == 1.0
    model = MulticlassSVM(lam=1e-3)
    shared.write_into(model)
    assert model.n_steps == member.n_steps
    for averaged in (False, True):
        np.testing.assert_allclose(model.weight_matrix(averaged), member.weight_matrix(averaged), rtol=1e-9, atol=1e-12)


def test_a_change_of_no_examples_folds_nothing():
    """A member whose records since its last mix were all refused publishes a change of 0
    examples for its coverage; there is nothing to fold, and the fold must not fail on it."""
    X, y = dict_stream(400, seed=10)
    model = MulticlassSVM(lam=1e-3)
    model.learn_many(X[:200], y[:200])
    shared, idle = MixState.of(model), MixState.of(model)
    model.learn_many(X[200:], y[200:])
    shared.fold(idle.change(model, examples=200), weight=1.0)
    before = shared.copy()
    assert shared.fold(idle.change(MulticlassSVM(lam=1e-3), examples=0)) == 0.0
    assert shared.t == before.t and shared.examples == before.examples and (shared.W == before.W).all()


def test_coverage_tiles_each_partition_whatever_order_the_members_publish_in():
    """Members publish the ranges they learned; a member dies after learning (not publishing)
    part of its partition, another takes the partition over from the coverage: the accepted
    ranges tile every partition exactly once, and two members folding the same log agree."""
    from streamlearn.service.mixing import Coverage

    log = [
        ("a", {0: (0, 50), 1: (0, 30)}),
        ("b", {2: (0, 40)}),
        ("a", {0: (50, 90), 1: (30, 60)}),
        # a dies having learned 1: 60..80 unpublished; b takes partition 1 over from the coverage (60)
        ("b", {2: (40, 70), 1: (60, 75)}),
        ("a", {0: (90, 95), 1: (60, 80)}),  # a stale change published before a died: overlaps b's, skipped whole
        ("b", {0: (90, 120), 1: (75, 100)}),  # b owns everything now, from where the coverage stands
    ]
    folds = [Coverage(), Coverage()]
    decisions = [[coverage.accept(ranges) for _, ranges in log] for coverage in folds]
    assert decisions[0] == decisions[1] == [True, True, True, True, False, True]
    assert folds[0].covered == folds[1].covered == {0: 120, 1: 100, 2: 70}
    accepted = [ranges for (_, ranges), ok in zip(log, decisions[0]) if ok]
    for p, end in folds[0].covered.items():  # no gap, no overlap: each offset below the coverage once
        counts = np.zeros(end, int)
        for ranges in accepted:
            if p in ranges:
                counts[ranges[p][0] : ranges[p][1]] += 1
        assert (counts == 1).all(), p


def test_coverage_refuses_a_gap_a_backward_range_and_restores_from_its_export():
    from streamlearn.service.mixing import Coverage

    coverage = Coverage()
    assert coverage.accept({3: (10, 20)})  # a first claim may start anywhere (a topic trimmed by retention)
    assert not coverage.accept({3: (25, 30)})  # a gap: records 20..25 would be in nobody's change
    assert not coverage.accept({4: (9, 5)})
    assert Coverage(coverage.export()).covered == {3: 20}
    assert Coverage({"3": "20"}).accept({3: (20, 21)})  # as msgpack/JSON may bring the keys back


def test_members_folding_one_mixing_topic_hold_one_model(broker):
    """Two members publish their changes (and one stale change) to a real broker's mixing topic;
    each reads the whole log and folds it: the same model, the same coverage, the stale change
    skipped by both, and the shared model holds every accepted change's examples once."""
    from localbroker import create_topic
    from streamlearn.connectors.mixlog import MixLog
    from streamlearn.service.mixing import Coverage, fold_publications

    create_topic(broker, "mix-one-model")
    X, y = dict_stream(400, seed=5)
    start = MulticlassSVM()
    base = MixState.of(start)
    publications = []
    for seq, (member, rows, ranges) in enumerate([("a", slice(0, 150), {0: (0, 150)}),
                                                  ("b", slice(150, 300), {1: (0, 150)}),
                                                  ("b", slice(300, 400), {0: (100, 200)})]):  # overlaps a's 100..150
        model = copy.deepcopy(start)
        model.learn_many(X[rows], y[rows])
        publications.append({"member": member, "seq": seq, "members": 2, "ranges": ranges,
                             "change": base.change(model, examples=rows.stop - rows.start)})
    log = MixLog(broker, "mix-one-model")
    try:
        offsets = [log.publish(p) for p in publications]
        assert offsets == [0, 1, 2]
        read = log.read(0)
    finally:
        log.close()
    assert [offset for offset, _ in read] == offsets
    states, coverages = [], []
    for _ in range(2):  # each member folds the log on its own
        state, coverage = base.copy(), Coverage()
        assert fold_publications(state, coverage, [p for _, p in read]) == [True, True, False]
        states.append(state)
        coverages.append(coverage.covered)
    assert coverages[0] == coverages[1] == {0: 150, 1: 150}
    np.testing.assert_array_equal(states[0].W, states[1].W)
    assert states[0].examples == 300 and states[0].labels == states[1].labels
    direct = base.copy()
    for p in publications[:2]:
        direct.fold(p["change"])
    np.testing.assert_array_equal(states[0].W, direct.W)  # the broker carried the changes bit for bit


@pytest.mark.kafka
def test_a_member_reads_the_mixing_topic_to_its_end_from_any_offset(durable):
    """Tansu keeping its log in S3 answers ListOffsets with an old end (1 here, whatever was
    published since): a member reading on from where it had folded read nothing new, learned on
    from an old base and its changes entered at a small weight. Reads go to the end a fetch
    answers; what was just published may show a moment later, so each read is retried briefly."""
    from localbroker import create_topic
    from streamlearn.connectors.mixlog import MixLog

    create_topic(durable.bootstrap, "mix-read-on")
    writer, reader = MixLog(durable.bootstrap, "mix-read-on"), MixLog(durable.bootstrap, "mix-read-on")
    try:
        for seq in range(6):
            writer.publish({"member": "a", "seq": seq})
        for start in range(6):
            deadline = time.monotonic() + 10
            while (read := reader.read(start)) != [(o, {"member": "a", "seq": o}) for o in range(start, 6)]:
                assert time.monotonic() < deadline, (start, read)
                time.sleep(0.2)
    finally:
        writer.close()
        reader.close()


def test_bins_statistics_pool_every_members_records_once_and_the_members_hold_one_model():
    X, y = dict_stream(900, seed=4, n_features=6, n_classes=3)
    a = MulticlassLogisticRegression(lam=1e-3, bins=6)
    a.learn_many(X[:300], y[:300])
    b = copy.deepcopy(a)
    shared = MixState.of(a)
    a.learn_many(X[300:600], y[300:600])
    b.learn_many(X[600:], y[600:])
    changes = [unpack(pack(shared.change(member, examples=300))) for member in (a, b)]  # as the mixing topic carries them
    assert [shared.fold(change) for change in changes] == [1.0, 0.5]
    names = sorted({name for x in X for name in x})
    assert shared.bins["n_seen"] == 900
    sums = dict(zip(shared.bins["features"], shared.bins["sums"].tolist()))
    for name in names:  # every record's value counted once, whichever member learned it
        assert sums[name] == pytest.approx(sum(x.get(name, 0.0) for x in X), rel=1e-9)
    for member in (a, b):
        shared.write_into(member)
    probe = X[:50]
    assert a.decision_function_many(probe).tobytes() == b.decision_function_many(probe).tobytes()
    assert a.export_state()["bins"]["stats"]["n_seen"] == b.export_state()["bins"]["stats"]["n_seen"] == 900


def test_one_member_mixing_with_bins_changes_nothing():
    X, y = dict_stream(400, seed=2, n_features=5, n_classes=3)
    model = MulticlassSVM(lam=1e-3, bins=4)
    model.learn_many(X[:100], y[:100])
    base = MixState.of(model)
    model.learn_many(X[100:], y[100:])
    twin = copy.deepcopy(model)
    base.fold(base.change(model, examples=300))
    base.write_into(model)
    np.testing.assert_allclose(model.weight_matrix(True), twin.weight_matrix(True), rtol=1e-12, atol=1e-12)
    mine, theirs = model.export_state()["bins"]["stats"], twin.export_state()["bins"]["stats"]
    assert mine["n_seen"] == theirs["n_seen"] == 400
    np.testing.assert_allclose(mine["sums"][: len(theirs["sums"])], theirs["sums"][: len(mine["sums"])], rtol=1e-12)


def test_a_mixing_daemons_checkpoint_keeps_the_bins_statistics():
    from streamlearn.service.mixing import GroupMixer

    X, y = dict_stream(200, seed=3, n_features=4, n_classes=2)
    model = MulticlassSVM(lam=1e-3, bins=5)
    model.learn_many(X, y)
    mixer, again = GroupMixer(None, 10, "m"), GroupMixer(None, 10, "m")
    mixer.shared = MixState.of(model)
    again.restore(unpack(pack(mixer.export())))
    assert again.shared.bins["n_seen"] == 200 and again.shared.bins["features"] == mixer.shared.bins["features"]
    np.testing.assert_array_equal(again.shared.bins["sums"], mixer.shared.bins["sums"])
