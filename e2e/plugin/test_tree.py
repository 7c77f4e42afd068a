"""``kubectl lws tree`` end to end: the real console script against real sets (Ordinal with
subgroups, Hash), its JSON checked field by field against the pods the API server holds, its
text and its ``--watch`` redraw."""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import get_lws, pods_of
from e2e.harness.launcher import Operator

pytestmark = pytest.mark.full

ORDINAL, HASH = "tree-ordinal", "tree-hash"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sets(ready_set: Callable[..., Awaitable[str]]) -> tuple[str, str]:
    """An Ordinal set of 2 groups of 4 with subgroups of 2 and a Hash set of 2 groups of 2,
    both Ready."""
    await ready_set(LeaderWorkerSet(ORDINAL).replicas(2).size(4).image("engine:v1")
                    .template(subGroupPolicy={"subGroupSize": 2}).build(), pods=8)
    await ready_set(LeaderWorkerSet(HASH).replicas(2).size(2).image("engine:v1")
                    .spec(groupIdentity="Hash").build(), pods=4)
    return ORDINAL, HASH


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    return dict(obj["metadata"].get("labels") or {})


def _group_order(index: str) -> tuple[int, int, str]:
    return (0, int(index), "") if index.isdigit() else (1, 0, index)


async def expected_model(op: Operator, name: str, hashed: bool) -> dict[str, Any]:
    """The tree's model written out from the objects themselves, independently of the
    plugin's code: every group and pod, each field read from the pod as the API holds it."""
    lws = await get_lws(op, name)
    kind = "Deployment" if hashed else "StatefulSet"
    leader_owner = await op.kube.get("apps/v1", kind, name, op.namespace)
    assert leader_owner is not None
    current = _labels(leader_owner)[P + "template-revision-hash"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in await pods_of(op, name):
        groups.setdefault(_labels(pod)[P + "group-index"], []).append(pod)
    out = []
    for index in sorted(groups, key=_group_order):
        members = sorted(groups[index], key=lambda p: int(_labels(p)[P + "worker-index"]))
        revision = _labels(members[0])[P + "template-revision-hash"]
        out.append({
            "index": index,
            "groupKey": _labels(members[0])[P + "group-key"] if hashed else None,
            "revision": revision, "state": "Ready", "updated": revision == current,
            "pods": [{
                "name": p["metadata"]["name"],
                "role": "leader" if _labels(p)[P + "worker-index"] == "0" else "worker",
                "workerIndex": int(_labels(p)[P + "worker-index"]),
                "subgroup": _labels(p).get(P + "subgroup-index"),
                "node": p["spec"]["nodeName"], "phase": "Running", "ready": True,
                "revision": _labels(p)[P + "template-revision-hash"],
                "controllerRevisionHash": _labels(p).get("controller-revision-hash"),
                "restarts": sum(c.get("restartCount", 0)
                                for c in p["status"].get("containerStatuses") or []),
                "schedulingGated": False, "terminating": False,
            } for p in members]})
    status = lws["status"]
    return {
        "namespace": op.namespace, "name": name,
        "groupIdentity": "Hash" if hashed else "Ordinal",
        "replicas": lws["spec"]["replicas"], "size": lws["spec"]["leaderWorkerTemplate"]["size"],
        "readyReplicas": status["readyReplicas"], "updatedReplicas": status["updatedReplicas"],
        "revision": current,
        "conditions": {c["type"]: c["status"] for c in status.get("conditions") or []},
        "groups": out,
    }


async def test_ordinal_tree_as_json_is_the_pods(operator: Operator, sets: tuple[str, str],
                                                kubectl_lws: Any) -> None:
    ran = await kubectl_lws("tree", ORDINAL, "-o", "json")
    assert ran.code == 0, ran.err
    got = json.loads(ran.out)
    want = await expected_model(operator, ORDINAL, hashed=False)
    assert got == want
    # What the model must show for this set, beyond agreeing with the pods: two Ready groups
    # of four on one revision, the leader and worker 1 in subgroup 0, workers 2 and 3 in 1.
    assert [g["index"] for g in got["groups"]] == ["0", "1"]
    assert [[p["subgroup"] for p in g["pods"]] for g in got["groups"]] == [["0", "0", "1", "1"]] * 2
    assert {g["revision"] for g in got["groups"]} == {got["revision"]}


async def test_hash_tree_shows_group_keys(operator: Operator, sets: tuple[str, str],
                                          kubectl_lws: Any) -> None:
    ran = await kubectl_lws("tree", HASH, "-o", "yaml")
    assert ran.code == 0, ran.err
    got = yaml.safe_load(ran.out)
    assert got == await expected_model(operator, HASH, hashed=True)
    for group in got["groups"]:
        assert len(group["groupKey"]) == 40
        assert group["index"] == group["groupKey"][:8]


async def test_text_tree_and_every_set(operator: Operator, sets: tuple[str, str],
                                       kubectl_lws: Any) -> None:
    """Plain text when stdout is not a terminal (no escape codes); without NAME every set of
    the namespace, in name order; -A reaches them from another namespace too."""
    ran = await kubectl_lws("tree", ORDINAL)
    assert ran.code == 0, ran.err
    assert "\x1b[" not in ran.out
    lines = ran.out.splitlines()
    assert lines[0].startswith(f"LeaderWorkerSet {operator.namespace}/{ORDINAL}  (Ordinal; "
                               "replicas 2, size 4; ready 2/2, updated 2;")
    assert [line.split()[1:4] for line in lines if "── group" in line] == [
        ["group", "0", "Ready"], ["group", "1", "Ready"]]
    pods = {p["metadata"]["name"]: p for p in await pods_of(operator, ORDINAL)}
    pod_lines = [line for line in lines if line.lstrip("│ ").startswith(("├── ", "└── "))
                 and "── group " not in line]
    assert len(pod_lines) == 8
    for line in pod_lines:
        name = line.lstrip("│ ")[4:].split()[0]
        assert f"node {pods[name]['spec']['nodeName']}" in line
        assert " Ready " in line
        assert "restarts 0" in line
        assert "subgroup " in line
    print(ran.out)

    every = await kubectl_lws("tree", "-o", "json")
    assert every.code == 0, every.err
    assert [t["name"] for t in json.loads(every.out)["items"]] == [HASH, ORDINAL]
    everywhere = await kubectl_lws("-n", "default", "tree", "-A", "-o", "json")
    assert everywhere.code == 0, everywhere.err
    names = {(t["namespace"], t["name"]) for t in json.loads(everywhere.out)["items"]}
    assert {(operator.namespace, HASH), (operator.namespace, ORDINAL)} <= names

    missing = await kubectl_lws("tree", "no-such-set")
    assert missing.code == 1
    assert ('leaderworkerset or disaggregatedset "no-such-set" not found in namespace '
            f'"{operator.namespace}"') in missing.err


async def test_watch_redraws_until_interrupted(operator: Operator, sets: tuple[str, str],
                                               kubectl_lws: Any, watch: Any) -> None:
    """--watch -o json prints the model, then again when the set changes (a third group),
    and exits on Ctrl-C."""
    watching = await watch("tree", ORDINAL, "--watch", "-o", "json")
    decoder = json.JSONDecoder()

    def documents(text: str) -> list[dict[str, Any]]:
        docs: list[dict[str, Any]] = []
        at = 0
        while True:
            text_left = text[at:].lstrip()
            if not text_left:
                return docs
            try:
                doc, end = decoder.raw_decode(text_left)
            except json.JSONDecodeError:
                return docs  # a document still being written
            docs.append(doc)
            at = len(text) - len(text_left) + end

    await watching.until(lambda out: len(documents(out)) >= 1, "the first tree")
    await operator.kube.patch(API, KIND, ORDINAL, {"spec": {"replicas": 3}}, operator.namespace)
    try:
        out = await watching.until(
            lambda out: any(len(d["groups"]) == 3 and d["groups"][2]["state"] == "Ready"
                            for d in documents(out)), "a redraw with group 2 Ready")
        docs = documents(out)
        assert len(docs[0]["groups"]) == 2
        assert all(a != b for a, b in itertools.pairwise(docs))  # only changes
        assert await watching.interrupt() == 130
    finally:
        await operator.kube.patch(API, KIND, ORDINAL, {"spec": {"replicas": 2}},
                                  operator.namespace)
