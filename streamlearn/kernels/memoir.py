"""Kernels of the extreme-classification learner (002_d116c1700f27e6e6.txt, MEMOIR): sparse
class rows, the Crammer–Singer step with an exact or candidate-based most violating class,
ℓ1 truncation, count sketches and SimpleLSH codes.

**The store** (the tuple ``store``; :class:`streamlearn.memoir.SparseClassRows` owns it). Only
touched weights exist. Weight ``(k, j)`` has a stable id (``cls[id] = k``, ``col[id] = j``) found
by a hash table (``table``: id or -1; open addressing, linear probing) and a place in the
*pool*: column ``j``'s weights lie together at ``pool[col_start[j] : col_start[j] + col_len[j]]``
(``pool_cls``, ``pool_val`` — the value of ``V`` — and ``pool_avg``, the averaged iterate's
correction; ``pool_id`` and ``pos[id]`` link the two). An exact scan of a row reads, for each of
its columns, one contiguous run of (class, value) pairs: the inverted index at memory speed. A
column that fills its room moves to the pool's end with twice the room (``POOL_WASTE`` counts
what it left); a compaction rewrites the pool, dropping the weights ℓ1 truncation set to 0. A
chain per class (``class_head[k]``, ``next_class[id]``) lists a row, for truncation and sketches.

The weights are ``W = g · V`` with one global scale ``g`` (``scalars[G]``): the Pegasos shrink
``W ← (1 − 1/t) W`` (002 Alg. 1 line 4) is one multiplication, never a pass over the rows, and a
uniform rescale never changes an argmax. ``scalars`` holds, by index: ``G``; ``SQ`` = ``Σ V²``
(the Frobenius norm for the projection, Alg. 1 line 9); ``A``, the averaged iterate's running
coefficient; ``AW``, the sum of the steps' weights in the average. ``counts`` holds ``N_USED``
ids in use, ``N_ZERO`` weights truncation set to 0, ``POOL_END`` the pool's first free place,
``POOL_WASTE`` places left behind by moved columns.

**The averaged iterate** (as :mod:`streamlearn.kernels.scaled`, with one global coefficient):
``Σ_s c_s W_s = U + A · V``; a change ``δ`` of ``V`` costs ``U −= A δ``; after step ``s``,
``A += c_s g``; the average is ``(U + A V) / Σ_s c_s``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

G, SQ, A, AW = 0, 1, 2, 3
N_USED, N_ZERO, POOL_END, POOL_WASTE = 0, 1, 2, 3
#: the room a column gets when it first appears in the pool
FIRST_ROOM = 4
_MIX_CLASS = np.uint64(0x9E3779B97F4A7C15)
_MIX_COL = np.uint64(0xC2B2AE3D27D4EB4F)


@njit(cache=True, nogil=True, inline="always")
def _home(k, j, mask):
    h = np.uint64(k) * _MIX_CLASS ^ np.uint64(j) * _MIX_COL
    return np.int64((h ^ (h >> np.uint64(29))) & np.uint64(mask))


@njit(cache=True, nogil=True)
def find(store, k, j):
    """The id of weight ``(k, j)``, or -1."""
    table, cls, col = store[0], store[1], store[2]
    mask = len(table) - 1
    h = _home(k, j, mask)
    while True:
        e = table[h]
        if e < 0:
            return -1
        if cls[e] == k and col[e] == j:
            return e
        h = (h + 1) & mask


@njit(cache=True, nogil=True)
def _move_column(store, counts, j, room):
    """Move column ``j``'s weights to the pool's end, with room for ``room``."""
    table, cls, col, pos, next_class, class_head, pool_id, pool_cls, pool_val, pool_avg, col_start, col_len, col_cap = store
    start, n = col_start[j], col_len[j]
    new = counts[POOL_END]
    for q in range(n):
        e = pool_id[start + q]
        pool_id[new + q], pool_cls[new + q], pool_val[new + q] = e, pool_cls[start + q], pool_val[start + q]
        if len(pool_avg):
            pool_avg[new + q] = pool_avg[start + q]
        pos[e] = new + q
    counts[POOL_WASTE] += col_cap[j]
    col_start[j], col_cap[j] = new, room
    counts[POOL_END] = new + room


@njit(cache=True, nogil=True)
def find_or_add(store, counts, k, j):
    """The id of weight ``(k, j)``, added (value 0) if absent; the caller guarantees room:
    id arrays longer than ``counts[N_USED]``, the table at most half full, and in the pool
    ``needed_room`` places beyond ``counts[POOL_END]``."""
    table, cls, col, pos, next_class, class_head, pool_id, pool_cls, pool_val, pool_avg, col_start, col_len, col_cap = store
    mask = len(table) - 1
    h = _home(k, j, mask)
    while True:
        e = table[h]
        if e < 0:
            break
        if cls[e] == k and col[e] == j:
            return e
        h = (h + 1) & mask
    e = counts[N_USED]
    counts[N_USED] = e + 1
    table[h] = e
    cls[e], col[e] = k, j
    next_class[e] = class_head[k]
    class_head[k] = e
    if col_len[j] == col_cap[j]:
        _move_column(store, counts, j, max(FIRST_ROOM, 2 * col_cap[j]))
    p = col_start[j] + col_len[j]
    col_len[j] += 1
    pool_id[p], pool_cls[p], pool_val[p] = e, k, 0.0
    if len(pool_avg):
        pool_avg[p] = 0.0
    pos[e] = p
    return e


@njit(cache=True, nogil=True)
def needed_room(store, indptr, indices, first_row, n_rows):
    """Pool places that adding every column of these rows to two classes could take at most
    (each column may move twice, to twice its room, and then hold two more)."""
    col_cap = store[12]
    total = 0
    for p in range(indptr[first_row], indptr[first_row + n_rows]):
        j = indices[p]
        total += 2 * (4 * max(col_cap[j], FIRST_ROOM) + 2)
    return total


@njit(cache=True, nogil=True)
def rebuild_table(store, n_used):
    """The hash table and the class chains from the id arrays (after a resize or a compaction);
    ids are inserted in increasing order, so the same ids give the same table."""
    table, cls, col, pos, next_class, class_head = store[0], store[1], store[2], store[3], store[4], store[5]
    table[:] = -1
    class_head[:] = -1
    mask = len(table) - 1
    for e in range(n_used):
        h = _home(cls[e], col[e], mask)
        while table[h] >= 0:
            h = (h + 1) & mask
        table[h] = e
        next_class[e] = class_head[cls[e]]
        class_head[cls[e]] = e


@njit(cache=True, nogil=True)
def compact(store, counts, new_pool_id, new_pool_cls, new_pool_val, new_pool_avg, n_columns):
    """Rewrite the pool into the ``new_pool_*`` arrays, column by column, without the weights
    that are 0 in value and in average correction, each column with room ``max(FIRST_ROOM,
    len + len // 2)``; ids are given anew in pool order. Returns the new number of ids; the
    caller swaps the arrays in and rebuilds the table (:func:`rebuild_table`)."""
    table, cls, col, pos, next_class, class_head, pool_id, pool_cls, pool_val, pool_avg, col_start, col_len, col_cap = store
    averaged = len(pool_avg) > 0
    end = 0
    n_ids = 0
    for j in range(n_columns):
        start, n = col_start[j], col_len[j]
        col_start[j] = end
        kept = 0
        for q in range(n):
            v = pool_val[start + q]
            u = pool_avg[start + q] if averaged else 0.0
            if v == 0.0 and u == 0.0:
                continue
            p = end + kept
            new_pool_id[p], new_pool_cls[p], new_pool_val[p] = n_ids, pool_cls[start + q], v
            if averaged:
                new_pool_avg[p] = u
            cls[n_ids], col[n_ids], pos[n_ids] = pool_cls[start + q], j, p
            n_ids += 1
            kept += 1
        col_len[j] = kept
        col_cap[j] = max(FIRST_ROOM, kept + kept // 2) if kept else 0
        end += col_cap[j]
    counts[N_USED], counts[N_ZERO], counts[POOL_END], counts[POOL_WASTE] = n_ids, 0, end, 0
    return n_ids


@njit(cache=True, nogil=True)
def exact_scores(indptr, indices, data, row, store, n_classes, scores, mark, stamp, touched):
    """``scores[k] = (V x)_k`` by the inverted index: one contiguous run of the pool per
    column of row ``row``. Two ways, by the run lengths: when they sum to more than
    ``n_classes``, every score ``scores[0 : n_classes]`` is written (dense; returns -1): a
    scattered add per entry without book-keeping, then scans of ``K`` contiguous scores are
    cheaper; otherwise only the classes the runs reach are written, listed in ``touched`` and
    marked ``mark[k] = stamp`` (returns how many), every other class scoring 0. Either way each
    class's terms are summed in the same order."""
    pool_cls, pool_val, col_start, col_len = store[7], store[8], store[10], store[11]
    scan = 0
    for p in range(indptr[row], indptr[row + 1]):
        if indices[p] < len(col_len):
            scan += col_len[indices[p]]
    if scan > n_classes:  # (the two roads repeat their loop head on purpose: this one's inner loop has no branch)
        scores[:n_classes] = 0.0
        for p in range(indptr[row], indptr[row + 1]):
            j = indices[p]
            if j >= len(col_len):
                continue
            x = data[p]
            start = col_start[j]
            for q in range(start, start + col_len[j]):  # every class in the pool exists: no bound to check
                scores[pool_cls[q]] += x * pool_val[q]
        return -1
    n_touched = 0
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        if j >= len(col_len):
            continue
        x = data[p]
        start = col_start[j]
        for q in range(start, start + col_len[j]):
            k = pool_cls[q]
            if k < n_classes:
                if mark[k] != stamp:
                    mark[k] = stamp
                    touched[n_touched] = k
                    n_touched += 1
                    scores[k] = x * pool_val[q]
                else:
                    scores[k] += x * pool_val[q]
    return n_touched


@njit(cache=True, nogil=True)
def sparse_dot(indptr, indices, data, row, store, k, of_average):
    """``(V x)_k`` (``of_average``: ``(U x)_k``) for one class by hash look-ups."""
    pos = store[3]
    values = store[9] if of_average else store[8]
    s = 0.0
    for p in range(indptr[row], indptr[row + 1]):
        if indices[p] >= len(store[11]):
            continue
        e = find(store, k, indices[p])
        if e >= 0:
            s += data[p] * values[pos[e]]
    return s


# ----------------------------------------------------------------------------- sketches
@njit(cache=True, nogil=True, inline="always")
def _bucket(j, i, m):
    """Position and sign of column ``j`` in the ``i``-th of a count sketch's hashes."""
    h = (np.uint64(j) + np.uint64(i + 1) * _MIX_CLASS) * _MIX_COL
    h ^= h >> np.uint64(31)
    h *= _MIX_CLASS
    sign = 1.0 if (h >> np.uint64(63)) == np.uint64(0) else -1.0
    return np.int64((h >> np.uint64(8)) % np.uint64(m)), sign


@njit(cache=True, nogil=True)
def sketch_rows(indptr, indices, data, n_hashes, out):
    """Count sketches of CSR rows: ``out[i] = Σ_j x_j · s_j`` with ``s_j`` the column's
    ``n_hashes`` signed positions scaled by ``1/sqrt(n_hashes)`` (a sparse random projection:
    inner products are preserved in expectation)."""
    m = out.shape[1]
    norm = 1.0 / np.sqrt(n_hashes)
    for i in range(len(indptr) - 1):
        out[i, :] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            for h in range(n_hashes):
                b, sign = _bucket(indices[p], h, m)
                out[i, b] += sign * norm * data[p]


@njit(cache=True, nogil=True)
def sketch_classes(classes, n_listed, store, n_hashes, S):
    """Recompute the sketches ``S[k]`` of the listed classes from their rows."""
    col, pos, next_class, class_head, pool_val = store[2], store[3], store[4], store[5], store[8]
    m = S.shape[1]
    norm = 1.0 / np.sqrt(n_hashes)
    for q in range(n_listed):
        k = classes[q]
        S[k, :] = 0.0
        e = class_head[k]
        while e >= 0:
            v = pool_val[pos[e]]
            if v != 0.0:
                for h in range(n_hashes):
                    b, sign = _bucket(col[e], h, m)
                    S[k, b] += np.float32(sign * norm * v)
            e = next_class[e]


# ------------------------------------------------------------------------- SimpleLSH
@njit(cache=True, nogil=True)
def lsh_codes(vectors, listed, n_listed, planes, max_norm, codes):
    """SimpleLSH codes (Neyshabur & Srebro 2015, 002's MEMOIR-LSH): for each listed row
    ``v`` of ``vectors``, bit ``b`` of ``codes[k]`` is the sign of
    ``planes[b] · [v / M, sqrt(1 − ‖v‖² / M²)]`` (``M = max_norm`` bounds every ‖v‖)."""
    m = vectors.shape[1]
    for q in range(n_listed):
        k = listed[q]
        sq = 0.0
        for c in range(m):
            sq += np.float64(vectors[k, c]) ** 2
        tail = np.sqrt(max(0.0, 1.0 - sq / (max_norm * max_norm)))
        code = np.uint64(0)
        for b in range(planes.shape[0]):
            dot = planes[b, m] * tail
            for c in range(m):
                dot += planes[b, c] * vectors[k, c] / max_norm
            if dot >= 0.0:
                code |= np.uint64(1) << np.uint64(b)
        codes[k] = code


@njit(cache=True, nogil=True)
def _popcount(x):
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True, nogil=True)
def lsh_top(queries, planes, codes, n_classes, out):
    """For each query row (a sketch), the ``out.shape[1]`` classes below ``n_classes`` whose
    codes are nearest in Hamming distance to the query's code (the query is normalised and its
    SimpleLSH tail is 0; ties at the cut-off by class index; in no particular order: the
    learner re-ranks them exactly); -1 pads."""
    m = queries.shape[1]
    n_bits = planes.shape[0]
    want = out.shape[1]
    counts = np.zeros(n_bits + 2, np.int64)
    distance = np.empty(n_classes, np.int64)
    for i in range(queries.shape[0]):
        sq = 0.0
        for c in range(m):
            sq += np.float64(queries[i, c]) ** 2
        norm = np.sqrt(sq) if sq > 0 else 1.0
        code = np.uint64(0)
        for b in range(n_bits):
            dot = 0.0
            for c in range(m):
                dot += planes[b, c] * queries[i, c] / norm
            if dot >= 0.0:
                code |= np.uint64(1) << np.uint64(b)
        counts[:] = 0
        for k in range(n_classes):
            d = _popcount(code ^ codes[k])
            distance[k] = d
            counts[d] += 1
        cutoff, taken = 0, 0  # the smallest distance that, with the nearer ones, fills the list
        while cutoff <= n_bits and taken + counts[cutoff] < want:
            taken += counts[cutoff]
            cutoff += 1
        n = 0
        for k in range(n_classes):  # the nearer ones: fewer than wanted
            if distance[k] < cutoff:
                out[i, n] = k
                n += 1
        for k in range(n_classes):  # then those at the cut-off, by class index
            if n >= want:
                break
            if distance[k] == cutoff:
                out[i, n] = k
                n += 1
        for q in range(n, want):
            out[i, q] = -1


