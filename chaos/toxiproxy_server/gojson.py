"""JSON the way Toxiproxy's Go code reads and writes it.

Clients compare bodies and error messages, so the server mimics ``encoding/json``: the
decoder reads the first value and ignores what follows, a syntax error gets the words of
Go's scanner (``invalid character 'b' looking for beginning of object key string``,
``unexpected EOF``), ``null`` leaves defaults in place, keys match without regard to case,
a literal that does not fit the Go field type (its kind, or its range: 1e39 for a float32)
is a ``json: cannot unmarshal ...`` error; the encoder writes compact JSON with ``<``,
``>`` and ``&`` escaped and float32 values in their shortest form.
"""

from __future__ import annotations

import json
import math
import re
import struct
import unicodedata
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any


class DecodeError(Exception):
    """The text Go's decoder would return (without the ``bad request body: `` prefix)."""


class Num(float):
    """A JSON number literal that was not a plain integer; keeps its text for messages."""

    raw: str

    def __new__(cls, raw: str) -> Num:
        obj = super().__new__(cls, raw)
        obj.raw = raw
        return obj


def _parse_int(text: str) -> int | Num:
    # Python refuses to convert integer literals of more than 4300 digits; such a literal is
    # out of every Go integer's range anyway, and Go names it in its error as written.
    return int(text) if len(text) <= 4000 else Num(text)


_DECODER = json.JSONDecoder(parse_float=Num, parse_int=_parse_int)


def decode_first(body: bytes) -> Any:
    """The first JSON value of ``body`` (Go's ``Decoder.Decode``); trailing bytes are ignored.

    The syntax is checked first by ``_scan_first`` (Go's scanner, with its messages), then
    the value is read. A nesting deeper than Python's reader allows (about 1,000 levels;
    Go allows 10,000) is refused with Go's message for its own limit: the one departure.
    """
    start, end = _scan_first(body)
    try:
        value, _ = _DECODER.raw_decode(body[start:end].decode("utf-8", errors="replace"))
    except RecursionError:
        raise _syntax(0x5B if body[start] == 0x5B else 0x7B, "exceeded max depth") from None
    return value


# -- Go's JSON scanner (encoding/json/scanner.go): where the first value ends, or its error --

