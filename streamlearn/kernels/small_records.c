/* The MCID learners' one-example road for small records, in C (streamlearn.mcid.small_records).

   predict_one + learn_one of a 10-feature dict cost ~6 us in river's pure-Python
   LogisticRegression; a call into a numba-compiled kernel alone costs ~3 us of argument
   unboxing. So the whole example -- the dict's encoding, the fast tracker's step and the
   averaged model's (000_9ee2d88cd77f9d98.txt, Alg. 1 with Eq. 14-17 for a group of one row),
   both prequential mistakes, the Page-Hinkley update and the calibration window's row -- is
   one call here. Every operation is the numba kernels' (kernels/mcid.py learn_groups,
   loss_coefficients, mistakes_in; kernels/scaled.py row_dots, scores_batch, add_to_column(s),
   renormalize_columns, project_to_ball; kernels/rows.py mean_squares; adaptation.PageHinkleyUp),
   in the same order with separate multiplies and adds (built with -ffp-contract=off), so the
   model is the same bit for bit (tests/test_small_records.py checks both roads and the
   NumPy reference of tests/test_mcid_reference.py).

   A call that cannot be served (a name or class the model does not have yet, a value that is
   not a plain finite number, more than MAX_ENTRIES entries or MAX_CLASSES classes) returns
   None before changing anything, and the caller takes the general road. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

#define MAX_NAMES 64  /* a dict's names */
#define MAX_ENTRIES (2 * MAX_NAMES + 1)  /* a row's entries: the names', their bins', the intercept's */
#define MAX_CLASSES 64
#define TWO_POW_53 9007199254740992.0
#define LARGEST_VALUE 1e150  /* kernels.codes.LARGEST_VALUE: a value beyond it goes to the general road, which refuses it */

/* loss codes of kernels/codes.py */
#define SOFTMAX 0
#define CRAMMER_SINGER 1
#define PERCEPTRON 2
#define OVR_HINGE 3

typedef struct {
    Py_ssize_t n;
    int64_t cols[MAX_ENTRIES];
    double vals[MAX_ENTRIES];
    /* with bins, when learning: each name's running sums after the row entered them (written back once served) */
    Py_ssize_t n_binned;
    int64_t feature[MAX_NAMES];
    double sums[MAX_NAMES], squares[MAX_NAMES];
} Row;

typedef struct {  /* a ScaledWeights store: W[:, k] = scale[k] V[:, k], the average's U and A */
    double *V, *scale, *sqnorm, *U, *A;
    npy_intp n_rows, n_cols;  /* V's capacity */
    int64_t n_features, n_classes;  /* in use */
    int averaged;
} Store;

static PyObject *NAMES;  /* a tuple of the interned attribute names below */
enum { V_, SCALE_, SQNORM_, U_, A_, AVERAGED_, N_FEATURES_, N_CLASSES_, SCORES_, TARGETS_, ENTERED_,
       PH_N, PH_MEAN, PH_TOTAL, PH_LOWEST, PH_ALPHA, PH_DELTA, PH_THRESHOLD, PH_MIN_INSTANCES, PH_DETECTED,
       DETECTOR_, CHANGE_SEEN_, STEPS_, TRACKING_, PENDING_, BINS_, LIMITS_, STATS_, SUMS_, SQUARES_, N_SEEN_,
       N_NAMES };
static const char *NAME_TEXT[N_NAMES] = {"V", "scale", "sqnorm", "U", "A", "averaged", "n_features", "n_classes",
    "scores", "targets", "entered", "n", "mean", "sum_increase", "min_increase", "alpha", "delta", "threshold",
    "min_instances", "drift_detected", "detector", "change_seen", "steps", "tracking", "pending", "bins", "limits",
    "stats", "sums", "squares", "n_seen"};

static int float_array(PyObject *o, int ndim, double **data, npy_intp *shape) {
    if (!PyArray_Check(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != NPY_FLOAT64 || PyArray_NDIM(a) != ndim || !PyArray_ISCARRAY(a)) return 0;
    *data = (double *)PyArray_DATA(a);
    for (int i = 0; i < ndim; i++) shape[i] = PyArray_DIM(a, i);
    return 1;
}

static int as_int64(PyObject *o, int64_t *out) {
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) return 0;
    *out = v;
    return 1;
}

static int as_double(PyObject *o, double *out) {
    double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) return 0;
    *out = v;
    return 1;
}

/* obj.<name>, borrowed: the arrays and flags read this way are plain attributes (in the object's
   __dict__), which keep them alive for the call. */
static PyObject *attribute(PyObject *obj, int name) {
    PyObject *value = PyObject_GetAttr(obj, PyTuple_GET_ITEM(NAMES, name));
    if (value != NULL) Py_DECREF(value);  /* still referenced by obj's __dict__ */
    return value;
}

static int float_attribute(PyObject *obj, int name, double *out) {
    PyObject *value = PyObject_GetAttr(obj, PyTuple_GET_ITEM(NAMES, name));
    int ok = value != NULL && as_double(value, out);
    Py_XDECREF(value);
    return ok;
}

static int int_attribute(PyObject *obj, int name, int64_t *out) {
    PyObject *value = PyObject_GetAttr(obj, PyTuple_GET_ITEM(NAMES, name));
    int ok = value != NULL && as_int64(value, out);
    Py_XDECREF(value);
    return ok;
}

static int set_float_attribute(PyObject *obj, int name, double value) {
    PyObject *f = PyFloat_FromDouble(value);
    if (f == NULL) return 0;
    int ok = PyObject_SetAttr(obj, PyTuple_GET_ITEM(NAMES, name), f) == 0;
    Py_DECREF(f);
    return ok;
}

