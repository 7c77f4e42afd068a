"""``kubectl lws tree``'s model (``lws_operator.plugin.analysis.group_tree``) and drawing, from
hand-made objects labelled as either controller labels them."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    NAME_LABEL,
    SUBGROUP_INDEX_LABEL,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.plugin.analysis.group_tree import (
    EXHAUSTED,
    NOT_READY,
    READY,
    TERMINATING,
    build_tree,
    tree_data,
)
from lws_operator.plugin.output import Paint
from lws_operator.plugin.tree import pod_status, render


def lws(name: str = "s", replicas: int = 2, size: int = 2, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size}, **spec},
            "status": {"readyReplicas": 1, "updatedReplicas": 2,
                       "conditions": [{"type": "Available", "status": "True"}]}}


def pod(name: str, group: str, worker: int, *, rev: str = "r1", ready: bool = True,
        node: str | None = "n1", restarts: int = 0, lws_name: str = "s",
        key: str | None = None, subgroup: str | None = None, deleting: bool = False,
        gated: bool = False, annotations: dict[str, str] | None = None,
        phase: str = "Running") -> dict[str, Any]:
    labels = {NAME_LABEL: lws_name, GROUP_INDEX_LABEL: group, WORKER_INDEX_LABEL: str(worker),
              TEMPLATE_REVISION_HASH_LABEL: rev, "controller-revision-hash": f"{name}-abc"}
    if key:
        labels[GROUP_KEY_LABEL] = key
    if subgroup is not None:
        labels[SUBGROUP_INDEX_LABEL] = subgroup
    meta: dict[str, Any] = {"name": name, "labels": labels, "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta,
            "spec": {"nodeName": node, **({"schedulingGates": [{"name": "g"}]} if gated else {})},
            "status": {"phase": phase,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "containerStatuses": [{"restartCount": restarts}]}}


STS = {"metadata": {"name": "s", "labels": {TEMPLATE_REVISION_HASH_LABEL: "r2"}}}


def test_groups_in_ordinal_order_with_pods_in_worker_order() -> None:
    pods = [pod("s-10", "10", 0, rev="r2"), pod("s-10-1", "10", 1, rev="r2"),
            pod("s-2-1", "2", 1), pod("s-2", "2", 0), pod("other-0", "0", 0, lws_name="other")]
    tree = build_tree(lws(replicas=11), pods, STS)
    assert [g.index for g in tree.groups] == ["2", "10"]  # by number, not text
    assert [p.name for p in tree.groups[0].pods] == ["s-2", "s-2-1"]
    assert [(g.revision, g.updated) for g in tree.groups] == [("r1", False), ("r2", True)]
    assert tree.revision == "r2"


@pytest.mark.parametrize(("pods", "state"), [
    ([pod("s-0", "0", 0), pod("s-0-1", "0", 1)], READY),
    ([pod("s-0", "0", 0), pod("s-0-1", "0", 1, ready=False)], NOT_READY),
    ([pod("s-0", "0", 0)], NOT_READY),  # a worker missing
    ([pod("s-0", "0", 0, deleting=True), pod("s-0-1", "0", 1)], TERMINATING),
    ([pod("s-0-1", "0", 1)], TERMINATING),  # the leader gone already
    ([pod("s-0", "0", 0, deleting=True, ready=False, phase="Succeeded",
          annotations={GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION: "true"}),
      pod("s-0-1", "0", 1, deleting=True, ready=False, phase="Failed")], EXHAUSTED),
])
def test_group_states(pods: list[dict[str, Any]], state: str) -> None:
    assert build_tree(lws(), pods, STS).groups[0].state == state


def test_data_is_the_model_field_by_field() -> None:
    pods = [pod("s-abcdef12", "abcdef12", 0, key="abcdef12" + "0" * 32, restarts=2,
                subgroup="0"),
            pod("s-abcdef12-1", "abcdef12", 1, key="abcdef12" + "0" * 32, node=None,
                ready=False, phase="Pending", gated=True, subgroup="1")]
    data = tree_data(build_tree(lws(groupIdentity="Hash"), pods, STS))
    assert data == {
        "namespace": "ns", "name": "s", "groupIdentity": "Hash", "replicas": 2, "size": 2,
        "readyReplicas": 1, "updatedReplicas": 2, "revision": "r2",
        "conditions": {"Available": "True"},
        "groups": [{"index": "abcdef12", "groupKey": "abcdef12" + "0" * 32, "revision": "r1",
                    "state": NOT_READY, "updated": False, "pods": [
                        {"name": "s-abcdef12", "role": "leader", "workerIndex": 0,
                         "subgroup": "0", "node": "n1", "phase": "Running", "ready": True,
                         "revision": "r1", "controllerRevisionHash": "s-abcdef12-abc",
                         "restarts": 2, "schedulingGated": False, "terminating": False},
                        {"name": "s-abcdef12-1", "role": "worker", "workerIndex": 1,
                         "subgroup": "1", "node": None, "phase": "Pending", "ready": False,
                         "revision": "r1", "controllerRevisionHash": "s-abcdef12-1-abc",
                         "restarts": 0, "schedulingGated": True, "terminating": False}]}]}


def test_ordinal_groups_carry_no_key() -> None:
    tree = build_tree(lws(), [pod("s-0", "0", 0, key="k" * 40)], STS)
    assert tree.groups[0].key is None


def test_drawing_plain_and_coloured() -> None:
    pods = [pod("s-0", "0", 0, rev="r2"), pod("s-0-1", "0", 1, rev="r2"),
            pod("s-1", "1", 0), pod("s-1-1", "1", 1, ready=False, restarts=3)]
    tree = build_tree(lws(), pods, STS)
    assert render(tree, Paint(False)) == [
        "LeaderWorkerSet ns/s  (Ordinal; replicas 2, size 2; ready 1/2, updated 2; "
        "revision r2)  Available=True",
        "├── group 0  Ready  revision r2",
        "│   ├── s-0    leader  node n1  Ready     revision r2  restarts 0",
        "│   └── s-0-1  worker  node n1  Ready     revision r2  restarts 0",
        "└── group 1  NotReady  revision r1 (not updated)",
        "    ├── s-1    leader  node n1  Ready     revision r1  restarts 0",
        "    └── s-1-1  worker  node n1  NotReady  revision r1  restarts 3",
    ]
    coloured = "\n".join(render(tree, Paint(True)))
    assert "\x1b[33mNotReady\x1b[0m" in coloured
    assert "\x1b[35mrevision r1 (not updated)\x1b[0m" in coloured


def test_a_set_without_pods() -> None:
    assert render(build_tree(lws(), [], None), Paint(False))[1:] == ["└── (no pods)"]


@pytest.mark.parametrize(("kwargs", "status"), [
    ({}, "Ready"), ({"ready": False}, "NotReady"), ({"deleting": True}, "Terminating"),
    ({"gated": True, "ready": False, "phase": "Pending"}, "SchedulingGated"),
    ({"ready": False, "phase": "Pending"}, "Pending"),
    ({"ready": False, "phase": "Failed"}, "Failed"),
])
def test_pod_status(kwargs: dict[str, Any], status: str) -> None:
    tree = build_tree(lws(), [pod("s-0", "0", 0, **kwargs)], STS)
    assert pod_status(tree.groups[0].pods[0]) == status