# ------------------------------------------------------------------------------ learning
L2, L1 = 0, 1


@njit(cache=True, nogil=True)
def _next_random(rng):
    """xorshift64*: the learner's one source of randomness (its state is checkpointed)."""
    x = rng[0]
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    rng[0] = x
    return x * np.uint64(0x2545F4914F6CDD1D)


@njit(cache=True, nogil=True)
def _random_other(rng, n_classes, y):
    """A class other than ``y``, uniformly (``n_classes`` ≥ 2)."""
    k = np.int64(_next_random(rng) % np.uint64(n_classes - 1))
    return k + 1 if k >= y else k


@njit(cache=True, nogil=True)
def _add(store, counts, scalars, indptr, indices, data, row, k, amount, averaged, S, xs):
    """``V[k] += amount · x_row``: ``Σ V²`` kept, ``U −= A δ`` when averaging, the sketch
    ``S[k] += amount · sketch(x_row)`` when there are sketches."""
    pos, pool_val, pool_avg = store[3], store[8], store[9]
    a = scalars[A]
    sq = 0.0
    for p in range(indptr[row], indptr[row + 1]):
        q = pos[find_or_add(store, counts, k, indices[p])]
        old = pool_val[q]
        delta = amount * data[p]
        new = old + delta
        pool_val[q] = new
        sq += new * new - old * old
        if averaged:
            pool_avg[q] -= a * delta
    scalars[SQ] += sq
    if S.shape[0]:
        for c in range(S.shape[1]):
            S[k, c] += np.float32(amount * xs[row, c])


