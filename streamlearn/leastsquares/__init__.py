"""The least-squares family of Agarwal, Kakade, Karampatziakis, Song & Valiant, *Least
Squares Revisited: Scalable Approaches for Multi-class Prediction*
(``../shared/papers/004_6d6f30a18e3b636b.txt``).

* :class:`GeneralizedLeastSquares` — Alg. 1: the preconditioned step
  ``Wᵀ ← Wᵀ − (1/L) Σ̂⁻¹ Ê[(ŷ − y) xᵀ]`` (Eq. 6) with the link ``g = ∇Φ`` (softmax, L = 1; or
  the identity, for which one step is plain least squares);
* :class:`CalibratedLeastSquares` — Alg. 2: alternate the residual fit (Eq. 10) and the
  calibration fit on ``G(ỹ) = [ỹ, ỹ², ỹ³]`` (Eq. 11) followed by the Euclidean projection
  onto the probability simplex; the model is the chain of stages, replayed to predict.

Both work on dense features (the model's feature space is materialised as a ``d × d``
second-moment matrix), so they refuse more than ``max_features`` features with a message
that points to stagewise fitting of feature blocks (Alg. 3, :class:`StagewiseRegression`).

**Two modes.** ``learn_one``/``learn_many`` are the stream: every group of ``batch_size``
examples is folded into running sufficient statistics (``Σ̂ = E[x xᵀ]``, and for the
identity link ``E[x yᵀ]`` too, so the identity link *is* recursive least squares: the
weights equal the closed-form solution on everything seen so far), and the softmax link
takes one preconditioned step on the group's residual with the running ``Σ̂``. ``fit(X, y)``
is the batch algorithm: Alg. 1 (or Alg. 2) iterated to convergence on the given data — use
it on a buffered window or a whole data set when the stream can be revisited; use the
stream mode when it cannot.

**Ridge.** ``Σ̂`` is singular whenever a feature is constant zero or features are collinear
(raw MNIST pixels are both), so it is factored as ``Σ̂ + r·I`` (Cholesky): ``r`` is ``ridge``
times the mean diagonal of ``Σ̂`` (at least 1e-12), or ``trace_ridge`` times its trace, a ridge
that grows with the dimension. Given neither, :class:`GeneralizedLeastSquares` and
:class:`CalibratedLeastSquares` take one default in the stream and another in
:meth:`~GeneralizedLeastSquares.fit` (near 004's parameter-free :data:`PARAMETER_FREE_RIDGE`):
each mode's default is the defaults protocol's winner for it (``bench/results/defaults.md``,
rows ``NAME`` and ``NAME.fit``).

**Multi-label.** The paper notes that y may live on the hypercube; river's classifier API
gives one hashable label per example, so a label *set* would be a single class here:
multi-label learning (and its projection onto the hypercube) is not offered.
"""

from __future__ import annotations

from .calibrated import CalibratedLeastSquares
from .dense import DenseLeastSquares, WindowRefit
from .generalized import GeneralizedLeastSquares
from .generators import FeatureSampler, RandomFourierFeatures
from .solvers import (PARAMETER_FREE_RIDGE, RidgeSolver, calibration_basis, dense_rows, log_loss, one_hot,
                      project_simplex, take_columns)
from .stagewise import StagewiseRegression

__all__ = ["CalibratedLeastSquares", "DenseLeastSquares", "FeatureSampler", "GeneralizedLeastSquares", "PARAMETER_FREE_RIDGE",
           "RandomFourierFeatures", "RidgeSolver", "StagewiseRegression", "WindowRefit", "calibration_basis", "dense_rows",
           "log_loss", "one_hot", "project_simplex", "take_columns"]
