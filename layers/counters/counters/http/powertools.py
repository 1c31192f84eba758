"""Powertools' REST resolver without what its package's ``__init__`` imports.

``aws_lambda_powertools/event_handler/__init__.py`` imports every resolver Powertools has: AppSync
(and with it asyncio, ssl, concurrent.futures), AppSync Events, Bedrock agents, VPC Lattice, the
HTTP resolver. An API function uses one, the REST resolver, yet importing any submodule runs that
``__init__`` first (about a tenth of ``import boto3``: [docs/bench.md, "Cold start"](../bench.md)).

[`light_package`][counters.runtime.light.light_package] registers the package without running its ``__init__``: its submodules
import as usual, and the first name asked of the package itself that is not a submodule
(``from aws_lambda_powertools.event_handler import AppSyncResolver``) runs the real ``__init__``
then, so every import that worked still works, only later. Import this module before anything
under ``aws_lambda_powertools.event_handler`` (the handlers take ``Response`` from here, the
contracts ``Header``, ``Query`` and ``Path`` from [`counters.http.models`][counters.http.models]:
they are pydantic fields); when the package is already imported it changes nothing.

``aws_lambda_powertools.utilities.data_classes`` is registered so too, by ``counters.runtime``
([`counters.runtime.light`][counters.runtime.light]; its names are re-exported here).
"""

from __future__ import annotations

from counters.core.extras import needs_lambda_extra
from counters.runtime.light import DATA_CLASSES, DATA_CLASSES_KNOWN, light_package

EVENT_HANDLER = "aws_lambda_powertools.event_handler"
"""The Powertools package registered without its ``__init__`` ([`light_package`][counters.runtime.light.light_package])."""
KNOWN = {
    name: "api_gateway"
    for name in ("ALBResolver", "APIGatewayHttpResolver", "ApiGatewayResolver", "APIGatewayRestResolver", "CORSConfig", "Response")
} | {"Depends": "depends", "DependencyResolutionError": "depends", "Request": "request"}
"""Names the package's ``__init__`` re-exports, with the submodule that defines each: asked of the
light package, they are taken from there (Powertools' own modules ask for ``Response`` so). A test
(tests/unit/test_handler_imports.py) checks each against the real ``__init__``."""

try:
    light_package(EVENT_HANDLER, KNOWN)
    from aws_lambda_powertools.event_handler import content_types
    from aws_lambda_powertools.event_handler.api_gateway import APIGatewayRestResolver, Response
except ModuleNotFoundError as missing:
    raise needs_lambda_extra(__name__, missing) from missing

__all__ = [
    "DATA_CLASSES",
    "DATA_CLASSES_KNOWN",
    "EVENT_HANDLER",
    "KNOWN",
    "APIGatewayRestResolver",
    "Response",
    "content_types",
    "light_package",
]
