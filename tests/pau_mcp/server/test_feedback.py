"""`pau-mcp serve --feedback score`: submit answers with scores (never gold material) and records them."""

from __future__ import annotations

import json
import os
import sqlite3
import sys

import anyio
from conftest import ROOT
from fakellm import FakeLLM
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pau_mcp.manifests import ManifestStore

METHOD = ManifestStore().method("builtin/b002")


def _replies(body: dict) -> str:
    prompt = json.dumps(body["messages"])
    if "<reference>" in prompt:
        return f"The reference: {METHOD.description}\nRating: 3"
    return "```python\ndef test_func(arg0):\n    return None\n```"


def test_submit_with_feedback_returns_scores_records_them_and_reveals_no_gold(tmp_path):
    db = tmp_path / "runs.db"
    with FakeLLM(responder=_replies) as fake:
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "test"}
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "pau_mcp", "serve", "--feedback", "score", "--db", str(db), "--data-dir", str(tmp_path),
                  "--judge-model", "openai/judge", "--coder-model", "openai/coder", "--methods", METHOD.id],
            cwd=str(ROOT), env=env,
        )  # fmt: skip

        async def main() -> dict:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                with anyio.fail_after(120):
                    await session.initialize()
                    result = await session.call_tool(
                        "submit",
                        {
                            "method": METHOD.tool_name,
                            "description": "counts things",
                            "code": "def test_func(arg0):\n    return 0",
                        },
                    )
                    assert not result.is_error
                    return {"structured": result.structured_content, "text": result.content[0].text}

        shown = anyio.run(main)
    scores = shown["structured"]["scores"]
    assert scores["judge_rating"] == 3 and 0 <= scores["code_match"] < 1 and "direct_code_match" in scores
    text = json.dumps(shown)
    assert METHOD.description not in text
    assert not [
        case.input
        for case in METHOD.tests
        if case.input in text and case.input != scores.get("counterexample", {}).get("input")
    ]
    rows = sqlite3.connect(db).execute("SELECT kind, status, value FROM scores ORDER BY kind").fetchall()
    assert [(k, s) for k, s, _ in rows] == [("codematch", "scored"), ("direct", "scored"), ("judge", "scored")]
    assert dict((k, v) for k, _, v in rows)["judge"] == 3.0