/* A ScaledWeights object's arrays and sizes (streamlearn/weights.py). */
static int store_of(PyObject *obj, Store *s) {
    PyObject *V = attribute(obj, V_), *scale = attribute(obj, SCALE_), *sqnorm = attribute(obj, SQNORM_),
             *U = attribute(obj, U_), *A = attribute(obj, A_), *averaged = attribute(obj, AVERAGED_);
    npy_intp v_shape[2], u_shape[2], n_scale, n_sqnorm, n_A;
    if (!V || !scale || !sqnorm || !U || !A || !averaged || !float_array(V, 2, &s->V, v_shape) ||
        !float_array(scale, 1, &s->scale, &n_scale) || !float_array(sqnorm, 1, &s->sqnorm, &n_sqnorm) ||
        !float_array(U, 2, &s->U, u_shape) || !float_array(A, 1, &s->A, &n_A) ||
        !int_attribute(obj, N_FEATURES_, &s->n_features) || !int_attribute(obj, N_CLASSES_, &s->n_classes))
        return 0;
    s->averaged = PyObject_IsTrue(averaged);
    s->n_rows = v_shape[0];
    s->n_cols = v_shape[1];
    if (n_scale < s->n_cols || n_sqnorm < s->n_cols || n_A < s->n_cols || s->n_features > s->n_rows ||
        s->n_classes > s->n_cols || (s->averaged && (u_shape[0] != s->n_rows || u_shape[1] != s->n_cols))) {
        PyErr_SetString(PyExc_ValueError, "small_records: a weight store's arrays do not fit its sizes");
        return 0;
    }
    return 1;
}

/* The dict's (columns, values) in the vocabulary's canonical order (FeatureSpace.encode_one):
   by order_key[column], stable in the dict's order. Names without a column are dropped when
   predicting; when learning they make the call unservable (-1), as does any value that is not
   a float (NumPy's float64 included), or an exact int of at most 2^53 in size, and at most LARGEST_VALUE in size. */
