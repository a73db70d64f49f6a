"""Parsing, formats and file/stdin sources (positions, resume, compression, bad records)."""

from __future__ import annotations

import bz2
import functools
import gc
import gzip
import io
import json
import lzma
import os
import struct
import threading
import time

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamlearn.connectors import FileSource, SourceError, StdinSource, open_source
from streamlearn.connectors.formats import CsvDecoder, JsonLinesDecoder, MsgpackDecoder, guess_format
from streamlearn.connectors.libsvm import parse_libsvm_bytes, read_libsvm
from helpers import libsvm_lines


# ----------------------------------------------------------------- LIBSVM parser
def test_parser_matches_sklearn_on_the_shared_datasets(datasets_dir):
    from sklearn.datasets import load_svmlight_file

    for name in ("news20.bz2", "sector.scale.bz2", "letter.scale.bz2"):
        raw = bz2.open(datasets_dir / name).read()
        chunk = parse_libsvm_bytes(raw)
        X, y = load_svmlight_file(io.BytesIO(raw), zero_based=True)
        width = max(X.shape[1], chunk.X.shape[1])
        ours, theirs = chunk.X.tocsr(), X.copy()
        ours.resize(ours.shape[0], width)
        theirs.resize(theirs.shape[0], width)
        assert not chunk.errors
        assert (ours != theirs).nnz == 0, name  # every value bit for bit
        assert np.array_equal(np.asarray(chunk.labels, float), y)


# each value is parsed at the end of its line, and followed by more of the line (a comment)
ROADS = {"at the line's end": "", "followed by a comment": " # " + "x" * 40}


def parsed_value(text: str, road: str) -> float:
    got = parse_libsvm_bytes(f"1 7:{text}{ROADS[road]}\n".encode()).X.data
    assert len(got) == 1, text
    return got[0]


@functools.lru_cache(maxsize=1)
def eight_digit_step():
    """The parser's inline eight-byte step, compiled once as a function of its own."""
    from numba import njit

    from streamlearn.kernels.decimal import digits8

    return njit(lambda buf, k: digits8(buf, k))


def leading_digits(data: bytes) -> tuple[int, int]:
    """Plain reference of the parser's eight-byte step: value and count of the leading digits."""
    count = next((i for i, c in enumerate(data[:8]) if not 48 <= c <= 57), min(8, len(data)))
    return (int(data[:count]) if count else 0), count


@settings(max_examples=500, deadline=None)
@given(st.binary(min_size=8, max_size=12) | st.text("0123456789:. -+e#x\n\t", min_size=8, max_size=12).map(str.encode))
def test_eight_digit_step_matches_a_plain_reference(data):
    step = eight_digit_step()
    array = np.frombuffer(data, np.uint8)
    for k in range(len(data) - 7):
        assert tuple(int(v) for v in step(array, k)) == leading_digits(data[k:]), (data, k)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 10**18 - 1), st.sampled_from(["", " # comment after it"]), st.integers(0, 9))
def test_indices_of_any_length_parse_with_or_without_eight_bytes_after_them(index, tail, zeros):
    text = f"1 {'0' * zeros}{index}:0.25{tail}\n".encode()
    chunk = parse_libsvm_bytes(text)
    if zeros + len(str(index)) > 18:
        assert [e.reason for e in chunk.errors] == ["malformed"]
    else:
        assert chunk.X.indices.tolist() == [index] and chunk.X.data.tolist() == [0.25]


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, width=64))
def test_parsed_values_equal_python_float_bit_for_bit(value):
    from streamlearn.kernels.codes import LARGEST_VALUE

    for text in (repr(value), f"{value:.17g}", f"{value:.6e}", f"{value:.3f}", f"{value:.7f}", f"{value:.6g}"):
        for road in ROADS:
            if abs(float(text)) > LARGEST_VALUE:  # refused: its square leaves the float range
                chunk = parse_libsvm_bytes(f"1 7:{text}{ROADS[road]}\n".encode())
                assert [e.reason for e in chunk.errors] == ["non-finite"], (text, road)
                continue
            assert struct.pack("<d", parsed_value(text, road)) == struct.pack("<d", float(text)), (text, road)


