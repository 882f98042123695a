"""The connection guard every HTTP service of the project runs behind (the MCP server and the scorer endpoint).

uvicorn alone waits forever for a first request, reads headers of any size and accepts connections until the
process runs out of files, so a few hundred idle or trickling clients lock everyone else out. The guard is a
subclass of uvicorn's HTTP protocol (``connection_guard``) that keeps:

* at most ``cap`` open connections, below the open-file limit (``connection_cap``); at the cap, the connection
  that has waited longest without sending a whole request is closed to make room, and only when every one is busy
  with a request does a newcomer get a 503;
* a read timeout: every request, head and body, must arrive within ``read_timeout_s`` of the moment the server
  starts waiting for it (the connection is opened, or the previous response is sent);
* a request head of at most 64 KiB (431 beyond), however its bytes arrive: a 100 KB head written at once went
  through unchecked, since one read brought it whole to the parser (``_Guard`` says how each head is measured);
* at most ``MAX_PIPELINED`` requests in flight per connection: HTTP/1.1 lets a client send requests before the
  answers to earlier ones (pipelining), and the parser read every request a read brought in at once, so 200
  connections each writing 400 requests and never reading cost the MCP server 7-9 s of CPU and stalled it for
  seconds (issue 32). The request past the bound stops the parser where it is: nothing more is read from that
  connection, the requests already in are answered, and then it is closed;
* unread answers bound the connection: once what it has not read fills the socket's buffers and the transport's
  (the transport pauses writing), the connection has ``read_timeout_s`` to read some, or is closed;
* a lingering close for a request answered before its body was read (a 413): the rest is read and dropped until
  the client stops sending, so that the answer is not lost to a reset.

It knows nothing of what the service serves: each service gives it the body of its 503.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from typing import Any

__all__ = ["MAX_HEAD_BYTES", "MAX_PIPELINED", "connection_cap", "connection_guard", "guarded_protocol", "keep_alive_s"]

log = logging.getLogger(__name__)

#: Largest request head (request line and headers).
MAX_HEAD_BYTES = 64 * 1024
#: Requests one connection may have in flight (received, not yet answered): a client pipelining more is cut off.
MAX_PIPELINED = 8
#: Open files kept free beside the connections (a store, worker pipes, logs, one connection being refused).
_SPARE_FILES = 64

_BUSY_BODY = json.dumps({"error": "Too many open connections, all busy with requests; retry in a moment."}).encode()


def connection_cap(wanted: int) -> int:
    """``wanted`` connections, or fewer if the open-file limit (raised to its hard limit if need be) is lower."""
    try:
        import resource
    except ImportError:  # not POSIX: no limit to read
        return wanted
    try:
        in_use = len(os.listdir("/proc/self/fd"))
    except OSError:
        in_use = 64
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + in_use + _SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < need:
        raised = need if hard == resource.RLIM_INFINITY else min(need, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY or soft >= need:
        return wanted
    cap = max(1, soft - in_use - _SPARE_FILES)
    log.warning(
        "serving at most %d connections, not %d: the open-file limit is %d (raise it with ulimit -n)", cap, wanted, soft
    )
    return cap


def keep_alive_s(read_timeout_s: float) -> int:
    """Seconds an idle keep-alive connection stays open: 5, or less with a shorter read timeout."""
    return max(1, math.ceil(min(5, read_timeout_s)))


class _Connections:
    """The open connections, and which of them wait for a request (oldest first)."""

    def __init__(self, cap: int, read_timeout_s: float) -> None:
        self.cap = cap
        self.read_timeout_s = read_timeout_s
        self.count = 0
        self.waiting: dict[Any, None] = {}

    def make_room(self, newcomer: Any) -> bool:
        """Close the connection that has waited longest for a request; False if every other one is busy."""
        for protocol in self.waiting:
            if protocol is not newcomer:
                protocol._pau_drop()
                return True
        return False


_BUSY = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\n"
_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


class _Pipelined(Exception):
    """A connection sent more requests than it may have in flight; raised in the parser's callback to stop it."""


class _HeadTooLarge(Exception):
    """A request head passed ``MAX_HEAD_BYTES`` as the parser read it; raised in its callback to stop it."""


#: The base of ``_Guard`` as mypy sees it: at run time the guard comes first in the MRO of a class of
#: ``connection_guard`` and its ``super()`` is uvicorn's protocol, picked at run time (httptools' or h11's, which
#: share every member used here), which mypy cannot follow.
_UvicornHTTP: Any = asyncio.Protocol


