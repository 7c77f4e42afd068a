"""The DisaggregatedSet revision (upstream's TestComputeRevision plus the LWS docs' group identity
rule) and the adoption by content of a set another controller made."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.logic.disaggregated.children import build_lws
from lws_operator.logic.disaggregated.revision import (
    adopted_revision,
    compute_revision,
    role_difference,
    target_revision,
)
from tests.harness.ds_bodies import ds, go_rendering, role


def test_known_values() -> None:
    """Pinned: a change of the serialization would change every running set's revision and roll
    it. The empty list hashes ``[]``, the same bytes as upstream's."""
    assert compute_revision(ds(role("prefill"), role("decode"))) == "bc254bdf"
    assert compute_revision(ds(role("decode"), role("prefill"))) == "a561e972"
    assert compute_revision({"spec": {"roles": []}}) == "4f53cda1"
    assert compute_revision({}) == "4f53cda1"


# 163-166: TestComputeRevision
def test_deterministic_and_eight_hex_characters() -> None:
    first = compute_revision(ds())
    assert first == compute_revision(ds())
    assert re.fullmatch(r"[0-9a-f]{8}", first)


def test_differs_with_size_and_role_name() -> None:
    base = compute_revision(ds(role("prefill"), role("decode")))
    assert compute_revision(ds(role("prefill", size=2), role("decode"))) != base
    assert compute_revision(ds(role("prefill"), role("decoder"))) != base


def test_role_order_is_part_of_the_revision() -> None:
    assert compute_revision(ds(role("a"), role("b"))) != compute_revision(ds(role("b"), role("a")))


def test_adding_or_removing_a_role_changes_it() -> None:
    two = compute_revision(ds(role("a"), role("b")))
    assert compute_revision(ds(role("a"), role("b"), role("c"))) != two


def test_template_changes_roll() -> None:
    base = compute_revision(ds(role("prefill"), role("decode")))
    assert compute_revision(ds(role("prefill", image="nginx:2.0"), role("decode"))) != base


@pytest.mark.parametrize("change", [
    {"replicas": 7},
    {"rolloutStrategy": {"type": "RollingUpdate",
                         "rollingUpdateConfiguration": {"maxSurge": 3}}},
    {"startupPolicy": "LeaderReady"},
    {"networkConfig": {"subdomainPolicy": "UniquePerReplica"}},
    {"groupIdentity": "Ordinal"},           # the default, spelled out
    {"podTerminationPolicy": "Sequential"},  # the default, spelled out
    {"groupReplacementPolicy": "PostTermination"},
])
def test_fields_outside_the_revision(change: dict[str, Any]) -> None:
    base = compute_revision(ds(role("prefill"), role("decode")))
    assert compute_revision(ds(role("prefill", **change), role("decode"))) == base


def test_metadata_scaling_slices_and_placement_are_outside_the_revision() -> None:
    base = compute_revision(ds(role("prefill"), role("decode")))
    prefill = role("prefill", external=True)
    prefill["metadata"] = {"labels": {"a": "b"}, "annotations": {"c": "d"}}
    assert compute_revision(ds(prefill, role("decode"), slices=3,
                               placement={"type": "ExclusiveSlice", "topology": "z"})) == base


@pytest.mark.parametrize("change", [
    {"groupIdentity": "Hash"},
    {"podTerminationPolicy": "Parallel"},
    {"scheduling": {"schedulingPolicy": {"gang": {}}}},
])
def test_immutable_fields_the_guide_adds_roll(change: dict[str, Any]) -> None:
    """LWS docs "Group Identity": a role may change group identity modes, which rolls its
    LeaderWorkerSets like a template update (the field is immutable on a LeaderWorkerSet)."""
    base = compute_revision(ds(role("prefill"), role("decode")))
    changed = compute_revision(ds(role("prefill", **change), role("decode")))
    assert changed != base
    assert compute_revision(ds(role("prefill", **change), role("decode"))) == changed


# --------------------------------------------------------------------- adoption by content

GO_REV = "46039bb8"


