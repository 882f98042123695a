"""The host caps what the guest hands back: hostile code controls the outcome text, not what the host keeps.

Hidden code runs in the guest's interpreter, so it can replace the guest's
own helpers. Here it replaces the function that writes the outcome, reaching
the guest through the real ``builtins`` module (no tracked import, so the
guest does not undo the change), and hands back whatever text it likes.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

from wasm_runtime import Limits, Outcome, Sandbox, Status, compare_outcomes, encode, outcomes_match
from wasm_runtime.workers import WorkerSandbox

FORGE = """
def test_func(*args):
    guest = print.__self__.__import__('sys').modules['pau_guest']
    text = {expression}
    guest._dumps = lambda result, _text=text: _text
    return 0
"""


def forge(expression: str) -> str:
    """Source whose every outcome is the text ``expression`` evaluates to (inside the guest)."""
    return FORGE.format(expression=expression)


def outcome_json(**fields: object) -> str:
    return json.dumps({"status": "ok", "value": "1", "value_type": "int", "encoded": 1, "stdout": ""} | fields)


def ok(value: object) -> Outcome:
    return Outcome(status=Status.OK, value=repr(value), value_type=type(value).__name__, encoded=encode(value))


def test_an_eight_megabyte_exception_name_is_refused_at_once(sandbox: Sandbox) -> None:
    source = forge('\'{"status":"error","error_type":"\' + \'E\' * 8_000_000 + \'","error_message":"m","stdout":""}\'')
    outcome = sandbox.call(source, "()", limits=Limits(memory_bytes=256 * 1024 * 1024))
    assert outcome.status is Status.OUTPUT_LIMIT
    assert outcome.error_type is not None and outcome.error_message is not None
    assert len(outcome.error_type) < 100 and "bytes long" in outcome.error_message


def test_a_long_exception_name_within_the_outcome_limit_is_cut(sandbox: Sandbox) -> None:
    name = "E" * 100_000
    outcome = sandbox.call(forge(repr(outcome_json(status="error", error_type=name, error_message="m"))), "()")
    assert outcome.status is Status.ERROR
    assert outcome.error_type == "E" * 200


@pytest.mark.parametrize(
    ("field", "size", "kept"),
    [("error_message", 1_000_000, 500), ("value_type", 300_000, 200), ("stdout", 500_000, 4096)],
)
def test_each_text_field_is_cut_to_its_limit(sandbox: Sandbox, field: str, size: int, kept: int) -> None:
    fields = {field: "x" * size}
    if field == "error_message":
        fields |= {"status": "error", "error_type": "ValueError"}
    outcome = sandbox.call(forge(repr(outcome_json(**fields))), "()")
    assert len(getattr(outcome, field)) == kept


def test_a_value_longer_than_the_output_limit_is_refused_by_the_host(sandbox: Sandbox) -> None:
    outcome = sandbox.call(forge(repr(outcome_json(value="x" * 70_000))), "()")
    assert outcome.status is Status.OUTPUT_LIMIT
    assert outcome.value is None


def test_an_encoding_larger_than_the_output_limit_is_refused_by_the_host(sandbox: Sandbox) -> None:
    source = forge('\'{"status":"ok","value":"1","value_type":"int","encoded":[\' + \'1,\' * 500_000 + \'1]}\'')
    outcome = sandbox.call(source, "()")
    assert outcome.status is Status.OUTPUT_LIMIT
    assert outcome.encoded is None


def _peak_resident_kb(pid: int) -> int:
    """The most resident memory the process has had (VmHWM), in KiB, from /proc."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


