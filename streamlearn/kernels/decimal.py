"""Decimal text to float64 in compiled code, correctly rounded (the LIBSVM parser's numbers,
:mod:`streamlearn.kernels.text`): eight digits at a time (:func:`digits8`), Eisel-Lemire's
algorithm (:func:`eisel_lemire`) for what plain arithmetic cannot round exactly, and the
status of what Python's ``float`` must decide.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

INT_POW10 = np.array([10**i for i in range(9)], np.int64)
# eight-byte lane constants of digits8 (uint64 throughout: numba turns int64 mixed with uint64 into float64)
_ZEROS, _HIGH_NIBBLES, _SIXES = np.uint64(0x3030303030303030), np.uint64(0xF0F0F0F0F0F0F0F0), np.uint64(0x0606060606060606)
_PAIRS, _MUL_100_1000000, _MUL_1_10000 = np.uint64(0x000000FF000000FF), np.uint64(100 + (1000000 << 32)), np.uint64(1 + (10000 << 32))
_U0, _U3, _U8, _U10, _U16, _U32, _U64, _BYTE_BITS = (np.uint64(v) for v in (0, 3, 8, 10, 16, 32, 64, 0x38))


@intrinsic
def _load_u64(typingctx, buf, i):
    """``buf[i:i + 8]`` as one little-endian uint64 (an unaligned load; the caller checks
    ``i + 8 <= len(buf)``)."""

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        pointer = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(pointer, align=1)

    return types.uint64(buf, i), codegen


@intrinsic
def _trailing_zeros(typingctx, x):
    """Count of trailing zero bits of a non-zero uint64 (one ``tzcnt``)."""

    def codegen(context, builder, signature, args):
        return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))

    return types.uint64(x), codegen


@njit(cache=True, nogil=True, inline="always")
def digits8(buf, k):
    """``(value, count)`` of the decimal digits that start ``buf[k:k + 8]`` (count 8: more
    may follow), branch-free on one eight-byte load (the caller checks ``k + 8 <= len(buf)``).

    SWAR ("SIMD within a register"): a byte is a digit when its high nibble is 3 both as it
    is and plus 6, so the first non-digit is the lowest non-zero byte of that test; the digits
    shifted to the top of the word convert in three multiply-adds (pairs, quads, the eight),
    as simdjson's ``parse_eight_digits_unrolled`` (Lemire, "Parsing series of integers
    with SIMD", 2018). A carry out of a byte >= 0xFA lands only above the first non-digit.
    Per-byte loops ended in a mispredicted branch at each number's end; this step has none."""
    chunk = _load_u64(buf, k)
    non_digits = ((chunk & _HIGH_NIBBLES) ^ _ZEROS) | (((chunk + _SIXES) & _HIGH_NIBBLES) ^ _ZEROS)
    bits = _U64 if non_digits == _U0 else _trailing_zeros(non_digits) & _BYTE_BITS
    if bits == _U0:
        return np.int64(0), np.int64(0)
    d = (chunk - _ZEROS) << (_U64 - bits)  # the digits' values, most significant first, leading zero bytes
    d = d * _U10 + (d >> _U8)
    d = (((d & _PAIRS) * _MUL_100_1000000) + (((d >> _U16) & _PAIRS) * _MUL_1_10000)) >> _U32
    return np.int64(d), np.int64(bits >> _U3)


@njit(cache=True, nogil=True, inline="always")
def _digits(buf, i, n, max_digits):
    """The decimal integer at ``buf[i:]``: ``(value of its first max_digits digits,
    number of digits, end)``."""
    value = 0
    count = 0
    while i < n and 48 <= buf[i] <= 57:
        if count < max_digits:
            value = value * 10 + (np.int64(buf[i]) - 48)
        count += 1
        i += 1
    return value, count, i


def _powers_of_ten_128(low: int, high: int) -> tuple[np.ndarray, np.ndarray]:
    """The 128-bit mantissas of 10**e for e in ``low..high``, normalised so that the top bit
    is set and rounded down: high and low 64-bit halves (the table of Eisel-Lemire)."""
    hi, lo = [], []
    for e in range(low, high + 1):
        if e >= 0:
            v = 10**e
            shift = v.bit_length() - 128
            m = v >> shift if shift >= 0 else v << -shift
        else:
            d = 10**-e
            s = d.bit_length() + 127
            m = (1 << s) // d
            while m.bit_length() < 128:
                s += 1
                m = (1 << s) // d
        hi.append(m >> 64)
        lo.append(m & 0xFFFFFFFFFFFFFFFF)
    return np.array(hi, np.uint64), np.array(lo, np.uint64)


POW10_MIN_EXP, POW10_MAX_EXP = -348, 347
_POW10_HI, _POW10_LO = _powers_of_ten_128(POW10_MIN_EXP, POW10_MAX_EXP)
_LOW32, _U1, _U9, _U63, _ONES_9, _U53 = (np.uint64(v) for v in (0xFFFFFFFF, 1, 9, 63, 0x1FF, 53))


@njit(cache=True, nogil=True, inline="always")
def _mul_128(a, b):
    """The 128-bit product of two uint64 as (high, low) halves."""
    a_lo, a_hi, b_lo, b_hi = a & _LOW32, a >> _U32, b & _LOW32, b >> _U32
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    middle = (p0 >> _U32) + (p1 & _LOW32) + (p2 & _LOW32)
    return p3 + (p1 >> _U32) + (p2 >> _U32) + (middle >> _U32), (p0 & _LOW32) | (middle << _U32)


