"""The scorer endpoint: ``Scorer`` as an HTTP JSON service (``pau-mcp scorer``).

``POST /v1/score`` scores one submission, ``GET /v1/health`` says it is up,
``GET /openapi.json`` describes both. A bearer token of its own
(``--scorer-token``), separate from the agents' token, guards scoring; a
non-loopback address without one is refused. On a loopback address, a
request must name a loopback host and come from no other site's page
(DNS rebinding), and a score request must be ``application/json`` (which a
page cannot send elsewhere without asking first). Every failure is JSON with
a status that says whose fault it is: 400 malformed or too deeply nested
JSON or an empty submission, 401 no or a wrong token, 403 another site's
page, 404 unknown method, 413 too large, 415 not JSON, 421 another host's
name, 422 fields of the wrong shape, 502 the model provider failed for good.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, request_response
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import __version__
from ..contract import Feedback, portable_schema
from ..guard import guarded_protocol, keep_alive_s
from ..listening import is_loopback, listen, serve_app, shown_host
from ..llm import LLMError, LLMNotConfigured
from ..oauth import SCORE, SignIn
from .codematch import MAX_CODE_CHARS
from .cpu import off_loop
from .service import KINDS, NothingToScore, Scorer, ScoreResult, UnknownMethod

__all__ = [
    "DEFAULT_MAX_REQUEST_BYTES",
    "MAX_JSON_DEPTH",
    "EndpointError",
    "ScoreRequest",
    "create_app",
    "openapi",
    "serve",
]

log = logging.getLogger("pau_mcp.scoring")

#: The largest request body accepted (413 beyond).
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024

#: The deepest nesting of a request's JSON (400 beyond): no field of a score request needs more.
MAX_JSON_DEPTH = 64


class EndpointError(RuntimeError):
    """The endpoint cannot start as asked; the message says how to fix the command."""


class ScoreRequest(BaseModel):
    """The body of ``POST /v1/score``."""

    model_config = ConfigDict(extra="forbid")

    method: str = Field(min_length=1, max_length=200, description="The method id, e.g. builtin/b001.")
    description: str | None = Field(None, max_length=20_000, description="The agent's description of the function.")
    code: str | None = Field(
        None,
        max_length=MAX_CODE_CHARS,
        description="Code the agent submitted: a function named as in the method's header.",
    )
    examples: list[tuple[str, Any]] | None = Field(
        None, max_length=1000, description="[input literal, output] pairs the agent observed; given to the code writer."
    )
    scores: list[Literal["judge", "codematch", "direct"]] | None = Field(
        None, min_length=1, description="Scores to compute; default: every one the submission allows."
    )
    counterexample: bool = Field(False, description="Report the first test input the submitted code gets wrong.")
    gold: bool = Field(False, description="Give the code writer the gold description (the method's upper bound).")
    view: Literal["full", "agent"] = Field(
        "full", description="full: every detail (may quote the gold description); agent: only what an agent may see."
    )


_RESULT = TypeAdapter(ScoreResult)


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the endpoint."""
    request_schema = ScoreRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    result_schema = _RESULT.json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
    schemas: dict[str, Any] = {}
    for source in (request_schema, result_schema):
        schemas.update(source.pop("$defs", {}))
    schemas["ScoreRequest"] = request_schema
    schemas["ScoreResult"] = result_schema
    schemas["AgentFeedback"] = {
        **portable_schema(Feedback),
        "description": "view=agent: only what an agent may see; never text the submitted code produced.",
    }
    schemas["Error"] = {
        "type": "object",
        "properties": {"error": {"type": "string"}, "detail": {"type": "array", "items": {"type": "object"}}},
        "required": ["error"],
    }

    def error(text: str) -> dict[str, Any]:
        return {
            "description": text,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }

    guarded = {
        "403": error("The request came from another site's page (Origin)"),
        "421": error("The request names a host this endpoint does not serve (Host)"),
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pau-mcp scorer",
            "version": __version__,
            "description": "Scores descriptions and code of hidden PAU methods.",
        },
        "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "paths": {
            "/v1/score": {
                "post": {
                    "summary": "Score one submission",
                    "security": [{"bearer": []}],
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScoreRequest"}}},
                    },
                    "responses": {
                        "200": {
                            "description": "The scores",
                            "content": {
                                "application/json": {
                                    "schema": {
                                        "oneOf": [
                                            {"$ref": "#/components/schemas/ScoreResult"},
                                            {"$ref": "#/components/schemas/AgentFeedback"},
                                        ]
                                    }
                                }
                            },
                        },
                        "400": error(
                            "Malformed or too deeply nested JSON, an empty submission, or a score this scorer has "
                            "no model for"
                        ),
                        "401": error("No bearer token, or a wrong one"),
                        "404": error("Unknown method"),
                        "413": error("Request body too large"),
                        "415": error("The body is not sent as application/json"),
                        "422": error("Fields of the wrong shape"),
                        "502": error("The model provider failed for good (bad key, unknown model, unreachable)"),
                        **guarded,
                    },
                }
            },
            "/v1/health": {
                "get": {
                    "summary": "Whether the scorer is up",
                    "responses": {
                        "200": {"description": "Up", "content": {"application/json": {"schema": {"type": "object"}}}},
                        **guarded,
                    },
                }
            },
        },
    }


