"""Sign-in as the settings describe it (``--auth oauth``, ``--issuer``, ``--resource``, introspection, ``--clock-skew``):
what the MCP server and the scorer endpoint each put in front of their routes."""

from __future__ import annotations

from collections.abc import Callable

import httpx2

from ..config import Settings
from ..tls import shared_context
from .gate import OtherBearer, SignIn
from .validation import ResourceServer

__all__ = ["sign_in_from"]


def sign_in_from(settings: Settings, other: OtherBearer | None, name: str) -> Callable[[str], SignIn] | None:
    """A builder of the resource's sign-in from its own URL (known once it listens), or None without ``--auth oauth``.

    Args:
        settings: The service's settings.
        other: The service's own bearer check, still accepted beside signed-in tokens.
        name: The resource's name in its metadata.
    """
    if settings.auth != "oauth" or settings.issuer is None:
        return None
    issuer = settings.issuer
    introspection = None
    if settings.introspection_client is not None and settings.introspection_secret is not None:
        introspection = (settings.introspection_client, settings.introspection_secret)

    def build(url: str) -> SignIn:
        server = ResourceServer(
            issuer, settings.resource or url, httpx2.AsyncClient(follow_redirects=False, verify=shared_context()),
            clock_skew_s=settings.clock_skew_s, introspection=introspection,
        )  # fmt: skip
        return SignIn(server, other, name=name)

    return build