@pytest.mark.parametrize("text", ["5.", ".5", "-0.0", "007", "0.000000000000000000001", "9007199254740992", "9007199254740993",
                                  "123456789012345678", "1234567890123456789", "1e22", "1e23", "3.3e-22", "3.3e-23", "+2.5E+3",
                                  "123456789012345", "1234567890123456", "0.123456789012345", "-0.0000000000000001",
                                  "1e0000001", "1E+0000022", "2.5e-0000003", "-0", "+.5", "1234567.1234567", "12345678.1",
                                  "1.12345678", "9999999.9999999", "0.403922", "-7"])
def test_parsed_edge_values_equal_python_float(text):
    """Around the compiled paths' limits: 18 digits, a 2**53 mantissa, 10**±22, signs, bare points."""
    for road in ROADS:
        assert struct.pack("<d", parsed_value(text, road)) == struct.pack("<d", float(text)), (text, road)


def _slow_values(text: bytes) -> int:
    """How many values of a LIBSVM buffer the compiled pass leaves to Python's float."""
    from streamlearn.libsvm import POW10
    from streamlearn.kernels import compiled

    return int(compiled("text").parse_libsvm(np.frombuffer(text, np.uint8), POW10, False, False)[-1])


def test_17_digit_values_are_decided_in_the_compiled_pass_bit_for_bit():
    """Python's repr of floats (17 significant digits), and random 1-18 digit decimals with
    exponents: every value equals float(text), and almost none is left to Python's float."""
    rng = np.random.default_rng(11)
    floats = rng.random(3000) * 10.0 ** rng.integers(-300, 150, 3000)  # larger values are refused (LARGEST_VALUE)
    texts = [repr(float(v)) for v in floats]
    for _ in range(3000):
        digits = "".join(map(str, rng.integers(0, 10, int(rng.integers(1, 19)))))
        point = int(rng.integers(0, len(digits) + 1))
        texts.append(f"{digits[:point] or '0'}.{digits[point:]}e{int(rng.integers(-280, 132))}")
    text = "".join(f"1 1:{t}\n" for t in texts).encode()
    got = parse_libsvm_bytes(text).X.data
    assert got.tobytes() == np.array([float(t) for t in texts]).tobytes()
    assert _slow_values(text) <= 4  # Eisel-Lemire's rare undecided cases (as in the test below), of 6,000


def test_eisel_lemire_against_exact_rational_rounding():
    """The kernel (streamlearn.kernels.decimal.eisel_lemire) against the reference: the exact
    rational m * 10**e, which Python's Fraction rounds correctly to a float; undecided cases
    (the kernel's fallback) are rare."""
    from fractions import Fraction

    from streamlearn.kernels.decimal import eisel_lemire

    rng = np.random.default_rng(5)
    undecided = 0
    for _ in range(4000):
        mantissa = int(rng.integers(1, 10**int(rng.integers(1, 19)), dtype=np.uint64))
        exponent = int(rng.integers(-300, 290))
        value, decided = eisel_lemire(np.uint64(mantissa), exponent)
        if decided:
            assert struct.pack("<d", value) == struct.pack("<d", float(Fraction(mantissa) * Fraction(10) ** exponent)), (mantissa, exponent)
        undecided += not decided
    assert undecided <= 4
    assert eisel_lemire(np.uint64(5), -324) == (0.0, False)  # a subnormal: left to the exact fallback


@pytest.mark.parametrize("text, reason", [
    (b"1 1:nan", "non-finite"), (b"1 1:inf", "non-finite"), (b"1 1:-Infinity", "non-finite"), (b"1 1:1e999", "non-finite"),
    (b"1 1:1e151", "non-finite"), (b"1 1:-2e150", "non-finite"), (b"1 1:1 1:2", "duplicate-feature"),
    (b"1 1:abc", "malformed"), (b"1 1:", "malformed"), (b"1 x:2", "malformed"), (b"1 1:2:3", "malformed"), (b"1 1 2", "malformed"),
    (b"1:2 3:4", "missing-label"), (b"7", "empty-features"), (b"7  # only a comment", "empty-features"),
])
def test_bad_lines_are_reported_with_their_reason(text, reason):
    # the bad entry at a line's end, and followed by more entries (which would give the lines
    # without features some)
    for tail in (b"",) if reason == "empty-features" else (b"", b"".join(b" %d:1" % j for j in range(2, 14))):
        chunk = parse_libsvm_bytes(b"2 1:1\n" + text + tail + b"\n3 2:1\n")
        assert [(e.line, e.reason) for e in chunk.errors] == [(1, reason)], tail
        assert chunk.labels == [2, 3] and chunk.X.shape[0] == 2


