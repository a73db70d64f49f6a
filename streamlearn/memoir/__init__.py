"""Extreme multi-class classification, MEMOIR (002): the learner (:mod:`.learner`) and its sparse
class rows (:mod:`.store`); the max-inner-product oracles are in :mod:`streamlearn.mips`."""

from .learner import ExtremeSVM
from .store import SparseClassRows

__all__ = ["ExtremeSVM", "SparseClassRows"]
