"""The ℓp-norm Primal Gradient Solver (003): dual averaging in λ-space for binary and multi-class
classification (:mod:`.solver`) and regression (:mod:`.regressor`)."""

from .regressor import PrimalGradientRegressor
from .solver import MulticlassPGS, PrimalGradientSolver

__all__ = ["MulticlassPGS", "PrimalGradientRegressor", "PrimalGradientSolver"]
