"""The plugin's own wheel, installed alone in a fresh virtualenv (none of the operator's
dependencies), against the live cluster: ``tree`` and ``rollout status`` of a real set, as a
user who ran ``pip install ./plugin`` on a laptop would."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH

pytestmark = pytest.mark.full


async def test_the_wheel_alone_draws_the_tree_and_waits_for_a_rollout(
        operator: Operator, wheel_kubectl_lws: Any,
        ready_set: Callable[..., Awaitable[str]]) -> None:
    name = await ready_set(LeaderWorkerSet("wheel-set").replicas(2).size(2).image("engine:v1")
                           .build(), pods=4)
    tree = await wheel_kubectl_lws("tree", name, "-o", "json")
    assert tree.code == 0, tree.err
    got = json.loads(tree.out)
    assert (got["name"], got["readyReplicas"]) == (name, 2)
    assert [len(g["pods"]) for g in got["groups"]] == [2, 2]
    assert all(g["state"] == "Ready" for g in got["groups"])

    await operator.kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"metadata": {"annotations": {READY_DELAY_ANNOTATION: "1s"}},
                           "spec": {"containers": [{"name": "engine", "image": "engine:v2"}]}}}}},
        operator.namespace, content_type=MERGE_PATCH)
    status = await wheel_kubectl_lws("rollout", "status", name, "--timeout=5m", timeout=330)
    assert status.code == 0, (status.out, status.err)
    assert status.out.splitlines()[-1] == f'leaderworkerset "{name}" successfully rolled out'
    after = await wheel_kubectl_lws("tree", name, "-o", "json")
    assert {g["revision"] for g in json.loads(after.out)["groups"]} == {
        json.loads(after.out)["revision"]} != {got["revision"]}
