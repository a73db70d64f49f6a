"""Parameter mixing's surface of the MCID learners (:mod:`streamlearn.service.mixing`): the model as
dense arrays, and a model made from such arrays; a mixin of :class:`~streamlearn.mcid.solver.MCIDLearner`."""

from __future__ import annotations

import numpy as np

from ..binning import FeatureBins


class MixingSurface:
    """:meth:`mixing_state` and :meth:`load_mixing_state` of an MCID learner."""

    def mixing_state(self) -> dict:
        """The model as dense arrays, for parameter mixing (:mod:`streamlearn.service.mixing`): ``classes``,
        ``features`` (:attr:`feature_keys`), ``W`` (K × d, the current iterate), ``S`` (K × d, the
        averaged iterate's running sum ``Σ_s c_s W_s`` undivided; ``None`` without averaging),
        ``average_weight`` (``Σ_s c_s``), ``t``, ``intercept`` (the statistics of the intercept's value,
        :mod:`streamlearn.intercept`) and ``bins`` (the feature bins' statistics, ``None`` without bins:
        :mod:`streamlearn.binning`). Every column the feature space holds has weights (an intercept's is
        registered before anything is learned)."""
        store = self._weights
        store.reserve(self._n_model_columns, len(self._labels))
        bins = None if self._bins is None else self._bins.mixing_stats(self._space_keys())
        return {"classes": self.classes, "features": self.feature_keys, "W": store.dense(),
                "S": store.dense_average(1.0) if store.averaged else None,
                "average_weight": self._average_weight, "t": self._t, "intercept": self._intercept_scale.export(),
                "bins": bins}

    def load_mixing_state(self, classes: list, features: list, W: np.ndarray, S: np.ndarray | None,
                          average_weight: float, t: int, intercept: dict | None = None, bins: dict | None = None) -> None:
        """Make this model the one :meth:`mixing_state` describes: its classes and features join this
        model's (this model's first, in their order: columns it holds stay put), its weights,
        averaged iterate, step counter, intercept and bins statistics (if given) replace this model's. The fast
        tracker keeps its weights and hands the predictions back to the (now shared) model."""
        for label in classes:
            self._labels.index(label, grow=True)
        if self._features.n_bits is None:  # (a bin's key names a column the feature's own brings)
            self._features.columns([key for key in features if not FeatureBins.is_bin_key(key)], grow=True)
        K, d = len(self._labels), self._n_model_columns
        row_of = {label: k for k, label in enumerate(self.classes)}
        column_of = {name: j for j, name in enumerate(self.feature_keys)}
        block = np.ix_([row_of[label] for label in classes], [column_of[name] for name in features])

        def in_model_order(matrix: np.ndarray) -> np.ndarray:
            placed = np.zeros((K, d))
            placed[block] = matrix
            return placed

        W = in_model_order(W)
        store = self._weights
        store.reserve(d, K)
        store.V[:d, :K] = W.T
        store.scale[:K] = 1.0
        store.sqnorm[:K] = (W * W).sum(axis=1)
        if store.averaged:
            store.U[:d, :K] = in_model_order(S).T  # S = U + A·V with A = 0
            store.A[:K] = 0.0
        self._average_weight = float(average_weight)
        self._t = int(t)
        if intercept is not None:
            self._intercept_scale.load(intercept)
        if bins is not None and self._bins is not None:
            self._bins.load_mixing_stats(bins, self._space_keys())
        self._n_learned_classes = K
        if self._tracker_choice is not None:  # the shared model predicts until this member's tracker errs less again
            self._tracker_choice.hand_back()
