"""The scorer endpoint against its own OpenAPI document: generated requests, a real ``pau-mcp scorer``.

Schemathesis generates requests from ``openapi()`` (valid and invalid bodies, missing and wrong
tokens, odd headers) and checks every response: never a 5xx, always a status the document lists,
always JSON that matches the documented schema. Half the generated score requests are pointed at a
real method, so they reach the judge (a scripted fake model), the code writer and the sandbox.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fakellm import FakeLLM
from hypothesis import HealthCheck, settings
from schemathesis import GenerationMode
from scorer_process import TOKEN, clean_env, start, stop

from pau_mcp.scoring.http import openapi

SCHEMA = schemathesis.openapi.from_dict(openapi())
# Nothing written into the work tree: no crash cache, no example database.
SCHEMA.config.cache.enabled = False
SCHEMA.config.generation.database = "none"
_CHECKS = SCHEMA.config.checks
# A body over the size limit is refused before it is read (413), whatever it holds.
_CHECKS.negative_data_rejection.expected_statuses = [*_CHECKS.negative_data_rejection.expected_statuses, "413"]
# A schema-valid submission can still be empty for the score it asks (code: null with scores: ["direct"]): a
# documented 400 that JSON Schema cannot express. Any other refusal of valid data (a 422) still fails.
_CHECKS.positive_data_acceptance.expected_statuses = [*_CHECKS.positive_data_acceptance.expected_statuses, "400"]
METHOD = "builtin/b002"


def _replies(body: dict[str, Any]) -> str:
    if "Rating: X" in json.dumps(body["messages"]):
        return "Close enough.\nRating: 3"
    return "```python\ndef test_func(arg0):\n    return [(c, 1) for c in arg0]\n```"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with FakeLLM(responder=_replies) as fake:
        args = [
            "--port", "0", "--scorer-token", TOKEN, "--judge-model", "openai/judge", "--coder-model", "openai/coder",
            "--data-dir", str(tmp_path_factory.mktemp("openapi")), "--no-cache",
        ]  # fmt: skip
        process, url = start(args, clean_env(OPENAI_BASE_URL=fake.base_url))
        try:
            yield url
        finally:
            stop(process)


@SCHEMA.parametrize()
@settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_generated_request_gets_a_documented_json_answer_never_a_5xx(
    case: schemathesis.Case[Any], live: str
) -> None:
    if case.headers and "Authorization" in case.headers:
        case.headers["Authorization"] = f"Bearer {TOKEN}"  # a request made without a token stays without one
    body = case.body
    positive = case.meta is not None and case.meta.generation.mode is GenerationMode.POSITIVE
    # Stable across runs (no hash seed): about half the valid requests name a real method and get scored.
    if (
        positive
        and isinstance(body, dict)
        and isinstance(body.get("method"), str)
        and zlib.crc32(json.dumps(body, sort_keys=True, default=str).encode("utf-8", "surrogatepass")) % 2
    ):
        body["method"] = METHOD
    case.call_and_validate(base_url=live, timeout=60)
