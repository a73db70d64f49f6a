"""Mixing the models of several learners that share one stream (iterative parameter mixing:
McDonald, Hall & Mann 2010; Zinkevich et al. 2010): the model side of several daemons learning one model.

Each member learns its own part of the stream from a *base*, the shared model as it last
mixed it. Every so often it hands out its change (:meth:`MixState.change`) — what it learned
since its base — and folds every member's changes, its own included, into the base in one agreed order
(for a Kafka group: the order of the mixing topic), then learns on from the result. Every
member that folds the same changes in the same order holds the same model.

The fold, for a change of ``n`` examples and ``Δt`` steps, at weight ``μ``::

    W ← W + μ ΔW      S ← S + μ ΔS      Σc ← Σc + μ ΔΣc      t ← t + μ Δt      examples ← examples + n

* ``W``: the weights (MCID's ``scale · V``, materialised);
* ``S`` and ``Σc``: the averaged iterate's running sum ``Σ_s c_s W_s`` and its normaliser
  ``Σ_s c_s`` (``c_s = s^average_power``), so the averaged model ``S / Σc`` is an average of
  the members' averaged models weighted like their sums;
* ``t``: the step counter that sets ``η = 1/(λ t)``, folded like the rest (kept fractional
  here, rounded when written into a learner);
* the statistics of the intercept's value (``intercept_scaling="auto"``, :mod:`streamlearn.intercept`):
  carried as they stand and interpolated at ``μ`` until the shared value is settled, then kept, so
  every member scores with the shared model's value after a mix;
* the feature bins' statistics (``bins``, :mod:`streamlearn.binning`): counts and sums of the
  records learned, so a change carries what its records added and the fold adds it whole — each
  record enters the pooled statistics once, whatever ``μ``.

A member that restarted its schedule after a detected change (:mod:`streamlearn.adaptation`)
hands out a change whose ``t`` and ``Σc`` went *down*; added, two such changes folded beside each
other could take the shared ``t`` below 1 and ``Σc`` below 0. Its schedule is therefore carried
as it stands, not as a difference, and folded by interpolation — ``t ← (1 − μ) t + μ t'``,
``Σc ← (1 − μ) Σc + μ Σc'``, ``S ← (1 − μ) S + μ S'`` — while its weights are added as above: the
shared averaged model becomes a positive blend of the two averaged models, and a change taken
whole (``μ = 1``) is the member's restarted schedule exactly. A change of no examples (its
records were all refused) holds nothing to fold: only its coverage counts.

The weight is the change's share of the examples it was learned *beside*::

    μ = n / (n + c)

where ``c`` is the examples of the changes folded into the shared model after this change's
base was taken (the shared model's ``examples`` now minus its base's): changes that were learned
at the same time from older models. A change whose base is the shared model as it stands
(``c = 0``) is taken whole: a member learning alone, or the last member still reading, learns
exactly as one learner. ``N`` members that publish ``n`` examples each in turn fold at ``1/N``
each once the first round is in (each change follows the other ``N − 1`` members' latest): the
count-weighted average of their models, their step counters included — iterative parameter
mixing. This is the staleness-aware rule of asynchronous SGD (Zhang, Gupta, Lian & Liu 2016: the
step divided by the staleness), with staleness counted in examples. Folding every change at
``1/N`` instead learns a member's examples at ``1/N`` of their weight whenever the others have
nothing to add (a member that starts late, or reads on alone at the end); adding the changes
(weight 1) applies the members' shared corrections ``N`` times: ``bench/results/scaleout.md``.

Which records a change holds is tracked by :class:`Coverage`: a change is folded only if it
follows on from what the shared model already holds, so a record's change never enters twice
(nor is lost: its member learns it again). Changes travel through a mixing topic
(:mod:`streamlearn.connectors.mixlog`); :class:`GroupMixer` is a daemon's side of it
(``streamlearn train kafka://...?group=G --mix-topic T --mix-every N``).

Changes are keyed by label and feature name, because members meet names in different orders
(with hashing, ``n_bits``, by column). Which learners mix: the MCID learners
(:class:`~streamlearn.MulticlassSVM`, :class:`~streamlearn.MulticlassLogisticRegression`,
:class:`~streamlearn.MulticlassPerceptron`, :class:`~streamlearn.OneVsRestPegasos`,
:class:`~streamlearn.OneVsRestLogisticRegression`) with one λ and without ``standardize``
(its running statistics do not mix); :func:`check_mixable` refuses the others.

>>> from streamlearn import MulticlassSVM
>>> a, b = MulticlassSVM(lam=0.01, fit_intercept=False), MulticlassSVM(lam=0.01, fit_intercept=False)  # names decide alone
>>> shared = MixState.of(a)                   # both start from the same (empty) base
>>> for name, label in (("x", "yes"), ("z", "no"), ("x", "yes")):
...     a.learn_one({name: 1.0}, label)
>>> for name, label in (("w", "maybe"), ("z", "no"), ("w", "maybe")):   # other names, another order
...     b.learn_one({name: 1.0}, label)
>>> changes = [shared.change(a, examples=3), shared.change(b, examples=3)]
>>> [shared.fold(change) for change in changes]   # b learned beside a: half weight
[1.0, 0.5]
>>> for member in (a, b):
...     shared.write_into(member)
>>> shared.examples, a.n_steps, [[m.predict_one({name: 1.0}) for name in "xzw"] for m in (a, b)]   # one model
(6, 4, [['yes', 'no', 'maybe'], ['yes', 'no', 'maybe']])
"""