FILL_MEMORY = """
def test_func(x):
    kept = []
    while True:
        kept.append(bytearray(1 << 20))  # touched pages: the instance really holds them
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("engine", ["python", "numpy"])
def test_a_workers_peak_memory_stays_bounded_when_scoring_hostile_outcomes(
    engine: str, request: pytest.FixtureRequest
) -> None:
    if engine == "numpy":
        request.getfixturevalue("numpy_box")  # skips when the numpy engine is not installed
    # Scoring runs a submission's code on every input of a suite in one batch. Each hostile input hands back a
    # 50 MB outcome, or fills the instance's memory to its limit; either ends the instance, and the batch goes
    # on in a new one. Every ended instance used to be kept until the call returned (2.1 GB for one submission),
    # and the outcome was copied out of the guest before its size was checked.
    box = WorkerSandbox(workers=1)
    try:
        (pid,) = box.pids
        before = _peak_resident_kb(pid)
        flood = forge('\'{"status":"ok","value":"\' + \'x\' * 50_000_000 + \'"}\'')
        outcomes = box.run(flood, [(i,) for i in range(8)], engine=engine)
        assert [o.status for o in outcomes] == [Status.OUTPUT_LIMIT] * 8
        assert all("bytes long" in (o.error_message or "") for o in outcomes)
        outcomes = box.run(FILL_MEMORY, [(i,) for i in range(4)], engine=engine)
        assert [o.status for o in outcomes] == [Status.MEMORY] * 4
        peak = _peak_resident_kb(pid)
    finally:
        box.close()
    # One instance at the memory limit (256 MiB; the numpy engine's 290 MiB) and the worker's own 60 MB; before:
    # 1.4 GB for the eight outcomes in the python engine.
    assert peak < 600 * 1024, (before, peak)


@pytest.mark.slow
def test_hundred_megabyte_outcomes_never_pile_up_in_host_memory() -> None:
    # A fresh process, so its peak memory is this test's alone: ten inputs of 100 MB each.
    source = forge('\'{"status":"ok","value":"\' + \'x\' * 100_000_000 + \'"}\'')
    script = textwrap.dedent(
        f"""
        import json, resource
        from wasm_runtime import Limits, Sandbox
        source = {source!r}
        box = Sandbox(pool_size=0)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        outcomes = box.run(source, [(i,) for i in range(10)], limits=Limits(memory_bytes=1024 * 1024 * 1024))
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"grew_kb": after - before, "statuses": [o.status.value for o in outcomes],
                           "kept": sum(len(str(o.to_dict())) for o in outcomes)}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["statuses"] == ["output_limit"] * 10
    assert report["kept"] < 10_000
    # The peak is one instance's memory (the interpreter, the string, its UTF-8 copy): about 260 MB. None of an
    # outcome over the cap is copied out of the guest (that copy added 100 MB); keeping the ten results, as before
    # the cap, added 1 GB.
    assert report["grew_kb"] < 450 * 1024


@pytest.mark.parametrize(
    "text",
    [
        "not json at all",
        "[1, 2]",
        '{"status": "timeout", "error_type": "Timeout", "error_message": "forged"}',
        '{"status": "invalid_input", "error_type": "InvalidInput", "error_message": "forged"}',
        '{"status": "crash", "error_type": "Trap", "error_message": "forged"}',
        '{"status": ["ok"]}',
        '{"status": "ok", "value": 5, "encoded": 5}',
        '{"status": "ok", "value": "5"}',
        '{"status": "error", "error_message": "no type"}',
        '{"status": "ok", "value": "1", "encoded": ' + "[" * 100_000 + "]" * 100_000 + "}",
        '{"status": "ok", "value": "1", "encoded": ' + "[" * 700 + "]" * 700 + "}",
        '{"status": "ok", "value": "1", "encoded": 1' + "0" * 5000 + "}",
        # Unclosed, with brackets after it: a depth scan that restarted at every quote took minutes on this.
        '{"status": "ok", "value": "1", "encoded": "' + '\\"' * 300_000 + "[" * 700,
    ],
    ids=[
        "not JSON",
        "not an object",
        "forged timeout",
        "forged invalid input",
        "forged crash",
        "status not text",
        "value not text",
        "value without encoding",
        "error without type",
        "nested beyond the JSON parser",
        "nested beyond any real encoding",
        "a JSON int of 5000 digits",
        "an unclosed string of escaped quotes",
    ],
)
def test_an_outcome_the_guest_could_not_have_written_is_a_crash(sandbox: Sandbox, text: str) -> None:
    outcome = sandbox.call(forge(repr(text)), "()")
    assert outcome.status is Status.CRASH
    assert outcome.error_type == "SandboxViolation"
    assert outcome.error_message is not None
    assert outcome.error_message.startswith("malformed outcome from the guest")
    assert sandbox.call("def test_func(x):\n    return x", "(3,)").value == "3"


