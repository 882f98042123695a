"""Fixtures for the harness tests: a method whose function is not called ``test_func``, served as stdio serves it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from mcp.client.session import ClientSession

from pau_mcp.manifests import Case, Method, Provenance, Suite, SuiteInfo, Tags, tool_name
from pau_mcp.manifests.checks import freeze_method
from wasm_runtime import Sandbox

if TYPE_CHECKING:
    from pau_mcp.harness import Environment

_ROOT = Path(__file__).resolve().parents[3]
_KEY = "harness-test-key-0123456789abcdef"
VOWELS = "vowels/count"
#: The ``vowels_environment`` fixture: ``async with vowels_environment() as env`` opens an ``Environment``.
OpenEnvironment = Callable[[], AbstractAsyncContextManager["Environment"]]


@pytest.fixture(scope="session")
def vowels(sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A manifests directory with suite ``vowels``: one method, ``def count_vowels(s):``, frozen in the real sandbox."""
    root = tmp_path_factory.mktemp("manifests")
    method = Method(
        id=VOWELS, header="def count_vowels(s):", params=["s"], entry="count_vowels",
        source="def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())\n",
        description="Counts the vowels a, e, i, o and u, in either case.",
        # One input as a bare literal, not a tuple: still one argument.
        examples=[Case(input="('hello',)"), Case(input="'SKY'"), Case(input="(None,)")],
        tests=[Case(input="('queue',)"), Case(input="('Rhythm',)")], provenance=Provenance(dataset="test"),
        tags=Tags(arity=1),
    )  # fmt: skip
    Suite.create(root, SuiteInfo(name="vowels")).save(freeze_method(method, sandbox))
    return root


@pytest.fixture
def vowels_environment(vowels: Path, tmp_path: Path, request: pytest.FixtureRequest) -> OpenEnvironment:
    """Opens an ``Environment`` on the vowels method over a `pau-mcp serve` stdio session (budget 3), as
    `pau-mcp demo` opens one: the server the command builds, in this process (``served_here.streams_here``;
    `pau-mcp demo`'s own tests start the process)."""
    from serve_args import serve_parts
    from served_here import shared_sandboxes, streams_here

    from pau_mcp.harness import Environment

    @contextlib.asynccontextmanager
    async def opened() -> AsyncIterator[Environment]:
        settings, served = serve_parts(
            ["--manifests", str(vowels), "--suite", "vowels", "--db", str(tmp_path / "runs.db"), "--budget", "3",
             "--tool-key", _KEY]
        )  # fmt: skip
        owned: list[Any] = []
        try:
            async with streams_here(settings, served, shared_sandboxes(request, owned)) as (read, write):
                async with ClientSession(read, write) as session:
                    with anyio.fail_after(60):
                        await session.initialize()
                        yield await Environment.open(session, tool_name(_KEY, VOWELS))
        finally:
            for box in owned:
                box.close()

    return opened