def test_labels_comments_blank_lines_and_zero_based_indices():
    chunk = parse_libsvm_bytes(b"# header\n\n+1 0:1 5:2 # c\r\nspam 3:1e-3\n-1 2:.5\n1.5 1:1")
    assert chunk.labels == [1, "spam", -1, "1.5"]
    assert chunk.lines.tolist() == [2, 3, 4, 5]
    assert chunk.X.toarray().tolist()[0] == [1, 0, 0, 0, 0, 2]
    assert chunk.X.toarray()[1, 3] == 1e-3 and chunk.X.toarray()[2, 2] == 0.5


def test_read_libsvm_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.svm"
    path.write_text("1 1:1\n2 2:nan\n")
    with pytest.raises(ValueError, match="line 2: non-finite"):
        read_libsvm(path)


# ------------------------------------------------------------------- formats
def test_jsonl_decoder_validates_each_record():
    text = b"\n".join([
        b'{"x": {"a": 1, "b": 2.5}, "y": "cat"}', b'{"x": {"a": NaN}, "y": "cat"}', b'{"x": {"a": "1"}, "y": 1}',
        b'{"x": {"a": 1}}', b'{"x": {}, "y": 2}', b'[1, 2]', b'{"x": {"a": 1}, "y": [1]}', b'{"x": {"b": 3}, "y": 2}',
    ]) + b"\n"
    batch = JsonLinesDecoder(labelled=True).decode(text, 10, 1000, "f.jsonl")
    assert batch.X == [{"a": 1, "b": 2.5}, {"b": 3}] and list(batch.y) == ["cat", 2]
    assert [(d.position["line"], d.reason) for d in batch.dead] == [
        (12, "non-finite"), (13, "non-numeric"), (14, "missing-label"), (15, "empty-features"), (16, "malformed"), (17, "bad-label")]
    assert batch.dead[0].position["offset"] == 1000 + len(b'{"x": {"a": 1, "b": 2.5}, "y": "cat"}\n')
    assert batch.locate(1)["line"] == 18
    unlabelled = JsonLinesDecoder(labelled=False).decode(b'{"x": {"a": 1}}\n', 0, 0, "f")
    assert unlabelled.y == [None] and not unlabelled.dead


def test_jsonl_decoder_dead_letters_what_json_cannot_turn_into_a_record():
    """Nesting deeper than Python's recursion limit (json raises RecursionError) and an integer
    value beyond the float range (json gives an int, float() raises OverflowError) used to
    escape the decoder and stop the daemon."""
    text = b"[" * 100_000 + b'\n{"x": {"a": 1' + b"0" * 400 + b'}, "y": 1}\n{"x": {"a": 1}, "y": 100000000000000000000}\n'
    batch = JsonLinesDecoder().decode(text, 0, 0, "f.jsonl")
    assert [(d.position["line"], d.reason) for d in batch.dead] == [(1, "malformed"), (2, "non-finite")]
    assert "401 digits, too large for a float" in batch.dead[1].message
    assert batch.X == [{"a": 1}] and list(batch.y) == [10**20]  # a big label is a label (checkpoints hold it)


def test_csv_decoder_header_label_column_and_empty_cells():
    text = b"f1,label,f2\n1.5,cat,2\n,dog,3\nx,cat,1\n1,cat\n"
    decoder = CsvDecoder()
    batch = decoder.decode(text, 0, 0, "f.csv")
    assert batch.X == [{"f1": 1.5, "f2": 2.0}, {"f2": 3.0}] and batch.y == ["cat", "dog"]
    assert [(d.position["line"], d.reason) for d in batch.dead] == [(4, "non-numeric"), (5, "malformed")]
    by_index = CsvDecoder(label_column=0).decode(b"y,a\n3,1\n", 0, 0, "f.csv")
    assert list(by_index.y) == [3] and by_index.X == [{"a": 1.0}]
    odd = CsvDecoder().decode("a,label\n1,+-5\n1,²\n1,".encode() + b"9" * 5000 + b"\n1,-7\n", 0, 0, "f.csv")
    assert list(odd.y) == ["+-5", "²", -7] and [d.reason for d in odd.dead] == ["label-too-long"]  # int() raised on them
    with pytest.raises(ValueError, match="the CSV header names 'a' more than once"):
        CsvDecoder().decode(b"a,label,a\n1,x,2\n", 0, 0, "f.csv")
    with pytest.raises(ValueError, match="not in the CSV header"):
        CsvDecoder(label_column="nope").decode(b"a,b\n1,2\n", 0, 0, "f.csv")


