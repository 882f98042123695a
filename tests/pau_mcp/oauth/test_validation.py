"""The resource server's token checks (``pau_mcp.oauth.ResourceServer``) against an issuer served over loopback HTTP
whose answers the test controls (tests/keyserver.py): forged, unsigned and mis-signed tokens, claims out of place,
and a key set that rotates, goes down, or answers huge or slowly."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from joserfc.jwk import ECKey
from keyserver import RESOURCE, KeyServer, key_server

from pau_mcp.oauth import AuthServerDown, Grant, ResourceServer, TokenRefused, canonical
from pau_mcp.tls import shared_context


@pytest.fixture
def issuer() -> Iterator[KeyServer]:
    with key_server() as server:
        yield server


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _claims(issuer: KeyServer, **extra: object) -> dict[str, object]:
    now = int(time.time())
    return {
        "iss": issuer.issuer,
        "aud": RESOURCE,
        "sub": "team-a",
        "scope": "explore",
        "iat": now,
        "exp": now + 600,
    } | extra


def _check(issuer: KeyServer, *tokens: str, skew: float = 60.0, timeout_s: float = 5.0) -> list[object]:
    """Each token's grant, or the exception refusing it, from one resource server (one key cache)."""

    async def run() -> list[object]:
        async with httpx2.AsyncClient(verify=shared_context()) as http:
            server = ResourceServer(issuer.issuer, RESOURCE, http, clock_skew_s=skew, timeout_s=timeout_s)
            found: list[object] = []
            for token in tokens:
                try:
                    found.append(await server.check(token))
                except (TokenRefused, AuthServerDown) as exc:
                    found.append(exc)
            return found

    return anyio.run(run)


def _refusal(result: object, words: str) -> str:
    assert isinstance(result, TokenRefused), result
    line = str(result)
    assert words in line and "\n" not in line, line
    return line


def test_a_valid_token_grants_its_subject_client_and_scopes(issuer: KeyServer) -> None:
    [grant] = _check(issuer, issuer.token(scope="explore score"))
    assert isinstance(grant, Grant), grant
    assert (grant.subject, grant.client_id, grant.scopes) == ("team-a", "host-one", frozenset({"explore", "score"}))


def test_an_unsigned_token_alg_none_is_refused(issuer: KeyServer) -> None:
    header = _b64(json.dumps({"alg": "none", "kid": "k1"}).encode())
    token = f"{header}.{_b64(json.dumps(_claims(issuer)).encode())}."
    _refusal(_check(issuer, token)[0], "algorithm 'none' is not accepted")


def test_a_token_signed_with_the_public_key_as_an_hmac_secret_is_refused(issuer: KeyServer) -> None:
    public = json.dumps(issuer.keys[0].as_dict(private=False)).encode()
    signed = f"{_b64(json.dumps({'alg': 'HS256', 'kid': 'k1'}).encode())}.{_b64(json.dumps(_claims(issuer)).encode())}"
    token = f"{signed}.{_b64(hmac.new(public, signed.encode(), hashlib.sha256).digest())}"
    _refusal(_check(issuer, token)[0], "algorithm 'HS256' is not accepted")


def test_a_token_signed_by_a_key_the_issuer_never_published_is_refused(issuer: KeyServer) -> None:
    forged = ECKey.generate_key("P-256", parameters={"kid": "k1", "alg": "ES256"})
    stranger = ECKey.generate_key("P-256", parameters={"kid": "stranger", "alg": "ES256"})
    same_kid, unknown_kid = _check(issuer, issuer.token(forged), issuer.token(stranger))
    _refusal(same_kid, "signature does not verify")
    _refusal(unknown_kid, "key id 'stranger', which is not among the issuer's signing keys")


# Times are offsets from the moment the test runs (not from collection, which may be half an hour earlier on a busy
# machine running the whole suite): ("now", seconds) is resolved by _at_test_time.
@pytest.mark.parametrize(
    ("claims", "words"),
    [
        ({"iss": "https://elsewhere.example"}, "issued by 'https://elsewhere.example'"),
        ({"aud": "https://other.example/mcp"}, "for the audience 'https://other.example/mcp'"),
        ({"aud": None}, "for the audience none"),
        ({"exp": ("now", -120)}, "the token expired"),
        ({"exp": None}, "has no expiry"),
        ({"nbf": ("now", 300)}, "not valid for another"),
        ({"iat": ("now", 300)}, "issued in the future"),
        ({"sub": None, "client_id": None}, "names no subject"),
        ({"sub": "x" * 300}, "longer than 255"),
    ],
)
def test_claims_out_of_place_are_refused_with_one_line(
    issuer: KeyServer, claims: dict[str, object], words: str
) -> None:
    _refusal(_check(issuer, issuer.token(**_at_test_time(claims)))[0], words)


