"""What a served server lets its clients take, in three typed groups, each made from ``Settings`` here and only here.

- ``ServiceLimits``: what the method service counts per credential (calls per method, submissions, feedback,
  argument size); ``pau_mcp.server.MethodService`` enforces them on either transport.
- ``ProtocolLimits``: what the MCP layer gives one request (the largest message, items per list page) and how
  many calls of one credential run at once; ``pau_mcp.server.build_server`` and the stdio transport enforce them.
- ``HTTPLimits``: what the Streamable HTTP transport gives its clients (sessions, connections, slow readers,
  allowed ``Host`` headers); ``pau_mcp.server.bind_http`` enforces them.

A new limit is a field of ``Settings`` (``pau_mcp.config``: its flag and ``PAU_*`` variable), a field of one group
here (its line in the group's ``from_settings`` and its name in the group's ``SETTINGS``, which gives
``pau-mcp serve`` its flag), and the code of the feature that enforces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .config import Settings

__all__ = ["PAGE_SIZE", "HTTPLimits", "ProtocolLimits", "ServiceLimits", "message_limit"]

#: Items per page of the tools, resources and prompts lists unless ``serve --page-size`` says otherwise.
PAGE_SIZE = 100

#: How many calls of one credential may wait for a slot, per call it may run at once (``--max-concurrent-calls``).
_WAITING_PER_RUNNING = 7


def message_limit(max_argument_bytes: int) -> int:
    """The largest message a transport reads: room for the largest arguments, escaped, and a submission."""
    return max(1 << 20, 2 * max_argument_bytes + (64 << 10))


@dataclass(frozen=True)
class ServiceLimits:
    """What the method service lets one credential take.

    Attributes:
        budget: Calls per method per credential (``--budget``); 0 for none.
        feedback_limit: Scored submissions per method per credential (``--feedback-limit``).
        max_argument_bytes: The largest arguments of one call, in bytes (``--max-argument-kb``).
        max_submissions: Submissions per method per credential (``--max-submissions``); 0 for no limit.
    """

    budget: int = 20
    feedback_limit: int = 3
    max_argument_bytes: int = 64 * 1024
    max_submissions: int = 0

    #: The settings these limits are made from (``pau-mcp serve`` takes the flag of each).
    SETTINGS: ClassVar[tuple[str, ...]] = ("budget", "feedback_limit", "max_argument_kb", "max_submissions")

    @classmethod
    def from_settings(cls, settings: Settings) -> ServiceLimits:
        """The service limits ``settings`` give."""
        return cls(
            budget=settings.budget,
            feedback_limit=settings.feedback_limit,
            max_argument_bytes=settings.max_argument_kb * 1024,
            max_submissions=settings.max_submissions,
        )


@dataclass(frozen=True)
class ProtocolLimits:
    """What the MCP layer gives one request, on either transport.

    Attributes:
        message_bytes: The largest message read (``message_limit`` of ``--max-argument-kb``).
        page_size: Items per page of the tools, resources and prompts lists (``serve --page-size``).
        calls_running: Calls and submits of one credential run at once (``--max-concurrent-calls``); 0 for no limit.
        calls_waiting: Further calls of one credential that wait for a slot; more are refused.
    """

    message_bytes: int = 1 << 20
    page_size: int = PAGE_SIZE
    calls_running: int = 0
    calls_waiting: int = 0

    #: The settings these limits are made from (``pau-mcp serve`` takes the flag of each).
    SETTINGS: ClassVar[tuple[str, ...]] = ("max_argument_kb", "max_concurrent_calls")

    @classmethod
    def from_settings(cls, settings: Settings, page_size: int = PAGE_SIZE) -> ProtocolLimits:
        """The protocol limits ``settings`` give, with ``page_size`` items per list page (a request's choice, not a
        setting: ``serve --page-size``)."""
        return cls(
            message_bytes=message_limit(settings.max_argument_kb * 1024),
            page_size=page_size,
            calls_running=settings.max_concurrent_calls,
            calls_waiting=_WAITING_PER_RUNNING * settings.max_concurrent_calls,
        )


@dataclass(frozen=True)
class HTTPLimits:
    """What one HTTP client may take of the server (see ``pau_mcp.server.http`` for how each is enforced).

    Attributes:
        message_bytes: The largest request body (``message_limit`` of ``--max-argument-kb``).
        max_sessions: Open MCP sessions of the whole server (``--max-sessions``).
        sessions_per_credential: Open MCP sessions of one credential (``--max-sessions-per-credential``).
        session_idle_s: An MCP session unused this long is closed (``--session-idle``).
        max_connections: Open connections (``--max-connections``).
        read_timeout_s: A request's head and body must arrive within this (``--read-timeout``).
        allowed_hosts: ``Host`` headers accepted beside the bound address (``--allowed-host``).
    """

    message_bytes: int = 1 << 20
    max_sessions: int = 500
    sessions_per_credential: int = 8
    session_idle_s: float = 1800.0
    max_connections: int = 1000
    read_timeout_s: float = 10.0
    allowed_hosts: tuple[str, ...] = ()

    #: The settings these limits are made from (``pau-mcp serve`` takes the flag of each).
    SETTINGS: ClassVar[tuple[str, ...]] = (
        "max_argument_kb", "max_sessions", "max_sessions_per_credential", "session_idle_s", "max_connections",
        "read_timeout_s", "allowed_hosts",
    )  # fmt: skip

    @classmethod
    def from_settings(cls, settings: Settings) -> HTTPLimits:
        """The HTTP limits ``settings`` give."""
        return cls(
            message_bytes=message_limit(settings.max_argument_kb * 1024),
            max_sessions=settings.max_sessions,
            sessions_per_credential=settings.max_sessions_per_credential,
            session_idle_s=settings.session_idle_s,
            max_connections=settings.max_connections,
            read_timeout_s=settings.read_timeout_s,
            allowed_hosts=settings.allowed_hosts,
        )
