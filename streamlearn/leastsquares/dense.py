"""What the dense least-squares learners share: the ``d × d`` statistics of the feature space, grown as it grows (:class:`DenseLeastSquares`), and the refit window of the learners that revisit their data (:class:`WindowRefit`)."""

from __future__ import annotations

import contextlib

import numpy as np

from ..base import StreamClassifier
from ..checks import check_positive
from ..batches import SparseRows
from ..errors import InvalidInputError, InvalidParameterError
from ..sample_weights import weighted_batch
from ..window import RefitWindow
from .solvers import PARAMETER_FREE_RIDGE, RidgeSolver, dense_rows


class DenseLeastSquares(StreamClassifier):
    """Dense feature space, running second moment, class growth.

    Without ``ridge`` or ``trace_ridge`` the stream and the batch fit each take their own
    default, the defaults protocol's winner for that mode: the stream ``default_stream_ridge``,
    :meth:`fit` :attr:`fit_ridge`. A ridge given applies to both."""

    #: the stream's ridge when none is given (``{"ridge": r}`` or ``{"trace_ridge": t}``; None: one must be given)
    default_stream_ridge: dict | None = None
    #: :meth:`fit`'s ridge when none is given
    _default_fit_ridge: dict = {"ridge": PARAMETER_FREE_RIDGE}
    _fitting = False  # True inside fit(): the batch algorithm's ridge applies

    def _check_common(self) -> None:
        if self.ridge is None and self.trace_ridge is None and self.default_stream_ridge is None:
            raise InvalidParameterError("give ridge (relative to the mean diagonal of Σ̂) or trace_ridge (relative to its trace)")
        if self.ridge is not None and self.trace_ridge is not None:
            raise InvalidParameterError(f"give ridge or trace_ridge, not both (got ridge={self.ridge!r}, trace_ridge="
                                        f"{self.trace_ridge!r})")
        if self.ridge is not None:
            check_positive("ridge", self.ridge)
        if self.trace_ridge is not None:
            check_positive("trace_ridge", self.trace_ridge)
        check_positive("max_features", self.max_features, integer=True)

    @property
    def stream_ridge(self) -> dict:
        """The ridge of the stream steps: ``{"ridge": r}`` (relative to the mean diagonal of Σ̂)
        or ``{"trace_ridge": t}`` (relative to its trace)."""
        if self.ridge is not None:
            return {"ridge": self.ridge}
        return {"trace_ridge": self.trace_ridge} if self.trace_ridge is not None else dict(self.default_stream_ridge)

    @property
    def fit_ridge(self) -> dict:
        """The ridge of :meth:`fit`, in the form of :attr:`stream_ridge`."""
        if self.ridge is None and self.trace_ridge is None:
            return dict(self._default_fit_ridge)
        return self.stream_ridge

    def _relative_ridge(self, d: int) -> float:
        """The ridge relative to the mean diagonal of Σ̂ that applies now (the stream's, or in
        :meth:`fit` without a given ridge 004's parameter-free one); trace_ridge · tr(Σ̂) = (trace_ridge · d) · tr(Σ̂)/d."""
        ridge = self.fit_ridge if self._fitting else self.stream_ridge
        return ridge["ridge"] if "ridge" in ridge else ridge["trace_ridge"] * d

    def _ridge_solver(self, second_moment: np.ndarray, order: np.ndarray | None = None) -> RidgeSolver:
        """A :class:`RidgeSolver` of ``second_moment`` with the ridge that applies now (:meth:`_relative_ridge`)."""
        return RidgeSolver(second_moment, self._relative_ridge(second_moment.shape[0]), order)

    @contextlib.contextmanager
    def _batch_fit(self):
        """While :meth:`fit` runs: its ridge applies (see the class docstring)."""
        self._fitting = True
        try:
            yield
        finally:
            self._fitting = False

    def _init_model(self) -> None:
        self._n = 0
        self._XtX = np.zeros((0, 0))
        self._W = np.zeros((0, 0))  # (d, K)

    def _width(self) -> int:
        """Columns of the dense model: the vocabulary's, which never passes ``max_features``
        (:meth:`StreamClassifier._within_column_room` refuses an input that would take it there)."""
        return self._features.n_columns

    @property
    def weights(self) -> np.ndarray:
        """``W`` (d × K): columns follow the feature space, rows the classes (a view: do not change it)."""
        return self._W[: self.feature_space.n_columns, : len(self.classes)]

    @property
    def max_columns(self) -> int:
        """The vocabulary's limit (see :meth:`StreamClassifier._within_column_room`)."""
        return self.max_features

    def _grow(self, d: int, k: int) -> None:
        d0, k0 = self._W.shape
        if d > self._XtX.shape[0]:
            XtX = np.zeros((d, d))
            XtX[: self._XtX.shape[0], : self._XtX.shape[0]] = self._XtX
            self._XtX = XtX
        if d > d0 or k > k0:
            W = np.zeros((max(d, d0), max(k, k0)))
            W[:d0, :k0] = self._W
            self._W = W

    def _reserve_columns(self) -> None:
        self._grow(self._width(), len(self._labels))

    def _raw_scores(self, rows: SparseRows) -> np.ndarray:
        self._reserve_columns()
        d, k = self._W.shape
        return dense_rows(rows, d) @ self._W[:, : len(self._labels)]

    def _export_model(self) -> dict:
        # grown to the vocabulary and classes first, as any prediction grows them: otherwise a
        # model that has scored a batch (the runner scores before it learns) and one that has
        # not would export the same model in arrays of different sizes
        self._reserve_columns()
        return {"n": self._n, "XtX": self._XtX.copy(), "W": self._W.copy()}

    def _restore_model(self, model: dict) -> None:
        self._n = model["n"] if isinstance(model["n"], float) else int(model["n"])  # (a weighted stream's: a sum)
        self._XtX = np.asarray(model["XtX"], np.float64).copy()
        self._W = np.asarray(model["W"], np.float64).copy()

    def _dataset(self, X, y) -> tuple[np.ndarray, np.ndarray]:
        """A whole labelled data set as a dense matrix over the vocabulary's columns (the
        vocabulary and classes grow). A float NumPy array whose columns are, or become, the
        vocabulary's first columns in order is used as it is (no sparse round trip: a
        60,000 x 8,000 array is not copied)."""
        if self._scaler is None and isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype == np.float64 and np.isfinite(X).all():
            n_labels = self._labels.validate_batch(y)
            if n_labels != X.shape[0]:
                raise InvalidInputError("length-mismatch", f"X has {X.shape[0]} rows but y has {n_labels} labels")
            columns = self._within_column_room(lambda: self._features.columns(list(range(X.shape[1])), grow=True))
            if np.array_equal(columns, np.arange(X.shape[1])):
                y_idx = self._labels.indices(y, grow=True)
                self._grow(self._width(), len(self._labels))
                return X, y_idx
        rows = self._model_rows(self._encode_labelled(X, y), learn=True)
        y_idx = self._labels.indices(y, grow=True)
        d = self._width()
        self._grow(d, len(self._labels))
        return dense_rows(rows, d), y_idx


