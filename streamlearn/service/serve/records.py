"""``POST /predict``: the records of a request body, validated as the training sources validate
them, their integer feature names read as the model knows them, and the answer."""

from __future__ import annotations

import contextlib
import math
import urllib.parse

import numpy as np

from streamlearn.connectors.records import RecordError, check_record
from streamlearn.connectors.sinks import json_key

from .slices import loads_in_slices


class BadRequest(ValueError):
    """A request the service answers with a 4xx status and this message."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_records(body: bytes) -> tuple[list, bool]:
    """The feature dicts of a ``/predict`` body and whether it held a list."""
    import orjson  # ~3x the standard library's speed: a 1,000-record body is megabytes of text

    try:
        obj = loads_in_slices(body)  # NaN and Infinity are not JSON: refused
    except orjson.JSONDecodeError as error:
        raise BadRequest(400, f"the body is not JSON: {error}") from None
    many = isinstance(obj, list)
    records = obj if many else [obj]
    if many and not records:
        raise BadRequest(400, "an empty list of records")
    X = []
    for i, record in enumerate(records):
        try:
            x, _, _ = check_record(record, labelled=False)  # (a weight is for learning: a prediction ignores it)
        except RecordError as error:
            raise BadRequest(422, f"record {i}: {error.reason}: {error.message}") from None
        except RecursionError:  # a value nested a thousand deep: its message cannot even be written
            raise BadRequest(400, f"record {i} nests too deeply to be a record") from None
        X.append(x)
    return X, many


def integer_names(X: list, model):
    """The records with each key that is the decimal text of an integer (``"17"``) read as that
    integer when the model knows the integer feature and not the text: JSON keys are strings,
    and a model learned from LIBSVM, arrays or msgpack has integer feature names. For a model
    whose every name is an integer the records come back as one CSR matrix over those names
    (built with NumPy, no dict per record: the service's batch path)."""
    features = model.feature_space
    if features.n_bits is not None:  # hashing: every name has a column, nothing tells them apart
        return X
    if features.all_integer_names:
        rows = integer_csr(X)
        if rows is not None:
            return rows
    texts = sorted(k for k in {k for x in X for k in x} if integer_text(k))
    if not texts:
        return X
    as_text, as_int = features.columns(texts, grow=False), features.columns([int(k) for k in texts], grow=False)
    integer = {k for k, t, i in zip(texts, as_text.tolist(), as_int.tolist()) if t < 0 <= i}
    return [{int(k) if k in integer else k: v for k, v in x.items()} for x in X] if integer else X


POWERS_OF_TEN = 10 ** np.arange(19, dtype=np.int64)


def integer_text(key) -> bool:
    """Whether a JSON key is the canonical decimal text of a 64-bit integer (``"17"``, ``"-3"``;
    not ``"²"``, ``"017"`` or a number past int64, which stay text names)."""
    if not isinstance(key, str) or not key.isascii() or not 0 < len(key.lstrip("-")) <= 19 or not key.lstrip("-").isdigit():
        return False
    value = int(key)
    return str(value) == key and -(1 << 63) <= value < (1 << 63)


def integer_csr(X: list):
    """Records whose keys are all decimal integers' text as a CSR matrix over those integers
    (``None`` if a key is not one, or is negative: the dict path then decides)."""
    import scipy.sparse

    keys = [k for x in X for k in x]  # JSON keys: strings
    joined = "".join(keys)
    if not keys or not joined.isascii():
        return None
    try:
        indices = np.fromiter(map(int, keys), np.int64, len(keys))
    except (ValueError, OverflowError):
        return None
    # int() also takes "017", "+3", " 3", "3_0": each is longer than the integer's own text, so the
    # texts are all canonical exactly when their lengths add up to the canonical lengths' sum
    digits = np.maximum(1, np.searchsorted(POWERS_OF_TEN, indices, side="right"))
    if indices.min() < 0 or int(digits.sum()) != len(joined):
        return None
    data = np.fromiter((v for x in X for v in x.values()), np.float64, len(keys))
    indptr = np.zeros(len(X) + 1, np.int64)
    np.cumsum([len(x) for x in X], out=indptr[1:])
    if indices.max() >= np.iinfo(np.int32).max:  # a column past what a CSR matrix indexes: the dict path
        return None
    width = int(indices.max()) + 1
    return scipy.sparse.csr_matrix((data, indices, indptr), shape=(len(X), width))


def predict(holder, body: bytes, query: str = "") -> tuple[int, dict]:
    """``POST /predict``'s answer ``(status, JSON object)`` to a request body (raises
    :class:`BadRequest`); whatever HTTP server carries it."""
    loaded = holder.current  # this request's model, whatever a reload does meanwhile
    if loaded is None:
        raise BadRequest(503, "no model loaded yet")
    X, many = parse_records(body)
    proba = urllib.parse.parse_qs(query).get("proba", ["0"])[0] not in ("0", "", "false")
    with getattr(loaded, "lock", None) or contextlib.nullcontext():  # a live model: not while a batch is learned
        model, sequence = loaded.model, loaded.sequence
        X = integer_names(X, model)
        out = [{"prediction": p} for p in model.predict_many(X).tolist()]
        probabilities = model.predict_proba_many(X).to_dict(orient="records") if proba else None
    for i, row in enumerate(out):
        if probabilities is not None:
            row["proba"] = {json_key(c): (p if math.isfinite(p) else None) for c, p in probabilities[i].items()}
        row["sequence"] = sequence
    return 200, {"predictions": out} if many else out[0]
