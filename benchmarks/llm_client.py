"""Client CPU per model request: the openai SDK transport side by side with the hand-written one it replaced.

Every variant sends the same requests through ``LLMClient.complete`` (no response cache), one at a time, to
the instant scripted model in its own process (benchmarks/_instant_llm.py), so this process's CPU time
(``time.process_time``) is the client's own work per request: building the body, the HTTP exchange, parsing
the reply, accounting.

* **hand-written**: the aiohttp client of ``pau_mcp/llm.py`` as it was before the SDK came back, loaded from
  git history into a temporary module (the baseline; not production code).
* **SDK post, aiohttp**: what ``pau_mcp.llm`` uses: ``AsyncOpenAI`` with ``DefaultAioHttpClient``, the body
  sent through the client's ``post()``.
* **SDK create, aiohttp**: the same through ``chat.completions.create()``, which first walks every message
  against the parameter types: for the choice of method.
* **SDK post, httpx**: ``post()`` over the SDK's default httpx client: for the choice of transport.

Two requests: a judge's (a system and a user message) and a tools agent's late in an episode (two tools, 20
calls and their results in the conversation). Rounds alternate the variants; medians are reported.
Usage: python benchmarks/llm_client.py [--requests 300] [--rounds 3] [--write]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _markdown import write_section  # noqa: E402 (this script's own directory)

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from pau_mcp import eventloop  # noqa: E402
from pau_mcp.llm import LLMClient, Pricing  # noqa: E402
from pau_mcp.llm.openai import OpenAIProvider  # noqa: E402

MODEL = "openai/instant"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "fn_0123456789",
            "description": "The hidden function `def test_func(arg0):`. Call it with the arguments as a Python literal.",
            "parameters": {"type": "object", "properties": {"args": {"type": "string"}}, "required": ["args"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Submit a description of the method, and optionally code.",
            "parameters": {
                "type": "object",
                "properties": {
                    "method": {"type": "string"},
                    "description": {"type": "string"},
                    "code": {"type": "string"},
                },
                "required": ["method", "description"],
            },
        },
    },
]


def _judge() -> dict[str, Any]:
    messages = [
        {"role": "system", "content": "You compare two descriptions of a Python function and rate their agreement."},
        {"role": "user", "content": "<reference>Counts runs of equal characters.</reference>\n" * 8 + "Rating:"},
    ]
    return {"messages": messages, "temperature": 0, "max_tokens": 300}


def _agent() -> dict[str, Any]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful experimenter studying a hidden Python function."},
        {"role": "user", "content": "Find out what the hidden Python function does. Known examples: ..." * 4},
    ]
    for n in range(20):
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "fn_0123456789", "arguments": f'{{"args": "({n},)"}}'},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": f"test_func({n},) returned {n * n}"})
    return {"messages": messages, "tools": TOOLS, "temperature": 0, "max_tokens": 800}


def _handwritten_module(tmp: Path) -> Any:
    """``pau_mcp/llm.py`` from the last commit that had it, as a module of its own."""
    deleted = subprocess.run(
        ["git", "rev-list", "-n", "1", "HEAD", "--", "pau_mcp/llm.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    source = subprocess.run(
        ["git", "show", f"{deleted}^:pau_mcp/llm.py"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    path = tmp / "handwritten_llm.py"
    path.write_text(source.replace("from . import __version__", "from pau_mcp import __version__"))
    spec = importlib.util.spec_from_file_location("handwritten_llm", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["handwritten_llm"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module, deleted[:10]


class _HttpxProvider(OpenAIProvider):
    """The SDK with its default httpx transport."""

    def _new_client(self) -> Any:
        import openai

        return openai.AsyncOpenAI(**self._settings(), timeout=self.timeout_s, max_retries=0)


class _CreateProvider(OpenAIProvider):
    """The SDK's typed ``chat.completions.create()``."""

    async def send(self, model: str, body: dict[str, Any], request: Any) -> Any:
        return self._chat_reply(model, await self._client.get().chat.completions.create(**body))


def _clients(handwritten: Any) -> dict[str, Any]:
    env = dict(os.environ)
    httpx = LLMClient(env=env, pricing=Pricing({}))
    httpx._providers["openai"] = _HttpxProvider(httpx.env, httpx.timeout_s)
    create = LLMClient(env=env, pricing=Pricing({}))
    create._providers["openai"] = _CreateProvider(create.env, create.timeout_s)
    return {
        "hand-written": handwritten.LLMClient(env=env, pricing=handwritten.Pricing({})),
        "SDK post, aiohttp": LLMClient(env=env, pricing=Pricing({})),
        "SDK create, aiohttp": create,
        "SDK post, httpx": httpx,
    }


async def _measure(clients: dict[str, Any], request: dict[str, Any], count: int) -> dict[str, float]:
    """CPU microseconds per request for each client, after a warm-up."""
    out = {}
    for name, client in clients.items():
        for _ in range(20):
            await client.complete(MODEL, **request, cache=False)
        started = time.process_time()
        for _ in range(count):
            await client.complete(MODEL, **request, cache=False)
        out[name] = (time.process_time() - started) / count * 1e6
    return out


async def _rounds(handwritten: Any, count: int, rounds: int) -> dict[str, dict[str, list[float]]]:
    clients = _clients(handwritten)
    results: dict[str, dict[str, list[float]]] = {}
    try:
        for _ in range(rounds):
            for shape, request in (("judge", _judge()), ("tools agent, 20 calls in", _agent())):
                for name, cpu in (await _measure(clients, request, count)).items():
                    results.setdefault(shape, {}).setdefault(name, []).append(cpu)
    finally:
        for client in clients.values():
            await client.aclose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=300, help="requests per variant and round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; the median is reported")
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.requests, options.rounds = 5, 1
    model = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "_instant_llm.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    with model, tempfile.TemporaryDirectory() as tmp:
        assert model.stdout is not None and model.stdin is not None
        os.environ.update(OPENAI_BASE_URL=model.stdout.readline().strip(), OPENAI_API_KEY="bench")
        handwritten, commit = _handwritten_module(Path(tmp))
        results = eventloop.run(_rounds, handwritten, options.requests, options.rounds)
        model.stdin.close()
    import openai

    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {platform.machine()}, Python {platform.python_version()}, "
        f"{len(os.sched_getaffinity(0))} CPUs, openai {openai.__version__}; CPU time of the client's process per "
        f"request (median of {options.rounds} rounds of {options.requests} requests, one at a time, no cache) against "
        f"the instant model in its own process on loopback. Hand-written: `pau_mcp/llm.py` at {commit}^.",
        "",
        "| request | hand-written (aiohttp) | **SDK post, aiohttp (pau_mcp.llm)** | SDK create, aiohttp | SDK post, httpx "
        "| pau_mcp.llm / hand-written |",
        "|---|---|---|---|---|---|",
    ]
    for shape, by_name in results.items():
        ms = {name: statistics.median(values) / 1000 for name, values in by_name.items()}
        base, sdk = ms["hand-written"], ms["SDK post, aiohttp"]
        lines.append(
            f"| {shape} | {base:.2f} ms | **{sdk:.2f} ms** | {ms['SDK create, aiohttp']:.2f} ms | "
            f"{ms['SDK post, httpx']:.2f} ms | **{sdk / base:.1f}x** (+{sdk - base:.2f} ms) |"
        )
    table = "\n".join(lines)
    print(table)
    if options.write:
        write_section("llm", table)


if __name__ == "__main__":
    main()
