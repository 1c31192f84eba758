"""The likers cursor: signed, it names only what a listing showed ([docs/likes.md](../likes.md#the-likers-cursor))."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json

from counters.core.errors import InvalidCursor
from counters.core.ids import valid_id

CURSOR_LABEL = b"tally likers cursor v1"  # what the cursor key is derived for (CURSOR_SECRET signs nothing else)


def cursor_key(secret: str, table_name: str) -> bytes:
    """The key likers cursors are signed with: derived from ``CURSOR_SECRET`` ([`LikeSettings`][counters.services.likes.model.LikeSettings]),
    or, when it is unset (tests, the local stack), from the table name (forgeable by whoever
    knows it: local use only; the template always sets the secret)."""
    return hmac.new((secret or f"local:{table_name}").encode(), CURSOR_LABEL, hashlib.sha256).digest()


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_tag(key: bytes, post_id: str, payload: bytes) -> bytes:
    return hmac.new(key, post_id.encode() + b"\n" + payload, hashlib.sha256).digest()[:16]


def encode_cursor(key: bytes, post_id: str, lane: int, after: str | None) -> str:
    """A likers cursor: ``[lane, the last liker listed in it or null]`` and an HMAC-SHA256 tag
    (128 bits) over the post id and that payload. It names nothing the listing did not show."""
    payload = json.dumps([lane, after], separators=(",", ":")).encode()
    return f"{_b64(payload)}.{_b64(_cursor_tag(key, post_id, payload))}"


def decode_cursor(key: bytes, post_id: str, cursor: str, lanes: int) -> tuple[int, str | None]:
    """(lane index, the user to resume after or ``None``) of a cursor this deployment issued for
    this post's likers; anything else (forged, tampered, another post's) is [`InvalidCursor`][counters.core.errors.InvalidCursor],
    with the same message whatever failed."""
    try:
        body, dot, tag = cursor.partition(".")
        payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        given = base64.urlsafe_b64decode(tag + "=" * (-len(tag) % 4))
    except (binascii.Error, ValueError) as exc:
        raise InvalidCursor() from exc
    if _b64(payload) != body or _b64(given) != tag:  # decoding ignores spare bits and stray characters: one spelling only
        raise InvalidCursor()
    if not dot or not hmac.compare_digest(given, _cursor_tag(key, post_id, payload)):
        raise InvalidCursor()
    try:
        lane, after = json.loads(payload)
    except (ValueError, TypeError) as exc:
        raise InvalidCursor() from exc
    if type(lane) is not int or not 0 <= lane < lanes or not (after is None or (isinstance(after, str) and valid_id(after))):
        raise InvalidCursor()
    return lane, after
