"""A Streamable HTTP MCP server behind OAuth, on the Python SDK 1.x, for
tests/tests/oauth.rs. It verifies bearer tokens against the authorization
server's JWKS (signature, issuer, and the scope its tool needs) and writes
every token it accepted to TOKENS_FILE, so the test can look for them in
spearlet's output.

Usage: python python_oauth_server.py PORT ISSUER TOKENS_FILE
"""

import sys

import jwt
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP

port, issuer, tokens_file = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
jwks = jwt.PyJWKClient(f"{issuer}/jwks")


class JwksVerifier(TokenVerifier):
    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            key = jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(
                token, key.key, algorithms=["RS256"], issuer=issuer,
                options={"verify_aud": False},
            )
        except jwt.PyJWTError:
            return None
        with open(tokens_file, "a") as out:
            out.write(token + "\n")
        scope = claims.get("scope", "")
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id") or claims.get("sub") or "unknown"),
            scopes=scope.split() if isinstance(scope, str) else list(scope),
            expires_at=claims.get("exp"),
        )


url = f"http://127.0.0.1:{port}"
mcp = FastMCP(
    "protected",
    host="127.0.0.1",
    port=port,
    token_verifier=JwksVerifier(),
    auth=AuthSettings(
        issuer_url=issuer,
        resource_server_url=f"{url}/mcp",
        required_scopes=["docs:read"],
        validate_token_resource=False,
    ),
)


@mcp.tool()
def whoami() -> str:
    """Says that the caller got in."""
    return "authorized"


@mcp.tool()
def read_note() -> str:
    """Reads the protected note (a read-only tool, as agents that only read may call)."""
    return "authorized: the protected note"


mcp.run(transport="streamable-http")
