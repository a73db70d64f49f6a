"""The kernels compiled ahead of time at install, with the argument types they are built for.

``setup.py`` compiles every function below into one extension module,
``streamlearn/kernels/_aot*.so`` (numba's ``pycc``: no numba at run time), and
:mod:`streamlearn.kernels` calls it whenever a call's arguments match one of the
function's signatures, and numba's JIT otherwise. These are the hot paths of the
``streamlearn`` command (parsing LIBSVM text, walking msgpack dict records, mapping batches to weight columns, the MCID
step and scoring, the temperature fit, the feature bins and the online standardiser), whose start-up the JIT's
compilation or cache loading would otherwise dominate, and the Primal Gradient Solver's step and scoring, whose first JIT compilation holds up a fresh install's first use of
its learners for seconds; every other kernel is JIT-compiled on first use.

A signature lists one type code per argument, all positional:

==============  ==============================================================
``"i8"``        an integer (Python ``int`` or a NumPy integer; not ``bool``)
``"f8"``        a float (Python ``float``/``int`` or a NumPy float)
``"b1"``        a ``bool`` (or ``np.bool_``)
``"T[::1]"``    a C-contiguous, writeable 1-D array of dtype ``T``
``"T[:, ::1]"`` a C-contiguous, writeable 2-D array of dtype ``T``
suffix ``"r"``  the array may be read-only (the kernel never writes it)
==============  ==============================================================

with ``T`` one of ``u1 i4 i8 u8 f8 b1``. A CSR batch's index arrays are int32 (SciPy's
default) or int64 (the LIBSVM parser's), so the kernels that read them are built for both.
"""

from __future__ import annotations

# indptr, indices, data of a CSR batch: int32 as SciPy builds them, int64 as the LIBSVM parser does
_CSR_READ = [("i4[::1]r", "i4[::1]r", "f8[::1]r"), ("i8[::1]r", "i8[::1]r", "f8[::1]r")]