def _at_test_time(claims: dict[str, object]) -> dict[str, Any]:
    now = int(time.time())
    return {
        name: now + value[1] if isinstance(value, tuple) and value[:1] == ("now",) else value
        for name, value in claims.items()
    }


def test_the_clock_skew_forgives_a_little_and_no_more(issuer: KeyServer) -> None:
    now = int(time.time())
    just, long_ago = _check(issuer, issuer.token(exp=now - 20), issuer.token(exp=now - 100), skew=60)
    assert not isinstance(just, Exception)
    _refusal(long_ago, "expired")


def test_the_audience_is_compared_as_a_url(issuer: KeyServer) -> None:
    [grant] = _check(issuer, issuer.token(aud=["https://CONTEST.example:443/mcp/", "https://other.example"]))
    assert isinstance(grant, Grant), grant
    assert grant.subject == "team-a"
    assert canonical("HTTPS://Contest.Example:443/mcp/") == canonical(RESOURCE)


def test_rotated_keys_are_fetched_and_a_flood_of_unknown_kids_fetches_once(issuer: KeyServer) -> None:
    issuer.add_key("k2")  # published, never seen by the resource server before it fetched
    floods = [issuer.token(ECKey.generate_key("P-256", parameters={"kid": f"x{i}", "alg": "ES256"})) for i in range(50)]
    results = _check(issuer, issuer.token(), *floods, issuer.token(issuer.keys[1]))
    assert not isinstance(results[0], Exception) and not isinstance(results[-1], Exception)
    assert all(isinstance(r, TokenRefused) for r in results[1:-1])
    assert issuer.jwks_requests == 1  # the first token fetched k1 and k2; the 50 unknown kids fetched nothing more


def test_cached_keys_keep_working_while_the_key_set_is_down_and_unknown_kids_are_refused(issuer: KeyServer) -> None:
    async def run() -> list[object]:
        async with httpx2.AsyncClient(verify=shared_context()) as http:
            server = ResourceServer(issuer.issuer, RESOURCE, http)
            server.keys._refetch_after_s = 0  # every unknown kid asks the issuer again
            found: list[object] = [await server.check(issuer.token())]
            issuer.mode = "down"
            stranger = ECKey.generate_key("P-256", parameters={"kid": "new", "alg": "ES256"})
            for token in (issuer.token(), issuer.token(stranger)):
                try:
                    found.append(await server.check(token))
                except TokenRefused as exc:
                    found.append(exc)
            return found

    first, cached, unknown = anyio.run(run)
    assert not isinstance(first, Exception) and not isinstance(cached, Exception)
    _refusal(unknown, "the key set could not be fetched")
    assert "HTTP 503" in str(unknown)


def test_a_huge_key_set_is_read_no_further_than_its_limit(issuer: KeyServer) -> None:
    issuer.mode = "huge"
    line = _refusal(_check(issuer, issuer.token())[0], "the key set could not be fetched")
    assert "over 262,144 bytes" in line


def test_a_slow_key_set_is_given_up_after_its_time_limit(issuer: KeyServer) -> None:
    issuer.mode = "slow"
    line = _refusal(_check(issuer, issuer.token(), timeout_s=1.0)[0], "the key set could not be fetched")
    assert "did not answer within 1 s" in line


def test_tokens_that_are_not_jws_are_refused(issuer: KeyServer) -> None:
    _refusal(_check(issuer, "a.b.c.d.e")[0], "encrypted JWT")
    _refusal(_check(issuer, "abc")[0], "not a JWT")
    _refusal(_check(issuer, "!!.e30.x")[0], "header is not base64url JSON")
    _refusal(_check(issuer, "x" * 100_000)[0], "at most 16,384")


def test_concurrent_tokens_waiting_on_the_first_fetch_are_all_accepted_after_one_fetch(issuer: KeyServer) -> None:
    """Twenty requests arrive together before any key is held: the first fetches, the others wait for its answer
    (before this, they were refused as naming an unknown key while the fetch was under way)."""
    tokens = [issuer.token(sub=f"team-{i}") for i in range(20)]
    issuer.mode = "held"

    async def run() -> list[object]:
        async with httpx2.AsyncClient(verify=shared_context()) as http:
            server = ResourceServer(issuer.issuer, RESOURCE, http)
            found: list[object] = []

            async def one(token: str) -> None:
                try:
                    found.append(await server.check(token))
                except TokenRefused as exc:
                    found.append(exc)

            async with anyio.create_task_group() as group:
                group.start_soon(one, tokens[0])
                with anyio.fail_after(30):
                    while issuer.jwks_requests == 0:  # the first one's fetch is under way
                        await anyio.sleep(0.01)
                for token in tokens[1:]:
                    group.start_soon(one, token)
                await anyio.sleep(0.2)  # the others have arrived and are waiting
                issuer.release.set()
            return found

    results = anyio.run(run)
    assert not any(isinstance(r, Exception) for r in results), results
    assert issuer.jwks_requests == 1