static int encode(PyObject *x, PyObject *columns, const int64_t *order_key, npy_intp n_keys, int learning, Row *row) {
    if (!PyDict_CheckExact(x) || PyDict_GET_SIZE(x) >= MAX_NAMES || !PyDict_CheckExact(columns)) return -1;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    row->n = 0;
    while (PyDict_Next(x, &pos, &key, &value)) {
        double v;
        if (PyFloat_Check(value)) {  /* NumPy's float64 scalars too: a float subclass holding its double */
            v = PyFloat_AS_DOUBLE(value);
        } else if (PyLong_CheckExact(value)) {
            v = PyLong_AsDouble(value);
            if (v == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
            if (fabs(v) > TWO_POW_53) return -1;
        } else {
            return -1;
        }
        if (!(fabs(v) <= LARGEST_VALUE)) return -1;  /* NaN too */
        PyObject *column = PyDict_GetItemWithError(columns, key);
        if (column == NULL) {
            if (PyErr_Occurred()) { PyErr_Clear(); return -1; }
            if (learning) return -1;
            continue;
        }
        long long j = PyLong_AsLongLong(column);
        if (j < 0 || j >= n_keys) { PyErr_Clear(); return -1; }
        Py_ssize_t p = row->n++;  /* insertion sort: stable, and rows are short */
        while (p > 0 && order_key[row->cols[p - 1]] > order_key[j]) {
            row->cols[p] = row->cols[p - 1];
            row->vals[p] = row->vals[p - 1];
            p--;
        }
        row->cols[p] = j;
        row->vals[p] = v;
    }
    return 0;
}

/* A FeatureBins' setting and statistics (streamlearn/binning.py). */
typedef struct {
    int64_t n_bins, max_nonzeros, binned_columns, n_seen;
    double half_range, *sums, *squares;
    npy_intp n_stats;
    PyObject *stats;  /* the OnlineStandardizer, borrowed (the FeatureBins holds it) */
} Bins;

static int bins_of(PyObject *feature_bins, Bins *b) {
    PyObject *limits = attribute(feature_bins, LIMITS_);
    b->stats = attribute(feature_bins, STATS_);
    npy_intp n_squares;
    PyObject *sums = b->stats ? attribute(b->stats, SUMS_) : NULL;
    PyObject *squares = b->stats ? attribute(b->stats, SQUARES_) : NULL;
    return limits && sums && squares && PyTuple_CheckExact(limits) && PyTuple_GET_SIZE(limits) == 3 &&
           int_attribute(feature_bins, BINS_, &b->n_bins) && as_double(PyTuple_GET_ITEM(limits, 0), &b->half_range) &&
           as_int64(PyTuple_GET_ITEM(limits, 1), &b->max_nonzeros) &&
           as_int64(PyTuple_GET_ITEM(limits, 2), &b->binned_columns) && float_array(sums, 1, &b->sums, &b->n_stats) &&
           float_array(squares, 1, &b->squares, &n_squares) && int_attribute(b->stats, N_SEEN_, &b->n_seen) &&
           b->n_bins >= 1 && n_squares == b->n_stats;
}

/* FeatureBins.model_column: feature column j's model column, or the model columns of j feature columns. */
static int64_t model_column(int64_t j, const Bins *b) {
    return b == NULL ? j : j + (j < b->binned_columns ? j : b->binned_columns) * b->n_bins;
}

/* streamlearn.binning's expansion of one encoded row (kernels/scaling.py bin_rows). The row's columns
   become model columns and, unless it has more than max_nonzeros nonzero values, each nonzero entry of a
   column below binned_columns has its bin appended at the intercept's value, its interval by the
   statistics of the rows before it; when learning, the row then enters them -- into row->sums/squares,
   not the arrays, so that an unservable call changes nothing (bins_enter writes them). -1: unservable
   (a column the statistics do not cover yet). */
static int append_bins(const Bins *b, int learning, double value, Row *row) {
    int64_t n = b->n_seen, n_bins = b->n_bins, stride = n_bins + 1, nonzeros = 0;
    double half_range = b->half_range, width = 2.0 * half_range / n_bins;
    Py_ssize_t n_own = row->n;
    for (Py_ssize_t p = 0; p < n_own; p++) nonzeros += row->vals[p] != 0.0;
    int binned = nonzeros <= b->max_nonzeros;  /* a longer row enters the statistics but has no bins */
    row->n_binned = learning ? n_own : 0;
    for (Py_ssize_t p = 0; p < n_own; p++) {
        int64_t j = row->cols[p];
        double x = row->vals[p];
        if (j >= b->n_stats) return -1;  /* the general road grows the statistics first */
        row->feature[p] = j;
        row->cols[p] = model_column(j, b);
        double total = b->sums[j], square = b->squares[j];
        if (learning) {
            row->sums[p] = total + x;
            row->squares[p] = square + x * x;
        }
        if (x == 0.0 || !binned || j >= b->binned_columns) continue;  /* an absent feature has no bin */
        double z = x;  /* no row seen: kernels/scaling.py standardized leaves the value as it is */
        if (n > 0) {
            double mean = total / n, variance = square / n - mean * mean;
            if (variance > 1e-12 * (square / n)) z = (x - mean) / sqrt(variance);
            else z = x - mean;
        }
        z = fmin(fmax(z, -half_range), half_range);
        int64_t interval = (int64_t)floor((z + half_range) / width);
        if (interval > n_bins - 1) interval = n_bins - 1;
        row->cols[row->n] = j * stride + 1 + interval;
        row->vals[row->n] = value;
        row->n++;
    }
    return 0;
}

/* The statistics of a served row's learning (append_bins) into the FeatureBins' arrays, and the row
   counted in their n_seen. */
static int bins_enter(const Bins *b, const Row *row) {
    for (Py_ssize_t p = 0; p < row->n_binned; p++) {
        b->sums[row->feature[p]] = row->sums[p];
        b->squares[row->feature[p]] = row->squares[p];
    }
    PyObject *counted = PyLong_FromLongLong(b->n_seen + 1);
    int ok = counted != NULL && PyObject_SetAttr(b->stats, PyTuple_GET_ITEM(NAMES, N_SEEN_), counted) == 0;
    Py_XDECREF(counted);
    return ok;
}

/* kernels/rows.py mean_squares of one row (before the intercept's entry is appended). */
static double mean_square(const Row *row) {
    double total = 0.0;
    long count = 0;
    for (Py_ssize_t p = 0; p < row->n; p++) {
        double v = row->vals[p];
        if (v != 0.0) { total += v * v; count++; }
    }
    return count ? total / count : -1.0;
}

/* kernels/scaled.py row_dots: out[k] = sum_p x_p M[j_p, k], entries at or past n_rows skipped. */
static void row_dots(const Row *row, const double *M, npy_intp n_rows, npy_intp stride, Py_ssize_t n_classes, double *out) {
    for (Py_ssize_t k = 0; k < n_classes; k++) out[k] = 0.0;
    for (Py_ssize_t p = 0; p < row->n; p++) {
        int64_t j = row->cols[p];
        if (j >= n_rows) continue;
        double v = row->vals[p];
        const double *w = M + j * stride;
        for (Py_ssize_t k = 0; k < n_classes; k++) out[k] += v * w[k];
    }
}

/* kernels/scaled.py scores_batch for one row. */
static void scores_of(const Row *row, const Store *s, npy_intp n_features, Py_ssize_t n_classes, int averaged,
                      double total_weight, double *out) {
    double dots[MAX_CLASSES], averaged_dots[MAX_CLASSES];
    row_dots(row, s->V, n_features, s->n_cols, n_classes, dots);
    if (averaged && total_weight > 0) {
        row_dots(row, s->U, n_features, s->n_cols, n_classes, averaged_dots);
        for (Py_ssize_t k = 0; k < n_classes; k++) out[k] = (averaged_dots[k] + s->A[k] * dots[k]) / total_weight;
    } else {
        for (Py_ssize_t k = 0; k < n_classes; k++) out[k] = dots[k] * s->scale[k];
    }
}

static double sigmoid(double z) {
    if (z >= 0) return 1.0 / (1.0 + exp(-z));
    double e = exp(z);
    return e / (1.0 + e);
}

/* kernels/mcid.py loss_coefficients. */
static void loss_coefficients(int loss, double *g, int64_t y, Py_ssize_t n_classes) {
    if (loss == SOFTMAX) {
        double m = g[0];
        for (Py_ssize_t k = 1; k < n_classes; k++) m = g[k] > m ? g[k] : m;
        double z = 0.0;
        for (Py_ssize_t k = 0; k < n_classes; k++) { g[k] = exp(g[k] - m); z += g[k]; }
        for (Py_ssize_t k = 0; k < n_classes; k++) g[k] /= z;
        g[y] -= 1.0;
    } else if (loss == CRAMMER_SINGER || loss == PERCEPTRON) {
        Py_ssize_t best = -1;
        for (Py_ssize_t k = 0; k < n_classes; k++) {
            if (loss == CRAMMER_SINGER && k == y) continue;
            if (best < 0 || g[k] > g[best]) best = k;
        }
        int violated = best >= 0 && best != y;
        if (loss == CRAMMER_SINGER) violated = violated && 1.0 + g[best] - g[y] > 0.0;
        for (Py_ssize_t k = 0; k < n_classes; k++) g[k] = 0.0;
        if (violated) { g[best] = 1.0; g[y] = -1.0; }
    } else if (loss == OVR_HINGE) {
        for (Py_ssize_t k = 0; k < n_classes; k++) {
            double s = k == y ? 1.0 : -1.0;
            g[k] = s * g[k] < 1.0 ? -s : 0.0;
        }
    } else {  /* OVR_LOGISTIC */
        for (Py_ssize_t k = 0; k < n_classes; k++) {
            double s = k == y ? 1.0 : -1.0;
            g[k] = -s * sigmoid(-s * g[k]);
        }
    }
}

/* kernels/scaled.py add_to_column. */
static void add_to_column(Store *s, int averaged, int track_norm, const Row *row, Py_ssize_t k, double coef) {
    double acc = s->sqnorm[k];
    for (Py_ssize_t p = 0; p < row->n; p++) {
        int64_t j = row->cols[p];
        double step = coef * row->vals[p];
        double old = s->V[j * s->n_cols + k];
        double new_ = old + step;
        s->V[j * s->n_cols + k] = new_;
        if (track_norm) acc += new_ * new_ - old * old;
        if (averaged) s->U[j * s->n_cols + k] -= s->A[k] * step;
    }
    if (track_norm) s->sqnorm[k] = acc;
}

/* kernels/scaled.py add_to_columns. */
static void add_to_columns(Store *s, int averaged, int track_norms, const Row *row, const Py_ssize_t *classes,
                           const double *amounts, Py_ssize_t n_touched) {
    if (!(n_touched > 2 && classes[n_touched - 1] == n_touched - 1)) {
        for (Py_ssize_t c = 0; c < n_touched; c++) add_to_column(s, averaged, track_norms, row, classes[c], amounts[c]);
        return;
    }
    for (Py_ssize_t p = 0; p < row->n; p++) {
        double v = row->vals[p];
        double *V = s->V + row->cols[p] * s->n_cols, *U = s->U + row->cols[p] * s->n_cols;
        for (Py_ssize_t k = 0; k < n_touched; k++) {
            double step = amounts[k] * v;
            double old = V[k];
            double new_ = old + step;
            V[k] = new_;
            if (track_norms) s->sqnorm[k] += new_ * new_ - old * old;
            if (averaged) U[k] -= s->A[k] * step;
        }
    }
}

/* kernels/scaled.py renormalize_columns. */
static void renormalize_columns(Store *s, int averaged, npy_intp n_features, Py_ssize_t n_classes, double below) {
    Py_ssize_t folded[MAX_CLASSES], m = 0;
    for (Py_ssize_t k = 0; k < n_classes; k++) {
        if (s->scale[k] < below) { folded[m++] = k; s->sqnorm[k] = 0.0; }
    }
    if (m == 0) return;
    for (npy_intp j = 0; j < n_features; j++) {
        for (Py_ssize_t i = 0; i < m; i++) {
            Py_ssize_t k = folded[i];
            double v = s->V[j * s->n_cols + k];
            if (averaged) s->U[j * s->n_cols + k] += s->A[k] * v;
            v *= s->scale[k];
            s->V[j * s->n_cols + k] = v;
            s->sqnorm[k] += v * v;
        }
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        if (averaged) s->A[folded[i]] = 0.0;
        s->scale[folded[i]] = 1.0;
    }
}

/* kernels/scaled.py project_to_ball. */
static void project_to_ball(double *scale, const double *sqnorm, Py_ssize_t n_classes, double radius, int per_class) {
    double r2 = radius * radius;
    if (per_class) {
        for (Py_ssize_t k = 0; k < n_classes; k++) {
            double norm2 = scale[k] * scale[k] * sqnorm[k];
            if (norm2 > r2) scale[k] *= sqrt(r2 / norm2);
        }
        return;
    }
    double norm2 = 0.0;
    for (Py_ssize_t k = 0; k < n_classes; k++) norm2 += scale[k] * scale[k] * sqnorm[k];
    if (norm2 > r2) {
        double f = sqrt(r2 / norm2);
        for (Py_ssize_t k = 0; k < n_classes; k++) scale[k] *= f;
    }
}

typedef struct {  /* what learn_groups takes besides the store, the row and the step counters */
    int loss, project, per_class_ball;
    double average_power;
    npy_intp n_features;  /* the model store's, which renormalize_columns passes for both stores */
} StepSetting;

/* kernels/mcid.py learn_groups for one group of one row; updates *t, *n_classes, *average_weight. */
static void learn_row(Store *s, const StepSetting *c, const Row *row, int64_t y, double lam, int averaged,
                      double renormalize_below, int64_t *t, Py_ssize_t *n_classes, double *average_weight,
                      double *scores_out) {
    double g[MAX_CLASSES], averaged_dots[MAX_CLASSES], amounts[MAX_CLASSES];
    Py_ssize_t touched[MAX_CLASSES];
    Py_ssize_t K = *n_classes > y + 1 ? *n_classes : (Py_ssize_t)(y + 1);
    row_dots(row, s->V, s->n_rows, s->n_cols, K, g);
    if (averaged && *average_weight > 0) {
        row_dots(row, s->U, s->n_rows, s->n_cols, K, averaged_dots);
        for (Py_ssize_t k = 0; k < K; k++) scores_out[k] = (averaged_dots[k] + s->A[k] * g[k]) / *average_weight;
    } else {
        for (Py_ssize_t k = 0; k < K; k++) scores_out[k] = g[k] * s->scale[k];
    }
    for (Py_ssize_t k = 0; k < K; k++) g[k] *= s->scale[k];
    loss_coefficients(c->loss, g, y, K);
    int64_t step_t = *t + 1;
    if (step_t > 1) {
        double shrink = 1.0 - 1.0 / (double)step_t;
        for (Py_ssize_t k = 0; k < K; k++) s->scale[k] *= shrink;
    }
    double step = 1.0 / (lam * (double)step_t);  /* (times the group's size, 1) */
    if (c->loss == CRAMMER_SINGER || c->loss == PERCEPTRON) {
        for (Py_ssize_t k = 0; k < K; k++)
            if (g[k] != 0.0) add_to_column(s, averaged, c->project, row, k, -step * g[k] / s->scale[k]);
    } else {
        Py_ssize_t n_touched = 0;
        for (Py_ssize_t k = 0; k < K; k++) {
            if (g[k] != 0.0) { touched[n_touched] = k; amounts[n_touched] = -step * g[k] / s->scale[k]; n_touched++; }
        }
        add_to_columns(s, averaged, c->project, row, touched, amounts, n_touched);
    }
    if (c->project) project_to_ball(s->scale, s->sqnorm, K, 1.0 / sqrt(lam), c->per_class_ball);
    double weight = pow((double)step_t, c->average_power);
    double total = *average_weight + weight;
    double smallest = INFINITY;
    for (Py_ssize_t k = 0; k < K; k++) {
        if (averaged) s->A[k] += weight * s->scale[k];
        smallest = s->scale[k] < smallest ? s->scale[k] : smallest;
    }
    if (smallest < renormalize_below) renormalize_columns(s, averaged, c->n_features, K, sqrt(renormalize_below));
    *t = step_t;
    *n_classes = K;
    *average_weight = total;
}

/* kernels/mcid.py mistakes_in for one row: a class not known before is missed; ties to the lowest index. */
static int missed(const double *scores, int64_t target, Py_ssize_t n_before) {
    if (target >= n_before) return 1;
    Py_ssize_t best = 0;
    for (Py_ssize_t k = 1; k < n_before; k++) if (scores[k] > scores[best]) best = k;
    return best != target;
}

/* NumPy's argmax of scores[:n] (the first NaN, else the first maximum). */
static Py_ssize_t argmax(const double *scores, Py_ssize_t n) {
    Py_ssize_t best = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (isnan(scores[k])) return k;
        if (scores[k] > scores[best]) best = k;
    }
    return best;
}

