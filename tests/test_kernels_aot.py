"""The ahead-of-time kernels (streamlearn/kernels/_aot*.so, built by setup.py): present,
bit-identical to numba's JIT versions of the same functions for every exported signature,
refused (JIT instead) for arguments they were not built for, and running without the GIL."""

from __future__ import annotations

import importlib
import os
import pathlib
import sys
import threading

import msgpack
import numpy as np
import pytest
import scipy.sparse as sp

import streamlearn.kernels as kernels
from streamlearn.adaptation import ChangeWatch, TrackerChoice, fading_of, watch_params
from streamlearn.calibration import SETTINGS
from streamlearn.kernels import codes
from streamlearn.kernels.exports import EXPORTS, symbol

pytestmark = pytest.mark.skipif(os.environ.get("STREAMLEARN_JIT") is not None, reason="STREAMLEARN_JIT forces the JIT kernels")

LIBSVM = b"1 3:0.5 7:-2 # c\n\n2 1:1e-3 2:0.25\nspam 4:1\n3 2:nan\n-1 0:7 12:123456789012345678901\n"


def _csr(index_dtype):
    m = sp.random(40, 30, density=0.3, random_state=4, format="csr")
    m.indices[5], m.indices[6] = m.indices[6], m.indices[5]  # a row out of order
    return m.indptr.astype(index_dtype), m.indices.astype(index_dtype), m.data.copy()


def _weights(rng, d=30, k=6):
    return (np.ascontiguousarray(rng.normal(size=(d, k))), rng.uniform(0.5, 2, k), rng.uniform(0, 1, k),
            np.ascontiguousarray(rng.normal(size=(d, k))), rng.uniform(0, 1, k))


