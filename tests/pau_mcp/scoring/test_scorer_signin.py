"""`pau-mcp scorer --auth oauth`: the scorer endpoint as a resource of a real authorization server (npm oidc-provider,
tests/authserver.py). A token with ``score`` (or ``operate``) may score; one with only ``explore`` gets 403 naming the
scope; without a token, 401 naming the endpoint's protected-resource metadata; the scorer token keeps working."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest
from authserver import ALL_SCOPES, AuthServer, authorization_server, client, confidential
from scorer_process import TOKEN, clean_env, start, stop

from pau_mcp.tls import shared_context

RESOURCE = "https://scorer.example"
BOT = confidential("team-a-bot", "client_credentials")
#: A score request for a method no suite has: past the gate it is a 404, which no refusal of sign-in is.
REQUEST = {"method": "builtin/none", "code": "def test_func(arg0):\n    return arg0\n", "scores": ["direct"]}


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    with authorization_server(tmp_path_factory.mktemp("issuer"), {RESOURCE: {"scope": ALL_SCOPES}}, [BOT]) as server:
        yield server


@pytest.fixture(scope="module")
def endpoint(issuer: AuthServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    args = ["--port", "0", "--scorer-token", TOKEN, "--auth", "oauth", "--issuer", issuer.issuer, "--resource", RESOURCE,
            "--data-dir", str(tmp_path_factory.mktemp("scorer")), "--no-cache"]  # fmt: skip
    process, url = start(args, clean_env())
    yield url
    stop(process)


def _score(url: str, token: str | None) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.post(f"{url}/v1/score", json=REQUEST, headers=headers, timeout=60, verify=shared_context())


def test_a_token_with_the_score_scope_may_score_and_so_may_operate_and_the_scorer_token(
    issuer: AuthServer, endpoint: str
) -> None:
    for token in (issuer.token(client(BOT), RESOURCE, "score"), issuer.token(client(BOT), RESOURCE, "operate"), TOKEN):
        reply = _score(endpoint, token)
        assert reply.status_code == 404, reply.text  # let in: the method is unknown


def test_an_explore_token_gets_403_naming_the_score_scope(issuer: AuthServer, endpoint: str) -> None:
    reply = _score(endpoint, issuer.token(client(BOT), RESOURCE, "explore"))
    assert reply.status_code == 403
    assert 'error="insufficient_scope"' in reply.headers["www-authenticate"]
    assert 'scope="score"' in reply.headers["www-authenticate"]
    assert "needs the scope 'score'" in reply.json()["error_description"]


def test_without_a_token_the_scorer_names_its_metadata(issuer: AuthServer, endpoint: str) -> None:
    reply = _score(endpoint, None)
    assert reply.status_code == 401
    assert (
        'resource_metadata="https://scorer.example/.well-known/oauth-protected-resource"'
        in reply.headers["www-authenticate"]
    )
    metadata = httpx2.get(
        f"{endpoint}/.well-known/oauth-protected-resource", timeout=30, verify=shared_context()
    ).json()
    assert metadata["resource"] == RESOURCE and metadata["authorization_servers"] == [issuer.issuer]
