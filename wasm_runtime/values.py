"""Lossless typed encoding of Python values, and the one equality rule.

This module runs on both sides of the sandbox boundary: the guest program
imports a copy of it to encode return values inside WebAssembly, and the host
uses it to decode frozen outcomes and compare them. It must therefore depend
on nothing but the standard library.

The encoding is JSON with tags, chosen to stay readable in manifests:

* ``None``, ``bool``, ``str``, ``list`` and finite floats are plain JSON;
* ints are plain JSON while exact in a double (``|n| < 2**53``), otherwise
  ``{"int": "<digits>"}``;
* every JSON object is a tag: ``{"float": "nan"|"inf"|"-inf"|"-0.0"}``,
  ``{"tuple": [...]}``, ``{"dict": [[key, value], ...]}``, ``{"set": [...]}``,
  ``{"frozenset": [...]}``, ``{"bytes": "<hex>"}``, ``{"bytearray": "<hex>"}``,
  ``{"complex": [re, im]}``, ``{"decimal": "<str>"}``,
  ``{"fraction": [num, den]}``, and ``{"opaque": "<repr>", "type": "<name>"}``
  for anything else. A subclass of a built-in container or number keeps its
  type name: ``{"sub": "<name>", "of": <encoding of the base value>}``.

Set elements are sorted by their encoded form, so the encoding of a set does
not depend on hash order.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = [
    "ENCODING_VERSION",
    "EncodingError",
    "Opaque",
    "decode",
    "encode",
    "type_name",
    "values_equal",
]

ENCODING_VERSION = 1
_EXACT_INT = 2**53
_MAX_DEPTH = 200


class EncodingError(ValueError):
    """A value cannot be encoded within the given limits.

    Attributes:
        reason: ``"too_large"`` when the encoding passes the byte budget,
            ``"too_deep"`` when nesting passes the depth limit.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Opaque:
    """A value of a type the encoding does not model, kept as its repr."""

    type: str
    repr: str


def type_name(value: Any) -> str:
    """Return the qualified type name used in outcomes (``int``, ``collections.Counter``)."""
    cls = type(value)
    module = getattr(cls, "__module__", "builtins")
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module in ("builtins", None) else f"{module}.{name}"


class _Encoder:
    def __init__(self, max_bytes: int | None, max_depth: int) -> None:
        self.budget = max_bytes
        self.max_depth = max_depth
        self.active: set[int] = set()

    def spend(self, n: int) -> None:
        if self.budget is None:
            return
        self.budget -= n
        if self.budget < 0:
            raise EncodingError("too_large", "the value is larger than the output limit")

    def run(self, value: Any, depth: int) -> Any:
        if depth > self.max_depth:
            raise EncodingError("too_deep", f"the value is nested deeper than {self.max_depth} levels")
        cls = type(value)
        if value is None or cls is bool:
            self.spend(5)
            return value
        if cls is int:
            if -_EXACT_INT < value < _EXACT_INT:
                self.spend(8)
                return value
            if self.budget is not None and value.bit_length() > self.budget * 4:
                raise EncodingError("too_large", "the value is larger than the output limit")
            text = str(value)
            self.spend(len(text) + 10)
            return {"int": text}
        if cls is float:
            self.spend(12)
            return _encode_float(value)
        if cls is str:
            self.spend(len(value) + 2)
            return value
        if cls is bytes or cls is bytearray:
            self.spend(2 * len(value) + 14)
            return {cls.__name__: value.hex()}
        if cls is complex:
            self.spend(30)
            return {"complex": [_encode_float(value.real), _encode_float(value.imag)]}
        if cls is Decimal:
            text = str(value)
            self.spend(len(text) + 14)
            return {"decimal": text}
        if cls is Fraction:
            return {"fraction": [self.run(value.numerator, depth + 1), self.run(value.denominator, depth + 1)]}
        if cls in (list, tuple, dict, set, frozenset):
            return self.container(value, cls, depth)
        for base in (bool, int, float, str, bytes, list, tuple, dict, set, frozenset):
            if isinstance(value, base):
                return {"sub": type_name(value), "of": self.run(_as_base(value, base), depth + 1)}
        return self.opaque(value)

    def container(self, value: Any, cls: type, depth: int) -> Any:
        key = id(value)
        if key in self.active:
            return {"opaque": "[...]" if cls is list else "{...}", "type": cls.__name__}
        self.active.add(key)
        try:
            self.spend(2 + len(value))
            if cls is list:
                return [self.run(item, depth + 1) for item in value]
            if cls is tuple:
                return {"tuple": [self.run(item, depth + 1) for item in value]}
            if cls is dict:
                return {"dict": [[self.run(k, depth + 1), self.run(v, depth + 1)] for k, v in value.items()]}
            items = [self.run(item, depth + 1) for item in value]
            items.sort(key=_canonical)
            return {cls.__name__: items}
        finally:
            self.active.discard(key)

    def opaque(self, value: Any) -> Any:
        text = repr(value)
        self.spend(len(text) + 20)
        return {"opaque": text, "type": type_name(value)}


