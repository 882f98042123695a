"""The ``pau-mcp`` command. Each group lives in its own module; all of them stay thin."""

from __future__ import annotations

import click

from .. import __version__
from ..runstore import StoreError
from .coverage import coverage
from .evaluate import demo, evaluate
from .export import export
from .importers import import_
from .manifests import manifests
from .prompts import prompts
from .report import report
from .rl import rl
from .runs import runs
from .sandbox import run_code, sandbox
from .scoring import score, scorer
from .serve import call, methods, serve
from .sweep import sweep
from .tokens import token

__all__ = ["main"]


class _Main(click.Group):
    """The command group; a run store that cannot be written ends any command with one line, not a traceback."""

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except StoreError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="pau-mcp")
def main() -> None:
    """Hidden Python functions as black-box MCP tools: serve them, explore them, score the answers."""


main.add_command(sandbox)
main.add_command(run_code)
main.add_command(manifests)
main.add_command(import_)
main.add_command(serve)
main.add_command(call)
main.add_command(methods)
main.add_command(token)
main.add_command(runs)
main.add_command(report)
main.add_command(score)
main.add_command(scorer)
main.add_command(evaluate)
main.add_command(demo)
main.add_command(sweep)
main.add_command(rl)
main.add_command(export)
main.add_command(prompts)
main.add_command(coverage)
