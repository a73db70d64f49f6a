"""Following a stream that changes: a watch on the prequential mistakes, and when to restart.

The papers' learners assume a stationary stream. With Pegasos' step ``1/(λt)`` and the shrink
``(1 − 1/t)``, ``W_t = −(1/(λt)) Σ_{s≤t} g_s`` (000, Eq. 14): every example ever learned keeps
an equal, permanent vote, and the ``t^q``-weighted average gives the old iterates most of the
weight until ``t`` is well past the change. A model that has learned ``T`` examples needs a
number of new ones that grows with ``T`` to follow a change.

:class:`ChangeWatch` runs the Page-Hinkley test (Page 1954; Hinkley 1971) of
``river.drift.PageHinkley`` with mode ``"up"`` (only a *rise* of the error is a change — a falling
learning curve is not; :class:`PageHinkleyUp` says why it is written out here) on each example's 0/1 prequential mistake: whether the model, as it stood
when the example arrived, predicted it wrongly. When the test fires, the learner restarts its
step schedule (:class:`~streamlearn.mcid.solver.MCIDLearner` restarts ``t`` at most at
``RESTART_EXAMPLES / batch_size``) and its average (the averaged iterate becomes the current
iterate): the weights are kept, so what was learned is not thrown away, but the old model now
weighs as much as ``RESTART_EXAMPLES`` examples instead of all of them, whatever the stream's
age. On a stationary stream the test does not fire (its mean error falls), and the learner is
the papers' exactly.

A restart answers an abrupt change; a stream that drifts a little all the time (a turning
hyperplane, moving cluster centres) never raises the error enough to fire the test, and the
averaged model trails it. So beside the averaged model runs a **fast tracker**: the same learner
with no average and :data:`TRACKER_LAM_FACTOR` times its λ (smaller weights, whose gradients stay
informative, and the last iterate, which moves with every step), learning every example from the
same step counter. :class:`TrackerChoice` keeps each model's prequential mistakes, fading by
``1/e`` over :data:`RECENT_EXAMPLES` examples, and whichever made fewer predicts — the "adaptive
combination" of a slow and a fast learner (Arenas-García, Figueiras-Vidal & Sayed, *Mean-square
performance of a convex combination of two adaptive filters*, IEEE TSP 2006), with a hard switch
instead of a convex mix so that probabilities keep one model's scores. On a stationary stream the
averaged model keeps the lead (it errs less), so predictions are the papers'; the tracker costs
one more weight matrix and step per example. The tracker is each learner's own: parameter mixing
(:mod:`streamlearn.service.mixing`) mixes the averaged models; a member's tracker goes on from its
own weights, and hands the predictions back to the shared model at each mix (so every member
predicts alike right after one) until it errs less again. The factor and the fading were chosen
on other seeds of the drift bench's streams than those it reports (``bench/README.md``).

Decisions take effect only at a step that is a multiple of :data:`CHECK_EVERY`, so ``learn_many``
equals the ``learn_one`` loop bit for bit: a kernel that learns a whole batch (the MCID solver with
one λ, ExtremeSVM's dense store) runs the same test, restart and choice inside its step
(:mod:`streamlearn.kernels.watch`, with :meth:`ChangeWatch.as_array`'s and
:meth:`TrackerChoice.as_array`'s state); the other learners cut their rows at those steps and
decide in Python between the spans (:func:`learn_watched`). The watch
is part of the learner's state (checkpoints resume it exactly). With ``lam="auto"`` the leader's
mistakes are watched and every candidate restarts. In a ``--mix-topic`` group each member watches
its own mistakes; a restart enters the shared model through the fold (:mod:`streamlearn.service.mixing`:
the weights are added like any change's, the restarted schedule — ``t`` and the averaged sums — is
blended in by interpolation, so that members restarting at once keep it positive).

Which learners adapt: by default (``adapt=True``) the MCID family, ``ExtremeSVM`` (its restart
sets ``t`` back and the averaged iterate to the current one, as MCID's) and the Primal Gradient
Solver (:class:`~streamlearn.PrimalGradientSolver`, :class:`~streamlearn.MulticlassPGS`; the
defaults protocol chose it for them under its age constraint: ``bench/options_bench.py``), whose
dual averaging keeps the sum of all gradients
``Lam``: its restart scales ``Lam`` by ``(t0+1)/(t+1)`` as ``t`` becomes ``t0``, which keeps
``w = ∇r*(Lam/((t+1)σ))`` (``∇r*`` is homogeneous of degree 1) while the old gradients come to
weigh as ``t0`` steps' (003, Fig. 1 line 8). Not ``PrimalGradientRegressor`` (a real target has
no mistake to watch), nor the least-squares family, whose models solve a ridge regression over
every example learned so far: on a changing stream they follow the change only as far as the new
examples outweigh the old ones — except ``CalibratedLeastSquares`` and ``StagewiseRegression``,
whose stream refits on the last ``window`` examples and so forgets by design. The fast tracker
runs beside the MCID learners only: PGS's default last iterate already moves with every step, and
an ExtremeSVM tracker (a second store of sparse class rows) is not built yet.

>>> import numpy as np
>>> watch = ChangeWatch()
>>> watch.observe(np.zeros(500, bool))          # 500 right predictions
>>> watch.observe(np.ones(100, bool))           # then every one wrong
>>> watch.change_seen
True
>>> watch.take_change(), watch.change_seen
(True, False)
"""