@njit(cache=True, nogil=True)
def _violator(store, indptr, indices, data, row, y, n_classes, candidates, exact, lowest, rng, scores, mark, stamp, touched):
    """The most violating class ``r ≠ y`` of row ``row`` and the scores ``(V x)_r``,
    ``(V x)_y`` (see :func:`learn_groups`); ``r = -1`` when ``y`` is the only class."""
    if n_classes < 2:
        return -1, 0.0, 0.0
    best, best_score = -1, 0.0
    if exact:
        n_touched = exact_scores(indptr, indices, data, row, store, n_classes, scores, mark, stamp, touched)
        if n_touched < 0:  # every class scored: the argmax over k ≠ y, ties to the lowest index
            for k in range(n_classes):
                if k != y and (best < 0 or scores[k] > best_score):
                    best, best_score = k, scores[k]
            if not lowest and best_score <= 0.0:
                best = _random_other(rng, n_classes, y)
                best_score = scores[best]
            return best, best_score, scores[y]
        s_y = scores[y] if mark[y] == stamp else 0.0
        for q in range(n_touched):
            k = touched[q]
            if k != y and (best < 0 or scores[k] > best_score or (scores[k] == best_score and k < best)):
                best, best_score = k, scores[k]
        if lowest:  # untouched classes score 0: the lowest-index one ≠ y takes part in the argmax
            u = 0
            while u < n_classes and (u == y or mark[u] == stamp):
                u += 1
            if u < n_classes and (best < 0 or best_score < 0.0 or (best_score == 0.0 and u < best)):
                best, best_score = u, 0.0
        elif best < 0 or best_score <= 0.0:
            best = _random_other(rng, n_classes, y)
            best_score = scores[best] if mark[best] == stamp else 0.0
        return best, best_score, s_y
    s_y = sparse_dot(indptr, indices, data, row, store, y, False)
    for q in range(candidates.shape[1]):
        k = candidates[row, q]
        if k < 0 or k >= n_classes or k == y:
            continue
        s = sparse_dot(indptr, indices, data, row, store, k, False)
        if best < 0 or s > best_score or (s == best_score and k < best):
            best, best_score = k, s
    if lowest:
        u = 1 if y == 0 else 0
        s = sparse_dot(indptr, indices, data, row, store, u, False)
        if best < 0 or s > best_score or (s == best_score and u < best):
            best, best_score = u, s
    elif best < 0 or best_score <= 0.0:
        best = _random_other(rng, n_classes, y)
        best_score = sparse_dot(indptr, indices, data, row, store, best, False)
    return best, best_score, s_y


