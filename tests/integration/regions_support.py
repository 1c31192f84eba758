"""Two or three Regions on one DynamoDB Local for the reservations' global-table tests.

DynamoDB Local started without ``-sharedDb`` keeps a separate database per client ``region_name``,
so a Region is a client with its own ``region_name``. Until the emulator (testkit/regions.py) is on
this branch, replication here is explicit: :meth:`Regions.replicate` copies every item of one
Region's table that differs into another, whole item (MREC's last-writer-wins with the source as
the later writer). Tests call it where replication would deliver, so a schedule is deterministic.
MRSC is one strongly consistent store seen from three Regions: :func:`mrsc_client` refuses the
transaction APIs as the service does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
from botocore.exceptions import ClientError

from counters.core.client import CLIENT_CONFIG, botocore_session, guard
from counters.core.failures import RetryPolicy
from counters.core.regions import REGION_ATTRIBUTE, GlobalTableMode, Topology
from counters.services.reservations import Reservations
from counters.store.items import from_item
from devstack.dynamodb_local import create_table
from devstack.template import read_stack

A, B, C = "eu-west-1", "us-east-1", "us-west-2"
FAST = RetryPolicy(max_attempts=6, base_delay=0.001, max_delay=0.005)


def layer_client(endpoint: str, region: str) -> Any:
    """A client like the layer's (SDK retries off, the engine guard on) in ``region``."""
    made = botocore_session().create_client("dynamodb", region_name=region, endpoint_url=endpoint, config=CLIENT_CONFIG)
    guard(made.meta.events, "dynamodb")
    return made


def plain_client(endpoint: str, region: str) -> Any:
    """A plain client in ``region`` for arranging and asserting (never fault-injected)."""
    return boto3.client("dynamodb", region_name=region, endpoint_url=endpoint)


def refuse_transactions(client: Any) -> Any:
    """MRSC: TransactWriteItems/TransactGetItems are refused (as the service refuses them)."""

    def refuse(**_: object) -> None:
        raise ClientError({"Error": {"Code": "ValidationException", "Message": "MRSC tables do not support transactions"}}, "Transact")

    for operation in ("TransactWriteItems", "TransactGetItems"):
        client.meta.events.register_first(f"before-call.dynamodb.{operation}", refuse, unique_id=f"mrsc-{operation}")
    return client


class Regions:
    """One table in each Region; services per Region; explicit replication."""

    def __init__(self, endpoint: str, table: str, regions: tuple[str, ...] = (A, B), mode: GlobalTableMode = GlobalTableMode.MREC):
        self.endpoint, self.table, self.regions, self.mode = endpoint, table, regions, mode
        self.plain = {r: plain_client(endpoint, r) for r in regions}
        if mode is GlobalTableMode.MRSC:  # one strongly consistent store: the first Region's database
            shared = refuse_transactions(layer_client(endpoint, regions[0]))
            self.clients = dict.fromkeys(regions, shared)
            create_table(self.plain[regions[0]], read_stack(table))
        else:
            self.clients = {r: layer_client(endpoint, r) for r in regions}
            for r in regions:
                create_table(self.plain[r], read_stack(table))

    def topology(self, region: str) -> Topology:
        return Topology(self.mode, region, tuple(sorted(self.regions)))

    def service(self, region: str, *, topology: Topology | None = None, **options: Any) -> Reservations:
        return Reservations(self.table, dynamodb=self.clients[region], retry=FAST, topology=topology or self.topology(region), **options)

    def items(self, region: str) -> dict[tuple[str, str], dict[str, Any]]:
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for item in self._scan(region):
            found[(str(item["PK"]), str(item["SK"]))] = item
        return found

    def _scan(self, region: str) -> Iterator[dict[str, Any]]:
        paginator = self.plain[region].get_paginator("scan")
        for page in paginator.paginate(TableName=self.table, ConsistentRead=True):
            for raw in page["Items"]:
                yield from_item(raw) or {}

    def raw(self, region: str) -> list[dict[str, Any]]:
        items = []
        for page in self.plain[region].get_paginator("scan").paginate(TableName=self.table, ConsistentRead=True):
            items.extend(page["Items"])
        return items

    def replicate(self, source: str, target: str, *, where: str = "") -> int:
        """Deliver every item of ``source`` whose PK starts with ``where`` into ``target`` (whole
        item). An item naming its writing Region (``writerRegion``) is delivered from that Region
        only, or where the target has no version yet: its later versions are that Region's, so they
        are the last writer's (a share item created by another Region, then updated by its own, is
        never reverted). An item without one
        (the old path's META) is delivered as the source's version: the later writer. Returns how
        many items changed."""
        there = {(i["PK"]["S"], i["SK"]["S"]): i for i in self.raw(target)}
        changed = 0
        for item in self.raw(source):
            key = (item["PK"]["S"], item["SK"]["S"])
            writer = item.get(REGION_ATTRIBUTE, {}).get("S", source)
            if key[0].startswith(where) and (writer == source or key not in there) and there.get(key) != item:
                self.plain[target].put_item(TableName=self.table, Item=item)
                changed += 1
        return changed

    def settle(self) -> None:
        """Every Region's writes delivered everywhere (each item has one writer here, so order is moot)."""
        for source in self.regions:
            for target in self.regions:
                if source != target:
                    self.replicate(source, target)

    def drop(self) -> None:
        for r in self.regions if self.mode is GlobalTableMode.MREC else self.regions[:1]:
            self.plain[r].delete_table(TableName=self.table)
