"""Rows as the model sees them: the features as encoded, standardised with ``standardize``
(:mod:`streamlearn.scaling`), with each value's interval indicator with ``bins``
(:mod:`streamlearn.binning`), then with the intercept's constant feature with ``fit_intercept``
(:mod:`streamlearn.intercept`). Learning puts each row into every running statistic row by row
(the scaler's before it scales the row, the bins' once it is binned), so a batch and the
one-example loop see the same rows."""

from __future__ import annotations

import numpy as np

from .batches import SparseRows
from .binning import RowExpansion
from .intercept import with_intercept_column

class ModelRows:
    """The row preparation of :class:`~streamlearn.base.StreamClassifier` (it sets ``_scaler``,
    ``_bins``, ``_intercept_column`` -- a model column -- and ``_intercept_scale``)."""

    def _model_columns(self, column: int) -> int:
        """The model column of a feature column, or the model columns of that many feature columns
        (with ``bins``, the first feature columns are each followed by their bins': :mod:`streamlearn.binning`)."""
        return column if self._bins is None else self._bins.model_column(column)

    @property
    def _n_model_columns(self) -> int:
        """The model's weight columns: the feature space's, with ``bins`` their bins' too."""
        return self._model_columns(self._features.n_columns)

    def _model_row(self, cols: np.ndarray, vals: np.ndarray, learn: bool) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_model_rows` of one row given as ``(columns, values)`` (the one-example calls'
        road: a few array operations fewer, the same row)."""
        if self._scaler is not None:
            rows = SparseRows(np.array([0, len(cols)], np.int64), cols, vals)
            vals = (self._scaler.learn_transform(rows) if learn else self._scaler.transform(rows)).data
        if self._intercept_column < 0 and self._bins is None:
            return cols, vals
        scale = self._intercept_scale
        value = scale.learn_row(vals) if learn else scale.value  # of the row's own values
        if self._bins is not None:
            row = self._bins.expand(SparseRows(np.array([0, len(cols)], np.int64), cols, vals), learn, value,
                                    self._intercept_column)
            return row.indices, row.data
        if self._intercept_column >= 0:
            n = len(cols)
            with_cols, with_vals = np.empty(n + 1, np.int64), np.empty(n + 1)
            with_cols[:n], with_vals[:n] = cols, vals
            with_cols[n], with_vals[n] = self._intercept_column, value
            return with_cols, with_vals
        return cols, vals

    def _model_rows(self, rows: SparseRows, learn: bool) -> SparseRows:
        """Rows as the model sees them: standardised when ``standardize`` (``learn``: the rows
        enter the running statistics first, see :mod:`streamlearn.scaling`), with each value's
        interval indicator when ``bins`` (:mod:`streamlearn.binning`; by the rows before it), then
        with the intercept's constant feature when ``fit_intercept`` (after scaling, so it stays
        1); the indicators and the constant take the intercept's value, from the row's own values."""
        if self._scaler is not None:
            rows = self._scaler.learn_transform(rows) if learn else self._scaler.transform(rows)
        if self._intercept_column < 0 and self._bins is None:
            return rows
        scale = self._intercept_scale
        values = scale.learn_rows(rows) if learn else scale.value
        if self._bins is not None:  # the intercept's entry appended in the same pass
            return self._bins.expand(rows, learn, values, self._intercept_column)
        if self._intercept_column >= 0:
            rows = with_intercept_column(rows, self._intercept_column, values)
        return rows

    def _expanded_dense_rows(self, X, grow: bool, learn: bool) -> SparseRows | None:
        """:meth:`_model_rows` of a dense NumPy batch encoded in the same compiled pass
        (:meth:`~streamlearn.features.FeatureSpace.encode_expanded`), when no step between needs
        the rows as encoded: no ``standardize``, the intercept's value settled (one for every row),
        no ``max_columns`` (whose undo would not undo the bins' statistics); else ``None``."""
        scale, bins = self._intercept_scale, self._bins
        if (not isinstance(X, np.ndarray) or X.ndim != 2 or self._scaler is not None or self.max_columns is not None
                or (self._intercept_column < 0 and bins is None) or not scale.settled):
            return None
        if bins is not None:
            return bins.encode_dense(self._features, X, grow, learn, scale.value, self._intercept_column)
        return self._features.encode_expanded(X, grow, RowExpansion.intercept_only(scale.value, self._intercept_column))