def test_msgpack_decoder_bad_records_and_undecodable_tail():
    good = [msgpack.packb({"x": {"a": float(i)}, "y": i % 2}) for i in range(1, 4)]
    bad = msgpack.packb({"x": {"a": float("inf")}, "y": 1})
    data = good[0] + bad + good[1] + good[2] + b"\xc1\xc1 garbage"
    batch, consumed, n = MsgpackDecoder().decode(data, True, 0, 0, "f.msgpack", 100)
    assert list(batch.y) == [1, 0, 1] and consumed == len(data) and n == 4
    assert [d.reason for d in batch.dead] == ["non-finite", "undecodable"]
    assert batch.dead[1].record == b"\xc1\xc1 garbage"


def test_guess_format():
    assert [guess_format(p) for p in ("a.svm.bz2", "news20.bz2", "x.csv.gz", "r.jsonl", "m.msgpack.xz", "sector.t.scale",
                                      "wine.data", "notes.txt")] == [
        "libsvm", None, "csv", "jsonl", "msgpack", "libsvm", None, None]


@pytest.mark.parametrize(("content", "expected"), [
    (b"1 3:0.5 7:1\n2 1:1\n", "libsvm"),
    (b"3:11 4:16 9:2\n", "libsvm"),  # unlabelled
    (b"-1 qid:3 1:0.5 # comment\n", "libsvm"),
    (b'{"x": {"a": 1}, "y": 2}\n', "jsonl"),
    (b"\xef\xbb\xbfalcohol,malic,cultivar\n14.2,1.7,1\n", "csv"),
    (b"a;b;label\n1;2;x\n", "csv"),
    (b"a\tb\tlabel\n1\t2\tx\n", "csv"),
    (msgpack.packb({"x": {"a": 1}, "y": 1}), "msgpack"),
    (b"", None),
    (b"  \n\n", None),
])
def test_sniff_format_tells_the_formats_apart(content, expected):
    from streamlearn.connectors.formats import sniff_format

    assert sniff_format(content) == expected


@pytest.mark.parametrize("content", [b"\x00\x01\x02binary\x00", b"just some prose\nwith no structure\n"])
def test_sniff_format_names_what_it_cannot_read(content):
    from streamlearn.connectors.formats import UnknownFormat, sniff_format

    with pytest.raises(UnknownFormat, match="binary data|cannot tell the format"):
        sniff_format(content, "file 'x'")


def test_each_file_is_read_in_its_own_format(tmp_path):
    """``train a.svm b.jsonl``: the second file was parsed as LIBSVM (every record dead)."""
    (tmp_path / "a.svm").write_text("1 1:1\n2 2:1\n")
    (tmp_path / "b.jsonl").write_text('{"x": {"1": 1}, "y": 1}\n')
    (tmp_path / "c.data").write_text("f1;f2;class\n0.5;1;3\n")
    source = FileSource([str(tmp_path / n) for n in ("a.svm", "b.jsonl", "c.data")])
    assert source.formats == ["libsvm", "jsonl", "csv"]
    batches = [b for b in source if len(b) or b.dead]
    assert [len(b) for b in batches] == [2, 1, 1] and not any(b.dead for b in batches)
    assert batches[2].X == [{"f1": 0.5, "f2": 1.0}] and list(batches[2].y) == [3]


def test_a_csv_without_a_label_column_is_refused_before_reading(tmp_path):
    path = tmp_path / "wine.csv"
    path.write_text("alcohol,malic,cultivar\n14.2,1.7,1\n")
    with pytest.raises(SourceError, match="no label column.*--label-column"):
        FileSource([str(path)])
    assert [list(b.y) for b in FileSource([str(path)], label_column="cultivar") if len(b)] == [[1]]
    assert [b.X for b in FileSource([str(path)], labelled=False) if len(b)] == [[{"alcohol": 14.2, "malic": 1.7,
                                                                                  "cultivar": 1.0}]]


