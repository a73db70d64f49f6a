"""streamlearn — multi-class linear classifiers learned continuously from a stream.

Every learner is a ``river.base.MiniBatchClassifier`` (``learn_one`` / ``learn_many`` /
``predict_one`` / ``predict_proba_one`` / ``predict_many`` / ``predict_proba_many``).

>>> from streamlearn import MulticlassSVM
>>> model = MulticlassSVM()
>>> model.learn_one({"word": 1.0}, "spam")
>>> model.predict_one({"word": 1.0})
'spam'
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing: the command's start-up pays for every import

__version__ = "0.1.0"

#: where each public name lives; imported on first use (PEP 562), so that the ``streamlearn``
#: command can start reading its source (NumPy and the compiled parser only) while the
#: learners and river load (see :func:`streamlearn.service.cli.cmd_train`)
_HOMES = {
    "StreamClassifier": "base",
    "InvalidInputError": "errors", "InvalidParameterError": "errors", "StreamlearnError": "errors",
    "FeatureSpace": "features", "LabelSpace": "labels",
    "MulticlassLogisticRegression": "mcid", "MulticlassPerceptron": "mcid", "MulticlassSVM": "mcid",
    "OneVsRestLogisticRegression": "mcid", "OneVsRestPegasos": "mcid",
    "CalibratedLeastSquares": "leastsquares", "FeatureSampler": "leastsquares",
    "GeneralizedLeastSquares": "leastsquares", "RandomFourierFeatures": "leastsquares",
    "StagewiseRegression": "leastsquares",
    "MulticlassPGS": "pgs", "PrimalGradientRegressor": "pgs", "PrimalGradientSolver": "pgs",
    "ExtremeSVM": "memoir",
    "LpNormMulticlassSVM": "lpsvm",
}
#: the classifiers the ``streamlearn`` command trains, by class name (``LEARNERS`` maps them to the classes)
LEARNER_NAMES = ("MulticlassSVM", "MulticlassLogisticRegression", "MulticlassPerceptron", "OneVsRestPegasos",
                  "OneVsRestLogisticRegression", "PrimalGradientSolver", "MulticlassPGS", "GeneralizedLeastSquares",
                  "CalibratedLeastSquares", "StagewiseRegression", "ExtremeSVM", "LpNormMulticlassSVM")
#: the learners whose work is compiled first-order loops (no BLAS call worth a thread; the
#: ``streamlearn`` command starts OpenBLAS with one thread for them)
FIRST_ORDER_LEARNERS = tuple(name for name in LEARNER_NAMES if _HOMES[name] in ("mcid", "pgs", "memoir"))
#: regressors (river ``MiniBatchRegressor``s): not trained by the ``streamlearn`` command
_REGRESSOR_NAMES = ("PrimalGradientRegressor",)

if TYPE_CHECKING:  # what the lazy names are, for type checkers and editors
    from .base import StreamClassifier
    from .errors import InvalidInputError, InvalidParameterError, StreamlearnError
    from .features import FeatureSpace
    from .labels import LabelSpace
    from .leastsquares import (CalibratedLeastSquares, FeatureSampler, GeneralizedLeastSquares,
                               RandomFourierFeatures, StagewiseRegression)
    from .mcid import (MulticlassLogisticRegression, MulticlassPerceptron, MulticlassSVM,
                       OneVsRestLogisticRegression, OneVsRestPegasos)
    from .lpsvm import LpNormMulticlassSVM
    from .memoir import ExtremeSVM
    from .pgs import MulticlassPGS, PrimalGradientRegressor, PrimalGradientSolver

    LEARNERS: dict[str, type[StreamClassifier]]
    REGRESSORS: dict[str, type]


def __getattr__(name: str):
    """A public class, ``LEARNERS`` / ``REGRESSORS``, or a submodule, imported on first access."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f".{_HOMES[name]}", __name__), name)
    elif name == "LEARNERS":
        value = {learner: __getattr__(learner) for learner in LEARNER_NAMES}
    elif name == "REGRESSORS":
        value = {regressor: __getattr__(regressor) for regressor in _REGRESSOR_NAMES}
    else:
        try:
            value = importlib.import_module(f".{name}", __name__)
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def learner_from_state(state: dict) -> StreamClassifier:
    """Rebuild any streamlearn learner or regressor from its ``export_state()`` output (plain arrays and
    metadata: what a checkpoint stores).

    >>> from streamlearn import MulticlassSVM, learner_from_state
    >>> model = MulticlassSVM()
    >>> model.learn_one({"a": 1.0}, "x"); model.learn_one({"b": 1.0}, "y")
    >>> restored = learner_from_state(model.export_state())
    >>> restored.predict_one({"b": 1.0}), restored.classes == model.classes
    ('y', True)
    """
    name = state.get("class")
    learners = {**__getattr__("LEARNERS"), **__getattr__("REGRESSORS")}
    if name not in learners:
        raise ValueError(f"unknown learner class {name!r}; known: {', '.join(sorted(learners))}")
    return learners[name].from_state(state)


__all__ = [
    "CalibratedLeastSquares",
    "ExtremeSVM",
    "FeatureSampler",
    "FeatureSpace",
    "GeneralizedLeastSquares",
    "InvalidInputError",
    "InvalidParameterError",
    "LEARNERS",
    "LEARNER_NAMES",
    "REGRESSORS",
    "LabelSpace",
    "LpNormMulticlassSVM",
    "MulticlassLogisticRegression",
    "MulticlassPGS",
    "MulticlassPerceptron",
    "MulticlassSVM",
    "OneVsRestLogisticRegression",
    "OneVsRestPegasos",
    "PrimalGradientRegressor",
    "PrimalGradientSolver",
    "RandomFourierFeatures",
    "StagewiseRegression",
    "StreamClassifier",
    "StreamlearnError",
    "learner_from_state",
]