static int int64_vector(PyObject *o, int64_t **data, npy_intp *length) {
    if (!PyArray_Check(o)) return 0;
    PyArrayObject *a = (PyArrayObject *)o;
    if (PyArray_TYPE(a) != NPY_INT64 || PyArray_NDIM(a) != 1 || !PyArray_ISCARRAY(a)) return 0;
    *data = (int64_t *)PyArray_DATA(a);
    *length = PyArray_DIM(a, 0);
    return 1;
}

static PyObject *refuse(const char *what) {
    if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "small_records: %s", what);
    return NULL;
}

/* An example's row as the model sees it, the FeatureBins' statistics it was binned by, and the
   model columns of the feature space (what the weights must cover before the row is served). */
typedef struct {
    Row row;
    Bins bins;
    const Bins *binned;  /* &bins, or NULL: no bins */
    int64_t n_model_columns;
} Entry;

/* The row of x as the model sees it: encoded, its bins (bins None: none), then the intercept's entry
   (column < 0: none); tables: FeatureSpace.name_columns(). */
static int model_row(PyObject *x, PyObject *tables, PyObject *intercept_column, PyObject *intercept_value,
                     PyObject *bins, int learning, Entry *e, double *mean_sq) {
    int64_t *keys, column, n_columns;
    npy_intp n_keys;
    double value;
    Row *row = &e->row;
    if (!PyTuple_CheckExact(tables) || PyTuple_GET_SIZE(tables) != 3 ||
        !int64_vector(PyTuple_GET_ITEM(tables, 1), &keys, &n_keys) ||
        !as_int64(PyTuple_GET_ITEM(tables, 2), &n_columns) || !as_int64(intercept_column, &column) ||
        !as_double(intercept_value, &value))
        return -2;
    e->binned = NULL;
    if (bins != Py_None) {
        if (!bins_of(bins, &e->bins)) return -2;
        e->binned = &e->bins;
    }
    e->n_model_columns = model_column(n_columns, e->binned);
    if (encode(x, PyTuple_GET_ITEM(tables, 0), keys, n_keys, learning, row) < 0) return -1;
    row->n_binned = 0;
    if (mean_sq) *mean_sq = mean_square(row);  /* of the row's own values */
    if (e->binned && append_bins(e->binned, learning, value, row) < 0) return -1;
    if (column >= 0) {
        row->cols[row->n] = column;
        row->vals[row->n] = value;
        row->n++;
    }
    return 0;
}

