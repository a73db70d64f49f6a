"""The dense store's exact scan in blocks of rows (streamlearn/kernels/memoir_blocks.py): the
scores of 002's Eq. (1) by the NumPy reference, and bit for bit those of the row kernel it
replaces (predictions, probabilities, every class's score), whatever the block's rows hold."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamlearn import ExtremeSVM
from streamlearn.kernels import memoir_blocks, memoir_dense
from streamlearn.kernels.memoir_store import AW, A, G
from test_memoir_dense import dense_stream

SCALARS = np.zeros(8)
SCALARS[G], SCALARS[A], SCALARS[AW] = 0.7, 1.3, 2.1


def _rows(n: int, d: int, seed: int, shuffle_one: bool = False, intercept: bool = False):
    X = sp.random(n, d, density=0.6, random_state=seed, format="csr")
    X.sort_indices()
    indptr, indices, data = X.indptr.astype(np.int64), X.indices.astype(np.int64), 10.0 * X.data
    if intercept:  # column 0 appended after each row's features (the learner's intercept entry); row 3 only it
        rows = [(indices[indptr[i] : indptr[i + 1]] + 1, data[indptr[i] : indptr[i + 1]]) for i in range(n)]
        rows[3] = (rows[3][0][:0], rows[3][1][:0])
        indices = np.concatenate([np.append(c, 0) for c, _ in rows]).astype(np.int64)
        data = np.concatenate([np.append(v, 0.37) for _, v in rows])
        indptr = np.arange(0, n + 1, dtype=np.int64) + np.concatenate([[0], np.cumsum([len(c) for c, _ in rows])])
    if shuffle_one:  # a row whose entries are not in column order: the row kernel scores its block
        lo, hi = indptr[n // 2], indptr[n // 2 + 1]
        indices[lo:hi], data[lo:hi] = indices[lo:hi][::-1].copy(), data[lo:hi][::-1].copy()
    return indptr, indices, data


def _weights(n_classes: int, wv: int, wu: int, dtype, seed: int):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n_classes, wv)).astype(dtype), rng.normal(size=(n_classes, wu)).astype(dtype)


def _reference(indptr, indices, data, V, U, averaged):
    """002 Eq. (1)'s scores in NumPy: g V x, or the averaged iterate's (U x + A V x) / AW; columns
    past a matrix's width weigh 0."""
    X = sp.csr_matrix((data, indices, indptr)).toarray()
    width = max(X.shape[1], V.shape[1], U.shape[1])
    X = np.pad(X, ((0, 0), (0, width - X.shape[1])))
    v = X[:, : V.shape[1]] @ V.T.astype(np.float64)
    if not averaged:
        return SCALARS[G] * v
    return (X[:, : U.shape[1]] @ U.T.astype(np.float64) + SCALARS[A] * v) / SCALARS[AW]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("averaged", [False, True])
@pytest.mark.parametrize("widths", [(40, 40), (40, 37), (33, 45)])
@pytest.mark.parametrize("shuffle_one", [False, True])
@pytest.mark.parametrize("intercept", [False, True])
def test_block_scores_are_the_reference_and_the_row_kernels_bit_for_bit(dtype, averaged, widths, shuffle_one, intercept):
    n_rows = 3 * memoir_blocks.BLOCK + 5  # full blocks and a partial one
    indptr, indices, data = _rows(n_rows, 44 - intercept, seed=1, shuffle_one=shuffle_one, intercept=intercept)
    tails = [memoir_blocks.tail_column(indptr, indices, first, min(first + memoir_blocks.BLOCK, n_rows))
             for first in range(0, n_rows, memoir_blocks.BLOCK)]
    assert tails.count(0 if intercept else -1) == len(tails) - shuffle_one  # the blocked scan, but where a row is shuffled
    V, U = _weights(150, *widths, dtype, seed=2)
    expected = np.zeros((n_rows, 150))
    memoir_dense.class_scores(indptr, indices, data, V, U, SCALARS, 150, averaged, expected)
    scores = np.zeros((n_rows, 150))
    memoir_blocks.class_scores(indptr, indices, data, V, U, SCALARS, 150, averaged, scores)
    np.testing.assert_array_equal(scores, expected)
    np.testing.assert_allclose(scores, _reference(indptr, indices, data, V, U, averaged), rtol=1e-9, atol=1e-9)
    y = np.random.default_rng(3).integers(-1, 150, n_rows)
    for labels in (y, np.zeros(0, np.int64)):
        got, want = (np.empty(n_rows, np.int64), np.zeros(len(labels))), (np.empty(n_rows, np.int64), np.zeros(len(labels)))
        memoir_blocks.predict_rows(indptr, indices, data, V, U, SCALARS, 150, averaged, labels, *got)
        memoir_dense.predict_rows(indptr, indices, data, V, U, SCALARS, 150, averaged, labels, *want, np.empty(150),
                                  np.empty(150), np.zeros((0, 0), np.int64))
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    assert (got[0] == expected.argmax(axis=1)).all()


def test_no_class_predicts_minus_one_with_probability_zero():
    indptr, indices, data = _rows(5, 10, seed=4)
    V, U = _weights(0, 10, 10, np.float64, seed=5)
    predicted, p_true = np.empty(5, np.int64), np.ones(5)
    memoir_blocks.predict_rows(indptr, indices, data, V, U, SCALARS, 0, True, np.zeros(5, np.int64), predicted, p_true)
    assert predicted.tolist() == [-1] * 5 and p_true.tolist() == [0.0] * 5


def test_exact_dense_predictions_of_a_batch_are_those_of_its_rows_one_by_one():
    """Through the learner: predict_many's blocks, predict_one's single row and the scores of
    decision_function_many agree, bit for bit, on an embedding-like dense stream."""
    X, y = dense_stream(700, 60, 24, seed=6)
    model = ExtremeSVM(store="dense", oracle="exact")
    model.learn_many(X[:500], y[:500])
    batch = model.predict_many(X[500:])
    one_by_one = [model.predict_one(dict(enumerate(row))) for row in X[500:]]
    assert batch.tolist() == one_by_one
    scores = model.decision_function_many(X[500:])
    assert np.array_equal(np.asarray(model.classes)[np.asarray(scores).argmax(axis=1)], batch)