def sample_calls():
    """``(module, function, variant, arguments)`` for every exported signature."""
    rng = np.random.default_rng(0)
    buf = np.frombuffer(LIBSVM, np.uint8)
    pow10 = np.array([10.0**i for i in range(23)])
    parsed = kernels.compiled("text").parse_libsvm(buf, pow10, True, False)
    line_start, line_end, indptr, slow = parsed[0], parsed[1], parsed[8], parsed[11]
    yield "text", "parse_libsvm", 0, (buf, pow10, True, False)
    yield "text", "parse_libsvm", 0, (buf, pow10, False, True)
    yield "text", "value_spans", 0, (buf, line_start, line_end, indptr, slow, np.zeros(4, np.int64), np.zeros(4, np.int64))
    yield "text", "fnv1a", 0, (buf, 2, 40)
    yield "text", "count_lines", 0, (buf, 3, 2)
    for variant, dtype in enumerate((np.int32, np.int64)):
        indptr, indices, data = _csr(dtype)
        column_of = rng.permutation(30).astype(np.int64)
        column_of[:5] = -1
        keys = rng.integers(0, 9, 60).astype(np.int64)
        yield "rows", "map_rows", variant, (indptr, indices, data, column_of, keys, np.zeros(400, np.int64), np.zeros(400),
                                             variant == 1, True, 30, np.zeros(30, np.int64), variant == 0)
        yield "rows", "unknown_positions", variant, (indices, column_of)
        yield "rows", "first_appearance", variant, (indices, 30)
        bad = data.copy()
        bad[17] = np.inf
        yield "rows", "check_csr", variant, (indptr, indices, bad, 30)
        huge = data.copy()
        huge[3], huge[4] = 1e200, 0.0  # a square past float64, an explicit zero
        yield "rows", "mean_squares", variant, (indptr[1:], huge, np.zeros(len(indptr) - 2))
    message = np.frombuffer(msgpack.packb([{"x": {"a": 1.5, 7: 2, "bb": 0.25}, "y": "cat"}, {"y": 4, "x": {"a": -1}}], use_single_float=True), np.uint8)
    table = (np.full(4 * 8, -1, np.int64), np.zeros(4, np.uint64), np.zeros(4, np.int64), np.zeros(4, np.int64), np.zeros(64, np.uint8),
             np.zeros(2, np.int64), np.zeros(4, np.int64))
    scratch = (np.zeros(len(message) + 1, np.int64), np.zeros(len(message) + 1, np.int64), np.zeros(len(message) + 1),
               *(np.zeros(len(message) + 1, np.int64) for _ in range(3)), np.zeros(len(message) + 9, np.uint8))
    yield "walker", "walk_records", 0, (message, *table, 5, *scratch)
    hashes, starts = rng.integers(0, 2**63, 3).astype(np.uint64), np.array([0, 3, 5], np.int64)
    yield "walker", "rehash", 0, (hashes, starts, starts + 2, 3, np.full(4 * 8, -1, np.int64))
    indptr, indices, data = _csr(np.int64)
    yield "rows", "sort_rows_by_key", 0, (indptr, indices, data, rng.integers(0, 5, 30).astype(np.int64))
    for n_seen, learn in ((0, True), (5, False)):
        sums, squares = rng.normal(size=30), rng.uniform(1, 5, 30)
        yield "scaling", "standardize_rows", 0, (indptr, indices, data, sums, squares, n_seen, learn, np.zeros(len(data)))
    n_rows, n_entries = len(indptr) - 1, len(data)  # at most 5 nonzeros binned (some rows have more), columns below 20
    for n_seen, learn, last_column in ((0, True, -1), (3, True, 250), (5, False, 250)):
        sums, squares = rng.normal(size=30), rng.uniform(1, 5, 30)
        yield "scaling", "bin_rows", 0, (indptr, indices, data, sums, squares, n_seen, learn, 12, 3.0, 5, 20, rng.uniform(0.1, 1, n_rows),
                                         last_column, np.zeros(n_rows + 1, np.int64), np.zeros(2 * n_entries + n_rows, np.int64),
                                         np.zeros(2 * n_entries + n_rows))
    yield "rows", "append_column", 0, (indptr[2:], indices, data, 31, 0.1)
    dense = rng.normal(size=(7, 9)) * (rng.random((7, 9)) < 0.4)
    column_of = np.full(9, -1, np.int64)
    column_of[[1, 4]] = [0, 1]
    yield "rows", "dense_census", 0, (dense,)
    yield "rows", "dense_rows", 0, (dense, column_of, np.zeros(12, np.int64), np.zeros(63, np.int64), np.zeros(63), True, 2,
                                    np.zeros(9, np.int64))
    yield "rows", "dense_model_rows", 0, (dense, column_of.copy(), np.zeros(12, np.int64), True, 2, np.zeros(9, np.int64),
                                          np.zeros(12), np.zeros(12), 0, True, 4, 3.0, 5, 3, 0.5, 40, np.zeros(140, np.int64),
                                          np.zeros(140))
    scores = rng.normal(size=(9, 4)) * 5
    scores[2, 1] = -np.inf
    targets = rng.integers(0, 4, 9).astype(np.int64)
    targets[2] = 0
    yield "calibration", "fit_beta", 0, (scores, targets, np.arange(9), 0.7, SETTINGS)
    yield "calibration", "newest_spread", 0, (scores, 12, 5)
    yield "calibration", "count_entered", 0, (scores, targets, 15, 3.0, 0.5, SETTINGS)
    yield "calibration", "enter_rows", 0, (scores.copy(), targets.copy(), 7, 3.0, 0.5, scores[:5, :3].copy(), targets[:5] % 3,
                                           np.arange(1, 6), SETTINGS, np.zeros(5, np.int64), np.zeros(5))
    V, scale, sqnorm, U, A = _weights(rng)
    yield "scaled", "scores_batch", 0, (indptr, indices, data, V, scale, U, A, 3.5, 6, True, np.zeros((40, 6)))
    y = rng.integers(0, 6, 40).astype(np.int64)
    for loss in (codes.SOFTMAX, codes.CRAMMER_SINGER, codes.OVR_LOGISTIC):
        V, scale, sqnorm, U, A = _weights(rng)
        weights = rng.uniform(0.0, 3.0, 40) if loss == codes.SOFTMAX else np.ones(0)  # weighted rows, and none
        yield "mcid", "learn_groups", 0, (indptr, indices, data, y, weights, 2, V, scale, sqnorm, U, A, 30, 4, 7, 0.01, loss, True,
                                          False, True, 0.3, 2.0, 11.0, np.full((40, 6), -np.inf))
        tracker_V, tracker_scale, tracker_sqnorm, tracker_U, tracker_A = _weights(rng)
        watch = ChangeWatch()
        watch.steps = 30
        yield "mcid", "learn_groups_adapting", 0, (indptr, indices, data, y, weights, 2, V, scale, sqnorm, U, A, 30, 4, 7, 0.01, loss,
                                                   False, False, True, 0.3, 2.0, 11.0,
                                                   tracker_V, tracker_scale, tracker_sqnorm, tracker_U, tracker_A,
                                                   0.1, 1e-30, 6, watch.as_array(), watch_params(2, 2.0),
                                                   TrackerChoice().as_array(), fading_of(64),
                                                   np.full((40, 6), -np.inf), np.full((40, 6), -np.inf))
    yield from _primal_gradient_calls(rng)