from __future__ import annotations

import copy
import time

import numpy as np

from . import failpoints
from ..binning import added_stats
from ..errors import InvalidParameterError
from ..intercept import InterceptScale
from ..weights import grown


def check_mixable(model) -> None:
    """Raise a :class:`ValueError` naming why ``model`` cannot mix (see the module docstring)."""
    name = type(model).__name__
    if not hasattr(model, "mixing_state"):
        raise InvalidParameterError(
            f"{name} cannot mix: model mixing covers the MCID learners (MulticlassSVM, MulticlassLogisticRegression, "
            "MulticlassPerceptron, OneVsRestPegasos, OneVsRestLogisticRegression)")
    if model.lam == "auto":
        raise InvalidParameterError(f"{name}(lam='auto') cannot mix: give it one λ")
    if model.standardize:
        raise InvalidParameterError(f"{name}(standardize=True) cannot mix: its running feature statistics do not mix")


class MixState:
    """The shared model between mixes, as dense arrays keyed by names (see the module docstring)."""

    def __init__(self, labels: list, features: list, W: np.ndarray, S: np.ndarray | None, average_weight: float,
                 t: float, examples: int = 0, intercept: dict | None = None, bins: dict | None = None):
        self.labels, self.features = list(labels), list(features)
        self.W, self.S = W, S
        self.average_weight, self.t, self.examples = float(average_weight), float(t), int(examples)
        self.intercept = dict(intercept) if intercept is not None else InterceptScale().export()
        self.bins = bins  # the feature bins' pooled statistics (None: the learners have no bins)

    @classmethod
    def of(cls, model) -> "MixState":
        """The state of ``model`` as it is (a member's base)."""
        check_mixable(model)
        state = model.mixing_state()
        return cls(state["classes"], state["features"], state["W"], state["S"], state["average_weight"], state["t"],
                   intercept=state["intercept"], bins=state.get("bins"))

    def _aligned(self, labels: list, features: list) -> tuple[np.ndarray, np.ndarray]:
        """Grow this state to hold ``labels`` and ``features``; return their rows and columns here."""
        rows = _positions(self.labels, labels, grow=True)
        cols = _positions(self.features, features, grow=True)
        shape = (len(self.labels), len(self.features))
        if shape != self.W.shape:
            self.W = grown(self.W, shape, 0.0)
            self.S = None if self.S is None else grown(self.S, shape, 0.0)
        return rows, cols

    def change(self, model, examples: int = 0) -> dict:
        """What ``model`` learned since this state (its base), a plain dict that msgpack carries
        (:mod:`streamlearn.service.checkpoint`'s encoding): ``labels``, ``features`` (names), ``W`` and ``S``
        (``len(labels) × len(features)``, its weights minus this state's; ``S`` empty without an
        averaged iterate), ``average_weight`` (the change of ``Σc``), ``steps`` (of ``t``),
        ``examples`` (how many it learned: counted by the caller, carried along) and
        ``base_examples`` (this state's examples: what the fold measures the change's staleness from).
        ``restarted``: ``model`` restarted its schedule since this state, and ``S``, ``average_weight``
        and ``steps`` are its own, not differences (see the module docstring)."""
        now = MixState.of(model)
        rows, cols = _positions(self.labels, now.labels), _positions(self.features, now.features)
        dW, dS = now.W.copy(), None if now.S is None else now.S.copy()
        known_rows, known_cols = rows >= 0, cols >= 0
        base_block = np.ix_(rows[known_rows], cols[known_cols])
        now_block = np.ix_(np.flatnonzero(known_rows), np.flatnonzero(known_cols))
        dW[now_block] -= self.W[base_block]
        # t is written into a learner rounded: a step back of up to half a step is no restart
        restarted = now.t + 0.5 < self.t or now.average_weight < self.average_weight
        added = {} if now.bins is None else {"bins": added_stats(None, self.bins, now.bins)}
        if restarted:  # the schedule as it stands (see the module docstring)
            return {"labels": now.labels, "features": now.features, "W": dW,
                    "S": now.S if now.S is not None else np.zeros((0, 0)), "average_weight": now.average_weight,
                    "steps": now.t, "restarted": True, "examples": int(examples), "base_examples": self.examples,
                    "intercept": now.intercept, **added}
        if dS is not None:
            dS[now_block] -= self.S[base_block]
        return {"labels": now.labels, "features": now.features, "W": dW, "S": dS if dS is not None else np.zeros((0, 0)),
                "average_weight": now.average_weight - self.average_weight, "steps": now.t - self.t,
                "restarted": False, "examples": int(examples), "base_examples": self.examples, "intercept": now.intercept,
                **added}

    def fold(self, change: dict, weight: float | None = None) -> float:
        """Add one member's change, its steps included, at ``weight`` — by default its share
        ``n / (n + c)`` of the examples learned beside it (see the module docstring) — and its
        examples in full; the weight it took (0 for a change of no examples, which is not folded)."""
        examples = int(change["examples"])
        if weight is None:
            if examples == 0:  # nothing learned: nothing to fold (its coverage is the caller's)
                return 0.0
            beside = max(0, self.examples - int(change["base_examples"]))
            weight = examples / (examples + beside)
        if not 0.0 < weight <= 1.0:
            raise ValueError(f"a change's weight must be in (0, 1], got {weight!r}")
        rows, cols = self._aligned(list(change["labels"]), list(change["features"]))
        block = np.ix_(rows, cols)
        self.W[block] += weight * np.asarray(change["W"], np.float64)
        if change.get("restarted", False):  # (absent from changes published before restarts were folded apart)
            self._blend_schedule(block, change, weight)
        else:
            if self.S is not None:
                self.S[block] += weight * np.asarray(change["S"], np.float64)
            self.average_weight += weight * float(change["average_weight"])
            self.t += weight * float(change["steps"])
        if "intercept" in change:  # (absent from changes published before the intercept's value was learned)
            self.intercept = InterceptScale.blended(self.intercept, change["intercept"], weight)
        if change.get("bins") is not None:
            self.bins = added_stats(self.bins, None, change["bins"])
        self.examples += examples
        return float(weight)

    def _blend_schedule(self, block, change: dict, weight: float) -> None:
        """Fold a restarted change's schedule by interpolation (see the module docstring)."""
        if self.S is not None:
            self.S *= 1.0 - weight
            self.S[block] += weight * np.asarray(change["S"], np.float64)
        self.average_weight = (1.0 - weight) * self.average_weight + weight * float(change["average_weight"])
        self.t = (1.0 - weight) * self.t + weight * float(change["steps"])

    def write_into(self, model) -> None:
        """Make ``model`` this state: its label and feature spaces, weights, averaged iterate
        and step counter (its own names first, in their order: columns it holds stay put)."""
        check_mixable(model)
        model.load_mixing_state(self.labels, self.features, self.W, self.S, self.average_weight, int(round(self.t)),
                                self.intercept, self.bins)

    def copy(self) -> "MixState":
        return MixState(self.labels, self.features, self.W.copy(), None if self.S is None else self.S.copy(),
                        self.average_weight, self.t, self.examples, self.intercept, copy.deepcopy(self.bins))