@njit(cache=True, nogil=True)
def truncate_rows(store, counts, scalars, classes, n_listed, threshold):
    """ℓ1 truncation (002 Eq. 13) of the listed rows: every weight moves ``threshold`` toward 0,
    and one within ``threshold`` of it becomes 0 (counted in ``counts[N_ZERO]``)."""
    pos, next_class, class_head, pool_val = store[3], store[4], store[5], store[8]
    sq = 0.0
    for q in range(n_listed):
        e = class_head[classes[q]]
        while e >= 0:
            p = pos[e]
            old = pool_val[p]
            if old > threshold:
                pool_val[p] = old - threshold
            elif old < -threshold:
                pool_val[p] = old + threshold
            elif old != 0.0:
                pool_val[p] = 0.0
                counts[N_ZERO] += 1
            sq += pool_val[p] * pool_val[p] - old * old
            e = next_class[e]
    scalars[SQ] += sq


@njit(cache=True, nogil=True)
def learn_groups(indptr, indices, data, y, weights, group_size, n_classes, store, counts, scalars, t,
                 lam, penalty, project, eta0, eta_decay, averaged, average_power, candidates, exact, lowest,
                 rng, scores, mark, stamp, touched, changed, is_changed, S, xs, renormalize_below):
    """Crammer–Singer steps over consecutive groups of ``group_size`` rows (002 Alg. 1 for
    ``penalty = L2``, Alg. 2 for ``L1``); returns ``(t, n_classes, n_changed, stamp,
    renormalized, rows_done)``: a group whose weights might not fit in the pool's free room
    is not started (``rows_done`` says where to go on once the caller made room).

    For every row of a group the most violating class ``r = argmax_{k≠y} (W x)_k`` is found
    at the group's starting weights ``W^(t-1)`` — by an exact scan of the inverted index
    (``exact``), or among ``candidates[row]`` (an oracle's) re-ranked exactly. Classes no
    column of ``x`` reaches score 0: with ``lowest``, the lowest-index such class takes part in
    the argmax, ties going to the lowest index (:class:`~streamlearn.MulticlassSVM`'s rule,
    so the exact ℓ2 learner is that learner); otherwise, when no class scores above 0, ``r``
    is drawn uniformly (002's code). A violated hinge (``1 + (W x)_r − (W x)_y > 0``) gives
    ``w_r −= η ω x``, ``w_y += η ω x`` with the row's weight ``ω`` (``weights``).

    L2: ``t += 1``, ``W ← (1 − 1/t) W`` (the global scale), ``η = 1/(λ t |group|)`` (Pegasos;
    with ``eta0 > 0`` instead 002's ``η = eta0 / (1 + eta_decay t)``, ``W ← (1 − λη) W``, the
    step divided by ``|group|``), then with ``project`` the projection onto ``‖W‖ ≤ 1/√λ``
    (Alg. 1 line 9); the averaged iterate takes the step with weight ``t^average_power``.
    L1: ``η = eta0 / (1 + eta_decay t)`` (002's schedule), then the rows of ``{y, r}`` of the
    group are truncated by ``C λ η / |R|`` (Eq. 13; ``C`` classes, ``|R|`` rows touched).

    The classes whose rows changed are appended to ``changed`` (flagged in ``is_changed``):
    the oracle updates their index entries after the call. ``S``/``xs``: class sketches and
    the rows' sketches (empty without an index). ``renormalized``: the global scale was folded
    into ``V`` (and ``S``), so every index entry changed."""
    n_groups = (len(indptr) - 1) // group_size
    r_of = np.empty(group_size, np.int64)
    amount_of = np.empty(group_size)
    n_changed = 0
    renormalized = False
    radius = 1.0 / np.sqrt(lam)
    for g in range(n_groups):
        first = g * group_size
        if counts[POOL_END] + needed_room(store, indptr, indices, first, group_size) > len(store[8]):
            return t, n_classes, n_changed, stamp, renormalized, first  # the caller grows the pool, then goes on
        for i in range(group_size):
            n_classes = max(n_classes, y[first + i] + 1)
        for i in range(group_size):  # every row at W^(t-1)
            row = first + i
            stamp += 1
            r, s_r, s_y = _violator(store, indptr, indices, data, row, y[row], n_classes, candidates, exact, lowest, rng,
                                    scores, mark, stamp, touched)
            r_of[i] = r
            amount_of[i] = 0.0
            if r >= 0 and 1.0 + scalars[G] * (s_r - s_y) > 0.0:
                amount_of[i] = weights[row]
        t += 1
        if penalty == L2 and eta0 == 0.0:  # Pegasos: η = 1/(λt), W ← (1 − λη) W = (1 − 1/t) W
            if t > 1:
                scalars[G] *= 1.0 - 1.0 / t
            step = 1.0 / (lam * t * group_size)
        else:  # 002's schedule η = eta0 / (1 + eta_decay t); for L2, W ← (1 − λη) W
            step = eta0 / (1.0 + eta_decay * t)
            if penalty == L2:
                scalars[G] *= max(1.0 - lam * step, 0.0)
                step /= group_size
        for i in range(group_size):
            row = first + i
            if amount_of[i] == 0.0 and penalty == L2:
                continue
            for k in (r_of[i], y[row]):
                if k >= 0 and not is_changed[k]:
                    is_changed[k] = True
                    changed[n_changed] = k
                    n_changed += 1
            if amount_of[i] == 0.0:
                continue
            amount = step * amount_of[i] / scalars[G]
            _add(store, counts, scalars, indptr, indices, data, row, r_of[i], -amount, averaged, S, xs)
            _add(store, counts, scalars, indptr, indices, data, row, y[row], amount, averaged, S, xs)
        if penalty == L1:  # Eq. 13 on R_t = this group's {y, r}
            group_rows = np.unique(np.concatenate((r_of[r_of >= 0], y[first : first + group_size])))
            truncate_rows(store, counts, scalars, group_rows, len(group_rows),
                          n_classes * lam * step / max(len(group_rows), 1))
        elif project:
            norm = scalars[G] * np.sqrt(max(scalars[SQ], 0.0))
            if norm > radius:
                scalars[G] *= radius / norm
        weight = float(t) ** average_power
        scalars[AW] += weight
        if averaged:
            scalars[A] += weight * scalars[G]
        if scalars[G] < renormalize_below:
            _renormalize(store, counts, scalars, S)
            renormalized = True
    return t, n_classes, n_changed, stamp, renormalized, n_groups * group_size


