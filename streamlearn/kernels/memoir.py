"""Kernels of the extreme-classification learner (002_d116c1700f27e6e6.txt, MEMOIR): the
Crammer–Singer step with an exact or candidate-based most violating class, ℓ1 truncation and
prediction, over the class rows of :mod:`.memoir_store` (whose docstring describes the store, its
global scale and the averaged iterate); the sketches and SimpleLSH codes are in :mod:`.memoir_sketch`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .memoir_store import A, AW, G, N_USED, N_ZERO, POOL_END, SQ, exact_scores, find_or_add, needed_room, sparse_dot

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
def random_other(rng, n_classes, y):
    """A class other than ``y``, uniformly (``n_classes`` ≥ 2)."""
    k = np.int64(_next_random(rng) % np.uint64(n_classes - 1))
    return k + 1 if k >= y else k


@njit(cache=True, nogil=True)
def _add(store, counts, scalars, indptr, indices, data, row, k, amount, averaged, S, xs):
    """``V[k] += amount · x_row``: ``Σ V²`` and the count of zeros kept, ``U −= A δ`` when averaging, the sketch
    ``S[k] += amount · sketch(x_row)`` when there are sketches."""
    pos, pool_val, pool_avg = store.pos, store.pool_val, store.pool_avg
    a = scalars[A]
    sq = 0.0
    for p in range(indptr[row], indptr[row + 1]):
        n_ids = counts[N_USED]
        q = pos[find_or_add(store, counts, k, indices[p])]
        old = pool_val[q]
        delta = amount * data[p]
        new = old + delta
        pool_val[q] = new
        # counts[N_ZERO] is every stored weight of value 0: a new one counts as a stored 0 before this change
        was_zero = old == 0.0 and counts[N_USED] == n_ids
        counts[N_ZERO] += (new == 0.0) - was_zero
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
                best = random_other(rng, n_classes, y)
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
            best = random_other(rng, n_classes, y)
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
        best = random_other(rng, n_classes, y)
        best_score = sparse_dot(indptr, indices, data, row, store, best, False)
    return best, best_score, s_y


@njit(cache=True, nogil=True)
def truncate_rows(store, counts, scalars, classes, n_listed, threshold):
    """ℓ1 truncation (002 Eq. 13) of the listed rows: every weight moves ``threshold`` toward 0,
    and one within ``threshold`` of it becomes 0 (counted in ``counts[N_ZERO]``)."""
    pos, next_class, class_head, pool_val = store.pos, store.next_class, store.class_head, store.pool_val
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


# over 80 lines: the whole mini-batch loop is one compiled call, so the store's scalars stay in locals across groups
@njit(cache=True, nogil=True)
def learn_groups(indptr, indices, data, y, weights, group_size, n_classes, store, counts, scalars, t,
                 lam, penalty, project, eta0, eta_decay, averaged, average_power, candidates, exact, lowest,
                 rng, scores, mark, stamp, touched, changed, is_changed, S, xs, renormalize_below, mistakes,
                 avg_scores):
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
    into ``V`` (and ``S``), so every index entry changed.

    ``mistakes`` (or an empty array): whether the model as it stood misclassified each row, the
    prequential mistakes :mod:`streamlearn.adaptation` watches — a class first seen in the row's
    group; with ``averaged``, the averaged iterate's prediction by an exact scan
    (:func:`predict_rows`, scratch ``avg_scores``); else ``r`` scoring above ``y`` at ``W^(t-1)``
    (at a tie, ``r`` of lower index)."""
    n_groups = (len(indptr) - 1) // group_size
    predicted, no_labels, no_candidates = np.empty(1, np.int64), np.empty(0, np.int64), np.empty((0, 0), np.int64)
    r_of = np.empty(group_size, np.int64)
    amount_of = np.empty(group_size)
    n_changed = 0
    renormalized = False
    radius = 1.0 / np.sqrt(lam)
    for g in range(n_groups):
        first = g * group_size
        if counts[POOL_END] + needed_room(store, indptr, indices, first, group_size) > len(store.pool_val):
            return t, n_classes, n_changed, stamp, renormalized, first  # the caller grows the pool, then goes on
        n_before = n_classes
        for i in range(group_size):
            n_classes = max(n_classes, y[first + i] + 1)
        for i in range(group_size):  # every row at W^(t-1)
            row = first + i
            # both flags are ``averaged`` (True here): a literal True would compile a second predict_rows
            if len(mistakes) and averaged:
                stamp = predict_rows(indptr[row : row + 2], indices, data, store, scalars, n_before, averaged,
                                     no_candidates, averaged, scores, avg_scores, mark, stamp, touched, no_labels, predicted,
                                     avg_scores[:0])
                mistakes[row] = y[row] >= n_before or predicted[0] != y[row]
            stamp += 1
            r, s_r, s_y = _violator(store, indptr, indices, data, row, y[row], n_classes, candidates, exact, lowest, rng,
                                    scores, mark, stamp, touched)
            if len(mistakes) and not averaged:
                mistakes[row] = y[row] >= n_before or (r >= 0 and (s_r > s_y or (s_r == s_y and r < y[row])))
            r_of[i] = r
            amount_of[i] = 0.0
            if r >= 0 and 1.0 + scalars[G] * (s_r - s_y) > 0.0:
                amount_of[i] = weights[row]
        t += 1
        step = shrink_and_step(scalars, t, lam, eta0, eta_decay, group_size, penalty == L2)
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
        if finish_step(scalars, t, project and penalty == L2, radius, averaged, average_power, renormalize_below):
            _renormalize(store, counts, scalars, S)
            renormalized = True
    return t, n_classes, n_changed, stamp, renormalized, n_groups * group_size


