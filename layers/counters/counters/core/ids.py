"""Identifier rules shared by the API and the layer: ids become parts of keys (``POST#<id>``),
so they never contain ``#``, stay short and URL-safe."""

import re

ID_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"  # RFC 3986 unreserved: never percent-encoded in a path
ID_RE = re.compile(ID_PATTERN)


def valid_id(value: object) -> bool:
    return isinstance(value, str) and ID_RE.match(value) is not None
