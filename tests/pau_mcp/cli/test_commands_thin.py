"""The commands stay thin (issue 33): each parses, calls one function and prints, and shares helpers through
``cli/common.py`` only (tests/pau_mcp/server/test_assembly.py checks that only the CLI parses through click)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CLI = ROOT / "pau_mcp" / "cli"
SHARED = {"common", "__init__"}
MAX_LINES = 60


def _commands() -> list[Path]:
    return sorted(path for path in CLI.glob("*.py") if path.stem not in SHARED)


def test_no_command_module_imports_another() -> None:
    commands = {path.stem for path in _commands()}
    found = []
    for path in _commands():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = {node.module} if node.module else {alias.name for alias in node.names}
                found += [f"{path.name} imports {name}" for name in names & commands]
    assert not found, f"shared command helpers belong in pau_mcp/cli/common.py: {found}"


def test_no_function_of_the_cli_is_longer_than_sixty_lines() -> None:
    long = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_LINES:
                    long.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    assert not long, f"move the work into the library function the command calls: {long}"