@njit(cache=True, nogil=True)
def _renormalize(store, counts, scalars, S):
    """Fold the global scale into ``V`` (and the sketches): ``U ← U + A V``, ``V ← g V``,
    ``A ← 0``, ``g ← 1`` (as :func:`streamlearn.kernels.scaled.renormalize_columns`: ``U + A V``
    cancels about as many digits as ``1/g`` has, so ``A`` starts again from 0)."""
    pool_val, pool_avg = store[8], store[9]
    g = scalars[G]
    for p in range(counts[POOL_END]):
        if len(pool_avg):
            pool_avg[p] += scalars[A] * pool_val[p]
        pool_val[p] *= g
    scalars[SQ] *= g * g
    scalars[A] = 0.0
    scalars[G] = 1.0
    for k in range(S.shape[0]):
        for c in range(S.shape[1]):
            S[k, c] = np.float32(S[k, c] * g)


# ---------------------------------------------------------------------------- prediction
@njit(cache=True, nogil=True)
def _add_average_scores(indptr, indices, data, row, store, n_classes, avg_scores):
    """``avg_scores[k] += (U x)_k`` over the column runs of row ``row``, in pool order."""
    pool_cls, pool_avg, col_start, col_len = store[7], store[9], store[10], store[11]
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        if j >= len(col_len):
            continue
        for q in range(col_start[j], col_start[j] + col_len[j]):
            if pool_cls[q] < n_classes:
                avg_scores[pool_cls[q]] += data[p] * pool_avg[q]


