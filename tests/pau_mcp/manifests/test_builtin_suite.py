"""The built-in suite: its size and spread, well-formed cases, and tests that execute every line.

The hidden methods are the team's own code, so this module runs them on the
host (outside the sandbox) to measure line coverage with the ``coverage``
package and to check speed, size and determinism.
"""

from __future__ import annotations

import ast
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import coverage
import pytest

from pau_mcp.manifests import ManifestStore, Method
from wasm_runtime import parse_arguments

SUITE = "builtin"
METHODS: list[Method] = list(ManifestStore().suite(SUITE).methods.values())
IDS = [method.id for method in METHODS]

#: Value-type names a method may list in ``tags.value_types``; all but bytes must appear somewhere.
TYPE_NAMES = {"int", "float", "str", "list", "dict", "tuple", "set", "bool", "None", "bytes"}
REQUIRED_TYPES = TYPE_NAMES - {"bytes"}

#: Seconds of CPU (the calling thread's, which a loaded machine does not stretch as it does the wall clock).
MAX_SECONDS_PER_CALL = 0.05  # the methods take well under 10 ms
MAX_REPR_CHARS = 2000


def _arguments(text: str) -> tuple[Any, ...]:
    value = ast.literal_eval(text)
    return value if type(value) is tuple else (value,)


def _inputs(method: Method) -> list[str]:
    return [case.input for case in (*method.examples, *method.tests)]


def _load(method: Method, path: Path | None = None) -> Any:
    """Compile the method's source (under ``path`` when given, for coverage) and return its entry function."""
    filename = str(path) if path else f"<{method.id}>"
    namespace: dict[str, Any] = {"__name__": f"builtin_{method.name}"}
    exec(compile(method.source, filename, "exec"), namespace)
    return namespace[method.entry]


@dataclass
class Result:
    """What one host call did: a repr or an exception type name, and the CPU it took."""

    value: str | None
    error: str | None
    seconds: float


def _call(function: Any, text: str) -> Result:
    args = _arguments(text)
    start = time.thread_time()
    try:
        value = function(*args)
    except Exception as exc:  # some inputs raise on purpose
        return Result(None, type(exc).__name__, time.thread_time() - start)
    seconds = time.thread_time() - start
    return Result(repr(value), None, seconds)


@pytest.fixture(scope="module")
def host_results() -> dict[str, list[tuple[Result, Result]]]:
    """Every input of every method, run twice on the host without tracing."""
    results = {}
    for method in METHODS:
        function = _load(method)
        results[method.id] = [(_call(function, text), _call(function, text)) for text in _inputs(method)]
    return results


@pytest.fixture(scope="module")
def missed_lines(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[int]]:
    """Source lines of each method that none of its examples and tests execute."""
    root = tmp_path_factory.mktemp("builtin_sources")
    paths = {}
    for method in METHODS:
        path = root / f"{method.name}.py"
        path.write_text(method.source, encoding="utf-8")
        paths[method.id] = path
    cov = coverage.Coverage(data_file=None, config_file=False, include=[str(p) for p in paths.values()])
    cov.start()
    try:
        for method in METHODS:
            function = _load(method, paths[method.id])
            for text in _inputs(method):
                _call(function, text)
    finally:
        cov.stop()
    missed = {}
    for method in METHODS:
        _, _statements, _excluded, missing, _ = cov.analysis2(str(paths[method.id]))
        missed[method.id] = list(missing)
    return missed


# --- the suite as a whole ------------------------------------------------------------------


def test_builtin_suite_has_at_least_sixty_methods() -> None:
    assert len(METHODS) >= 60, f"only {len(METHODS)} methods in the builtin suite"


def test_method_ids_are_numbered_and_unique() -> None:
    assert all(re.fullmatch(r"builtin/b\d{3}", method.id) for method in METHODS), IDS
    assert len(set(IDS)) == len(IDS)


def test_arity_spread_resembles_the_pau_test_set() -> None:
    arities = Counter(len(method.params) for method in METHODS)
    total = len(METHODS)
    assert arities[1] / total >= 0.40, arities
    assert arities[2] / total >= 0.30, arities
    assert arities[3] / total >= 0.05, arities
    assert arities[4] >= 1, arities


def test_at_least_twenty_methods_hide_behaviour_behind_special_inputs() -> None:
    hiding = [method.id for method in METHODS if method.tags.hidden_behaviour]
    assert len(hiding) >= 20, f"only {len(hiding)} methods declare hidden behaviour"


def test_every_value_type_appears_across_the_suite() -> None:
    named = {name for method in METHODS for name in method.tags.value_types}
    assert named <= TYPE_NAMES, f"unknown value-type names: {sorted(named - TYPE_NAMES)}"
    assert named >= REQUIRED_TYPES, f"never named: {sorted(REQUIRED_TYPES - named)}"


