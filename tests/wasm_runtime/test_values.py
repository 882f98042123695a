"""The typed encoding is lossless, and the one equality rule behaves like Python's ==."""

from __future__ import annotations

import json
import math
from collections import Counter, OrderedDict, namedtuple
from decimal import Decimal
from fractions import Fraction

import pytest

from wasm_runtime import values
from wasm_runtime.values import EncodingError, Opaque, decode, encode, values_equal

ROUND_TRIP = [
    None, True, False, 0, -7, 2**53 - 1, 2**53, -(2**200), 1.5, -0.0, float("inf"), float("-inf"),
    1e-300, "", "héllo\n", b"\x00\xff", bytearray(b"ab"), 3 + 4j, (), (1,), [1, [2, (3,)]],
    {1: "a", "1": "b", (2, 3): [4]}, {1, 2, 3}, frozenset({"a"}), Decimal("1.10"), Fraction(3, 4),
    {"nested": {"deep": [{"x": (None, True)}]}},
]  # fmt: skip


@pytest.mark.parametrize("value", ROUND_TRIP, ids=repr)
def test_encoding_round_trips_through_json_with_type_and_value(value: object) -> None:
    back = decode(json.loads(json.dumps(encode(value))))
    assert type(back) is type(value)
    assert values_equal(back, value)
    assert repr(back) == repr(value) or isinstance(value, (set, frozenset, dict))


def test_tuple_stays_tuple_and_int_keys_stay_ints() -> None:
    back = decode(json.loads(json.dumps(encode({1: (2, 3)}))))
    assert back == {1: (2, 3)}
    assert isinstance(next(iter(back)), int)
    assert isinstance(back[1], tuple)


def test_negative_zero_and_nan_survive() -> None:
    assert math.copysign(1, decode(encode(-0.0))) == -1
    assert math.isnan(decode(json.loads(json.dumps(encode(float("nan"))))))


def test_set_encoding_does_not_depend_on_iteration_order() -> None:
    a = {"banana", "apple", "cherry", 3, (1, 2)}
    b = set(reversed(list(a)))
    assert json.dumps(encode(a)) == json.dumps(encode(b))


def test_subclasses_keep_their_type_name_and_compare_as_base() -> None:
    Point = namedtuple("Point", "x y")
    encoded = encode(Point(1, 2))
    assert encoded["sub"].endswith("Point")
    assert decode(encoded) == (1, 2)
    assert encode(Counter("aab"))["sub"] == "collections.Counter"
    assert decode(encode(OrderedDict(a=1))) == {"a": 1}


def test_unknown_types_are_opaque_with_repr_and_type() -> None:
    class Thing:
        def __repr__(self) -> str:
            return "<thing>"

    encoded = encode(Thing())
    assert encoded == {"opaque": "<thing>", "type": encoded["type"]}
    assert encoded["type"].endswith("Thing")
    assert decode(encoded) == Opaque(type=encoded["type"], repr="<thing>")


def test_self_referencing_list_is_encoded_without_recursion() -> None:
    a: list[object] = [1]
    a.append(a)
    assert encode(a) == [1, {"opaque": "[...]", "type": "list"}]


def test_budget_and_depth_limits_raise_encoding_error() -> None:
    with pytest.raises(EncodingError) as big:
        encode("x" * 1000, max_bytes=100)
    assert big.value.reason == "too_large"
    deep: list[object] = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(EncodingError) as nested:
        encode(deep)
    assert nested.value.reason == "too_deep"


def test_huge_int_is_refused_before_converting_to_text() -> None:
    with pytest.raises(EncodingError):
        encode(10**100000, max_bytes=1000)


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (True, 1, True),
        ((1, 2), [1, 2], False),
        ([1, (2,)], [1, [2]], False),
        (float("nan"), float("nan"), True),
        ([1, float("nan")], [1, float("nan")], True),
        ({"a": float("nan")}, {"a": float("nan")}, True),
        ({"a": 1}, {"a": 2}, False),
        ({1, 2}, {2, 1}, True),
        (Opaque("T", "x"), Opaque("T", "x"), True),
        (Opaque("T", "x"), Opaque("U", "x"), False),
        (complex(float("nan"), 1), complex(float("nan"), 1), True),
        (Decimal("1.0"), Decimal("1.00"), True),
        ("a", b"a", False),
    ],
)
def test_values_equal_follows_python_equality_with_nan_in_place(a: object, b: object, equal: bool) -> None:
    assert values_equal(a, b) is equal


@pytest.mark.parametrize("bad", [{"nope": 1}, {}, {"int": "1", "float": "2"}, {"tuple": [1], "x": 2}])
def test_decode_rejects_malformed_data(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        decode(bad)


@pytest.mark.parametrize("value", [None, True, False, 0, -7, 2**53 - 1, -(2**53) + 1, 2**53, "", "text", "é\ud800"])
def test_scalars_encode_the_same_on_the_short_path_and_the_general_one(value: object) -> None:
    assert encode(value, max_bytes=1000) == values._Encoder(1000, 200).run(value, 0)
    assert decode(encode(value)) == value


def test_a_string_just_over_the_limit_is_refused_on_the_short_path_too() -> None:
    assert encode("x" * 98, max_bytes=100) == "x" * 98
    with pytest.raises(EncodingError):
        encode("x" * 99, max_bytes=100)


@pytest.mark.parametrize(
    "value",
    [{float("nan"): 1}, frozenset({float("nan")}), {(float("nan"), 2): "x"}, {"k": {Decimal("NaN")}}],
    ids=["nan key", "nan element", "nan in a tuple key", "decimal nan in a nested set"],
)
def test_a_nan_in_a_set_element_or_dict_key_equals_a_nan_in_the_same_place(value: object) -> None:
    assert values_equal(decode(encode(value)), decode(encode(value)))


def test_containers_that_differ_beside_their_nans_are_still_different() -> None:
    assert not values_equal({float("nan"): 1}, {float("nan"): 2})
    assert not values_equal({float("nan"), 1}, {float("nan"), 2})
    assert not values_equal({(float("nan"),): 1}, {(1.0,): 1})
