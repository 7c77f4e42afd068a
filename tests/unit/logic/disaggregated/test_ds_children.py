"""What a DisaggregatedSet's child LeaderWorkerSets, Services and role scalers contain
(upstream's lws_manager, service_manager and scaler_manager tests)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.defaults import apply_defaults
from lws_operator.api.validation import validate_create
from lws_operator.logic.disaggregated.children import (
    build_lws,
    build_scaler,
    build_service,
    live_spec_patch,
    not_controlled_message,
    owner_reference,
    scaler_selector,
)
from tests.harness.ds_bodies import DS_UID, child, ds, role

SYSTEM = {
    "app": "test-0-prefill",
    "disaggregatedset.x-k8s.io/name": "test",
    "disaggregatedset.x-k8s.io/role": "prefill",
    "disaggregatedset.x-k8s.io/slice": "0",
    "disaggregatedset.x-k8s.io/revision": "rev1",
}


def user_role() -> dict[str, Any]:
    body = role("prefill", replicas=3, startupPolicy="LeaderReady",
                rolloutStrategy={"type": "RollingUpdate",
                                 "rollingUpdateConfiguration": {"maxSurge": 2}},
                networkConfig={"subdomainPolicy": "UniquePerReplica"})
    body["metadata"] = {"labels": {"kueue.x-k8s.io/queue-name": "q1", "app": "user-app"},
                        "annotations": {"note": "keep"}}
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"component": "w", "app": "user"}, "annotations": {"w": "1"}}
    return body


# 160: TestManagerCreate merges user metadata with system labels
def test_build_lws_merges_metadata_and_copies_the_role_spec() -> None:
    owner = ds(user_role(), role("decode"), name="test")
    lws = build_lws(owner, owner["spec"]["roles"][0], 0, "rev1", 0)
    assert lws["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert lws["kind"] == "LeaderWorkerSet"
    meta = lws["metadata"]
    assert meta["name"] == "test-0-rev1-prefill"
    assert meta["namespace"] == "default"
    # User metadata labels kept, the system labels win (app).
    assert meta["labels"] == {"kueue.x-k8s.io/queue-name": "q1", **SYSTEM}
    assert meta["annotations"] == {"note": "keep"}
    assert meta["ownerReferences"] == [{
        "apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
        "name": "test", "uid": DS_UID, "controller": True}]
    spec = lws["spec"]
    # Only replicas is overridden; the rest of the role spec is copied.
    assert spec["replicas"] == 0
    assert spec["startupPolicy"] == "LeaderReady"
    assert spec["networkConfig"] == {"subdomainPolicy": "UniquePerReplica"}
    assert spec["rolloutStrategy"]["rollingUpdateConfiguration"] == {"maxSurge": 2}
    worker = spec["leaderWorkerTemplate"]["workerTemplate"]
    assert worker["metadata"]["labels"] == {"component": "w", **SYSTEM}
    assert worker["metadata"]["annotations"] == {"w": "1"}
    assert "leaderTemplate" not in spec["leaderWorkerTemplate"]
    assert "affinity" not in worker["spec"]


def test_build_lws_slice_and_replicas() -> None:
    owner = ds(role("prefill", replicas=3), role("decode"), name="test-deploy")
    lws = build_lws(owner, owner["spec"]["roles"][0], 1, "abc123", 3)
    assert lws["metadata"]["name"] == "test-deploy-1-abc123-prefill"
    assert lws["metadata"]["labels"]["disaggregatedset.x-k8s.io/slice"] == "1"
    assert lws["metadata"]["labels"]["app"] == "test-deploy-1-prefill"
    assert lws["spec"]["replicas"] == 3
    # No annotations on the role: none on the child.
    assert "annotations" not in lws["metadata"]


def test_build_lws_labels_the_leader_template_when_present() -> None:
    prefill = role("prefill")
    prefill["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {
        "metadata": {"annotations": {"l": "1"}},
        "spec": {"containers": [{"name": "leader", "image": "x"}]}}
    owner = ds(prefill, role("decode"), name="test")
    leader = build_lws(owner, prefill, 0, "rev1", 1)["spec"]["leaderWorkerTemplate"][
        "leaderTemplate"]
    assert leader["metadata"]["labels"] == SYSTEM
    assert leader["metadata"]["annotations"] == {"l": "1"}


def test_build_lws_never_aliases_the_set() -> None:
    prefill = user_role()
    prefill["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"] = {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchLabels": {"a": "b"}}}]}}
    owner = ds(prefill, role("decode"), name="test",
               placement={"type": "ExclusiveTopology", "topology": "rack"})
    before = copy.deepcopy(owner)
    lws = build_lws(owner, owner["spec"]["roles"][0], 0, "rev1", 2)
    assert owner == before
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"][0]["image"] = "changed"
    worker["metadata"]["labels"]["x"] = "y"
    worker["spec"]["affinity"]["podAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"].clear()
    lws["metadata"]["labels"]["z"] = "1"
    lws["metadata"]["annotations"]["n"] = "2"
    assert owner == before


# 161: TestManagerCreate injects placement affinity into leader and worker
def test_build_lws_injects_placement_into_leader_and_worker() -> None:
    prefill = role("prefill")
    prefill["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {
        "spec": {"containers": [{"name": "leader", "image": "x"}]}}
    owner = ds(prefill, role("decode"), name="test-deploy",
               placement={"type": "ExclusiveTopology", "topology": "topology.example.com/rack"})
    template = build_lws(owner, prefill, 1, "abc123", 1)["spec"]["leaderWorkerTemplate"]
    for key in ("leaderTemplate", "workerTemplate"):
        affinity = template[key]["spec"]["affinity"]
        terms = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms == [{"topologyKey": "topology.example.com/rack", "labelSelector": {
            "matchExpressions": [
                {"key": "disaggregatedset.x-k8s.io/name", "operator": "In",
                 "values": ["test-deploy"]},
                {"key": "disaggregatedset.x-k8s.io/slice", "operator": "In",
                 "values": ["1"]}]}}]
        anti = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert len(anti) == 2


# 162: TestManagerCreate, no affinity without a policy
def test_build_lws_without_policy_has_no_affinity() -> None:
    prefill = role("prefill")
    prefill["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {"spec": {"containers": []}}
    owner = ds(prefill, role("decode"))
    template = build_lws(owner, prefill, 0, "r", 1)["spec"]["leaderWorkerTemplate"]
    assert "affinity" not in template["leaderTemplate"]["spec"]
    assert "affinity" not in template["workerTemplate"]["spec"]


def test_owner_reference_requires_name_and_uid() -> None:
    with pytest.raises(ValueError, match="has no name or uid"):
        owner_reference(ds(uid=""))
    assert owner_reference(ds(), block_owner_deletion=True)["blockOwnerDeletion"] is True


# 175-179: headless, portless, the -prv name, labels and selector
def test_build_service_is_headless_portless_and_selects_the_child() -> None:
    owner = ds(name="my-app")
    lws = child("prefill", "ef53f2d7", 0, ds_name="my-app")
    svc = build_service(owner, lws)
    selector = {"disaggregatedset.x-k8s.io/name": "my-app",
                "disaggregatedset.x-k8s.io/role": "prefill",
                "disaggregatedset.x-k8s.io/revision": "ef53f2d7",
                "disaggregatedset.x-k8s.io/slice": "0"}
    assert svc == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "my-app-0-ef53f2d7-prefill-prv", "namespace": "default",
                     "labels": selector,
                     "ownerReferences": [{
                         "apiVersion": "disaggregatedset.x-k8s.io/v1",
                         "kind": "DisaggregatedSet", "name": "my-app", "uid": DS_UID,
                         "controller": True}]},
        "spec": {"clusterIP": "None", "selector": selector},
    }
    assert "ports" not in svc["spec"]
    assert svc["metadata"]["labels"] is not svc["spec"]["selector"]


def test_build_service_for_a_legacy_child_selects_without_slice() -> None:
    svc = build_service(ds(), child("decode", "r1234567", None))
    assert svc["metadata"]["name"] == "my-ds-r1234567-decode-prv"
    assert "disaggregatedset.x-k8s.io/slice" not in svc["spec"]["selector"]
    assert "disaggregatedset.x-k8s.io/slice" not in svc["metadata"]["labels"]


# 183: the created scaler's name, labels and controller ownerReference
def test_build_scaler() -> None:
    scaler = build_scaler(ds(name="myds"), "prefill", 4)
    assert scaler == {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSetRoleScaler",
        "metadata": {
            "name": "myds-prefill", "namespace": "default",
            "labels": {"disaggregatedset.x-k8s.io/name": "myds",
                       "disaggregatedset.x-k8s.io/role": "prefill"},
            "ownerReferences": [{
                "apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
                "name": "myds", "uid": DS_UID, "controller": True,
                "blockOwnerDeletion": True}]},
        "spec": {"replicas": 4},
    }
    # The seed is always written, 0 included (/scale needs the path).
    assert build_scaler(ds(), role("decode"), 0)["spec"] == {"replicas": 0}


def test_scaler_selector_matches_leaders_of_every_revision() -> None:
    assert scaler_selector("test-hpa", "prefill") == (
        "disaggregatedset.x-k8s.io/name=test-hpa,disaggregatedset.x-k8s.io/role=prefill,"
        "leaderworkerset.sigs.k8s.io/worker-index=0")


def test_not_controlled_message() -> None:
    assert not_controlled_message("d-0-r-p", "d", "adopt") == (
        "LeaderWorkerSet d-0-r-p exists but is not controlled by DisaggregatedSet d; "
        "refusing to adopt it")


def test_live_spec_patch_follows_group_replacement() -> None:
    lws = child("prefill", "r")
    assert live_spec_patch(role("prefill"), lws) is None
    assert live_spec_patch(role("prefill", groupReplacementPolicy="PostTermination"),
                           lws) is None
    assert live_spec_patch(role("prefill", groupReplacementPolicy="Immediate"), lws) == {
        "spec": {"groupReplacementPolicy": "Immediate"}}
    immediate = child("prefill", "r", spec={"groupReplacementPolicy": "Immediate"})
    assert live_spec_patch(role("prefill", groupReplacementPolicy="Immediate"),
                           immediate) is None
    assert live_spec_patch(role("prefill"), immediate) == {
        "spec": {"groupReplacementPolicy": "PostTermination"}}


def three_role_set() -> dict[str, Any]:
    """A three-role set shaped like upstream's 3-role sample: role metadata labels ``app:
    <role>`` on the object and the worker template, per-role surge, slices and a policy."""
    roles = []
    for name, replicas, size in (("prefill", 4, 2), ("decode", 2, 1), ("encode", 2, 1)):
        body = role(name, replicas=replicas, size=size, image="registry.k8s.io/pause:3.9",
                    rolloutStrategy={"rollingUpdateConfiguration": {"maxSurge": 1,
                                                                    "maxUnavailable": 0}})
        labels = {"app": name, "component": "disaggregation"}
        body["metadata"] = {"labels": dict(labels)}
        body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
            "labels": dict(labels)}
        roles.append(body)
    return ds(*roles, name="disaggregatedset-3role-sample", slices=2,
              placement={"type": "ExclusiveSlice", "topology": "kubernetes.io/hostname"})


def test_every_child_is_a_valid_leaderworkerset() -> None:
    """What the builder makes passes our LeaderWorkerSet admission (defaulting, then every
    create rule): a child the webhook refused would fail every pass."""
    owner = three_role_set()
    for slice_index in range(2):
        for spec_role in owner["spec"]["roles"]:
            lws = build_lws(owner, spec_role, slice_index, "a1b2c3d4", spec_role["spec"][
                "replicas"])
            assert validate_create(apply_defaults(lws)) == []
            worker_labels = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"][
                "labels"]
            # The user's app label is overwritten by the system one, on the object and pods.
            expected_app = f"disaggregatedset-3role-sample-{slice_index}-{spec_role['name']}"
            assert worker_labels["app"] == expected_app
            assert lws["metadata"]["labels"]["app"] == expected_app
            assert worker_labels["component"] == "disaggregation"
