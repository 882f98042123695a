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
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = [
    "ENCODING_VERSION",
    "MAX_ENCODED_NESTING",
    "EncodingError",
    "Opaque",
    "decode",
    "encode",
    "nested_deeper_than",
    "type_name",
    "values_equal",
]

ENCODING_VERSION = 1
_EXACT_INT = 2**53
_MAX_DEPTH = 200
#: Deepest JSON nesting ``encode`` can produce within its default depth limit (a dict costs three JSON
#: levels per Python level: the tag, the list of pairs, the pair). ``decode`` refuses anything deeper.
MAX_ENCODED_NESTING = 3 * (_MAX_DEPTH + 1) + 4
# More set elements or dict keys than this sharing a hash value cannot come from ``encode`` of a real set
# or dict by chance; a forged encoding full of them would make building the set take quadratic time.
_MAX_SHARED_HASHES = 1000


class EncodingError(ValueError):
    """A value cannot be encoded within the given limits, or data is not a valid encoding.

    Attributes:
        reason: ``"too_large"`` when the encoding passes the byte budget,
            ``"too_deep"`` when nesting passes the depth limit,
            ``"malformed"`` when ``decode`` is given data that ``encode`` cannot have produced.
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
                name = type_name(value)
                self.spend(len(name) + 14)
                return {"sub": name, "of": self.run(_as_base(value, base), depth + 1)}
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
        name = type_name(value)
        self.spend(len(text) + len(name) + 20)
        return {"opaque": text, "type": name}


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
        ValueError: An int has more digits than Python turns into text (4300 by default), as ``repr`` would.
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
    Outcomes come from untrusted code, so any data is accepted: what is not a
    valid encoding raises ``EncodingError`` and nothing else.

    Raises:
        EncodingError: ``data`` is not a valid encoding (``reason`` is ``"malformed"``), or is nested
            deeper than ``MAX_ENCODED_NESTING`` (``"too_deep"``).
    """
    try:
        return _decode(data, 0)
    except EncodingError:
        raise
    except RecursionError:
        raise EncodingError("too_deep", "the encoding is nested too deep to decode") from None
    except Exception as exc:  # whatever a malformed body makes int(), Fraction() or a set raise
        raise EncodingError("malformed", f"not a valid encoding ({type(exc).__name__}: {_short(str(exc))})") from None


def _short(text: str) -> str:
    return text if len(text) <= 80 else text[:77] + "..."


def _malformed(data: Any) -> EncodingError:
    return EncodingError("malformed", f"not a valid encoding: {_short(repr(data))}")


def _hashable_without_pileups(items: list[Any]) -> list[Any]:
    if len(items) > _MAX_SHARED_HASHES and len(items) - len(set(map(hash, items))) > _MAX_SHARED_HASHES:
        raise EncodingError("malformed", "not a valid encoding: too many set elements or dict keys share a hash")
    return items


def _decode(data: Any, depth: int) -> Any:
    if depth > MAX_ENCODED_NESTING:
        raise EncodingError("too_deep", f"the encoding is nested deeper than {MAX_ENCODED_NESTING} levels")
    cls = type(data)
    if data is None or cls is bool or cls is int or cls is float or cls is str:
        return data
    if cls is list:
        return [_decode(item, depth + 1) for item in data]
    if cls is not dict or not data:
        raise _malformed(data)
    if "opaque" in data:
        kind, text = data.get("type", ""), data["opaque"]
        if type(kind) is not str or type(text) is not str or len(data) > 2 or (len(data) == 2 and "type" not in data):
            raise _malformed(data)
        return Opaque(type=kind, repr=text)
    if "sub" in data:
        if len(data) != 2 or "of" not in data or type(data["sub"]) is not str:
            raise _malformed(data)
        return _decode(data["of"], depth + 1)
    if len(data) != 1:
        raise _malformed(data)
    ((tag, body),) = data.items()
    if tag in _TEXT_TAGS:
        if type(body) is not str:
            raise _malformed(data)
        return _TEXT_TAGS[tag](body)
    if type(body) is not list:
        raise _malformed(data)
    items = [_decode(item, depth + 1) for item in body]
    if tag == "tuple":
        return tuple(items)
    if tag == "set":
        return set(_hashable_without_pileups(items))
    if tag == "frozenset":
        return frozenset(_hashable_without_pileups(items))
    if tag == "dict":
        if not all(type(pair) is list and len(pair) == 2 for pair in items):
            raise _malformed(data)
        keys = _hashable_without_pileups([key for key, _ in items])
        return dict(zip(keys, (value for _, value in items), strict=True))
    if tag in ("complex", "fraction") and len(items) == 2:
        if tag == "complex" and all(type(part) is float or type(part) is int for part in items):
            return complex(items[0], items[1])
        if tag == "fraction" and all(type(part) is int for part in items):
            return Fraction(items[0], items[1])
    raise _malformed(data)


_TEXT_TAGS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "bytes": bytes.fromhex,
    "bytearray": bytearray.fromhex,
    "decimal": Decimal,
}


def nested_deeper_than(data: Any, limit: int) -> bool:
    """True when JSON data (lists and dicts) nests more than ``limit`` levels; without recursion."""
    stack = [(data, 1)]
    while stack:
        node, level = stack.pop()
        if level > limit:
            return True
        children = node if type(node) is list else node.values() if type(node) is dict else ()
        stack.extend((child, level + 1) for child in children if type(child) is list or type(child) is dict)
    return False


def values_equal(a: Any, b: Any) -> bool:
    """Python ``==``, except that a NaN equals a NaN in the same place (a set element or dict key included).

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
        unmatched = []
        for key, value in a.items():
            if key in b:
                if not values_equal(value, b[key]):
                    return False
            else:
                unmatched.append((key, value))
        if not unmatched:
            return True
        found = {key for key in b if key in a}
        rest = [(key, value) for key, value in b.items() if key not in found]
        return _pair_up(unmatched, rest, lambda x, y: values_equal(x[0], y[0]) and values_equal(x[1], y[1]))
    if isinstance(a, (set, frozenset)) and isinstance(b, (set, frozenset)):
        if len(a) != len(b):
            return False
        try:
            if a == b:
                return True
        except Exception:
            return False
        return _pair_up([x for x in a if x not in b], [y for y in b if y not in a], values_equal)
    if isinstance(a, Decimal) and isinstance(b, Decimal) and a.is_nan() and b.is_nan():
        return True
    try:
        return bool(a == b)
    except Exception:
        return False


def _pair_up(left: list[Any], right: list[Any], same: Any) -> bool:
    """Whether the leftovers of a set or dict comparison pair up one to one under ``same``.

    Only elements that hold a NaN can be left over from equal containers (a NaN is not equal to itself, so
    hashing finds no partner); any other leftover means the containers differ, which is decided at once.
    The pairing is quadratic, but only in the NaN-holding elements.
    """
    if len(left) != len(right) or not all(_holds_nan(item) for item in left):
        return False
    pool = list(right)
    for item in left:
        for index, other in enumerate(pool):
            if same(item, other):
                del pool[index]
                break
        else:
            return False
    return True


def _holds_nan(value: Any, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, float):
        return value != value
    if isinstance(value, complex):
        return value.real != value.real or value.imag != value.imag
    if isinstance(value, Decimal):
        return value.is_nan()
    if isinstance(value, dict):
        return any(_holds_nan(k, depth + 1) or _holds_nan(v, depth + 1) for k, v in value.items())
    if isinstance(value, (tuple, list, set, frozenset)):
        return any(_holds_nan(item, depth + 1) for item in value)
    return False
