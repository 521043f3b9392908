"""JSON the way Toxiproxy's Go code reads and writes it.

Clients compare bodies and error messages, so the server mimics ``encoding/json``: the
decoder reads the first value and ignores what follows, ``null`` leaves defaults in place,
keys match without regard to case, a literal that does not fit the Go field type is a
``json: cannot unmarshal ...`` error; the encoder writes compact JSON with ``<``, ``>``
and ``&`` escaped and float32 values in their shortest form.
"""

from __future__ import annotations

import json
import math
import struct
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


_DECODER = json.JSONDecoder(
    parse_float=Num, parse_int=_parse_int, parse_constant=lambda s: (_ for _ in ()).throw(ValueError(s))
)


def decode_first(body: bytes) -> Any:
    """The first JSON value of ``body`` (Go's ``Decoder.Decode``); trailing bytes are ignored."""
    text = body.decode("utf-8", errors="replace")
    stripped = text.lstrip(" \t\r\n")
    if not stripped:
        raise DecodeError("EOF")
    try:
        value, _ = _DECODER.raw_decode(stripped)
    except json.JSONDecodeError as exc:
        pos = exc.pos
        if pos >= len(stripped):
            raise DecodeError("unexpected EOF") from None
        raise DecodeError(f"invalid character {stripped[pos]!r} looking for beginning of value") from None
    except ValueError as exc:
        raise DecodeError(f"invalid character {str(exc)[:1]!r} looking for beginning of value") from None
    return value


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
