"""The `pau-mcp` command group: every command is listed and reachable, and one command loads only what it uses."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from pau_mcp.cli import main


def test_every_command_is_listed_in_help_and_answers_its_own_help() -> None:
    runner = CliRunner()
    listed = main.list_commands(None)  # type: ignore[arg-type]
    shown = runner.invoke(main, ["--help"]).output
    assert len(listed) == len(set(listed)) >= 19
    for name in listed:
        assert f"\n  {name} " in shown, name
        result = runner.invoke(main, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output


def test_an_unknown_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["nope"])
    assert result.exit_code == 2
    assert "No such command 'nope'" in result.output


def test_report_loads_neither_the_server_nor_the_sandbox_nor_an_llm_sdk() -> None:
    # A new process: this one has imported everything already.
    probe = (
        "import json, sys\n"
        "from pau_mcp.cli import main\n"
        "try:\n"
        "    main(['report', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('wasmtime', 'mcp', 'openai', 'anthropic')"
        " or m.startswith(('pau_mcp.server', 'pau_mcp.llm', 'pau_mcp.cli.serve')))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