def test_stdin_format_is_sniffed_from_the_stream(tmp_path):
    csv = b"pixel1,pixel2,target\n0,16,3\n4,0,1\n"
    batches = [b for b in StdinSource(stream=Trickle(csv, 5)) if len(b) or b.dead]
    assert [list(b.y) for b in batches] == [[3, 1]] and not batches[0].dead


# ------------------------------------------------------------------- sources
@pytest.mark.parametrize("opener, suffix", [(open, ""), (gzip.open, ".gz"), (bz2.open, ".bz2"), (lzma.open, ".xz")])
def test_file_source_reads_compressed_files_in_batches(tmp_path, opener, suffix):
    text = ("\n".join(libsvm_lines(250)) + "\n").encode()
    path = tmp_path / f"data.svm{suffix}"
    with opener(path, "wb") as f:
        f.write(text)
    batches = [b for b in FileSource([str(path)], batch_records=64) if len(b)]
    assert [len(b) for b in batches] == [64, 64, 64, 58]
    whole = parse_libsvm_bytes(text)
    got = [label for b in batches for label in b.y]
    assert got == whole.labels
    assert batches[-1].position["offset"] == len(text)


@pytest.mark.parametrize("compress, suffix", [(gzip.compress, ".gz"), (lzma.compress, ".xz")])
def test_a_truncated_compressed_file_keeps_its_intact_records_and_the_next_file_is_read(tmp_path, compress, suffix):
    """A truncated .gz/.xz used to stop the daemon (EOFError). Now every complete line before
    the cut is a record, the cut line (``2 1:0.14`` of ``2 1:0.1484 ...`` would pass for one) and
    the rest are one dead letter at the cut, and the next file is read."""
    text = ("\n".join(libsvm_lines(4000)) + "\n").encode()
    packed = compress(text)
    broken, after = tmp_path / f"a.svm{suffix}", tmp_path / "b.svm"
    broken.write_bytes(packed[: len(packed) // 2])
    after.write_bytes(b"\n".join(text.split(b"\n")[:3]) + b"\n")
    batches = list(FileSource([str(broken), str(after)], batch_records=500))
    got = [(b.locate(i)["source"], b.locate(i)["line"]) for b in batches for i in range(len(b))]
    dead = [d for b in batches for d in b.dead]
    assert len(dead) == 1 and dead[0].reason == "undecodable" and dead[0].position["source"] == str(broken)
    cut = dead[0].position["line"] - 1  # complete lines before the cut
    salvaged = text[: dead[0].position["offset"]]
    assert 0 < cut < 4000 and salvaged.count(b"\n") == cut and text[len(salvaged):].startswith(dead[0].record)
    assert got == [(str(broken), n) for n in range(1, cut + 1)] + [(str(after), n) for n in (1, 2, 3)]
    damaged = next(b for b in batches if b.dead)  # a checkpoint right after it resumes with the next file
    resumed = FileSource([str(broken), str(after)], batch_records=500)
    resumed.seek(damaged.position)
    after_resume = list(resumed)
    assert not any(b.dead for b in after_resume)  # the dead letter is not written a second time
    assert [(b.locate(i)["source"], b.locate(i)["line"]) for b in after_resume for i in range(len(b))] == [
        (str(after), n) for n in (1, 2, 3)]


def test_a_corrupt_bz2_file_is_one_dead_letter(tmp_path):
    path = tmp_path / "a.svm.bz2"
    path.write_bytes(bz2.compress(b"1 1:1\n" * 100)[:40] + b"not bz2 at all")
    batches = list(FileSource([str(path)]))
    assert sum(len(b) for b in batches) == 0 and [d.reason for b in batches for d in b.dead] == ["undecodable"]


def test_file_source_resumes_at_every_position_and_refuses_a_changed_file(tmp_path):
    lines = libsvm_lines(100)
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"part{i}.svm")
        paths[-1].write_text("\n".join(lines[50 * i : 50 * (i + 1)]) + "\n")
    source = FileSource(str(tmp_path / "part*.svm"), batch_records=7, passes=2)
    assert source.paths == [str(p) for p in paths]
    full = [(b.position, list(b.y)) for b in source]
    labels = [y for _, ys in full for y in ys]
    assert len(labels) == 200
    for k, (position, _) in enumerate(full):
        resumed = FileSource(str(tmp_path / "part*.svm"), batch_records=7, passes=2)
        resumed.seek(position)
        rest = [y for b in resumed for y in b.y]
        assert rest == [y for _, ys in full[k + 1 :] for y in ys], k
    paths[0].write_text("\n".join(lines[1:50]) + "\n")
    changed = FileSource(str(tmp_path / "part*.svm"), batch_records=7, passes=2)
    changed.seek(full[2][0])
    with pytest.raises(SourceError, match="does not start with"):
        list(changed)


class Trickle(io.RawIOBase):
    """Hands out ``size`` bytes per read, like a slow pipe."""

    def __init__(self, data, size):
        self.data, self.size = data, size

    def readable(self):
        return True

    def read1(self, n=-1):
        piece, self.data = self.data[: self.size], self.data[self.size :]
        return piece


def _piped(chunks, pause: float):
    """A read end of a pipe that a thread writes ``chunks`` into, ``pause`` seconds apart."""
    import threading

    read_end, write_end = os.pipe()

    def write():
        with os.fdopen(write_end, "wb", buffering=0) as f:
            for chunk in chunks:
                f.write(chunk)
                time.sleep(pause)

    threading.Thread(target=write, daemon=True).start()
    return os.fdopen(read_end, "rb", buffering=0)


def test_stdin_hands_over_what_it_gathered_when_the_stream_pauses():
    """A pipe whose writer pauses: each line is learned as soon as it is complete, not held
    back until a batch is full."""
    lines = [b"1 1:1\n", b"2 2:1\n", b"1 1:2\n"]
    start = time.monotonic()
    arrivals = []
    for batch in StdinSource(stream=_piped(lines, 0.6), batch_records=100):
        if len(batch):
            arrivals.append((list(batch.y), time.monotonic() - start))
    assert [y for y, _ in arrivals] == [[1], [2], [1]]
    assert arrivals[0][1] < 0.5  # not held back for the rest of the batch


def test_stdin_batches_are_cut_by_count_whatever_sizes_the_reads_bring(monkeypatch):
    """Reads of any size, the same batches: a resumed job cuts its batches (and so places its
    checkpoints) where an uninterrupted one did."""
    import streamlearn.connectors.decoding

    # a pause of the writer cuts a batch short by design (tested on its own): a loaded machine must not pause it here
    monkeypatch.setattr(streamlearn.connectors.decoding, "GATHER_SECONDS", 30.0)
    text = b"".join(f"{i % 3} {i % 7 + 1}:1\n".encode() for i in range(1000))
    cuts = [0, *sorted(np.random.default_rng(1).choice(len(text), 60, replace=False)), len(text)]
    chunks = [text[a:b] for a, b in zip(cuts, cuts[1:])]
    sizes = [len(b) for b in StdinSource(stream=_piped(chunks, 0.001), batch_records=64) if len(b)]
    assert sizes == [64] * 15 + [40]


@pytest.mark.parametrize("size", [5, 13, 64])
def test_stdin_format_is_told_whatever_line_the_first_reads_end_in(size):
    """The format is sniffed from the first reads, whose last line a pipe may cut anywhere:
    "0 1:" is no LIBSVM line, and it made stdin fail to start, by chance of the read sizes."""
    text = b"".join(f"{i % 3} {i % 7 + 1}:1\n".encode() for i in range(100))
    assert sum(len(b) for b in StdinSource(stream=Trickle(text, size), batch_records=64)) == 100


def test_stdin_source_checks_the_replayed_prefix():
    text = b"1 1:1\n2 2:1\n1 1:2\n"
    batches = list(StdinSource(stream=Trickle(text, 6), batch_records=1))
    assert [list(b.y) for b in batches if len(b)] == [[1], [2], [1]]
    resumed = StdinSource(stream=Trickle(text, 6))
    resumed.seek(batches[1].position)
    assert [y for b in resumed for y in b.y] == [1]
    other = StdinSource(stream=Trickle(b"9 9:9\n" + text, 6))
    other.seek(batches[1].position)
    with pytest.raises(SourceError, match="stdin does not start with"):
        list(other)


@pytest.mark.parametrize(("suffix", "body"), [
    (".svm", "1 1:1\n2 2:1 3:0.5\n1 1:2\n"),
    (".csv", "a,label,b\n1,cat,0\n0,dog,2\n3,cat,1\n"),
    (".jsonl", '{"x": {"a": 1}, "y": 1}\n{"x": {"b": 2}, "y": "two"}\n{"x": {"a": 3}, "y": 1}\n'),
])
def test_a_utf8_byte_order_mark_is_skipped_and_counted(tmp_path, suffix, body):
    """Spreadsheet exports start with a BOM: it made LIBSVM's first label "\\ufeff1" and the first
    CSV column "\\ufeffa". It is skipped, counted in the offsets (resume re-reads it), and a pipe
    may hand it over a byte at a time."""
    plain, marked = tmp_path / f"plain{suffix}", tmp_path / f"marked{suffix}"
    plain.write_bytes(body.encode())
    marked.write_bytes(b"\xef\xbb\xbf" + body.encode())
    def rows(X):  # LIBSVM batches as SciPy matrices, to compare them
        return X.tocsr() if hasattr(X, "tocsr") else X

    expected = [(rows(b.X), list(b.y)) for b in FileSource([str(plain)], batch_records=1) if len(b)]
    batches = [b for b in FileSource([str(marked)], batch_records=1)]
    got = [(rows(b.X), list(b.y)) for b in batches if len(b)]
    assert len(got) == 3 and all(list(a[1]) == list(b[1]) for a, b in zip(expected, got))
    assert all((a[0] != b[0]).nnz == 0 if hasattr(a[0], "nnz") else a[0] == b[0] for a, b in zip(expected, got))
    assert [b.locate(0)["offset"] for b in batches if len(b)][0] == (3 if suffix != ".csv" else 3 + len("a,label,b\n"))
    for k, batch in enumerate([b for b in batches if len(b)]):
        resumed = FileSource([str(marked)], batch_records=1)
        resumed.seek(batch.position)
        assert [list(b.y) for b in resumed if len(b)] == [ys for _, ys in got][k + 1 :], k
    piped = [list(b.y) for b in StdinSource(fmt=suffix.strip("."), stream=Trickle(marked.read_bytes(), 1), batch_records=1)
             if len(b)]
    assert piped == [ys for _, ys in got]


def test_open_source_chooses_the_source(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps({"x": {"a": 1}, "y": 1}) + "\n")
    assert isinstance(open_source([str(path)]), FileSource)
    assert open_source([str(path)]).format == "jsonl"
    assert isinstance(open_source("-"), StdinSource)
    with pytest.raises(SourceError, match="no such file"):
        open_source(str(tmp_path / "missing.svm"))
    with pytest.raises(ValueError, match="unknown format"):
        open_source([str(path)], fmt="parquet")


@pytest.mark.parametrize("final", [False, True])
def test_cut_lines_matches_a_plain_reference(final):
    """The compiled line cutter: the first ``max_lines`` complete lines from ``start`` (a
    last line without its newline counts only at the end of the stream)."""
    from streamlearn.connectors.decoding import cut_lines

    def reference(buf, start, max_lines):
        ends = [i + 1 for i in range(start, len(buf)) if buf[i] == 10]
        if len(ends) >= max_lines:
            return ends[max_lines - 1], max_lines
        last = ends[-1] if ends else start
        if final and len(buf) > last:
            return len(buf), len(ends) + 1
        return last, len(ends)

    rng = np.random.default_rng(8)
    # short buffers, and long ones whose newlines are sparse enough that the cutter's 4 KiB
    # blocks (counted at once) hold the wanted newline anywhere, or none at all
    for size, p_newline, most_lines in [(30, 0.2, 5)] * 200 + [(20_000, 0.002, 60)] * 60 + [(9_000, 0.0, 3)] * 5:
        p = [p_newline, (1 - p_newline) * 0.75, (1 - p_newline) * 0.25]
        buf = bytes(rng.choice([10, 49, 32], size=int(rng.integers(0, size)), p=p).astype(np.uint8))
        start = int(rng.integers(0, len(buf) + 1))
        max_lines = int(rng.integers(1, most_lines))
        got = cut_lines(np.frombuffer(buf, np.uint8), start, max_lines, final)
        assert got == reference(buf, start, max_lines), (len(buf), start, max_lines)


def test_parser_batches_skip_the_learners_check_and_learn_the_same():
    """A parsed batch carries ``needed`` (validated by the parser), so the learner skips its own
    CSR check; the model equals one fed the same rows as an unvalidated batch, and an
    unvalidated batch with a NaN is still refused."""
    from streamlearn import MulticlassSVM
    from streamlearn.errors import InvalidInputError
    from streamlearn.batches import CsrBatch

    chunk = parse_libsvm_bytes(b"1 3:0.5 7:1\n2 1:2 3:-1\n1 9:0.25\n", width=20)
    X = chunk.X
    assert X.needed == 10 and X.shape == (3, 20)
    plain = CsrBatch(X.indptr, X.indices, X.data, X.width)
    assert plain.needed is None
    fast, checked = MulticlassSVM(seed=1), MulticlassSVM(seed=1)
    fast.learn_many(X, np.array(chunk.labels))
    checked.learn_many(plain, np.array(chunk.labels))
    for x in ({3: 0.5, 7: 1.0}, {1: 2.0, 3: -1.0}, {9: 0.25}):
        assert fast.decision_function_one(x) == checked.decision_function_one(x) != {}
    bad = CsrBatch(X.indptr, X.indices, np.array([0.5, np.nan, 2, -1, 0.25]), X.width)
    with pytest.raises(InvalidInputError, match="NaN"):
        MulticlassSVM().learn_many(bad, np.array(chunk.labels))


def test_a_started_source_hands_over_what_it_read_ahead_and_a_seek_drops_it(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(60)) + "\n")
    expected = [(b.position, list(b.y)) for b in FileSource(str(path), batch_records=7)]
    started = FileSource(str(path), batch_records=7)
    started.start()
    time.sleep(0.05)  # the reader thread runs ahead meanwhile
    assert [(b.position, list(b.y)) for b in started] == expected
    assert [(b.position, list(b.y)) for b in started] == expected  # a second pass starts afresh
    seeking = FileSource(str(path), batch_records=7)
    seeking.start()
    seeking.seek(expected[2][0])
    assert [y for b in seeking for y in b.y] == [y for _, ys in expected[3:] for y in ys]


