"""How :class:`~streamlearn.features.FeatureSpace` turns a dense NumPy batch into rows over weight
columns: copied without its zeros in two compiled passes, or, for a caller whose kernels ignore
explicit zeros, read as it is (``zero_share``). A mixin of the feature space's own room: it reads
and grows the space's vocabulary state."""

from __future__ import annotations

import numpy as np

from .batches import NO_ENTRIES, OUT_OF_RANGE, SparseRows
from .errors import InvalidInputError
from .kernels import compiled

_rows = compiled("rows")


class DenseArrayEncoding:
    """The dense-array roads of :meth:`FeatureSpace.encode_many <streamlearn.features.FeatureSpace.encode_many>`."""

    def _encode_dense(self, dense: np.ndarray, grow: bool, zero_share: float | None = None,
                      expansion=None) -> SparseRows | None:  # fmt: skip
        """A dense float64 batch's rows in two compiled passes (:func:`~streamlearn.kernels.rows.dense_census`,
        then :func:`~streamlearn.kernels.rows.dense_rows`: the CSR road's rows, without building
        the CSR), or in one (:meth:`_dense_as_it_is`) when ``zero_share`` allows its zeros;
        ``None`` when its width is one :meth:`_positions_too_sparse` refuses to cache. With an
        ``expansion`` (:class:`~streamlearn.binning.RowExpansion`), the rows as the model sees them
        (:func:`~streamlearn.kernels.rows.dense_model_rows`)."""
        n_rows, width = dense.shape
        count, bad = _rows.dense_census(dense)
        if bad >= 0:  # before anything changes
            raise InvalidInputError("non-finite", f"value {float(dense.ravel()[bad])!r} is {OUT_OF_RANGE}", bad // width, bad % width)
        if self._positions_too_sparse(width, count):
            return None
        if zero_share is not None and n_rows * width - count <= zero_share * n_rows * width:
            rows = self._dense_as_it_is(dense, grow)
            if rows is not None:
                return rows
        column_of = self._position_columns(width)
        out_idx, out_val = self._scratch(count if expansion is None else 2 * count + n_rows)
        added = NO_ENTRIES
        if grow:
            room = min(count, width)
            self._reserve_order_keys(len(self._names) + room)
            added = np.empty(room, np.int64)
        if expansion is None:
            indptr, n, n_added = _rows.dense_rows(dense, column_of, self._order_key, out_idx, out_val, grow,
                                                  len(self._names), added)
        else:
            indptr, n, n_added = _rows.dense_model_rows(dense, column_of, self._order_key, grow, len(self._names), added,
                                                        *expansion, out_idx, out_val)
        if n_added:
            self._record_positions(added[:n_added])
        return SparseRows(indptr, out_idx[:n], out_val[:n])

    def _dense_as_it_is(self, dense: np.ndarray, grow: bool) -> SparseRows | None:
        """A dense batch's values as rows over weight columns, zeros included: ``dense`` itself
        as the rows' values, over a layout (each row the columns of positions ``0..width-1``)
        kept while the width and the vocabulary's size stay: a batch of fewer rows than it was
        built for takes its beginning (a stream's last, smaller batch). Positions without a column
        get theirs here when ``grow`` and the first row holds a value at each (then
        :func:`~streamlearn.kernels.rows.dense_rows` would add them there, in position order);
        else ``None``: the copying road adds or drops them. A row of a dense batch is in
        position order, as that kernel gives it."""
        n_rows, width = dense.shape
        missing = np.flatnonzero(self._position_columns(width)[:width] < 0)
        if len(missing):
            if not (grow and (dense[0, missing] != 0.0).all()):
                return None
            first = len(self._names)
            self._reserve_order_keys(first + len(missing))
            columns = np.arange(first, first + len(missing), dtype=np.int64)
            self._order_key[columns] = missing
            self._int_name_columns[missing] = columns
            self._record_positions(missing)
        key = (width, len(self._names))
        layout = getattr(self, "_dense_layout", None)  # (absent after unpickling)
        if layout is None or layout[0] != key or len(layout[1]) <= n_rows:
            columns = self._int_name_columns[:width]
            layout = (key, np.arange(0, n_rows * width + 1, width, dtype=np.int64), np.tile(columns, n_rows))
            self._dense_layout = layout
        return SparseRows(layout[1][: n_rows + 1], layout[2][: n_rows * width], dense.ravel())