/* The entry functions' start: the argument count, then x's row (see model_row: x, tables, intercept
   column and value at 0..3, the bins last). 1: a row to serve; 0: an example for the general road
   (return None); -1: an error is set (return NULL). */
static int entry_row(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected, int learning, Entry *e,
                     double *mean_sq) {
    if (nargs != expected) {
        PyErr_Format(PyExc_TypeError, "small_records: %zd arguments expected, %zd given", expected, nargs);
        return -1;
    }
    int status = model_row(args[0], args[1], args[2], args[3], args[expected - 1], learning, e, mean_sq);
    if (status == -2) {
        refuse("bad row arguments");
        return -1;
    }
    return status == 0;
}

/* What an entry function returns for entry_row's 0 (None: the general road) or -1 (NULL: the error set). */
static PyObject *none_or_error(int served) {
    if (served < 0) return NULL;
    Py_RETURN_NONE;
}

/* The entry functions' scores of x (args: x's row at 0..3, the store at 4, the labels list at 5 and
   average_weight at 6) into scores[*n_classes]; 1, 0 or -1 as entry_row. */
static int entry_scores(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t expected, double *scores,
                        Py_ssize_t *n_classes) {
    Entry e;
    int served = entry_row(args, nargs, expected, 0, &e, NULL);
    if (served <= 0) return served;
    Store s;
    double total_weight;
    if (!PyList_CheckExact(args[5])) {
        refuse("the labels must be a list");
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[5]);
    if (!store_of(args[4], &s) || !as_double(args[6], &total_weight)) {
        refuse("bad store arguments");
        return -1;
    }
    if (n < 1 || n > MAX_CLASSES || s.n_classes < n) return 0;
    *n_classes = n;
    scores_of(&e.row, &s, (npy_intp)s.n_features, *n_classes, s.averaged, total_weight, scores);
    return 1;
}

