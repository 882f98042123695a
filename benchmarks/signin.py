"""What checking a signed-in token costs per request (`serve --auth oauth`), beside today's bearer checks, in one run.

Each row is the gate a request passes at the MCP endpoint's edge (``pau_mcp.oauth.SignIn``: the header read, the
token checked, the scope compared, the user put in the request), run in this process on one event loop:

* the main token, and a session token: today's bearer checks (``app.verify_bearer``: an HMAC compare; an HMAC and
  a JSON parse), the baseline;
* a signed JWT access token, ES256 and RS256 (2048-bit), the issuer's key already cached: joserfc's signature check
  and the claims;
* RFC 7662 introspection: one HTTP round trip per request to an issuer on loopback (tests/keyserver.py, a
  threaded standard-library server), so this row is mostly that server's and the HTTP client's time.

CPU seconds of this process per request (``time.process_time``), the median of ``--rounds`` rounds, rounds
alternating between the rows so other load on the machine falls on all alike; the ratio is to the main token.

Usage: python benchmarks/signin.py [--requests 3000] [--rounds 5] [--write]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import httpx2
from joserfc.jwk import RSAKey

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks")]

from _markdown import write_section  # noqa: E402
from keyserver import RESOURCE, key_server  # noqa: E402

from pau_mcp.oauth import EXPLORE, ResourceServer, SignIn  # noqa: E402
from pau_mcp.server import TokenSigner, verify_bearer  # noqa: E402

MAIN = "main-token-0123456789abcdef"


def _scope(token: str) -> dict[str, object]:
    return {"type": "http", "headers": [(b"authorization", f"Bearer {token}".encode())], "query_string": b""}


async def _measure(rows: dict[str, tuple[SignIn, str]], requests: int, rounds: int) -> dict[str, list[float]]:
    seconds: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, (signin, token) in rows.items():
            admit: Callable[[dict[str, object], str], Awaitable[object]] = signin._admit
            assert await admit(_scope(token), EXPLORE) is None, name  # let in
            started = time.process_time()
            for _ in range(requests):
                await admit(_scope(token), EXPLORE)
            seconds[name].append((time.process_time() - started) / requests)
    return seconds


async def _run(requests: int, rounds: int) -> dict[str, list[float]]:
    signer = TokenSigner("benchmark-deployment-key-0123456789")
    session = signer.issue("agent-7", run="contest")
    other = verify_bearer(MAIN, signer).verify_token
    with key_server() as issuer:
        rsa = RSAKey.generate_key(2048, parameters={"kid": "r1", "alg": "RS256", "use": "sig"})
        issuer.keys.append(rsa)  # type: ignore[arg-type]
        es256, rs256 = issuer.token(), issuer.token(rsa, header={"alg": "RS256"})  # type: ignore[arg-type]
        async with httpx2.AsyncClient() as http:
            jwt_gate = SignIn(ResourceServer(issuer.issuer, RESOURCE, http), other)
            introspected = SignIn(ResourceServer(issuer.issuer, RESOURCE, http, introspection=("pau", "secret")), other)
            rows = {
                "main token (today's bearer check)": (jwt_gate, MAIN),
                "session token (today's)": (jwt_gate, session),
                "JWT ES256, key cached": (jwt_gate, es256),
                "JWT RS256, key cached": (jwt_gate, rs256),
                "opaque token, RFC 7662 introspection on loopback": (introspected, "opaque-token-abcdef"),
            }
            return await _measure(rows, requests, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--smoke", action="store_true", help="small sizes, seconds: checks the script runs")
    options = parser.parse_args()
    if options.smoke:
        options.requests, options.rounds = 20, 1
    seconds = anyio.run(_run, options.requests, options.rounds)
    base = statistics.median(next(iter(seconds.values())))
    lines = [
        f"{options.requests} requests x {options.rounds} rounds per row; Python {platform.python_version()}, "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| a request's bearer token | CPU per request (median of rounds) | ratio to the main token |",
        "| --- | --- | --- |",
    ]
    for name, values in seconds.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1e6:.1f} µs | {median / base:.1f}x |")
    text = "\n".join(lines)
    print(text)
    if options.write:
        write_section("signin", text)


if __name__ == "__main__":
    main()
