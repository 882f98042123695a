"""pau-mcp as an OAuth 2.1 resource server: access tokens from a real authorization server, checked against its
published keys or by introspection, and the scopes they carry (``pau-mcp serve --auth oauth``, ``pau-mcp scorer
--auth oauth``; docs/server.md, "Hosting a contest with sign-in").

Shared by the MCP server and the scorer endpoint, which import it and never each other.
"""

from .configured import sign_in_from
from .fetching import FetchError
from .gate import SIGNED_IN, OtherBearer, SignIn, signed_in
from .issuer import IssuerKeys, IssuerMetadata
from .scopes import EXPLORE, OPERATE, SCOPES, SCORE, effective
from .validation import MAX_TOKEN_BYTES, AuthServerDown, Grant, ResourceServer, TokenRefused, canonical

__all__ = [
    "EXPLORE",
    "MAX_TOKEN_BYTES",
    "OPERATE",
    "SCOPES",
    "SCORE",
    "SIGNED_IN",
    "AuthServerDown",
    "FetchError",
    "Grant",
    "IssuerKeys",
    "IssuerMetadata",
    "OtherBearer",
    "ResourceServer",
    "SignIn",
    "TokenRefused",
    "canonical",
    "effective",
    "sign_in_from",
    "signed_in",
]
