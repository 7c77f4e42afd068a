"""How a failed certificate pass is logged: outages in one line, bugs with their traceback.

Found by the webhook-fault runs (e2e/chaos): a webhook port another process held made every
retry log a full traceback for what is an ordinary ``address already in use``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import errno
import logging

import pytest

from lws_operator.kube.cert_planner import PlannerFailed
from lws_operator.kube.certs import CertSettings, WebhookCertManager
from lws_operator.logic.runtime import certs
from tests.harness.quiet_kube import QuietKube


async def _one_failed_pass(error: Exception, caplog: pytest.LogCaptureFixture,
                           ) -> logging.LogRecord:
    stop = asyncio.Event()

    async def serve(cert: bytes, key: bytes) -> None:
        stop.set()
        raise error

    settings = CertSettings(namespace="lws-system", policy=certs.CertPolicy(
        dns_names=("lws-webhook-service.lws-system.svc",),
        propagation_delay=dt.timedelta(seconds=1)))
    manager = WebhookCertManager(QuietKube(), settings, serve)  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="lws_operator.kube.certs"):
        await asyncio.wait_for(manager.run(stop), 10)
    [record] = [r for r in caplog.records if "certificate pass failed" in r.getMessage()]
    return record


async def test_a_taken_port_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    record = await _one_failed_pass(
        OSError(errno.EADDRINUSE, "error while attempting to bind on address "
                                  "('127.0.0.1', 9443): address already in use"), caplog)
    assert "address already in use" in record.getMessage()
    assert record.exc_info is None or record.exc_info is False


async def test_a_planner_child_that_died_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    """A SIGTERM sent to the operator's process group killed the planner child: an outage
    (retried), not a bug."""
    record = await _one_failed_pass(PlannerFailed("certificate planner exited -15: "), caplog)
    assert "exited -15" in record.getMessage()
    assert record.exc_info is None or record.exc_info is False


async def test_an_unexpected_error_keeps_its_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    record = await _one_failed_pass(RuntimeError("bug"), caplog)
    assert record.exc_info
