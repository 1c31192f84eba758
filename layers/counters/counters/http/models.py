"""What the API functions' contracts are built from (pydantic): imported by each function's
``contract.py``, which the OpenAPI generator and the tests read, never by a function at run time.

``python -m testkit.openapi`` turns the contracts into docs/openapi.json and into
[`counters.http.schemas`][counters.http.schemas], which [`counters.http.validation`][counters.http.validation]
checks requests against without importing pydantic.
"""

from __future__ import annotations

from typing import Annotated

from counters.core.extras import needs_lambda_extra
from counters.core.ids import ID_PATTERN

try:  # first: it registers Powertools' event_handler without its __init__ (counters.http.powertools)
    from counters.http.powertools import EVENT_HANDLER  # noqa: F401
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

try:
    from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
    from pydantic import BaseModel, ConfigDict
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

__all__ = ["ID_PATTERN", "Body", "Header", "IdPath", "OperationIdPath", "Path", "Query"]

IdPath = Annotated[str, Path(pattern=ID_PATTERN, min_length=1, max_length=64)]
"""A path parameter holding an id (``ID_PATTERN``, 1 to 64 characters)."""
OperationIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")]
"""A path parameter holding an operation id (32 lowercase hex digits)."""


class Body(BaseModel):
    """Base of the response models: the documented fields are typed and required; a field a
    newer layer adds passes through (it never turns a good answer into a 500)."""

    model_config = ConfigDict(extra="allow")