@njit(cache=True, nogil=True)
def eisel_lemire(mantissa, exponent):
    """``mantissa * 10**exponent`` correctly rounded to a float64 (``mantissa``: a uint64 > 0),
    by the Eisel-Lemire algorithm (Lemire, "Number parsing at a gigabyte per second", 2021, as
    Go's strconv writes it); ``(value, True)``, or ``(0.0, False)`` in the rare cases it cannot
    decide (halfway ambiguities, subnormals, overflow): the caller falls back to an exact parser."""
    if exponent < POW10_MIN_EXP or exponent > POW10_MAX_EXP:
        return 0.0, False
    clz = 0
    while not (mantissa >> _U63):
        mantissa = mantissa << _U1
        clz += 1
    exp2 = ((217706 * exponent) >> 16) + 64 + 1023 - clz
    x_hi, x_lo = _mul_128(mantissa, _POW10_HI[exponent - POW10_MIN_EXP])
    if (x_hi & _ONES_9) == _ONES_9 and x_lo + mantissa < mantissa:  # the wider approximation
        y_hi, y_lo = _mul_128(mantissa, _POW10_LO[exponent - POW10_MIN_EXP])
        merged_hi, merged_lo = x_hi, x_lo + y_hi
        if merged_lo < x_lo:
            merged_hi += _U1
        if (merged_hi & _ONES_9) == _ONES_9 and merged_lo + _U1 == _U0 and y_lo + mantissa < mantissa:
            return 0.0, False
        x_hi, x_lo = merged_hi, merged_lo
    msb = x_hi >> _U63
    result = x_hi >> (msb + _U9)
    exp2 -= 1 - np.int64(msb)
    if x_lo == _U0 and (x_hi & _ONES_9) == _U0 and (result & _U3) == _U1:  # halfway: undecided
        return 0.0, False
    result += result & _U1
    result = result >> _U1
    if result >> _U53:
        result = result >> _U1
        exp2 += 1
    if exp2 <= 0 or exp2 >= 0x7FF:
        return 0.0, False
    return math.ldexp(float(result), exp2 - 1023 - 52), True


@njit(cache=True, nogil=True)
def decimal_to_float(mantissa, exponent, pow10):
    """``mantissa * 10**exponent`` (``mantissa``: an int64 > 0) correctly rounded: Clinger's
    fast path when both operands are exact (trailing zeros moved to the exponent first:
    ``4714283303229004.0``), else :func:`eisel_lemire`; ``(value, decided)``."""
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    if mantissa <= 9007199254740992 and -22 <= exponent <= 22:
        value = float(mantissa)
        return (value * pow10[exponent] if exponent >= 0 else value / pow10[-exponent]), True
    return eisel_lemire(np.uint64(mantissa), exponent)


@njit(cache=True, nogil=True)
def parse_number(buf, i, n, pow10):
    """Parse the decimal number that starts at ``buf[i]``, up to the first byte that cannot
    continue it (each byte is read once).

    Returns ``(value, status, end)``: status 0 = correctly rounded (:func:`decimal_to_float`), 1 = needs Python's float (more than 18 significant digits, an
    exponent of more than six digits, or a case Eisel-Lemire leaves undecided: a subnormal, an
    overflow, an exact halfway), 2 = not a number, 3 = NaN/inf spelled out;
    ``end`` is where parsing stopped (the caller checks that the token ends there)."""
    neg = False
    if buf[i] == 43 or buf[i] == 45:  # + -
        neg = buf[i] == 45
        i += 1
    if i < n and ((buf[i] | 32) == 105 or (buf[i] | 32) == 110):  # 'i' or 'n': inf, infinity, nan
        word = 0
        m = 0
        while i < n and not ends_token(buf[i]) and m < 9:
            word = word * 256 + (buf[i] | 32)
            i += 1
            m += 1
        if word == 0x696E66 or word == 0x6E616E or word == 0x696E66696E697479:
            return 0.0, 3, i
        return 0.0, 2, i
    mantissa = 0  # every digit; it cannot overflow within 18 significant digits
    zeros = 0  # leading zeros (0.000123 has three significant digits)
    first = i
    while i < n and 48 <= buf[i] <= 57:
        mantissa = mantissa * 10 + (np.int64(buf[i]) - 48)
        zeros += mantissa == 0
        i += 1
    n_digits = i - first
    exponent = 0
    if i < n and buf[i] == 46:  # '.'
        i += 1
        first = i
        while i < n and 48 <= buf[i] <= 57:
            mantissa = mantissa * 10 + (np.int64(buf[i]) - 48)
            zeros += mantissa == 0
            i += 1
        exponent = first - i
        n_digits += i - first
    if n_digits == 0:
        return 0.0, 2, i
    if i < n and (buf[i] | 32) == 101:  # e
        i += 1
        eneg = False
        if i < n and (buf[i] == 43 or buf[i] == 45):
            eneg = buf[i] == 45
            i += 1
        e, n_exp, i = _digits(buf, i, n, 6)
        if n_exp == 0:
            return 0.0, 2, i
        if n_exp > 6:  # a long (maybe zero-padded) exponent: Python's float decides
            return 0.0, 1, i
        exponent += -e if eneg else e
    if n_digits - zeros > 18:
        return 0.0, 1, i
    if mantissa == 0:
        return -0.0 if neg else 0.0, 0, i
    value, decided = decimal_to_float(mantissa, exponent, pow10)
    if not decided:
        return 0.0, 1, i
    return -value if neg else value, 0, i


@njit(cache=True, nogil=True, inline="always")
def ends_token(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12 or c == 10 or c == 35
