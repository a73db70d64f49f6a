"""The feature generators GEN of 004: random Fourier features (Table 1) and feature sampling (Alg. 3)."""

from __future__ import annotations

import numpy as np
from river import base as river_base

from ..checks import check_positive
from ..errors import InvalidParameterError
from ..names import name_keys
from ..scores import frame_of

class GeneratorState:
    """A GEN's checkpoint: its parameters and what it learned from the data it first saw
    (``_FITTED``: :class:`FeatureSampler`'s feature ranking). Without the latter a restored
    sampler ranked the columns of whatever batch it was asked to predict, and the stages read
    other features. Caches that are rebuilt on demand are not state."""

    _FITTED: tuple = ()

    def export_state(self) -> dict:
        return {"class": type(self).__name__, **{k: v for k, v in vars(self).items()
                                                 if v is not None and (not k.startswith("_") or k in self._FITTED)}}

    @classmethod
    def from_state(cls, state: dict):
        fields = {k: v for k, v in state.items() if k != "class"}
        generator = cls(**{k: v for k, v in fields.items() if not k.startswith("_")})
        for name, value in fields.items():
            if name.startswith("_"):
                setattr(generator, name, np.asarray(value))
        return generator


class RandomFourierFeatures(GeneratorState, river_base.MiniBatchTransformer):
    """Random Fourier features of the Gaussian kernel ``exp(-||x - x'||² / (2 s²))`` (Rahimi &
    Recht 2007): ``z(x) = sqrt(2/m) cos(x Ω + b)`` with ``Ω ~ N(0, 1/s²)`` and ``b ~ U[0, 2π]``.

    Two uses:

    * GEN for Alg. 3 of 004 (:class:`StagewiseRegression`): called as ``gen(X, m, stage)`` on a
      dense block, ``Ω`` and ``b`` drawn per stage from ``seed`` and the stage number (a stage's
      block is reproduced exactly to predict);
    * a river transformer (``transform_one`` / ``transform_many``), so that
      ``RandomFourierFeatures(...) | GeneralizedLeastSquares()`` is a river pipeline: each input
      feature *name* gets its row of ``Ω`` from ``seed`` and the name's stable key
      (:func:`~streamlearn.names.name_keys`), drawn on first sight, so a stream may bring new
      features at any time; the outputs are features ``0 .. n_components - 1``.

    Parameters
    ----------
    bandwidth
        ``s`` of the kernel (the scale of the inputs' distances that matter).
    seed
        Seeds ``Ω`` and ``b``.
    n_components
        ``m`` of the transformer (the GEN takes ``m`` per call).

    Attributes
    ----------
    None public: ``Ω``'s rows drawn so far are a cache (a function of ``seed`` and the names).

    Examples
    --------
    >>> gen = RandomFourierFeatures(bandwidth=2.0, seed=0)
    >>> gen(np.ones((3, 5)), m=4, stage=0).shape
    (3, 4)
    >>> from river import compose
    >>> from streamlearn import GeneralizedLeastSquares
    >>> model = RandomFourierFeatures(bandwidth=1.0, n_components=50) | GeneralizedLeastSquares()
    >>> isinstance(model, compose.Pipeline), len(RandomFourierFeatures(n_components=50).transform_one({"a": 1.0}))
    (True, 50)
    """

    def __init__(self, bandwidth: float = 1.0, seed: int = 0, n_components: int = 1000):
        check_positive("bandwidth", bandwidth)
        check_positive("n_components", n_components, integer=True)
        self.bandwidth, self.seed, self.n_components = bandwidth, seed, n_components

    def __call__(self, X: np.ndarray, m: int, stage: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, stage])
        omega = rng.normal(scale=1.0 / self.bandwidth, size=(X.shape[1], m))
        shift = rng.uniform(0, 2 * np.pi, m)
        Z = X @ omega
        Z += shift
        np.cos(Z, out=Z)
        Z *= np.sqrt(2.0 / m)
        return Z

    def _projection(self, names: list) -> tuple[np.ndarray, np.ndarray]:
        """``Ω``'s rows for these feature names (``(len(names), m)``, drawn once per name) and ``b``."""
        cache = self.__dict__.setdefault("_omega", {})
        if "_shift" not in self.__dict__:
            self._shift = np.random.default_rng([self.seed, 0]).uniform(0, 2 * np.pi, self.n_components)
        missing = [name for name in dict.fromkeys(names) if name not in cache]
        for name, key in zip(missing, name_keys(missing).tolist()):
            rng = np.random.default_rng([self.seed, 1, key & ((1 << 63) - 1)])
            cache[name] = rng.normal(scale=1.0 / self.bandwidth, size=self.n_components)
        rows = np.array([cache[name] for name in names]) if names else np.zeros((0, self.n_components))
        return rows, self._shift

    def _features(self, values: np.ndarray, names: list) -> np.ndarray:
        omega, shift = self._projection(names)
        Z = values @ omega + shift
        np.cos(Z, out=Z)
        Z *= np.sqrt(2.0 / self.n_components)
        return Z

    def learn_one(self, x: dict) -> None:
        """Nothing to learn: the features are fixed by ``seed``."""

    def learn_many(self, X) -> None:
        """Nothing to learn: the features are fixed by ``seed``."""

    def transform_one(self, x: dict) -> dict:
        values = np.fromiter(x.values(), np.float64, len(x))
        return dict(enumerate(self._features(values[None, :], list(x))[0].tolist()))

    def transform_many(self, X):
        """The features of a DataFrame's rows, as a frame of its type (columns 0, 1, ...)."""
        from river.utils.dataframe import to_numpy, to_native_frame

        frame = frame_of(X)
        if frame is None:
            raise InvalidParameterError(f"transform_many takes a DataFrame, got {type(X).__name__}")
        features = self._features(to_numpy(frame), list(frame.columns))
        return to_native_frame({j: features[:, j] for j in range(features.shape[1])}, like=frame)

    def __repr__(self):
        return (f"RandomFourierFeatures(bandwidth={self.bandwidth!r}, seed={self.seed!r}, "
                f"n_components={self.n_components!r})")


