"""A DisaggregatedSet's revision history (``logic.disaggregated.history``): the pure decision as
tables, then passes of the real reconciler over a simulated API server (``tests/harness/ds_world``):
recorded at creation, marked fully Ready once every role is, numbered across template changes,
renumbered by an undo, pruned to the limit once a rollout is done, and a set made before the
history recorded on its next pass without any other write."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    FULLY_READY_ANNOTATION,
    REVISION_HISTORY_LIMIT_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
)
from lws_operator.api.constants import NAME_LABEL as LWS_NAME_LABEL
from lws_operator.api.disaggregated import NAME_LABEL, REVISION_LABEL
from lws_operator.kube.cache import ds_owner_key, owner_key
from lws_operator.logic.disaggregated import history, revision_data
from lws_operator.logic.disaggregated.names import lws_name
from lws_operator.logic.disaggregated.revision import compute_revision
from tests.harness.ds_world import (
    DS_NAME,
    DS_UID,
    NOW,
    DsWorld,
    disaggregated_set,
    new_world,
    role,
)

PD = ("prefill", "decode")


def two_roles(image: str = "app:1", replicas: int = 1,
              notes: dict[str, str] | None = None) -> dict[str, Any]:
    ds = disaggregated_set(role("prefill", replicas, image), role("decode", replicas, image))
    ds["metadata"]["annotations"] = dict(notes or {})
    return ds


def recorded(ds: dict[str, Any], number: int, **annotations: str) -> dict[str, Any]:
    """The revision the controller records of ``ds``, numbered ``number``."""
    rev = history.controller_revision(ds, compute_revision(ds), [])
    rev["revision"] = number
    rev["metadata"]["name"] = revision_data.revision_name(DS_NAME, compute_revision(ds), number)
    rev["metadata"].setdefault("annotations", {}).update(annotations)
    return rev


def ready_child(ds: dict[str, Any], role_name: str, replicas: int = 1,
                ready: int | None = None, rev: str | None = None) -> dict[str, Any]:
    rev = rev or compute_revision(ds)
    return {"metadata": {"name": lws_name(DS_NAME, 0, rev, role_name), "labels": {
        NAME_LABEL: DS_NAME, REVISION_LABEL: rev, "disaggregatedset.x-k8s.io/role": role_name,
        "disaggregatedset.x-k8s.io/slice": "0"}},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas, "readyReplicas": replicas if ready is None else ready,
                   "updatedReplicas": replicas}}


# --------------------------------------------------------------------- the revision object


def test_the_revision_object() -> None:
    ds = two_roles(notes={CHANGE_CAUSE_ANNOTATION: "first"})
    key = compute_revision(ds)
    got = history.controller_revision(ds, key, [recorded(two_roles("app:0"), 4)])
    assert got["metadata"]["name"] == f"{DS_NAME}-{key}-5"
    assert got["revision"] == 5
    assert got["metadata"]["labels"] == {NAME_LABEL: DS_NAME, REVISION_LABEL: key}
    assert got["metadata"]["annotations"] == {CHANGE_CAUSE_ANNOTATION: "first"}
    (owner,) = got["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == ("DisaggregatedSet", DS_UID,
                                                                  True)
    # The data is what the hash covers: the key is its hash.
    assert [r["name"] for r in got["data"]["roles"]] == list(PD)
    assert compute_revision(disaggregated_set(*[
        {"name": r["name"], "spec": {"leaderWorkerTemplate": r["template"]}}
        for r in got["data"]["roles"]])) == key


def test_the_revisions_are_the_sets_alone() -> None:
    """Found by the set's cache index, never by the LeaderWorkerSet controller's (no LWS name
    label), and a child LeaderWorkerSet's revision is never one of the set's."""
    ds = two_roles()
    mine = recorded(ds, 1)
    assert ds_owner_key("ControllerRevision", mine) == ("ns", DS_NAME)
    assert owner_key("ControllerRevision", mine) is None
    childs = {"metadata": {"name": "c-1", "labels": {LWS_NAME_LABEL: "c",
                                                      TEMPLATE_REVISION_HASH_LABEL: "k"},
                           "ownerReferences": [{"kind": "LeaderWorkerSet", "uid": "c-uid",
                                                "controller": True}]}}
    assert ds_owner_key("ControllerRevision", childs) is None
    # A child's StatefulSet's revision carries the pod template's labels, the set's among them:
    # selected out by the watch, and nobody's in the set's cache if listed anyway.
    sts = {"metadata": {"name": "x-1", "labels": {NAME_LABEL: DS_NAME, REVISION_LABEL: "k",
                                                   LWS_NAME_LABEL: "c"},
                        "ownerReferences": [{"kind": "StatefulSet", "uid": "s",
                                             "controller": True}]}}
    assert ds_owner_key("ControllerRevision", sts) is None
    assert revision_data.selector() == f"{NAME_LABEL},!{LWS_NAME_LABEL}"
    assert revision_data.selector("a") == f"{NAME_LABEL}=a,!{LWS_NAME_LABEL}"
    foreign = copy.deepcopy(mine)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another"
    unkeyed = copy.deepcopy(mine)
    del unkeyed["metadata"]["labels"][REVISION_LABEL]
    assert revision_data.owned(ds, [mine, childs, sts, foreign, unkeyed]) == [mine]


# ------------------------------------------------------------------------- the decision


@pytest.mark.parametrize(("children", "ready"), [
    ([("prefill", 1, 1), ("decode", 1, 1)], True),
    ([("prefill", 1, 1), ("decode", 1, 0)], False),   # a role not Ready
    ([("prefill", 1, 1)], False),                      # a role without its child
    ([("prefill", 1, 1), ("decode", 1, 1), ("decode", 0, 0, "old")], False),  # not drained
    ([("prefill", 2, 2), ("decode", 1, 1)], False),   # not at its wanted groups
])
def test_fully_ready(children: list[tuple[Any, ...]], ready: bool) -> None:
    ds = two_roles()
    lws = [ready_child(ds, c[0], c[1], c[2], *(c[3:] or ())) for c in children]
    assert history.fully_ready(ds, lws, compute_revision(ds), {}) is ready


def test_a_set_at_zero_is_never_fully_ready() -> None:
    ds = two_roles(replicas=0)
    lws = [ready_child(ds, r, 0) for r in PD]
    assert history.fully_ready(ds, lws, compute_revision(ds), {}) is False


@pytest.mark.parametrize(("case", "revisions", "ready", "create", "update", "prune"), [
    # A set without history: its revision recorded as number 1.
    ("new", [], False, ("1", None), None, []),
    # ... fully Ready already (a set made before the history): marked at once, one write.
    ("new at rest", [], True, ("1", NOW), None, []),
    # Recorded, not Ready: nothing.
    ("recorded", [("cur", 1, {})], False, None, None, []),
    # Becomes fully Ready: marked once.
    ("ready", [("cur", 1, {})], True, None, {FULLY_READY_ANNOTATION: NOW}, []),
    ("marked", [("cur", 1, {FULLY_READY_ANNOTATION: "then"})], True, None, None, []),
    # Current again (an undo): renumbered above the others, its mark kept.
    ("undone", [("cur", 1, {FULLY_READY_ANNOTATION: "then"}), ("b", 2, {})], True, None,
     {"revision": 3}, []),
    # Beyond the limit (1 kept besides the current one): the oldest deleted, once done.
    ("pruned", [("a", 1, {}), ("b", 2, {}), ("cur", 3, {FULLY_READY_ANNOTATION: "t"})], True,
     None, None, ["a"]),
])
def test_decide(case: str, revisions: list[tuple[str, int, dict[str, str]]], ready: bool,
                create: tuple[str, str | None] | None, update: dict[str, Any] | None,
                prune: list[str]) -> None:
    ds = two_roles(notes={REVISION_HISTORY_LIMIT_ANNOTATION: "1"})
    key = compute_revision(ds)
    objs = []
    for name, number, notes in revisions:
        rev = recorded(two_roles(f"app:{name}"), number, **notes)
        if name == "cur":
            rev = recorded(ds, number, **notes)
        rev["metadata"]["labels"][REVISION_LABEL] = key if name == "cur" else name
        objs.append(rev)
    lws = [ready_child(ds, r, 1, 1 if ready else 0) for r in PD]
    got = history.decide(ds, objs, lws, key, {}, NOW)
    if create is None:
        assert got.create is None, case
    else:
        assert got.create is not None
        assert (str(got.create["revision"]),
                (got.create["metadata"].get("annotations") or {}).get(
                    FULLY_READY_ANNOTATION)) == create, case
    if update is None:
        assert got.update is None, case
    else:
        assert got.update is not None
        patch = got.update[1]
        flat = {**patch.get("metadata", {}).get("annotations", {}),
                **{k: v for k, v in patch.items() if k != "metadata"}}
        assert flat == update, case
    assert [revision_data.key_of(r) for r in got.prune] == prune, case


def test_nothing_is_pruned_while_a_rollout_is_under_way() -> None:
    ds = two_roles(notes={REVISION_HISTORY_LIMIT_ANNOTATION: "0"})
    key = compute_revision(ds)
    old = recorded(two_roles("app:0"), 1)
    lws = [ready_child(ds, r) for r in PD] + [ready_child(ds, "prefill", 1, rev="00000000")]
    assert history.decide(ds, [old, recorded(ds, 2)], lws, key, {}, NOW).prune == ()
    lws = lws[:2]
    assert history.decide(ds, [old, recorded(ds, 2)], lws, key, {}, NOW).prune == (old,)


def test_the_change_cause_follows_the_current_revision() -> None:
    """``kubectl annotate`` after the change: the cause reaches the revision the change made."""
    ds = two_roles(notes={CHANGE_CAUSE_ANNOTATION: "image app:1"})
    got = history.decide(ds, [recorded(two_roles(), 1)], [], compute_revision(ds), {}, NOW)
    assert got.update is not None
    assert got.update[1] == {"metadata": {"annotations": {
        CHANGE_CAUSE_ANNOTATION: "image app:1"}}}


# ------------------------------------------------------------------------------- undo


def test_roles_restored_keep_what_the_revision_does_not_cover() -> None:
    """The stored templates (and immutable fields) come back in the revision's order; the live
    replicas, scaling and strategy stay; a role the revision lacks goes; a role it has that the
    set lost comes back with what it stored."""
    old = disaggregated_set(role("prefill", 1, "app:1"), role("decode", 1, "app:1"))
    old["spec"]["roles"][1]["spec"]["groupIdentity"] = "Hash"
    live = disaggregated_set(role("decode", 5, "app:2", surge=2), role("router", 3, "app:2"))
    restored = revision_data.roles_restored(live, recorded(old, 1))
    assert [r["name"] for r in restored] == ["prefill", "decode"]
    prefill, decode = restored
    assert prefill["spec"] == {"leaderWorkerTemplate": old["spec"]["roles"][0]["spec"][
        "leaderWorkerTemplate"]}
    assert decode["spec"]["replicas"] == 5
    assert decode["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] == 2
    assert decode["spec"]["groupIdentity"] == "Hash"
    assert decode["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] == "app:1"
    # Written back, the set hashes to the revision's key again.
    assert compute_revision(disaggregated_set(*restored)) == compute_revision(old)


def test_a_role_brought_back_to_a_set_at_zero_is_at_zero() -> None:
    old = two_roles()
    live = disaggregated_set(role("decode", 0, "app:2"), role("router", 0))
    restored = revision_data.roles_restored(live, recorded(old, 1))
    assert [r["spec"].get("replicas") for r in restored] == [0, 0]


def test_an_immutable_field_the_revision_leaves_default_is_removed() -> None:
    old = two_roles()
    live = two_roles("app:2")
    live["spec"]["roles"][0]["spec"]["groupIdentity"] = "Hash"
    live["spec"]["roles"][1]["spec"]["groupIdentity"] = "Ordinal"  # the default: kept
    prefill, decode = revision_data.roles_restored(live, recorded(old, 1))
    assert "groupIdentity" not in prefill["spec"]
    assert decode["spec"]["groupIdentity"] == "Ordinal"


# ------------------------------------------------------------------ passes of the reconciler


def revisions(world: DsWorld) -> list[tuple[int, str, str | None, bool]]:
    """(number, key, change cause, fully Ready) of each of the set's revisions, by number."""
    out = []
    for obj in world.objects("ControllerRevision").values():
        annotations = obj["metadata"].get("annotations") or {}
        out.append((obj["revision"], revision_data.key_of(obj),
                    annotations.get(CHANGE_CAUSE_ANNOTATION),
                    FULLY_READY_ANNOTATION in annotations))
    return sorted(out)