EXPORTS: dict[str, dict[str, list[tuple[str, ...]]]] = {
    "calibration": {
        # scores, targets, rows fitted on, start, settings
        "fit_beta": [("f8[:, ::1]r", "i8[::1]r", "i8[::1]r", "f8", "f8[::1]r")],
        # the window's scores, examples entered, rows looked at
        "newest_spread": [("f8[:, ::1]r", "i8", "i8")],
        # the window's scores and targets, entered, fit_spread, beta, settings
        "count_entered": [("f8[:, ::1]r", "i8[::1]r", "i8", "f8", "f8", "f8[::1]r")],
        # the window's scores and targets, entered, fit_spread, beta, rows, their targets, positions, settings,
        # log_positions, log_betas
        "enter_rows": [("f8[:, ::1]", "i8[::1]", "i8", "f8", "f8", "f8[:, ::1]r", "i8[::1]r", "i8[::1]r", "f8[::1]r",
                        "i8[::1]", "f8[::1]")],
    },
    "text": {
        # buf, pow10, with_hashes, labels_optional
        "parse_libsvm": [("u1[::1]r", "f8[::1]r", "b1", "b1")],
        # buf, line_start, line_end, indptr, slow, out_start, out_end
        "value_spans": [("u1[::1]r", "i8[::1]r", "i8[::1]r", "i8[::1]r", "b1[::1]r", "i8[::1]", "i8[::1]")],
        "fnv1a": [("u1[::1]r", "i8", "i8")],
        "count_lines": [("u1[::1]r", "i8", "i8")],
    },
    "walker": {
        # buf, slots, hashes, name_start, name_end, arena, counts, last_seen, stamp, indptr, ids, values, label_int,
        # label_start, label_end, name_key
        "walk_records": [("u1[::1]r", "i8[::1]", "u8[::1]", "i8[::1]", "i8[::1]", "u1[::1]", "i8[::1]", "i8[::1]", "i8",
                          "i8[::1]", "i8[::1]", "f8[::1]", "i8[::1]", "i8[::1]", "i8[::1]", "u1[::1]")],
        # hashes, name_start, name_end, n_names, slots
        "rehash": [("u8[::1]r", "i8[::1]r", "i8[::1]r", "i8", "i8[::1]")],
    },
    "rows": {
        # indptr, indices, data, column_of, keys, out_idx, out_val, keys_are_positions, grow, next_column, added,
        # copy_values
        "map_rows": [
            (*csr, "i8[::1]", "i8[::1]", "i8[::1]", "f8[::1]", "b1", "b1", "i8", "i8[::1]", "b1") for csr in _CSR_READ
        ],
        "unknown_positions": [("i4[::1]r", "i8[::1]"), ("i8[::1]r", "i8[::1]")],
        "first_appearance": [("i4[::1]r", "i8"), ("i8[::1]r", "i8")],
        "sort_rows_by_key": [("i8[::1]r", "i8[::1]", "f8[::1]", "i8[::1]r")],
        # indptr, indices, data of model rows; the column and value to append to each
        "append_column": [("i8[::1]r", "i8[::1]r", "f8[::1]r", "i8", "f8")],
        # indptr, data, out
        "mean_squares": [(indptr, data, "f8[::1]") for indptr, _, data in _CSR_READ],
        "dense_census": [("f8[:, ::1]r",)],
        # a dense batch, C-contiguous; column_of, keys, out_idx, out_val, grow, next_column, added
        "dense_rows": [("f8[:, ::1]r", "i8[::1]", "i8[::1]", "i8[::1]", "f8[::1]", "b1", "i8", "i8[::1]")],
        # X, column_of, keys, grow, next_column, added, then RowExpansion's fields, out_idx, out_val
        "dense_model_rows": [("f8[:, ::1]r", "i8[::1]", "i8[::1]", "b1", "i8", "i8[::1]", "f8[::1]", "f8[::1]", "i8", "b1",
                              "i8", "f8", "i8", "i8", "f8", "i8", "i8[::1]", "f8[::1]")],
        # indptr, indices, data, width
        "check_csr": [(*csr, "i8") for csr in _CSR_READ],
    },
    "scaling": {
        # indptr, indices, data, sums, squares, n_seen, learn, out
        "standardize_rows": [("i8[::1]r", "i8[::1]r", "f8[::1]r", "f8[::1]", "f8[::1]", "i8", "b1", "f8[::1]")],
        # indptr, indices, data, sums, squares, n_seen, learn, n_bins, half_range, max_nonzeros, binned_columns, values,
        # last_column, out_indptr, out_indices, out_data
        "bin_rows": [("i8[::1]r", "i8[::1]r", "f8[::1]r", "f8[::1]", "f8[::1]", "i8", "b1", "i8", "f8", "i8", "i8", "f8[::1]r",
                      "i8", "i8[::1]", "i8[::1]", "f8[::1]")],
    },
    "scaled": {
        # indptr, indices, data, V, scale, U, A, total_weight, n_classes, averaged, out
        "scores_batch": [
            ("i8[::1]r", "i8[::1]r", "f8[::1]r", "f8[:, ::1]r", "f8[::1]r", "f8[:, ::1]r", "f8[::1]r", "f8", "i8", "b1",
             "f8[:, ::1]"),
        ],
    },
    "mcid": {
        # indptr, indices, data, y, weights (empty: all 1), group_size, V, scale, sqnorm, U, A, n_features, n_classes, t,
        # lam, loss, project, per_class_ball, averaged, renormalize_below, average_power, average_weight, scores_out
        "learn_groups": [
            ("i8[::1]r", "i8[::1]r", "f8[::1]r", "i8[::1]r", "f8[::1]r", "i8", "f8[:, ::1]", "f8[::1]", "f8[::1]",
             "f8[:, ::1]", "f8[::1]", "i8", "i8", "i8", "f8", "i8", "b1", "b1", "b1", "f8", "f8", "f8", "f8[:, ::1]"),
        ],
        # learn_groups' arguments but scores_out, then the tracker's V, scale, sqnorm, U, A, lam, renormalize_below,
        # store_classes, watch, watch_params, choice, choice_keep, scores_out, spare_scores
        "learn_groups_adapting": [
            ("i8[::1]r", "i8[::1]r", "f8[::1]r", "i8[::1]r", "f8[::1]r", "i8", "f8[:, ::1]", "f8[::1]", "f8[::1]",
             "f8[:, ::1]", "f8[::1]", "i8", "i8", "i8", "f8", "i8", "b1", "b1", "b1", "f8", "f8", "f8",
             "f8[:, ::1]", "f8[::1]", "f8[::1]", "f8[:, ::1]", "f8[::1]", "f8", "f8",
             "i8", "f8[::1]", "f8[::1]r", "f8[::1]", "f8", "f8[:, ::1]", "f8[:, ::1]"),
        ],
    },
    "pgs": {
        # indptr, indices, data, y (class indices; reals for the regressor), weights, group_size, Lam, Phi, separate_phi, N,
        # stats, n_active, t, sigma, p, q, bound, loss, regularizer, rng_state, snap_Phi, snap_N, snap_meta,
        # keep_random, averaged, Acc, Mark, Cj, keys, scores
        "learn_groups": [
            ("i8[::1]r", "i8[::1]r", "f8[::1]r", y, "f8[::1]r", "i8", "f8[:, ::1]", "f8[:, ::1]", "b1", "f8[::1]", "f8[::1]", "i8", "i8",
             "f8", "f8", "f8", "f8", "i8", "i8", "u8[::1]", "f8[:, ::1]", "f8[::1]", "f8[::1]", "b1", "b1", "f8[:, ::1]",
             "f8[:, ::1]", "f8[::1]", "i8[::1]r", "f8[:, ::1]")
            for y in ("i8[::1]r", "f8[::1]r")
        ],
        # t, sigma, p, q, bound, regularizer, S, N, n_classes, out
        "factors": [("i8", "f8", "f8", "f8", "f8", "i8", "f8", "f8[::1]r", "i8", "f8[::1]")],
        # Lam, e, out
        "phi_of": [("f8[:, ::1]r", "f8", "f8[:, ::1]")],
        # indptr, indices, data, Phi, g, n_classes, out
        "scores_batch": [("i8[::1]r", "i8[::1]r", "f8[::1]r", "f8[:, ::1]r", "f8[::1]r", "i8", "f8[:, ::1]")],
        # indptr, indices, data, Phi, Acc, Mark, Cj, n_classes, t, out
        "average_scores": [("i8[::1]r", "i8[::1]r", "f8[::1]r", "f8[:, ::1]r", "f8[:, ::1]r", "f8[:, ::1]r", "f8[::1]r", "i8",
                            "i8", "f8[:, ::1]")],
        # Lam, N, order, n_classes, q, stats
        "exact_sums": [("f8[:, ::1]r", "f8[::1]", "i8[::1]r", "i8", "f8", "f8[::1]")],
    },
}


def symbol(module: str, function: str, variant: int) -> str:
    """The name of one compiled signature in the extension module."""
    return f"{module}__{function}__{variant}"
