"""bench/spread.py's own parts: the model with META at the service's rates, the step's time to
absorb, the "counted once" check. On moto with an injected clock (exact numbers); the bench
itself runs against DynamoDB Local and is not a test."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from bench.spread import Counted, LaneModel, Second, time_to_absorb
from tests.unit.test_limits import Clock, clock, ddb  # noqa: F401 (the fixtures)


def update(client: Any, pk: str, size: int, sk: str = "META") -> None:
    client.update_item(
        TableName="t",
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="SET payload = :b",
        ExpressionAttributeValues={":b": {"S": "x" * size}},
    )


def test_meta_keeps_the_services_rates_while_a_lane_is_scaled_and_only_the_lanes_throttles_count(
    ddb: Any,  # noqa: F811
    clock: Clock,  # noqa: F811
) -> None:
    limits = LaneModel(ddb, table="t", meta_pk="POST#p", scale=400, clock=clock)  # 2.5 WCU/s per key, 1 s of burst
    for _ in range(5):  # 5 x 4 KB on META: 20 WCU in one instant, far over a scaled key's 2.5
        update(ddb, "POST#p", 4000)
    assert limits.consumed()[limits.meta]["wcu"] == 20
    update(ddb, "POST#p#S0", 10)
    update(ddb, "POST#p#S0", 10)
    with pytest.raises(ClientError) as refused:  # the lane's bucket (2.5) is spent
        update(ddb, "POST#p#S0", 10)
    assert refused.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    key = {"PK": {"S": "POST#p#S1"}, "SK": {"S": "x"}}
    for _ in range(7):  # 7.5 RCU of burst, 1 RCU per consistent read: the 8th is throttled
        ddb.get_item(TableName="t", Key=key, ConsistentRead=True)
    with pytest.raises(ClientError):
        ddb.get_item(TableName="t", Key=key, ConsistentRead=True)
    for n in range(4):  # 245 WCU each (on items of META's key): the 980 left of its own 1,000 WCU of burst take four
        update(ddb, "POST#p", 250_000, f"big{n}")
    with pytest.raises(ClientError):
        update(ddb, "POST#p", 250_000, "big4")
    assert [meta for _, _, meta in limits.timeline] == [False, False, True]
    assert limits.like_throttles() == (1, 1)  # META's throttle is the aggregator's, not a like's
    assert limits.like_throttles(since=clock.now + 1) == (0, 0)


def second(at: int, liked: int, throttles: int, gave_up: int = 0) -> Second:
    return Second(at=at, offered=liked + gave_up, liked=liked, gave_up=gave_up, write_throttles=throttles, read_throttles=0, spread=8)


def test_time_to_absorb_is_the_end_of_the_last_second_over_the_bound_after_the_step() -> None:
    before = [second(0, 2, 5), second(1, 2, 0)]  # over the bound before the step: not the step's
    after = [second(2, 10, 30), second(3, 10, 2), second(4, 10, 0), second(5, 10, 0)]
    assert time_to_absorb(before + after, 2.0) == 2.0  # the step at 2 s, over until the end of second 3
    assert time_to_absorb([*before, second(2, 10, 0), second(3, 10, 0)], 2.0) == 0.0
    assert time_to_absorb([*before, *after, second(6, 10, 1)], 2.0) is None  # still over at the end: not absorbed
    assert time_to_absorb([*before, second(2, 0, 0, gave_up=3), second(3, 5, 0)], 2.0) == 0.0
    assert time_to_absorb([*before, second(2, 0, 4), second(3, 5, 0)], 2.0) == 1.0  # throttled with nothing answered
    tail = [second(at, 10, 0) for at in range(6, 8)]  # under from second 4 to 7: 4 s at the end
    assert time_to_absorb([*before, *after, *tail], 2.0, hold=4) == 2.0
    assert time_to_absorb([*before, *after, *tail], 2.0, hold=5) is None  # too short a tail to say it stays under


def test_counted_once_names_every_way_a_like_can_be_lost_or_counted_twice() -> None:
    users = {"a", "b", "c"}
    assert Counted(tally=3, items=3, liked=3, users=3, audit="3 = 3").exact(users, users) == "exact"
    assert "tally 4 != 3 liked items" in Counted(4, 3, 3, 3, "").exact(users, users)
    assert "1 users with two items" in Counted(3, 4, 3, 3, "").exact(users, users)
    assert "1 acknowledged likes missing" in Counted(2, 2, 2, 2, "").exact(users, {"a", "b"})