def _as_base(value: Any, base: type) -> Any:
    if base is dict:
        return dict(value.items())
    return base(value)


def _encode_float(value: float) -> Any:
    if math.isnan(value):
        return {"float": "nan"}
    if math.isinf(value):
        return {"float": "inf" if value > 0 else "-inf"}
    if value == 0.0 and math.copysign(1.0, value) < 0:
        return {"float": "-0.0"}
    return value


def _canonical(encoded: Any) -> str:
    return json.dumps(encoded, sort_keys=True, separators=(",", ":"))


def encode(value: Any, *, max_bytes: int | None = None, max_depth: int = _MAX_DEPTH) -> Any:
    """Encode a Python value as tagged JSON data.

    Args:
        value: Any Python value.
        max_bytes: Approximate budget for the encoded size; ``None`` for no limit.
        max_depth: Deepest nesting accepted.

    Returns:
        Data that ``json.dumps`` accepts and ``decode`` turns back into an equal value.

    Raises:
        EncodingError: The value passes ``max_bytes`` or ``max_depth``.
    """
    cls = type(value)
    # The commonest results, encoded as _Encoder would without building one (a fresh sandbox instance pays
    # for every object it touches, so this path runs for most calls).
    if cls is str:
        if max_bytes is None or len(value) + 2 <= max_bytes:
            return value
    elif cls is int:
        if -_EXACT_INT < value < _EXACT_INT and (max_bytes is None or max_bytes >= 8):
            return value
    elif (value is None or cls is bool) and (max_bytes is None or max_bytes >= 5):
        return value
    return _Encoder(max_bytes, max_depth).run(value, 0)


def decode(data: Any) -> Any:
    """Turn tagged JSON data from ``encode`` back into a Python value.

    Opaque values come back as ``Opaque``; a subclass comes back as its base type.

    Raises:
        ValueError: ``data`` is not a valid encoding.
    """
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict) or not data:
        raise ValueError(f"not a typed value: {data!r}")
    if "opaque" in data:
        return Opaque(type=str(data.get("type", "")), repr=str(data["opaque"]))
    if "sub" in data:
        return decode(data["of"])
    if len(data) != 1:
        raise ValueError(f"not a typed value: {data!r}")
    ((tag, body),) = data.items()
    if tag == "int":
        return int(body)
    if tag == "float":
        return float(body)
    if tag == "tuple":
        return tuple(decode(item) for item in body)
    if tag == "dict":
        return {decode(k): decode(v) for k, v in body}
    if tag == "set":
        return {decode(item) for item in body}
    if tag == "frozenset":
        return frozenset(decode(item) for item in body)
    if tag == "bytes":
        return bytes.fromhex(body)
    if tag == "bytearray":
        return bytearray.fromhex(body)
    if tag == "complex":
        return complex(decode(body[0]), decode(body[1]))
    if tag == "decimal":
        return Decimal(body)
    if tag == "fraction":
        return Fraction(decode(body[0]), decode(body[1]))
    raise ValueError(f"unknown type tag {tag!r}")


def values_equal(a: Any, b: Any) -> bool:
    """Python ``==``, except that a NaN equals a NaN in the same place.

    A tuple never equals a list (as in Python); ``1 == 1.0 == True`` (as in
    Python); opaque values are equal when type and repr are.
    """
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, complex) and isinstance(b, complex):
        return values_equal(a.real, b.real) and values_equal(a.imag, b.imag)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if isinstance(a, list) != isinstance(b, list) or len(a) != len(b):
            return False
        return all(values_equal(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict) and isinstance(b, dict):
        if len(a) != len(b):
            return False
        return all(key in b and values_equal(value, b[key]) for key, value in a.items())
    if isinstance(a, Decimal) and isinstance(b, Decimal) and a.is_nan() and b.is_nan():
        return True
    try:
        return bool(a == b)
    except Exception:
        return False
