"""The wire types of items: what botocore sends and returns, and an item as Python values.

The conversion between the two is the store's ([`counters.store.items`][counters.store.items]): only the store
converts items; everything above it sees typed facts.
"""

from __future__ import annotations

from typing import Any

AttributeValue = dict[str, Any]
"""One attribute value as botocore sends and returns it, e.g. ``{"S": "x"}`` or ``{"N": "1"}``
(``Any``: the payload's type depends on the key, ``str`` for ``S``, a list for ``L``...)."""
Item = dict[str, AttributeValue]
"""An item as botocore sends and returns it."""
Record = dict[str, Any]
"""An item as Python values ([`counters.store.items.from_item`][counters.store.items.from_item]): ``str``, ``int``, ``Decimal``, ``bool``, ``None``,
``bytes``, sets, lists and dicts of those. ``Any``, not that union: which type a field holds is the
table layout's ([`counters.store.layout`][counters.store.layout]), which the store's readers apply when they turn a
record into typed facts; the union would only move those checks, not make them."""
