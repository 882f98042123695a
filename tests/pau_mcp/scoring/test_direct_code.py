"""Direct code: the agent's own code scored like the code writer's, with one counterexample from a fresh run."""

from __future__ import annotations

import ast

import anyio
import pytest

from pau_mcp.manifests import ManifestStore
from pau_mcp.scoring import Scorer, match_code
from wasm_runtime import Sandbox

STORE = ManifestStore()
RUNS = STORE.method("builtin/b002")  # run-length pairs of a string


def test_the_first_wrong_input_comes_back_as_a_counterexample(sandbox: Sandbox) -> None:
    # Right except for strings longer than 8 characters, where it forgets the last run.
    code = RUNS.source.replace(
        "return [(ch, n) for ch, n in runs]",
        "pairs = [(ch, n) for ch, n in runs]\n    return pairs[:-1] if len(arg0) > 8 else pairs",
    )
    result = anyio.run(lambda: match_code(sandbox, RUNS, code, counterexample=True))
    first_wrong = next(case for case, ok in zip(RUNS.tests, result.matches, strict=False) if not ok)
    assert len(ast.literal_eval(first_wrong.input)[0]) > 8
    example = result.counterexample
    assert example is not None and example.input == first_wrong.input
    assert first_wrong.outcome is not None and first_wrong.outcome.value is not None
    assert example.expected == first_wrong.outcome.shown()
    assert example.got == repr(ast.literal_eval(first_wrong.outcome.value)[:-1])


def test_right_code_has_no_counterexample(sandbox: Sandbox) -> None:
    result = anyio.run(lambda: match_code(sandbox, RUNS, RUNS.source, counterexample=True))
    assert result.fraction == 1.0 and result.counterexample is None


def test_the_counterexample_output_comes_from_a_fresh_run_so_batch_state_cannot_smuggle_inputs_out(
    sandbox: Sandbox,
) -> None:
    # State reached without an import (a built-in's __self__) lives on between the inputs of one batch: this code
    # answers right until it meets the target input, then returns every input it has seen so far.
    target_index = 5
    target = ast.literal_eval(RUNS.tests[target_index].input)[0]
    code = RUNS.source.replace("def test_func(arg0):", "def _gold(arg0):", 1) + (
        "\ndef test_func(arg0):\n"
        "    seen = len.__self__.__dict__.setdefault('_seen_inputs', [])\n"
        "    seen.append(arg0)\n"
        f"    return list(seen) if arg0 == {target!r} else _gold(arg0)\n"
    )
    batch = sandbox.run(code, [case.input for case in RUNS.tests])
    earlier = [ast.literal_eval(case.input)[0] for case in RUNS.tests[:target_index]]
    assert batch[target_index].value == repr([*earlier, target])  # the batch really leaks: the test means something

    result = anyio.run(lambda: match_code(sandbox, RUNS, code, counterexample=True))
    assert result.matches.count(False) == 1 and not result.matches[target_index]
    example = result.counterexample
    assert example is not None
    assert example.input == RUNS.tests[target_index].input
    assert example.got == repr([target])  # the lone, fresh run saw only this input
    for other in earlier:
        assert repr(other) not in example.got


def test_code_wrong_only_inside_a_batch_gets_no_counterexample_rather_than_a_leaky_one(sandbox: Sandbox) -> None:
    code = RUNS.source.replace("def test_func(arg0):", "def _gold(arg0):", 1) + (
        "\ndef test_func(arg0):\n"
        "    seen = len.__self__.__dict__.setdefault('_seen_inputs', [])\n"
        "    seen.append(arg0)\n"
        "    return list(seen) if len(seen) > 1 else _gold(arg0)\n"
    )
    result = anyio.run(lambda: match_code(sandbox, RUNS, code, counterexample=True))
    assert result.fraction is not None
    assert result.fraction < 0.1 and result.counterexample is None


def test_submitted_code_in_a_fence_is_unwrapped_and_needs_no_model(sandbox: Sandbox) -> None:
    scorer = Scorer(STORE, sandbox, llm=None)
    result = anyio.run(
        lambda: scorer.score("builtin/b002", code=f"My code:\n```python\n{RUNS.source}```", counterexample=True)
    )
    assert result.judge is None and result.codematch is None
    assert result.direct is not None
    assert result.direct.fraction == 1.0 and result.usage.total == 0 and result.cost_usd == 0.0
    assert result.feedback() == {"direct_code_match": 1.0}


def test_the_agent_sees_the_score_the_reason_and_one_counterexample_only(sandbox: Sandbox) -> None:
    scorer = Scorer(STORE, sandbox, llm=None)
    code = "def test_func(arg0):\n    return [(c, 1) for c in arg0]\n"
    result = anyio.run(lambda: scorer.score("builtin/b002", code=code, counterexample=True))
    shown = result.feedback()
    assert set(shown) == {"direct_code_match", "direct_code_note", "direct_code_failures", "counterexample"}
    assert result.direct is not None
    assert shown["direct_code_match"] == pytest.approx(result.direct.fraction, abs=1e-3)
    assert set(shown["counterexample"]) == {"input", "expected"}  # what the code did is not shown
    others = [case.input for case in RUNS.tests if case.input != shown["counterexample"]["input"]]
    text = repr(shown)
    assert RUNS.description not in text and "runs.append" not in text
    assert not [literal for literal in others if literal in text]
