"""A new state of a cached object takes the parts it keeps equal from the stored copy
(``kube.cache.lean`` with ``before``): a terminating pod's spec and status are not interned
anew, and what changed is stored as it came. Another incarnation of the name shares nothing."""

from __future__ import annotations

from typing import Any

from lws_operator.api.constants import NAME_LABEL
from lws_operator.kube.cache import KindStore


def pod(uid: str = "u1", version: str = "1", **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": uid, "resourceVersion": version,
                         "labels": {NAME_LABEL: "x"}, "managedFields": [{"manager": "m"}],
                         **metadata},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i:1"}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def cached_twice(second: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored copy of ``pod()`` and then of ``second``, stored after it."""
    store = KindStore("Pod")
    store.upsert(pod())
    before = store.get("ns", "p")
    assert before is not None
    store.upsert(second)
    after = store.get("ns", "p")
    assert after is not None
    return before, after


def test_a_terminating_pod_keeps_its_stored_spec_and_status() -> None:
    before, after = cached_twice(pod(version="2", deletionTimestamp="2026-01-01T00:00:00Z"))
    assert after is not before
    assert after["spec"] is before["spec"]
    assert after["status"] is before["status"]
    assert after["metadata"]["deletionTimestamp"] == "2026-01-01T00:00:00Z"
    assert "managedFields" not in after["metadata"]
    assert list(after) == list(before)  # the fields in the order they came


def test_a_part_that_changed_is_stored_as_it_came() -> None:
    failed = pod(version="2")
    failed["status"] = {"phase": "Failed", "conditions": [{"type": "Ready", "status": "False"}]}
    before, after = cached_twice(failed)
    assert after["spec"] is before["spec"]
    assert after["status"] == {"phase": "Failed",
                               "conditions": [{"type": "Ready", "status": "False"}]}
    assert before["status"]["phase"] == "Running"  # the stored copy was replaced, not edited


def test_another_incarnation_shares_nothing_with_the_stored_one() -> None:
    before, after = cached_twice(pod(uid="u2", version="5"))
    assert after["metadata"]["uid"] == "u2"
    assert after["spec"] == before["spec"]
    assert after["spec"] is not before["spec"]
