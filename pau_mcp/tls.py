"""The TLS context every HTTP client of this process shares.

httpx builds a new context for each client (and each transport) it makes, and a context reads the whole CA bundle:
about 30 ms of CPU every time. pau-mcp makes clients often (a model client for each event loop that scores or
explores, an episode pool for each run, an identity provider's client for each HTTP server), so each reads the bundle
once per process instead. A context is safe to share between clients, threads and event loops; the environment's
``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` are honoured as httpx honours them, read when the context is first made.
"""

from __future__ import annotations

import functools
import ssl

import httpx2

__all__ = ["shared_context"]


@functools.cache
def shared_context() -> ssl.SSLContext:
    """This process's TLS context for verified HTTPS, made on first use (pass it as an httpx client's ``verify``)."""
    return httpx2.create_ssl_context()
