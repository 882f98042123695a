"""The scorer under `--protocol reference`: the reference's code-match rule, its judge reading, its code extraction."""

from __future__ import annotations

import anyio
import pytest
from fakellm import FakeLLM
from fakereference import write_checkout

from pau_mcp.llm import LLMClient
from pau_mcp.manifests import ManifestStore, Method
from pau_mcp.manifests.checks import freeze_method
from pau_mcp.prompts import import_reference
from pau_mcp.protocol import Protocol, load_protocol
from pau_mcp.scoring import (
    JudgeResult,
    extract_code_reference,
    judge_description,
    match_code,
    parse_rating_anywhere,
)
from wasm_runtime import Limits, Sandbox

OURS = load_protocol()
ROOMY = Limits(timeout_s=10)  # so only the protocol's own per-input limit can stop the slow code below


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Protocol:
    data = tmp_path_factory.mktemp("data")
    import_reference(write_checkout(tmp_path_factory.mktemp("checkout")), data)
    return load_protocol("reference", data)


def _frozen(sandbox: Sandbox, source: list[str], inputs: list[str]) -> Method:
    method = Method.model_validate({
        "id": "demo/m", "header": "def test_func(arg0):", "params": ["arg0"], "source": source,
        "description": "gold", "tests": [{"input": text} for text in inputs],
        "provenance": {"dataset": "test"}, "tags": {"arity": 1},
    })  # fmt: skip
    return freeze_method(method, sandbox)


def _score(sandbox: Sandbox, method: Method, body: str, protocol: Protocol) -> float:
    code = f"def test_func(arg0):\n    {body}\n"
    result = anyio.run(lambda: match_code(sandbox, method, code, limits=ROOMY, protocol=protocol))
    assert result.status == "scored", result.reason
    assert result.fraction is not None
    return result.fraction


def test_a_returned_tuple_never_matches_under_the_reference_rule_because_json_made_the_expected_value_a_list(
    sandbox: Sandbox, reference: Protocol
) -> None:
    sorting = ManifestStore().method("builtin/b013")  # returns a tuple
    exact = "return tuple(sorted(arg0, key=lambda v: (abs(v), v)))"
    as_list = "return sorted(arg0, key=lambda v: (abs(v), v))"
    assert _score(sandbox, sorting, exact, OURS) == 1.0
    assert _score(sandbox, sorting, exact, reference) == 0.0
    assert _score(sandbox, sorting, as_list, OURS) == 0.0
    assert _score(sandbox, sorting, as_list, reference) == 1.0


def test_int_dict_keys_become_strings_on_the_expected_side_only(sandbox: Sandbox, reference: Protocol) -> None:
    method = _frozen(sandbox, ["def test_func(arg0):", "    return {arg0: 'x'}"], ["(1,)", "(2,)"])
    assert _score(sandbox, method, "return {arg0: 'x'}", OURS) == 1.0
    assert _score(sandbox, method, "return {arg0: 'x'}", reference) == 0.0
    assert _score(sandbox, method, "return {str(arg0): 'x'}", reference) == 1.0


def test_every_error_counts_as_none_under_the_reference_rule(sandbox: Sandbox, reference: Protocol) -> None:
    method = _frozen(
        sandbox,
        ["def test_func(arg0):", "    if arg0 < 0:", "        raise ValueError('negative')", "    return arg0"],
        ["(-1,)", "(2,)"],
    )
    other_error = "if arg0 < 0:\n        raise TypeError('other')\n    return arg0"
    returns_none = "if arg0 < 0:\n        return None\n    return arg0"
    assert _score(sandbox, method, other_error, OURS) == 0.5
    assert _score(sandbox, method, other_error, reference) == 1.0
    assert _score(sandbox, method, returns_none, OURS) == 0.5
    assert _score(sandbox, method, returns_none, reference) == 1.0


def test_code_slower_than_the_references_per_input_limit_scores_nothing_there(
    sandbox: Sandbox, reference: Protocol
) -> None:
    method = _frozen(sandbox, ["def test_func(arg0):", "    return arg0"], ["(1,)"])
    # About 1.4e10 fuel (1,150 a turn): over the reference's 0.5 s budget (1e10 at FUEL_PER_SECOND 2e10), well
    # within the roomy limit; natively 0.6-1.2 s, slower than the reference's per-input timeout there too.
    slow = "x = 0\n    for i in range(12_000_000):\n        x += i\n    return arg0"
    assert _score(sandbox, method, slow, OURS) == 1.0
    assert _score(sandbox, method, slow, reference) == 0.0


def test_code_that_sleeps_past_the_references_half_second_still_matches_here_a_documented_difference(
    sandbox: Sandbox, reference: Protocol
) -> None:
    method = _frozen(sandbox, ["def test_func(arg0):", "    return arg0"], ["(1,)"])
    # The reference's 0.5 s is wall time, so this scores 0 there; the sandbox's clock is virtual (the same result on
    # every machine), a sleep costs no CPU, and the limit counts CPU: docs/protocol.md lists the difference.
    sleepy = "import time\n    time.sleep(2)\n    return arg0"
    assert _score(sandbox, method, sleepy, reference) == 1.0


@pytest.mark.parametrize(
    ("reply", "rating"),
    [
        ("It is close. Rating: 4", 4),
        ("RATING:5 then more text", 5),
        ("first rating: 2, later Rating: 5", 2),
        ("an explanation [STOP] Rating: 5", None),  # the reply ends at [STOP]
        ("Rating: 7", None),
        ("no verdict", None),
    ],
)
def test_the_reference_reads_the_first_rating_anywhere_before_stop(reply: str, rating: int | None) -> None:
    assert parse_rating_anywhere(reply) == rating


def test_the_reference_judge_sends_its_prompt_alone_with_300_tokens_and_scores_a_mid_reply_rating(
    reference: Protocol, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeLLM() as fake:
        fake.say("Mostly right. Rating: 3, though I hesitate.")
        fake.say("Nothing to say.")
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")

        async def go() -> list[JudgeResult]:
            llm = LLMClient(cache_path=None)
            try:
                return [
                    await judge_description(llm, "openai/j", "gold", "guess", temperature=None, protocol=reference),
                    await judge_description(llm, "openai/j", "gold", "guess", temperature=None, protocol=reference),
                ]
            finally:
                await llm.aclose()

        scored, unscored = anyio.run(go)
    assert (scored.status, scored.rating) == ("scored", 3)
    assert unscored.reason is not None
    assert unscored.status == "unscored" and "rating: X" in unscored.reason
    body = fake.requests[0]
    assert body["messages"] == [{"role": "user", "content": "\nJUDGE true=gold\nhyp=guess\nExplanation (very short):"}]
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 300 and "temperature" not in body


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("Reasoning: r\nCode:\n```python\ndef f():\n    pass\n```\n[STOP]", "def f():\n    pass"),
        ("```\ndef g(): pass\n```", "def g(): pass"),
        ("```py\ndef h(): pass\n```", "py\ndef h(): pass"),  # only ```python is a language tag to it
        ("```python\ndef cut_short(", "python\ndef cut_short("),  # one fence: all after it
        ("def no_fence(): pass", None),
        ("[STOP] ```python\nx = 1\n```", None),
    ],
)
def test_the_code_writers_code_is_read_by_the_references_rules(reply: str, code: str | None) -> None:
    assert extract_code_reference(reply) == code
