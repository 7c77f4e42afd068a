"""Taking a LeaderWorkerSet over from the upstream Go controller restarts nothing:
the revision decision on objects exactly as upstream leaves them (revision_utils.go:
ControllerRevision ``<lws>-<key>-<n>`` holding Go's JSON, leader and worker StatefulSets labelled
with the key, a stored LeaderWorkerSet without the LWS docs' additions), and the rolled-out check on
its own."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest

from lws_operator.kube.cache import lean
from lws_operator.logic.identity.adoption import rolled_out
from lws_operator.logic.identity.revision import fnv1_32, revision_key, revision_patch, safe_encode
from lws_operator.logic.identity.revision_decision import decide_revision

HASH = "leaderworkerset.sigs.k8s.io/template-revision-hash"
NAME = "leaderworkerset.sigs.k8s.io/name"
CONTAINER = {"name": "m", "image": "nginx:1"}

# Upstream's revision data for a worker container `{name: m, image: nginx:1, env: [{name: A,
# value: ""}]}` (size 2): Go's JSON, byte for byte (see
# tests/unit/logic/identity/test_template_form.py).
GO_ENV_EMPTY = (
    '{"spec":{"leaderWorkerTemplate":{"$patch":"replace","restartPolicy":'
    '"RecreateGroupOnPodRestart","size":2,"workerTemplate":{"metadata":{},"spec":{"containers":'
    '[{"env":[{"name":"A"}],"image":"nginx:1","name":"m","resources":{}}]}}},"networkConfig":'
    '{"$patch":"replace","subdomainPolicy":"Shared"}}}')
# The same container written by an upstream release built against Kubernetes types without
# `resizePolicy`: Go drops the field it does not know, which no normal form can restore.
GO_OLD_TYPES = GO_ENV_EMPTY.replace('[{"name":"A"}]', '[{"name":"A","value":"x"}]')


def go_key(data: str) -> str:
    """Upstream's key: FNV-1 of Go's bytes, safe-encoded (revision_utils.go)."""
    return safe_encode(str(fnv1_32(data.encode())))


def upstream_lws(container: dict[str, Any], generation: int = 2,
                 observed: int | None = 2) -> dict[str, Any]:
    status: dict[str, Any] = {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "sample", "namespace": "ns", "uid": "u-1",
                     "generation": generation},
        "spec": {
            "replicas": 2, "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                "partition": 0, "maxUnavailable": 1, "maxSurge": 0}},
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {
                "size": 2, "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {"spec": {"containers": [container]}}},
        },
        "status": status,
    }


def upstream_revision(data: str, number: int = 1) -> dict[str, Any]:
    key = go_key(data)
    return {
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": f"sample-{key}-{number}", "namespace": "ns",
                     "labels": {NAME: "sample", HASH: key},
                     "ownerReferences": [{"apiVersion": "leaderworkerset.x-k8s.io/v1",
                                          "kind": "LeaderWorkerSet", "name": "sample",
                                          "uid": "u-1", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "data": json.loads(data), "revision": number,
    }


def statefulset(name: str, key: str, partition: int | None = None, template_key: str = "",
                generation: int = 1, observed: int = 1, current: str = "r-1",
                update: str = "r-1") -> dict[str, Any]:
    rolling = {} if partition is None else {"rollingUpdate": {"partition": partition}}
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "ns", "generation": generation,
                     "labels": {NAME: "sample", HASH: key}},
        "spec": {"replicas": 2, "updateStrategy": {"type": "RollingUpdate", **rolling},
                 "template": {"metadata": {"labels": {HASH: template_key or key}}}},
        "status": {"observedGeneration": observed, "replicas": 2, "currentRevision": current,
                   "updateRevision": update},
    }


def deployment(key: str, updated: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "sample", "generation": 3, "labels": {HASH: key}},
        "spec": {"replicas": 2, "strategy": {"type": "RollingUpdate"},
                 "template": {"metadata": {"labels": {HASH: key}}}},
        "status": {"observedGeneration": 3, "replicas": 2, "updatedReplicas": updated},
    }


K = "7f658dd979"


def settled(**changes: Any) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """(LWS, leader sts, worker sts) of a set rolled out on revision K, with one change."""
    lws = upstream_lws({**CONTAINER, "env": [{"name": "A", "value": ""}]},
                       generation=changes.pop("generation", 2),
                       observed=changes.pop("observed", 2))
    leader_changes = changes.pop("leader", {})
    leader = statefulset("sample", leader_changes.pop("key", K),
                         partition=changes.pop("partition", 0), **leader_changes)
    workers = [statefulset("sample-0", changes.pop("worker0", K)), statefulset("sample-1", K)]
    assert not changes
    return lws, leader, workers


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, True),
        ({"observed": None}, False),
        ({"observed": 1}, False),  # the previous controller never saw this spec
        ({"leader": {"key": "other"}}, False),
        ({"leader": {"template_key": "other"}}, False),
        # partitioned rollout mid-way: the leader StatefulSet holds old groups back, and the
        # worker StatefulSet of group 0 still carries the old key
        ({"partition": 1}, False),
        ({"worker0": "old"}, False),
        ({"partition": 1, "worker0": "old"}, False),
        # the StatefulSet controller has not finished: pods left on the old revision
        ({"leader": {"current": "r-1", "update": "r-2"}}, False),
        ({"leader": {"generation": 2, "observed": 1}}, False),
    ],
)
def test_rolled_out(changes: dict[str, Any], expected: bool) -> None:
    lws, leader, workers = settled(**changes)
    assert rolled_out(lws, K, leader, workers) is expected


def test_rolled_out_needs_a_leader_and_a_key() -> None:
    lws, leader, workers = settled()
    assert rolled_out(lws, K, None, workers) is False
    assert rolled_out(lws, "", leader, workers) is False
    assert rolled_out(lws, K, leader, []) is True  # size 1: no worker StatefulSets


def test_rolled_out_with_a_leader_deployment() -> None:
    lws, _, workers = settled()
    assert rolled_out(lws, K, deployment(K), workers) is True
    assert rolled_out(lws, K, deployment(K, updated=1), workers) is False


def test_zero_value_template_keeps_upstreams_revision() -> None:
    """The issue's case: env `value: ""` made every group restart on takeover. Decided by
    content, so even a set whose rollout is not finished keeps its key."""
    for observed in (2, 1):
        lws = upstream_lws({**CONTAINER, "env": [{"name": "A", "value": ""}]}, observed=observed)
        assert revision_key(lws) != go_key(GO_ENV_EMPTY)  # Go's bytes are not ours
        decision = decide_revision(lws, statefulset("sample", go_key(GO_ENV_EMPTY)),
                                   [upstream_revision(GO_ENV_EMPTY)])
        assert (decision.current_key, decision.create, decision.updated, decision.events) == (
            go_key(GO_ENV_EMPTY), None, False, ())


def rendering_gap() -> tuple[dict[str, Any], str]:
    """A live set whose stored revision (written by an upstream built against older types)
    lacks a field: no normal form can tell that from a template change."""
    container = {**CONTAINER, "env": [{"name": "A", "value": "x"}], "resizePolicy": [
        {"resourceName": "cpu", "restartPolicy": "NotRequired"}]}
    return upstream_lws(container), go_key(GO_OLD_TYPES)


def test_revision_rolled_out_completely_is_adopted_as_it_stands() -> None:
    lws, key = rendering_gap()
    workers = [statefulset("sample-0", key), statefulset("sample-1", key)]
    revisions: list[Mapping[str, Any]] = [upstream_revision(GO_OLD_TYPES)]
    decision = decide_revision(lws, statefulset("sample", key), revisions, workers)
    assert (decision.current_key, decision.updated) == (key, False)
    # The live templates are recorded under the same key, numbered above upstream's, so the
    # next pass compares exactly and a later scale or edit is decided on what runs.
    assert decision.create is not None
    assert decision.create["metadata"]["labels"] == {NAME: "sample", HASH: key}
    assert decision.create["metadata"]["name"] == f"sample-{key}-2"
    assert decision.create["data"] == revision_patch(lws)
    assert [e.note for e in decision.events] == [
        f"Creating revision with key {key} for the rolled-out templates of existing "
        "LeaderWorkerSet (stored differently at "
        ".spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resizePolicy)"]
    again = decide_revision(lws, statefulset("sample", key), [*revisions, decision.create],
                            workers)
    assert (again.current_key, again.create, again.updated) == (key, None, False)
    # A template edit afterwards is an update as usual.
    edited = copy.deepcopy(lws)
    edited["metadata"]["generation"] = 3
    edited["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = "nginx:2"
    update = decide_revision(edited, statefulset("sample", key), [*revisions, decision.create],
                             workers)
    assert update.updated is True
    assert update.current_key == revision_key(edited)


@pytest.mark.parametrize(
    ("observed", "partition", "worker0"),
    [
        (1, 0, None),  # the spec changed after the previous controller's last pass
        (2, 1, "old"),  # partitioned rollout mid-way
        (2, 0, "old"),  # rollout mid-way: group 0 not yet replaced
    ],
)
def test_revision_not_rolled_out_is_decided_by_content(observed: int, partition: int,
                                                       worker0: str | None) -> None:
    lws, key = rendering_gap()
    lws["status"]["observedGeneration"] = observed
    workers = [statefulset("sample-0", worker0 or key), statefulset("sample-1", key)]
    decision = decide_revision(lws, statefulset("sample", key, partition=partition),
                               [upstream_revision(GO_OLD_TYPES)], workers)
    assert decision.updated is True
    assert decision.current_key == revision_key(lws)


def test_rolled_out_on_objects_as_the_cache_holds_them() -> None:
    """The check reads only what the watch cache keeps (``lean``: no managedFields), and
    listed items carry no ``kind``."""
    lws, leader, workers = settled()
    for obj in (lws, leader, *workers):
        obj["metadata"]["managedFields"] = [{"manager": "lws"}]
        obj.pop("kind")
    cached_workers = [lean(w, "StatefulSet") for w in workers]
    assert rolled_out(lean(lws, "LeaderWorkerSet"), K, lean(leader, "StatefulSet"),
                      cached_workers) is True
    owner = deployment(K)
    owner.pop("kind")
    assert rolled_out(lean(lws, "LeaderWorkerSet"), K, lean(owner, "Deployment"), []) is True
    owner["status"]["updatedReplicas"] = 1
    assert rolled_out(lean(lws, "LeaderWorkerSet"), K, lean(owner, "Deployment"), []) is False