class _JSON(JSONResponse):
    """JSON as ASCII: a lone surrogate in a message (a method id as sent) is escaped, never an encoding error."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(
    status: int, message: str, detail: list[dict[str, Any]] | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    body: dict[str, Any] = {"error": message}
    if detail is not None:
        body["detail"] = detail
    return _JSON(body, status_code=status, headers=headers)


def _authority(value: str) -> tuple[str, str] | None:
    """``(host, port)`` of a Host header (lower case, IPv6 without brackets), or None if it is malformed."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        port = rest[1:] if rest.startswith(":") else ("" if not rest else None)
    else:
        host, _, port = value.partition(":")
    if port is None or (port and not port.isdigit()) or not host:
        return None
    return host, port


def _refusal(headers: Headers, loopback: bool) -> JSONResponse | None:
    """Why a request is refused as DNS rebinding or a cross-site page's, or None."""
    host = headers.get("host")
    named = _authority(host) if host is not None else None
    if host is not None and (named is None or (loopback and not is_loopback(named[0]))):
        return _error(421, f"the Host header names {host!r}, which this endpoint does not serve: use 127.0.0.1")
    origin = headers.get("origin")
    if origin is None:
        return None
    try:
        parts = urlsplit(origin.strip().lower())
        origin_host, origin_port = parts.hostname or "", parts.port
    except ValueError:
        origin_host, origin_port, parts = "", None, urlsplit("")
    if parts.scheme in ("http", "https") and origin_host:
        if loopback and is_loopback(origin_host):
            return None
        default = "443" if parts.scheme == "https" else "80"
        if named is not None and (origin_host, str(origin_port or default)) == (named[0], named[1] or default):
            return None
    return _error(403, f"requests from the page at Origin {origin!r} are refused: call the scorer from a program")


