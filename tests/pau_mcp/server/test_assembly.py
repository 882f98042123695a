"""The served server is assembled in one place (``pau_mcp.server_assembly``) from ``Settings`` and a ``ServeRequest``:
the command, the tests and the benchmarks build it there, and nothing outside the commands reads a command line."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from conftest import TEST_KEY
from mcp.client.client import Client

from pau_mcp.config import Settings
from pau_mcp.server_assembly import AssemblyError, ServeRequest, assemble_server
from wasm_runtime import SandboxInterface

ROOT = Path(__file__).resolve().parents[3]


def test_a_server_is_built_from_settings_and_a_request_with_their_limits(
    tmp_path: Path, worker_sandbox: SandboxInterface
) -> None:
    settings = Settings.from_options(db=tmp_path / "runs.db", tool_key=TEST_KEY, budget=1, max_concurrent_calls=2)
    request = ServeRequest(page_size=1, methods=("builtin/b001", "builtin/b002"), run="assembled")
    built = assemble_server(settings, request, sandboxes=lambda *args, **kwargs: worker_sandbox)

    async def pages() -> list[int]:
        sizes: list[int] = []
        cursor: str | None = None
        async with Client(built.server, mode="2026-07-28") as client:
            while True:
                listed = await client.list_tools(cursor=cursor)
                sizes.append(len(listed.tools))
                cursor = listed.next_cursor
                if cursor is None:
                    return sizes

    try:
        assert anyio.run(pages) == [1, 1, 1]  # submit and the two methods, a page each
        assert built.protocol.calls_running == 2 and built.protocol.page_size == 1
        assert built.service.limits.budget == 1 and built.transport == "stdio"
        assert built.service.store.find_run("assembled") is not None
    finally:
        built.service.store.close()


def test_an_unknown_suite_is_an_assembly_error_that_names_it(tmp_path: Path) -> None:
    settings = Settings.from_options(db=tmp_path / "runs.db", tool_key=TEST_KEY)
    with pytest.raises(AssemblyError, match="no suite named 'nope'") as refused:
        assemble_server(settings, ServeRequest(suites=("nope",)))
    assert not refused.value.usage


def test_nothing_outside_the_commands_parses_a_command_line_with_click() -> None:
    parsing = [
        str(path.relative_to(ROOT))
        for folder in ("pau_mcp", "tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "make_context" in path.read_text(encoding="utf-8") and path != Path(__file__).resolve()
    ]
    assert [path for path in parsing if not re.match(r"pau_mcp/cli/", path)] == []
