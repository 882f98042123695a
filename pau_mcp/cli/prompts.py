"""``pau-mcp prompts``: the prompt templates of each protocol, and importing the reference benchmark's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..config import options
from .common import err, settings_from

if TYPE_CHECKING:
    from ..prompts import PromptSet

__all__ = ["prompts"]


@click.group()
def prompts() -> None:
    """Prompt templates: this project's (packaged) and the reference benchmark's (imported from a checkout)."""


@prompts.command("import-reference")
@click.argument("checkout", type=click.Path(file_okay=False, exists=True, path_type=Path))
@options("data_dir")
def import_reference_command(checkout: Path, **values: object) -> None:
    """Read the reference benchmark's prompts out of CHECKOUT into DATA_DIR/prompts/reference/.

    CHECKOUT is a clone of github.com/DhananjayAshok/PAU-Benchmark; nothing in it is run (the
    files are parsed). Afterwards `--protocol reference` (PAU_MCP_PROTOCOL=reference) runs with
    the reference's exact wording. Importing again replaces the templates.
    """
    from ..prompts import PromptsError, import_reference

    settings = settings_from(values)
    try:
        imported = import_reference(checkout, settings.data_dir)
    except PromptsError as exc:
        raise click.ClickException(str(exc)) from None
    for name, fields in imported.templates.items():
        click.echo(f"{name:<10} fields: {', '.join(fields)}")
    err.print(f"imported {len(imported.templates)} templates into {imported.directory} (digest {imported.digest})")


@prompts.command("list")
@click.option(
    "--protocol", type=click.Choice(["pau-mcp", "reference"]), default="pau-mcp", show_default=True, help="Whose set."
)
@options("data_dir")
def list_command(protocol: str, **values: object) -> None:
    """List a protocol's templates with their fields."""
    chosen = _load(protocol, values)
    click.echo(f"{protocol} ({chosen.origin}, digest {chosen.digest})")
    for name, template in sorted(chosen.templates.items()):
        click.echo(f"  {name:<30} {', '.join(sorted(template.fields)) or '-'}")


@prompts.command("show")
@click.argument("name")
@click.option(
    "--protocol", type=click.Choice(["pau-mcp", "reference"]), default="pau-mcp", show_default=True, help="Whose set."
)
@options("data_dir")
def show_command(name: str, protocol: str, **values: object) -> None:
    """Print one template as it is stored, its fields unfilled."""
    chosen = _load(protocol, values)
    if name not in chosen.templates:
        raise click.ClickException(
            f"no template {name!r} in the {protocol} set; `pau-mcp prompts list --protocol {protocol}` lists them"
        )
    click.echo(chosen.templates[name].text)


def _load(protocol: str, values: dict[str, object]) -> PromptSet:
    from ..prompts import PromptsError, load_prompts

    settings = settings_from(values)
    try:
        return load_prompts(protocol, settings.data_dir)
    except PromptsError as exc:
        raise click.ClickException(str(exc)) from None
