"""Scored code is hostile: what it hands back (values, encodings, exceptions, printed text) never steers the scorer.

Every test runs real hostile code through the real wasmtime sandbox. Code can reach the guest's own
encoder (``_pau_values``) and the host's hand-over function (``host.next``), so it can hand back any
outcome it likes; the scorer must count such an outcome as no match, say so in fixed words, repeat
nothing the code produced, and go on scoring everything else as before.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from stand_ins import RefusingSandbox

from pau_mcp.manifests import ManifestStore
from pau_mcp.scoring import FAILURE_KINDS, CodeMatch, Scorer, match_code
from wasm_runtime import Limits, Outcome, Sandbox, SandboxInterface, Status
from wasm_runtime.workers import WorkerSandbox

STORE = ManifestStore()
RUNS = STORE.method("builtin/b002")  # run-length pairs of a string: 20 test inputs, all strings
N = len(RUNS.tests)
FAST = Limits(timeout_s=0.5)
LOOP = Limits(timeout_s=0.02)
HEXES = [json.dumps(bytes(case.input, "utf-8").hex()) for case in RUNS.tests]  # how the leaks below spell inputs


def score(sandbox: SandboxInterface, code: str | None, **options: Any) -> CodeMatch:
    async def go() -> CodeMatch:
        with anyio.fail_after(120):
            return await match_code(sandbox, RUNS, code, **options)

    return anyio.run(go)


def agent_view(sandbox: SandboxInterface, code: str, counterexample: bool = True) -> dict[str, Any]:
    scorer = Scorer(STORE, sandbox, llm=None)

    async def go() -> dict[str, Any]:
        with anyio.fail_after(120):
            result = await scorer.score(RUNS.id, code=code, counterexample=counterexample)
        return result.feedback()

    return anyio.run(go)


def only_fixed_words(reason: str | None) -> bool:
    """True when a reason is made of counts and the scorer's fixed categories, nothing the code produced."""
    kinds = "|".join(re.escape(kind) for kind in FAILURE_KINDS.values())
    template = rf"every test input fails the same way \(({kinds})\)|\d+ of \d+ test inputs differ \(\d+ ({kinds})(, \d+ ({kinds}))*\)"
    return re.fullmatch(template, reason or "") is not None


# -- forged encodings --------------------------------------------------------------------------

_THROUGH_THE_ENCODER = (
    "import _pau_values\n{setup}\n"
    "def test_func(arg0):\n"
    "    _pau_values.encode = lambda *args, **kwargs: v\n"
    "    return 1\n"
)


@pytest.mark.parametrize(
    "setup",
    [
        "v = {'bogus': 1}",  # an unknown tag
        "v = {}",  # an empty object
        "v = {'set': [[1]]}",  # an unhashable set element
        "v = {'dict': [[[1], 2]]}",  # an unhashable key
        "v = {'int': '9' * 10000}",  # more digits than int() takes
        "v = {'fraction': [1, 0]}",  # a zero denominator
        "v = {'complex': []}",  # a complex with no parts
        "v = {'bytes': 'zz'}",  # bytes that are not hex
        "v = [1, {'nope': 2}]",  # a bad tag inside a list
        "v = 1\nfor _ in range(600):\n    v = [v]",  # nesting the guest encodes but the host cannot decode
    ],
    ids=["unknown-tag", "empty", "set", "key", "bigint", "fraction", "complex", "bytes", "nested-tag", "deep"],
)
def test_a_forged_encoding_is_no_match_with_a_fixed_reason_and_the_scorer_goes_on(sandbox: Sandbox, setup: str) -> None:
    result = score(sandbox, _THROUGH_THE_ENCODER.format(setup=setup), counterexample=True)
    assert result.status == "scored" and result.fraction == 0.0
    assert only_fixed_words(result.reason), result.reason
    assert result.reason in (
        f"every test input fails the same way ({FAILURE_KINDS['undecodable']})",
        f"every test input fails the same way ({FAILURE_KINDS['crash']})",  # a sandbox that refuses the forgery
    )
    assert score(sandbox, RUNS.source).fraction == 1.0  # the next score is unaffected


@pytest.mark.parametrize(
    "outcome",
    [
        '{"status": "ok", "value": "1", "encoded": ' + "[" * 700 + "]" * 700 + "}",
        '{"status": "ok", "value": "1", "encoded": {"set": [[1]]}}',
        '{"status": "ok", "value": "1", "encoded": {"tuple": 5}}',
        '{"status": "nonsense"}',
        "{not json",
    ],
    ids=["deep", "unhashable", "not-a-list", "unknown-status", "not-json"],
)
def test_an_outcome_handed_straight_to_the_host_is_no_match_and_the_scorer_goes_on(
    sandbox: Sandbox, outcome: str
) -> None:
    code = f"from wit_world.imports import host\ndef test_func(arg0):\n    host.next({outcome!r})\n    return 1\n"
    result = score(sandbox, code, counterexample=True)
    assert result.status == "scored" and result.fraction == 0.0
    assert only_fixed_words(result.reason), result.reason
    assert score(sandbox, RUNS.source).fraction == 1.0


