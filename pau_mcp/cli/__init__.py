"""The ``pau-mcp`` command. Each group lives in its own module; all of them stay thin."""

from __future__ import annotations

import importlib

import click

from .. import __version__
from ..runstore import StoreError

__all__ = ["main"]


#: Each command and where it lives, in the order `--help` lists them. A command's module is imported only when the
#: command is used (or listed), so `pau-mcp report` does not pay for the server, the sandbox or the LLM clients.
_COMMANDS = {
    "sandbox": "sandbox:sandbox",
    "run-code": "sandbox:run_code",
    "manifests": "manifests:manifests",
    "import": "importers:import_",
    "create": "create:create",
    "serve": "serve:serve",
    "call": "serve:call",
    "methods": "serve:methods",
    "token": "tokens:token",
    "runs": "runs:runs",
    "report": "report:report",
    "leaderboard": "leaderboard:leaderboard",
    "score": "scoring:score",
    "scorer": "scoring:scorer",
    "eval": "evaluate:evaluate",
    "demo": "evaluate:demo",
    "sweep": "sweep:sweep",
    "rl": "rl:rl",
    "export": "export:export",
    "prompts": "prompts:prompts",
    "coverage": "coverage:coverage",
}


class _Main(click.Group):
    """The command group; a run store that cannot be written ends any command with one line, not a traceback."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = _COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, _, name = where.partition(":")
        command = getattr(importlib.import_module(f".{module}", __name__), name)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise RuntimeError(f"pau_mcp.cli.{module}.{name} is not the command {cmd_name!r}")
        return command

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except StoreError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="pau-mcp")
def main() -> None:
    """Hidden Python functions as black-box MCP tools: serve them, explore them, score the answers."""
