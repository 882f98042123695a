"""outcomes_match is the one rule the scorer uses to compare behaviour."""

from __future__ import annotations

from wasm_runtime import Outcome, Status, encode, outcomes_match


def ok(value: object) -> Outcome:
    return Outcome(status=Status.OK, value=repr(value), value_type=type(value).__name__, encoded=encode(value))


def err(kind: str, message: str = "m") -> Outcome:
    return Outcome.failure(Status.ERROR, kind, message)


def test_equal_values_match_and_different_values_do_not() -> None:
    assert outcomes_match(ok([1, 2]), ok([1, 2]))
    assert not outcomes_match(ok([1, 2]), ok([2, 1]))
    assert not outcomes_match(ok((1, 2)), ok([1, 2]))
    assert outcomes_match(ok(float("nan")), ok(float("nan")))


def test_values_equal_under_python_equality_match_though_encoded_differently() -> None:
    assert outcomes_match(ok(1), ok(1.0))
    assert outcomes_match(ok({"a": 1, "b": 2}), ok({"b": 2, "a": 1}))
    assert outcomes_match(ok(-0.0), ok(0.0))
    assert not outcomes_match(ok({"a": 1}), ok({"a": 2}))


def test_a_nan_matches_a_nan_in_the_same_place_inside_containers() -> None:
    nan = float("nan")
    assert outcomes_match(ok([1, (nan, 2)]), ok([1, (nan, 2)]))
    assert outcomes_match(ok({nan}), ok({nan}))
    assert not outcomes_match(ok([nan, 1]), ok([1, nan]))


def test_same_exception_type_matches_whatever_the_message() -> None:
    assert outcomes_match(err("ValueError", "a"), err("ValueError", "b"))
    assert not outcomes_match(err("ValueError"), err("TypeError"))
    assert not outcomes_match(ok(None), err("ValueError"))


def test_other_statuses_match_only_the_same_status() -> None:
    timeout = Outcome.failure(Status.TIMEOUT, "Timeout", "t")
    memory = Outcome.failure(Status.MEMORY, "MemoryError", "m")
    assert outcomes_match(timeout, Outcome.failure(Status.TIMEOUT, "Timeout", "other"))
    assert not outcomes_match(timeout, memory)


def test_outcome_round_trips_through_a_dict() -> None:
    outcome = ok({1: (2,)})
    back = Outcome.from_dict(outcome.to_dict())
    assert back == outcome
    assert back.decoded() == {1: (2,)}


def test_a_dict_of_an_outcome_is_the_callers_to_change_and_leaves_out_what_is_never_recorded() -> None:
    outcome = Outcome(status=Status.OK, value="[1]", value_type="list", encoded=encode([1]), extra={"k": 1})
    data = outcome.to_dict()
    assert "extra" not in data and "phases" not in data and data["status"] == "ok"
    data["encoded"].append(0)  # the encoding of a list is a list
    assert outcome.decoded() == [1] and Outcome.from_dict(outcome.to_dict()) == outcome


def test_failure_messages_are_cut_at_500_characters() -> None:
    message = Outcome.failure(Status.ERROR, "E", "x" * 2000).error_message
    assert message is not None and len(message) == 500