def _recorded_calls(module: str, run) -> list:
    """``(function, arguments)`` of each call of ``module``'s exported kernels while ``run()`` goes
    on, the arrays a kernel may write copied as they were before the call: the argument types
    and states the learners really pass."""
    kernel_module = kernels.compiled(module)
    originals = {name: getattr(kernel_module, name) for name in EXPORTS[module]}
    calls = []

    def recording(name, original):
        def call(*args):
            calls.append((name, _copied(args)))
            return original(*args)

        return call

    for name, original in originals.items():
        setattr(kernel_module, name, recording(name, original))
    try:
        run()
    finally:
        for name, original in originals.items():
            setattr(kernel_module, name, original)
    return calls


def _primal_gradient_calls(rng):
    """The Primal Gradient Solver's exported kernels as its learners call them (the last call of
    each signature), and ``exact_sums`` (called at a restart) by hand."""
    from streamlearn import MulticlassPGS, PrimalGradientRegressor, learner_from_state

    X = rng.normal(size=(150, 12)) * (rng.random((150, 12)) < 0.6)
    y = rng.integers(0, 4, 150)

    def run():
        for model in (MulticlassPGS(iterate="average"), MulticlassPGS(p=1.5)):  # the average; the last iterate, φ apart
            model.learn_many(X, y)
            model.predict_many(X[:9])
        learner_from_state(model.export_state())  # φ recomputed from the dual sums
        PrimalGradientRegressor(bound=5.0).learn_many(X, X[:, 0])

    calls = _recorded_calls("pgs", run)
    for name, signatures in EXPORTS["pgs"].items():
        for variant, signature in enumerate(signatures):
            check = kernels.signature_check(signature)
            fitting = [args for function, args in calls if function == name and check(*args)]
            if fitting:
                yield "pgs", name, variant, fitting[-1]
    Lam = rng.normal(size=(12, 4)) * (rng.random((12, 4)) < 0.5)
    yield "pgs", "exact_sums", 0, (Lam, np.zeros(4), rng.permutation(12).astype(np.int64), 3, 3.0, np.zeros(3))


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, z) for x, z in zip(a, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return type(a) is type(b) and (a == b or (a != a and b != b))


def _copied(args):
    return tuple(a.copy() if isinstance(a, np.ndarray) and a.flags.writeable else a for a in args)


def test_the_ahead_of_time_kernels_are_built():
    """setup.py compiled them at install: the benchmarks' start-up and speed rely on it (an
    install without a C compiler runs on the JIT: nothing to check there)."""
    import shutil

    if not any(shutil.which(cc) for cc in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler here: the package installed without its ahead-of-time kernels, as designed")
    assert kernels.backend() == "aot", kernels.backend_note()


@pytest.mark.slow  # it waits for a run of the quick subset
def test_the_quick_suite_passes_on_the_jit_alone(request):
    """numba's pycc may leave numba: the JIT path (``STREAMLEARN_JIT=1``) must stay first class.
    The quick subset (but for conftest's ``JIT_ALONE_LEAVES_OUT``) runs with every kernel JIT-compiled,
    in a process of its own (when the whole suite runs, started once this file's tests have compiled the
    kernels and waited for at the session's end: tests/conftest.py)."""
    from conftest import PATIENCE, start_jit_alone_run

    process = getattr(request.config, "jit_alone_run", None) or start_jit_alone_run()
    returncode = process.wait(timeout=PATIENCE)  # the run's own limit is on its CPU time (conftest.limit_cpu)
    output = pathlib.Path(process.output_path).read_text()
    os.unlink(process.output_path)
    assert returncode == 0, output[-5000:]
    assert " passed" in output.strip().splitlines()[-1]


def test_every_exported_signature_has_a_sample_call():
    exported = {(m, f, v) for m, functions in EXPORTS.items() for f, signatures in functions.items() for v in range(len(signatures))}
    assert {(m, f, v) for m, f, v, _ in sample_calls()} == exported


@pytest.mark.parametrize("call", list(sample_calls()), ids=lambda c: f"{c[0]}.{c[1]}[{c[2]}]" if isinstance(c, tuple) else "")
def test_ahead_of_time_equals_jit_bit_for_bit(call):
    """Outputs and every array the kernel writes are the same bytes either way."""
    module, function, variant, args = call
    if kernels.backend() != "aot":
        pytest.skip("no ahead-of-time build")
    jit = getattr(importlib.import_module(f"streamlearn.kernels.{module}"), function)
    aot = kernels.aot_function(symbol(module, function, variant))
    jit_args, aot_args = _copied(args), _copied(args)
    assert kernels.signature_check(EXPORTS[module][function][variant])(*aot_args)
    assert _same(aot(*aot_args), jit(*jit_args))
    assert all(_same(a, b) for a, b in zip(aot_args, jit_args))


def test_arguments_outside_the_compiled_signatures_go_to_the_jit():
    """The compiled wrappers do not check array types (a strided view was read as if it were
    contiguous): the dispatcher does, and sends anything else to numba's JIT."""
    rows = kernels.compiled("rows")
    indices = np.array([3, 9, 1, 1, 3, 9, 5, 0], np.int64)
    assert rows.first_appearance(indices[::2], 10).tolist() == [3, 1, 5]  # non-contiguous
    assert rows.first_appearance(indices.astype(np.int16), 10).tolist() == [3, 9, 1, 5, 0]  # no int16 build
    assert rows.first_appearance(indices, np.int64(10)).tolist() == [3, 9, 1, 5, 0]
    check = kernels.argument_check("f8[:, ::1]")
    frozen = np.zeros((2, 2))
    frozen.flags.writeable = False
    assert check(np.zeros((2, 2))) and not check(np.zeros((2, 2)).T) and not check(frozen)
    assert not check(np.zeros((2, 2), np.float32)) and not check(np.zeros(4)) and not check([[0.0]])


def test_a_trusting_kernel_checks_every_argument_but_the_trusted_ones():
    """``KernelModule.trusting`` leaves the weight store's positions unchecked and keeps the
    others: a strided view at a checked position still goes to the JIT (and is read right)."""
    from streamlearn.kernels.exports import EXPORTS

    codes = EXPORTS["scaled"]["scores_batch"][0]
    check = kernels.signature_check(codes, frozenset(range(3, 7)))
    indptr, indices, data = np.array([0, 2], np.int64), np.array([0, 1], np.int64), np.array([1.0, 2.0])
    V, scale, U, A = np.ones((4, 2)), np.ones(2), np.zeros((4, 2)), np.zeros(2)
    out = np.zeros((1, 2))
    assert check(indptr, indices, data, V, scale, U, A, 1.0, 2, False, out)
    assert check(indptr, indices, data, [[1.0]], None, None, None, 1.0, 2, False, out)  # trusted: not looked at
    assert not check(indptr, indices[::1].astype(np.int32), data, V, scale, U, A, 1.0, 2, False, out)
    scores = kernels.compiled("scaled").trusting("scores_batch", frozenset(range(3, 7)))
    strided = np.array([1.0, 0.0, 2.0])[::2]  # a checked position: the JIT takes it
    scores(indptr, indices, strided, V, scale, U, A, 1.0, 2, False, out)
    np.testing.assert_array_equal(out, [[3.0, 3.0]])


def test_compiled_kernels_release_the_gil():
    """While one thread is inside a long kernel call, another thread's Python code runs.

    With a long switch interval, the interpreter takes the GIL from the spinning main
    thread only every half second, and never while a thread is inside a C call: a kernel
    that held the GIL would leave the counter exactly where it was during the call."""
    count_lines = kernels.compiled("text").count_lines
    big = np.zeros(400_000_000, np.uint8)  # no newline: the kernel reads all of it
    counter, seen = [0], {}
    done = threading.Event()

    def worker():
        seen["before"] = counter[0]
        count_lines(big, 0, 1)
        seen["after"] = counter[0]
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        thread = threading.Thread(target=worker)
        thread.start()
        while not done.is_set():
            counter[0] += 1
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert seen["after"] - seen["before"] > 1000


def test_the_hot_paths_run_compiled_without_numba(tmp_path):
    """The command on a LIBSVM file, and learning and predicting through the documented input
    types (SciPy CSR with int32 indices, NumPy arrays, dicts), by the MCID and the Primal
    Gradient Solver's learners, call only the compiled build: a
    mismatch of types would send a call to the JIT silently, importing numba (~0.6 s)."""
    if kernels.backend() != "aot":
        pytest.skip("no ahead-of-time build")
    import subprocess

    data = tmp_path / "d.svm"
    data.write_text("".join(f"{i % 3} {i % 7}:1.5 {7 + i % 5}:-0.25 20:{i / 10}\n" for i in range(300)))
    program = f"""
import sys
import numpy as np, scipy.sparse as sp
from streamlearn import MulticlassSVM, MulticlassLogisticRegression, MulticlassPGS, PrimalGradientSolver, PrimalGradientRegressor
from streamlearn.service.cli import main
assert main(["train", {str(data)!r}, "--learner", "MulticlassSVM", "--quiet", "--holdout", "0.1"]) == 0
X = sp.random(200, 30, density=0.2, format="csr", random_state=0)
y = np.arange(200) % 4
for model in (MulticlassSVM(), MulticlassLogisticRegression(average=True, average_power=2.0)):
    model.learn_many(X, y)
    model.learn_many(X.toarray(), y)
    model.learn_one({{"a": 1.0, 3: 2.0}}, 9)
    model.predict_many(X); model.predict_proba_one({{"a": 1.0}})
for model in (MulticlassPGS(), MulticlassPGS(p=1.5), PrimalGradientSolver(classes=(0, 1))):
    model.learn_many(X, y % 2)
    model.learn_one({{"a": 1.0, 3: 2.0}}, 1)
    model.predict_many(X); model.predict_one({{"a": 1.0}})
PrimalGradientRegressor(bound=5.0).learn_many(X, y / 4.0)
print("numba" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip().splitlines()[-1] == "False", out.stdout + out.stderr


@pytest.mark.parametrize("shape", [(6, 11), (1, 1), (0, 4), (5, 0)])
def test_a_dense_batch_as_csr_is_scipys_csr_matrix(shape):
    """The dense road's CSR (the DataFrame's and the hashed model's) against SciPy's (its
    reference): the same arrays, row order, columns ascending, zeros dropped."""
    from streamlearn.batches import batch_to_csr

    rng = np.random.default_rng(sum(shape))
    dense = rng.normal(size=shape) * (rng.random(shape) < 0.5)
    _, matrix, needed = batch_to_csr(dense)
    expected = sp.csr_matrix(dense)
    np.testing.assert_array_equal(matrix.indptr, expected.indptr)
    np.testing.assert_array_equal(matrix.indices, expected.indices)
    np.testing.assert_array_equal(matrix.data, expected.data)
    assert needed == (int(expected.indices.max()) + 1 if expected.nnz else 0)


def _dense_rows_reference(dense, column_of, grow, next_column):
    """What the CSR road gives for a dense batch: SciPy's CSR (columns ascending in a row), each
    position mapped to its column, an unknown one given the next column at its first appearance
    (row by row) with ``grow``, dropped without."""
    matrix = sp.csr_matrix(dense)
    column_of, added, indptr, indices, data = column_of.copy(), [], [0], [], []
    for i in range(matrix.shape[0]):
        for j, v in zip(matrix.indices[matrix.indptr[i] : matrix.indptr[i + 1]], matrix.data[matrix.indptr[i] : matrix.indptr[i + 1]]):
            if column_of[j] < 0 and grow:
                column_of[j] = next_column + len(added)
                added.append(j)
            if column_of[j] >= 0:
                indices.append(column_of[j])
                data.append(v)
        indptr.append(len(indices))
    return np.array(indptr), np.array(indices, np.int64), np.array(data), column_of, added


@pytest.mark.parametrize("known_share", [0.5, 1.0])
@pytest.mark.parametrize("grow", [True, False])
@pytest.mark.parametrize("shape", [(8, 13), (1, 1), (0, 4), (5, 0)])
def test_dense_rows_is_the_csr_road_in_one_pass(shape, grow, known_share):
    """The dense road's one pass against SciPy's CSR mapped column by column (its reference):
    the same rows, new positions given columns in order of first appearance, unknown ones
    dropped without ``grow``; the order keys of new columns are their positions. Every other
    row has no zero, and with ``known_share`` 1 every column is known."""
    rng = np.random.default_rng(sum(shape) + grow)
    keep = rng.random(shape) < 0.5
    keep[::2] = True
    dense = rng.normal(size=shape) * keep
    column_of = np.full(shape[1], -1, np.int64)
    known = rng.permutation(shape[1])[: int(shape[1] * known_share)]
    column_of[known] = 3 + np.arange(len(known))
    next_column = 3 + len(known)
    count = int(np.count_nonzero(dense))
    keys, added = np.zeros(next_column + shape[1], np.int64), np.zeros(shape[1], np.int64)
    out_idx, out_val, mapped = np.zeros(count, np.int64), np.zeros(count), column_of.copy()
    indptr, n, n_added = kernels.compiled("rows").dense_rows(dense, mapped, keys, out_idx, out_val, grow, next_column, added)
    ref_indptr, ref_indices, ref_data, ref_column_of, ref_added = _dense_rows_reference(dense, column_of, grow, next_column)
    assert n == len(ref_indices) and n_added == len(ref_added)
    np.testing.assert_array_equal(indptr, ref_indptr)
    np.testing.assert_array_equal(out_idx[:n], ref_indices)
    np.testing.assert_array_equal(out_val[:n], ref_data)
    np.testing.assert_array_equal(mapped, ref_column_of)
    np.testing.assert_array_equal(added[:n_added], ref_added)
    np.testing.assert_array_equal(keys[next_column : next_column + n_added], ref_added)


@pytest.mark.parametrize("shape", [(8, 13), (1, 1), (0, 4), (5, 0)])
def test_dense_census_is_count_nonzero_and_the_first_non_finite_position(shape):
    rng = np.random.default_rng(sum(shape))
    dense = rng.normal(size=shape) * (rng.random(shape) < 0.5)
    census = kernels.compiled("rows").dense_census
    assert census(dense) == (int(np.count_nonzero(dense)), -1)
    if dense.size:
        for bad in (np.nan, np.inf, -np.inf):
            spoiled = dense.copy()
            spoiled.flat[[dense.size // 2, dense.size - 1]] = bad
            assert census(spoiled)[1] == int(np.flatnonzero(~np.isfinite(spoiled))[0])


def test_append_column_is_numpys_insert_at_each_row_end():
    """The intercept's column appended to model rows, against ``np.insert`` (its reference), for
    rows that start past entry 0 (a slice of a batch) and empty rows."""
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 4, 12)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices, data = rng.integers(0, 50, indptr[-1]).astype(np.int64), rng.normal(size=indptr[-1])
    part = indptr[3:]
    got = kernels.compiled("rows").append_column(part, indices, data, 99, 0.1)
    lo, hi = part[0], part[-1]
    ends = part[1:] - lo
    np.testing.assert_array_equal(got[0], part - lo + np.arange(len(part)))
    np.testing.assert_array_equal(got[1], np.insert(indices[lo:hi], ends, 99))
    np.testing.assert_array_equal(got[2], np.insert(data[lo:hi], ends, 0.1))


def test_a_missing_build_is_said_once_at_the_first_compiled_call(tmp_path):
    """Issue 75/76: without the ahead-of-time build every kernel is compiled at its first use,
    seconds each, and nothing said why; now one warning names the reason (once per process)."""
    import subprocess

    program = """
import sys, warnings
sys.modules["streamlearn.kernels._aot"] = None  # as an install whose build failed: the import fails
import numpy as np
from streamlearn import MulticlassSVM
model = MulticlassSVM()
model.learn_many(np.eye(4), [0, 1, 2, 3])
model.learn_many(np.eye(4), [0, 1, 2, 3])
print(model.predict_one({0: 1.0}))
"""
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "0", out.stdout + out.stderr
    assert out.stderr.count("KernelCompilationWarning: streamlearn: no ahead-of-time kernels") == 1, out.stderr
    assert "numba compiles each kernel at its first use" in out.stderr


@pytest.mark.parametrize("longest", [5, 32, 33, 300])
def test_sort_rows_by_key_is_numpys_stable_argsort_of_each_row(longest):
    """Rows sorted by insertion (up to SHORT_ROW entries) and by merge sort (longer), keys
    repeated so that stability shows, against NumPy's stable argsort row by row."""
    rng = np.random.default_rng(longest)
    lengths = rng.integers(0, longest + 1, 40)
    lengths[:3] = (0, 1, longest)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices = rng.integers(0, 50, indptr[-1]).astype(np.int64)
    data = rng.normal(size=indptr[-1])
    keys = rng.integers(0, 20, 50).astype(np.int64)  # columns share keys: ties
    expected_indices, expected_data = indices.copy(), data.copy()
    for i in range(40):
        lo, hi = indptr[i], indptr[i + 1]
        order = np.argsort(keys[indices[lo:hi]], kind="stable") + lo
        expected_indices[lo:hi], expected_data[lo:hi] = indices[order], data[order]
    kernels.compiled("rows").sort_rows_by_key(indptr, indices, data, keys)
    np.testing.assert_array_equal(indices, expected_indices)
    np.testing.assert_array_equal(data, expected_data)