def settle(world: DsWorld) -> None:
    """Passes, every child made Ready after each, until one writes nothing."""
    for _ in range(30):
        before = len(world.history)
        done = world.reconcile()
        assert done.error is None, done.error
        world.ready()
        if not done.writes() and len(world.history) == before:
            return
    raise AssertionError("the set did not settle")


def change(world: DsWorld, image: str, cause: str | None) -> None:
    def how(ds: dict[str, Any]) -> None:
        for r in ds["spec"]["roles"]:
            r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
                "image"] = image
        annotations = ds["metadata"].setdefault("annotations", {})
        if cause is not None:
            annotations[CHANGE_CAUSE_ANNOTATION] = cause
    world.edit(how)


def test_two_changes_and_an_undo() -> None:
    world = new_world(two_roles(notes={CHANGE_CAUSE_ANNOTATION: "create"}))
    first = compute_revision(world.ds)
    settle(world)
    assert revisions(world) == [(1, first, "create", True)]
    change(world, "app:2", "image 2")
    second = compute_revision(world.ds)
    settle(world)
    change(world, "app:3", "image 3")
    third = compute_revision(world.ds)
    settle(world)
    assert revisions(world) == [(1, first, "create", True), (2, second, "image 2", True),
                                (3, third, "image 3", True)]

    # The undo's write: revision 1's roles and cause back on the set.
    (one,) = [r for r in world.objects("ControllerRevision").values() if r["revision"] == 1]
    restored = revision_data.roles_restored(world.ds, one)

    def undo(ds: dict[str, Any]) -> None:
        ds["spec"]["roles"] = restored
        ds["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION] = "create"
    world.edit(undo)
    rolling = world.reconcile()
    assert world.history[-1] == f"update ControllerRevision {DS_NAME}-{first}-1"
    assert revisions(world) == [(2, second, "image 2", True), (3, third, "image 3", True),
                                (4, first, "create", True)]
    assert any(line.startswith("create LeaderWorkerSet") and first in line
               for line in rolling.writes())
    settle(world)
    assert {lws["metadata"]["labels"][REVISION_LABEL] for lws in world.lws().values()} == {first}
    assert [r[:2] for r in revisions(world)] == [(2, second), (3, third), (4, first)]


def test_the_history_limit_prunes_once_the_rollout_is_done() -> None:
    world = new_world(two_roles(notes={REVISION_HISTORY_LIMIT_ANNOTATION: "1"}))
    settle(world)
    change(world, "app:2", None)
    settle(world)
    change(world, "app:3", None)
    world.reconcile()  # the rollout starts: the third revision recorded, nothing pruned
    assert [r[0] for r in revisions(world)] == [1, 2, 3]
    settle(world)
    assert [r[0] for r in revisions(world)] == [2, 3]
    assert f"delete ControllerRevision {DS_NAME}-{compute_revision(two_roles())}-1" \
        in world.history


def test_a_set_made_before_the_history_is_recorded_without_another_write() -> None:
    """The takeover rule: a set at rest, children Ready, no revision of its own (an operator
    of an earlier release ran it): the next pass records its revision, fully Ready, and writes
    nothing else."""
    world = new_world(two_roles(notes={CHANGE_CAUSE_ANNOTATION: "old"}))
    settle(world)
    for name in list(world.objects("ControllerRevision")):
        world.remove("ControllerRevision", name)
    key = compute_revision(world.ds)
    recorded_pass = world.reconcile()
    assert recorded_pass.lines == []
    assert world.history[-1] == f"create ControllerRevision {DS_NAME}-{key}-1"
    assert revisions(world) == [(1, key, "old", True)]
    again = len(world.history)
    assert world.reconcile().lines == []
    assert world.history[again:] == []
