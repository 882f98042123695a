"""Tracing by the OpenTelemetry GenAI conventions for MCP (``pip install 'pau-mcp[tracing]'``).

Each MCP request is a server span named ``{mcp.method.name} {target}`` (``tools/call fn_2c9d41e07a``), with
``mcp.method.name``, ``mcp.protocol.version``, ``gen_ai.operation.name`` (``execute_tool``), ``gen_ai.tool.name``,
``jsonrpc.request.id`` and, when it fails, ``error.type`` (the JSON-RPC code, or ``tool_error`` for a result with
``isError``); its parent is the caller's span when the request's ``_meta`` carries ``traceparent`` (and
``tracestate``). That span is the MCP SDK's own (``OpenTelemetryMiddleware``, on every server it builds). Below it
this module adds, for a call of a hidden method, one child span per sandbox phase (``sandbox instantiate``,
``sandbox load``, ``sandbox call``: their times come back with the outcome from the worker process that ran it,
``wasm_runtime.phases``), and for scoring a span per scorer (``score judge``, ``score codematch``).

Nothing is exported unless the operator asks: ``configure`` installs the SDK's tracer provider when
``OTEL_TRACES_EXPORTER`` names an exporter (``console``, or ``otlp`` with the OTLP exporter package, which reads the
usual ``OTEL_EXPORTER_OTLP_*`` variables). Without it (or without the extra) the OpenTelemetry API answers with
non-recording spans, and the spans here cost a check of the current span.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from opentelemetry import trace

__all__ = ["EXPORTERS", "TracingError", "configure", "record_phases", "scoring_span"]

_tracer = trace.get_tracer("pau-mcp")

#: The exporters ``OTEL_TRACES_EXPORTER`` may name (``none``, or unset, exports nothing).
EXPORTERS = ("console", "otlp")


class TracingError(RuntimeError):
    """Tracing was asked for and cannot be set up; the message says what to install or set."""


class _Phase(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def start_ns(self) -> int: ...
    @property
    def end_ns(self) -> int: ...


def configure(exporter: str | None = None) -> bool:
    """Export spans when asked: ``exporter``, else ``OTEL_TRACES_EXPORTER`` (``console`` or ``otlp``).

    Returns whether spans are exported. A tracer provider someone else installed is left alone.

    Raises:
        TracingError: an exporter is named but the ``tracing`` extra (or, for ``otlp``, the OTLP exporter) is
            missing, or the name is unknown.
    """
    chosen = (exporter or os.environ.get("OTEL_TRACES_EXPORTER") or "none").strip().lower()
    if chosen == "none":
        return False
    if chosen not in EXPORTERS:
        raise TracingError(f"OTEL_TRACES_EXPORTER={chosen!r}: pau-mcp exports to {' or '.join(EXPORTERS)} (or none)")
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
    except ImportError:
        raise TracingError(
            "tracing needs the OpenTelemetry SDK: pip install 'pau-mcp[tracing]' (or unset OTEL_TRACES_EXPORTER)"
        ) from None
    span_exporter: SpanExporter
    if chosen == "console":
        span_exporter = ConsoleSpanExporter()
    else:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingError(
                "OTEL_TRACES_EXPORTER=otlp needs the OTLP exporter: pip install opentelemetry-exporter-otlp-proto-http"
            ) from None
        span_exporter = OTLPSpanExporter()
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        current.add_span_processor(BatchSpanProcessor(span_exporter))
        return True
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "pau-mcp")})
    )
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    return True


def record_phases(tool: str, phases: Sequence[_Phase]) -> None:
    """Child spans of the current span for a sandbox call's phases (nothing when the current span is not recorded).

    Args:
        tool: The tool called (``gen_ai.tool.name``).
        phases: The call's phases (``wasm_runtime.phases.Phase``), with their own start and end times.
    """
    if not phases or not trace.get_current_span().is_recording():
        return
    for phase in phases:
        span = _tracer.start_span(
            f"sandbox {phase.name}",
            start_time=phase.start_ns,
            attributes={"gen_ai.tool.name": tool, "pau.sandbox.phase": phase.name},
        )
        span.end(end_time=phase.end_ns)


@contextlib.contextmanager
def scoring_span(scorer: str, method_id: str, model: str | None = None) -> Iterator[Any]:
    """A span for one scorer's work on a submission (``score judge``, ``score codematch``).

    Args:
        scorer: ``judge`` or ``codematch``.
        method_id: The method scored (for the operator: never shown to an agent).
        model: The model the scorer asks, if any (``gen_ai.request.model``).
    """
    attributes: dict[str, Any] = {"pau.scorer": scorer, "pau.method.id": method_id}
    if model:
        attributes["gen_ai.request.model"] = model
    with _tracer.start_as_current_span(f"score {scorer}", attributes=attributes) as span:
        yield span
