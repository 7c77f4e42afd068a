"""Readiness and revision helpers shared by rollout, status and startup policy (upstream's
pod_utils.go)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import TEMPLATE_REVISION_HASH_LABEL
from lws_operator.logic.readiness import (
    group_ready,
    group_updated,
    pod_ready,
    pod_running_and_ready,
    revision_key,
    statefulset_ready,
)


def _pod(
    phase: str | None = "Running", ready: str | None = "True", key: str = "k"
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if ready is not None:
        status["conditions"] = [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": ready},
        ]
    return {"metadata": {"labels": {TEMPLATE_REVISION_HASH_LABEL: key}}, "status": status}


def _sts(
    replicas: int | None = 3,
    available: int | None = 3,
    current: str | None = None,
    update: str | None = None,
    key: str = "k",
) -> dict[str, Any]:
    spec: dict[str, Any] = {} if replicas is None else {"replicas": replicas}
    status: dict[str, Any] = {}
    if available is not None:
        status["availableReplicas"] = available
    if current is not None:
        status["currentRevision"] = current
    if update is not None:
        status["updateRevision"] = update
    return {
        "metadata": {"labels": {TEMPLATE_REVISION_HASH_LABEL: key}},
        "spec": spec,
        "status": status,
    }


@pytest.mark.parametrize(
    ("pod", "ready", "running_and_ready"),
    [
        (_pod(), True, True),
        (_pod(ready="False"), False, False),
        (_pod(ready="Unknown"), False, False),
        (_pod(ready=None), False, False),
        (_pod(phase="Pending"), True, False),
        (_pod(phase="Succeeded"), True, False),
        (_pod(phase=None), True, False),
        ({}, False, False),
        ({"status": None}, False, False),
    ],
)
def test_pod_readiness(pod: dict[str, Any], ready: bool, running_and_ready: bool) -> None:
    assert pod_ready(pod) is ready
    assert pod_running_and_ready(pod) is running_and_ready


@pytest.mark.parametrize(
    ("sts", "expected"),
    [
        # Upstream's integration helpers: all replicas available, both revisions empty.
        (_sts(), True),
        (_sts(current="r1", update="r1"), True),
        (_sts(current="r1", update="r2"), False),
        (_sts(current="r1"), False),
        (_sts(available=2), False),
        (_sts(available=4), False),
        (_sts(available=None), False),
        (_sts(replicas=0, available=None), True),
        # A missing spec.replicas is the API default, 1.
        (_sts(replicas=None, available=1), True),
        (_sts(replicas=None, available=None), False),
    ],
)
def test_statefulset_ready(sts: dict[str, Any], expected: bool) -> None:
    assert statefulset_ready(sts) is expected


def test_revision_key() -> None:
    assert revision_key(_pod(key="abc")) == "abc"
    assert revision_key({"metadata": {"labels": {}}}) == ""
    assert revision_key({}) == ""
    assert revision_key(None) == ""


@pytest.mark.parametrize(
    ("leader", "worker", "size", "expected"),
    [
        (_pod(), _sts(), 2, True),
        (_pod(), _sts(available=1), 2, False),
        (_pod(ready="False"), _sts(), 2, False),
        (_pod(phase="Pending"), _sts(), 2, False),
        (_pod(), None, 2, False),
        (_pod(), None, 1, True),
        # Size 1 never looks at a worker StatefulSet, even a stale one.
        (_pod(), _sts(available=0), 1, True),
    ],
)
def test_group_ready(
    leader: dict[str, Any], worker: dict[str, Any] | None, size: int, expected: bool
) -> None:
    assert group_ready(leader, worker, size) is expected


@pytest.mark.parametrize(
    ("leader", "worker", "size", "expected"),
    [
        (_pod(key="new"), _sts(key="new"), 2, True),
        (_pod(key="new"), _sts(key="old"), 2, False),
        (_pod(key="old"), _sts(key="new"), 2, False),
        (_pod(key="new"), None, 2, False),
        (_pod(key="new"), None, 1, True),
        (_pod(key="new"), _sts(key="old"), 1, True),
        (_pod(key="old"), None, 1, False),
        # Readiness plays no part.
        (_pod(key="new", phase="Pending", ready="False"), _sts(key="new", available=0), 2, True),
    ],
)
def test_group_updated(
    leader: dict[str, Any], worker: dict[str, Any] | None, size: int, expected: bool
) -> None:
    assert group_updated(leader, worker, size, "new") is expected
