"""The least-squares family's array helpers and its ridge solver (004: Σ̂ + r·I factored by Cholesky, the simplex projection of Alg. 2, the calibration basis of Eq. 11)."""

from __future__ import annotations

import numpy as np

from ..batches import SparseRows


def project_simplex(V: np.ndarray) -> np.ndarray:
    """Euclidean projection of each row onto the probability simplex (sort-based,
    O(k log k) per row; Duchi et al. 2008).

    >>> project_simplex(np.array([[0.5, 0.5, 0.5], [2.0, 0.0, -1.0]])).round(4).tolist()
    [[0.3333, 0.3333, 0.3333], [1.0, 0.0, 0.0]]
    """
    V = np.atleast_2d(np.asarray(V, np.float64))
    n, k = V.shape
    U = -np.sort(-V, axis=1)
    cumulative = np.cumsum(U, axis=1) - 1.0
    positive = U - cumulative / np.arange(1, k + 1) > 0
    rho = k - 1 - np.argmax(positive[:, ::-1], axis=1)  # the last index where it holds
    theta = cumulative[np.arange(n), rho] / (rho + 1)
    return np.maximum(V - theta[:, None], 0.0)


def dense_rows(rows: SparseRows, width: int) -> np.ndarray:
    """A CSR batch as a dense ``(n, width)`` array (columns beyond ``width`` dropped)."""
    out = np.zeros((rows.n_rows, width))
    start, end = rows.indptr[0], rows.indptr[-1]  # a batch may be a view on part of longer arrays
    row_of = np.repeat(np.arange(rows.n_rows), np.diff(rows.indptr))
    indices, data = rows.indices[start:end], rows.data[start:end]
    keep = indices < width
    np.add.at(out, (row_of[keep], indices[keep]), data[keep])
    return out


def take_columns(X: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """``X[:, columns]``, without a copy when ``columns`` is ``0..d-1`` of all of X."""
    if len(columns) == X.shape[1] and np.array_equal(columns, np.arange(len(columns))):
        return X
    return X[:, columns]


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    out = np.zeros((len(y), n_classes))
    out[np.arange(len(y)), y] = 1.0
    return out


def ridged(second_moment: np.ndarray, ridge: float) -> np.ndarray:
    d = second_moment.shape[0]
    scale = float(np.trace(second_moment)) / max(d, 1) * ridge  # relative to the features' own scale
    return second_moment + max(scale, 1e-12) * np.eye(d)


class RidgeSolver:
    """Solves ``(Σ̂ + ridge · mean(diag Σ̂) · I) Z = B`` by one Cholesky factorisation (see the
    module docstring). ``order`` permutes the features into a canonical order (their name
    keys) before factoring, so that the order in which features entered the vocabulary —
    which depends on the key order of the first dicts — does not change the rounding of an
    ill-conditioned solve."""

    def __init__(self, second_moment: np.ndarray, ridge: float, order: np.ndarray | None = None):
        import scipy.linalg  # here, not at import: the streamlearn command does not pay for it

        A = ridged(second_moment, ridge)
        self.order = None if order is None or np.array_equal(order, np.arange(len(order))) else order
        if self.order is not None:
            A = A[np.ix_(self.order, self.order)]
        self._chol = scipy.linalg.cho_factor(A, check_finite=False)

    def solve(self, B: np.ndarray) -> np.ndarray:
        import scipy.linalg

        if self.order is None:
            return scipy.linalg.cho_solve(self._chol, B, check_finite=False)
        out = np.empty_like(B)
        out[self.order] = scipy.linalg.cho_solve(self._chol, B[self.order], check_finite=False)
        return out


#: the ridge of 004's parameter-free batch fit: the least that keeps Σ̂ invertible, relative to its mean diagonal
PARAMETER_FREE_RIDGE = 1e-6


def moment(A: np.ndarray, B: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``(1/n) Σ_i a_i b_iᵀ``, or with ``weights`` ``Σ_i w_i a_i b_iᵀ / Σ_i w_i``: the weighted
    problem's moments, an integer weight the row repeated (issue 77)."""
    if weights is None:
        return A.T @ B / A.shape[0]
    return (A * weights[:, None]).T @ B / weights.sum()


def log_loss(scores: np.ndarray, y: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Mean multinomial log-loss of scores (log-sum-exp); with ``weights`` the weighted mean."""
    m = scores.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(scores - m).sum(axis=1))
    losses = lse - scores[np.arange(len(y)), y]
    return float(np.mean(losses) if weights is None else (weights @ losses) / weights.sum())


def calibration_basis(Y: np.ndarray, powers=(1, 2, 3)) -> np.ndarray:
    """``G(ỹ)``: the elementwise powers of the predictions, side by side (n, m·k)."""
    return np.hstack([Y**p for p in powers])