from __future__ import annotations

import functools

import numpy as np

from .scores import hide_unknown_classes
from .batches import SparseRows

#: the Page-Hinkley test's threshold on the cumulated rise of the mistake rate (examples' worth of
#: extra mistakes), the rise it tolerates, and no fading of that sum (river's default 0.9999 makes
#: the sum of a stationary error rate wander by tens, so its test fires every few ten thousand
#: examples): chosen on simulated error rates of 5–40 %, where it never fired in 900k examples
THRESHOLD, DELTA, ALPHA = 50.0, 0.02, 1.0
#: how many examples' worth of steps the model keeps after a restart
RESTART_EXAMPLES = 1000
#: a detected change is acted on at the next step that is a multiple of this
CHECK_EVERY = 32
#: the fast tracker's λ, as a multiple of the learner's own (see the module docstring)
TRACKER_LAM_FACTOR = 100.0
#: the examples over which the recent mistakes that choose between tracker and model fade by 1/e
RECENT_EXAMPLES = 1000


class PageHinkleyUp:
    """River's ``PageHinkley(mode="up")`` (river 0.26, ``river/drift/page_hinkley.py``), written
    out: importing ``river.drift`` loads its data sets and scikit-learn, seconds of start-up for
    every ``streamlearn`` command, and its state has no public export. Same arithmetic, same
    order; ``tests/test_adaptation.py`` checks it fires where river's does, example for example."""

    def __init__(self, threshold: float = THRESHOLD, delta: float = DELTA, alpha: float = ALPHA,
                 min_instances: int = 30):
        self.threshold, self.delta, self.alpha, self.min_instances = threshold, delta, alpha, min_instances
        self.drift_detected = False
        self._clear()

    def _clear(self) -> None:
        self.n, self.mean = 0.0, 0.0
        self.sum_increase, self.min_increase = 0.0, float("inf")

    def update(self, x: float) -> None:
        self.update_many([x])

    def update_many(self, xs: list) -> bool:
        """:meth:`update` with each of ``xs`` in turn (locals in the loop: it runs once per
        example); whether the test fired on any of them."""
        alpha, delta, threshold, min_instances = self.alpha, self.delta, self.threshold, self.min_instances
        n, mean, total, lowest, detected = self.n, self.mean, self.sum_increase, self.min_increase, self.drift_detected
        fired = False
        for x in xs:
            if detected:
                n, mean, total, lowest = 0.0, 0.0, 0.0, float("inf")
            n += 1.0
            mean += (x - mean) / n  # river.stats.Mean's update
            total = alpha * total + (x - mean) - delta
            if total < lowest:
                lowest = total
            detected = n >= min_instances and total - lowest > threshold
            fired = fired or detected
        self.n, self.mean, self.sum_increase, self.min_increase, self.drift_detected = n, mean, total, lowest, detected
        return fired

    STATE = ("n", "mean", "sum_increase", "min_increase", "drift_detected")


