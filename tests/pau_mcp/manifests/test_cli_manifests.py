"""`pau-mcp manifests list|show|freeze|validate` on suites in tmp_path: the command group users run, in the test's
process (`run_pau`), and once in a process of its own."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pau_command import Ran, run_pau, run_pau_process

from pau_mcp.manifests import Case, ManifestStore, Method, Suite, SuiteInfo, dump_method, tool_name
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox

ROOT = Path(__file__).resolve().parents[3]


#: The deployment key of these commands (tool names depend on it).
KEY = "manifest-tests-deployment-key"


def pau(*args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """Run ``pau-mcp ARGS`` with a wide terminal (so tables and messages are not wrapped): in this process, or in
    a process of its own."""
    environment = {key: value for key, value in os.environ.items() if key != "PAU_MCP_MANIFESTS"}
    environment.update({"COLUMNS": "250", "PAU_MCP_TOOL_KEY": KEY, **(env or {})})
    return (run_pau_process if process else run_pau)(*args, env=environment, cwd=ROOT)


def method(
    name: str,
    source: list[str],
    inputs: tuple[str, ...] = ("(1,)", "(2,)", "(3,)"),
    suite: str = "demo",
    **changes: Any,
) -> Method:
    """An unfrozen one-parameter method; the first two inputs are examples."""
    data: dict[str, Any] = {
        "id": f"{suite}/{name}",
        "header": "def test_func(arg0):",
        "params": ["arg0"],
        "source": source,
        "description": f"Gold description of {name}.",
        "examples": [{"input": text} for text in inputs[:2]],
        "tests": [{"input": text} for text in inputs[2:]],
        "provenance": {"dataset": "hidden-dataset-name", "original_name": "secret_original"},
        "tags": {"arity": 1},
    }
    data.update(changes)
    return Method.model_validate(data)


DOUBLE = ["def test_func(arg0):", "    hidden_line_marker = arg0 * 2", "    return hidden_line_marker"]


def make_suite(root: Path, methods: list[Method], name: str = "demo") -> Suite:
    suite = Suite.create(root, SuiteInfo(name=name, description="a test suite"))
    for item in methods:
        suite.save(item)
    return suite


def files(path: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(path.glob("*.json"))}


# --- list ----------------------------------------------------------------------------------------


def test_list_shows_every_suite_with_its_counts(tmp_path: Path) -> None:
    make_suite(tmp_path, [method("m1", DOUBLE), method("m2", DOUBLE)])
    result = pau("manifests", "list", "--manifests", str(tmp_path), process=True)
    assert result.returncode == 0, result.stderr
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if line.count("│") > 3}
    assert set(rows) == {"demo", "builtin"}
    assert [cell.strip() for cell in rows["demo"].split("│")[2:5]] == ["2", "0", "2/0/0/0"]
    assert str(tmp_path / "demo") in rows["demo"]


def test_list_json_prints_one_object_per_method_of_the_chosen_suite(tmp_path: Path) -> None:
    make_suite(tmp_path, [method("m1", DOUBLE), method("m2", DOUBLE, ("(1,)",))])
    result = pau("manifests", "list", "--suite", "demo", "--json", "--manifests", str(tmp_path))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["id"] for line in lines] == ["demo/m1", "demo/m2"]
    assert lines[0]["tool"].startswith("fn_") and lines[0]["header"] == "def test_func(arg0):"
    assert (lines[0]["examples"], lines[0]["tests"], lines[1]["examples"], lines[1]["tests"]) == (2, 1, 1, 0)
    assert lines[0]["frozen"] is False and lines[0]["dataset"] == "hidden-dataset-name"
    assert "hidden_line_marker" not in result.stdout and "Gold description" not in result.stdout


def test_an_unknown_suite_is_an_error_listing_the_known_ones(tmp_path: Path) -> None:
    make_suite(tmp_path, [method("m1", DOUBLE)])
    result = pau("manifests", "list", "--suite", "nope", "--manifests", str(tmp_path))
    assert result.returncode == 1
    assert "no suite named 'nope' (known: builtin, demo)" in result.stderr


def test_a_bad_file_is_an_error_naming_the_file_and_the_field(tmp_path: Path) -> None:
    suite = make_suite(tmp_path, [method("m1", DOUBLE)])
    data = json.loads((suite.path / "m1.json").read_text())
    data["params"] = "arg0"
    (suite.path / "m1.json").write_text(json.dumps(data))
    result = pau("manifests", "list", "--suite", "demo", "--manifests", str(tmp_path))
    assert result.returncode == 1
    assert str(suite.path / "m1.json") in result.stderr and "params: Input should be a valid array" in result.stderr


def test_the_same_suite_in_two_directories_is_an_error(tmp_path: Path) -> None:
    make_suite(tmp_path / "a", [method("m1", DOUBLE)])
    make_suite(tmp_path / "b", [method("m1", DOUBLE)])
    result = pau(
        "manifests", "list", "--suite", "demo", "--manifests", str(tmp_path / "a"), "--manifests", str(tmp_path / "b")
    )
    assert result.returncode == 1 and "suite 'demo' exists twice" in result.stderr


def test_the_manifests_variable_with_colons_works_like_repeated_flags(tmp_path: Path) -> None:
    make_suite(tmp_path / "a", [method("m1", DOUBLE, suite="alpha")], name="alpha")
    make_suite(tmp_path / "b", [method("m1", DOUBLE, suite="beta")], name="beta")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    by_flags = pau(
        "manifests", "list", "--suite", "alpha", "--suite", "beta", "--json", "--manifests", a, "--manifests", b
    )
    by_variable = pau(
        "manifests", "list", "--suite", "alpha", "--suite", "beta", "--json", env={"PAU_MCP_MANIFESTS": f"{a}:{b}"}
    )
    assert by_flags.returncode == by_variable.returncode == 0, by_variable.stderr
    assert [json.loads(line)["id"] for line in by_variable.stdout.splitlines()] == ["alpha/m1", "beta/m1"]
    assert by_variable.stdout == by_flags.stdout
    table = pau("manifests", "list", env={"PAU_MCP_MANIFESTS": f"{a}:{b}"})
    assert "alpha" in table.stdout and "beta" in table.stdout and "builtin" in table.stdout


@pytest.mark.parametrize(
    "command", [("manifests", "list"), ("serve",), ("eval", "--agent", "probe"), ("demo",), ("score", "x")]
)
def test_a_manifests_directory_that_does_not_exist_is_a_usage_error_naming_flag_and_variable(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    missing = tmp_path / "typo"
    data = {"PAU_MCP_DATA_DIR": str(tmp_path)}
    by_flag = pau(*command, "--manifests", str(missing), env=data)
    by_variable = pau(*command, env=data | {"PAU_MCP_MANIFESTS": f"{tmp_path}:{missing}"})
    for result in (by_flag, by_variable):
        assert result.returncode == 2, result.stderr
        assert "--manifests / PAU_MCP_MANIFESTS" in result.stderr and f"{missing} does not exist" in result.stderr
    assert not missing.exists()


# --- show ----------------------------------------------------------------------------------------


@pytest.fixture()
def frozen_suite(tmp_path: Path, sandbox: Sandbox) -> Suite:
    """A suite with one frozen method whose hidden parts carry recognisable markers."""
    draft = method("m1", DOUBLE, ("(2,)", "('ab',)", "('zebra_test_input',)", "(None,)"))
    return make_suite(tmp_path, [freeze_method(draft, sandbox)])


def test_show_prints_what_an_agent_would_see_and_nothing_hidden(frozen_suite: Suite) -> None:
    result = pau("manifests", "show", "demo/m1", "--manifests", str(frozen_suite.path.parent))
    assert result.returncode == 0, result.stderr
    shown = frozen_suite.methods["demo/m1"]
    assert result.stdout.splitlines() == [
        f"tool:   {tool_name(KEY, shown.id)}",
        "header: def test_func(arg0):",
        "examples:",
        "  test_func(2) -> 4",
        "  test_func('ab') -> 'abab'",
    ]
    for hidden in (
        "hidden_line_marker",
        "Gold description",
        "zebra_test_input",
        "None",
        "hidden-dataset-name",
        "secret_original",
    ):
        assert hidden not in result.stdout


def test_show_json_gives_the_agent_view(frozen_suite: Suite) -> None:
    result = pau("manifests", "show", "demo/m1", "--json", "--manifests", str(frozen_suite.path.parent))
    view = json.loads(result.stdout)
    assert view == frozen_suite.methods["demo/m1"].agent_view(KEY)
    assert set(view) == {"tool", "header", "examples"}
    assert "hidden_line_marker" not in result.stdout and "zebra_test_input" not in result.stdout


def test_show_hidden_prints_everything(frozen_suite: Suite) -> None:
    result = pau("manifests", "show", "demo/m1", "--hidden", "--manifests", str(frozen_suite.path.parent))
    assert result.returncode == 0, result.stderr
    for everything in (
        "hidden_line_marker",
        "Gold description of m1.",
        "zebra_test_input",
        "hidden-dataset-name",
        "secret_original",
    ):
        assert everything in result.stdout
    assert result.stdout == dump_method(frozen_suite.methods["demo/m1"]) + "\n"
    as_json = pau("manifests", "show", "demo/m1", "--hidden", "--json", "--manifests", str(frozen_suite.path.parent))
    assert Method.model_validate_json(as_json.stdout) == frozen_suite.methods["demo/m1"]


def test_show_an_unknown_method_is_an_error(frozen_suite: Suite) -> None:
    result = pau("manifests", "show", "demo/nope", "--manifests", str(frozen_suite.path.parent))
    assert result.returncode == 1 and "suite 'demo' has no method 'demo/nope'" in result.stderr


def test_show_finds_a_method_by_its_served_tool_name_or_its_manifest_file(frozen_suite: Suite) -> None:
    by_id = pau("manifests", "show", "demo/m1", "--manifests", str(frozen_suite.path.parent))
    tool = tool_name(KEY, "demo/m1")
    by_tool = pau("manifests", "show", tool, "--manifests", str(frozen_suite.path.parent))
    assert by_tool.returncode == 0, by_tool.stderr
    assert by_tool.stdout == by_id.stdout
    by_file = pau("manifests", "show", str(frozen_suite.path / "m1.json"), "--hidden")
    assert by_file.returncode == 0, by_file.stderr
    assert by_file.stdout == dump_method(frozen_suite.methods["demo/m1"]) + "\n"


def test_show_a_tool_name_of_another_deployment_key_is_an_error_naming_the_key(frozen_suite: Suite) -> None:
    other = tool_name("another-deployment-key-000", "demo/m1")
    result = pau("manifests", "show", other, "--manifests", str(frozen_suite.path.parent))
    assert result.returncode == 1 and f"no method or tool named {other!r}" in result.stderr
    assert "--tool-key" in result.stderr


def test_show_says_when_an_example_is_not_frozen(tmp_path: Path) -> None:
    make_suite(tmp_path, [method("m1", DOUBLE)])
    result = pau("manifests", "show", "demo/m1", "--manifests", str(tmp_path))
    assert "  test_func(1) -> (not frozen)" in result.stdout.splitlines()


# --- freeze --------------------------------------------------------------------------------------


def test_freeze_never_rewrites_the_packaged_suites_and_says_how_to_freeze_a_copy(tmp_path: Path) -> None:
    from pau_mcp.manifests import packaged_manifests

    before = files(packaged_manifests() / "builtin")
    result = pau("manifests", "freeze", "--suite", "builtin", "--cache-dir", str(tmp_path))
    assert result.returncode == 1
    assert "part of the pau-mcp installation" in result.stderr and "--manifests" in result.stderr
    assert "Traceback" not in result.stderr and "freezing" not in result.stderr  # refused before the sandbox
    nothing = pau("manifests", "freeze", "--cache-dir", str(tmp_path))
    assert nothing.returncode == 2 and "no suites of your own to freeze" in nothing.stderr
    assert files(packaged_manifests() / "builtin") == before


def test_freeze_runs_every_input_and_stores_the_outcomes_and_a_second_freeze_changes_nothing(tmp_path: Path) -> None:
    raises = ["def test_func(arg0):", "    return [10, 20][arg0]"]
    make_suite(tmp_path, [method("m1", DOUBLE), method("m2", raises, ("(0,)", "(1,)", "(2,)", "('x',)"))])
    first = pau("manifests", "freeze", "--suite", "demo", "--manifests", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "froze 2 methods (2 changed); outcomes: error 2, ok 5" in first.stdout
    suite = ManifestStore([tmp_path], include_packaged=False).suite("demo")
    assert all(m.frozen for m in suite.methods.values())
    assert [c.frozen_outcome().shown() for c in suite.methods["demo/m2"].tests] == [
        "raises IndexError: list index out of range", "raises TypeError: list indices must be integers or slices, not str"
    ]  # fmt: skip
    assert suite.methods["demo/m1"].examples[1].frozen_outcome().value == "4"
    before = files(tmp_path / "demo")
    second = pau("manifests", "freeze", "--suite", "demo", "--manifests", str(tmp_path))
    assert second.returncode == 0 and "froze 2 methods (0 changed)" in second.stdout
    assert files(tmp_path / "demo") == before


def test_freeze_one_method_leaves_the_others_alone(tmp_path: Path) -> None:
    make_suite(tmp_path, [method("m1", DOUBLE), method("m2", DOUBLE)])
    result = pau("manifests", "freeze", "--method", "demo/m2", "--manifests", str(tmp_path))
    assert result.returncode == 0, result.stderr
    suite = ManifestStore([tmp_path], include_packaged=False).suite("demo")
    assert not suite.methods["demo/m1"].frozen and suite.methods["demo/m2"].frozen


# --- validate ------------------------------------------------------------------------------------


STATEFUL = [  # keeps a counter on the built-ins module, which the per-input restore does not cover
    "def test_func(arg0):",
    "    home = print.__self__",
    "    home.pau_calls = getattr(home, 'pau_calls', 0) + 1",
    "    return arg0 * home.pau_calls",
]

SEEDED_RANDOM = [
    "import random",
    "def test_func(arg0):",
    "    return [random.randint(0, 9) for _ in range(arg0)], random.random()",
]


def test_validate_passes_a_sound_suite_and_exits_zero(tmp_path: Path, sandbox: Sandbox) -> None:
    make_suite(
        tmp_path, [freeze_method(method("m1", DOUBLE), sandbox), freeze_method(method("m2", SEEDED_RANDOM), sandbox)]
    )
    result = pau("manifests", "validate", "--suite", "demo", "--manifests", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "2 methods checked, 2 passed, 0 failed"
    assert "FAIL" not in result.stderr


def test_validate_reports_every_kind_of_failure_and_exits_one(tmp_path: Path, sandbox: Sandbox) -> None:
    def frozen(item: Method) -> Method:
        return freeze_method(item, sandbox)

    tampered = frozen(method("reproduces", DOUBLE))
    tampered = tampered.model_copy(
        update={
            "tests": [
                Case(
                    input="(3,)",
                    outcome=tampered.tests[0].frozen_outcome().model_copy(update={"value": "7", "encoded": 7}),
                )
            ]
        }
    )
    methods = [
        frozen(method("good", DOUBLE)),
        frozen(method("random", SEEDED_RANDOM)),
        frozen(method("compiles", ["def test_func(arg0):", "    return (arg0"])),
        frozen(method("entry", ["def helper(arg0):", "    return arg0"])),
        frozen(method("arity", ["def test_func(arg0, arg1):", "    return arg0"])),
        frozen(method("runs", DOUBLE, ("(1,)", "(2,)", "(open('x'),)"))),
        method("frozen", DOUBLE),
        tampered,
        frozen(method("stateful", STATEFUL)),
        method("inputs", DOUBLE, ()),
        frozen(method("secret_original", DOUBLE)),
    ]
    make_suite(tmp_path, methods)
    result = pau("manifests", "validate", "--suite", "demo", "--manifests", str(tmp_path))
    assert result.returncode == 1
    failures = [line for line in result.stderr.splitlines() if line.startswith("FAIL ")]
    kinds = {line.split(": [", 1)[1].split("]", 1)[0] for line in failures}
    failed = {line.split()[1].rstrip(":") for line in failures}
    assert kinds == {"compiles", "entry", "arity", "runs", "frozen", "reproduces", "inputs", "anonymous"}
    expected_failed = {f"demo/{m.name}" for m in methods} - {"demo/good", "demo/random"}
    assert failed == expected_failed
    for item in methods[2:]:
        check = (
            "anonymous" if item.name == "secret_original" else "reproduces" if item.name == "stateful" else item.name
        )
        assert any(line.startswith(f"FAIL {item.id}: [{check}]") for line in failures), (item.id, failures)
    assert "FAIL demo/stateful: [reproduces] input (2,) was frozen as '4' but gives '2'" in failures
    summary = result.stdout.strip().splitlines()[-1]
    assert summary.startswith("11 methods checked, 2 passed, 9 failed (")
    assert "reproduces: 3" in summary and "anonymous: 1" in summary