def test_a_dropped_started_source_stops_its_reader_thread(tmp_path):
    path = tmp_path / "d.svm"
    path.write_text("\n".join(libsvm_lines(200)) + "\n")
    before = {t for t in threading.enumerate() if t.name == "streamlearn-reader"}
    source = FileSource(str(path), batch_records=3)  # many more batches than the read-ahead queue holds
    source.start()
    source.seek(next(iter(FileSource(str(path), batch_records=3))).position)  # drops the started reader
    gc.collect()
    deadline = time.monotonic() + 5
    while {t for t in threading.enumerate() if t.name == "streamlearn-reader"} - before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not {t for t in threading.enumerate() if t.name == "streamlearn-reader"} - before


def test_a_label_longer_than_the_bound_is_a_dead_letter_in_every_format():
    """A 1 MB label became a class (inspect printed it, predict --proba wrote it per row)."""
    from streamlearn.kernels.codes import MAX_LABEL_LENGTH

    long, ok = "c" * (MAX_LABEL_LENGTH + 1), "c" * MAX_LABEL_LENGTH
    libsvm = parse_libsvm_bytes(f"{long} 1:1\n{ok} 1:1\n{'9' * 300} 1:1\n".encode())
    assert [(e.line, e.reason) for e in libsvm.errors] == [(0, "label-too-long"), (2, "label-too-long")]
    assert libsvm.labels == [ok]
    jsonl = JsonLinesDecoder().decode(json.dumps({"x": {"a": 1}, "y": long}).encode() + b"\n" +
                                      json.dumps({"x": {"a": 1}, "y": 10**300}).encode() + b"\n", 0, 0, "f")
    assert [d.reason for d in jsonl.dead] == ["label-too-long", "label-too-long"]
    csv = CsvDecoder().decode(f"a,label\n1,{long}\n1,{ok}\n".encode(), 0, 0, "f.csv")
    assert [d.reason for d in csv.dead] == ["label-too-long"] and list(csv.y) == [ok]