class ChangeWatch:
    """Page-Hinkley on 0/1 prequential mistakes (see the module docstring); checkpointable.

    Attributes
    ----------
    changes
        Changes taken so far (:meth:`take_change` calls that found one).
    steps
        Steps observed so far (never restarted: the grid of :data:`CHECK_EVERY` runs on it).
    """

    def __init__(self):
        self.detector = PageHinkleyUp()
        self.change_seen = False
        self.changes = 0
        self.steps = 0

    def observe(self, mistakes: np.ndarray) -> None:
        """Feed the mistakes (booleans) of consecutive examples, in stream order."""
        if self.detector.update_many(mistakes.astype(np.float64).tolist()):
            self.change_seen = True

    def observe_one(self, mistake: bool) -> None:
        """:meth:`observe` of one example (``learn_one``'s road: no arrays)."""
        if self.detector.update_many((1.0 if mistake else 0.0,)):
            self.change_seen = True

    def after_span(self, mistakes, n_steps: int, restart, checked=None) -> None:
        """Feed the mistakes of a span of ``n_steps`` steps (booleans; one ``bool`` for a span of one
        row); if the span ends at a multiple of :data:`CHECK_EVERY`, call ``restart()`` when a
        change was seen, then ``checked()`` (if given)."""
        if isinstance(mistakes, bool):
            self.observe_one(mistakes)
        else:
            self.observe(mistakes)
        self.steps += n_steps
        if self.steps % CHECK_EVERY == 0:
            if self.take_change():
                restart()
            if checked is not None:
                checked()

    def take_change(self) -> bool:
        """Whether a change was seen since the last call that returned True (and count it)."""
        if not self.change_seen:
            return False
        self.change_seen = False
        self.changes += 1
        return True

    def as_array(self) -> np.ndarray:
        """The state as :mod:`streamlearn.kernels.watch`'s array (a kernel that watches as it
        learns takes it, and :meth:`load_array` takes it back)."""
        d = self.detector
        return np.array([d.n, d.mean, d.sum_increase, d.min_increase, d.drift_detected, self.change_seen,
                         self.changes, self.steps], np.float64)

    def load_array(self, state: np.ndarray) -> None:
        """Take the state a kernel left in :meth:`as_array`'s array."""
        d = self.detector
        d.n, d.mean, d.sum_increase, d.min_increase = (float(v) for v in state[:4])
        d.drift_detected, self.change_seen = bool(state[4]), bool(state[5])
        self.changes, self.steps = int(state[6]), int(state[7])

    def export(self) -> dict:
        return {"detector": {name: getattr(self.detector, name) for name in PageHinkleyUp.STATE},
                "change_seen": self.change_seen, "changes": self.changes, "steps": self.steps}

    @classmethod
    def restore(cls, state: dict) -> "ChangeWatch":
        watch = cls()
        for name in PageHinkleyUp.STATE:
            value = state["detector"][name]
            setattr(watch.detector, name, bool(value) if name == "drift_detected" else float(value))
        watch.change_seen, watch.changes, watch.steps = bool(state["change_seen"]), int(state["changes"]), int(state["steps"])
        return watch


