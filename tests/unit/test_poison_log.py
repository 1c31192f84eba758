"""The retry worker's poison path says what happened to the message, after it happened."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from botocore.exceptions import ClientError

from counters.core.failures import RetryPolicy
from counters.deferral.queue import Replayer

FAST = RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.002)
DLQ = "http://sqs.local/123456789012/tally-RetryDLQ"


class FakeSqs:
    def __init__(self, error: str | None = None) -> None:
        self.error: str | None = error
        self.sent: list[dict[str, Any]] = []

    def send_message(self, **params: Any) -> dict[str, Any]:
        if self.error:
            raise ClientError({"Error": {"Code": self.error, "Message": "no"}}, "SendMessage")
        self.sent.append(params)
        return {"MessageId": "m1"}


@pytest.fixture(autouse=True)
def propagating(monkeypatch: pytest.MonkeyPatch) -> None:
    """A handler imported earlier in this process ran Powertools' copy_config_to_registered_loggers,
    which stops the layer's loggers propagating to the root (caplog's handler): undo it here."""
    for name in ("counters", "counters.deferral", "counters.deferral.queue"):
        monkeypatch.setattr(logging.getLogger(name), "propagate", True)
        monkeypatch.setattr(logging.getLogger(name), "disabled", False)


def replayer(sqs: FakeSqs) -> Replayer:
    return Replayer("tally-test", DLQ, executors={}, dynamodb=object(), sqs=sqs, retry=FAST)


def test_sent_is_logged_after_the_send(caplog: pytest.LogCaptureFixture) -> None:
    sqs = FakeSqs()
    seen_before_send: list[list[str]] = []
    original = sqs.send_message

    def send_message(**params: Any) -> dict[str, Any]:
        seen_before_send.append([r.getMessage() for r in caplog.records])
        return original(**params)

    sqs.send_message = send_message  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO, logger="counters.deferral.queue"):
        assert replayer(sqs).replay("not json", message_id="m-1") == "poison"
    assert len(sqs.sent) == 1 and sqs.sent[0]["QueueUrl"] == DLQ and sqs.sent[0]["MessageBody"] == "not json"
    assert not any("sent to the DLQ" in line for line in seen_before_send[0])  # nothing claimed before the send
    assert [r.getMessage() for r in caplog.records] == ["poison message sent to the DLQ"]


def test_a_failed_send_is_logged_with_its_error_code_and_not_acknowledged(caplog: pytest.LogCaptureFixture) -> None:
    sqs = FakeSqs(error="AWS.SimpleQueueService.NonExistentQueue")
    with caplog.at_level(logging.INFO, logger="counters.deferral.queue"), pytest.raises(Exception):
        replayer(sqs).replay("not json", message_id="m-1")
    messages = [r.getMessage() for r in caplog.records]
    assert "poison message sent to the DLQ" not in messages
    [failed] = [r for r in caplog.records if "NOT sent to the DLQ" in r.getMessage()]
    assert failed.levelno == logging.ERROR and failed.exc_info is not None  # the exception, with its trace
    assert failed.errorCode == "AWS.SimpleQueueService.NonExistentQueue" and failed.messageId == "m-1"  # type: ignore[attr-defined]
