"""The λ values an MCID learner runs: one, or with ``lam="auto"`` the candidates of
:data:`AUTO_LAMBDAS`, each a model on the same stream (see :mod:`streamlearn.mcid`)."""

from __future__ import annotations

from ..checks import check_positive
from ..errors import InvalidParameterError

#: the candidates of ``lam="auto"``: the decades of the defaults protocol's λ grid, 1e-4 first so that
#: ties (before any evidence) keep it
AUTO_LAMBDAS = (1e-4, 1e-3, 1e-5, 1e-6)


def lambda_candidates(lam) -> tuple:
    """The λ values a learner runs: ``(lam,)``, or :data:`AUTO_LAMBDAS` for ``"auto"``.

    >>> lambda_candidates(0.01), lambda_candidates("auto") == AUTO_LAMBDAS
    ((0.01,), True)
    """
    if isinstance(lam, str) and lam == "auto":
        return AUTO_LAMBDAS
    if isinstance(lam, str):
        raise InvalidParameterError(f"lam must be a positive finite number or 'auto', got {lam!r}")
    check_positive("lam", lam)
    return (float(lam),)
