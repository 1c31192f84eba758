"""The whole local stack in one object: DynamoDB, SQS, the API, the queue and stream pollers.

Used by ``python -m devstack`` and by the integration tests, so both run the same thing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TextIO

from devstack.api import LocalApi
from devstack.dynamodb_local import create_table, dynamodb_client
from devstack.runtime import FunctionPool
from devstack.sqs import DeliveryFaults, QueuePoller, SqsEmulator, create_queues, sqs_client
from devstack.streams import StreamPoller
from devstack.template import Stack, read_stack


@dataclass
class LocalStack:
    dynamodb_endpoint: str
    table: str
    host: str = "127.0.0.1"
    port: int = 3000
    stage: str = "dev"
    concurrency: int = 4
    sqs_endpoint: str | None = None  # None: start moto's SQS server
    sqs_port: int | None = None
    sqs_host: str = "127.0.0.1"
    visibility_override: int | None = None  # shorter redelivery for tests
    deliveries: int = 1  # tests: deliver every queue batch this many times
    delivery_faults: DeliveryFaults | None = None  # tests/proof: seeded duplicate and late (visibility-expired) deliveries
    queue_pollers: int = 1  # concurrent receive loops (and workers) per queue; late deliveries need >= 2
    stream_duplicates: float = 0.0  # tests/proof: fraction of stream batches delivered twice
    params: dict[str, str] = field(default_factory=dict)  # template parameter overrides
    access_log: TextIO | None = None  # one line per API request
    stack: Stack = field(init=False)
    api: LocalApi = field(init=False)
    queues: dict[str, str] = field(init=False, default_factory=dict)
    pollers: list[QueuePoller] = field(init=False, default_factory=list)
    _emulator: SqsEmulator | None = field(init=False, default=None)
    streams: StreamPoller | None = field(init=False, default=None)
    _pools: list[FunctionPool] = field(init=False, default_factory=list)

    def start(self) -> LocalStack:
        os.environ["AWS_ENDPOINT_URL_DYNAMODB"] = self.dynamodb_endpoint
        if self.sqs_endpoint is None:
            self._emulator = SqsEmulator(self.sqs_port, host=self.sqs_host).start()
            self.sqs_endpoint = self._emulator.endpoint
        os.environ["AWS_ENDPOINT_URL_SQS"] = self.sqs_endpoint
        self.sqs = sqs_client(self.sqs_endpoint)
        refs, attrs = create_queues(self.sqs, self.table, self.visibility_override)
        self.queues = refs
        self.stack = read_stack(self.table, params={"Stage": self.stage, **self.params}, refs=refs, attrs=attrs)
        create_table(dynamodb_client(self.dynamodb_endpoint), self.stack)
        self.api = LocalApi(self.stack, self.host, self.port, stage=self.stage, concurrency=self.concurrency, access_log=self.access_log)
        self.api.warm()
        self.api.start()
        for source in self.stack.queue_sources:
            late = self.delivery_faults is not None and self.delivery_faults.late > 0
            pool = FunctionPool(self.stack.functions[source.function], concurrency=max(self.queue_pollers, 2 if late else 1))
            pool.warm()  # like the API's pools: a first 202 is not held up by the worker's cold start
            self._pools.append(pool)
            self.pollers.append(
                QueuePoller(
                    self.sqs,
                    refs[source.queue],
                    attrs[f"{source.queue}.Arn"],
                    pool,
                    source.batch_size,
                    source.report_failures,
                    self.deliveries,
                    self.delivery_faults,
                    self.queue_pollers,
                ).start()
            )
        seed = self.delivery_faults.seed if self.delivery_faults else 0
        self.streams = StreamPoller.for_stack(
            self.stack, self.dynamodb_endpoint, duplicate_rate=self.stream_duplicates, seed=seed, destinations=refs, sqs=self.sqs
        ).start()
        return self

    def stop(self) -> None:
        if self.streams:
            self.streams.stop()
        for poller in self.pollers:
            poller.stop()
        for pool in self._pools:
            pool.close()
        if hasattr(self, "api"):
            self.api.stop()
        if self._emulator:
            self._emulator.stop()

    def queue_depth(self, logical_id: str) -> int:
        """Visible + in-flight messages of a queue."""
        attrs = self.sqs.get_queue_attributes(
            QueueUrl=self.queues[logical_id], AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        )["Attributes"]
        return int(attrs["ApproximateNumberOfMessages"]) + int(attrs["ApproximateNumberOfMessagesNotVisible"])

    def describe(self) -> list[str]:
        auth = f"   (AuthMode COGNITO: {self.stack.authorizer_header}: <token>, see devstack.auth)" if self.stack.authorizer_header else ""
        lines = [f"API              {self.api.url}{auth}"]
        lines += [f"  {r.method:7} {r.path:40} -> {r.function}" for r in self.stack.routes]
        lines += [f"SQS              {self.sqs_endpoint}" + ("   (moto server)" if self._emulator else "")]
        lines += [f"  {s.queue:40} -> {s.function} (batch {s.batch_size})" for s in self.stack.queue_sources]
        if self.streams:
            lines += [f"Streams          {self.table}   (DynamoDB Local's Streams API)"]
            lines += [
                f"  {'table stream (' + s.starting_position + ')':40} -> {s.function} (batch {s.batch_size})" for s in self.streams.subs
            ]
        return lines
