"""The SDK members ``BoundedSessions`` (pau_mcp/server/http.py) and ``one_exchange`` (exchange.py) rely on, checked
on the installed mcp.

pyproject.toml allows any mcp 2.x from 2.3 (test_dependencies: a range, not a pin), while ``BoundedSessions``
overrides and reads members the SDK's session manager keeps private. A release that renames or reshapes one of
them fails here, naming the member, rather than as a session cap that no longer holds. What the members do for
the caps is tried end to end in test_session_caps.py and test_session_memory.py.
"""

from __future__ import annotations

import importlib.metadata
import inspect

import anyio
import pytest
from mcp.server import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from pau_mcp.server.http import BoundedSessions

_VERSION = importlib.metadata.version("mcp")
_ADVICE = (
    f"BoundedSessions (pau_mcp/server/http.py) relies on it, and mcp {_VERSION} changed it: adapt BoundedSessions "
    f"to the installed SDK's mcp/server/streamable_http_manager.py, or cap mcp below {_VERSION} in pyproject.toml"
)

#: The manager's methods BoundedSessions overrides: coroutine or not, and their parameters after ``self``.
_OVERRIDDEN = {
    "_admit_session": (False, ["requestor"]),
    "_discard_session": (True, ["session_id", "transport"]),
    "_handle_stateful_request": (True, ["scope", "receive", "send"]),
    "_handle_stateless_request": (True, ["protocol_version_hint", "scope", "receive", "send"]),
}


@pytest.mark.parametrize("name", sorted(_OVERRIDDEN))
def test_the_sdk_manager_still_has_each_method_bounded_sessions_overrides_with_its_parameters(name: str) -> None:
    is_coroutine, parameters = _OVERRIDDEN[name]
    method = getattr(StreamableHTTPSessionManager, name, None)
    assert method is not None, f"StreamableHTTPSessionManager.{name} is gone. {_ADVICE}"
    assert inspect.iscoroutinefunction(method) is is_coroutine, (
        f"{name} is no longer {'a coroutine' if is_coroutine else 'synchronous'}. {_ADVICE}"
    )
    assert list(inspect.signature(method).parameters)[1:] == parameters, f"{name}'s parameters changed. {_ADVICE}"
    assert getattr(BoundedSessions, name) is not method, f"BoundedSessions no longer overrides {name}"


def test_a_session_the_sdk_admits_is_in_its_table_with_an_idle_countdown_and_discarding_it_forgets_it() -> None:
    manager = StreamableHTTPSessionManager(
        app=Server("probe"), json_response=True, session_idle_timeout=30, max_sessions=1
    )
    for name, kind in (("_server_instances", dict), ("_session_owners", dict), ("_session_creation_lock", anyio.Lock)):
        assert isinstance(getattr(manager, name, None), kind), (
            f"the manager's {name} is no longer a {kind.__name__}. {_ADVICE}"
        )

    transport = manager._admit_session(None)
    assert isinstance(transport, StreamableHTTPServerTransport), f"_admit_session returns no transport. {_ADVICE}"
    session_id = transport.mcp_session_id
    assert session_id is not None and manager._server_instances.get(session_id) is transport, (
        f"an admitted session is not in _server_instances under its mcp_session_id. {_ADVICE}"
    )
    assert manager._admit_session(None) is None, f"_admit_session no longer refuses at max_sessions. {_ADVICE}"
    assert hasattr(transport, "idle_scope"), f"the transport's idle_scope is gone. {_ADVICE}"
    assert transport.idle_scope is None, f"a transport no request has reached has an idle countdown. {_ADVICE}"
    assert getattr(transport, "_requests_in_flight", None) == 0, (
        f"the transport's _requests_in_flight is gone or not a count. {_ADVICE}"
    )

    async def discard() -> None:
        with anyio.fail_after(10):
            await manager._discard_session(session_id, transport)

    anyio.run(discard)
    assert session_id not in manager._server_instances, f"_discard_session leaves the session in the table. {_ADVICE}"
    assert transport.is_terminated


def test_the_sdk_still_has_the_single_exchange_context_a_stateless_request_is_answered_with() -> None:
    import dataclasses

    from mcp.server import _streamable_http_modern as modern

    context = getattr(modern, "_SingleExchangeDispatchContext", None)
    advice = (
        f"pau_mcp/server/exchange.py relies on it, and mcp {_VERSION} changed it: adapt one_exchange to the installed "
        f"SDK's mcp/server/_streamable_http_modern.py, or cap mcp below {_VERSION} in pyproject.toml"
    )
    assert context is not None and dataclasses.is_dataclass(context), (
        f"_SingleExchangeDispatchContext is gone. {advice}"
    )
    fields = {field.name for field in dataclasses.fields(context) if field.init}
    assert {"transport", "request_id", "message_metadata", "progress_token"} <= fields, advice