def go_children(owner: dict[str, Any], rev: str = GO_REV, slices: int = 1,
                created: str = "2026-01-01T00:00:00Z",
                roles: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    out = []
    for index in range(slices):
        for spec_role in roles if roles is not None else owner["spec"]["roles"]:
            lws = go_rendering(build_lws(owner, spec_role, index, rev, 1))
            lws["metadata"]["creationTimestamp"] = created
            out.append(lws)
    return out


def test_our_revision_present_means_nothing_to_adopt() -> None:
    owner = ds()
    ours = compute_revision(owner)
    children = go_children(owner) + go_children(owner, rev=ours)
    assert adopted_revision(owner, children) is None
    assert target_revision(owner, children) == ours


def test_a_set_the_go_controller_made_is_adopted() -> None:
    owner = ds()
    children = go_children(owner)
    assert adopted_revision(owner, children) == GO_REV
    assert target_revision(owner, children) == GO_REV


def test_quantities_and_go_zero_values_compare_equal() -> None:
    prefill = role("prefill")
    prefill["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "resources"] = {"limits": {"cpu": "1000m", "memory": "1024Mi"}}
    owner = ds(prefill, role("decode"))
    children = go_children(owner)
    children[0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "resources"] = {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert adopted_revision(owner, children) == GO_REV


def test_a_changed_template_is_not_adopted() -> None:
    children = go_children(ds())
    changed = ds(role("prefill", image="nginx:2.0"), role("decode"))
    assert role_difference(DisaggregatedSetView(changed).roles[0], children[0]) is not None
    assert adopted_revision(changed, children) is None
    assert target_revision(changed, children) == compute_revision(changed)


def test_the_role_set_must_match() -> None:
    owner = ds()
    children = go_children(owner)
    assert adopted_revision(owner, children[:1]) is None             # a role missing
    three = ds(role("prefill"), role("decode"), role("encode"))
    assert adopted_revision(three, children) is None                  # a role added since
    extra = go_children(three, roles=three["spec"]["roles"])
    assert adopted_revision(owner, extra) is None                     # a role removed since


def test_foreign_children_are_never_adopted() -> None:
    owner = ds()
    children = go_children(owner)
    for lws in children:
        lws["metadata"]["ownerReferences"][0]["uid"] = "other"
    assert adopted_revision(owner, children) is None


def test_mid_rollout_the_revision_matching_the_spec_wins() -> None:
    before = ds(role("prefill", image="nginx:0.9"), role("decode", image="nginx:0.9"))
    owner = ds()
    children = go_children(before, rev="0ld0ld00") + go_children(owner)
    assert adopted_revision(owner, children) == GO_REV
    # A revert to the old templates during takeover keeps the old revision.
    assert adopted_revision(before, children) == "0ld0ld00"


def test_every_slice_must_match() -> None:
    owner = ds(slices=2)
    children = go_children(owner, slices=2)
    assert adopted_revision(owner, children) == GO_REV
    children[3]["spec"]["leaderWorkerTemplate"]["size"] = 2
    assert adopted_revision(owner, children) is None


def test_system_labels_and_placement_terms_are_not_template_content() -> None:
    prefill = role("prefill")
    prefill["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"app": "user", "tier": "x"}}
    made_with_policy = ds(prefill, role("decode"),
                          placement={"type": "ExclusiveTopology", "topology": "rack"})
    children = go_children(made_with_policy)
    # The policy is not part of the revision: removed since, the children still match.
    owner = ds(prefill, role("decode"))
    assert adopted_revision(owner, children) == GO_REV
    # The user's own label is content.
    relabelled = copy.deepcopy(prefill)
    relabelled["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]["labels"][
        "tier"] = "y"
    assert adopted_revision(ds(relabelled, role("decode")), children) is None


def test_user_affinity_is_content() -> None:
    prefill = role("prefill")
    prefill["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu",
                                                          "operator": "Exists"}]}]}}}
    owner = ds(prefill, role("decode"), placement={"type": "ExclusiveSlice", "topology": "z"})
    children = go_children(owner)
    assert adopted_revision(owner, children) == GO_REV
    assert adopted_revision(ds(role("prefill"), role("decode")), children) is None


def test_group_identity_is_compared_by_effective_value() -> None:
    owner = ds()
    children = go_children(owner)
    children[0]["spec"]["groupIdentity"] = "Ordinal"   # the LeaderWorkerSet webhook's default
    assert adopted_revision(owner, children) == GO_REV
    hashed = ds(role("prefill", groupIdentity="Hash"), role("decode"))
    assert adopted_revision(hashed, children) is None


def test_a_reorder_of_roles_keeps_the_running_revision() -> None:
    owner = ds(role("prefill"), role("decode"))
    ours = compute_revision(owner)
    children = go_children(owner, rev=ours)
    reordered = ds(role("decode"), role("prefill"))
    assert compute_revision(reordered) != ours
    assert target_revision(reordered, children) == ours


def test_the_newest_of_several_matches_wins() -> None:
    owner = ds()
    older = go_children(owner, rev="aaaaaaaa", created="2026-01-01T00:00:00Z")
    newer = go_children(owner, rev="bbbbbbbb", created="2026-01-02T00:00:00Z")
    assert adopted_revision(owner, newer + older) == "bbbbbbbb"
    assert adopted_revision(owner, older + newer) == "bbbbbbbb"


def test_children_without_a_revision_label_are_not_a_revision() -> None:
    owner = ds()
    children = go_children(owner, rev="")
    assert adopted_revision(owner, children) is None


def test_key_order_does_not_matter() -> None:
    prefill = role("prefill")
    template = prefill["spec"]["leaderWorkerTemplate"]
    reordered = {"name": "prefill", "spec": {"leaderWorkerTemplate": dict(
        reversed(list(template.items())))}}
    assert compute_revision(ds(reordered, role("decode"))) == compute_revision(
        ds(prefill, role("decode")))


def test_a_default_materialised_later_rolls_nothing() -> None:
    """A stored role that gains a default value on read (a newer schema, or our webhook's
    defaults spelled out by a user) hashes differently, yet its running children still match
    it: the set keeps its revision instead of rolling every group."""
    owner = ds()
    ours = compute_revision(owner)
    children = go_children(owner, rev=ours)
    defaulted = copy.deepcopy(owner)
    for spec_role in defaulted["spec"]["roles"]:
        spec_role["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RecreateGroupOnPodRestart"
    assert compute_revision(defaulted) != ours
    assert target_revision(defaulted, children) == ours
