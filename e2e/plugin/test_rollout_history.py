"""``kubectl lws rollout history`` and ``undo`` end to end, through the real console script,
against the operator's revision history (``logic.identity.history``): two good templates and a
never-Ready one, each with its change cause; ``undo`` goes back to the previous revision, which
is renumbered above the others, and rolls every group back; ``--to-revision`` goes further; a
revision that is not kept is refused. A set with ``revision-history-limit: "1"`` keeps one
revision besides the current one."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import get_lws, pods_of
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, is_ready, wait_for

pytestmark = pytest.mark.full

CAUSE = "kubernetes.io/change-cause"
READY_AT = "lws-operator.dev/fully-ready-at"
LIMIT = "lws-operator.dev/revision-history-limit"


def body(name: str, image: str, cause: str, annotations: dict[str, str] | None = None,
         ) -> dict[str, Any]:
    return (LeaderWorkerSet(name).replicas(2).size(1).image(image)
            .annotations({CAUSE: cause, **(annotations or {})}).build())


async def revisions(op: Operator, name: str) -> list[dict[str, Any]]:
    """The set's ControllerRevisions not being deleted, by number (not its StatefulSets',
    which carry its name label too)."""
    found = await op.kube.list("apps/v1", "ControllerRevision", op.namespace,
                               label_selector=f"{P}name={name}")
    return sorted((r for r in found if not r["metadata"].get("deletionTimestamp")
                   and r["metadata"]["ownerReferences"][0]["kind"] == KIND),
                  key=lambda r: r["revision"])


def images(pods: list[dict[str, Any]]) -> set[str]:
    return {c["image"] for p in pods for c in p["spec"]["containers"]}


async def update(op: Operator, name: str, image: str, cause: str, ready: bool = True) -> None:
    """The template's image and the change cause in one write, as ``kubectl --record`` does;
    ``ready`` False: its pods never become Ready in this test."""
    template: dict[str, Any] = {"spec": {"containers": [{"name": "engine", "image": image}]}}
    if not ready:
        template["metadata"] = {"annotations": {READY_DELAY_ANNOTATION: "1h"}}
    await op.kube.patch(API, KIND, name, {
        "metadata": {"annotations": {CAUSE: cause}},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": template}}},
        op.namespace, content_type=MERGE_PATCH)


async def rolled_out(op: Operator, name: str, image: str, numbers: list[int]) -> None:
    """Every group Ready on ``image``, the update done, and the revisions numbered ``numbers``
    with the last (the current one) recorded fully Ready."""

    async def done() -> bool:
        pods = [p for p in await pods_of(op, name) if not p["metadata"].get("deletionTimestamp")]
        status = (await get_lws(op, name)).get("status") or {}
        kept = await revisions(op, name)
        return (len(pods) == 2 and all(is_ready(p) for p in pods) and images(pods) == {image}
                and status.get("updatedReplicas") == 2 and status.get("readyReplicas") == 2
                and [r["revision"] for r in kept] == numbers
                and READY_AT in (kept[-1]["metadata"].get("annotations") or {}))

    try:
        await wait_for(done, timeout=120,
                       what=f"{name} rolled out on {image}, revisions {numbers}")
    except AssertionError:  # what was there instead, in the test's output
        pods = await pods_of(op, name)
        print([(p["metadata"]["name"], is_ready(p), images([p])) for p in pods])
        print((await get_lws(op, name)).get("status"))
        print([(r["revision"], r["metadata"].get("annotations"))
               for r in await revisions(op, name)])
        raise


def table(out: str) -> list[list[str]]:
    """The history table's rows: number (with ``(current)``), ever fully Ready, cause."""
    rows = []
    for line in out.splitlines()[2:]:
        cells = line.split("  ")
        cells = [c.strip() for c in cells if c.strip()]
        rows.append([cells[0], cells[3].split(",")[0], cells[4]])
    return rows