/* numpy's pairwise_sum_DOUBLE (what ndarray.sum does along a contiguous row) for n <= 128. */
static double numpy_row_sum(const double *a, Py_ssize_t n) {
    if (n < 8) {
        double res = 0.0;
        for (Py_ssize_t i = 0; i < n; i++) res += a[i];
        return res;
    }
    double r[8];
    for (int j = 0; j < 8; j++) r[j] = a[j];
    Py_ssize_t i = 8;
    for (; i < n - (n % 8); i += 8)
        for (int j = 0; j < 8; j++) r[j] += a[i + j];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; i++) res += a[i];
    return res;
}

PyDoc_STRVAR(score_doc,
"score(x, tables, intercept_column, intercept_value, store, labels, average_weight, answer, bins)\n\n"
"scores_batch's scores of the dict x (tables: FeatureSpace.name_columns(); names without a column\n"
"dropped, its bins and the intercept's entry appended; bins: the FeatureBins, or None)\n"
"by the ScaledWeights store, answered as: answer None, the class index of NumPy's argmax of them\n"
"(predict_one); \"scores\", {label: score} (decision_function_one); a number beta, {label:\n"
"probability} of softmax_rows(beta * scores) (TemperatureCalibration.probabilities: NumPy's operations\n"
"in NumPy's order; the exponential is the C library's, NumPy's own on a CPU where NumPy vectorises it,\n"
"which may differ in the last bit). None when x cannot be served.");

static PyObject *score(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    double out[MAX_CLASSES];
    Py_ssize_t n_classes;
    int served = entry_scores(args, nargs, 9, out, &n_classes);
    if (served <= 0) return none_or_error(served);
    if (args[7] == Py_None) return PyLong_FromSsize_t(argmax(out, n_classes));
    if (!PyUnicode_Check(args[7])) {  /* base.softmax_rows of beta * scores */
        double beta;
        if (!as_double(args[7], &beta)) return refuse("bad beta");
        for (Py_ssize_t k = 0; k < n_classes; k++) out[k] = beta * out[k];
        double m = out[0];
        for (Py_ssize_t k = 1; k < n_classes; k++) if (isnan(out[k]) || out[k] > m) m = isnan(m) ? m : out[k];
        for (Py_ssize_t k = 0; k < n_classes; k++) out[k] = exp(out[k] - m);
        double total = numpy_row_sum(out, n_classes);
        for (Py_ssize_t k = 0; k < n_classes; k++) out[k] /= total;
    }
    PyObject *result = PyDict_New();
    for (Py_ssize_t k = 0; result != NULL && k < n_classes; k++) {
        PyObject *value = PyFloat_FromDouble(out[k]);
        if (value == NULL || PyDict_SetItem(result, PyList_GET_ITEM(args[5], k), value) < 0) Py_CLEAR(result);
        Py_XDECREF(value);
    }
    return result;
}

/* The Page-Hinkley state of an adaptation.PageHinkleyUp object. */
typedef struct { double n, mean, total, lowest, alpha, delta, threshold, min_instances; int detected; } PageHinkley;

static int page_hinkley_of(PyObject *detector, PageHinkley *ph) {
    PyObject *detected = PyObject_GetAttr(detector, PyTuple_GET_ITEM(NAMES, PH_DETECTED));
    if (detected == NULL) return 0;
    ph->detected = PyObject_IsTrue(detected);
    Py_DECREF(detected);
    return float_attribute(detector, PH_N, &ph->n) && float_attribute(detector, PH_MEAN, &ph->mean) &&
           float_attribute(detector, PH_TOTAL, &ph->total) && float_attribute(detector, PH_LOWEST, &ph->lowest) &&
           float_attribute(detector, PH_ALPHA, &ph->alpha) && float_attribute(detector, PH_DELTA, &ph->delta) &&
           float_attribute(detector, PH_THRESHOLD, &ph->threshold) &&
           float_attribute(detector, PH_MIN_INSTANCES, &ph->min_instances) && ph->detected >= 0;
}

