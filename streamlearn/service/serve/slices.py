"""JSON in and out in slices: one call of a JSON encoder or decoder holds the GIL throughout (orjson
takes ~55 ms to decode a 9 MB body of 50,000 records), and while it does the event loop cannot
answer ``/healthz``. A large list is decoded and encoded :data:`SLICE_ITEMS` items per call, the
same values as one call, so the loop waits at most a slice's time."""

from __future__ import annotations

import json

import numpy as np

#: list items decoded or encoded per call of the JSON library
SLICE_ITEMS = 1000
#: a body shorter than this is decoded in one call (a slice's worth of work anyway)
SLICED_BYTES = 256 * 1024
WHITESPACE = b" \t\r\n"


def loads_in_slices(body: bytes):
    r"""``orjson.loads(body)``, the same value and the same errors, with a long top-level list
    decoded :data:`SLICE_ITEMS` items per call.

    The items are found by one NumPy scan (its loops release the GIL): a comma outside every
    string at nesting depth 1. For a valid body that is exact; an invalid one fails in some slice,
    and is then decoded whole, so that its error is orjson's own.

    >>> loads_in_slices(b'[{"x": {"a": 1}}, "b,]", [2, [3]]]')
    [{'x': {'a': 1}}, 'b,]', [2, [3]]]
    >>> body = b"[" + b",".join([rb'{"k": "a\\\"],", "m": "\\"}'] * 30000) + b"]"
    >>> import orjson; len(body) > SLICED_BYTES and loads_in_slices(body) == orjson.loads(body)
    True
    """
    import orjson

    bounds = item_bounds(body) if len(body) >= SLICED_BYTES else None
    if bounds is None:
        return orjson.loads(body)
    value = []
    try:
        for first in range(0, len(bounds) - 1, SLICE_ITEMS):
            last = min(first + SLICE_ITEMS, len(bounds) - 1)
            value.extend(orjson.loads(b"[" + body[bounds[first] + 1 : bounds[last]] + b"]"))
    except orjson.JSONDecodeError:
        return orjson.loads(body)  # raises orjson's error for the body as a whole (or decodes it)
    return value


def item_bounds(body: bytes) -> np.ndarray | None:
    """Where a top-level list's items are delimited: the ``[``, each comma between items and the
    ``]``; None for a body that is not a list (or does not end like one), decoded whole."""
    text = np.frombuffer(body, np.uint8)
    ends = np.flatnonzero(~np.isin(text, np.frombuffer(WHITESPACE, np.uint8)))
    if not len(ends) or text[ends[0]] != ord("[") or text[ends[-1]] != ord("]"):
        return None
    quote = text == ord('"')
    backslash = text == ord("\\")
    if backslash.any():  # a quote after an odd run of backslashes is inside its string
        count = np.cumsum(backslash, dtype=np.int64)
        run = count - np.maximum.accumulate(np.where(backslash, 0, count))
        quotes = np.flatnonzero(quote[1:]) + 1
        quote[quotes[run[quotes - 1] % 2 == 1]] = False
    outside = np.bitwise_xor.accumulate(quote.view(np.uint8)) == 0  # an opening quote counts as inside
    step = np.isin(text, np.frombuffer(b"[{", np.uint8)).view(np.int8) - np.isin(text, np.frombuffer(b"]}", np.uint8)).view(np.int8)
    depth = np.cumsum(step * outside, dtype=np.int32)
    if depth[ends[-1]] != 0 or not outside[ends[-1]] or depth[ends[0] : ends[-1]].min() < 1:
        return None  # the first '[' does not close at the last ']': not one list
    commas = np.flatnonzero((text == ord(",")) & outside & (depth == 1))
    return np.concatenate(([ends[0]], commas, [ends[-1]]))


def dumps_in_slices(result) -> list[bytes]:
    """``result`` as JSON (orjson's, the service's one encoder: ``default=str``, keys that are not
    text written as text, NaN as null), in chunks: a dict's list longer than :data:`SLICE_ITEMS`
    is encoded that many items per call, and the chunks are sent as they are, never joined (a
    9 MB answer copied once more held the GIL for page faults alone).

    >>> data = {"predictions": [{"prediction": i, "proba": {1: 0.5}} for i in range(2500)], "sequence": 3}
    >>> chunks = dumps_in_slices(data)
    >>> len(chunks) > 3 and json.loads(b"".join(chunks)) == json.loads(json.dumps(data))
    True
    """
    import orjson

    def dumps(value) -> bytes:
        try:
            return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS)
        except TypeError:  # an integer past 64 bits: the standard library writes it
            return json.dumps(value, default=str).encode()

    if not isinstance(result, dict) or not any(isinstance(v, list) and len(v) > SLICE_ITEMS for v in result.values()):
        return [dumps(result)]
    chunks = []
    for key, value in result.items():
        chunks.append((b"{" if not chunks else b",") + dumps(str(key)) + b":")
        if isinstance(value, list) and len(value) > SLICE_ITEMS:
            for i in range(0, len(value), SLICE_ITEMS):
                chunks.append((b"[" if i == 0 else b",") + dumps(value[i : i + SLICE_ITEMS])[1:-1])
            chunks.append(b"]")
        else:
            chunks.append(dumps(value))
    chunks.append(b"}")
    return chunks
