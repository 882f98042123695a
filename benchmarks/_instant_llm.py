"""An instant scripted model for benchmarks, served from its own process (as a real provider would be).

Prints its base URL on stdout, then serves until stdin closes. The script: a tools
agent makes 20 tool calls and submits; the judge rates 2; the code writer returns
a constant function.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from fakellm import FakeLLM, Reply  # noqa: E402

__all__ = ["instant"]


def instant(body: dict) -> Reply | str:
    """The reply to one request."""
    messages = body["messages"]
    if body.get("tools"):
        tool = next((t["function"]["name"] for t in body["tools"] if t["function"]["name"].startswith("fn_")), None)
        used = sum(1 for m in messages if m.get("role") == "tool")
        if tool and used < 20:
            return Reply(tool_calls=[(tool, {"args": f"({used},)"})])
        return Reply(tool_calls=[("submit", {"method": tool or "", "description": "returns a number"})])
    text = str(messages[-1].get("content"))
    if "<reference>" in text:
        return "Rating: 2"
    return "```python\ndef test_func(*args):\n    return 0\n```"


if __name__ == "__main__":
    with FakeLLM(responder=instant) as fake:
        print(fake.base_url, flush=True)
        sys.stdin.read()