def test_every_value_type_really_occurs_as_an_input_or_an_output(
    host_results: dict[str, list[tuple[Result, Result]]],
) -> None:
    seen = set()

    def visit(value: Any) -> None:
        seen.add("None" if value is None else type(value).__name__)
        if isinstance(value, (list, tuple, set)):
            for item in value:
                visit(item)
        elif isinstance(value, dict):
            for key, item in value.items():
                visit(key)
                visit(item)

    for method in METHODS:
        for text in _inputs(method):
            for argument in _arguments(text):
                visit(argument)
        for first, _ in host_results[method.id]:
            if first.value is not None:
                visit(ast.literal_eval(first.value))
    assert seen >= REQUIRED_TYPES, f"never passed or returned: {sorted(REQUIRED_TYPES - seen)}"


def test_difficulties_are_mixed() -> None:
    levels = Counter(method.tags.difficulty for method in METHODS)
    assert levels["easy"] >= 3 and levels["medium"] >= 3 and levels["hard"] >= 3, levels


# --- each method --------------------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_every_builtin_method_has_two_examples_and_twenty_tests(method: Method) -> None:
    assert len(method.examples) == 2, f"{method.id} has {len(method.examples)} examples"
    assert len(method.tests) >= 20, f"{method.id} has {len(method.tests)} tests"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_no_method_repeats_an_input(method: Method) -> None:
    texts = _inputs(method)
    assert len(set(texts)) == len(texts), f"{method.id} repeats an input text"
    values = [_arguments(text) for text in texts]
    for i, value in enumerate(values):
        for j in range(i):
            assert value != values[j], f"{method.id}: {texts[j]} and {texts[i]} are equal inputs"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_examples_and_tests_do_not_overlap(method: Method) -> None:
    examples = {case.input for case in method.examples}
    tests = {case.input for case in method.tests}
    assert not examples & tests, f"{method.id}: {sorted(examples & tests)} are both examples and tests"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_every_method_has_a_description_and_matching_signature(method: Method) -> None:
    assert method.description.strip(), f"{method.id} has no description"
    expected = [f"arg{i}" for i in range(len(method.params))]
    assert method.params == expected, f"{method.id} params {method.params}"
    assert method.header == f"def test_func({', '.join(expected)}):", method.header
    assert method.tags.arity == len(method.params)
    assert method.provenance.dataset == "pau-mcp builtin" and method.provenance.license == "Apache-2.0"
    assert re.search(rf"^def test_func\({', '.join(expected)}\):$", method.source, re.MULTILINE), method.id


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_every_input_is_a_literal_of_the_right_arity(method: Method) -> None:
    for text in _inputs(method):
        assert len(parse_arguments(text)) == len(method.params), f"{method.id}: {text}"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_sources_import_only_the_standard_library(method: Method) -> None:
    for node in ast.walk(ast.parse(method.source)):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            assert module.split(".")[0] in sys.stdlib_module_names, f"{method.id} imports {module}"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_every_line_of_every_method_is_executed_by_its_cases(
    method: Method, missed_lines: dict[str, list[int]]
) -> None:
    missing = missed_lines[method.id]
    lines = method.source.splitlines()
    shown = "; ".join(f"line {n}: {lines[n - 1].strip()}" for n in missing)
    assert not missing, f"{method.id}: no example or test executes {shown}"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_examples_return_normally(method: Method, host_results: dict[str, list[tuple[Result, Result]]]) -> None:
    for case, (result, _) in zip(method.examples, host_results[method.id], strict=False):
        assert result.error is None, f"{method.id}: example {case.input} raises {result.error}"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_every_call_is_fast_small_and_deterministic(
    method: Method, host_results: dict[str, list[tuple[Result, Result]]]
) -> None:
    for text, (first, second) in zip(_inputs(method), host_results[method.id], strict=False):
        assert (first.value, first.error) == (second.value, second.error), f"{method.id}: {text} is not deterministic"
        assert min(first.seconds, second.seconds) < MAX_SECONDS_PER_CALL, f"{method.id}: {text} is slow"
        assert first.value is None or len(first.value) <= MAX_REPR_CHARS, f"{method.id}: {text} returns a large value"


@pytest.mark.parametrize("method", METHODS, ids=IDS)
def test_frozen_outcomes_agree_with_the_host_interpreter(
    method: Method, host_results: dict[str, list[tuple[Result, Result]]]
) -> None:
    """The sandbox runs a newer Python than the host; a method must behave the same on both."""
    if not method.frozen:
        pytest.skip(f"{method.id} has no frozen outcomes yet")
    for case, (result, _) in zip((*method.examples, *method.tests), host_results[method.id], strict=False):
        outcome = case.outcome
        assert outcome is not None
        if result.error is None:
            assert outcome.status == "ok" and outcome.value == result.value, (
                f"{method.id}: {case.input} gives {result.value} on the host but {outcome.shown()} in the sandbox"
            )
        else:
            assert outcome.status == "error" and outcome.error_type == result.error, (
                f"{method.id}: {case.input} raises {result.error} on the host but {outcome.shown()} in the sandbox"
            )
