"""What the API functions' contracts are built from (pydantic): imported by each function's
``contract.py``, which the OpenAPI generator and the tests read, never by a function at run time.

A request is a pydantic model written in its contract (its limits are the API's, not the
service's). An answer is the service's own result type, which the contract only names
(``Resource = PublicResource``): [`answer`][counters.http.models.answer] derives its response model
from that `TypedDict` (its keys, which are required, its types, its key docstrings) when the OpenAPI
generator reads the routes, so the service's result, docs/openapi.json and the run-time check are
one shape; no contract writes an answer's fields a second time (a unit test refuses it).

``python -m testkit.openapi`` turns the contracts into docs/openapi.json and into
[`counters.http.schemas`][counters.http.schemas], which [`counters.http.validation`][counters.http.validation]
checks requests against without importing pydantic.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap
import types
import typing
from typing import Annotated, Any, ForwardRef, Literal, NotRequired, Union, get_args, get_origin

from counters.core.extras import needs_lambda_extra
from counters.core.ids import ID_PATTERN
from counters.core.records import dataclass

try:  # first: it registers Powertools' event_handler without its __init__ (counters.http.powertools)
    from counters.http.powertools import EVENT_HANDLER  # noqa: F401
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

try:
    from aws_lambda_powertools.event_handler.openapi.params import Header, Path, Query
    from pydantic import BaseModel, ConfigDict, Field, create_model
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

__all__ = ["ANSWERS", "ID_PATTERN", "Body", "Header", "IdPath", "OperationIdPath", "Path", "Query", "Read", "answer"]

IdPath = Annotated[str, Path(pattern=ID_PATTERN, min_length=1, max_length=64)]
"""A path parameter holding an id (``ID_PATTERN``, 1 to 64 characters)."""
OperationIdPath = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$")]
"""A path parameter holding an operation id (32 lowercase hex digits)."""


class Body(BaseModel):
    """Base of the response models: the documented fields are typed and required; a field a
    newer layer adds passes through (it never turns a good answer into a 500)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class Read:
    """A GET route's consistency, declared once in its contract (``READS``): docs/openapi.json's
    operation and [docs/consistency.md](../consistency.md) say it. ``strong``: when the answer reflects every write
    acknowledged before the request, and what makes it so; ``as_of``: when it is as of a
    watermark instead, which one, and how far behind it may be."""

    strong: str | None = None
    as_of: str | None = None

    def __post_init__(self) -> None:
        if self.strong is None and self.as_of is None:
            raise ValueError("a read is strong, or as of a watermark: say which")

    def text(self) -> str:
        """The statement, as the document and the page print it."""
        parts = [f"strong: {self.strong}." if self.strong else "", f"As of a watermark: {self.as_of}." if self.as_of else ""]
        return "Consistency: " + " ".join(p for p in parts if p)


ANSWERS: dict[type[BaseModel], type] = {}
"""Every response model [`answer`][counters.http.models.answer] made, and the service type it is made from."""
_JSON = {"JSONValue": Any, "JSONObject": dict[str, Any]}
"""The layer's recursive JSON aliases (counters.core.json), read as any JSON value and any JSON object."""
_CROSS_REFERENCE = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")


def _text(doc: str | None) -> str | None:
    """A docstring as plain text (``[name][path]`` cross-references read as ``name``)."""
    return None if not doc else _CROSS_REFERENCE.sub(r"\1", inspect.cleandoc(doc))


def _attribute_docs(shape: type) -> dict[str, str]:
    """The docstring under each key of a class-form `TypedDict` (``key: int`` then ``\"\"\"...\"\"\"``)."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(shape)))
    except (OSError, TypeError):  # the functional form: no source per key
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for node, after in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str):
                docs[node.target.id] = str(_text(after.value.value))
    return docs


def _field_type(hint: Any) -> Any:
    """A key's type with every `TypedDict` in it replaced by its response model (a JSON value left open: `Any`)."""
    if isinstance(hint, (str, ForwardRef)):
        return Any
    if typing.is_typeddict(hint):
        return answer(hint)
    origin, args = get_origin(hint), get_args(hint)
    if origin is None or origin is Literal:
        return hint
    converted = tuple(_field_type(a) for a in args)
    if origin in (Union, types.UnionType):
        return Union[converted]  # noqa: UP007 - built from a tuple
    return origin[converted]


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)  # a key the answer may leave out: absent, never filled in


def answer(shape: type) -> type[BaseModel]:
    """The response model of a service's result type ``shape`` (a `TypedDict`), named after it without
    ``Public`` (``PublicPost`` is ``Post``): its required keys required, the others optional and never
    filled in, each key's docstring its description, the type's docstring the model's. Nested
    `TypedDict`s become models the same way. A key the service adds that the type does not declare
    still passes at run time ([`Body`][counters.http.models.Body]); the tests refuse it."""
    made = next((model for model, source in ANSWERS.items() if source is shape), None)
    if made is not None:
        return made
    if not typing.is_typeddict(shape):
        raise TypeError(f"{shape!r} is not a TypedDict: an answer's shape is the service's result type")
    docs = _attribute_docs(shape)
    fields: dict[str, Any] = {}
    # NotRequired read from the hints, not __required_keys__ (which counts every string annotation as required)
    for key, hint in typing.get_type_hints(shape, localns=_JSON, include_extras=True).items():
        description = docs.get(key)
        if get_origin(hint) is not NotRequired:
            fields[key] = (_field_type(hint), Field(description=description))
        else:
            fields[key] = (_field_type(get_args(hint)[0]), Field(default=None, json_schema_extra=_no_default, description=description))
    model = create_model(shape.__name__.removeprefix("Public"), __base__=Body, __doc__=_text(shape.__doc__), **fields)
    ANSWERS[model] = shape
    return model
