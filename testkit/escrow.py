"""``EscrowFunction`` in process, one per Region of a local MREC table (tests and the proof).

Each Region's consumer reads **that Region's stream** with the local event source mapping
(:class:`devstack.streams.StreamPoller`) under the template's own subscription (filter, batch size,
``ReportBatchItemFailures``, retries), and runs the function's logic on each record
(:func:`counters.streams.escrow.act` with that Region's
:class:`~counters.services.escrow_automation.EscrowAutomation`), reporting a record that raised as
failed, as Powertools' ``BatchProcessor`` does in functions/escrow/app.py. Nobody calls a route:
transfers are credited and double takes given back because their items arrived in a replica.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from counters.services.escrow_automation import EscrowAutomation
from counters.services.reservations import Reservations
from counters.streams.escrow import act
from devstack.streams import StreamPoller, Subscription, subscriptions

FUNCTION = "EscrowFunction"


def subscription() -> Subscription:
    (found,) = [s for s in subscriptions() if s.function == FUNCTION]
    return found


class EscrowConsumers:
    """Every Region's ``EscrowFunction``; :meth:`poll` delivers what each Region's stream holds now.

    ``readers``: per Region, a DynamoDB client no fault touches (the poller's ``DescribeTable`` and
    the stream client made from it); ``services``: per Region, the service the function acts
    through (assign a new mapping to switch, e.g. per proof row: the pollers keep their place)."""

    def __init__(self, table_name: str, endpoint: str, readers: Mapping[str, Any], services: Mapping[str, Reservations]) -> None:
        self.services = dict(services)
        self.credited = 0  # units credited by arriving transfers
        self.reconciled = 0  # double takes given back
        self.failed = 0  # records reported failed (redelivered)
        self.errors: dict[str, int] = {}
        sub = subscription()
        self.pollers = {
            region: StreamPoller(table_name, endpoint, {FUNCTION: self._invoke(region)}, [sub], ddb=reader)
            for region, reader in readers.items()
        }

    def _invoke(self, region: str) -> Any:
        def invoke(event: dict[str, Any]) -> tuple[str, Any]:
            automation = EscrowAutomation(self.services[region])
            failures = []
            for record in event["Records"]:
                try:
                    done = act(automation, record)
                except Exception as exc:  # noqa: BLE001 - as BatchProcessor: this record is reported failed
                    self.failed += 1
                    self.errors[type(exc).__name__] = self.errors.get(type(exc).__name__, 0) + 1
                    failures.append({"itemIdentifier": record["dynamodb"]["SequenceNumber"]})
                    continue
                if done is not None:
                    self.credited += done.credited
                    self.reconciled += done.reconciled
            return "ok", {"batchItemFailures": failures}

        return invoke

    def poll(self) -> int:
        """Deliver every Region's stream records available now; returns how many were consumed."""
        return sum(poller.poll_once() for poller in self.pollers.values())
