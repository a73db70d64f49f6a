"""The five MCID learners (000 Algs. 2–4 and Sec. V-C): each is :class:`~streamlearn.mcid.solver.MCIDLearner`
with its loss."""

from __future__ import annotations

import numpy as np

from ..kernels import codes
from .solver import MCIDLearner

class MulticlassSVM(MCIDLearner):
    """Multi-class SVM (Crammer–Singer hinge) by the MCID solver — 000, Alg. 3 / Eq. 16.

    On each example, ``k* = argmax_{k != y} w_k.x``; if ``1 + w_k*.x - w_y.x > 0`` the step
    moves ``w_y`` towards ``x`` and ``w_k*`` away from it. ``predict_proba_one`` is the
    softmax of the scores at the temperature fitted on the stream (``calibrate``): the hinge
    loss estimates no probabilities, the temperature makes them honest about its mistakes.

    Parameters
    ----------
    lam
        Regularisation strength λ > 0; the step is 1/(λ t). ``None``: the learner's
        :attr:`default_lam` (here 3e-4), chosen across data sets. ``"auto"``: learn with every λ
        of :data:`AUTO_LAMBDAS` at once and predict with the best so far by progressive accuracy
        (see the module docstring; costs 4x the compute and memory).
    batch_size
        Mini-batch size r: one step per r examples.
    project
        Project onto the ball of radius 1/√λ after each step (see the module docstring).
    average
        Predict with the averaged iterate (see the module docstring).
    average_power
        Weight step s by s**average_power in that average (0: the plain average; 2: the
        polynomial-decay averaging recommended for a single pass; see the module docstring).
    n_bits
        ``None`` for a growing feature vocabulary, or hash feature names into 2**n_bits columns.
    seed
        Recorded only; the learner is deterministic.
    standardize
        Scale every feature online to zero mean and unit variance, with statistics learned
        and checkpointed with the model (:mod:`streamlearn.scaling`): for dense, unscaled features.
    fit_intercept
        Learn an intercept per class (default): a constant feature on every row, after
        ``standardize``, regularised with the other weights — it keeps the objective strongly
        convex, which the 1/(λt) step assumes (its weight column is that of the reserved name
        ``streamlearn.intercept.INTERCEPT_NAME``). ``False``: the papers' model, through the origin.
    intercept_scaling
        The constant feature's value. ``"auto"`` (default): the root mean square of the nonzero
        feature values of the first 1,000 rows learned, clipped to [0.1, 1] — about 1 for
        standardised features, 0.1 for unit-length text rows, so that the intercept learns as fast
        as a typical weight without swamping sparse rows (:mod:`streamlearn.intercept`; its value
        now is ``intercept_value``). A positive number: that value, fixed (0.1 before ``"auto"``).
        With ``bins``, their indicators take it too.
    adapt
        Follow a stream that changes (default): a Page-Hinkley test on the prequential mistakes
        restarts the step schedule and the average when the error rises, and a fast tracker (no
        average, 100× λ) learns beside the averaged model and predicts while it errs less, for a
        stream that drifts all the time (:mod:`streamlearn.adaptation`; one more weight matrix);
        ``False``: the papers' solver exactly, for a stationary stream.
    calibrate
        Fit the probabilities' temperature on the last 1,024 examples' prequential scores
        (default; :mod:`streamlearn.calibration`); ``False``: the raw softmax of the scores.
    bins
        12 (default): in a row of at most 16 nonzero values (a record of a few fields, not a
        document or an image), each nonzero value also brings the indicator of its interval among
        12 equal-width intervals of its feature's running standardised range ±3σ, at the
        intercept's value (:mod:`streamlearn.binning`): a step function per feature, for classes
        that no linear function of the values separates. Another integer: that many intervals.
        Costs ``bins + 1`` weight columns per feature and class. ``None``: the features as given.
    class_weight
        ``None`` (default): every class weighs 1. ``{label: weight}``: each example's weight is
        multiplied by its class's (a class not named: 1). ``"balanced"``: by ``1 / (K f_k)``, the
        class's running frequency since it appeared (:mod:`streamlearn.class_weights`), for an
        imbalanced stream; ``class_weights()`` gives each class's weight now.

    Attributes
    ----------
    classes
        The labels seen so far, in class-index order (columns of ``decision_function_many``).
    n_steps, n_pending
        Steps taken; examples waiting for a full mini-batch (:meth:`flush` learns them).
    weight_matrix()
        The dense ``(K, d)`` weights predictions use.
    n_changes
        Changes of the stream detected so far (see ``adapt``).
    tracking, n_switches
        Whether the fast tracker predicts now; how often the predictions changed hands.
    temperature
        The probabilities' temperature (1 with ``calibrate=False``).
    selected_lam
        The λ of the model that predicts (``lam``, its default, or the leader with ``lam="auto"``).
    default_lam
        The λ a learner takes when ``lam`` is not given (a class attribute).

    Examples
    --------
    >>> from streamlearn import MulticlassSVM
    >>> model = MulticlassSVM(lam=0.01)
    >>> for _ in range(20):
    ...     model.learn_one({"x": 1.0, "bias": 1.0}, "right")
    ...     model.learn_one({"x": -1.0, "bias": 1.0}, "left")
    ...     model.learn_one({"y": 1.0, "bias": 1.0}, "up")
    >>> model.predict_one({"x": 0.8, "bias": 1.0}), model.predict_one({"y": 2.0, "bias": 1.0})
    ('right', 'up')
    """

    _loss = codes.CRAMMER_SINGER