class _Guard(_UvicornHTTP):  # type: ignore[misc]
    """What ``connection_guard`` adds to uvicorn's HTTP protocol (its subclass sets the two class attributes).

    A request head is measured wherever its end falls, in three ways that together hold whatever the chunking:

    * as it arrives: the bytes read while the connection waits for a head, across reads, bound a head that has
      not ended (a parser holds an unfinished header whole);
    * as httptools reads it (``on_url``, ``on_header``): one read can bring a whole head, or a request and the head
      of the next one (pipelined), which the parser reads in one go;
    * before h11 reads it: h11 parses a head only once all of it is in, so its buffer is looked at first.
    """

    _pau_connections: _Connections
    _pau_busy: bytes
    _pau_timer: asyncio.TimerHandle | None = None
    _pau_counted = False
    _pau_head = 0  # bytes read while waiting for a request head
    _pau_parsed = 0  # head bytes of the current request as httptools read them
    _pau_oversized = False  # stopped for a head over the limit: answered 431
    _pau_lingering = False
    _pau_in_flight = 0  # requests received and not yet answered
    _pau_closing = False  # pipelined past the bound: answer what is in, read nothing more, then close
    _pau_unread: asyncio.TimerHandle | None = None  # set while the client leaves its answers unread

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        conn = getattr(self, "conn", None)
        if conn is not None:  # h11's: its own bound on an unfinished head (16 KiB by default) becomes the guard's
            import h11

            self.conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        connections = self._pau_connections
        connections.count += 1
        self._pau_counted = True
        if connections.count > connections.cap and not connections.make_room(self):
            self.transport.write(self._pau_busy)
            self._pau_drop()
            return
        self._pau_wait()

    def connection_lost(self, exc: Exception | None) -> None:
        self._pau_forget()
        self._pau_reading_again()
        super().connection_lost(exc)

    # -- httptools' parser callbacks ----------------------------------------------------------------------------------

    def on_message_begin(self) -> None:
        # httptools' parser calls this at the start of each request, however many one read brought in. (h11's
        # protocol never does: it parses a connection's next request only once the previous one is answered.)
        if self._pau_in_flight >= MAX_PIPELINED:
            self._pau_closing = True
            raise _Pipelined
        self._pau_in_flight += 1
        self._pau_parsed = 0
        super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        self._pau_parsed_more(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._pau_parsed_more(len(name) + len(value) + 4)  # "name: value\r\n"
        super().on_header(name, value)

    def _pau_parsed_more(self, size: int) -> None:
        self._pau_parsed += size
        if self._pau_parsed > MAX_HEAD_BYTES:
            self._pau_oversized = True
            raise _HeadTooLarge

    # -- h11's ----------------------------------------------------------------------------------------------------------

    def handle_events(self) -> None:
        import h11

        if self.conn.their_state is h11.IDLE and _h11_head_size(self.conn.trailing_data[0]) > MAX_HEAD_BYTES:
            self._pau_too_large()
            return
        super().handle_events()

    # -- both ---------------------------------------------------------------------------------------------------------

    def send_400_response(self, msg: str) -> None:
        if self._pau_oversized:  # stopped by _HeadTooLarge: the 431 follows the answers of the requests before it
            self._pau_in_flight -= 1  # the refused request is never answered
            self._pau_closing = True
        elif not self._pau_closing:
            super().send_400_response(msg)
            return
        else:
            # Stopped by _Pipelined, not a malformed request: the requests already in are answered in order first.
            log.warning(
                "a client sent more than %d requests on one connection without reading the answers; answering those "
                "and closing it",
                MAX_PIPELINED,
            )
        self.flow.pause_reading()
        self._pau_stop_waiting()
        if not self._pau_in_flight:
            self._pau_end()

    def pause_writing(self) -> None:
        # The client leaves its answers unread: the socket's buffers and the transport's are full.
        super().pause_writing()
        if self._pau_unread is None and not self.transport.is_closing():
            self._pau_unread = self.loop.call_later(self._pau_connections.read_timeout_s, self._pau_abort)

    def resume_writing(self) -> None:
        self._pau_reading_again()
        super().resume_writing()

    def _pau_reading_again(self) -> None:
        if self._pau_unread is not None:
            self._pau_unread.cancel()
            self._pau_unread = None

    def data_received(self, data: bytes) -> None:
        if self._pau_lingering or self._pau_closing or self._pau_oversized:
            return  # the rest of a request already answered, or of a client cut off: read and dropped
        in_head = self.cycle is None or self.cycle.response_complete
        if in_head and self._pau_timer is not None:
            self._pau_head += len(data)
        super().data_received(data)
        if self._pau_timer is None or self.transport.is_closing():
            return
        if self.cycle is None or self.cycle.response_complete:  # still reading a request head
            if self._pau_head > MAX_HEAD_BYTES:
                self._pau_too_large()
        elif not self.cycle.more_body:  # the whole request is in: it has the time it needs now
            self._pau_stop_waiting()

    def on_response_complete(self) -> None:
        unread = self.cycle is not None and self.cycle.more_body
        self._pau_in_flight = max(0, self._pau_in_flight - 1)
        super().on_response_complete()
        if self._pau_closing:
            if not self._pau_in_flight:
                self._pau_end()
            else:
                self.flow.pause_reading()  # answering the rest of what is in: nothing more is read
            return
        if unread:
            self._pau_linger()
            return
        pipelined = self.cycle is not None and not self.cycle.response_complete
        if not self.transport.is_closing() and not pipelined:
            self._pau_wait()

    def _pau_end(self) -> None:
        """Close a connection cut off once the requests before the one that stopped its parser are answered."""
        if self._pau_oversized:
            self._pau_too_large()
        else:
            self._pau_drop()

    def _pau_too_large(self) -> None:
        """Answer 431 and close: a request head passed ``MAX_HEAD_BYTES``."""
        self._pau_oversized = True
        if not self.transport.is_closing():
            self.transport.write(_TOO_LARGE)
        self._pau_drop()

    def _pau_linger(self) -> None:
        """End a connection whose request was answered before its body was read (a 413, a 415).

        Its answer is followed by the end of the stream, and what the client still sends is read and dropped
        until it closes its side or the read timeout ends it: closed at once, with the rest of the body unread,
        the connection would be reset, and a reset can reach the client before the answer it was sent.
        Lingering, it stays among the connections to close first when others need room.
        """
        if self.transport.is_closing():
            return
        self._pau_lingering = True
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._pau_wait()

    def _pau_wait(self) -> None:
        self._pau_stop_waiting()
        self._pau_head = 0
        self._pau_timer = self.loop.call_later(self._pau_connections.read_timeout_s, self._pau_drop)
        self._pau_connections.waiting[self] = None

    def _pau_stop_waiting(self) -> None:
        if self._pau_timer is not None:
            self._pau_timer.cancel()
            self._pau_timer = None
        self._pau_connections.waiting.pop(self, None)

    def _pau_forget(self) -> None:
        self._pau_stop_waiting()
        if self._pau_counted:
            self._pau_counted = False
            self._pau_connections.count -= 1

    def _pau_abort(self) -> None:
        """End a connection whose client left its answers unread: at once, with what is buffered thrown away
        (``close`` would keep the connection until the client read it all)."""
        self._pau_forget()
        self._pau_unread = None
        self.transport.abort()

    def _pau_drop(self) -> None:
        self._pau_forget()
        self._pau_reading_again()
        if not self.transport.is_closing():
            self.transport.close()


def _h11_head_size(buffered: bytes) -> int:
    """The size of the request head at the start of h11's buffer: up to its blank line, or all of it if none yet."""
    ends = [at + len(blank) for blank in (b"\n\r\n", b"\n\n") if (at := buffered.find(blank)) >= 0]
    return min(ends, default=len(buffered))


def connection_guard(
    base: type[asyncio.Protocol], cap: int, read_timeout_s: float, busy_body: bytes = _BUSY_BODY
) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's HTTP protocol ``base`` enforcing the connection cap, read timeout and head size.

    Each call makes a guard of its own (one count of connections): one per listening service.

    Args:
        base: uvicorn's HTTP protocol class (``AutoHTTPProtocol``, or one of the classes it picks).
        cap: Connections open at once (``connection_cap``).
        read_timeout_s: Seconds a client has to send a whole request.
        busy_body: The JSON body of the 503 a newcomer gets when every connection is busy with a request.
    """
    busy = _BUSY + b"content-length: " + str(len(busy_body)).encode() + b"\r\n\r\n" + busy_body
    attributes = {"_pau_connections": _Connections(cap, read_timeout_s), "_pau_busy": busy}
    return type(f"Guarded{base.__name__}", (_Guard, base), attributes)


def guarded_protocol(
    max_connections: int, read_timeout_s: float, busy_body: bytes = _BUSY_BODY
) -> type[asyncio.Protocol]:
    """uvicorn's automatic HTTP protocol behind a guard of its own: what a service passes to ``listening.serve_app``.

    Args:
        max_connections: Connections wanted open at once (fewer if the open-file limit is lower).
        read_timeout_s: Seconds a client has to send a whole request.
        busy_body: The JSON body of the 503 when every connection is busy.
    """
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    return connection_guard(AutoHTTPProtocol, connection_cap(max_connections), read_timeout_s, busy_body)
