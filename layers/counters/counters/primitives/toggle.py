"""A counted toggle whose latest request wins: one on/off state item per key, a tally on a parent.

Seed 01's like, ordered. Each key (a user's like of a post) has one **state item** that is kept
after it is switched off (a *tombstone*), so it always says what the last request did:

| attribute | meaning |
|---|---|
| ``<state>`` (e.g. ``liked``) | on/off; an item without it is *on* (written before tombstones existed) |
| ``changedAt``, ``changedBy`` | the :class:`Stamp` (request time in ms, request id) of the latest request ordered on this key |
| ``requestId`` | the request that made the current state (a flip): "was it this request?" for a replay |
| ``expiresAt`` | tombstones only: TTL, ``changedAt`` + the horizon + a day |

A request carries its :class:`Stamp`; stamps order requests totally (time, then id). ``set``:

* **flip** (the stored state differs and its stamp is older): one TransactWriteItems, the state
  item (new or flipped, stamped, ``requestId``) and ``ADD tally ±1`` on the parent: ``applied``;
* **same state**: nothing to count; a newer stamp is still recorded (a stamp-only write), so an
  older request of the other kind arriving later is stale: ``rejected`` / ``already_set``, or
  ``duplicate`` / ``own_request`` when the state is this request's own flip (a lost answer);
* **stale** (the state differs and the stored stamp is newer): nothing is written:
  ``rejected`` / ``stale`` (``value`` is the stored item). So a request deferred under contention
  and replayed after a later request of the other kind never undoes it: the latest request wins.
* switching off a key with no item writes a tombstone (with a ConditionCheck on the parent), so
  an older switch-on replayed later finds it.

A request older than ``horizon`` (default 14 days) is ``rejected`` / ``stale`` without a read:
tombstones expire ``horizon`` + 1 day after their stamp, so only a request inside the horizon is
sure to find every newer stamp. The horizon must outlast any replay that can still arrive (the
retry queue's messages; a DLQ redrive makes them new messages, so the horizon, not the queues'
retention, is what bounds them). The ordering rule lives in :func:`newer_than` so a mode that
counts elsewhere (a stream aggregator) can write the same state item under the same condition.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from counters.core.client import client
from counters.core.engine import run, transact
from counters.core.failures import RetryPolicy
from counters.core.items import from_item, to_item
from counters.core.outcome import Capacity, Outcome, Result

HORIZON_MS = 14 * 24 * 3600 * 1000  # RetryDLQ's retention: the longest a message waits without a redrive
TOMBSTONE_MARGIN_S = 24 * 3600  # clock skew between whoever stamped and whoever replays, with room to spare
ROUNDS = 4  # state re-read and re-decided this often when concurrent requests move it, then contention

# The attribute names of a state item (the state attribute itself is the caller's).
CHANGED_AT, CHANGED_BY, REQUEST_ID, EXPIRES_AT = "changedAt", "changedBy", "requestId", "expiresAt"

# Condition fragments. #state, #at, #by, #sk and :at, :by, :true, :false are bound by _names/_values.
STORED_IS_OLDER = "(attribute_not_exists(#at) OR #at < :at OR (#at = :at AND #by < :by))"
"""The stored stamp is older than this request's: the staleness guard (:func:`newer_than`)."""
IS_ON = "(attribute_not_exists(#state) OR #state = :true)"  # the item exists: no state attribute = a pre-tombstone like
IS_OFF = "#state = :false"
PARENT_EXISTS = "attribute_exists(#pk)"
PARENT_EXISTS_AND_POSITIVE = "attribute_exists(#pk) AND #tally >= :one"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class Guard:
    """A condition the caller adds to the parent's half of a flip (e.g. "the post is still in
    standard mode"), with the same rule in Python to tell a refusal by it from the others."""

    expression: str
    names: dict[str, str]
    values: dict[str, Any]  # plain values (converted when the request is built)
    holds: Callable[[dict[str, Any]], bool]


@dataclass(frozen=True, order=True)
class Stamp:
    """When a request arrived (ms) and its id: compared as (at, by), a total order. Ids from
    :func:`counters.core.commands.new_request_id` begin with the function's receive time, so
    requests in the same millisecond are ordered as the function received them."""

    at: int
    by: str

    @classmethod
    def of(cls, item: dict[str, Any] | None) -> Stamp | None:
        """The stamp stored on a state item (``None``: never stamped)."""
        if not item or CHANGED_AT not in item:
            return None
        return cls(int(item[CHANGED_AT]), str(item.get(CHANGED_BY, "")))


def newer_than(stamp: Stamp, stored: Stamp | None) -> bool:
    """The rule :data:`STORED_IS_OLDER` evaluates in DynamoDB, in Python."""
    return stored is None or stamp > stored


