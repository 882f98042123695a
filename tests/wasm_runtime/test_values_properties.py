"""Properties of the typed encoding over generated values and generated garbage."""

from __future__ import annotations

import json
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wasm_runtime import Outcome, Status, compare_outcomes, outcomes_match
from wasm_runtime._guest_outcome import encoded_chars
from wasm_runtime.values import MAX_ENCODED_NESTING, EncodingError, decode, encode, values_equal

FAST = settings(max_examples=60, deadline=None)

any_char = st.characters(codec=None, categories=None)
floats = st.floats(allow_nan=True, allow_infinity=True)
hashable_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**200), max_value=10**200)
    | floats
    | st.complex_numbers()
    | st.text(any_char, max_size=8)
    | st.binary(max_size=8)
    | st.decimals(allow_nan=False)
    | st.fractions()
)
hashables = st.recursive(
    hashable_scalars, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6
)
any_values = st.recursive(
    hashable_scalars | st.binary(max_size=8).map(bytearray),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(hashables, inner, max_size=4)
        | st.sets(hashables, max_size=4)
        | st.frozensets(hashables, max_size=4)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down; NaNs equal NaNs; floats by repr (-0.0 is not 0.0)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return repr(a) == repr(b)
    if isinstance(a, complex):
        return same(a.real, b.real) and same(a.imag, b.imag)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):  # items in order: encode keeps a dict's order (NaN keys are only equal in place)
        return same(list(a.items()), list(b.items()))
    if isinstance(a, (set, frozenset)):
        return values_equal(a, b) or len(a) == len(b)  # NaNs in sets are distinct objects: equal only by count
    if isinstance(a, Decimal):
        return str(a) == str(b)
    return bool(a == b)


def through_json(value: object) -> Any:
    return decode(json.loads(json.dumps(encode(value))))


@FAST
@given(any_values)
def test_any_value_round_trips_through_json_with_its_type_and_value(value: object) -> None:
    assert same(through_json(value), value)


@FAST
@given(st.sets(hashables, max_size=8))
def test_a_sets_encoding_does_not_depend_on_the_order_it_was_built_in(items: set[object]) -> None:
    backwards: set[object] = set()
    for item in reversed(list(items)):
        backwards.add(item)
    assert json.dumps(encode(items)) == json.dumps(encode(backwards))


@FAST
@given(any_values, any_values)
def test_equal_encodings_mean_equal_values_and_outcomes_match_follows_values_equal(a: object, b: object) -> None:
    if json.dumps(encode(a)) == json.dumps(encode(b)):
        assert values_equal(decode(encode(a)), decode(encode(b)))

    def ok(value: object) -> Outcome:
        return Outcome(status=Status.OK, value=repr(value), encoded=json.loads(json.dumps(encode(value))))

    expected = values_equal(through_json(a), through_json(b))
    assert outcomes_match(ok(a), ok(b)) is expected
    assert compare_outcomes(ok(a), ok(b)).matched is expected


@FAST
@given(any_values, st.integers(min_value=64, max_value=4096))
def test_an_encoding_within_the_budget_is_never_refused_by_the_hosts_cap(value: object, budget: int) -> None:
    try:
        data = encode(value, max_bytes=budget)
    except EncodingError as exc:
        assert exc.reason == "too_large"
        return
    # The host refuses an encoding whose JSON (ASCII escapes, as the guest writes it) passes this cap.
    assert len(json.dumps(data, separators=(",", ":"))) <= _encoded_chars_for(budget)


def _encoded_chars_for(budget: int) -> int:
    from wasm_runtime import Limits

    return encoded_chars(Limits(max_output_bytes=budget))


@FAST
@given(st.integers(min_value=1, max_value=200), st.sampled_from(["list", "tuple", "dict"]))
def test_nesting_up_to_the_depth_limit_round_trips_and_past_it_is_refused(depth: int, kind: str) -> None:
    def wrap(inner: object) -> object:
        return [inner] if kind == "list" else (inner,) if kind == "tuple" else {"k": inner}

    value: object = None
    for _ in range(depth):
        value = wrap(value)
    assert values_equal(through_json(value), value)
    too_deep = value
    for _ in range(201 - depth):
        too_deep = wrap(too_deep)
    with pytest.raises(EncodingError) as refused:
        encode(too_deep)
    assert refused.value.reason == "too_deep"


def test_the_deepest_encoding_encode_makes_is_within_what_decode_accepts() -> None:
    from collections import OrderedDict

    value: object = complex(float("nan"), 1)
    for _ in range(200):
        value = {1: value}
    data = json.loads(json.dumps(encode(value)))
    assert values_equal(decode(data), value)
    subclassed: object = 1
    for _ in range(100):
        subclassed = OrderedDict(k=subclassed)
    assert values_equal(decode(json.loads(json.dumps(encode(subclassed)))), subclassed)
    deeper: object = 1
    for _ in range(MAX_ENCODED_NESTING + 1):
        deeper = [deeper]
    with pytest.raises(EncodingError):
        decode(deeper)


json_leaves = st.none() | st.booleans() | st.integers() | st.floats() | st.text(any_char, max_size=6)
TAGS = ["int", "float", "tuple", "dict", "set", "frozenset", "bytes", "bytearray", "complex", "decimal", "fraction",
        "opaque", "type", "sub", "of"]  # fmt: skip
tagged_garbage = st.recursive(
    json_leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(TAGS) | st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=15,
)


@FAST
@given(tagged_garbage)
def test_decoding_any_json_data_gives_a_value_or_encoding_error(data: object) -> None:
    try:
        decode(data)
    except EncodingError as exc:
        assert exc.reason in ("malformed", "too_deep") and str(exc)


@FAST
@given(st.binary(max_size=64))
def test_random_bytes_parsed_as_json_or_not_never_decode_to_another_error(raw: bytes) -> None:
    for data in (raw, raw.decode("latin-1")):
        try:
            decoded = decode(json.loads(data))
        except (ValueError, UnicodeDecodeError) as exc:  # not JSON; or JSON that is not an encoding
            assert not isinstance(exc, EncodingError) or exc.reason in ("malformed", "too_deep")
        else:
            assert decoded is None or isinstance(decoded, (bool, int, float, str, list))
    with pytest.raises(EncodingError):
        decode(raw)


@pytest.mark.parametrize(
    "data",
    [
        {"set": [{"int": str(k * (2**61 - 1))} for k in range(1, 3000)]},
        {"dict": [[{"int": str(k * (2**61 - 1))}, 0] for k in range(1, 3000)]},
        {"int": "9" * 5000},
        {"fraction": [1, 0]},
        {"set": [[1]]},
        {"sub": "x"},
        {"opaque": ["x"]},
        {"tuple": "abc"},
        {"float": 1.5},
        {"complex": [1]},
        (1, 2),
        b"\x00",
    ],
    ids=lambda d: repr(d)[:40],
)
def test_malformed_encodings_raise_encoding_error_and_nothing_else(data: object) -> None:
    with pytest.raises(EncodingError) as refused:
        decode(data)
    assert refused.value.reason == "malformed"
    assert len(str(refused.value)) < 200


@FAST
@given(floats)
def test_every_float_round_trips_bit_for_bit(number: float) -> None:
    back = through_json(number)
    assert (math.isnan(back) and math.isnan(number)) or repr(back) == repr(number)


@FAST
@given(st.fractions(), st.decimals(allow_nan=True))
def test_fractions_and_decimals_round_trip(fraction: Fraction, decimal: Decimal) -> None:
    assert through_json(fraction) == fraction and type(through_json(fraction)) is Fraction
    assert str(through_json(decimal)) == str(decimal)