@njit(cache=True, nogil=True)
def predict_rows(indptr, indices, data, store, scalars, n_classes, averaged, candidates, exact, scores, avg_scores,
                 mark, stamp, touched, y, predicted, p_true):
    """For each row: the predicted class (``predicted``; -1 with no class) and, when ``y`` is
    given (non-empty; -1 for a class the model does not know), the softmax probability of
    ``y`` (``p_true``). Scores are ``g V x`` — or the averaged iterate's ``(U x + A V x) / Σ c``
    with ``averaged`` — over every class by the inverted index (``exact``), in which the
    classes it does not reach score 0, or over ``candidates[row]`` and ``y`` re-ranked
    exactly, the softmax normalised over those. Ties go to the lowest class index. Returns
    the new ``stamp``."""
    g = scalars[G]
    for row in range(len(indptr) - 1):
        stamp += 1
        if n_classes == 0:
            predicted[row] = -1
            if len(y):
                p_true[row] = 0.0
            continue
        best, best_score = -1, 0.0
        total = 0.0  # Σ exp(score − best_score), built once best_score is known
        if exact:
            n_touched = exact_scores(indptr, indices, data, row, store, n_classes, scores, mark, stamp, touched)
            if n_touched < 0:  # every class scored
                if averaged and scalars[AW] > 0:
                    avg_scores[:n_classes] = 0.0
                    _add_average_scores(indptr, indices, data, row, store, n_classes, avg_scores)
                    for k in range(n_classes):
                        scores[k] = (avg_scores[k] + scalars[A] * scores[k]) / scalars[AW]
                else:
                    for k in range(n_classes):
                        scores[k] = g * scores[k]
                for k in range(n_classes):
                    if best < 0 or scores[k] > best_score:
                        best, best_score = k, scores[k]
                for k in range(n_classes):
                    total += np.exp(scores[k] - best_score)
                if len(y):
                    k = y[row]
                    p_true[row] = 0.0 if k < 0 or k >= n_classes else np.exp(scores[k] - best_score) / total
                predicted[row] = best
                continue
            if averaged:  # the U x part on the same columns
                for q in range(n_touched):
                    avg_scores[touched[q]] = 0.0
                _add_average_scores(indptr, indices, data, row, store, n_classes, avg_scores)
            for q in range(n_touched):
                k = touched[q]
                s = (avg_scores[k] + scalars[A] * scores[k]) / scalars[AW] if averaged and scalars[AW] > 0 else g * scores[k]
                scores[k] = s
                if best < 0 or s > best_score or (s == best_score and k < best):
                    best, best_score = k, s
            n_zero = n_classes - n_touched
            if n_zero:
                u = 0
                while mark[u] == stamp:
                    u += 1
                if best < 0 or best_score < 0.0 or (best_score == 0.0 and u < best):
                    best, best_score = u, 0.0
            for q in range(n_touched):
                total += np.exp(scores[touched[q]] - best_score)
            total += n_zero * np.exp(-best_score)
            if len(y):
                k = y[row]
                s_y = -np.inf if k < 0 or k >= n_classes else (scores[k] if mark[k] == stamp else 0.0)
                p_true[row] = np.exp(s_y - best_score) / total
        else:
            n_listed = 0
            for q in range(candidates.shape[1] + 1):
                k = candidates[row, q] if q < candidates.shape[1] else (y[row] if len(y) else -1)
                if k < 0 or k >= n_classes or mark[k] == stamp:
                    continue
                mark[k] = stamp
                touched[n_listed] = k
                n_listed += 1
                s = sparse_dot(indptr, indices, data, row, store, k, False)
                if averaged and scalars[AW] > 0:
                    s = (sparse_dot(indptr, indices, data, row, store, k, True) + scalars[A] * s) / scalars[AW]
                else:
                    s = g * s
                scores[k] = s
                if best < 0 or s > best_score or (s == best_score and k < best):
                    best, best_score = k, s
            if best < 0:  # no candidate: the lowest class
                best, best_score = 0, 0.0
            for q in range(n_listed):
                total += np.exp(scores[touched[q]] - best_score)
            if len(y):
                k = y[row]
                p_true[row] = 0.0 if k < 0 or k >= n_classes or total == 0 else np.exp(scores[k] - best_score) / total
        predicted[row] = best
    return stamp


@njit(cache=True, nogil=True)
def violator(store, indptr, indices, data, row, y, n_classes, candidates, exact, lowest, rng, scores, mark, stamp, touched):
    """The most violating class of one row at the current weights (see :func:`learn_groups`)."""
    r, s_r, s_y = _violator(store, indptr, indices, data, row, y, n_classes, candidates, exact, lowest, rng, scores, mark,
                            stamp, touched)
    return r