class Coverage:
    """Which records of the input the shared model holds, so that each enters it exactly once.

    A change names the input it was learned from: for each partition, the offsets
    ``[start, end)`` of its records. Folded in the agreed order, a change is accepted only when
    every one of its ranges starts where the shared model's coverage of that partition ends (or,
    for a partition no change has covered yet, anywhere): accepted ranges then tile each
    partition without gap or overlap. A change that fails — its member learned records another
    member had already brought in, after a rebalance or a restart — is skipped by every member
    alike, and its member learns its partitions again from :attr:`covered`.

    >>> coverage = Coverage()
    >>> coverage.accept({0: (0, 100), 1: (0, 40)}), coverage.accept({0: (100, 180)})
    (True, True)
    >>> coverage.accept({0: (150, 200), 1: (40, 90)}), coverage.covered   # overlaps 150..180: skipped whole
    (False, {0: 180, 1: 40})
    """

    def __init__(self, covered: dict | None = None):
        self.covered: dict = {int(p): int(o) for p, o in (covered or {}).items()}

    def accept(self, ranges: dict) -> bool:
        """Take the change covering ``ranges`` (``{partition: (start, end)}``) if it follows on."""
        ranges = {int(p): (int(start), int(end)) for p, (start, end) in ranges.items()}
        for p, (start, end) in ranges.items():
            if end < start or (p in self.covered and start != self.covered[p]):
                return False
        for p, (_, end) in ranges.items():
            self.covered[p] = end
        return True

    def export(self) -> dict:
        return dict(self.covered)