class WindowRefit(RefitWindow, DenseLeastSquares):
    """Stream mode of the algorithms that revisit their data (Alg. 2, Alg. 3): the window of
    :mod:`streamlearn.window`, refit densely."""

    def _init_model(self) -> None:
        super()._init_model()
        self._init_window()

    def _refit_window(self) -> None:
        # over the columns the examples entered so far have met, as the learn_one loop's vocabulary holds
        # them: a batch registers its late features first, and a generator's choice depends on the width
        rows, y = self._window_batch()
        self._fit_dense(dense_rows(rows, self._columns_so_far), y, len(self._labels), None, self._window_weight_array())

    def _fit_dense(self, X: np.ndarray, y: np.ndarray, K: int, callback=None, weights: np.ndarray | None = None) -> None:
        """The batch algorithm on dense rows; ``weights`` (``None``: all 1) weigh every least-squares
        problem's rows (:func:`~streamlearn.leastsquares.solvers.moment`)."""
        raise NotImplementedError

    def fit(self, X, y, callback=None, w=None):
        """Run the batch algorithm on a whole data set (``w``: the rows' weights; 0 leaves a row
        out); replaces the fitted model.

        ``callback(stage, model)``, if given, is called after every stage (1, 2, …) with the
        model as it stands after that stage (to report progress, or to pick the number of
        stages on held-out data)."""
        X, y, weights = weighted_batch(self, X, y, w)
        X, y_idx = self._dataset(X, y)
        with self._batch_fit():
            self._fit_dense(X, y_idx, len(self._labels), callback, self._batch_class_weights(y_idx, weights))
        self._has_fit = True
        return self

    def _canonical_columns(self, d: int) -> np.ndarray:
        """Vocabulary columns ``0..d-1`` in name-key order: fitted stages work in this order,
        so that neither the key order of dicts nor the vocabulary's order changes a result."""
        return self._features.canonical_order(np.arange(d))
