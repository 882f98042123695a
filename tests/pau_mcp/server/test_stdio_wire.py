"""Raw lines on a real `pau-mcp serve` stdin: every request, well-formed or not, gets exactly one JSON-RPC reply."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, tool_of

TOOL = tool_of("builtin/b001")


class Wire:
    """A `pau-mcp serve` process spoken to line by line."""

    def __init__(self, db: Path, *extra: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pau_mcp", "serve", "--db", str(db), *extra],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
        )  # fmt: skip
        self._buffer = b""

    def send(self, line: bytes | str | dict[str, Any]) -> None:
        if isinstance(line, dict):
            line = json.dumps(line)
        data = line.encode() if isinstance(line, str) else line
        assert self.process.stdin is not None
        self.process.stdin.write(data + b"\n")
        self.process.stdin.flush()

    def receive(self, timeout: float = 30) -> dict[str, Any] | None:
        """The next line the server writes, as JSON; None if nothing comes within ``timeout``."""
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        message: dict[str, Any] = json.loads(line)
        return message

    def request(self, line: bytes | str | dict[str, Any], timeout: float = 30) -> dict[str, Any] | None:
        self.send(line)
        return self.receive(timeout)

    def close(self) -> str:
        assert self.process.stdin is not None and self.process.stderr is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        return self.process.stderr.read().decode(errors="replace")


@pytest.fixture(scope="module")
def wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wire]:
    """One server for the module: each test sends its own lines on the same session."""
    server = Wire(tmp_path_factory.mktemp("wire") / "runs.db")
    reply = server.request(
        {
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
        },
        timeout=120,
    )  # fmt: skip
    assert reply is not None and reply["id"] == 0 and "result" in reply
    server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    yield server
    stderr = server.close()
    assert "Traceback" not in stderr, stderr[-3000:]


def _call(request_id: int | str, arguments_json: str) -> str:
    return (
        f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call",'
        f'"params":{{"name":"{TOOL}","arguments":{arguments_json}}}}}'
    )


def _error(reply: dict[str, Any] | None, request_id: object, code: int) -> str:
    assert reply is not None, "no reply"
    assert reply.get("id") == request_id and "error" in reply, reply
    assert reply["error"]["code"] == code, reply
    message: str = reply["error"]["message"]
    assert "\n" not in message and "Traceback" not in message
    return message


def test_a_line_that_is_not_json_gets_a_parse_error(wire: Wire) -> None:
    message = _error(wire.request("{not json"), None, -32700)
    assert "JSON" in message


def test_a_truncated_request_gets_a_parse_error_with_its_id(wire: Wire) -> None:
    _error(wire.request('{"jsonrpc":"2.0","id":41,"method":"ping"'), 41, -32700)


def test_a_batch_is_refused_with_a_reason(wire: Wire) -> None:
    message = _error(wire.request('[{"jsonrpc":"2.0","id":1,"method":"ping"}]'), None, -32600)
    assert "one message per line" in message


@pytest.mark.parametrize("line", ["42", '"ping"', "null", "true"])
def test_a_json_value_that_is_not_an_object_is_an_invalid_request(wire: Wire, line: str) -> None:
    _error(wire.request(line), None, -32600)


def test_a_method_that_is_not_a_string_is_an_invalid_request_with_its_id(wire: Wire) -> None:
    _error(wire.request({"jsonrpc": "2.0", "id": 7, "method": 5}), 7, -32600)


def test_a_request_without_the_jsonrpc_version_is_answered(wire: Wire) -> None:
    _error(wire.request({"id": 8, "method": "ping"}), 8, -32600)


def test_a_request_with_a_null_id_is_answered(wire: Wire) -> None:
    _error(wire.request({"jsonrpc": "2.0", "id": None, "method": "ping"}), None, -32600)


def test_an_unknown_method_is_method_not_found(wire: Wire) -> None:
    _error(wire.request({"jsonrpc": "2.0", "id": "u1", "method": "nope/nope"}), "u1", -32601)


def test_tool_call_params_of_the_wrong_type_are_invalid_params(wire: Wire) -> None:
    _error(wire.request({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": 5}}), 3, -32602)
    _error(wire.request(_call(4, "[1, 2]")), 4, -32602)


def test_a_lone_surrogate_in_the_json_is_refused_with_the_request_id(wire: Wire) -> None:
    message = _error(wire.request(_call(5, '{"arg0": "\\ud800"}')), 5, -32700)
    assert "surrogate" in message


def test_a_number_too_long_for_json_is_refused_with_the_request_id(wire: Wire) -> None:
    message = _error(wire.request(_call(6, '{"arg0": ' + "9" * 5000 + "}")), 6, -32700)
    assert "4,300 digits" in message


def test_invalid_utf8_is_read_leniently(wire: Wire) -> None:
    reply = wire.request(b'{"jsonrpc":"2.0","id":10,"method":"ping","x":"\xff"}')
    assert reply == {"jsonrpc": "2.0", "id": 10, "result": {}}


def test_a_line_over_the_message_limit_is_refused_with_its_id_and_the_server_carries_on(wire: Wire) -> None:
    message = _error(wire.request(_call(11, '{"arg0": "' + "x" * 3_000_000 + '"}')), 11, -32600)
    assert "MiB" in message and "--max-argument-kb" in message
    assert wire.request({"jsonrpc": "2.0", "id": 12, "method": "ping"}) == {"jsonrpc": "2.0", "id": 12, "result": {}}


def test_a_huge_line_of_garbage_is_refused_without_being_held_in_memory(wire: Wire) -> None:
    message = _error(wire.request(b"x" * 50_000_000), None, -32600)
    assert "bytes" in message
    assert wire.request({"jsonrpc": "2.0", "id": 13, "method": "ping"}) == {"jsonrpc": "2.0", "id": 13, "result": {}}


def test_a_malformed_notification_gets_no_reply_and_breaks_nothing(wire: Wire) -> None:
    wire.send({"jsonrpc": "2.0", "method": "notifications/nope", "params": 5})
    assert wire.request({"jsonrpc": "2.0", "id": 14, "method": "ping"}) == {"jsonrpc": "2.0", "id": 14, "result": {}}


def test_blank_lines_are_ignored(wire: Wire) -> None:
    wire.send(b"")
    wire.send(b"   \r")
    assert wire.request({"jsonrpc": "2.0", "id": 15, "method": "ping"}) == {"jsonrpc": "2.0", "id": 15, "result": {}}


def test_every_request_of_a_hostile_burst_gets_exactly_one_reply(wire: Wire) -> None:
    lines: list[str | dict[str, Any]] = [
        "{not json",
        _call(101, '{"arg0": 5}'),
        "[]",
        _call(102, '{"arg0": "\\udc00"}'),
        {"jsonrpc": "2.0", "id": 103, "method": "tools/list"},
        _call(104, '{"args": "(0x' + "f" * 4000 + ',)"}'),
        _call(105, '{"arg0": "' + "y" * 2_000_000 + '"}'),
        {"jsonrpc": "2.0", "id": 106, "method": "ping"},
    ]
    for line in lines:
        wire.send(line)
    received = [wire.receive() for _ in lines]
    assert all(r is not None for r in received), received
    replies = [r for r in received if r is not None]
    ids = sorted((r["id"] for r in replies if r["id"] is not None), key=str)
    assert ids == [101, 102, 103, 104, 105, 106]
    assert [r["id"] for r in replies].count(None) == 2
    assert wire.receive(timeout=1) is None


def test_a_client_that_stops_reading_ends_the_server_without_a_traceback(tmp_path: Path) -> None:
    server = Wire(tmp_path / "runs.db")
    assert server.process.stdout is not None and server.process.stderr is not None
    server.process.stdout.close()
    server.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    try:
        assert server.process.wait(timeout=120) is not None
    finally:
        if server.process.poll() is None:
            server.process.kill()
    assert "Traceback" not in server.process.stderr.read().decode(errors="replace")
