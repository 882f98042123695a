"""MCP over stdin/stdout, one message per line, with a size limit and a reply to every request.

The SDK's stdio transport reads lines of any length and drops the ones it cannot parse; a client then
waits forever for that reply. This one reads at most ``limit`` bytes of a line (the rest is skipped,
never held), answers every malformed or oversized request with a one-line JSON-RPC error (``wire``),
and replaces a reply that cannot be encoded with an error for the same request.

While it serves, fd 0 reads the null device and fd 1 writes to stderr, so a stray print (from a library,
or a child process) cannot corrupt the protocol; both are restored on exit.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any, BinaryIO

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .wire import oversized, refusal

__all__ = ["stdio_streams"]

log = logging.getLogger("pau_mcp.server")

_HEAD_CHARS = 4096
_SKIP_CHUNK = 1 << 20


class _Lines:
    """Lines from a file descriptor, each at most ``limit`` bytes kept; read from a thread."""

    def __init__(self, fd: int, limit: int) -> None:
        self._file: BinaryIO = open(fd, "rb", buffering=1 << 16, closefd=False)  # noqa: SIM115 - lives with the transport
        self._limit = limit

    def read(self) -> tuple[bytes, int] | None:
        """The next line without its line break and its full size; None at the end of input.

        A line longer than the limit comes back as its first bytes only: the rest is read and dropped.
        """
        line = self._file.readline(self._limit + 1)
        if not line:
            return None
        if line.endswith(b"\n"):
            return line[:-1], len(line) - 1
        if len(line) <= self._limit:
            return line, len(line)
        size = len(line)
        head = line[:_HEAD_CHARS]
        del line
        while chunk := self._file.readline(_SKIP_CHUNK):
            if chunk.endswith(b"\n"):
                size += len(chunk) - 1
                break
            size += len(chunk)
        return head, size


def _claim() -> tuple[int, int, Callable[[], None]]:
    """Private copies of fds 0 and 1 for the protocol; fd 0 then reads /dev/null and fd 1 writes to stderr."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)

    def restore() -> None:
        # The reading thread may still be blocked on wire_in, so it is never closed (its number never reused).
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
        with contextlib.suppress(OSError):
            os.dup2(wire_out, 1)

    return wire_in, wire_out, restore


def _encoded(message: Any) -> bytes:
    try:
        return message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"
    except Exception as exc:  # text that is not Unicode, from anywhere: a request still gets an answer
        if not isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            log.error("a message to the client could not be encoded and was dropped: %s", exc)
            return b""
        log.error("the reply to request %r could not be encoded: %s", message.id, exc)
        error = types.JSONRPCError(
            jsonrpc="2.0",
            id=message.id,
            error=types.ErrorData(
                code=types.INTERNAL_ERROR, message="Internal error: the reply could not be encoded as JSON text."
            ),
        )
        return error.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextlib.asynccontextmanager
async def stdio_streams(
    limit: int,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """The read and write streams of a server speaking on this process's stdin and stdout.

    Args:
        limit: The largest message read, in bytes (``wire.message_limit``).
    """
    wire_in, wire_out, restore = _claim()
    lines = _Lines(wire_in, limit)
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    refusals = write_send.clone()
    lines_send, lines_receive = anyio.create_memory_object_stream[tuple[bytes, int]](0)
    token = anyio.lowlevel.current_token()

    def pump() -> None:
        # A daemon thread of its own: blocked on a stdin that never closes, it must not keep the process alive
        # (anyio's worker threads would).
        with contextlib.suppress(Exception):
            while (item := lines.read()) is not None:
                anyio.from_thread.run(lines_send.send, item, token=token)
        with contextlib.suppress(Exception):
            anyio.from_thread.run_sync(lines_send.close, token=token)

    threading.Thread(target=pump, name="pau-mcp-stdin", daemon=True).start()

    async def read_loop() -> None:
        async with read_send, refusals, lines_receive:
            async for data, size in lines_receive:
                text = data.decode("utf-8", errors="replace")
                if size > limit:
                    await refusals.send(SessionMessage(oversized(text, size, limit)))
                    continue
                if not text.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
                except ValidationError:
                    error = refusal(text)
                    if error is not None:
                        await refusals.send(SessionMessage(error))
                    continue
                if isinstance(message, types.JSONRPCNotification) and '"id"' in text:
                    # A request whose id is null or not a string or an integer parses as a notification; it
                    # still expects an answer.
                    error = refusal(text, request=True)
                    if error is not None:
                        await refusals.send(SessionMessage(error))
                        continue
                await read_send.send(SessionMessage(message))

    async def write_loop() -> None:
        async with write_receive:
            async for item in write_receive:
                data = _encoded(item.message)
                if not data:
                    continue
                try:
                    await anyio.to_thread.run_sync(_write_all, wire_out, data)
                except OSError as exc:  # the client closed its end: nobody is listening any more
                    log.info("stdout closed (%s); stopping", exc)
                    reading.cancel()
                    return

    reading = anyio.CancelScope()
    try:
        async with anyio.create_task_group() as group:

            async def read_until_stopped() -> None:
                with reading:
                    await read_loop()

            group.start_soon(read_until_stopped)
            group.start_soon(write_loop)
            try:
                yield read_receive, write_send
            finally:
                # Stop reading, then let the writer finish what is queued (replies to the last requests).
                reading.cancel()
                write_send.close()
                group.cancel_scope.deadline = anyio.current_time() + 5
    finally:
        restore()
