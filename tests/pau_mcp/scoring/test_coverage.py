"""Exploration coverage in the real sandbox: what an episode's calls ran of a hidden function, beside its tests."""

from __future__ import annotations

import anyio
import pytest
from stand_ins import RefusingSandbox

from pau_mcp.manifests import Case, Method, Provenance, Tags
from pau_mcp.scoring.coverage import measure_coverage, source_shape
from wasm_runtime import Limits, Sandbox

SOURCE = """def test_func(a):
    if a < 0:
        return 'negative'
    if a == 99:
        while True:
            pass
    total = 0
    for digit in str(a):
        total += int(digit)
    print(total)
    return total
"""


def _method(tests: list[str]) -> Method:
    return Method(
        id="cov/digits", header="def test_func(a):", params=["a"], source=SOURCE, description="digit sum",
        examples=[Case(input="(1,)")], tests=[Case(input=t) for t in tests],
        provenance=Provenance(dataset="test"), tags=Tags(arity=1),
    )  # fmt: skip


def test_a_traced_call_returns_prints_and_raises_what_an_untraced_call_does(sandbox: Sandbox) -> None:
    source = "def test_func(a):\n    print('in', a)\n    if a:\n        return {a: [a] * 2}\n    raise KeyError(a)\n"
    inputs = ["(3,)", "(0,)", "('x',)", "(not a literal"]
    for _ in range(3):  # from its third run on the source's code comes from the code cache, which costs less fuel
        plain = sandbox.run(source, inputs)
    traced = sandbox.run(source, inputs, trace=True)
    fields = ("status", "value", "value_type", "encoded", "error_type", "error_message", "stdout")
    assert [[getattr(o, f) for f in fields] for o in traced] == [[getattr(o, f) for f in fields] for o in plain]
    assert all(o.extra == {} for o in plain)
    assert traced[0].extra["trace"]["lines"] == [2, 3, 4] and traced[1].extra["trace"]["lines"] == [2, 3, 5]
    assert [-1, 2] in traced[0].extra["trace"]["arcs"]  # entered at its first line
    assert traced[3].extra == {}  # an invalid literal never ran
    # Untraced calls after traced ones are exactly what they were, to the unit of fuel.
    again = sandbox.run(source, inputs)
    assert [(o.value, o.stdout, o.fuel) for o in again] == [(o.value, o.stdout, o.fuel) for o in plain]


def test_an_untraced_call_carries_no_trace_even_one_the_hidden_code_forged(sandbox: Sandbox) -> None:
    forger = (
        "def test_func(a):\n    import sys\n"
        "    for m in list(sys.modules.values()):\n"
        "        if hasattr(m, '_TRACED'):\n            m._TRACED['current'] = ({1}, {(1, 2)})\n"
        "    return a\n"
    )  # fmt: skip
    (outcome,) = sandbox.run(forger, ["(5,)"])
    assert outcome.value == "5" and outcome.extra == {} and "trace" not in outcome.to_dict()


def test_the_shape_counts_statements_and_the_lines_that_branch() -> None:
    shape = source_shape(SOURCE)
    assert sorted(set(shape.statements.values())) == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert shape.branching == {2, 4, 5, 8}
    assert source_shape("def f(:\n").statements == {}


def test_coverage_compares_what_an_episodes_calls_ran_with_what_the_hidden_tests_run(sandbox: Sandbox) -> None:
    method = _method(["(-1,)", "(123,)", "(0,)"])
    # 5 runs the digit loop; 99 spins and stops at the (traced) CPU budget; the broken literal never runs.
    inputs = ["(5,)", "(99,)", "(not a literal"]
    found = anyio.run(lambda: measure_coverage(sandbox, method, inputs, limits=Limits(timeout_s=0.1)))
    assert found["status"] == "measured"
    assert found["test_lines"] == [2, 3, 4, 7, 8, 9, 10, 11]
    assert found["agent_lines"] == [2, 4, 7, 8, 9, 10, 11]  # 99's trace is lost with its call
    assert found["lines"] == {
        "tests": 8,
        "agent": 7,
        "common": 7,
        "agent_of_tests": pytest.approx(7 / 8),
        "function": 10,
    }
    # Both ways out of `if a < 0` and of the loop are in the tests; the agent never took the negative one.
    assert found["test_branches"] == [[2, 3], [2, 4], [4, 7], [8, 9], [8, 10]]
    assert found["agent_branches"] == [[2, 4], [4, 7], [8, 9], [8, 10]]
    assert found["branches"]["agent_of_tests"] == pytest.approx(4 / 5)
    assert (found["inputs"], found["lost"], found["test_inputs"], found["tests_lost"]) == (2, 1, 3, 0)


def test_an_episode_without_calls_covers_nothing_and_a_method_without_tests_has_no_share(sandbox: Sandbox) -> None:
    nothing = anyio.run(lambda: measure_coverage(sandbox, _method(["(12,)"]), []))
    assert nothing["lines"]["agent_of_tests"] == 0.0 and nothing["inputs"] == 0
    untested = anyio.run(lambda: measure_coverage(sandbox, _method([]), ["(12,)"]))
    assert untested["lines"]["agent_of_tests"] is None and untested["lines"]["agent"] == 7


def test_a_sandbox_that_cannot_trace_gives_an_unavailable_result() -> None:
    # A sandbox other than the in-process one (as worker processes are) offers no tracing, and is asked to run nothing.
    found = anyio.run(lambda: measure_coverage(RefusingSandbox(), _method(["(1,)"]), ["(1,)"]))
    assert found["status"] == "unavailable" and "in-process" in found["reason"]
