"""The service's JSON in slices (:mod:`streamlearn.service.serve.slices`): a large body decodes to
what one ``orjson.loads`` gives, and fails where it fails; a large answer's chunks join to the
JSON of the whole."""

from __future__ import annotations

import json

import orjson
import pytest

from streamlearn.service.serve.slices import SLICED_BYTES, SLICE_ITEMS, dumps_in_slices, loads_in_slices

#: records whose strings hold what the item scan must see through: commas, brackets, quotes after
#: escaped backslashes, unicode escapes, and values nested inside lists
TRICKY = [rb'{"x": {"a,]": 1.5, "b\"[": -2}}', rb'{"x": {"c\\\\": 0.25}, "y": "\u005d,"}', rb'[1, [2, {"z": [3]}]]',
          rb'"\\\\\"]"', rb' { "x" : { } } ']


def big_list(items: list[bytes], separator: bytes = b",") -> bytes:
    repeats = SLICED_BYTES // sum(map(len, items)) + 1
    return b"  \n[" + separator.join(items * repeats) + b"]\n "


def test_a_large_valid_body_decodes_to_the_same_value_in_slices():
    body = big_list(TRICKY, b" ,\n ")
    assert len(body) > SLICED_BYTES and len(orjson.loads(body)) > 2 * SLICE_ITEMS
    assert loads_in_slices(body) == orjson.loads(body)


@pytest.mark.parametrize("broken", [
    lambda b: b[:-3] + b",]\n ",  # a trailing comma
    lambda b: b.replace(b'}, "y"', b'} "y"', 1),  # a missing comma inside a record
    lambda b: b.replace(b']],"', b']] "', 1),  # a missing comma between records
    lambda b: b + b"[]",  # a second list after the first
    lambda b: b[:-3] + b'"]\n ',  # an unterminated string swallowing the end
    lambda b: b.replace(b"}},{", b"}},,{", 1),  # an empty item
    lambda b: b.replace(b"1.5", b"NaN", 1),  # not JSON
])
def test_a_large_broken_body_fails_as_one_orjson_call_does(broken):
    body = broken(big_list(TRICKY))
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(body)
    with pytest.raises(orjson.JSONDecodeError):
        loads_in_slices(body)


def test_a_large_object_or_scalar_body_is_decoded_whole():
    body = b'{"x": {' + b",".join(b'"f%d": %d' % (i, i) for i in range(SLICED_BYTES // 8)) + b"}}"
    assert len(body) > SLICED_BYTES and loads_in_slices(body) == orjson.loads(body)


def test_the_chunks_of_a_large_answer_join_to_the_json_of_the_whole():
    answer = {"predictions": [{"prediction": i % 3, "proba": {0: 0.25, "b": None}} for i in range(3 * SLICE_ITEMS + 7)],
              "sequence": 4, "label": (1, 2)}
    chunks = dumps_in_slices(answer)
    assert len(chunks) > 3 and json.loads(b"".join(chunks)) == json.loads(json.dumps(answer, default=str))
    small = {"prediction": 10**30, "sequence": 1}  # past 64 bits: the standard library's encoder writes it
    assert json.loads(b"".join(dumps_in_slices(small))) == small