/* adaptation.PageHinkleyUp.update_many of one value; whether the test fired. */
static int page_hinkley_update(PageHinkley *ph, double x) {
    if (ph->detected) { ph->n = 0.0; ph->mean = 0.0; ph->total = 0.0; ph->lowest = INFINITY; }
    ph->n += 1.0;
    ph->mean += (x - ph->mean) / ph->n;
    ph->total = ph->alpha * ph->total + (x - ph->mean) - ph->delta;
    if (ph->total < ph->lowest) ph->lowest = ph->total;
    ph->detected = ph->n >= ph->min_instances && ph->total - ph->lowest > ph->threshold;
    return ph->detected;
}

/* The test's state back on the detector; a watch given: the test fired, its change_seen becomes True. */
static int store_page_hinkley(PyObject *detector, const PageHinkley *ph, PyObject *watch) {
    if (watch != NULL && PyObject_SetAttr(watch, PyTuple_GET_ITEM(NAMES, CHANGE_SEEN_), Py_True) < 0) return 0;
    return set_float_attribute(detector, PH_N, ph->n) && set_float_attribute(detector, PH_MEAN, ph->mean) &&
           set_float_attribute(detector, PH_TOTAL, ph->total) && set_float_attribute(detector, PH_LOWEST, ph->lowest) &&
           PyObject_SetAttr(detector, PyTuple_GET_ITEM(NAMES, PH_DETECTED), ph->detected ? Py_True : Py_False) == 0;
}

PyDoc_STRVAR(learn_doc,
"learn(x, tables, intercept_column, intercept_value, target, n_labels, model, tracker, n_learned, t,\n"
"      average_weight, choice, setting, project, renormalize_below, watch, calibration, bins)\n\n"
"One learn_one example of an MCID learner (batch size 1, one lambda): its fast tracker's step then\n"
"the model's (learn_groups_tracked; tracker None: learn_groups), both mistakes counted into the\n"
"TrackerChoice (None: no tracker), the predicting model's mistake into the ChangeWatch (its\n"
"Page-Hinkley test, change_seen and steps; None: no watch), and the\n"
"calibration window's row (None: no window). setting: (lam, tracker_lam, loss, per_class_ball, average_power,\n"
"CHECK_EVERY, the model's and the tracker's renormalisation thresholds when renormalize_below is None).\n"
"Returns (t, n_classes, average_weight, due, entered, mean_square) -- due: the\n"
"step is a multiple of CHECK_EVERY; entered: the example entered the window -- or None, having\n"
"changed nothing, when the example cannot be served here. With bins, the row enters their statistics\n"
"(sums, squares and n_seen).");