def test_code_that_forges_some_outcomes_still_scores_the_inputs_it_answers(sandbox: Sandbox) -> None:
    code = RUNS.source.replace("def test_func(arg0):", "def _gold(arg0):", 1) + (
        "\nimport _pau_values\n"
        "def test_func(arg0):\n"
        "    if len(arg0) > 4:\n"
        "        _pau_values.encode = lambda *args, **kwargs: {'bogus': 1}\n"
        "    return _gold(arg0)\n"
    )
    forged = sum(len(eval(case.input)[0]) > 4 for case in RUNS.tests)
    result = score(sandbox, code)
    assert 0 < forged < N
    assert result.fraction == pytest.approx(1 - forged / N)
    assert result.reason in (
        f"{forged} of {N} test inputs differ ({forged} {FAILURE_KINDS['undecodable']})",
        f"{forged} of {N} test inputs differ ({forged} {FAILURE_KINDS['crash']})",
    )


class _Forging(RefusingSandbox):
    """Hands back these outcomes for every batch, as a guest that got past every check of the sandbox would."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        self.outcomes = outcomes

    async def arun(
        self, source: str, inputs: Sequence[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        return self.outcomes[: len(inputs)] if len(inputs) > 1 else self.outcomes[:1]


def test_an_undecodable_value_is_counted_as_could_not_be_decoded_and_alone_gives_a_counterexample() -> None:
    forged = Outcome(status=Status.OK, value="1", encoded={"set": [[1]]})
    result = anyio.run(lambda: match_code(_Forging([forged] * N), RUNS, "def test_func(arg0):\n    return 1\n"))
    assert result.fraction == 0.0 and result.failures == {FAILURE_KINDS["undecodable"]: N}
    assert result.reason == f"every test input fails the same way ({FAILURE_KINDS['undecodable']})"
    alone = anyio.run(
        lambda: match_code(_Forging([forged] * N), RUNS, "def test_func(arg0):\n    return 1\n", counterexample=True)
    )
    assert alone.counterexample is not None and alone.counterexample.input == RUNS.tests[0].input


class _Broken(RefusingSandbox):
    """A sandbox whose infrastructure fails (a worker that cannot start, an engine error)."""

    limits = Limits()

    async def arun(
        self, source: str, inputs: Sequence[str | tuple[Any, ...]], entry: str = "test_func",
        limits: Limits | None = None, fresh: bool = False, engine: str | None = None,
    ) -> list[Outcome]:  # fmt: skip
        raise RuntimeError("WasmtimeError: the engine gave up")


def test_a_sandbox_failure_is_an_error_result_for_that_code_not_an_exception() -> None:
    result = anyio.run(lambda: match_code(_Broken(), RUNS, RUNS.source, counterexample=True))
    assert result.status == "error" and result.fraction is None
    assert result.reason is not None
    assert "sandbox" in result.reason
    shown = anyio.run(lambda: Scorer(STORE, _Broken(), llm=None).score(RUNS.id, code=RUNS.source)).feedback()
    assert shown == {"direct_code_match": "error"}


# -- text the code produces is never repeated --------------------------------------------------

_LEAKS = {
    "exception-name": "def test_func(arg0):\n    raise type('LEAK_' + arg0.encode().hex(), (Exception,), {})()\n",
    "exception-message": "def test_func(arg0):\n    raise ValueError('LEAK_' + arg0.encode().hex())\n",
    "printed": "def test_func(arg0):\n    print('LEAK_' + arg0.encode().hex())\n    return None\n",
    "returned": "def test_func(arg0):\n    return 'LEAK_' + arg0.encode().hex()\n",
    "syntax-error-raised": "def test_func(arg0):\n    raise SyntaxError('LEAK_' + arg0.encode().hex())\n",
    "name-error-raised": "def test_func(arg0):\n    raise NameError('LEAK_' + arg0.encode().hex())\n",
}


@pytest.mark.parametrize("code", list(_LEAKS.values()), ids=list(_LEAKS))
def test_without_a_counterexample_nothing_the_code_produced_and_no_test_input_comes_back(
    sandbox: Sandbox, code: str
) -> None:
    shown = agent_view(sandbox, code, counterexample=False)
    text = json.dumps(shown)
    assert "LEAK_" not in text and not [h for h in HEXES if h.strip('"') in text]
    assert "counterexample" not in shown
    assert shown["direct_code_match"] == 0.0 and only_fixed_words(shown["direct_code_note"])


@pytest.mark.parametrize("code", list(_LEAKS.values()), ids=list(_LEAKS))
def test_a_counterexample_holds_the_input_and_the_expected_outcome_but_nothing_the_code_produced(
    sandbox: Sandbox, code: str
) -> None:
    shown = agent_view(sandbox, code, counterexample=True)
    assert set(shown["counterexample"]) == {"input", "expected"}
    first = RUNS.tests[0]
    assert first.outcome is not None
    assert shown["counterexample"] == {"input": first.input, "expected": first.outcome.shown()}
    assert "LEAK_" not in json.dumps(shown)


def test_the_reasons_name_fixed_categories_never_an_exception_type_the_code_chose(sandbox: Sandbox) -> None:
    result = score(sandbox, _LEAKS["exception-name"])
    assert result.reason == f"every test input fails the same way ({FAILURE_KINDS['error']})"
    assert result.failures == {FAILURE_KINDS["error"]: N}


def test_an_8_mb_exception_name_does_not_freeze_scoring_and_is_not_repeated(sandbox: Sandbox) -> None:
    code = "def test_func(arg0):\n    raise type('E' * 8_000_000, (Exception,), {})()\n"
    started = time.monotonic()
    result = score(sandbox, code, counterexample=True)
    shown = agent_view(sandbox, code)
    assert time.monotonic() - started < 60
    # The sandbox refuses an outcome this large before the host keeps it: the category says so.
    assert result.reason == f"every test input fails the same way ({FAILURE_KINDS['output_limit']})"
    assert len(json.dumps(shown)) < 1000 and "EEEE" not in json.dumps(shown)
    # What the operator keeps (the counterexample's own outcome) is clipped too.
    assert result.counterexample is not None
    assert len(result.counterexample.got) <= 2000


@pytest.mark.parametrize(
    ("code", "kind"),
    [
        ("def test_func(arg0):\n    print('x' * 10_000_000)\n    return []\n", "output_limit"),
        ("def test_func(arg0):\n    while True:\n        print('x' * 1000 + arg0)\n", "output_limit"),
        ("def test_func(arg0):\n    return 'x' * 10_000_000\n", "output_limit"),
        ("def test_func(arg0):\n    return [arg0] * 10_000_000\n", "output_limit"),
        ("def test_func(arg0):\n    return bytearray(300 * 2**20)\n", "memory"),
        ("def test_func(arg0):\n    while True:\n        pass\n", "timeout"),
        ("import os\ndef test_func(arg0):\n    os._exit(3)\n", "crash"),
    ],
    ids=["printed", "print-flood", "huge-string", "huge-list", "memory", "timeout", "exit"],
)
def test_huge_output_and_runaway_code_are_fixed_categories(sandbox: Sandbox, code: str, kind: str) -> None:
    # A loop burns its whole time limit on each of the 20 inputs: a short one is enough to show the category.
    result = score(sandbox, code, limits=LOOP if kind == "timeout" else FAST)
    assert result.status == "scored" and result.fraction == 0.0
    assert result.reason == f"every test input fails the same way ({FAILURE_KINDS[kind]})"


def test_code_with_a_lone_surrogate_scores_0_without_reaching_the_sandbox(worker_sandbox: WorkerSandbox) -> None:
    # Source that is not valid Unicode aborts the sandbox's process (a native free() failure): it never goes there.
    code = "def test_func(arg0):\n    return '" + chr(0xD800) + "'\n"
    result = score(worker_sandbox, code, counterexample=True)
    assert result.reason is not None
    assert result.status == "scored" and result.fraction == 0.0 and "not valid Unicode" in result.reason
    assert result.counterexample is None
    assert score(worker_sandbox, RUNS.source).fraction == 1.0


def test_one_hostile_submission_never_changes_anothers_score(worker_sandbox: WorkerSandbox) -> None:
    # In worker processes, as `pau-mcp score` and `pau-mcp scorer` run code, all at once.
    hostile = [
        _THROUGH_THE_ENCODER.format(setup="v = {'set': [[1]]}"),
        _THROUGH_THE_ENCODER.format(setup="v = 1\nfor _ in range(600):\n    v = [v]"),
        'from wit_world.imports import host\ndef test_func(arg0):\n    host.next(\'{"status": "ok"}\')\n    return 1\n',
        "def test_func(arg0):\n    return [arg0] * 10_000_000\n",
    ]
    wrong = "def test_func(arg0):\n    return [(c, 1) for c in arg0]\n"
    alone = score(worker_sandbox, wrong).fraction
    scorer = Scorer(STORE, worker_sandbox, llm=None)
    results: dict[int, Any] = {}

    async def go() -> None:
        with anyio.fail_after(180):
            async with anyio.create_task_group() as group:
                for index, code in enumerate([RUNS.source, *hostile, wrong, RUNS.source]):

                    async def one(index: int = index, code: str = code) -> None:
                        results[index] = await scorer.score(RUNS.id, code=code, counterexample=True)

                    group.start_soon(one)

    anyio.run(go)
    fractions = [results[i].direct.fraction for i in range(len(results))]
    assert fractions == [1.0, 0.0, 0.0, 0.0, 0.0, alone, 1.0]