_WS = b" \t\r\n"
_DIGITS = b"0123456789"
_HEX = b"0123456789abcdefABCDEF"
_PLAIN = re.compile(rb'[^"\\\x00-\x1f]*')
_SHORT_ESCAPES = {0x07: "\\a", 0x08: "\\b", 0x0C: "\\f", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t", 0x0B: "\\v"}


def quote_char(c: int) -> str:
    """Go's ``quoteChar``: a byte as its error messages show it (``'b'``, ``'\\x00'``, ``'ï'``)."""
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    if c == 0x5C:
        return "'\\\\'"
    if c in _SHORT_ESCAPES:
        return f"'{_SHORT_ESCAPES[c]}'"
    if c < 0x20 or c == 0x7F:
        return f"'\\x{c:02x}'"
    # Go converts the byte to the rune of that number; strconv.Quote keeps printable ones.
    if c < 0x80 or unicodedata.category(chr(c))[0] in "LMNPS":
        return f"'{chr(c)}'"
    return f"'\\u{c:04x}'"


class _UnexpectedEOF(Exception):
    pass


def _syntax(c: int, context: str) -> DecodeError:
    return DecodeError(f"invalid character {quote_char(c)} {context}")


def _at(body: bytes, i: int) -> int:
    if i >= len(body):
        raise _UnexpectedEOF
    return body[i]


def _scan_string(body: bytes, i: int) -> int:
    """``body[i]`` is the opening quote; the index after the closing one."""
    i += 1
    while True:
        i = _PLAIN.match(body, i).end()  # type: ignore[union-attr]
        c = _at(body, i)
        if c == 0x22:
            return i + 1
        if c < 0x20:
            raise _syntax(c, "in string literal")
        c = _at(body, i + 1)  # after a backslash
        if c == 0x75:  # \uXXXX
            for k in range(i + 2, i + 6):
                if _at(body, k) not in _HEX:
                    raise _syntax(body[k], "in \\u hexadecimal character escape")
            i += 6
        elif c in b'bfnrt\\/"':
            i += 2
        else:
            raise _syntax(c, "in string escape code")


def _scan_digits(body: bytes, i: int, context: str) -> int:
    """At least one digit at ``i`` (else Go's error with ``context``); the index after them."""
    if _at(body, i) not in _DIGITS:
        raise _syntax(body[i], context)
    while i < len(body) and body[i] in _DIGITS:
        i += 1
    return i


def _scan_number(body: bytes, i: int) -> int:
    if body[i] == 0x2D:  # -
        i += 1
        if _at(body, i) not in _DIGITS:
            raise _syntax(body[i], "in numeric literal")
    i = i + 1 if body[i] == 0x30 else _scan_digits(body, i, "in numeric literal")
    if i < len(body) and body[i] == 0x2E:  # .
        i = _scan_digits(body, i + 1, "after decimal point in numeric literal")
    if i < len(body) and body[i] in b"eE":
        i += 1
        if _at(body, i) in b"+-":
            i += 1
        i = _scan_digits(body, i, "in exponent of numeric literal")
    return i


def _scan_literal(body: bytes, i: int) -> int:
    word = {0x74: b"true", 0x66: b"false", 0x6E: b"null"}[body[i]]
    for k, want in enumerate(word[1:], i + 1):
        if _at(body, k) != want:
            raise _syntax(body[k], f"in literal {word.decode()} (expecting {quote_char(want)})")
    return i + len(word)


def _scan_first(body: bytes) -> tuple[int, int]:
    """Start and end of the first JSON value in ``body``; Go's DecodeError if it is not valid
    (``EOF`` for nothing but space, ``unexpected EOF`` for a value cut short)."""
    i, n = 0, len(body)
    while i < n and body[i] in _WS:
        i += 1
    if i == n:
        raise DecodeError("EOF")
    start = i
    stack: list[int] = []  # the open containers: { or [
    expect = "value"  # value | value-or-] | key | key-or-} | colon | after-value
    try:
        while True:
            if expect == "after-value" and not stack:
                return start, i
            while _at(body, i) in _WS:
                i += 1
            c = body[i]
            if (expect == "value-or-]" and c == 0x5D) or (expect == "key-or-}" and c == 0x7D):
                stack.pop()
                i, expect = i + 1, "after-value"
            elif expect in ("value", "value-or-]"):
                if c in b"{[":
                    stack.append(c)
                    i, expect = i + 1, "key-or-}" if c == 0x7B else "value-or-]"
                    if len(stack) > 10000:
                        raise _syntax(c, "exceeded max depth")
                    continue
                if c == 0x22:
                    i = _scan_string(body, i)
                elif c == 0x2D or c in _DIGITS:
                    i = _scan_number(body, i)
                elif c in b"tfn":
                    i = _scan_literal(body, i)
                else:
                    raise _syntax(c, "looking for beginning of value")
                expect = "after-value"
            elif expect in ("key", "key-or-}"):
                if c != 0x22:
                    raise _syntax(c, "looking for beginning of object key string")
                i, expect = _scan_string(body, i), "colon"
            elif expect == "colon":
                if c != 0x3A:
                    raise _syntax(c, "after object key")
                i, expect = i + 1, "value"
            elif stack[-1] == 0x7B:  # after a value in an object
                if c == 0x2C:
                    i, expect = i + 1, "key"
                elif c == 0x7D:
                    stack.pop()
                    i += 1
                else:
                    raise _syntax(c, "after object key:value pair")
            elif c == 0x2C:  # after a value in an array
                i, expect = i + 1, "value"
            elif c == 0x5D:
                stack.pop()
                i += 1
            else:
                raise _syntax(c, "after array element")
    except _UnexpectedEOF:
        raise DecodeError("unexpected EOF") from None


def kind_of(value: Any, with_literal: bool = False) -> str:
    """Go's name for a JSON value in an UnmarshalTypeError ("number 1.5", "string", ...)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Num):
        return f"number {value.raw}" if with_literal else "number"
    if isinstance(value, int):
        return f"number {value}" if with_literal else "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def lookup(obj: dict[str, Any], key: str) -> tuple[bool, Any]:
    """Go matches JSON keys to struct fields exactly first, then case-insensitively."""
    if key in obj:
        return True, obj[key]
    folded = key.casefold()
    found, value = False, None
    for k, v in obj.items():
        if k.casefold() == folded:
            found, value = True, v  # Go keeps the last case-insensitive match
    return found, value


def field_of(key: str, fields: Iterable[str]) -> str | None:
    """The Go field a JSON key sets: an exact match, else one that matches without regard to case."""
    names = list(fields)
    if key in names:
        return key
    folded = key.casefold()
    return next((f for f in names if f.casefold() == folded), None)


def read_fields(obj: dict[str, Any], readers: dict[str, Callable[[dict[str, Any]], Any]]) -> dict[str, Any]:
    """Each field's value, read by its reader from a one-key object in the order of the body's
    keys, as Go's decoder goes: the first type error in that order is the one raised, and a
    later key for the same field wins. A field the body does not set gets its reader's default."""
    values: dict[str, Any] = {}
    for key, value in obj.items():
        field = field_of(key, readers)
        if field is not None:
            values[field] = readers[field]({field: value})
    return {f: values[f] if f in values else read({}) for f, read in readers.items()}


def type_error(value: Any, struct: str, field: str, gotype: str, with_literal: bool = False) -> DecodeError:
    where = f"{struct}.{field}"
    what = kind_of(value, with_literal)
    return DecodeError(f"json: cannot unmarshal {what} into Go struct field {where} of type {gotype}")


def as_string(obj: dict[str, Any], key: str, struct: str, default: str) -> str:
    found, value = lookup(obj, key)
    if not found or value is None:
        return default
    if not isinstance(value, str):
        raise type_error(value, struct, key, "string")
    return value


def as_bool(obj: dict[str, Any], key: str, struct: str, default: bool | None) -> bool | None:
    found, value = lookup(obj, key)
    if not found or value is None:
        return default
    if not isinstance(value, bool):
        raise type_error(value, struct, key, "bool")
    return value


def as_int(value: Any, struct: str, field: str, gotype: str = "int64") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise type_error(value, struct, field, gotype, with_literal=isinstance(value, int | float))
    return value


def as_float32(obj: dict[str, Any], key: str, struct: str, default: float) -> float:
    found, value = lookup(obj, key)
    if not found or value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise type_error(value, struct, key, "float32")
    try:
        narrowed = struct_f32(float(value))
    except OverflowError:  # an integer literal beyond even float64
        narrowed = math.inf
    if math.isinf(narrowed):
        # Go's ParseFloat(literal, 32) fails with ErrRange (1e39, 1e400): a type error naming the
        # literal, and nothing stored; an infinity kept here would break every later read.
        raise type_error(value, struct, key, "float32", with_literal=True)
    return narrowed


def struct_f32(value: float) -> float:
    """Round to float32, as Go stores ``toxicity``."""
    return struct.unpack("f", struct.pack("f", value))[0]


def float32_text(value: float) -> str:
    """Go's encoding of a float32: the shortest decimal that reads back as the same float32."""
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if struct_f32(float(text)) == value:
            break
    dec = Decimal(text)
    if 1e-6 <= abs(value) < 1e21:
        return format(dec, "f")
    mantissa, _, exp = f"{dec:e}".partition("e")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    sign, digits_ = exp[0], exp[1:].lstrip("0") or "0"
    if sign == "+":
        digits_ = digits_.zfill(2)  # Go shortens e-07 to e-7 but writes e+21 as is
    return f"{mantissa}e{sign}{digits_}"


class F32(float):
    """A float the encoder writes as a Go float32."""


def _encode(value: Any) -> str:
    if isinstance(value, F32):
        return float32_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int | str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_encode(str(k))}:{_encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_encode(v) for v in value) + "]"
    raise TypeError(f"cannot encode {type(value).__name__}")


def encode(value: Any) -> bytes:
    """Compact JSON as Go's ``json.Marshal`` writes it (HTML characters escaped)."""
    text = _encode(value)
    for ch, esc in (
        ("&", "\\u0026"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(ch, esc)
    return text.encode()
