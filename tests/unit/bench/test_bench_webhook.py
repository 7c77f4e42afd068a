"""The webhook-at-rate run's connection figures (``e2e.bench.webhook_latency.connections``):
pure arithmetic on a scrape delta, no cluster; and its pod deletion, sent again after a 504."""

from __future__ import annotations

import pytest

from e2e.bench import figures
from e2e.bench.webhook_latency import connections, delete_pods
from lws_operator.kube.client import ApiException

BEFORE = """\
controller_runtime_webhook_requests_total{webhook="/mutate--v1-pod",code="200"} 10
controller_runtime_webhook_requests_total{webhook="/validate--v1-pod",code="200"} 10
lws_operator_webhook_connections_accepted_total 3
"""
AFTER = """\
controller_runtime_webhook_requests_total{webhook="/mutate--v1-pod",code="200"} 210
controller_runtime_webhook_requests_total{webhook="/validate--v1-pod",code="200"} 210
controller_runtime_webhook_requests_total{webhook="/validate--v1-pod",code="500"} 1
lws_operator_webhook_connections_accepted_total 44
"""


def test_connections_per_admission_counts_every_path_over_the_window() -> None:
    window = figures.delta(figures.parse(AFTER), figures.parse(BEFORE))
    assert connections(window, 0.802) == {
        "accepted": 41, "admissions": 401, "per_admission": 0.102,
        "child_cpu_ms_per_admission": 2.0}


def test_no_admissions_gives_no_ratio() -> None:
    assert connections({}, 0.0) == {"accepted": 0, "admissions": 0, "per_admission": None,
                                    "child_cpu_ms_per_admission": None}


class FlakyDeletes:
    """A client whose collection deletes time out (504) ``failures`` times before one goes
    through, and whose listings then find nothing."""

    def __init__(self, failures: int, status: int = 504) -> None:
        self.failures, self.status = failures, status
        self.calls: list[str] = []

    async def request(self, method: str, path: str, **_: object) -> dict[str, object]:
        self.calls.append(method)
        if method == "DELETE" and self.failures:
            self.failures -= 1
            raise ApiException(status=self.status, reason="Timeout")
        return {"items": []}


@pytest.mark.parametrize(("failures", "deletes"), [(0, 1), (2, 3)])
async def test_a_timed_out_pod_deletion_is_sent_again(failures: int, deletes: int) -> None:
    kube = FlakyDeletes(failures)
    await delete_pods(kube, "/api/v1/namespaces/n/pods")  # type: ignore[arg-type]
    assert kube.calls.count("DELETE") == deletes
    assert kube.calls[-1] == "GET"  # then it waited until they were gone


@pytest.mark.parametrize(("failures", "status"), [(5, 504), (1, 500)])
async def test_other_errors_and_the_last_timeout_are_raised(failures: int, status: int) -> None:
    with pytest.raises(ApiException):
        await delete_pods(FlakyDeletes(failures, status), "/pods")  # type: ignore[arg-type]
