"""streamlearn — multi-class linear classifiers learned continuously from a stream.

Every learner is a ``river.base.MiniBatchClassifier`` (``learn_one`` / ``learn_many`` /
``predict_one`` / ``predict_proba_one`` / ``predict_many`` / ``predict_proba_many``).

>>> from streamlearn import MulticlassSVM
>>> model = MulticlassSVM()
>>> model.learn_one({"word": 1.0}, "spam")
>>> model.predict_one({"word": 1.0})
'spam'
"""

from .base import StreamClassifier
from .errors import InvalidInputError, InvalidParameterError, StreamlearnError
from .features import FeatureSpace, LabelSpace
from .mcid import (
    MulticlassLogisticRegression,
    MulticlassPerceptron,
    MulticlassSVM,
    OneVsRestLogisticRegression,
    OneVsRestPegasos,
)
from .leastsquares import (
    CalibratedLeastSquares,
    FeatureSampler,
    GeneralizedLeastSquares,
    RandomFourierFeatures,
    StagewiseRegression,
)
from .pgs import MulticlassPGS, PrimalGradientRegressor, PrimalGradientSolver

__version__ = "0.1.0"

LEARNERS = {
    cls.__name__: cls
    for cls in (
        MulticlassSVM,
        MulticlassLogisticRegression,
        MulticlassPerceptron,
        OneVsRestPegasos,
        OneVsRestLogisticRegression,
        PrimalGradientSolver,
        MulticlassPGS,
        GeneralizedLeastSquares,
        CalibratedLeastSquares,
        StagewiseRegression,
    )
}


#: regressors (river ``MiniBatchRegressor``s); the ``streamlearn`` command trains the classifiers of LEARNERS
REGRESSORS = {"PrimalGradientRegressor": PrimalGradientRegressor}


def learner_from_state(state: dict) -> StreamClassifier:
    """Rebuild any streamlearn learner from its ``export_state()`` output (plain arrays and
    metadata: what a checkpoint stores).

    >>> from streamlearn import MulticlassSVM, learner_from_state
    >>> model = MulticlassSVM()
    >>> model.learn_one({"a": 1.0}, "x"); model.learn_one({"b": 1.0}, "y")
    >>> restored = learner_from_state(model.export_state())
    >>> restored.predict_one({"b": 1.0}), restored.classes == model.classes
    ('y', True)
    """
    name = state.get("class")
    if name not in LEARNERS:
        raise ValueError(f"unknown learner class {name!r}; known: {', '.join(sorted(LEARNERS))}")
    return LEARNERS[name].from_state(state)


__all__ = [
    "CalibratedLeastSquares",
    "FeatureSampler",
    "FeatureSpace",
    "GeneralizedLeastSquares",
    "InvalidInputError",
    "InvalidParameterError",
    "LEARNERS",
    "REGRESSORS",
    "LabelSpace",
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
