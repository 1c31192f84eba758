"""Every write a process's DynamoDB client commits, logged for a writer check in another process.

The HTTP multi-Region proof (``proof/http_regions.py``) runs each Region's functions in a local
stack of its own (``python -m devstack``, one worker process per function instance), each with the
layer's own client. On MREC the emulator learns every local write from the Region's stream; on
MRSC there is one store and one stream for every Region, so the emulator learns a write's Region
from the client that sent it (``testkit/regions.py``, MRSC guard), which over HTTP lives in another
process. This test hook carries those writes across:

* **In the worker** (:func:`install`, called by ``devstack/runtime.py`` when ``DEVSTACK_WRITE_LOG``
  names a folder; never set outside tests): a botocore hook on the layer's DynamoDB client appends
  one JSON line per item each successful write attempt wrote (``PutItem``, ``UpdateItem``,
  ``DeleteItem``, ``BatchWriteItem`` minus its ``UnprocessedItems``, every write of a
  ``TransactWriteItems``) to a file of its own: the client's Region, the table, the key and, for a
  put, the item. It listens to ``response-received``, which botocore emits once per HTTP attempt,
  before ``after-call``: a write whose answer a fault replaces by a 500 (``after_commit``), or that
  botocore sends twice (``resend``), is logged as often as the store took it; a call a fault cancels
  before sending is never logged. No call is added: the hook only reads what the engine's calls
  sent and got back (the layer's rule "every DynamoDB call goes through the engine" is untouched).
* **In the proof** (:class:`WriteLog`): :meth:`WriteLog.drain` reads the complete lines added to
  the folders since the last drain and :meth:`WriteLog.check` feeds them to the emulator's
  :class:`testkit.regions.WriterCheck`, as its MRSC guard does in process.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV = "DEVSTACK_WRITE_LOG"
"""The folder a worker logs its writes in (one ``<function>-<pid>.jsonl`` per worker process)."""
WRITES = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
KEY_NAMES = ("PK", "SK")  # the template's table key (testkit.regions reads it from the template too)


def written(operation: str, request: dict[str, Any], answer: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(table, key, item or ``None``) of each item a successful ``operation`` wrote: ``request`` is
    its JSON body, ``answer`` its parsed response (``UnprocessedItems`` were not written). Keys and
    items stay in DynamoDB JSON."""

    def key_of(item: dict[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in KEY_NAMES if k in item}

    if operation == "PutItem":
        item = request.get("Item", {})
        return [(request.get("TableName", ""), key_of(item), item)]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(request.get("TableName", ""), request.get("Key", {}), None)]
    found: list[tuple[str, dict[str, Any], dict[str, Any] | None]] = []
    if operation == "BatchWriteItem":
        unprocessed = {
            (table, json.dumps(r, sort_keys=True)) for table, requests in (answer.get("UnprocessedItems") or {}).items() for r in requests
        }
        for table, requests in request.get("RequestItems", {}).items():
            for r in requests:
                if (table, json.dumps(r, sort_keys=True)) in unprocessed:
                    continue
                if "PutRequest" in r:
                    item = r["PutRequest"].get("Item", {})
                    found.append((table, key_of(item), item))
                elif "DeleteRequest" in r:
                    found.append((table, r["DeleteRequest"].get("Key", {}), None))
    elif operation == "TransactWriteItems":
        for action in request.get("TransactItems", []):
            if "Put" in action:
                item = action["Put"].get("Item", {})
                found.append((action["Put"].get("TableName", ""), key_of(item), item))
            for name in ("Update", "Delete"):
                if name in action:
                    found.append((action[name].get("TableName", ""), action[name].get("Key", {}), None))
    return found


def install(client: Any, folder: str | os.PathLike[str], name: str) -> None:
    """Log every item ``client`` (a botocore DynamoDB client) writes from now on to
    ``folder/<name>-<pid>.jsonl`` (module doc)."""
    path = Path(folder) / f"{name}-{os.getpid()}.jsonl"
    region = client.meta.region_name
    lock = threading.Lock()
    slot = "tally_write_log"  # where before-call leaves the request for this call's attempts

    def before_call(model: Any, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if model.name in WRITES:
            try:
                context[slot] = json.loads(params.get("body") or b"{}")
            except (TypeError, ValueError):
                context[slot] = {}

    def response_received(
        response_dict: dict[str, Any] | None, parsed_response: dict[str, Any] | None, context: dict[str, Any], event_name: str, **_: Any
    ) -> None:
        operation = event_name.rsplit(".", 1)[-1]
        if operation not in WRITES or response_dict is None or response_dict.get("status_code") != 200:
            return
        lines = [
            json.dumps({"region": region, "table": table, "operation": operation, "key": key, "item": item}) + "\n"
            for table, key, item in written(operation, context.get(slot) or {}, parsed_response or {})
        ]
        if not lines:
            return
        with lock, open(path, "a") as out:  # one line per item, whole lines only (the reader skips a partial tail)
            out.write("".join(lines))

    client.meta.events.register_first("before-call.dynamodb", before_call, unique_id=f"write-log-before-{id(client)}")
    client.meta.events.register_first("response-received.dynamodb", response_received, unique_id=f"write-log-after-{id(client)}")


@dataclass(frozen=True)
class Write:
    """One item a Region's function wrote (keys and item in DynamoDB JSON)."""

    region: str
    table: str
    operation: str
    key: dict[str, Any]
    item: dict[str, Any] | None


class WriteLog:
    """The writes logged in ``folders`` (each Region's ``DEVSTACK_WRITE_LOG``), read as they grow."""

    def __init__(self, folders: list[Path], table: str) -> None:
        self.folders = folders
        self.table = table
        self.read = 0
        """Writes read so far (every table)."""
        self._offsets: dict[Path, int] = {}

    def drain(self) -> list[Write]:
        """The complete lines added since the last drain, to this table."""
        out: list[Write] = []
        for folder in self.folders:
            for path in sorted(folder.glob("*.jsonl")):
                with open(path, "rb") as fh:
                    fh.seek(self._offsets.get(path, 0))
                    chunk = fh.read()
                whole = chunk[: chunk.rfind(b"\n") + 1]  # a line still being written is read next time
                self._offsets[path] = self._offsets.get(path, 0) + len(whole)
                for line in whole.splitlines():
                    record = json.loads(line)
                    self.read += 1
                    if record["table"] == self.table:
                        out.append(Write(record["region"], record["table"], record["operation"], record["key"], record["item"]))
        return out

    def check(self, writers: Any) -> int:
        """Feed the new writes to ``writers`` (a :class:`testkit.regions.WriterCheck`) as the
        emulator's MRSC guard does (``created`` unknown); returns how many. Call ``writers.check()``
        after to raise what they broke."""
        from testkit.regions import to_plain

        new = self.drain()
        for write in new:
            writers.write(write.region, to_plain(write.key), to_plain(write.item) if write.item else None, created=None)
        return len(new)