def learn_watched(watch: ChangeWatch, n_groups: int, learn_between, restart, checked=None) -> None:
    """Learn ``n_groups`` complete groups in spans cut at the steps where a detected change may be
    acted on (multiples of :data:`CHECK_EVERY`, so ``learn_many`` equals the ``learn_one`` loop),
    feeding ``watch`` each span's mistakes and calling ``restart()`` when it saw a change, then
    ``checked()`` (if given) at every such step.
    ``learn_between(first, last)`` learns groups ``first..last-1`` and returns their rows'
    mistakes (booleans; one ``bool`` for a span of one row)."""
    first = 0
    while first < n_groups:
        last = min(n_groups, first + CHECK_EVERY - watch.steps % CHECK_EVERY)
        watch.after_span(learn_between(first, last), last - first, restart, checked)
        first = last


def learn_in_watched_spans(watch: ChangeWatch, rows: SparseRows, y: np.ndarray, scores: np.ndarray, group: int,
                           learn_span, classes_known, restart, checked=None, weights=None) -> None:
    """:func:`learn_watched` for a learner whose step writes each row's scores:
    ``learn_span(rows, y, scores)`` learns a span and writes each row's scores at its step into
    ``scores``; ``classes_known()`` is the number of classes the model had learned so far. With
    ``weights`` (the rows', or empty for all 1), ``learn_span(rows, y, scores, weights)`` gets a span's."""
    if rows.n_rows == 1:  # learn_one's road: one step, so one span (learn_watched's, without its closures)
        n_before = classes_known()
        learn_span(rows, y, scores, *(() if weights is None else (weights,)))
        watch.after_span(mistake_of_one(scores[0], int(y[0]), n_before), 1, restart, checked)
        return
    n_groups = rows.n_rows // group

    def learn_between(first: int, last: int):
        lo, hi = first * group, last * group
        if first == 0 and last == n_groups:  # one span: no slices
            span_rows, span_y, span_scores = rows, y, scores
        else:
            span_rows = SparseRows(rows.indptr[lo : hi + 1], rows.indices, rows.data)
            span_y, span_scores = y[lo:hi], scores[lo:hi]
        n_before = classes_known()
        learn_span(span_rows, span_y, span_scores, *(() if weights is None else (weights[lo:hi],)))
        if len(span_y) == 1:
            return mistake_of_one(span_scores[0], int(span_y[0]), n_before)
        return mistakes_of(span_scores, span_y, n_before)

    learn_watched(watch, n_groups, learn_between, restart, checked)


@functools.lru_cache(maxsize=64)
def watch_params(batch_size: int, average_power: float) -> np.ndarray:
    """The parameters of :func:`streamlearn.kernels.watch.watch_step`, and of the restart a kernel
    makes when it says so: the test's, :data:`CHECK_EVERY`, the step a restart goes back to
    (:func:`restart_step`'s cap) and the average's weight there. Read-only and kept per
    learner setting: ``learn_one`` asks for them at every example."""
    detector, restart_at = PageHinkleyUp(), restart_step(1 << 62, batch_size)
    params = np.array([detector.threshold, detector.delta, detector.alpha, detector.min_instances, CHECK_EVERY,
                       restart_at, average_weight_of(restart_at, average_power)], np.float64)
    params.setflags(write=False)
    return params


@functools.lru_cache(maxsize=64)
def fading_of(examples: int) -> float:
    """What the tracker's choice keeps of its recent mistakes over ``examples`` examples."""
    return float(np.exp(-examples / RECENT_EXAMPLES))


def average_weight_of(t: int, power: float) -> float:
    """The weight of ``t`` steps in a ``t^power``-weighted average: what a restarted average,
    the current iterate, weighs."""
    return float(np.sum(np.arange(1, t + 1, dtype=np.float64) ** power))


