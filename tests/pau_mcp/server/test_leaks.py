"""Nothing an agent can see may contain a hidden method's source, gold description or test suite.

A whole session is recorded, message by message, as the client received it,
including errors, over-budget calls, malformed input and a function that
raises; then every hidden string is searched for in all of it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from conftest import ROOT, SECRETS, tool_of
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

from pau_mcp.contract import FACTS_KEY
from pau_mcp.manifests import ManifestStore


async def _recorded_session(manifests: Path, db: Path, transcript: list[str]) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "pau_mcp", "serve", "--manifests", str(manifests), "--suite", "secret", "--db", str(db), "--budget", "4"],
        cwd=str(ROOT), env=dict(os.environ),
    )  # fmt: skip
    async with stdio_client(params) as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](100)

        async def tee() -> None:
            async with send:
                async for message in read:
                    transcript.append(
                        message.message.model_dump_json() if hasattr(message, "message") else repr(message)
                    )
                    await send.send(message)

        async with anyio.create_task_group() as group:
            group.start_soon(tee)
            async with ClientSession(receive, write) as session:
                with anyio.fail_after(120):
                    await session.initialize()
                    store = ManifestStore([manifests])
                    m1, m2 = store.method("secret/m1"), store.method("secret/m2")
                    await session.list_tools()
                    await session.list_resources()
                    await session.read_resource(f"pau://method/{tool_of(m1.id)}")
                    await session.list_prompts()
                    await session.get_prompt(tool_of(m1.id))
                    for arguments in (
                        {"arg0": "hello"}, {"arg0": "boom"}, {"args": "(1,)"}, {"args": "(open('x'),)"},
                        {"arg0": 1, "args": "(1,)"}, {"nope": 1}, {"arg0": 7}, {"arg0": 8}, {"arg0": 9},
                    ):  # fmt: skip
                        await session.call_tool(tool_of(m1.id), arguments)
                    await session.call_tool(tool_of(m2.id), {"arg0": 1})
                    for unknown in ("fn_0000000000", "secret/m1"):  # a method id is answered as any unknown name
                        try:
                            await session.call_tool(unknown, {"arg0": 1})
                        except Exception as exc:
                            transcript.append(str(exc))
                    await session.call_tool("submit", {"method": tool_of(m1.id), "description": "shouts"})
                    await session.call_tool("submit", {"method": "secret/m1", "description": ""})
                    await session.call_tool("open", {"methods": ["nope"]})
                    for bad in ("pau://method/nope", f"pau://method/{m1.id}"):
                        try:
                            await session.read_resource(bad)
                        except Exception as exc:
                            transcript.append(str(exc))
                    try:
                        await session.get_prompt("secret/m1")
                    except Exception as exc:
                        transcript.append(str(exc))
            group.cancel_scope.cancel()


def test_no_message_of_a_whole_session_reveals_source_description_or_tests(
    tmp_path: Path, secret_manifests: Path
) -> None:
    transcript: list[str] = []
    anyio.run(_recorded_session, secret_manifests, tmp_path / "runs.db", transcript)
    text = "\n".join(transcript)
    assert len(transcript) > 20
    assert "raised ValueError" in text and "budget" in text and "Invalid arguments" in text
    assert FACTS_KEY in text  # the tools' facts as data are searched too
    store = ManifestStore([secret_manifests])
    hidden = set(SECRETS.values())
    for method in store.suite("secret").methods.values():
        hidden.add(method.description)
        hidden.update(
            line.strip()
            for line in method.source.splitlines()
            if len(line.strip()) > 12 and line.strip() != method.header
        )
        for case in method.tests:
            hidden.add(case.input)
            hidden.add(json.dumps(case.input)[1:-1])
            if case.outcome is not None and case.outcome.value and len(case.outcome.value) > 3:
                hidden.add(case.outcome.value)
    leaks = sorted(secret for secret in hidden if secret in text)
    assert leaks == []