class FeatureSampler(GeneratorState):
    """GEN for Alg. 3: blocks of the original features. ``order="frequency"`` takes the
    features by decreasing number of non-zero values in the data it first sees (the paper:
    fitting frequent words first gives better text models), ``"random"`` a seeded
    permutation; ``replace=True`` draws each block at random with replacement instead.
    Stage t takes block t of the order (cycling when the features run out).

    Parameters
    ----------
    order
        ``"frequency"`` or ``"random"`` (see above).
    replace
        Draw each block with replacement instead of walking the order.
    seed
        Seeds the random order and the draws.

    Attributes
    ----------
    None public: the ranking learned from the first data (checkpointed with the model).

    Examples
    --------
    >>> FeatureSampler()(np.array([[0., 1., 2.], [0., 3., 0.]]), m=2, stage=0).tolist()
    [[1.0, 2.0], [3.0, 0.0]]
    """

    _FITTED = ("_ranking",)

    def __init__(self, order: str = "frequency", replace: bool = False, seed: int = 0):
        if order not in ("frequency", "random"):
            raise InvalidParameterError(f"order must be 'frequency' or 'random', got {order!r}")
        self.order, self.replace, self.seed = order, bool(replace), seed
        self._ranking = None

    def columns(self, X: np.ndarray, m: int, stage: int) -> np.ndarray:
        """The original columns of stage ``stage``'s block."""
        d = X.shape[1]
        if self.replace:
            return np.random.default_rng([self.seed, stage]).integers(0, d, min(m, d))
        if self._ranking is None or len(self._ranking) != d:
            if self.order == "frequency":
                self._ranking = np.argsort(-np.count_nonzero(X, axis=0), kind="stable")
            else:
                self._ranking = np.random.default_rng(self.seed).permutation(d)
        start = (stage * m) % d
        return np.take(self._ranking, np.arange(start, start + min(m, d)), mode="wrap")

    def __call__(self, X: np.ndarray, m: int, stage: int) -> np.ndarray:
        return X[:, self.columns(X, m, stage)]

    def __repr__(self):
        return f"FeatureSampler(order={self.order!r}, replace={self.replace!r}, seed={self.seed!r})"


def generator_from_text(text: str):
    """A GEN written as its constructor call, as the command line gives it
    (``--param 'generator=RandomFourierFeatures(bandwidth=3.0, seed=1)'``; a bare name takes the defaults).

    >>> generator_from_text("RandomFourierFeatures(bandwidth=3.0)").bandwidth, type(generator_from_text("FeatureSampler")).__name__
    (3.0, 'FeatureSampler')
    """
    import ast

    known = {"RandomFourierFeatures": RandomFourierFeatures, "FeatureSampler": FeatureSampler}
    try:
        call = ast.parse(text.strip(), mode="eval").body
        name = call.func.id if isinstance(call, ast.Call) else call.id
        if name not in known or (isinstance(call, ast.Call) and call.args):
            raise ValueError
        keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords} if isinstance(call, ast.Call) else {}
        return known[name](**keywords)
    except (SyntaxError, ValueError, AttributeError, TypeError) as error:
        raise InvalidParameterError(f"generator {text!r}: give {' or '.join(known)}, with keyword arguments if any, e.g. "
                                    f"RandomFourierFeatures(bandwidth=3.0, seed=1){f' ({error})' if str(error) else ''}") from None