class MulticlassLogisticRegression(MCIDLearner):
    """Multi-class (softmax) logistic regression by the MCID solver — 000, Alg. 2 / Eq. 15.

    Every class moves on every example by ``-(p_k - [k = y]) x / (λ t r)``, so a step costs
    O(K nnz(x)). ``predict_proba_one`` is the model's softmax (Eq. 4) at the fitted
    temperature: the regularised, averaged iterate of a long stream is overconfident (margins of
    hundreds), the temperature brings its log-loss back to the data's.

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 3e-5.

    Examples
    --------
    >>> from streamlearn import MulticlassLogisticRegression
    >>> model = MulticlassLogisticRegression(lam=0.01)
    >>> for _ in range(50):
    ...     model.learn_one({"a": 1.0}, 0)
    ...     model.learn_one({"b": 1.0}, 1)
    >>> proba = model.predict_proba_one({"a": 1.0})
    >>> proba[0] > 0.9, round(sum(proba.values()), 6)
    (True, 1.0)
    """

    _loss = codes.SOFTMAX
    default_lam = 3e-5


class MulticlassPerceptron(MCIDLearner):
    """Regularised multi-class perceptron by the MCID solver — 000, Alg. 4 / Eq. 17.

    ``k* = argmax_k w_k.x`` over *all* classes; when ``k* != y``, ``w_y`` moves towards ``x``
    and ``w_k*`` away from it (when ``k* = y`` the two moves cancel). ``predict_proba_one``
    is the softmax of the scores at the fitted temperature.

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 1e-6.

    Examples
    --------
    >>> from streamlearn import MulticlassPerceptron
    >>> model = MulticlassPerceptron(lam=0.01)
    >>> for _ in range(10):
    ...     model.learn_one({"a": 1.0}, "A")
    ...     model.learn_one({"b": 1.0}, "B")
    >>> model.predict_one({"b": 3.0})
    'B'
    """

    _loss = codes.PERCEPTRON
    default_lam = 1e-6


class OneVsRestPegasos(MCIDLearner):
    """K binary Pegasos SVMs, one per class against the rest ("K-Pegasos", 000 Sec. V-C).

    The paper's baseline for :class:`MulticlassSVM`: the same step size, mini-batches and
    iteration count, but each class ``k`` learns the binary hinge loss
    ``max(0, 1 - s_k w_k.x)`` with ``s_k = +1`` if ``y = k`` else ``-1``. A class first seen
    mid-stream starts from zero (it did not see the earlier examples as negatives).
    ``predict_proba_one`` is the softmax of the K scores at the fitted temperature; ``project=True``
    projects each class onto its own 1/√λ ball.

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 3e-5.

    Examples
    --------
    >>> from streamlearn import OneVsRestPegasos
    >>> model = OneVsRestPegasos(lam=0.01)
    >>> for _ in range(20):
    ...     model.learn_one({"a": 1.0}, "A")
    ...     model.learn_one({"b": 1.0}, "B")
    >>> model.predict_one({"a": 1.0})
    'A'
    """

    _loss = codes.OVR_HINGE
    default_lam = 3e-5
    _per_class_ball = True


class OneVsRestLogisticRegression(MCIDLearner):
    """K binary logistic regressions, one per class ("K-binaryLR", 000 Sec. V-C).

    Each class ``k`` minimises ``log(1 + exp(-s_k w_k.x))`` with the MCID step (the
    ℓ2 case of the Primal Gradient Solver of 003, which the paper uses as this baseline).
    ``predict_proba_one`` is the softmax of the K scores at the fitted temperature: the K
    sigmoids ``σ(w_k.x)`` are binary probabilities, normalised they are not a calibrated
    multi-class distribution (they are what ``calibrate=False`` gives).

    Parameters and attributes are those of :class:`MulticlassSVM`; its default λ is 3e-5.

    Examples
    --------
    >>> from streamlearn import OneVsRestLogisticRegression
    >>> model = OneVsRestLogisticRegression(lam=0.01)
    >>> for _ in range(30):
    ...     model.learn_one({"a": 1.0}, "A")
    ...     model.learn_one({"b": 1.0}, "B")
    >>> model.predict_one({"b": 1.0})
    'B'
    """

    _loss = codes.OVR_LOGISTIC
    default_lam = 3e-5
    _per_class_ball = True

    def _uncalibrated_probabilities(self, scores: np.ndarray) -> np.ndarray:
        sig = 0.5 * (1.0 + np.tanh(0.5 * scores))  # σ(z), stable for large |z|
        total = sig.sum(axis=1, keepdims=True)
        flat = total[:, 0] <= 0.0  # every sigmoid underflowed: fall back to the scores' softmax
        sig[~flat] /= total[~flat]
        if flat.any():
            sig[flat] = super()._uncalibrated_probabilities(scores[flat])
        return sig
