"""``pau-mcp serve``, ``pau-mcp call`` and ``pau-mcp methods``."""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
import click
from rich.console import Console
from rich.table import Table

from .. import eventloop
from ..config import Settings, SettingsError, options
from ..limits import HTTPLimits, ProtocolLimits, ServiceLimits
from ..manifests import ManifestError
from ..runstore import StoreError
from .common import CommandFunction, err, make_sandbox, manifest_store, settings_from, step_printer

if TYPE_CHECKING:
    from ..server_assembly import Served, ServeRequest

__all__ = ["call", "docs_option", "methods", "serve"]

_SERVE_SETTINGS = (
    "manifests", "budget", "db", "data_dir", "tool_key", "token", "log_file", "timeout_s", "memory_mb", "max_output_kb",
    "cache_dir", "workers", "sandbox_engine", "max_argument_kb", "examples", "protocol",
)  # fmt: skip
# The server's limits (pau_mcp.limits): a limit added to a group there gets its flag here.
_LIMIT_SETTINGS = tuple(
    name
    for name in dict.fromkeys((*ServiceLimits.SETTINGS, *ProtocolLimits.SETTINGS, *HTTPLimits.SETTINGS))
    if name not in _SERVE_SETTINGS
)
# Sign-in (--auth oauth): HTTP only.
_SIGNIN_SETTINGS = ("auth", "issuer", "resource", "introspection_client", "introspection_secret", "clock_skew_s")
# --feedback score needs the scorer's models.
_FEEDBACK_SETTINGS = (
    "judge_model", "coder_model", "pricing", "llm_timeout_s", "llm_deadline_s", "llm_max_reply_mb", "llm_concurrency",
    "llm_retries", "score_seconds",
)  # fmt: skip


def _selection(function: CommandFunction) -> CommandFunction:
    function = click.option(
        "--methods",
        "methods",
        multiple=True,
        help="Only these method ids or tool names (repeatable, or comma-separated).",
    )(function)
    return click.option("--suite", "suites", multiple=True, help="Suite to serve (repeatable; default: builtin).")(
        function
    )


def docs_option(function: CommandFunction) -> CommandFunction:
    """The ``--docs`` option: what each tool is documented with."""
    return click.option(
        "--docs",
        "docs",
        default="examples",
        show_default=True,
        metavar="SOURCE",
        help="What each tool is documented with: examples (its header and initial examples), none (its header only), "
        "a run name or a file from `pau-mcp export docs` (each method's final description in that run, in place of "
        "the examples), or gold (the gold descriptions: the upper bound, only when you ask for it).",
    )(function)


def _split(values: tuple[str, ...]) -> list[str]:
    return [item.strip() for value in values for item in value.split(",") if item.strip()]


def _logging(settings: Settings) -> None:
    handler: logging.Handler = (
        logging.FileHandler(settings.log_file) if settings.log_file else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("pau_mcp")
    root.addHandler(handler)
    # stderr is the client's console (Claude Desktop shows it): only problems there; a log file gets everything.
    root.setLevel(logging.INFO if settings.log_file else logging.WARNING)


def _tracing() -> None:
    """Export spans when ``OTEL_TRACES_EXPORTER`` asks (``pau_mcp.tracing``); a usage error says what is missing."""
    from ..tracing import TracingError, configure

    try:
        configure()
    except TracingError as exc:
        raise click.UsageError(str(exc)) from None


@click.command()
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for Claude Desktop and subprocess clients; http for Streamable HTTP.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP address to listen on.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="HTTP port (0: pick a free one)."
)
@click.option(
    "--stateless",
    is_flag=True,
    help="HTTP without MCP sessions for handshake-era clients too (replicas behind a proxy need no affinity); "
    "budgets are the credential's as always, and `open` is not offered.",
)
@click.option("--run", "run_name", help="Record sessions under this run name (default: a new name per start).")
@click.option(
    "--feedback",
    type=click.Choice(["none", "score"]),
    default="none",
    show_default=True,
    help="What submit returns: nothing but a receipt, or the scores (see --feedback-limit).",
)
@click.option(
    "--page-size",
    type=click.IntRange(1, 1000),
    default=100,
    show_default=True,
    help="Items per page of tools/resources/prompts lists.",
)
@click.option(
    "--exit-with-stdin", is_flag=True, hidden=True, help="Over HTTP, stop when stdin closes (a parent's pipe)."
)
@click.option(
    "--launched",
    is_flag=True,
    hidden=True,
    help='Started by a parent process (pau_mcp.server.launch): over HTTP, write {"ready": URL} on stdout once '
    "listening, and stop when stdin closes.",
)
@click.option(
    "--settings-file",
    type=click.Path(dir_okay=False, path_type=Path),
    hidden=True,
    help="Take every setting from this JSON file (Settings.to_json, written by a parent process) instead of flags and "
    "PAU_* variables.",
)
@docs_option
@_selection
@options(*_SERVE_SETTINGS, "processes", *_LIMIT_SETTINGS, *_SIGNIN_SETTINGS, *_FEEDBACK_SETTINGS)
def serve(transport: Literal["stdio", "http"], host: str, port: int, stateless: bool, run_name: str | None,
          feedback: Literal["none", "score"], page_size: int, exit_with_stdin: bool, launched: bool,
          settings_file: Path | None, docs: str, suites: tuple[str, ...], methods: tuple[str, ...],
          **values: object) -> None:  # fmt: skip
    """Serve every hidden method as an MCP tool (stdio by default).

    With --docs RUN the tools are documented by the descriptions an explorer wrote in that run (`pau-mcp eval`), so
    any MCP client can use them; --docs gold serves the gold descriptions, and only when asked.
    """
    from ..server_assembly import DEFAULT_SUITES, ServeRequest

    settings = _settings(values, settings_file)
    request = ServeRequest(
        transport, host, port, stateless, run_name, feedback, page_size, suites or DEFAULT_SUITES,
        tuple(_split(methods)), docs,
    )  # fmt: skip
    _check_exposure(settings, request)
    _logging(settings)
    if settings.processes > 1:
        sys.exit(_run_processes(settings, request, exit_with_stdin=exit_with_stdin or launched, launched=launched))
    _tracing()
    served = _assembled(settings, request)
    logging.getLogger("pau_mcp.server").info(
        "serving %d methods over %s, budget %s", len(served.service.catalog), transport, settings.budget
    )
    _run(served, exit_with_stdin=exit_with_stdin or launched, launched=launched)