async def test_undo_rolls_back_and_history_shows_it(
        operator: Operator, ready_set: Callable[..., Awaitable[str]], kubectl_lws: Any) -> None:
    name = await ready_set(body("hist", "engine:v1", "create v1"), pods=2)
    await rolled_out(operator, name, "engine:v1", [1])
    await update(operator, name, "engine:v2", "image v2")
    await rolled_out(operator, name, "engine:v2", [1, 2])
    await update(operator, name, "engine:v3", "image v3, never Ready", ready=False)

    async def three() -> bool:
        return len(await revisions(operator, name)) == 3
    await wait_for(three, timeout=60, what="the never-Ready revision")

    shown = await kubectl_lws("rollout", "history", name)
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[0] == f"leaderworkerset.leaderworkerset.x-k8s.io/{name}"
    assert table(shown.out) == [["1", "yes", "create v1"], ["2", "yes", "image v2"],
                                ["3 (current)", "no", "image v3, never Ready"]]

    undone = await kubectl_lws("rollout", "undo", name)
    assert undone.code == 0, undone.err
    assert undone.out.strip() == (f"leaderworkerset.leaderworkerset.x-k8s.io/{name} rolled "
                                  "back to revision 2")
    # The previous revision made current again: renumbered 4, every group back on v2.
    await rolled_out(operator, name, "engine:v2", [1, 3, 4])
    lws = await get_lws(operator, name)
    assert lws["metadata"]["annotations"][CAUSE] == "image v2"
    shown = await kubectl_lws("rollout", "history", name)
    assert table(shown.out) == [["1", "yes", "create v1"], ["3", "no", "image v3, never Ready"],
                                ["4 (current)", "yes", "image v2"]]

    further = await kubectl_lws("rollout", "undo", name, "--to-revision=1")
    assert further.code == 0, further.err
    await rolled_out(operator, name, "engine:v1", [3, 4, 5])
    data = json.loads((await kubectl_lws("rollout", "history", name, "-o", "json")).out)
    assert [(d["revision"], d["current"], d["everFullyReady"], d["changeCause"])
            for d in data] == [(3, False, False, "image v3, never Ready"),
                               (4, False, True, "image v2"), (5, True, True, "create v1")]

    # Revision 2 is revision 4 now: refused, naming those kept, and nothing written.
    generation = (await get_lws(operator, name))["metadata"]["generation"]
    refused = await kubectl_lws("rollout", "undo", name, "--to-revision=2")
    assert refused.code == 1
    assert refused.err.strip() == (f'error: revision 2 of LeaderWorkerSet "{name}" does not '
                                   "exist (pruned beyond the history limit, or never made); "
                                   "revisions kept: 3, 4, 5")
    assert (await get_lws(operator, name))["metadata"]["generation"] == generation

    stored = await kubectl_lws("rollout", "history", name, "--revision=3", "-o", "json")
    assert stored.code == 0, stored.err
    template = json.loads(stored.out)["leaderWorkerTemplate"]["workerTemplate"]
    assert template["spec"]["containers"][0]["image"] == "engine:v3"


async def test_the_history_limit_prunes_the_oldest(
        operator: Operator, ready_set: Callable[..., Awaitable[str]], kubectl_lws: Any) -> None:
    name = await ready_set(body("pruned", "engine:v1", "v1", {LIMIT: "1"}), pods=2)
    await rolled_out(operator, name, "engine:v1", [1])
    await update(operator, name, "engine:v2", "v2")
    await rolled_out(operator, name, "engine:v2", [1, 2])
    await update(operator, name, "engine:v3", "v3")
    await rolled_out(operator, name, "engine:v3", [2, 3])
    shown = await kubectl_lws("rollout", "history", name)
    assert table(shown.out) == [["2", "yes", "v2"], ["3 (current)", "yes", "v3"]]
    refused = await kubectl_lws("rollout", "undo", name, "--to-revision=1")
    assert refused.code == 1
    assert "revisions kept: 2, 3" in refused.err
