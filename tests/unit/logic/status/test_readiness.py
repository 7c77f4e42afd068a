"""Readiness and revision helpers shared by rollout, status and startup policy (upstream's
pod_utils.go)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import TEMPLATE_REVISION_HASH_LABEL
from lws_operator.logic.status.readiness import (
    confirmed_by_pods,
    group_ready,
    group_updated,
    pod_ready,
    pod_running_and_ready,
    ready_by_pods,
    revision_key,
    statefulset_ready,
    worker_statefulset_ready,
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


# ------------------------------------------------------------- a worker StatefulSet by its pods

REV = "g-0-5d8f"


def _counting(replicas: int = 2, *, available: int = 1, current: str | None = REV,
              update: str | None = REV, generation: int | None = 2, observed: int | None = 2,
              min_ready: int | None = None, deleting: bool = False) -> dict[str, Any]:
    """Worker StatefulSet ``g-0`` (ordinals from 1) whose status has not counted all its pods."""
    meta: dict[str, Any] = {"name": "g-0", "uid": "sts-uid"}
    if generation is not None:
        meta["generation"] = generation
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec: dict[str, Any] = {"replicas": replicas, "ordinals": {"start": 1}}
    if min_ready is not None:
        spec["minReadySeconds"] = min_ready
    status: dict[str, Any] = {"replicas": replicas, "availableReplicas": available}
    for field, value in (("currentRevision", current), ("updateRevision", update),
                         ("observedGeneration", observed)):
        if value is not None:
            status[field] = value
    return {"metadata": meta, "spec": spec, "status": status}


def _worker(ordinal: int, *, uid: str = "sts-uid", revision: str = REV, phase: str = "Running",
            ready: str = "True", deleting: bool = False) -> dict[str, Any]:
    pod = _pod(phase=phase, ready=ready)
    meta = pod["metadata"]
    meta.update(name=f"g-0-{ordinal}", ownerReferences=[
        {"kind": "StatefulSet", "name": "g-0", "uid": uid, "controller": True}])
    meta["labels"]["controller-revision-hash"] = revision
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


@pytest.mark.parametrize(
    ("sts", "pods", "expected"),
    [
        # Every wanted pod of this incarnation Running and Ready on the settled revision.
        (_counting(), [_worker(1), _worker(2)], True),
        (_counting(replicas=1, available=0), [_worker(1)], True),
        # A pod missing, not Ready, not running, being deleted: the status decides.
        (_counting(), [_worker(1)], False),
        (_counting(), [_worker(1), _worker(2, ready="False")], False),
        (_counting(), [_worker(1), _worker(2, phase="Pending")], False),
        (_counting(), [_worker(1), _worker(2, deleting=True)], False),
        # A pod of the previous incarnation of that name (another UID), or of another revision.
        (_counting(), [_worker(1), _worker(2, uid="old-uid")], False),
        (_counting(), [_worker(1), _worker(2, revision="g-0-0ld")], False),
        # Ordinals count from the spec's start: pod 0 is no pod of this StatefulSet.
        (_counting(), [_worker(0), _worker(1)], False),
        # The status has not settled: revisions unknown or moving, a generation not observed.
        (_counting(current=None, update=None), [_worker(1), _worker(2)], False),
        (_counting(current="g-0-0ld"), [_worker(1), _worker(2)], False),
        (_counting(observed=1), [_worker(1), _worker(2)], False),
        (_counting(observed=None), [_worker(1), _worker(2)], False),
        # minReadySeconds: readiness is not availability yet.
        (_counting(min_ready=10), [_worker(1), _worker(2)], False),
        (_counting(min_ready=0), [_worker(1), _worker(2)], True),
        (_counting(deleting=True), [_worker(1), _worker(2)], False),
    ],
)
def test_a_worker_statefulset_ready_by_its_pods(sts: dict[str, Any], pods: list[dict[str, Any]],
                                                expected: bool) -> None:
    by_name = {p["metadata"]["name"]: p for p in pods}
    assert ready_by_pods(sts, by_name.get) is expected
    assert confirmed_by_pods([sts], pods) == (frozenset({"g-0"}) if expected else frozenset())


def test_confirmed_names_only_statefulsets_not_ready_by_status() -> None:
    ready = {**_counting(available=2), "metadata": {"name": "g-1", "uid": "u1", "generation": 2}}
    pods = [_worker(1), _worker(2)]
    assert confirmed_by_pods([ready, _counting()], pods) == frozenset({"g-0"})
    assert confirmed_by_pods([ready], pods) == frozenset()
    assert worker_statefulset_ready(ready)
    assert not worker_statefulset_ready(_counting())
    assert worker_statefulset_ready(_counting(), frozenset({"g-0"}))


@pytest.mark.parametrize(
    ("leader", "confirmed", "expected"),
    [
        (_pod(), frozenset({"g-0"}), True),
        (_pod(), frozenset({"g-1"}), False),
        (_pod(), (), False),
        (_pod(ready="False"), frozenset({"g-0"}), False),
    ],
)
def test_group_ready_by_confirmed_workers(leader: dict[str, Any], confirmed: frozenset[str],
                                          expected: bool) -> None:
    assert group_ready(leader, _counting(), 3, confirmed) is expected
