"""SQS for the local stack: an emulator (moto's server), the template's queues, and pollers
that feed each ``Type: SQS`` event source to its function like Lambda's event source mapping.

The poller receives up to ``BatchSize`` messages, invokes the function with an SQS event,
deletes the messages that succeeded (all but ``batchItemFailures`` when the function reports
them) and leaves the rest to reappear after the visibility timeout; the queue's own
RedrivePolicy moves a message to its DLQ after ``maxReceiveCount`` receives.

Delivery faults (tests and the proof, :class:`DeliveryFaults`): a batch delivered twice (the
second after the first returned), and a batch whose visibility timeout "expires" while its
first delivery still runs: the poller makes the messages visible again and starts another
receive (a second poller, as Lambda runs several) that takes and runs them concurrently with
the first delivery, which deletes with its now stale receipt handle, as SQS allows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import threading
import time
from dataclasses import dataclass
from typing import Any

import boto3

from devstack.dynamodb_local import free_port
from devstack.runtime import FunctionPool
from devstack.template import Resolver, load, queue_definitions


def sqs_client(endpoint: str) -> Any:
    return boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "local"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "local"),
        region_name=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
    ).client("sqs", endpoint_url=endpoint)


class SqsEmulator:
    """moto's server on 127.0.0.1:<port>, answering SQS only as far as we use it."""

    def __init__(self, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.port = port or free_port()
        self.host = host
        self.server: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> SqsEmulator:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log per SQS call
        self.server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self.server.start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()


def create_queues(sqs: Any, prefix: str, visibility_override: int | None = None) -> tuple[dict[str, str], dict[str, str]]:
    """Create the template's queues; returns (logical id -> URL, "Id.Arn"/"Id.QueueName" -> value)."""
    refs: dict[str, str] = {}
    attrs: dict[str, str] = {}
    template = load()
    for logical, props in queue_definitions().items():
        resolved = Resolver(template, refs, attrs=attrs)(props)
        attributes: dict[str, str] = {}
        for key in ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds"):
            if key in resolved:
                attributes[key] = str(resolved[key])
        if visibility_override is not None:
            attributes["VisibilityTimeout"] = str(visibility_override)
        if "RedrivePolicy" in resolved:
            attributes["RedrivePolicy"] = json.dumps(resolved["RedrivePolicy"])
        name = f"{prefix}-{logical}"
        url = sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        refs[logical] = url
        attrs[f"{logical}.Arn"] = arn
        attrs[f"{logical}.QueueName"] = name
    return refs, attrs


def sqs_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """The event Lambda's SQS event source mapping sends (shape of `sam local generate-event sqs receive-message`)."""
    region = queue_arn.split(":")[3] if queue_arn.count(":") >= 5 else "us-east-1"
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": {
                    "ApproximateReceiveCount": m.get("Attributes", {}).get("ApproximateReceiveCount", "1"),
                    "SentTimestamp": m.get("Attributes", {}).get("SentTimestamp", str(int(time.time() * 1000))),
                    "SenderId": m.get("Attributes", {}).get("SenderId", "local"),
                    "ApproximateFirstReceiveTimestamp": m.get("Attributes", {}).get(
                        "ApproximateFirstReceiveTimestamp", str(int(time.time() * 1000))
                    ),
                },
                "messageAttributes": m.get("MessageAttributes", {}),
                "md5OfBody": m.get("MD5OfBody") or hashlib.md5(m["Body"].encode(), usedforsecurity=False).hexdigest(),
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": region,
            }
            for m in messages
        ]
    }


@dataclass
class DeliveryFaults:
    """Seeded at-least-once delivery faults of a :class:`QueuePoller` (rates per received batch)."""

    duplicate: float = 0.0
    """The batch is delivered again after its first delivery returned (a duplicate delivery)."""
    late: float = 0.0
    """The batch becomes visible again before its first delivery starts (its visibility timeout
    expired): a second receive takes it and runs it while the first delivery runs, the first
    starting 0-0.3 s late (the function's pool needs >= 2 workers for them to overlap)."""
    seed: int = 0


class QueuePoller:
    """Feeds one queue to one function until stopped (``pollers`` concurrent receive loops)."""

    def __init__(
        self,
        sqs: Any,
        queue_url: str,
        queue_arn: str,
        pool: FunctionPool,
        batch_size: int,
        report_failures: bool,
        deliveries: int = 1,
        faults: DeliveryFaults | None = None,
        pollers: int = 1,
    ) -> None:
        self.deliveries = deliveries  # > 1: every batch is delivered again (tests of at-least-once delivery)
        self.faults = faults or DeliveryFaults()
        self._rng = random.Random(self.faults.seed)
        self._rng_lock = threading.Lock()
        self.sqs, self.queue_url, self.queue_arn = sqs, queue_url, queue_arn
        self.pool, self.batch_size, self.report_failures = pool, batch_size, report_failures
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, name=f"poller-{pool.fn.name}-{i}", daemon=True) for i in range(max(1, pollers))]
        self.thread = self.threads[0]
        self.invocations = 0
        self.duplicated = 0  # batches delivered twice by DeliveryFaults.duplicate
        self.expired = 0  # batches made visible again during their first delivery (DeliveryFaults.late)
        self._helpers: list[threading.Thread] = []

    def start(self) -> QueuePoller:
        for thread in self.threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in [*self.threads, *self._helpers]:
            thread.join(timeout=5)

    def _chance(self, rate: float) -> bool:
        if rate <= 0:
            return False
        with self._rng_lock:
            return self._rng.random() < rate

    def poll_once(self, wait_seconds: int = 1) -> int:
        """Receive one batch and run it; returns how many messages were received."""
        response = self.sqs.receive_message(
            QueueUrl=self.queue_url,
            MaxNumberOfMessages=min(self.batch_size, 10),
            WaitTimeSeconds=wait_seconds,
            AttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        messages = response.get("Messages", [])
        if not messages:
            return 0
        event = sqs_event(messages, self.queue_arn)
        if self._chance(self.faults.late):  # visibility "expired": another poller takes the batch meanwhile
            self.sqs.change_message_visibility_batch(
                QueueUrl=self.queue_url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"], "VisibilityTimeout": 0} for i, m in enumerate(messages)],
            )
            self.expired += 1
            helper = threading.Thread(target=self._second_receive, name=f"{threading.current_thread().name}-late", daemon=True)
            self._helpers = [h for h in self._helpers if h.is_alive()] + [helper]
            helper.start()
            with self._rng_lock:
                delay = self._rng.uniform(0, 0.3)
            time.sleep(delay)
        status, payload = self.pool.invoke(event)
        extra = self.deliveries - 1
        if self._chance(self.faults.duplicate):
            extra += 1
            self.duplicated += 1
        for _ in range(extra):
            self.pool.invoke(event)
        self.invocations += 1 + extra
        if status != "ok":
            return len(messages)  # the whole batch becomes visible again
        failed = set()
        if self.report_failures and isinstance(payload, dict):
            failed = {f.get("itemIdentifier") for f in payload.get("batchItemFailures") or []}
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            self.sqs.delete_message_batch(
                QueueUrl=self.queue_url, Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)]
            )
        return len(messages)

    def _second_receive(self) -> None:
        """Another poller's receive (moto's long poll does not see messages made visible while it waits)."""
        for _ in range(3):
            try:
                if self.poll_once(wait_seconds=0):
                    return
            except Exception:  # noqa: BLE001 - as a poller would, give up this receive
                return
            time.sleep(0.05)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except Exception:  # noqa: BLE001 - keep polling, like the event source mapping
                time.sleep(0.5)