class _SameHost:
    """Refuses requests that name another host or come from another site's page, before any route runs."""

    def __init__(self, app: ASGIApp, loopback: bool) -> None:
        self.app = app
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refusal = _refusal(Headers(scope=scope), self.loopback)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _depth_over(data: Any, limit: int) -> bool:
    """True when ``data`` nests deeper than ``limit`` (walked without recursion)."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > limit:
                return True
            stack.extend((item, depth + 1) for item in (value.values() if isinstance(value, dict) else value))
    return False


def _is_json(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


class _TooLarge(Exception):
    pass


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():  # a chunked body has no length to check up front
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


def _score_request(raw: bytes) -> ScoreRequest | JSONResponse:
    """The request in ``raw``, or the JSON error response saying what is wrong with it."""
    try:
        data = json.loads(raw)
    except RecursionError:
        data = None
        nested = True
    except (ValueError, UnicodeDecodeError) as exc:
        return _error(400, f"the body is not valid JSON: {exc}")
    else:
        nested = _depth_over(data, MAX_JSON_DEPTH)
    if nested:
        return _error(400, f"the JSON is nested deeper than {MAX_JSON_DEPTH} levels; no field needs that")
    try:
        return ScoreRequest.model_validate(data)
    except ValidationError as exc:
        detail = [
            {"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]}
            for e in exc.errors(include_url=False, include_input=False)
        ]
        return _error(
            422,
            "the request's fields are not right: "
            + "; ".join(f"{'.'.join(map(str, d['loc'])) or 'body'}: {d['msg']}" for d in detail[:5]),
            detail,
        )


def create_app(
    scorer: Scorer,
    *,
    token: str | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    host: str = "127.0.0.1",
    signin: SignIn | None = None,
) -> Starlette:
    """The Starlette app serving ``scorer``.

    Args:
        scorer: Does the scoring.
        token: Bearer token required by ``POST /v1/score``; None for none (loopback only).
        max_request_bytes: Larger bodies get 413.
        host: The address it is served on. On a loopback address, requests must name a loopback
            host (421 otherwise) and any Origin must be a loopback one (403); elsewhere an Origin
            must be the Host the request names.
        signin: Sign-in (``--auth oauth``): ``POST /v1/score`` then takes an access token with the ``score`` scope
            (or the scorer token), and the protected-resource metadata is served.
    """
    document = openapi()

    def authorised(request: Request) -> bool:
        if token is None or signin is not None:  # sign-in's gate has checked the token (or the scorer token)
            return True
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())

    async def score(request: Request) -> JSONResponse:
        if not authorised(request):
            return _error(
                401,
                "missing or wrong bearer token: send Authorization: Bearer <the scorer token>",
                headers={"WWW-Authenticate": "Bearer"},
            )
        if not _is_json(request.headers.get("content-type")):
            return _error(
                415,
                "send the body as JSON with Content-Type: application/json (curl: -H 'Content-Type: "
                "application/json', or --json)",
                headers={"Accept-Post": "application/json"},
            )
        try:
            raw = await _read_body(request, max_request_bytes)
        except _TooLarge:
            return _error(413, f"the request body is larger than {max_request_bytes:,} bytes")
        # Parsing a body of up to max_request_bytes is CPU work the sender chose: off the event loop.
        body = await off_loop(_score_request, raw)
        if isinstance(body, JSONResponse):
            return body
        examples = [
            (literal, output if isinstance(output, str) else json.dumps(output))
            for literal, output in body.examples or ()
        ]
        try:
            result = await scorer.score(
                body.method, body.description, body.code,
                examples=examples or None, kinds=body.scores, gold=body.gold, counterexample=body.counterexample,
            )  # fmt: skip
        except UnknownMethod as exc:
            return _error(404, str(exc))
        except (NothingToScore, LLMNotConfigured) as exc:
            return _error(400, str(exc))
        except LLMError as exc:
            log.warning("scoring %s failed: %s", body.method, exc)
            return _error(502, str(exc))
        view = body.view
        # The full view quotes the code and the models' replies, each as long as its author made it.
        return await off_loop(
            lambda: _JSON(result.feedback() if view == "agent" else _RESULT.dump_python(result, mode="json"))
        )

    async def health(request: Request) -> JSONResponse:
        return _JSON({"status": "ok", "version": __version__, "scores": list(KINDS)})

    async def schema(request: Request) -> JSONResponse:
        return _JSON(document)

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, HTTPException)
        return _error(exc.status_code, str(exc.detail), headers=dict(exc.headers or {}))

    async def server_error(request: Request, exc: Exception) -> JSONResponse:
        # A defect of this program, never the request's or the code's doing: still JSON, and no detail leaves.
        log.error("the scorer failed on a request: %s: %s", type(exc).__name__, str(exc)[:500], exc_info=exc)
        return _error(500, "the scorer failed on this request; its log has the details")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await scorer.aclose()

    scoring = Route("/v1/score", score, methods=["POST"])
    if signin is not None:
        scoring = Route("/v1/score", signin.protect(request_response(score), SCORE), methods=["POST"])
    return Starlette(
        routes=[
            scoring,
            Route("/v1/health", health, methods=["GET"]),
            Route("/openapi.json", schema, methods=["GET"]),
            *(signin.routes() if signin is not None else ()),
        ],
        exception_handlers={HTTPException: http_error, Exception: server_error},
        middleware=[Middleware(_SameHost, loopback=is_loopback(host))],
        lifespan=lifespan,
    )


def serve(
    scorer: Scorer,
    host: str = "127.0.0.1",
    port: int = 8100,
    *,
    token: str | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    announce: bool = True,
    max_connections: int = 1000,
    read_timeout_s: float = 10.0,
    signin: Callable[[str], SignIn] | None = None,
) -> None:
    """Serve the endpoint until interrupted; prints ``pau-mcp scorer: serving at URL`` to stderr.

    Behind the connection guard the MCP server has (``pau_mcp.guard``): at most ``max_connections`` open
    connections, the longest-waiting idle one closed to make room, and ``read_timeout_s`` to send each request.

    With ``signin`` (built from the endpoint's URL, ``oauth.sign_in_from``), access tokens with the ``score`` scope
    are accepted beside ``token``.

    Raises:
        EndpointError: a non-loopback address without a token or sign-in, or the port cannot be bound.
    """
    [sock] = listen(
        host, port, token or ("(sign-in)" if signin else None),
        f"refusing to serve the scorer on {host} without a token: anyone who can reach it could spend your model budget. "
        "Set one with --scorer-token or PAU_SCORER_TOKEN (e.g. PAU_SCORER_TOKEN=$(python -c 'import secrets; print(secrets.token_urlsafe())')).",
        EndpointError,
    )  # fmt: skip
    url = f"http://{shown_host(host)}:{sock.getsockname()[1]}"
    app = create_app(
        scorer, token=token, max_request_bytes=max_request_bytes, host=host, signin=signin(url) if signin else None
    )
    shown = f"pau-mcp scorer: serving at {url}"
    protocol = guarded_protocol(max_connections, read_timeout_s)
    serve_app(app, sock, shown if announce else None, http=protocol, keep_alive_s=keep_alive_s(read_timeout_s))
