"""An answer's placeholder array is replaced by the bytes encoded once, in that answer only, with a length that
matches; an answer whose placeholder is not as it was made is refused, never sent with the marker."""

from __future__ import annotations

import json
from typing import Any

import anyio

from pau_mcp.server.splice import Splice, offered, splicing

_ARRAY = json.dumps([{"name": "t", "inputSchema": {"type": "object"}, "description": "ü"}], ensure_ascii=False).encode()


def _answer(result: dict[str, Any], *, compact: bool = True) -> bytes:
    message = {"jsonrpc": "2.0", "id": 7, "result": result}
    return (json.dumps(message, separators=(",", ":")) if compact else json.dumps(message, indent=2)).encode()


def _with_placeholder(answer: bytes, splice: Splice, array: bytes = _ARRAY) -> bytes:
    """``answer`` with its ``"PLACEHOLDER"`` the placeholder ``splice`` makes for ``array``, as the SDK writes it."""
    return answer.replace(b'"PLACEHOLDER"', json.dumps(splice.placeholder(array)).encode())


def _through(body: bytes, made: Splice | None, *, length: bool = True, chunks: int = 1) -> list[dict[str, Any]]:
    """What reaches the socket when an app writes ``body`` (in ``chunks`` pieces) through ``splicing``, its
    handler having made the placeholder of ``made`` (None: no placeholder)."""
    scope: dict[str, Any] = {"type": "http"}
    out: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        out.append(message)

    async def main() -> None:
        wrapped = splicing(scope, send)
        offer = offered(scope)  # what the handler finds in the request's scope
        assert offer is not None
        if made is not None:
            offer.marker, offer.array = made.marker, made.array
        headers = [(b"content-type", b"application/json")] + [(b"content-length", str(len(body)).encode())] * length
        await wrapped({"type": "http.response.start", "status": 200, "headers": headers})
        step = max(1, -(-len(body) // chunks))
        parts = [body[i : i + step] for i in range(0, len(body), step)]
        for number, part in enumerate(parts, 1):
            await wrapped({"type": "http.response.body", "body": part, "more_body": number < len(parts)})

    anyio.run(main)
    return out


def _body_of(sent: list[dict[str, Any]]) -> bytes:
    return b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def _start_of(sent: list[dict[str, Any]]) -> dict[str, Any]:
    return next(m for m in sent if m["type"] == "http.response.start")


def _length_of(sent: list[dict[str, Any]]) -> int | None:
    value = dict(_start_of(sent)["headers"]).get(b"content-length")
    return None if value is None else int(value)


def test_the_placeholder_is_replaced_by_the_encoded_array_and_the_length_follows() -> None:
    for compact in (True, False):
        for chunks in (1, 4):  # the marker may fall across two pieces of the body
            splice = Splice()
            answer = _with_placeholder(_answer({"tools": "PLACEHOLDER", "nextCursor": "3"}, compact=compact), splice)
            sent = _through(answer, splice, chunks=chunks)
            body = _body_of(sent)
            assert json.loads(body)["result"] == {"tools": json.loads(_ARRAY), "nextCursor": "3"}
            assert _length_of(sent) == len(body) and splice.marker not in body and _start_of(sent)["status"] == 200


def test_a_stream_without_a_length_is_spliced_in_the_event_that_holds_the_marker() -> None:
    splice = Splice()
    event = b"event: message\r\ndata: " + _with_placeholder(_answer({"tools": "PLACEHOLDER"}), splice) + b"\r\n\r\n"
    sent = _through(event, splice, length=False)
    body = _body_of(sent)
    assert _length_of(sent) is None and splice.marker not in body
    assert json.loads(body.split(b"data: ", 1)[1])["result"]["tools"] == json.loads(_ARRAY)


def test_an_answer_without_its_placeholder_goes_out_unchanged() -> None:
    answer = _answer({"content": [{"type": "text", "text": 'tools/list [{"name": "pau-mcp-splice-0"}]'}]})
    for made in (None, Splice()):  # no placeholder made, or one made and not written (an error after the handler)
        if made is not None:
            made.placeholder(_ARRAY)
        sent = _through(answer, made)
        assert _body_of(sent) == answer and _length_of(sent) == len(answer)


def test_an_answer_whose_placeholder_was_altered_is_refused_whole_and_never_shows_the_marker() -> None:
    splice = Splice()
    marker = splice.placeholder(_ARRAY)[0]["name"]
    altered = _answer({"tools": [{"name": marker, "inputSchema": {"type": "object"}}, {"name": "another"}]})
    for chunks in (1, 3):
        sent = _through(altered, splice, chunks=chunks)
        body = _body_of(sent)
        assert _start_of(sent)["status"] == 500 and marker.encode() not in body
        assert json.loads(body)["error"]["code"] == -32603 and _length_of(sent) == len(body)
    streamed = _body_of(_through(altered, splice, length=False))
    assert marker.encode() not in streamed


def test_only_a_request_whose_transport_splices_is_offered_a_splice() -> None:
    assert offered(None) is None and offered({"type": "http"}) is None
    scope: dict[str, Any] = {"type": "http"}

    async def send(message: Any) -> None:
        pass

    splicing(scope, send)
    assert isinstance(offered(scope), Splice)