def fold_publications(state: MixState, coverage: Coverage, publications) -> list[bool]:
    """Fold, in order, every publication (``ranges``, ``change``: see
    :mod:`streamlearn.connectors.mixlog`) that ``coverage`` accepts; which ones it accepted."""
    accepted = []
    for publication in publications:
        taken = coverage.accept(publication["ranges"])
        if taken:
            state.fold(publication["change"])
        accepted.append(taken)
    return accepted


class GroupMixer:
    """One member's side of a group mixing one model (``streamlearn train ... --mix-topic``).

    Every ``every`` examples it learned — sooner when a partition it has read from is about to
    move to another member, or when its input is idle — it publishes its change since its base
    (with the offsets of the input it was learned from and the group's size) to the mixing
    ``log`` (:class:`streamlearn.connectors.mixlog.MixLog`), reads every publication it has not folded yet,
    its own included, folds the ones :class:`Coverage` accepts into the shared model in log
    order, and makes its learner that shared model (its new base). Its source
    (:class:`streamlearn.connectors.kafka.KafkaSource` with ``subscribe``) then goes on from the shared
    coverage: past a change refused because another member had brought those records in first,
    the member learns its partitions again from where the accepted changes end.

    The shared model is a function of the log alone: a member that joins, or restarts from a
    checkpoint (:meth:`export` at a mix: the shared state, its coverage and how far the log is
    folded), folds the rest of the log and holds the newest mixed model. Exactly once, for the
    group: each input record lies in exactly one accepted change, whose effect enters the shared
    model once (at the change's weight ``μ``); :attr:`by_member` counts the examples of the
    accepted changes of each member, so their sum over the group is the number of records learned.
    """

    def __init__(self, log, every: int, member: str, catch_up_seconds: float = 1.0):
        if isinstance(every, bool) or int(every) != every or every < 1:
            raise InvalidParameterError(f"mix_every must be a positive integer, got {every!r}")
        self.log, self.every, self.member, self.catch_up_seconds = log, int(every), member, catch_up_seconds
        self.shared: MixState | None = None
        self.base: MixState | None = None
        self.coverage = Coverage()
        self.log_offset = 0  # the next publication of the log to fold
        self.published = 0
        self.by_member: dict = {}
        self.learned_since = 0
        self._caught_up_at = 0.0
        self.seconds = 0.0  # spent mixing: publishing, reading and folding, writing the shared model

    def start(self, model, source) -> None:
        """Begin (fresh: from ``model`` as it is; resumed: from :meth:`restore`) and fold the log."""
        check_mixable(model)
        if self.shared is None:
            self.shared = MixState.of(model)
        self._catch_up(model, source)

    def after_batch(self, model, source, learned: int) -> bool:
        """Count ``learned`` examples and mix when due; ``True`` when ``model`` became the shared model."""
        self.learned_since += int(learned)
        if source.unpublished and (self.learned_since >= self.every or source.mix_due or not learned):
            self.mix(model, source)
            return True
        if not source.unpublished and time.monotonic() - self._caught_up_at >= self.catch_up_seconds:
            return self._catch_up(model, source)
        return False

    def mix(self, model, source) -> None:
        """Publish what was learned since the last mix (if anything), then fold the log."""
        started = time.perf_counter()
        ranges = source.take_ranges()
        if ranges:
            if model.n_pending:
                model.flush()
            change = self.base.change(model, examples=self.learned_since)
            self.log.publish({
                "member": self.member, "seq": self.published, "members": int(source.group_size),
                "ranges": {str(p): [int(a), int(b)] for p, (a, b) in ranges.items()}, "change": change})
            self.published += 1
            failpoints.reached("mix-published")
        self.learned_since = 0
        self._catch_up(model, source, force=bool(ranges))
        self.seconds += time.perf_counter() - started

    def _catch_up(self, model, source, force: bool = True) -> bool:
        """Fold the publications not folded yet; make ``model`` the shared model and send the
        source on from the shared coverage. ``True`` if the model was written."""
        self._caught_up_at = time.monotonic()
        publications = self.log.read(self.log_offset)
        if publications:
            accepted = fold_publications(self.shared, self.coverage, [publication for _, publication in publications])
            for (_, publication), taken in zip(publications, accepted):
                if taken:
                    member = publication["member"]
                    self.by_member[member] = self.by_member.get(member, 0) + int(publication["change"]["examples"])
            self.log_offset = publications[-1][0] + 1
        elif not force:
            return False
        self._become_shared(model)
        source.set_starts(self.coverage.covered)
        source.rewind(self.coverage.covered)
        return True

    def summary(self) -> dict:
        """What the group's model holds and what mixing cost this member."""
        return {"group_examples": self.shared.examples, "by_member": dict(self.by_member), "published": self.published,
                "bytes_published": getattr(self.log, "bytes_published", None), "mix_seconds": self.seconds}

    def abandon(self, model) -> None:
        """Make ``model`` the shared model again, dropping what it learned since (a daemon
        stopping without a broker to publish to: its checkpoint's coverage has those records
        learned again)."""
        self._become_shared(model)
        self.learned_since = 0

    def _become_shared(self, model) -> None:
        """Write the shared model into ``model``, which takes it as its new base."""
        self.shared.write_into(model)
        self.base = self.shared.copy()

    def position(self, source) -> dict:
        """The input the shared model holds, as a source position (what a checkpoint commits)."""
        return {"kind": source.kind, "topic": source.topic,
                "offsets": {str(p): o for p, o in sorted(self.coverage.covered.items())}}

    def export(self) -> dict:
        shared = self.shared
        return {"labels": shared.labels, "features": shared.features, "W": shared.W,
                "S": shared.S if shared.S is not None else np.zeros((0, 0)), "averaged": shared.S is not None,
                "average_weight": shared.average_weight, "t": shared.t, "examples": shared.examples,
                "intercept": shared.intercept, **({"bins": shared.bins} if shared.bins is not None else {}),
                "covered": {str(p): o for p, o in self.coverage.covered.items()}, "log_offset": self.log_offset,
                "published": self.published, "by_member": dict(self.by_member)}

    def restore(self, state: dict) -> None:
        S = np.asarray(state["S"], np.float64) if state["averaged"] else None
        self.shared = MixState(state["labels"], state["features"], np.asarray(state["W"], np.float64), S,
                               state["average_weight"], state["t"], state["examples"], state.get("intercept"),
                               state.get("bins"))
        self.coverage = Coverage(state["covered"])
        self.log_offset, self.published = int(state["log_offset"]), int(state["published"])
        self.by_member = dict(state["by_member"])


def _positions(names: list, wanted: list, grow: bool = False) -> np.ndarray:
    """Positions of ``wanted`` in ``names``: -1 for a name it lacks, or with ``grow`` the
    position of that name appended to ``names``."""
    index = {name: i for i, name in enumerate(names)}
    if grow:
        for name in wanted:
            if name not in index:
                index[name] = len(names)
                names.append(name)
    return np.fromiter((index.get(name, -1) for name in wanted), np.int64, len(wanted))


__all__ = ["Coverage", "GroupMixer", "MixState", "check_mixable", "fold_publications"]
