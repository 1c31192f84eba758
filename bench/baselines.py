"""The throughput scenarios: for each operation, the layer's call and a minimal hand-written boto3
call making the same requests (same client settings; OCC: same reads, same backoff), with the
cost model's WCU per operation. Run by :func:`bench.harness.throughput`."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Scenario:
    name: str
    setup: Callable[[Any, str], Any]  # (plain client, table) -> state
    layer_op: Callable[[Any, str, int], Any]  # (state, table, i) -> Result or None
    baseline_op: Callable[[Any, str, int], dict[str, Any]]  # (plain client, table, i) -> response
    model_wcu: float  # cost-model WCU per operation on real DynamoDB
    model_note: str


def _likes_setup(ddb: Any, table: str) -> Any:
    from counters.services.likes import Likes

    likes = Likes(table)
    for post in ("layer", "base"):
        likes.posts.create_post(author_id="bench", body="bench", post_id=post)
    return likes


def _likes_layer(likes: Any, table: str, i: int) -> Any:
    return likes.toggling.like("layer", f"u{i}").result


def _likes_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    """The like the layer sends (counters.primitives.toggle): the user's state item switched on
    under the latest-request-wins condition, stamped, and the tally moved, in one transaction."""
    at, by = time.time_ns() // 1_000_000, uuid.uuid4().hex
    return ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": {"PK": {"S": "POST#base"}, "SK": {"S": f"LIKE#USER#u{i}"}},
                    "UpdateExpression": "SET #state = :true, #at = :at, #by = :by, #rid = :by, #u = :u, #t = :t REMOVE #exp",
                    "ConditionExpression": "attribute_not_exists(#sk) OR (#state = :false AND "
                    "(attribute_not_exists(#at) OR #at < :at OR (#at = :at AND #by < :by)))",
                    "ExpressionAttributeNames": {
                        "#state": "liked",
                        "#at": "changedAt",
                        "#by": "changedBy",
                        "#sk": "SK",
                        "#rid": "requestId",
                        "#exp": "expiresAt",
                        "#u": "userId",
                        "#t": "likedAt",
                    },
                    "ExpressionAttributeValues": {
                        ":true": {"BOOL": True},
                        ":false": {"BOOL": False},
                        ":at": {"N": str(at)},
                        ":by": {"S": by},
                        ":u": {"S": f"u{i}"},
                        ":t": {"N": str(at // 1000)},
                    },
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
            {
                "Update": {
                    "TableName": table,
                    "Key": {"PK": {"S": "POST#base"}, "SK": {"S": "META"}},
                    "UpdateExpression": "ADD #tally :delta",
                    "ConditionExpression": "attribute_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": "PK", "#tally": "likeTally"},
                    "ExpressionAttributeValues": {":delta": {"N": "1"}},
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ],
        ClientRequestToken=str(uuid.uuid4()),
        ReturnConsumedCapacity="TOTAL",
    )


def _resource_setup(strategy: str, shards: int = 1) -> Callable[[Any, str], Any]:
    def setup(ddb: Any, table: str) -> Any:
        from counters.core.failures import RetryPolicy
        from counters.primitives.approaches import create
        from counters.services.reservations import Reservations
        from counters.store.resources_counters import resource_key

        Reservations(table).create_resource("layer", capacity=10**9, strategy=strategy, shards=shards)
        Reservations(table).create_resource("base", capacity=10**9, strategy=strategy, shards=shards)
        if shards > 1:
            return Reservations(table, retry=RetryPolicy(max_attempts=8))
        return create(strategy, table, retry=RetryPolicy(max_attempts=8)), resource_key("layer")

    return setup


def _approach_layer(state: Any, table: str, i: int) -> Any:
    if not isinstance(state, tuple):  # sharded: the service picks and splits shards
        return state.reserve("layer", 1, f"t{i}").result
    approach, key = state
    return approach.apply(key, 1, token=f"tok-{i}")


_ADD = {
    "UpdateExpression": "ADD #reserved :d, #available :nd",
    "ConditionExpression": "attribute_exists(#pk) AND #available >= :q",
    "ExpressionAttributeNames": {"#pk": "PK", "#reserved": "reserved", "#available": "available"},
    "ExpressionAttributeValues": {":d": {"N": "1"}, ":nd": {"N": "-1"}, ":q": {"N": "1"}},
}


def _atomic_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    return ddb.update_item(TableName=table, Key={"PK": {"S": "RES#base"}, "SK": {"S": "META"}}, ReturnConsumedCapacity="TOTAL", **_ADD)


def _crt_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    update = {"TableName": table, "Key": {"PK": {"S": "RES#base"}, "SK": {"S": "META"}}, **_ADD}
    return ddb.transact_write_items(
        TransactItems=[{"Update": update}], ClientRequestToken=str(uuid.uuid4()), ReturnConsumedCapacity="TOTAL"
    )


def _marker_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    update = {"TableName": table, "Key": {"PK": {"S": "RES#base"}, "SK": {"S": "META"}}, **_ADD}
    marker = {
        "TableName": table,
        "Item": {
            "PK": {"S": f"RSV#b{i}"},
            "SK": {"S": "RSV"},
            "quantity": {"N": "1"},
            "status": {"S": "CONFIRMED"},
            "createdAt": {"N": "1"},
            "expiresAt": {"N": "2"},
        },
        "ConditionExpression": "attribute_not_exists(PK)",
    }
    return ddb.transact_write_items(TransactItems=[{"Update": update}, {"Put": marker}], ReturnConsumedCapacity="TOTAL")


_BASE_KEY = {"PK": {"S": "RES#base"}, "SK": {"S": "META"}}
OCC_ATTEMPTS = 8  # the layer's budget in this bench (RetryPolicy(max_attempts=8)); the baseline gets the same


def _occ_write(ddb: Any, table: str, update: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """Minimal hand-written OCC (seed 03) doing what the layer's loop does, request for request:
    read (consistent), write if unchanged since the read; on a lost race back off with full
    jitter (the layer's RetryPolicy defaults: 20 ms doubling, capped at 500 ms), read again
    and write again, within the same attempt budget. Both sides ask for ``ALL_OLD`` on a
    failed condition (the layer checks it for its own write) and ``ReturnConsumedCapacity``
    (the layer reports capacity on every call).
    ``update`` turns the item read into the conditional write's expressions."""
    item = ddb.get_item(TableName=table, Key=_BASE_KEY, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")["Item"]
    for attempt in range(1, OCC_ATTEMPTS + 1):
        counts = {":r": {"N": str(int(item["reserved"]["N"]) + 1)}, ":a": {"N": str(int(item["available"]["N"]) - 1)}}
        write = update(item)
        try:
            return ddb.update_item(
                TableName=table,
                Key=_BASE_KEY,
                UpdateExpression=write["UpdateExpression"],
                ConditionExpression=write["ConditionExpression"],
                ExpressionAttributeValues={**counts, **write["ExpressionAttributeValues"]},
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
                ReturnConsumedCapacity="TOTAL",
            )
        except ddb.exceptions.ConditionalCheckFailedException:
            if attempt < OCC_ATTEMPTS:
                time.sleep(random.uniform(0, min(0.5, 0.02 * 2 ** (attempt - 1))))
                item = ddb.get_item(TableName=table, Key=_BASE_KEY, ConsistentRead=True, ReturnConsumedCapacity="TOTAL")["Item"]
    return {}  # out of attempts, like the layer's contention


def _occ_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    """The entity tag: unchanged since the read, replaced by a new one."""
    return _occ_write(
        ddb,
        table,
        lambda item: {
            "UpdateExpression": "SET reserved = :r, available = :a, tag = :new",
            "ConditionExpression": "tag = :old",
            "ExpressionAttributeValues": {":old": item["tag"], ":new": {"S": uuid.uuid4().hex}},
        },
    )


def _occ_history_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    """A version, plus the seed's bounded chain of the last 32 writers' tags on the item."""
    return _occ_write(
        ddb,
        table,
        lambda item: {
            "UpdateExpression": "SET reserved = :r, available = :a, version = :next, tags = :chain",
            "ConditionExpression": "version = :v",
            "ExpressionAttributeValues": {
                ":v": item["version"],
                ":next": {"N": str(int(item["version"]["N"]) + 1)},
                ":chain": {"L": [*item["tags"]["L"], {"S": f"b{i}"}][-32:]},
            },
        },
    )


def _ledger_setup(ddb: Any, table: str) -> Any:
    from counters.core.failures import RetryPolicy
    from counters.primitives.ledger import Ledger

    return Ledger(table, retry=RetryPolicy(max_attempts=8))


def _ledger_layer(ledger: Any, table: str, i: int) -> Any:
    from counters.primitives.ledger import new_key

    return ledger.append("layer", 1, new_key())


def _ledger_baseline(ddb: Any, table: str, i: int) -> dict[str, Any]:
    return ddb.put_item(
        TableName=table,
        Item={"PK": {"S": "LEDGER#base"}, "SK": {"S": f"ENTRY#{i:013d}-{uuid.uuid4().hex}"}, "amount": {"N": "1"}},
        ConditionExpression="attribute_not_exists(PK)",
        ReturnConsumedCapacity="TOTAL",
    )


SCENARIOS = [
    Scenario("like (refcount link)", _likes_setup, _likes_layer, _likes_baseline, 4.0, "2 items x 2 WCU (transactional)"),
    Scenario("reserve: atomic", _resource_setup("atomic"), _approach_layer, _atomic_baseline, 1.0, "1 UpdateItem"),
    Scenario("reserve: crt", _resource_setup("crt"), _approach_layer, _crt_baseline, 2.0, "1 item x 2 WCU (transactional)"),
    Scenario("reserve: marker", _resource_setup("marker"), _approach_layer, _marker_baseline, 4.0, "2 items x 2 WCU (transactional)"),
    Scenario(
        "reserve: occ (one hot item)",
        _resource_setup("occ"),
        _approach_layer,
        _occ_baseline,
        1.0,
        "1 GetItem + 1 UpdateItem per attempt",
    ),
    Scenario(
        "reserve: occ_history (one hot item)",
        _resource_setup("occ_history"),
        _approach_layer,
        _occ_history_baseline,
        1.0,
        "1 GetItem + 1 UpdateItem per attempt (item ~1 KB with 32 tags)",
    ),
    Scenario("ledger append", _ledger_setup, _ledger_layer, _ledger_baseline, 1.0, "1 PutItem (+1 dirty marker per ledger per 5 min)"),
]