static PyObject *learn(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    Entry e;
    double mean_sq;
    int served = entry_row(args, nargs, 18, 1, &e, &mean_sq);
    if (served <= 0) return none_or_error(served);
    int64_t target, n_columns = e.n_model_columns, n_labels, n_learned, t, loss, check_every, steps = 0;
    double average_weight, lam, tracker_lam, renormalize_below, tracker_renormalize_below;
    Store model, tracker;
    StepSetting setting;
    PyObject *constants = args[12], *watch = args[15];
    PyObject *choice = args[11], *pending = NULL;
    int has_tracker = args[7] != Py_None, watched = watch != Py_None, tracking = 0;
    int64_t model_pending = 0, tracker_pending = 0;
    if (choice != Py_None) {  /* TrackerChoice: which model predicts, and the mistakes it has not folded in */
        PyObject *leads = attribute(choice, TRACKING_);
        pending = attribute(choice, PENDING_);
        tracking = leads == NULL ? -1 : PyObject_IsTrue(leads);
        if (pending == NULL || !PyList_CheckExact(pending) || PyList_GET_SIZE(pending) != 2 ||
            !as_int64(PyList_GET_ITEM(pending, 0), &model_pending) ||
            !as_int64(PyList_GET_ITEM(pending, 1), &tracker_pending) || !has_tracker)
            return refuse("bad tracker choice");
    }
    if (!as_int64(args[4], &target) || !as_int64(args[5], &n_labels) || !store_of(args[6], &model) ||
        (has_tracker && !store_of(args[7], &tracker)) || !as_int64(args[8], &n_learned) || !as_int64(args[9], &t) ||
        !as_double(args[10], &average_weight) || tracking < 0 ||
        !PyTuple_CheckExact(constants) || PyTuple_GET_SIZE(constants) != 8)
        return refuse("bad arguments");
    if (!as_double(PyTuple_GET_ITEM(constants, 0), &lam) || !as_double(PyTuple_GET_ITEM(constants, 1), &tracker_lam) ||
        !as_int64(PyTuple_GET_ITEM(constants, 2), &loss) ||
        !as_double(PyTuple_GET_ITEM(constants, 4), &setting.average_power) ||
        !as_int64(PyTuple_GET_ITEM(constants, 5), &check_every) || check_every < 1)
        return refuse("bad setting");
    setting.loss = (int)loss;
    setting.per_class_ball = PyObject_IsTrue(PyTuple_GET_ITEM(constants, 3));
    setting.project = PyObject_IsTrue(args[13]);
    setting.n_features = (npy_intp)model.n_features;
    if (setting.project < 0 || setting.per_class_ball < 0) return refuse("bad setting");
    if (args[14] == Py_None) {  /* MCIDLearner._renormalization_threshold's defaults */
        if (!as_double(PyTuple_GET_ITEM(constants, 6), &renormalize_below) ||
            !as_double(PyTuple_GET_ITEM(constants, 7), &tracker_renormalize_below))
            return refuse("bad setting");
    } else if (!as_double(args[14], &renormalize_below)) {
        return refuse("bad renormalize_below");
    } else {
        tracker_renormalize_below = renormalize_below;
    }
    PageHinkley ph;
    PyObject *detector = watched ? attribute(watch, DETECTOR_) : NULL;
    if (watched && (detector == NULL || !page_hinkley_of(detector, &ph) || !int_attribute(watch, STEPS_, &steps)))
        return refuse("bad watch");
    /* what the general road would grow first (weights, classes, the window's width) sends the example there */
    if (target < 0 || target >= n_labels || n_labels > MAX_CLASSES || n_learned > n_labels ||
        model.n_features < n_columns || model.n_classes < n_labels ||
        (has_tracker && (tracker.n_features < n_columns || tracker.n_classes < n_labels ||
                         tracker.n_rows < model.n_features)))  /* (renormalize_columns' range for both) */
        Py_RETURN_NONE;
    PyObject *calibration = args[16];
    double *window = NULL;
    int64_t *window_targets = NULL, entered = 0;
    npy_intp window_shape[2] = {0, 0}, n_window_targets = 0;
    if (calibration != Py_None) {
        PyObject *scores = attribute(calibration, SCORES_), *targets = attribute(calibration, TARGETS_);
        if (scores == NULL || targets == NULL || !float_array(scores, 2, &window, window_shape) ||
            !int64_vector(targets, &window_targets, &n_window_targets) || n_window_targets < window_shape[0] ||
            !int_attribute(calibration, ENTERED_, &entered) || window_shape[0] < 1)
            return refuse("bad calibration");
        if (window_shape[1] != n_labels) Py_RETURN_NONE;
    }
    if (e.binned && !bins_enter(e.binned, &e.row)) return NULL;  /* served from here on */
    double model_scores[MAX_CLASSES], tracker_scores[MAX_CLASSES];
    for (Py_ssize_t k = 0; k < n_labels; k++) model_scores[k] = tracker_scores[k] = -INFINITY;
    Py_ssize_t n_before = (Py_ssize_t)n_learned, n_classes = n_before, tracker_classes = n_before;
    int64_t tracker_t = t;
    double tracker_weight = average_weight;
    if (has_tracker)
        learn_row(&tracker, &setting, &e.row, target, tracker_lam, 0, tracker_renormalize_below, &tracker_t,
                  &tracker_classes, &tracker_weight, tracker_scores);
    learn_row(&model, &setting, &e.row, target, lam, model.averaged, renormalize_below, &t, &n_classes,
              &average_weight, model_scores);
    if (pending != NULL) {  /* TrackerChoice.count */
        PyObject *counts[2] = {PyLong_FromLongLong(model_pending + missed(model_scores, target, n_before)),
                               PyLong_FromLongLong(tracker_pending + missed(tracker_scores, target, n_before))};
        if (counts[0] == NULL || counts[1] == NULL) { Py_XDECREF(counts[0]); Py_XDECREF(counts[1]); return NULL; }
        PyList_SetItem(pending, 0, counts[0]);  /* (steals the reference) */
        PyList_SetItem(pending, 1, counts[1]);
    }
    const double *predicting = tracking ? tracker_scores : model_scores;
    /* ChangeWatch.after_span of one step: adaptation.mistake_of_one, the test, the step count */
    int due = 0;
    if (watched) {
        int mistake = target >= n_before || argmax(predicting, n_before) != target;
        if (!store_page_hinkley(detector, &ph, page_hinkley_update(&ph, mistake ? 1.0 : 0.0) ? watch : NULL)) return NULL;
        steps += 1;
        PyObject *counted = PyLong_FromLongLong(steps);
        if (counted == NULL || PyObject_SetAttr(watch, PyTuple_GET_ITEM(NAMES, STEPS_), counted) < 0) {
            Py_XDECREF(counted);
            return NULL;
        }
        Py_DECREF(counted);
        due = steps % check_every == 0;
    }
    int entered_window = calibration != Py_None && target < n_before;
    if (entered_window) {  /* TemperatureCalibration.observe's one-row road */
        npy_intp slot = (npy_intp)(entered % window_shape[0]);
        double *out = window + slot * window_shape[1];
        for (Py_ssize_t k = 0; k < window_shape[1]; k++) out[k] = k < n_before ? predicting[k] : -INFINITY;
        window_targets[slot] = target;
    }
    return Py_BuildValue("(LndOOd)", (long long)t, n_classes, average_weight,
                         due ? Py_True : Py_False, entered_window ? Py_True : Py_False, mean_sq);
}

static PyMethodDef methods[] = {
    {"learn", (PyCFunction)(void (*)(void))learn, METH_FASTCALL, learn_doc},
    {"score", (PyCFunction)(void (*)(void))score, METH_FASTCALL, score_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_small_records",
    "The MCID learners' one-example road for small records (see streamlearn/kernels/small_records.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__small_records(void) {
    import_array();
    NAMES = PyTuple_New(N_NAMES);
    if (NAMES == NULL) return NULL;
    for (int i = 0; i < N_NAMES; i++) {
        PyObject *name = PyUnicode_InternFromString(NAME_TEXT[i]);
        if (name == NULL) return NULL;
        PyTuple_SET_ITEM(NAMES, i, name);
    }
    return PyModule_Create(&module);
}
