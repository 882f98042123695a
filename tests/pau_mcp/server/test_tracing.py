"""Tracing by the OpenTelemetry GenAI conventions for MCP: spans exported to an in-memory exporter, checked by name,
attribute and parent, through the real server (the MCP SDK's server span, the sandbox's phases, the scorers)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import TEST_KEY, ModernSession, memory_http_server, memory_session, tool_of
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from pau_mcp.manifests import ManifestStore
from pau_mcp.tracing import TracingError, configure

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@pytest.fixture(scope="module")
def spans() -> Iterator[InMemorySpanExporter]:
    """Every span of this process, in memory (a tracer provider is installed once per process)."""
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter
    exporter.shutdown()


def _named(finished: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name == name]


def _parent_id(span: ReadableSpan) -> int:
    """The span id of the span's parent, which every span these tests read has."""
    assert span.parent is not None, span.name
    return span.parent.span_id


def _times(span: ReadableSpan) -> tuple[int, int]:
    """When the span started and ended: every span these tests read has ended."""
    assert span.start_time is not None and span.end_time is not None, span.name
    return span.start_time, span.end_time


def test_a_tool_call_is_a_server_span_under_the_callers_with_a_child_per_sandbox_phase(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    tool = tool_of("builtin/b001")
    spans.clear()
    # Raw requests, as a client in another process sends them (an in-process client would add spans of its own).
    with memory_http_server("--db", str(tmp_path / "runs.db"), "--tool-key", TEST_KEY) as url:
        client = ModernSession(url)
        try:
            reply = client.request(
                "tools/call", {"name": tool, "arguments": {"arg0": 105}}, meta={"traceparent": TRACEPARENT}
            )
            assert reply["structuredContent"]["value"] == "5"
            status, _ = client.send("tools/call", {"name": "fn_0000000000", "arguments": {}})
            assert status == 400
        finally:
            client.close()
    finished = spans.get_finished_spans()
    (call,) = [s for s in _named(finished, f"tools/call {tool}")]
    assert call.kind == trace.SpanKind.SERVER
    assert call.context.trace_id == int(CALLER_TRACE, 16) and _parent_id(call) == int(CALLER_SPAN, 16)
    attributes = dict(call.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.name"] == tool
    assert attributes["gen_ai.operation.name"] == "execute_tool" and attributes["mcp.protocol.version"]
    assert "error.type" not in attributes
    phases = [s for s in finished if s.name.startswith("sandbox ")]
    assert [s.name for s in phases] == ["sandbox instantiate", "sandbox load", "sandbox call"]
    assert all(_parent_id(s) == call.context.span_id and s.context.trace_id == call.context.trace_id for s in phases)
    assert all(start <= end for start, end in map(_times, phases)) and _times(phases[0])[1] <= _times(phases[2])[0]
    (unknown,) = _named(finished, "tools/call fn_0000000000")
    assert (unknown.attributes or {})["error.type"] == "-32602"


def test_scoring_gets_a_span_per_scorer_under_the_submit(
    tmp_path: Path, spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fakellm import FakeLLM

    method = ManifestStore().method("builtin/b002")

    def replies(body: dict[str, Any]) -> str:
        if "<reference-" in json.dumps(body["messages"]):
            return "Rating: 3"
        return "```python\ndef test_func(arg0):\n    return None\n```"

    spans.clear()
    with FakeLLM(responder=replies) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test")

        async def main() -> None:
            args = ("--feedback", "score", "--judge-model", "openai/judge", "--coder-model", "openai/coder")
            async with memory_session("--db", str(tmp_path / "runs.db"), "--methods", method.id, *args) as session:
                submitted = await session.call_tool(
                    "submit",
                    {"method": tool_of(method.id), "description": "d", "code": "def test_func(arg0):\n  return 0"},
                )
                assert submitted.structured_content["status"] == "scored"

        anyio.run(main)
    finished = spans.get_finished_spans()
    (submit,) = _named(finished, "tools/call submit")
    scorers = {s.name: s for s in finished if s.name.startswith("score ")}
    assert set(scorers) == {"score judge", "score codematch", "score direct"}
    assert all(_parent_id(s) == submit.context.span_id for s in scorers.values())
    assert (scorers["score judge"].attributes or {})["gen_ai.request.model"] == "openai/judge"


def test_nothing_is_exported_unless_asked_and_a_missing_exporter_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_TRACES_EXPORTER", raising=False)
    assert configure() is False
    with pytest.raises(TracingError, match="console or otlp"):
        configure("zipkin")
