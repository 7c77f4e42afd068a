"""``kubectl lws rollout history`` and ``undo`` of a live DisaggregatedSet, through the real
console script, against the controller's revision history (``logic.disaggregated.history``): a
two-role set created and changed twice, each change with its cause, lists three revisions, each
fully Ready once its coordinated rollout was done; ``undo --to-revision=1`` rolls every role back
to the first template (the controller's coordinated rollout), and the history then shows it
renumbered current; a revision that is not kept is refused, naming those that are, with nothing
written. One pod per role, Ready a moment after it starts, so each rollout takes a few passes.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import DS_API, DS_KIND, DisaggregatedSet, Role
from e2e.harness.disaggregated import get_ds, wait_converged
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, wait_for

pytestmark = pytest.mark.full

NAME = "hist-ds"
CAUSE = "kubernetes.io/change-cause"
READY_AT = "lws-operator.dev/fully-ready-at"
RESOURCE = f"disaggregatedset.disaggregatedset.x-k8s.io/{NAME}"


def two_roles(image: str) -> dict[str, Any]:
    def role(name: str) -> Role:
        return (Role(name).replicas(1).size(1).image(image, name="model")
                .worker_annotations({READY_DELAY_ANNOTATION: "1s"}))
    return DisaggregatedSet(NAME).role(role("prefill")).role(role("decode")).build()


async def change(op: Operator, image: str, cause: str) -> None:
    """The roles' image and the change cause in one write."""
    await op.kube.patch(DS_API, DS_KIND, NAME, {
        "metadata": {"annotations": {CAUSE: cause}},
        "spec": {"roles": two_roles(image)["spec"]["roles"]}},
        op.namespace, content_type=MERGE_PATCH)


async def revisions(op: Operator) -> list[dict[str, Any]]:
    """The set's own ControllerRevisions not being deleted, by number (not its children's
    StatefulSets', which carry its name label too)."""
    found = await op.kube.list("apps/v1", "ControllerRevision", op.namespace,
                               label_selector=f"disaggregatedset.x-k8s.io/name={NAME}")
    return sorted((r for r in found if not r["metadata"].get("deletionTimestamp")
                   and r["metadata"]["ownerReferences"][0]["kind"] == DS_KIND),
                  key=lambda r: r["revision"])


async def recorded(op: Operator, numbers: list[int]) -> None:
    """The revisions numbered ``numbers``, every one of them recorded fully Ready."""

    async def done() -> bool:
        kept = await revisions(op)
        return ([r["revision"] for r in kept] == numbers
                and all(READY_AT in (r["metadata"].get("annotations") or {}) for r in kept))

    try:
        await wait_for(done, timeout=60, what=f"{NAME}'s revisions {numbers}, fully Ready")
    except AssertionError:  # what there was instead, in the test's output
        print([(r["revision"], r["metadata"].get("labels"), r["metadata"].get("annotations"))
               for r in await revisions(op)])
        raise


def table(out: str) -> list[list[str]]:
    """The history table's rows: number (with ``(current)``), ever fully Ready, cause."""
    rows = []
    for line in out.splitlines()[2:]:
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        rows.append([cells[0], cells[3].split(",")[0], cells[4]])
    return rows


def images(converged: Any) -> set[str]:
    return {c["image"] for lws in converged.lws.values()
            for c in lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"]}


async def test_history_undo_history(ds_operator: Operator, ds_kubectl_lws: Any) -> None:
    op, ns = ds_operator, ds_operator.namespace
    body = two_roles("engine:v1")
    body["metadata"]["annotations"] = {CAUSE: "create v1"}
    await op.kube.create(body, ns)
    first = await wait_converged(op.kube, ns, NAME)
    await change(op, "engine:v2", "image v2")
    second = await wait_converged(op.kube, ns, NAME, other_than=first.revision)
    await change(op, "engine:v3", "image v3")
    third = await wait_converged(op.kube, ns, NAME, other_than=second.revision)
    await recorded(op, [1, 2, 3])

    shown = await ds_kubectl_lws("rollout", "history", NAME)
    print(f"$ kubectl lws rollout history {NAME}\n{shown.out}", end="")
    assert shown.code == 0, shown.err
    assert shown.out.splitlines()[0] == RESOURCE
    assert table(shown.out) == [["1", "yes", "create v1"], ["2", "yes", "image v2"],
                                ["3 (current)", "yes", "image v3"]]

    # A revision never made: refused, naming those kept, nothing written.
    generation = (await get_ds(op.kube, ns, NAME))["metadata"]["generation"]
    refused = await ds_kubectl_lws("rollout", "undo", NAME, "--to-revision=7")
    print(f"$ kubectl lws rollout undo {NAME} --to-revision=7\n{refused.err}", end="")
    assert refused.code == 1
    assert refused.err.strip() == (f'error: revision 7 of DisaggregatedSet "{NAME}" does not '
                                   "exist (pruned beyond the history limit, or never made); "
                                   "revisions kept: 1, 2, 3")
    assert (await get_ds(op.kube, ns, NAME))["metadata"]["generation"] == generation

    undone = await ds_kubectl_lws("rollout", "undo", NAME, "--to-revision=1")
    print(f"$ kubectl lws rollout undo {NAME} --to-revision=1\n{undone.out}", end="")
    assert undone.code == 0, undone.err
    assert undone.out.strip() == f"{RESOURCE} rolled back to revision 1"
    back = await wait_converged(op.kube, ns, NAME, other_than=third.revision)
    assert back.revision == first.revision
    assert images(back) == {"engine:v1"}
    assert (await get_ds(op.kube, ns, NAME))["metadata"]["annotations"][CAUSE] == "create v1"

    await recorded(op, [2, 3, 4])
    shown = await ds_kubectl_lws("rollout", "history", NAME)
    print(f"$ kubectl lws rollout history {NAME}\n{shown.out}", end="")
    assert table(shown.out) == [["2", "yes", "image v2"], ["3", "yes", "image v3"],
                                ["4 (current)", "yes", "create v1"]]