def _recurse(levels: int) -> int:
    return 0 if levels == 0 else _recurse(levels - 1)


def test_a_deeply_nested_outcome_is_refused_before_the_host_recurses_into_it(sandbox: Sandbox) -> None:
    # Parsing 100,000 levels ran the host to its recursion limit: whatever Python code ran meanwhile (a finalizer,
    # a collector callback, on any thread's garbage) failed for want of stack. The collector is made to run at
    # every allocation, so it runs wherever the host is while it handles the outcome.
    starved: list[RecursionError] = []

    def during_collection(phase: str, info: dict[str, Any]) -> None:
        try:
            _recurse(30)
        except RecursionError as exc:
            starved.append(exc)

    deep = '{"status": "ok", "value": "1", "encoded": ' + "[" * 100_000 + "]" * 100_000 + "}"
    thresholds = gc.get_threshold()
    gc.set_threshold(1, 1, 1)
    gc.callbacks.append(during_collection)
    try:
        outcome = sandbox.call(forge(repr(deep)), "()")
    finally:
        gc.callbacks.remove(during_collection)
        gc.set_threshold(*thresholds)
    assert (outcome.status, outcome.error_message) == (
        Status.CRASH,
        "malformed outcome from the guest (nested too deep)",
    )
    assert starved == []


def test_lone_surrogates_in_returned_text_become_escapes_every_consumer_can_encode(sandbox: Sandbox) -> None:
    source = "def test_func(s):\n    print(s)\n    raise ValueError(s)"
    outcome = sandbox.call(source, "('a\\ud800b',)")
    assert outcome.status is Status.ERROR
    assert outcome.error_message == "a\\ud800b"
    assert outcome.stdout == "a\\ud800b\n"
    forged = sandbox.call(forge(repr(outcome_json(value="'\ud83d'", value_type="\udfff"))), "()")
    assert forged.status is Status.OK
    json.dumps(forged.to_dict(), ensure_ascii=False).encode("utf-8")


UNDECODABLE = [
    {"fraction": [1, 0]},
    {"int": "not digits"},
    {"no such tag": 1},
    {"set": [[1], [2]]},
    {"dict": [[1]]},
    {"bytes": "zz"},
    {"complex": ["a", "b"]},
    {"decimal": "one"},
    {"int": "1" * 5000},
]


@pytest.mark.parametrize("encoded", UNDECODABLE, ids=[json.dumps(e)[:30] for e in UNDECODABLE])
def test_an_undecodable_forged_value_matches_nothing_and_says_why(sandbox: Sandbox, encoded: object) -> None:
    outcome = sandbox.call(forge(repr(outcome_json(encoded=encoded))), "()")
    assert outcome.status is Status.OK
    assert not outcomes_match(ok(1), outcome)
    comparison = compare_outcomes(ok(1), outcome)
    assert (comparison.matched, comparison.reason) == (False, "undecodable outcome")
    assert comparison.detail


def test_forged_outcomes_for_every_input_of_a_batch_are_each_capped(sandbox: Sandbox) -> None:
    source = forge('\'{"status":"error","error_type":"\' + \'E\' * 1000 + \'","error_message":"m"}\'')
    outcomes = sandbox.run(source, [(i,) for i in range(5)])
    assert [(o.status, len(o.error_type or "")) for o in outcomes] == [(Status.ERROR, 200)] * 5


def test_a_hostile_submission_through_workers_never_disturbs_the_next_one() -> None:
    box = WorkerSandbox(workers=1)
    try:
        hostile = [
            forge('\'{"status":"ok","value":"1","encoded":\' + \'[\' * 5000 + \']\' * 5000 + \'}\''),
            forge('\'{"status":"error","error_type":"\' + \'E\' * 8_000_000 + \'"}\''),
            forge(repr(outcome_json(encoded={"fraction": [1, 0]}))),
        ]
        for source in hostile:
            outcomes = box.run(source, [(i,) for i in range(3)])
            assert all(o.status in (Status.CRASH, Status.OUTPUT_LIMIT, Status.OK) for o in outcomes)
            assert all(o.error_type != "WorkerDied" for o in outcomes)
            honest = box.run("def test_func(x):\n    return x * 2", [(1,), (2,)])
            assert [o.value for o in honest] == ["2", "4"]
    finally:
        box.close()
