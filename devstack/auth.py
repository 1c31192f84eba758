"""A local stand-in for API Gateway's Cognito user-pool authorizer (AuthMode COGNITO).

Deployed, Cognito signs ID tokens (RS256) and API Gateway verifies them before the function
runs, passing the claims in ``requestContext.authorizer.claims`` with every value a string.
Locally there is no Cognito: :class:`LocalUserPool` signs HS256 tokens with a secret and the
local API verifies them the same way, so the functions see the same event either way. A
missing, malformed, badly signed or expired token is a 401 ``{"message": "Unauthorized"}``,
and the function is not called, as with API Gateway.

Mint a token: ``python -m devstack.auth alice --admin`` (prints it), then send
``Authorization: <token>``. The secret is ``TALLY_DEV_TOKEN_SECRET`` or, when that is unset,
one kept in ``.devstack-token-secret`` (git-ignored) so the CLI and the running stack agree.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

SECRET_FILE = Path(__file__).resolve().parents[1] / ".devstack-token-secret"
ISSUER = "devstack"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def dev_secret() -> bytes:
    value = os.environ.get("TALLY_DEV_TOKEN_SECRET")
    if value:
        return value.encode()
    if not SECRET_FILE.exists():
        SECRET_FILE.write_text(secrets.token_hex(32))
        SECRET_FILE.chmod(0o600)
    return SECRET_FILE.read_text().strip().encode()


class LocalUserPool:
    def __init__(self, secret: bytes | None = None) -> None:
        self.secret = secret if secret is not None else dev_secret()

    def issue(self, user: str, groups: list[str] | None = None, ttl: int = 3600, now: float | None = None) -> str:
        """An ID token for ``user`` (its ``sub``), in ``groups``."""
        issued = int(time.time() if now is None else now)
        claims: dict[str, Any] = {
            "sub": user,
            "cognito:username": user,
            "token_use": "id",
            "iss": ISSUER,
            "iat": issued,
            "exp": issued + ttl,
        }
        if groups:
            claims["cognito:groups"] = list(groups)
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        body = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self.secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(signature)}"

    def verify(self, header: str | None) -> dict[str, str] | None:
        """The claims as API Gateway passes them (strings), or None: refuse with 401."""
        if not header:
            return None
        token = header[7:] if header[:7].lower() == "bearer " else header
        try:
            head, body, signature = token.split(".")
            expected = hmac.new(self.secret, f"{head}.{body}".encode(), hashlib.sha256).digest()
            if json.loads(_unb64(head)).get("alg") != "HS256" or not hmac.compare_digest(_unb64(signature), expected):
                return None
            claims = json.loads(_unb64(body))
        except (ValueError, TypeError, AttributeError):
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER or claims.get("token_use") != "id":
            return None
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time() or not claims.get("sub"):
            return None
        flat = {}
        for key, value in claims.items():
            flat[key] = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        return flat


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devstack.auth", description="Mint a local ID token for AuthMode COGNITO.")
    parser.add_argument("user", help="the user id (the token's sub)")
    parser.add_argument("--admin", action="store_true", help="member of the admin group")
    parser.add_argument("--group", action="append", default=[], help="another group (repeatable)")
    parser.add_argument("--ttl", type=int, default=3600, help="seconds (default 3600)")
    args = parser.parse_args(argv)
    groups = args.group + ([os.environ.get("ADMIN_GROUP", "admin")] if args.admin else [])
    print(LocalUserPool().issue(args.user, groups, args.ttl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
