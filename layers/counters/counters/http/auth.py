"""Who is calling: the acting user comes from verified claims, never from the path or body.

``AUTH_MODE`` (the template parameter ``AuthMode``) decides where identity comes from:

* ``NONE`` (local and dev): nobody is authenticated and every check passes. The API trusts
  the ids in paths and bodies; never deploy a stage that real users reach with it (the template
  refuses ``Stage=prod`` with ``AuthMode=NONE``).
* ``COGNITO``: API Gateway's Cognito user-pool authorizer has verified the ID token and put its
  claims in ``requestContext.authorizer.claims`` (every value a string). The acting user is the
  ``sub`` claim; admins are members of the ``ADMIN_GROUP`` group (``cognito:groups``, matched by
  exact name: see [`parse_groups`][counters.http.auth.parse_groups]). A request
  without claims is refused with 401, even though API Gateway should never let one through.

Ownership rules (object-level authorization, checked before anything is written):

* likes: ``PUT/DELETE /posts/{postId}/likes/{userId}`` only as ``userId``; a post's ``authorId``
  is the caller;
* reservations: the caller owns what it reserves; only the owner (or an admin) reads or
  releases it, and idempotency keys are per caller;
* ledgers: a ledger belongs to the user whose id is the ledger id, or its part before the first
  ``.`` (``<sub>`` or ``<sub>.savings``), so ownership costs no read and cannot be raced; read
  by its owner or an admin, appended to by its owner only (admins included);
* orders: placed for the caller's own ``customerId``, idempotency keys per caller; read by that
  customer or an admin;
* deferred operations: read by whoever's request was deferred, or an admin;
* admin only: create a resource, compact a ledger, audit a post's tally.

A refusal is 403, except for another user's reservation, order or operation: their ids are
computable (or sequential), so they answer exactly as a missing one (404,
[`Caller.require_owner_or_hide`][counters.core.caller.Caller.require_owner_or_hide]); handlers still log every refusal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from counters.core.caller import Caller
from counters.core.errors import Unauthorized
from counters.core.records import dataclass
from counters.core.settings import Settings, SettingsError, env

ProxyEvent = Mapping[str, Any]
"""An API Gateway (REST, proxy) event as Powertools' resolver takes it (``Mapping[str, Any]`` in
its ``resolve``, which [`counters.http.resolver.TallyResolver`][counters.http.resolver.TallyResolver] overrides): its nested
fields are read with ``.get`` and checked where used (``isinstance``), as input from outside."""

NONE = "NONE"
COGNITO = "COGNITO"
MODES = (NONE, COGNITO)


def parse_groups(value: object) -> frozenset[str]:
    """``cognito:groups`` as exact group names; a name is never split into others.

    The ID token carries a JSON array, but API Gateway flattens every claim to a string:

    * REST API Cognito authorizer (this template): one group arrives as ``admin``; several
      arrive comma-joined, ``admin,ops``.
    * HTTP API JWT authorizer: ``[admin ops]`` (brackets, space-separated).

    Cognito group names match ``[\\p{L}\\p{M}\\p{S}\\p{N}\\p{P}]+``: they may contain ``,``
    ``[`` ``]`` but never whitespace. So the REST form is ambiguous: ``ops,admin`` is either two
    groups or one group named ``ops,admin``, and nothing in the claim tells which. Splitting on
    commas or brackets (as this parser once did) let whoever can name a group grant admin. Hence:

    * a list (a claim that was not flattened): exactly its string elements;
    * a string containing whitespace: only the bracketed HTTP API form ``[a b ...]``, split on
      whitespace - whitespace is never part of a name, so this cannot misread one group
      (``[a,b c]`` is ``a,b`` and ``c``); any other string with whitespace names no group;
    * any other string: **one** exact name, commas and brackets included (``ops,admin``,
      ``[admin]``). A single group ``[admin]`` and an HTTP API ``[admin]`` look alike, and the
      name wins: it fails closed.

    The price: on the REST API a member of several groups is seen as one group named by the
    comma-joined list, so an admin must be in the admin group only (or the function must
    read the groups from a source that keeps the array).
    """
    if isinstance(value, (list, tuple)):
        return frozenset(v for v in value if isinstance(v, str) and v)
    if not isinstance(value, str) or not value:
        return frozenset()
    if _WHITESPACE.search(value):
        if value.startswith("[") and value.endswith("]"):
            return frozenset(value[1:-1].split())
        return frozenset()
    return frozenset({value})


_WHITESPACE = re.compile(r"\s")


@dataclass(frozen=True, kw_only=True)
class AuthSettings(Settings):
    """Where identity comes from: ``AUTH_MODE`` (template parameter ``AuthMode``) and ``ADMIN_GROUP``."""

    auth_mode: str = env("AUTH_MODE", NONE)
    admin_group: str = env("ADMIN_GROUP", "admin")

    def __post_init__(self) -> None:
        if self.auth_mode.upper() not in MODES:
            raise SettingsError(f"AUTH_MODE must be one of {', '.join(MODES)}")
        object.__setattr__(self, "auth_mode", self.auth_mode.upper())


def caller_from_event(event: ProxyEvent, *, mode: str = NONE, admin_group: str = "admin") -> Caller:
    """The caller of one API Gateway (REST, proxy) request."""
    if mode == NONE:
        return Caller(admin_group=admin_group)
    authorizer = (event.get("requestContext") or {}).get("authorizer") or {}
    claims = authorizer.get("claims") or {}
    user_id = claims.get("sub")
    if not isinstance(user_id, str) or not user_id:
        raise Unauthorized()
    return Caller(user_id=user_id, groups=parse_groups(claims.get("cognito:groups")), admin_group=admin_group)