def restart_step(t: int, batch_size: int) -> int:
    """The step a schedule at step ``t`` restarts at: at most :data:`RESTART_EXAMPLES`' worth."""
    return min(t, -(-RESTART_EXAMPLES // batch_size))


def mistake_of_one(scores: np.ndarray, target: int, n_before: int) -> bool:
    """:func:`mistakes_of` of one row (``learn_one``'s road: no arrays built)."""
    return target >= n_before or int(scores[:n_before].argmax()) != target


def mistake_count(scores: np.ndarray, targets: np.ndarray, n_before: int) -> int:
    """How many rows :func:`mistakes_of` finds wrong."""
    if len(targets) == 1:
        return int(mistake_of_one(scores[0], int(targets[0]), n_before))
    return int(mistakes_of(scores, targets, n_before).sum())


def mistakes_of(scores: np.ndarray, targets: np.ndarray, n_before: int) -> np.ndarray:
    """Each row's 0/1 mistake from its test-then-train scores (classes unknown at the row's turn,
    see :func:`~streamlearn.base.hide_unknown_classes`, cannot be predicted).

    >>> mistakes_of(np.array([[0.0, 0.0], [2.0, 1.0], [0.0, 3.0]]), np.array([0, 1, 1]), 0).tolist()
    [True, True, False]
    """
    if len(targets) == 1:
        return np.array([mistake_of_one(scores[0], int(targets[0]), n_before)])
    if n_before == scores.shape[1] and n_before and targets.max() < n_before:  # every class known before
        return scores.argmax(axis=1) != targets
    masked = scores.copy()
    hide_unknown_classes(masked, n_before, targets)
    unknown = ~(masked[np.arange(len(targets)), targets] > -np.inf)  # a class first seen is always missed
    return (masked.argmax(axis=1) != targets) | unknown


class TrackerChoice:
    """Which of two models predicts: the averaged model or the fast tracker beside it, whichever
    made fewer prequential mistakes lately (see the module docstring).

    Mistakes are counted per span (:meth:`count`, integers: the same whatever the spans' cuts) and
    folded into exponentially fading sums only at the steps that are multiples of
    :data:`CHECK_EVERY` (:meth:`check`), so ``learn_many`` equals the ``learn_one`` loop bit for bit.

    >>> choice = TrackerChoice()
    >>> choice.count(5, 1); choice.check(CHECK_EVERY)
    >>> choice.tracking, choice.switches
    (True, 1)
    """

    def __init__(self):
        self.pending = [0, 0]  # mistakes since the last check: the averaged model's, the tracker's
        self.recent = [0.0, 0.0]
        self.tracking = False
        self.switches = 0

    def count(self, model_mistakes: int, tracker_mistakes: int) -> None:
        self.pending[0] += int(model_mistakes)
        self.pending[1] += int(tracker_mistakes)

    def check(self, examples: int) -> None:
        """Fold the pending counts of the last ``examples`` examples in; choose the predictor."""
        keep = fading_of(examples)
        self.recent = [self.recent[i] * keep + self.pending[i] for i in (0, 1)]
        self.pending = [0, 0]
        tracking = self.recent[1] < self.recent[0]
        self.switches += tracking != self.tracking
        self.tracking = tracking

    def as_array(self) -> np.ndarray:
        """The state as :mod:`streamlearn.kernels.watch`'s choice array (a kernel that chooses as it
        learns takes it, and :meth:`load_array` takes it back)."""
        return np.array([*self.pending, *self.recent, self.tracking, self.switches], np.float64)

    def load_array(self, state: np.ndarray) -> None:
        """Take the state a kernel left in :meth:`as_array`'s array."""
        self.pending = [int(state[0]), int(state[1])]
        self.recent = [float(state[2]), float(state[3])]
        self.tracking, self.switches = bool(state[4]), int(state[5])

    def hand_back(self) -> None:
        """The averaged model predicts from here, its record and the tracker's cleared (after a mix)."""
        self.switches += self.tracking
        self.tracking = False
        self.pending, self.recent = [0, 0], [0.0, 0.0]

    def export(self) -> dict:
        return {"pending": list(self.pending), "recent": list(self.recent), "tracking": self.tracking,
                "switches": self.switches}

    @classmethod
    def restore(cls, state: dict) -> "TrackerChoice":
        choice = cls()
        choice.pending = [int(v) for v in state["pending"]]
        choice.recent = [float(v) for v in state["recent"]]
        choice.tracking, choice.switches = bool(state["tracking"]), int(state["switches"])
        return choice