def is_on(item: dict[str, Any], state: str) -> bool:
    return item.get(state, True) is not False


def pruned(action: dict[str, Any]) -> dict[str, Any]:
    """``action`` without the placeholders its expressions do not use (DynamoDB refuses unused ones)."""
    used = set(re.findall(r"[:#][A-Za-z0-9_]+", " ".join(str(action.get(k, "")) for k in ("UpdateExpression", "ConditionExpression"))))
    for field in ("ExpressionAttributeNames", "ExpressionAttributeValues"):
        if field in action:
            action[field] = {k: v for k, v in action[field].items() if k in used}
    return action


class Toggle:
    """On/off per key, counted on a parent's tally, ordered by request stamps (latest wins)."""

    def __init__(
        self,
        table_name: str,
        *,
        tally_attribute: str,
        state_attribute: str,
        pk: str = "PK",
        sk: str = "SK",
        horizon_ms: int = HORIZON_MS,
        revision_attribute: str | None = None,
        dynamodb: Any = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        """``revision_attribute``: a number on the parent that every flip also moves by one, so a
        repair can be conditioned on "nothing was counted since I read" (a tally's own value can
        come back to what was read: a like and an unlike)."""
        self.table_name = table_name
        self.tally, self.state = tally_attribute, state_attribute
        self.revision = revision_attribute
        self.pk, self.sk = pk, sk
        self.horizon_ms = horizon_ms
        self._dynamodb = dynamodb
        self.retry = retry or RetryPolicy()

    @property
    def dynamodb(self) -> Any:
        return self._dynamodb or client()

    # ------------------------------------------------------------------------ conditions
    def counted(self) -> tuple[str, dict[str, str], dict[str, Any]]:
        """(FilterExpression, names, values) keeping only the items that count: state on."""
        return IS_ON, {"#state": self.state}, {":true": {"BOOL": True}}

    def expires_at(self, stamp: Stamp) -> int:
        """A tombstone's TTL (epoch seconds): it outlives every request older than its stamp."""
        return (stamp.at + self.horizon_ms) // 1000 + TOMBSTONE_MARGIN_S

    def _names(self, *extra: str) -> dict[str, str]:
        names = {"#state": self.state, "#at": CHANGED_AT, "#by": CHANGED_BY, "#sk": self.sk}
        return {**names, **{f"#{k}": k for k in extra}}

    def _values(self, stamp: Stamp, **extra: Any) -> dict[str, Any]:
        return to_item({":at": stamp.at, ":by": stamp.by, ":true": True, ":false": False, **{f":{k}": v for k, v in extra.items()}})

    def _set_clause(self, attributes: dict[str, Any]) -> tuple[str, dict[str, str], dict[str, Any]]:
        names = {f"#a{i}": k for i, k in enumerate(attributes)}
        values = to_item({f":a{i}": v for i, v in enumerate(attributes.values())})
        return "".join(f", #a{i} = :a{i}" for i in range(len(attributes))), names, values

    # ------------------------------------------------------------------------ the writes
    def _flip(
        self, parent: dict[str, Any], key: dict[str, Any], on: bool, stamp: Stamp, attributes: dict[str, Any], guard: Guard | None = None
    ) -> list[dict[str, Any]]:
        """The state item flipped (stamped, ``requestId``) and the tally moved, as one transaction."""
        condition = PARENT_EXISTS if on else PARENT_EXISTS_AND_POSITIVE
        names = {"#pk": self.pk, "#tally": self.tally}
        values: dict[str, Any] = {":delta": 1 if on else -1, **({} if on else {":one": 1})}
        update = "ADD #tally :delta"
        if self.revision:
            update += ", #rev :rev"
            names["#rev"], values[":rev"] = self.revision, 1
        if guard is not None:
            condition = f"{condition} AND {guard.expression}"
            names.update(guard.names)
            values.update(guard.values)
        return [
            {"Update": self._flip_state(key, on, stamp, attributes)},
            {
                "Update": {
                    "TableName": self.table_name,
                    "Key": to_item(parent),
                    "UpdateExpression": update,
                    "ConditionExpression": condition,
                    "ExpressionAttributeNames": names,
                    "ExpressionAttributeValues": to_item(values),
                    # The loser learns why: no item = parent missing, item = tally at 0 or the guard.
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                }
            },
        ]

    def _flip_state(self, key: dict[str, Any], on: bool, stamp: Stamp, attributes: dict[str, Any]) -> dict[str, Any]:
        """The state item's half of a flip: an Update, usable in a transaction or alone (UpdateItem)."""
        extra, extra_names, extra_values = self._set_clause(attributes)
        names = {**self._names(REQUEST_ID, EXPIRES_AT), **extra_names}
        if on:
            update = f"SET #state = :true, #at = :at, #by = :by, #{REQUEST_ID} = :by{extra} REMOVE #{EXPIRES_AT}"
            condition = f"attribute_not_exists(#sk) OR ({IS_OFF} AND {STORED_IS_OLDER})"
            values = {**self._values(stamp), **extra_values}
        else:
            update = f"SET #state = :false, #at = :at, #by = :by, #{REQUEST_ID} = :by, #{EXPIRES_AT} = :ttl{extra}"
            condition = f"attribute_exists(#sk) AND {IS_ON} AND {STORED_IS_OLDER}"
            values = {**self._values(stamp, ttl=self.expires_at(stamp)), **extra_values}
        return pruned(
            {
                "TableName": self.table_name,
                "Key": to_item(key),
                "UpdateExpression": update,
                "ConditionExpression": condition,
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",  # the state that stopped it
            }
        )

    def _restamp(self, key: dict[str, Any], on: bool, stamp: Stamp, attributes: dict[str, Any] | None = None) -> dict[str, Any]:
        """UpdateItem: record a newer stamp on an item already in the requested state (no count);
        ``attributes`` are set with it (the hot mode's ``delta = 0``)."""
        extra, extra_names, extra_values = self._set_clause(attributes or {})
        return pruned(
            {
                "TableName": self.table_name,
                "Key": to_item(key),
                "UpdateExpression": "SET #at = :at, #by = :by" + ("" if on else f", #{EXPIRES_AT} = :ttl") + extra,
                "ConditionExpression": f"attribute_exists(#sk) AND {IS_ON if on else IS_OFF} AND {STORED_IS_OLDER}",
                "ExpressionAttributeNames": {**self._names(EXPIRES_AT), **extra_names},
                "ExpressionAttributeValues": {**self._values(stamp, ttl=self.expires_at(stamp)), **extra_values},
                "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            }
        )

    def _tombstone(self, parent: dict[str, Any], key: dict[str, Any], stamp: Stamp, attributes: dict[str, Any]) -> list[dict[str, Any]]:
        """A tombstone where no item is (switching off what was never on), if the parent exists."""
        return [
            {"Put": self._tombstone_put(key, stamp, attributes)},
            {
                "ConditionCheck": {
                    "TableName": self.table_name,
                    "Key": to_item(parent),
                    "ConditionExpression": PARENT_EXISTS,
                    "ExpressionAttributeNames": {"#pk": self.pk},
                }
            },
        ]

    def _tombstone_put(self, key: dict[str, Any], stamp: Stamp, attributes: dict[str, Any]) -> dict[str, Any]:
        item = {**key, **attributes, self.state: False, CHANGED_AT: stamp.at, CHANGED_BY: stamp.by, EXPIRES_AT: self.expires_at(stamp)}
        return {
            "TableName": self.table_name,
            "Item": to_item(item),
            "ConditionExpression": "attribute_not_exists(#sk)",
            "ExpressionAttributeNames": {"#sk": self.sk},
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }

    # ------------------------------------------------------------------------ set
    def set(
        self,
        parent: dict[str, Any],
        key: dict[str, Any],
        on: bool,
        stamp: Stamp,
        *,
        attributes: dict[str, Any] | None = None,
        every_write: dict[str, Any] | None = None,
        guard: Guard | None = None,
    ) -> Result:
        """Switch ``key`` on or off as the request ``stamp``; ``attributes`` are written with a
        flip or a new tombstone (e.g. ``userId``, ``likedAt``), ``every_write`` with every write,
        a stamp-only one too (e.g. ``delta = 0``: this write is counted here, not from a stream);
        ``guard`` is added to the parent's condition in a flip.

        Outcomes: ``applied`` (flipped, tally moved); ``duplicate`` / ``own_request`` (the state is
        this request's own flip); ``rejected`` with ``already_set`` (the state is already
        ``on``; a newer stamp was recorded), ``stale`` (a newer request set the other state, or
        the request is older than the horizon; ``value`` is the stored item), ``parent_missing``,
        ``guard`` (the parent fails ``guard``; ``value`` is the parent), ``tally_would_go_negative``
        (integrity: on, but the tally is 0; ``value`` is the parent); ``contention``.
        """
        return self._set(parent, key, on, stamp, attributes or {}, None, every_write or {}, guard)

    def set_alone(
        self, key: dict[str, Any], on: bool, stamp: Stamp, *, attributes: dict[str, Any] | None = None, delta_attribute: str = "delta"
    ) -> Result:
        """:meth:`set` without the tally: the state item is written alone, one conditional write
        under the same rule (the latest request wins), and every write records on it
        ``delta_attribute``, what it changed the count by: ``+1`` / ``-1`` for a flip, ``0`` for
        a stamp-only write or a new tombstone. A reader of the table's stream (NEW_IMAGE) sums
        the deltas to keep the tally elsewhere (:mod:`counters.primitives.aggregator`).

        The parent is not checked (the caller does it: the hot mode reads the post first).
        Outcomes as :meth:`set`, without ``parent_missing`` and ``tally_would_go_negative``.
        """
        return self._set(None, key, on, stamp, attributes or {}, delta_attribute, {}, None)

    def _set(
        self,
        parent: dict[str, Any] | None,
        key: dict[str, Any],
        on: bool,
        stamp: Stamp,
        attributes: dict[str, Any],
        delta: str | None,
        every: dict[str, Any],
        guard: Guard | None,
    ) -> Result:
        """``delta`` None: a transaction with the parent's tally; a name: the state item alone."""
        capacity, attempts, contended = Capacity(), 0, 0

        def done(outcome: Outcome, reason: str | None = None, value: Any = None) -> Result:
            return Result(outcome, reason=reason, capacity=capacity, attempts=attempts, contended_retries=contended, value=value)

        if stamp.at < now_ms() - self.horizon_ms:
            return done(Outcome.REJECTED, "stale")  # its tombstones may be gone: it cannot be ordered
        write: str | None = "flip"
        for _ in range(ROUNDS):
            stored: dict[str, Any] | None = None
            if delta is not None:  # alone: one conditional write that says what it counted
                if write == "flip":
                    params = self._flip_state(key, on, stamp, {**attributes, delta: 1 if on else -1})
                    report = run(self.dynamodb.update_item, params, policy=self.retry, capacity=capacity, write=True)
                elif write == "tombstone":
                    params = self._tombstone_put(key, stamp, {**attributes, delta: 0})
                    report = run(self.dynamodb.put_item, params, policy=self.retry, capacity=capacity, write=True)
                else:
                    params = self._restamp(key, on, stamp, {delta: 0})
                    report = run(self.dynamodb.update_item, params, policy=self.retry, capacity=capacity, write=True)
            elif write == "flip":
                actions = self._flip(parent, key, on, stamp, {**attributes, **every}, guard)
                report = transact(actions, policy=self.retry, dynamodb=self._dynamodb, capacity=capacity)
            elif write == "tombstone":
                actions = self._tombstone(parent, key, stamp, {**attributes, **every})
                report = transact(actions, policy=self.retry, dynamodb=self._dynamodb, capacity=capacity)
            else:
                report = run(
                    self.dynamodb.update_item, self._restamp(key, on, stamp, every), policy=self.retry, capacity=capacity, write=True
                )
            attempts += report.attempts
            contended += report.contended_retries  # a round re-decided after a refusal is no retry under pressure
            if report.outcome is Outcome.APPLIED:
                return done(Outcome.APPLIED) if write == "flip" else done(Outcome.REJECTED, "already_set")
            if report.outcome is not Outcome.REJECTED or report.failure is None:
                return done(report.outcome)  # contention: safe to re-drive with the same stamp
            failed = report.failure.failed_conditions()
            if delta is None and write != "restamp" and 1 in failed and not report.failure.old_item(1):
                return done(Outcome.REJECTED, "parent_missing")
            if delta is None and write != "restamp" and 0 not in failed:
                stored_parent = from_item(report.failure.old_item(1)) or {}
                if guard is not None and not guard.holds(stored_parent):
                    return done(Outcome.REJECTED, "guard", stored_parent)
                return done(Outcome.REJECTED, "tally_would_go_negative", stored_parent)  # on, yet the tally is 0
            stored = from_item(report.failure.old_item(0))
            write = self._decide(stored, on, stamp)
            if write is None:
                return self._verdict(stored, on, stamp, done)
        return done(Outcome.CONTENTION)  # the state kept moving under concurrent requests

    def _decide(self, stored: dict[str, Any] | None, on: bool, stamp: Stamp) -> str | None:
        """What to write next, given the state that refused the last write (``None``: nothing)."""
        if stored is None:
            return "flip" if on else "tombstone"  # nothing stored: a new like, or an unlike's tombstone
        newer = newer_than(stamp, Stamp.of(stored))
        if is_on(stored, self.state) == on:
            own = stored.get(REQUEST_ID) == stamp.by
            return "restamp" if newer and not own else None
        return "flip" if newer else None  # the other state: flip it if this request is newer, else stale

    def _verdict(self, stored: dict[str, Any], on: bool, stamp: Stamp, done: Any) -> Result:
        if is_on(stored, self.state) != on:
            return done(Outcome.REJECTED, "stale", stored)  # a newer request set the other state
        if stored.get(REQUEST_ID) == stamp.by:
            return done(Outcome.DUPLICATE, "own_request", stored)  # this request's flip (an answer was lost)
        return done(Outcome.REJECTED, "already_set", stored)
