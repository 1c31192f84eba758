"""The limit model (testkit/limits.py) on DynamoDB Local: two transactions on one item at once."""

from __future__ import annotations

import threading
from typing import Any

from counters.core.failures import RetryPolicy
from counters.core.outcome import Outcome
from testkit.limits import LimitModel


def test_two_concurrent_transactions_on_one_item_one_conflicts(dynamodb_endpoint: str, table: str, layer_client: Any) -> None:
    """Two likes of one post sent at once through the layer (no retry): one commits, the other
    is cancelled with TransactionConflict; the tally counts one."""
    from counters.services.likes import Likes

    likes = Likes(table, retry=RetryPolicy(max_attempts=1))
    likes.posts.create_post(author_id="a", body="b", post_id="hot")
    limits = LimitModel(layer_client, scale=1, transaction_ms=300)  # a 300 ms transaction: the two overlap
    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def one(user: str) -> None:
        barrier.wait()
        try:
            results[user] = likes.toggling.like("hot", user).result.outcome
        except Exception as exc:  # ContentionError: the budget (1 attempt) ran out
            results[user] = type(exc).__name__

    threads = [threading.Thread(target=one, args=(u,)) for u in ("u1", "u2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    limits.detach()
    assert sorted(map(str, results.values())) == sorted([str(Outcome.APPLIED), "ContentionError"])
    assert limits.conflicts == {"TransactWriteItems": 1}
    assert limits.throttles == {}
    # the winner's 2 items x 2 WCU, and the loser's: a conflicting call was admitted and charged;
    # on META's key 2 + 2, the like items' 2 + 2 on their spread keys
    consumed = limits.consumed()
    assert consumed[limits.partition(table, {"S": "POST#hot"})]["wcu"] == 4
    assert sum(c["wcu"] for c in consumed.values()) == 8
    assert likes.audits.audit("hot").stored == 1


def test_a_batch_get_reads_what_has_capacity_and_returns_the_rest_unprocessed(table: str, ddb: Any) -> None:
    """BatchGetItem as the service answers it: the keys of partitions with capacity are read, the
    others come back in ``UnprocessedKeys``; only a call that can read nothing is throttled."""
    from botocore.exceptions import ClientError

    for n in range(4):
        ddb.put_item(TableName=table, Item={"PK": {"S": "HOT"}, "SK": {"S": f"k{n}"}})
        ddb.put_item(TableName=table, Item={"PK": {"S": f"COLD{n}"}, "SK": {"S": "k"}})
    now = [0.0]
    limits = LimitModel(ddb, scale=1000, clock=lambda: now[0])  # 3 RCU/s a key, 1 s of burst: 3 consistent reads
    try:
        hot = [{"PK": {"S": "HOT"}, "SK": {"S": f"k{n}"}} for n in range(4)]  # 4 RCU on one key: more than it has
        cold = [{"PK": {"S": f"COLD{n}"}, "SK": {"S": "k"}} for n in range(2)]
        answer = ddb.batch_get_item(RequestItems={table: {"Keys": hot + cold, "ConsistentRead": True}})
        assert sorted(i["PK"]["S"] for i in answer["Responses"][table]) == ["COLD0", "COLD1"]
        assert answer["UnprocessedKeys"][table]["Keys"] == hot and answer["UnprocessedKeys"][table]["ConsistentRead"] is True
        assert limits.partial == {"BatchGetItem": 1} and limits.throttles == {}
        try:
            ddb.batch_get_item(RequestItems={table: {"Keys": hot, "ConsistentRead": True}})
            raise AssertionError("a batch that can read nothing is throttled")
        except ClientError as exc:
            assert exc.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
        assert limits.throttles == {"BatchGetItem": 1}
    finally:
        limits.detach()
