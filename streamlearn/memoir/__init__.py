"""Extreme multi-class classification, MEMOIR (002): the learner (:mod:`.learner`), its sparse and
dense class rows (:mod:`.store`, :mod:`.dense`); the max-inner-product oracles are in :mod:`streamlearn.mips`."""

from .learner import ExtremeSVM
from .store import DenseClassRows, SparseClassRows

__all__ = ["DenseClassRows", "ExtremeSVM", "SparseClassRows"]