@njit(cache=True, nogil=True)
def shrink_and_step(scalars, t, lam, eta0, eta_decay, group_size, l2):
    """Step ``t``'s shrink of the global scale and the step size of each violated row (shared by
    the sparse and the dense store): Pegasos (``l2`` with ``eta0 = 0``) ``W ← (1 − 1/t) W``,
    ``η = 1/(λ t |group|)``; else 002's ``η = eta0 / (1 + eta_decay t)``, with ``l2``
    ``W ← (1 − λη) W`` and ``η / |group|``."""
    if l2 and eta0 == 0.0:
        if t > 1:
            scalars[G] *= 1.0 - 1.0 / t
        return 1.0 / (lam * t * group_size)
    step = eta0 / (1.0 + eta_decay * t)
    if l2:
        scalars[G] *= max(1.0 - lam * step, 0.0)
        step /= group_size
    return step


@njit(cache=True, nogil=True)
def finish_step(scalars, t, project, radius, averaged, average_power, renormalize_below):
    """After step ``t``'s updates (shared by both stores): the projection onto ``‖W‖ ≤ radius``
    (Alg. 1 line 9) with ``project``, the step's weight ``t^average_power`` in the average;
    whether the global scale fell below ``renormalize_below`` (the caller folds it into the rows)."""
    if project:
        norm = scalars[G] * np.sqrt(max(scalars[SQ], 0.0))
        if norm > radius:
            scalars[G] *= radius / norm
    weight = float(t) ** average_power
    scalars[AW] += weight
    if averaged:
        scalars[A] += weight * scalars[G]
    return scalars[G] < renormalize_below


@njit(cache=True, nogil=True)
def _renormalize(store, counts, scalars, S):
    """Fold the global scale into ``V`` (and the sketches): ``U ← U + A V``, ``V ← g V``,
    ``A ← 0``, ``g ← 1`` (as :func:`streamlearn.kernels.scaled.renormalize_columns`: ``U + A V``
    cancels about as many digits as ``1/g`` has, so ``A`` starts again from 0)."""
    pool_val, pool_avg = store.pool_val, store.pool_avg
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
def _add_scores(indptr, indices, data, row, store, values, n_classes, out):
    """``out[k] += (M x)_k`` over the column runs of row ``row``, in pool order; ``values`` is
    the pool of ``M``'s entries (``store.pool_val``: V, ``store.pool_avg``: U)."""
    pool_cls, col_start, col_len = store.pool_cls, store.col_start, store.col_len
    for p in range(indptr[row], indptr[row + 1]):
        j = indices[p]
        if j >= len(col_len):
            continue
        for q in range(col_start[j], col_start[j] + col_len[j]):
            if pool_cls[q] < n_classes:
                out[pool_cls[q]] += data[p] * values[q]


@njit(cache=True, nogil=True)
def class_scores(indptr, indices, data, store, scalars, n_classes, averaged, scores):
    """``scores[row, k]`` for every row and class: ``g V x``, or with ``averaged`` the averaged
    iterate's ``(U x + A V x) / Σ c``, by the inverted index (O(the row's column runs) per row,
    as :func:`predict_rows`' exact scan, whose scores these equal bit for bit); columns past
    the store's score 0."""
    use_average = averaged and scalars[AW] > 0
    average = np.empty(n_classes)
    for row in range(len(indptr) - 1):
        out = scores[row]
        out[:] = 0.0
        _add_scores(indptr, indices, data, row, store, store.pool_val, n_classes, out)
        if use_average:
            average[:] = 0.0
            _add_scores(indptr, indices, data, row, store, store.pool_avg, n_classes, average)
            for k in range(n_classes):
                out[k] = (average[k] + scalars[A] * out[k]) / scalars[AW]
        else:
            for k in range(n_classes):
                out[k] = scalars[G] * out[k]


# over 80 lines: one pass per row scores the last and the averaged iterate and re-ranks the candidates together
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
                    _add_scores(indptr, indices, data, row, store, store.pool_avg, n_classes, avg_scores)
                    for k in range(n_classes):
                        scores[k] = (avg_scores[k] + scalars[A] * scores[k]) / scalars[AW]
                else:
                    for k in range(n_classes):
                        scores[k] = g * scores[k]
                for k in range(n_classes):
                    if best < 0 or scores[k] > best_score:
                        best, best_score = k, scores[k]
                if len(y):  # the softmax's sum only for a probability asked for
                    for k in range(n_classes):
                        total += np.exp(scores[k] - best_score)
                    k = y[row]
                    p_true[row] = 0.0 if k < 0 or k >= n_classes else np.exp(scores[k] - best_score) / total
                predicted[row] = best
                continue
            if averaged:  # the U x part on the same columns
                for q in range(n_touched):
                    avg_scores[touched[q]] = 0.0
                _add_scores(indptr, indices, data, row, store, store.pool_avg, n_classes, avg_scores)
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
            if len(y):
                for q in range(n_touched):
                    total += np.exp(scores[touched[q]] - best_score)
                total += n_zero * np.exp(-best_score)
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
            if len(y):
                for q in range(n_listed):
                    total += np.exp(scores[touched[q]] - best_score)
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
