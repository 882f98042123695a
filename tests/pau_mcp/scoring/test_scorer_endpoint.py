"""``pau-mcp scorer``: the scoring endpoint as a real process on a loopback port, with a fake model behind it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from cpu_time import main_thread_cpu_seconds
from fakellm import Body, FakeLLM
from scorer_process import TOKEN, clean_env, start, stop

from pau_mcp.manifests import ManifestStore
from pau_mcp.tls import shared_context

ROOT = Path(__file__).resolve().parents[3]
STORE = ManifestStore()
RUNS = STORE.method("builtin/b002")
WRONG = "def test_func(arg0):\n    return [(c, 1) for c in arg0]\n"


def _replies(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    if "Rating: X" in prompt:
        return "Same behaviour, minor omissions.\nRating: 4"
    return f"```python\n{RUNS.source}```"


class Endpoint:
    def __init__(self, process: subprocess.Popen[str], url: str) -> None:
        self.process = process
        self.url = url
        # The scorer closes a connection idle for 5 s; a client that kept it longer could send on it as it closes
        # ("Server disconnected without sending a response", seen under load 10 between two tests).
        self.client = httpx2.Client(
            verify=shared_context(), base_url=url, timeout=60, limits=httpx2.Limits(keepalive_expiry=2)
        )

    def post(
        self, body: Any, token: str | None = TOKEN, headers: dict[str, str] | None = None, **options: Any
    ) -> httpx2.Response:
        sent = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
        # JSON as ASCII, as most clients send it: a lone surrogate travels as its \\ud800 escape.
        content = body if isinstance(body, (bytes, str)) else json.dumps(body)
        return self.client.post("/v1/score", content=content, headers=sent | (headers or {}), **options)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(responder=_replies) as server:
        yield server


@pytest.fixture(scope="module")
def endpoint(fake: FakeLLM, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    data = tmp_path_factory.mktemp("scorer")
    args = [
        "--port", "0", "--scorer-token", TOKEN, "--judge-model", "openai/judge", "--coder-model", "openai/coder",
        "--data-dir", str(data), "--max-request-kb", "64", "--no-cache",
    ]  # fmt: skip
    process, url = start(args, clean_env(OPENAI_BASE_URL=fake.base_url))
    service = Endpoint(process, url)
    yield service
    service.client.close()
    stop(process)


def test_the_endpoint_announces_a_loopback_url_and_answers_health_without_a_token(endpoint: Endpoint) -> None:
    assert endpoint.url.startswith("http://127.0.0.1:")
    reply = endpoint.client.get("/v1/health")
    assert reply.status_code == 200 and reply.json()["status"] == "ok"


def test_the_openapi_document_describes_the_score_request(endpoint: Endpoint) -> None:
    document = endpoint.client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.")
    operation = document["paths"]["/v1/score"]["post"]
    assert {"200", "400", "401", "404", "413", "422"} <= set(operation["responses"])
    request = document["components"]["schemas"]["ScoreRequest"]
    assert {"method", "description", "code", "examples", "scores", "counterexample", "gold", "view"} <= set(
        request["properties"]
    )
    assert "ScoreResult" in document["components"]["schemas"]


@pytest.mark.parametrize("token", [None, "wrong-token-123", ""])
def test_scoring_without_the_right_bearer_token_is_401(endpoint: Endpoint, token: str | None) -> None:
    reply = endpoint.post({"method": "builtin/b002", "code": RUNS.source}, token=token)
    assert reply.status_code == 401 and "token" in reply.json()["error"]
    assert reply.headers["www-authenticate"] == "Bearer"


def test_the_agents_token_scheme_alone_is_not_enough(endpoint: Endpoint) -> None:
    reply = endpoint.client.post(
        "/v1/score", json={"method": "builtin/b002", "code": "x"}, headers={"Authorization": f"Basic {TOKEN}"}
    )
    assert reply.status_code == 401


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe"])
def test_malformed_json_is_400(endpoint: Endpoint, body: bytes) -> None:
    reply = endpoint.post(body)
    assert reply.status_code == 400 and "JSON" in reply.json()["error"]


@pytest.mark.parametrize(
    "body", [{"method": "builtin/b002"}, {"method": "builtin/b002", "description": "   ", "code": "\n"}]
)
def test_an_empty_submission_is_400(endpoint: Endpoint, body: dict[str, str]) -> None:
    reply = endpoint.post(body)
    assert reply.status_code == 400 and "empty" in reply.json()["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"method": "builtin/b002", "description": 5}, "description"),
        ({"method": "builtin/b002", "code": "x", "surprise": 1}, "surprise"),
        ({"method": "builtin/b002", "code": "x", "scores": ["vibes"]}, "scores"),
        ({"method": "builtin/b002", "code": "x", "scores": []}, "scores"),
        ({"description": "no method"}, "method"),
        ({"method": "builtin/b002", "code": "x", "examples": [["(1,)"]]}, "examples"),
        (["builtin/b002", "x"], "body"),
    ],
)
def test_fields_of_the_wrong_shape_are_422_naming_the_field(endpoint: Endpoint, body: object, field: str) -> None:
    reply = endpoint.post(body)
    assert reply.status_code == 422
    data = reply.json()
    assert field in data["error"] or any(field in map(str, item["loc"]) for item in data["detail"])


def test_a_body_over_the_limit_is_413(endpoint: Endpoint) -> None:
    reply = endpoint.post({"method": "builtin/b002", "code": "#" * 70_000})
    assert reply.status_code == 413 and "larger than" in reply.json()["error"]


def test_a_chunked_body_over_the_limit_is_413_too(endpoint: Endpoint) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"method": "builtin/b002", "code": "'
        for _ in range(80):
            yield b"#" * 1024
        yield b'"}'

    reply = endpoint.client.post(
        "/v1/score", content=chunks(), headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    )
    assert reply.status_code == 413


@pytest.mark.parametrize("method", ["builtin/nope", "nosuite/b002", "b002"])
def test_an_unknown_method_is_404(endpoint: Endpoint, method: str) -> None:
    reply = endpoint.post({"method": method, "code": RUNS.source})
    assert reply.status_code == 404 and method in reply.json()["error"]


def test_unknown_routes_and_methods_are_json_errors(endpoint: Endpoint) -> None:
    assert endpoint.client.get("/v2/anything").status_code == 404
    wrong_verb = endpoint.client.get("/v1/score")
    assert wrong_verb.status_code == 405 and "error" in wrong_verb.json()


def test_a_description_gets_the_judges_rating_and_the_code_writers_match(endpoint: Endpoint, fake: FakeLLM) -> None:
    reply = endpoint.post(
        {"method": "builtin/b002", "description": "Lists each run of equal characters with its length."}
    )
    assert reply.status_code == 200
    result = reply.json()
    assert result["method_id"] == "builtin/b002"
    assert result["judge"]["status"] == "scored" and result["judge"]["rating"] == 4
    assert result["codematch"]["fraction"] == 1.0 and result["codematch"]["model"] == "openai/coder"
    assert result["direct"] is None and result["usage"]["input_tokens"] > 0
    assert result["unpriced"] == ["openai/coder", "openai/judge"]


def test_the_agent_view_holds_only_what_an_agent_may_see(endpoint: Endpoint) -> None:
    reply = endpoint.post(
        {
            "method": "builtin/b002",
            "description": "Pairs characters with 1.",
            "code": WRONG,
            "counterexample": True,
            "view": "agent",
        }
    )
    shown = reply.json()
    assert set(shown) == {
        "judge_rating", "code_match", "direct_code_match", "direct_code_note", "direct_code_failures", "counterexample"
    }  # fmt: skip
    assert set(shown["counterexample"]) == {"input", "expected"}
    assert RUNS.description not in json.dumps(shown)


def test_sixteen_concurrent_requests_are_all_answered_correctly(endpoint: Endpoint) -> None:
    bodies = [
        {
            "method": f"builtin/b{n:03d}",
            "code": STORE.method(f"builtin/b{n:03d}").source if n % 2 else WRONG,
            "counterexample": True,
        }
        for n in range(1, 17)
    ]
    with ThreadPoolExecutor(16) as pool:
        replies = list(pool.map(endpoint.post, bodies))
    for n, reply in enumerate(replies, start=1):
        assert reply.status_code == 200, reply.text
        direct = reply.json()["direct"]
        assert reply.json()["method_id"] == f"builtin/b{n:03d}"
        if n % 2:
            assert direct["fraction"] == 1.0 and direct["counterexample"] is None
        else:
            assert direct["fraction"] < 1.0 and direct["counterexample"] is not None


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "scorer", "--host", "0.0.0.0", "--port", "0", "--data-dir", str(tmp_path)],
        env=clean_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing" in done.stderr and "PAU_SCORER_TOKEN" in done.stderr


# -- hostile requests and hostile code ---------------------------------------------------------------

FORGED = (
    "import _pau_values\n"
    "def test_func(arg0):\n"
    "    _pau_values.encode = lambda *args, **kwargs: {'set': [[1]]}\n"
    "    return 1\n"
)


@pytest.mark.parametrize("host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}", "10.0.0.1"])
def test_a_request_naming_another_host_is_refused_against_dns_rebinding(endpoint: Endpoint, host: str) -> None:
    port = endpoint.url.rsplit(":", 1)[1]
    for reply in (
        endpoint.post({"method": "builtin/b002", "code": RUNS.source}, headers={"Host": host.format(port=port)}),
        endpoint.client.get("/v1/health", headers={"Host": host.format(port=port)}),
    ):
        assert reply.status_code == 421 and "Host" in reply.json()["error"]


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "localhost", "[::1]:{port}"])
def test_loopback_names_are_accepted_as_the_host(endpoint: Endpoint, host: str) -> None:
    port = endpoint.url.rsplit(":", 1)[1]
    reply = endpoint.post({"method": "builtin/b002", "code": RUNS.source}, headers={"Host": host.format(port=port)})
    assert reply.status_code == 200 and reply.json()["direct"]["fraction"] == 1.0


@pytest.mark.parametrize("origin", ["http://evil.example", "null", "http://127.0.0.1.evil.example", "file://"])
def test_a_request_from_another_sites_page_is_refused(endpoint: Endpoint, origin: str) -> None:
    reply = endpoint.post({"method": "builtin/b002", "code": RUNS.source}, headers={"Origin": origin})
    assert reply.status_code == 403 and "Origin" in reply.json()["error"]


def test_a_request_from_a_loopback_origin_is_accepted(endpoint: Endpoint) -> None:
    reply = endpoint.post({"method": "builtin/b002", "code": RUNS.source}, headers={"Origin": endpoint.url})
    assert reply.status_code == 200


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None]
)
def test_a_body_not_sent_as_json_is_415(endpoint: Endpoint, content_type: str | None) -> None:
    # text/plain and form posts are what a browser page may send anywhere without asking first.
    body = json.dumps({"method": "builtin/b002", "code": RUNS.source})
    headers = {"Authorization": f"Bearer {TOKEN}"} | ({"Content-Type": content_type} if content_type else {})
    reply = endpoint.client.post("/v1/score", content=body, headers=headers)
    assert reply.status_code == 415 and "application/json" in reply.json()["error"]


def test_the_docs_curl_commands_run_as_written_against_the_endpoint(endpoint: Endpoint) -> None:
    """docs/scoring.md's examples, each run by curl as a user pastes it (the scorer's port in place of 8100)."""
    if shutil.which("curl") is None:
        if os.environ.get("CI"):
            pytest.fail("CI must run the docs' curl examples, and curl is not installed")
        pytest.skip("curl is not installed")
    text = (ROOT / "docs" / "scoring.md").read_text(encoding="utf-8")
    block = text.split("## The endpoint (`pau-mcp scorer`)", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    commands = [line for line in block.replace("\\\n", " ").splitlines() if line.startswith("curl ")]
    assert len(commands) == 4
    port = endpoint.url.split(":")[2].split("/")[0]
    for command in commands:
        done = subprocess.run(
            ["bash", "-c", command.replace("localhost:8100", f"localhost:{port}")],
            env={**os.environ, "PAU_SCORER_TOKEN": TOKEN}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        answer = json.loads(done.stdout)
        assert answer and "error" not in answer, (command, answer)


def test_json_with_a_charset_is_accepted(endpoint: Endpoint) -> None:
    body = json.dumps({"method": "builtin/b002", "code": RUNS.source})
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "Application/JSON; charset=utf-8"}
    assert endpoint.client.post("/v1/score", content=body, headers=headers).status_code == 200


@pytest.mark.parametrize(
    "body",
    [
        "[" * 30_000 + "]" * 30_000,
        '{"method": "builtin/b002", "code": "x", "examples": [["(1,)", ' + "[" * 20_000 + "]" * 20_000 + "]]}",
        '{"method": "builtin/b002", "code": "x", "examples": [["(1,)", ' + '{"a":' * 9_000 + "1" + "}" * 9_000 + "]]}",
    ],
    ids=["top-level", "in-examples", "objects"],
)
def test_deeply_nested_json_is_a_json_400(endpoint: Endpoint, body: str) -> None:
    reply = endpoint.post(body)
    assert reply.status_code == 400 and reply.headers["content-type"] == "application/json"
    assert "nested" in reply.json()["error"]


@pytest.mark.parametrize(
    "code",
    [
        FORGED,
        'from wit_world.imports import host\ndef test_func(arg0):\n    host.next(\'{"status": "ok"}\')\n    return 1\n',
        "def test_func(arg0):\n    raise type('E' * 100_000, (Exception,), {})('x' * 100_000)\n",
        "def test_func(arg0):\n    print(arg0 * 100_000)\n    return [arg0] * 1_000_000\n",
    ],
    ids=["forged-encoding", "forged-outcome", "long-names", "huge-output"],
)
def test_hostile_code_gets_a_json_result_never_a_500(endpoint: Endpoint, code: str) -> None:
    for view in ("full", "agent"):
        reply = endpoint.post({"method": "builtin/b002", "code": code, "counterexample": True, "view": view})
        assert reply.status_code == 200, reply.text[:300]
        assert len(reply.content) < 20_000
        shown = reply.json()
        fraction = shown["direct"]["fraction"] if view == "full" else shown["direct_code_match"]
        assert fraction == 0.0
    assert endpoint.post({"method": "builtin/b002", "code": RUNS.source}).json()["direct"]["fraction"] == 1.0


def test_code_with_a_lone_surrogate_is_refused_as_422_and_the_scorer_lives_on(endpoint: Endpoint) -> None:
    reply = endpoint.post({"method": "builtin/b002", "code": "def test_func(arg0):\n    return '\ud800'\n"})
    assert reply.status_code == 422 and reply.json()["detail"][0]["loc"] == ["code"]
    assert endpoint.post({"method": "builtin/b002", "code": RUNS.source}).json()["direct"]["fraction"] == 1.0


def _misbehaving_endpoint(base_url: str, tmp_path: Path) -> Endpoint:
    args = [
        "--port", "0", "--scorer-token", TOKEN, "--judge-model", "openai/judge", "--coder-model", "openai/coder",
        "--data-dir", str(tmp_path), "--no-cache", "--llm-retries", "1",
    ]  # fmt: skip
    process, url = start(args, clean_env(OPENAI_BASE_URL=base_url))
    return Endpoint(process, url)


def test_a_model_server_answering_pages_gives_score_errors_with_the_reason_not_a_500(tmp_path: Path) -> None:
    page = Body(b"<!DOCTYPE html><html><title>Bad gateway</title></html>", content_type="text/html")
    with FakeLLM(responder=lambda body: page) as fake:
        endpoint = _misbehaving_endpoint(fake.base_url, tmp_path)
        try:
            reply = endpoint.post({"method": "builtin/b002", "description": "Counts runs of equal characters."})
        finally:
            endpoint.client.close()
            stop(endpoint.process)
        assert len(fake.requests) == 4  # each of the two models tried twice
    assert reply.status_code == 200, reply.text
    result = reply.json()
    for part in (result["judge"], result["codematch"]):
        assert part["status"] == "error" and "not JSON" in part["reason"] and "Bad gateway" in part["reason"]


def test_an_unreachable_model_server_is_a_502_naming_the_setting(tmp_path: Path) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    endpoint = _misbehaving_endpoint(f"http://127.0.0.1:{port}/v1", tmp_path)
    try:
        reply = endpoint.post({"method": "builtin/b002", "description": "Counts runs of equal characters."})
    finally:
        endpoint.client.close()
        stop(endpoint.process)
    assert reply.status_code == 502
    assert "cannot reach" in reply.json()["error"] and "OPENAI_BASE_URL" in reply.json()["error"]


#: Code that once took the endpoint's event loop seconds to read (a fence that never closes, within the 64 KB
#: body this endpoint takes): every other request waited behind it.
HOSTILE_CODE = ("```" + "a" * 60_000, "`" * 60_000, "```" + " " * 60_000 + "x", "\n" * 30_000 + "(")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_health_stays_fast_while_hostile_code_is_scored(endpoint: Endpoint) -> None:
    bodies = [{"method": "builtin/b002", "code": code, "scores": ["direct"]} for code in HOSTILE_CODE * 2]
    loop_before = main_thread_cpu_seconds(endpoint.process.pid)
    with ThreadPoolExecutor(len(bodies)) as pool:
        replies = [pool.submit(endpoint.post, body) for body in bodies]
        waits = []
        while not all(reply.done() for reply in replies):
            started = time.monotonic()
            assert endpoint.client.get("/v1/health").status_code == 200  # within the client's minute
            waits.append(time.monotonic() - started)
    loop_spent = main_thread_cpu_seconds(endpoint.process.pid) - loop_before
    for reply in replies:
        assert reply.result().status_code == 200 and reply.result().json()["direct"]["fraction"] == 0
    assert waits, "no health request was sent while the code was scored"
    # What stalled everyone (17 s) was the scoring's CPU work on the event loop, which runs in the endpoint's main
    # thread: its CPU is bounded, not the requests' wall time, which a busy machine stretches (a wait of 0.64 s was
    # seen on 2 shared cores with the loop free). Measured: 0.08-0.11 s for 230-320 health requests.
    allowed = 0.5 + 0.003 * len(waits)
    assert loop_spent < allowed, (
        f"the event loop spent {loop_spent:.2f} s of CPU (allowed {allowed:.2f} s) while hostile code was scored; "
        f"the longest of {len(waits)} health requests waited {max(waits):.2f} s"
    )