def _check_exposure(settings: Settings, request: ServeRequest) -> None:
    """Refuse a non-loopback HTTP address without a token or sign-in, before the run store, the suites and the
    sandbox workers exist: nothing to undo."""
    from ..server import TransportError, check_exposure

    if request.transport != "http":
        return
    try:
        check_exposure(request.host, settings.token, signed_in=settings.auth == "oauth")
    except TransportError as exc:
        raise click.UsageError(str(exc)) from None


def _assembled(settings: Settings, request: ServeRequest) -> Served:
    """The server of ``request`` (``server_assembly.assemble_server``), its refusals told as the command's."""
    from ..server_assembly import AssemblyError, assemble_server

    try:
        return assemble_server(settings, request, progress=step_printer())
    except AssemblyError as exc:
        raise (click.UsageError if exc.usage else click.ClickException)(str(exc)) from None


def _run(served: Served, exit_with_stdin: bool, launched: bool) -> None:
    """Run ``served`` on its transport until the client (stdio) or the operator (HTTP) stops it."""
    from ..server import TransportError, run_stdio, serve_http
    from ..server_assembly import exposure_warning

    try:
        if served.transport == "stdio":
            eventloop.run(run_stdio, served.server, served.protocol.message_bytes)
            return
        warning = exposure_warning(served.settings, served.request)
        if warning:
            logging.getLogger("pau_mcp.server").warning(warning)
        service = served.http_service()
        if launched:  # listening already: connections made from now wait in the backlog
            from ..server.launch import ready_line

            print(ready_line(service.url), flush=True)
        serve_http(service, exit_with_stdin=exit_with_stdin)
    except TransportError as exc:
        raise click.UsageError(str(exc)) from None
    except KeyboardInterrupt:
        pass


def _run_processes(settings: Settings, request: ServeRequest, exit_with_stdin: bool, launched: bool) -> int:
    """Serve ``request`` from ``settings.processes`` processes on one socket (``pau_mcp.server.supervisor``) until
    stopped; the supervisor's exit status."""
    from ..listening import shown_host
    from ..server import REFUSED, ProcessesError, TransportError, listen_http, serve_http, serve_processes
    from ..server_assembly import AssemblyError, exposure_warning, prepare_processes

    try:
        request = prepare_processes(settings, request)
        socks = listen_http(
            request.host, request.port, settings.token, signed_in=settings.auth == "oauth", count=settings.processes
        )
    except AssemblyError as exc:
        raise (click.UsageError if exc.usage else click.ClickException)(str(exc)) from None
    except TransportError as exc:
        raise click.UsageError(str(exc)) from None
    url = f"http://{shown_host(request.host)}:{socks[0].getsockname()[1]}/mcp"
    warning = exposure_warning(settings, request)
    if warning:
        logging.getLogger("pau_mcp.server").warning(warning)

    def serve_one(index: int) -> None:
        for other in socks[:index] + socks[index + 1 :]:  # the kernel hands each socket its own connections
            other.close()
        _tracing()  # its exporter's thread belongs to this process
        try:
            served = _assembled(settings, request)
        except click.ClickException as exc:
            exc.show()
            raise SystemExit(REFUSED) from None
        logging.getLogger("pau_mcp.server").info(
            "process %d serving %d methods over http, budget %s", index, len(served.service.catalog), settings.budget
        )
        serve_http(served.http_service(socks[index]), announce=False)

    if launched:  # listening already: connections made from now wait in the backlog
        from ..server.launch import ready_line

        print(ready_line(url), flush=True)
    else:
        print(f"pau-mcp: serving at {url} ({settings.processes} processes)", file=sys.stderr, flush=True)
    try:
        return serve_processes(settings.processes, serve_one, exit_with_stdin=exit_with_stdin)
    except ProcessesError as exc:
        raise click.ClickException(str(exc)) from None


