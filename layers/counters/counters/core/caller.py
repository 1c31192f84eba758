"""The verified caller of a request: who acts, and the ownership checks every service applies.

Where the identity comes from (API Gateway's Cognito claims, or nobody when ``AuthMode`` is
``NONE``) is [`counters.http.auth`][counters.http.auth]; the rules themselves are documented there.
"""

from __future__ import annotations

from typing import NamedTuple

from counters.core.errors import Forbidden, Hidden, NotFound


class Caller(NamedTuple):
    """The verified caller, or nobody when authorization is off."""

    user_id: str | None = None
    groups: frozenset[str] = frozenset()
    admin_group: str = "admin"

    @property
    def enforced(self) -> bool:
        """False when AuthMode is NONE: every check passes."""
        return self.user_id is not None

    @property
    def is_admin(self) -> bool:
        """In the admin group, or authorization is off."""
        return not self.enforced or self.admin_group in self.groups

    @property
    def owner(self) -> str | None:
        """The user id to record as an object's owner (None when authorization is off)."""
        return self.user_id

    @property
    def restricted_to(self) -> str | None:
        """The owner whose objects this caller may touch; None means any (auth off, or an admin)."""
        return None if self.is_admin else self.user_id

    def require_admin(self, what: str) -> None:
        """Refuse ([`Forbidden`][counters.core.errors.Forbidden], 403) a caller outside the admin group: ``what`` names the action."""
        if not self.is_admin:
            raise Forbidden(f"{what} needs the {self.admin_group!r} group")

    def require_self(self, user_id: str, what: str) -> None:
        """The caller acts as ``user_id``: only that user may - admins included, since a like,
        a post or an order made in someone else's name is never theirs to make."""
        if self.enforced and user_id != self.user_id:
            raise Forbidden(f"you may not {what} as another user")

    def require_owner(self, owner: str | None, what: str) -> None:
        """``owner`` is what the object records (None: made with authorization off, admin only)."""
        if self.restricted_to is not None and owner != self.restricted_to:
            raise Forbidden(f"you may not {what}: it belongs to another user")

    def require_owner_or_hide(self, owner: str | None, what: str, missing: NotFound) -> None:
        """[`require_owner`][counters.core.caller.Caller.require_owner] for an object whose id can be guessed or computed: refused as
        [`Hidden`][counters.core.errors.Hidden], i.e. exactly the ``missing`` answer (404), so the
        answer never tells that someone else's object exists."""
        try:
            self.require_owner(owner, what)
        except Forbidden as exc:
            raise Hidden(missing, exc.message) from None

    def require_ledger(self, ledger_id: str, what: str) -> None:
        """Read a ledger: its owner, or an admin."""
        self.require_owner(ledger_owner(ledger_id), what)

    def require_own_ledger(self, ledger_id: str, what: str) -> None:
        """Write to a ledger: an entry moves the owner's balance in their name, so only the owner
        may - admins included, as with [`require_self`][counters.core.caller.Caller.require_self]."""
        self.require_self(ledger_owner(ledger_id), what)


def ledger_owner(ledger_id: str) -> str:
    """A ledger belongs to the user whose id is the ledger id or its part before the first dot."""
    return ledger_id.split(".", 1)[0]
