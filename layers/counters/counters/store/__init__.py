"""The storage layer: one module per item family owns its keys, attribute names and requests.

[`counters.store.expr`][counters.store.expr] builds requests (placeholders made for you) and names the actions of a
transaction. The family modules turn returned and old items into typed facts; nothing above the
store builds a request dict, converts an item or reads a cancellation reason by position.
"""