def _settings(values: dict[str, Any], settings_file: Path | None) -> Settings:
    """The command's settings: from ``--settings-file`` when a parent process wrote one, else from its options."""
    if settings_file is None:
        return settings_from(values)
    from ..userfiles import UnreadableFile, read_text

    try:
        return Settings.from_json(read_text(settings_file, limit=1024 * 1024))
    except (UnreadableFile, SettingsError) as exc:
        raise click.UsageError(f"--settings-file: {exc}") from None


@click.command()
@click.argument("tool")
@click.argument("literal")
@_selection
@options(*_SERVE_SETTINGS)
def call(tool: str, literal: str, suites: tuple[str, ...], methods: tuple[str, ...], **values: object) -> None:
    """Call TOOL (a tool name or method id) once with LITERAL, exactly as an agent's tool call would run.

    The call is recorded in the run store under the run "cli". Exits 1 when the call was refused.
    """
    from ..contract import REFUSED
    from ..server import Credential
    from ..server_assembly import create_service

    settings = settings_from(values)
    try:
        service, sessions = create_service(
            settings,
            list(suites) or ["builtin"],
            _split(methods),
            "cli",
            "cli",
            progress=step_printer(),
            sandboxes=make_sandbox,
        )
    except (ManifestError, SettingsError, StoreError) as exc:
        raise click.ClickException(str(exc)) from None
    try:
        exposed = service.catalog.find(tool)
        if exposed is None:
            raise click.UsageError(_not_served(settings, tool, list(suites) or ["builtin"]))
        state = sessions.get(Credential("process", f"cli-{uuid.uuid4().hex[:12]}"))
        reply = anyio.run(service.call, state, exposed, {"args": literal})
    finally:
        # Not left to the process's exit: the command also runs inside other programs (and the tests). Its sandbox
        # stops with the command (``make_sandbox``).
        service.store.close()
    click.echo(reply.text)
    sys.exit(1 if reply.is_error or (reply.structured or {}).get("status") in REFUSED else 0)


def _not_served(settings: Settings, tool: str, served: list[str]) -> str:
    """Why ``call`` found no ``tool``: a method of a suite it does not serve names the ``--suite`` to add."""
    suite = tool.split("/", 1)[0] if "/" in tool else ""
    if suite and suite not in served:
        try:
            manifest_store(settings).method(tool)
        except ManifestError:
            pass
        else:
            return (
                f"{tool!r} is a method of suite {suite!r}, which this command does not serve (it serves "
                f"{', '.join(served)}): add --suite {suite}"
            )
    return (
        f"no method {tool!r} in the served suites ({', '.join(served)}); see `pau-mcp methods` (add --suite SUITE for "
        "another suite's)"
    )


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON object per method.")
@_selection
@options(
    "manifests", "budget", "data_dir", "tool_key", "examples", "timeout_s", "memory_mb", "max_output_kb", "cache_dir"
)
def methods(as_json: bool, suites: tuple[str, ...], methods: tuple[str, ...], **values: object) -> None:
    """List the tools a server with the same options (and the same tool key) would expose, with the initial examples
    it would serve, in the suites' order (agents get every list in the order of the tool names instead).

    With --examples deployment the examples are drawn for this deployment (or read from their cache, which this
    command fills for the servers that start later).
    """
    from ..server import Catalog, serve_examples

    settings = settings_from(values)
    try:
        catalog = Catalog(
            manifest_store(settings), list(suites) or ["builtin"], _split(methods), key=settings.deployment_key()
        )
        catalog = serve_examples(catalog, settings, progress=step_printer())
    except (ManifestError, SettingsError) as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        for exposed in catalog.in_suite_order():
            click.echo(
                json.dumps(
                    {
                        "tool": exposed.tool,
                        "id": exposed.method.id,
                        "header": exposed.method.header,
                        "examples": exposed.example_lines(),
                        "examples_from": exposed.origin,
                    }
                )
            )
        return
    table = Table("tool", "method", "header", "first example")
    for exposed in catalog.in_suite_order():
        lines = exposed.example_lines()
        table.add_row(exposed.tool, exposed.method.id, exposed.method.header, lines[0] if lines else "")
    Console().print(table)
    kept = [e.method.id for e in catalog if e.origin == "published" and e.method.examples]
    note = (
        f"; examples drawn for this deployment, but {len(kept)} keep their published ones ({', '.join(sorted(kept))})"
        if settings.examples == "deployment" and kept
        else f"; {settings.examples} examples"
    )
    err.print(f"{len(catalog)} methods; budget {settings.budget or 'unlimited'} calls per method per session{note}")
