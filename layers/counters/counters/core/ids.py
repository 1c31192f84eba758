"""Identifier rules shared by the API and the layer: ids become parts of keys (``POST#<id>``)
and path segments (``/posts/<id>``), so they never contain ``#``, stay short and URL-safe, and
never start with a dot, so no id is a dot segment (``.``, ``..``, ``...``: a client or a proxy
would resolve ``/posts/../likes/x`` to ``/likes/x``). One regular expression without
look-around, so pydantic's engine, Python's and a client's JSON Schema validator read it alike."""

import re

ID_PATTERN = r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$"  # RFC 3986 unreserved: never percent-encoded in a path
ID_RE = re.compile(ID_PATTERN)


def valid_id(value: object) -> bool:
    """``value`` is a string id the API accepts (``ID_RE``)."""
    return isinstance(value, str) and ID_RE.match(value) is not None
