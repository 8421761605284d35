"""A Streamable HTTP MCP server that acts for whoever its token names, on
the Python SDK 1.x, for tests/tests/delegation.rs. It checks every bearer
token by RFC 7662 introspection at its authorization server
(delegating_as.mjs), so a person whose grant was revoked is refused at
once, and its `whoami` tool answers with the token's subject and actor.
Each call it serves is appended to CALLS_FILE as "sub=<sub> act=<actor>".

Usage: python delegated_server.py PORT ISSUER CALLS_FILE
"""

import sys

import httpx
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.fastmcp import FastMCP

port, issuer, calls_file = int(sys.argv[1]), sys.argv[2].rstrip("/"), sys.argv[3]
claims_of: dict[str, dict] = {}


class Introspection(TokenVerifier):
    async def verify_token(self, token: str) -> AccessToken | None:
        async with httpx.AsyncClient(timeout=10) as client:
            answer = (await client.post(f"{issuer}/introspect", data={"token": token})).json()
        if not answer.get("active"):
            return None
        claims_of[token] = answer
        return AccessToken(
            token=token,
            client_id=str(answer.get("client_id", "unknown")),
            scopes=str(answer.get("scope", "")).split(),
            expires_at=answer.get("exp"),
        )


url = f"http://127.0.0.1:{port}"
mcp = FastMCP(
    "people",
    host="127.0.0.1",
    port=port,
    token_verifier=Introspection(),
    auth=AuthSettings(
        issuer_url=issuer,
        resource_server_url=f"{url}/mcp",
        required_scopes=["notes:read"],
        validate_token_resource=False,
    ),
)


@mcp.tool()
def whoami() -> str:
    """Says whom the call is for and who makes it."""
    token = get_access_token()
    claims = claims_of.get(token.token, {}) if token else {}
    actor = (claims.get("act") or {}).get("sub", "none")
    line = f"sub={claims.get('sub')} act={actor}"
    with open(calls_file, "a") as out:
        out.write(line + "\n")
    return line


mcp.run(transport="streamable-http")
