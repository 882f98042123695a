"""``pau-mcp token issue``: session tokens, for agents that must not share or reset a budget."""

from __future__ import annotations

import time

import click

from ..config import Settings, SettingsError, options
from ..manifests import ManifestError
from .common import err, manifest_store, settings_from

__all__ = ["token"]


@click.group()
def token() -> None:
    """Session tokens: bearer credentials whose label is their budget (docs/server.md)."""


@token.command("issue")
@click.option("--label", required=True, help="The session's label: its budget and its name in the run store.")
@click.option("--run", "run_name", help="Record its session under this run (default: the server's run).")
@click.option(
    "--methods",
    "methods",
    multiple=True,
    help="Only these methods, as tool names or method ids (repeatable, or comma-separated); the token holds tool names.",
)
@click.option(
    "--expires-in",
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds the token stays valid (default: until the deployment key changes).",
)
@options("manifests", "data_dir", "tool_key")
def issue(
    label: str, run_name: str | None, methods: tuple[str, ...], expires_in: float | None, **values: object
) -> None:
    """Print a new session token for LABEL, signed with the deployment key (keep both secret).

    A server with the same key accepts it as `Authorization: Bearer TOKEN`, like its --token; every request
    carrying it spends the label's budget, whatever MCP session or connection carries it.
    """
    from ..contract import label_problem
    from ..server import TokenSigner

    settings = settings_from(values)
    for what, value in (("label", label), ("run", run_name)):
        problem = label_problem(value, what) if value is not None else None
        if problem:
            raise click.UsageError(problem)
    try:
        key = settings.deployment_key()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from None
    wanted = [item.strip() for value in methods for item in value.split(",") if item.strip()]
    tools = _tools(settings, key, wanted) if wanted else None
    try:
        issued = TokenSigner(key).issue(label, run=run_name, methods=tools, expires_in=expires_in)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(issued)
    until = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(time.time() + expires_in)) if expires_in else "no expiry"
    err.print(
        f"session token for label {label!r}" + (f" in run {run_name!r}" if run_name else "")
        + (f", {len(tools)} method(s)" if tools is not None else ", every method served")
        + f", {until}; send it as `Authorization: Bearer <token>`",
        markup=False, highlight=False,
    )  # fmt: skip


def _tools(settings: Settings, key: str, wanted: list[str]) -> list[str]:
    """The tool names of the methods (ids or tool names) a token is limited to; an unknown one is a usage error."""
    from ..manifests.lookup import tools_for

    try:
        chosen = tools_for(manifest_store(settings), key, wanted)
    except ManifestError as exc:
        raise click.ClickException(str(exc)) from None
    if chosen.unknown:
        raise click.UsageError(f"no method {', '.join(chosen.unknown)} in any suite; see `pau-mcp methods`")
    return chosen.tools
