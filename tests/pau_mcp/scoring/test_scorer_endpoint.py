"""``pau-mcp scorer``: the scoring endpoint as a real process on a loopback port, with a fake model behind it."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fakellm import FakeLLM

from pau_mcp.manifests import ManifestStore

TOKEN = "scorer-secret-token"
STORE = ManifestStore()
RUNS = STORE.method("builtin/b002")
WRONG = "def test_func(arg0):\n    return [(c, 1) for c in arg0]\n"


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any setting or provider variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAU_", "OPENAI_", "ANTHROPIC_"))}
    return env | extra


def _replies(body: dict[str, Any]) -> str:
    prompt = json.dumps(body["messages"])
    if "Rating: X" in prompt:
        return "Same behaviour, minor omissions.\nRating: 4"
    return f"```python\n{RUNS.source}```"


class Endpoint:
    def __init__(self, process: subprocess.Popen, url: str) -> None:
        self.process = process
        self.url = url
        self.client = httpx2.Client(base_url=url, timeout=60)

    def post(self, body: Any, token: str | None = TOKEN, **options: Any) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if isinstance(body, (bytes, str)):
            return self.client.post(
                "/v1/score", content=body, headers=headers | {"Content-Type": "application/json"}, **options
            )
        return self.client.post("/v1/score", json=body, headers=headers, **options)


def start(args: list[str], env: dict[str, str], seconds: float = 90) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "pau_mcp", "scorer", *args],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr], daemon=True).start()
    seen = []
    while True:
        try:
            line = lines.get(timeout=seconds)
        except queue.Empty:
            process.kill()
            raise AssertionError(f"the scorer did not announce its URL within {seconds} s: {seen}") from None
        seen.append(line)
        match = re.search(r"serving at (http://\S+)", line)
        if match:
            return process, match.group(1)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(responder=_replies) as server:
        yield server


@pytest.fixture(scope="module")
def endpoint(fake, tmp_path_factory) -> Iterator[Endpoint]:
    data = tmp_path_factory.mktemp("scorer")
    args = [
        "--port", "0", "--scorer-token", TOKEN, "--judge-model", "openai/judge", "--coder-model", "openai/coder",
        "--data-dir", str(data), "--max-request-kb", "64", "--no-cache",
    ]  # fmt: skip
    process, url = start(args, clean_env(OPENAI_BASE_URL=fake.base_url))
    service = Endpoint(process, url)
    yield service
    service.client.close()
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


def test_the_endpoint_announces_a_loopback_url_and_answers_health_without_a_token(endpoint):
    assert endpoint.url.startswith("http://127.0.0.1:")
    reply = endpoint.client.get("/v1/health")
    assert reply.status_code == 200 and reply.json()["status"] == "ok"


def test_the_openapi_document_describes_the_score_request(endpoint):
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
def test_scoring_without_the_right_bearer_token_is_401(endpoint, token):
    reply = endpoint.post({"method": "builtin/b002", "code": RUNS.source}, token=token)
    assert reply.status_code == 401 and "token" in reply.json()["error"]
    assert reply.headers["www-authenticate"] == "Bearer"


def test_the_agents_token_scheme_alone_is_not_enough(endpoint):
    reply = endpoint.client.post(
        "/v1/score", json={"method": "builtin/b002", "code": "x"}, headers={"Authorization": f"Basic {TOKEN}"}
    )
    assert reply.status_code == 401


@pytest.mark.parametrize("body", [b"{not json", b"", b"\xff\xfe"])
def test_malformed_json_is_400(endpoint, body):
    reply = endpoint.post(body)
    assert reply.status_code == 400 and "JSON" in reply.json()["error"]


@pytest.mark.parametrize(
    "body", [{"method": "builtin/b002"}, {"method": "builtin/b002", "description": "   ", "code": "\n"}]
)
def test_an_empty_submission_is_400(endpoint, body):
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
def test_fields_of_the_wrong_shape_are_422_naming_the_field(endpoint, body, field):
    reply = endpoint.post(body)
    assert reply.status_code == 422
    data = reply.json()
    assert field in data["error"] or any(field in map(str, item["loc"]) for item in data["detail"])


def test_a_body_over_the_limit_is_413(endpoint):
    reply = endpoint.post({"method": "builtin/b002", "code": "#" * 70_000})
    assert reply.status_code == 413 and "larger than" in reply.json()["error"]


def test_a_chunked_body_over_the_limit_is_413_too(endpoint):
    def chunks() -> Iterator[bytes]:
        yield b'{"method": "builtin/b002", "code": "'
        for _ in range(80):
            yield b"#" * 1024
        yield b'"}'

    reply = endpoint.client.post("/v1/score", content=chunks(), headers={"Authorization": f"Bearer {TOKEN}"})
    assert reply.status_code == 413


@pytest.mark.parametrize("method", ["builtin/nope", "nosuite/b002", "b002"])
def test_an_unknown_method_is_404(endpoint, method):
    reply = endpoint.post({"method": method, "code": RUNS.source})
    assert reply.status_code == 404 and method in reply.json()["error"]


def test_unknown_routes_and_methods_are_json_errors(endpoint):
    assert endpoint.client.get("/v2/anything").status_code == 404
    wrong_verb = endpoint.client.get("/v1/score")
    assert wrong_verb.status_code == 405 and "error" in wrong_verb.json()


def test_a_description_gets_the_judges_rating_and_the_code_writers_match(endpoint, fake):
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


def test_the_agent_view_holds_only_what_an_agent_may_see(endpoint):
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


def test_sixteen_concurrent_requests_are_all_answered_correctly(endpoint):
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


def test_a_non_loopback_address_without_a_token_is_refused(tmp_path: Path):
    done = subprocess.run(
        [sys.executable, "-m", "pau_mcp", "scorer", "--host", "0.0.0.0", "--port", "0", "--data-dir", str(tmp_path)],
        env=clean_env(), capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert "refusing" in done.stderr and "PAU_SCORER_TOKEN" in done.stderr
