"""Which pod news may wait a second for its pass (``logic.wakeups``)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import NAME_LABEL, WORKER_INDEX_LABEL
from lws_operator.logic.wakeups import can_wait


def pod(index: str | None = "1", *, meta: dict[str, Any] | None = None,
        spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        ) -> dict[str, Any]:
    labels = {NAME_LABEL: "x"} if index is None else {NAME_LABEL: "x", WORKER_INDEX_LABEL: index}
    return {"metadata": {"name": "x-0-1", "labels": labels, **(meta or {})},
            "spec": {"nodeName": "node-1", **(spec or {})},
            "status": {"phase": "Running", **(status or {})}}


READY = {"conditions": [{"type": "Ready", "status": "True"}],
         "containerStatuses": [{"restartCount": 0}]}


@pytest.mark.parametrize(("obj", "expected"), [
    (pod(), True),
    (pod(status=READY), True),
    (pod(spec={"nodeName": ""}, status={"phase": "Pending"}), True),
    (pod(status={"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}), True),
    (pod(index=None), True),  # never mutated: judged over a minute (logic.unmutated)
    (pod("0"), False),
    (pod("0", status=READY), False),
    (pod(meta={"deletionTimestamp": "2026-12-02T00:00:00Z"}), False),
    (pod(status={"phase": "Failed"}), False),
    (pod(status={"phase": "Succeeded"}), False),
    (pod(status={"containerStatuses": [{"restartCount": 2}]}), False),
    (pod(status={"phase": "Pending", "initContainerStatuses": [{"restartCount": 1}]}), False),
    (pod(spec={"schedulingGates": [{"name": "scheduling.x-k8s.io/pod-group"}]}), False),
    (pod(spec={"schedulingGates": []}), True),
], ids=["running worker", "ready worker", "created worker", "unschedulable worker",
        "unlabelled pod", "leader", "ready leader", "deleting worker", "failed worker",
        "succeeded worker", "restarted worker", "restarted init container", "gated worker",
        "gates lifted"])
def test_only_a_live_workers_routine_news_waits(obj: dict[str, Any], expected: bool) -> None:
    assert can_wait(obj) is expected
