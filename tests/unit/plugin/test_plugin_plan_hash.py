"""``kubectl lws plan`` for Hash group identity: the simulated leader Deployment rollout with
the controller's own admission, against the LWS docs' Hash trace ("Hash Mode") and its rules for
a combined template change and scale-up; and the table and data the plugin prints.

Rows are written as ``(old groups, new groups, available)`` with one symbol per group (✅
Ready, ⏳ starting, 🔒 SchedulingGated, 🗑️ tearing down)."""

from __future__ import annotations

import pytest

from lws_operator.plugin.analysis.hash_rollout_preview import (
    GATED,
    HASH_SYMBOLS,
    READY,
    STARTING,
    TEARING,
    HashPreview,
    HashPreviewError,
    HashPreviewInput,
    LiveHashGroup,
    preview_hash_rollout,
)
from lws_operator.plugin.output import Paint
from lws_operator.plugin.plan import hash_preview_data, hash_state, hash_table, summary

Row = tuple[str, str, int]


def at_rest(replicas: int, *, new_replicas: int | None = None, max_unavailable: int | str = 1,
            max_surge: int | str = 1, policy: str = "PostTermination",
            template_changed: bool = True, names: tuple[str, ...] = ()) -> HashPreviewInput:
    """``replicas`` Ready groups G-aaa, G-bbb, ... on one revision, then the change."""
    return HashPreviewInput(
        name="s", replicas=replicas if new_replicas is None else new_replicas,
        max_unavailable=max_unavailable, max_surge=max_surge, policy=policy,
        template_changed=template_changed,
        groups=tuple(LiveHashGroup(f"G-{chr(97 + i) * 3}", READY, True)
                     for i in range(replicas)),
        new_names=names)


def cells(groups: tuple) -> str:  # type: ignore[type-arg]
    return " ".join(f"{c.name}{HASH_SYMBOLS[c.state]}" for c in groups)


def rows(preview: HashPreview) -> list[Row]:
    return [(cells(r.old), cells(r.new), r.available) for r in preview.rows]


GUIDE = at_rest(2, names=("G-ccc", "G-ddd"))


def test_the_guides_hash_trace_exactly() -> None:
    """LWS docs, "Hash Mode": 2 replicas, maxUnavailable 1, maxSurge 1, PostTermination; all
    five stages, with the substance of each description."""
    preview = preview_hash_rollout(GUIDE)
    assert rows(preview) == [
        ("G-aaa✅ G-bbb✅", "", 2),
        ("G-aaa✅ G-bbb🗑️", "G-ccc⏳ G-ddd🔒", 1),
        ("G-aaa✅", "G-ccc⏳ G-ddd⏳", 1),
        ("G-aaa🗑️", "G-ccc✅ G-ddd⏳", 1),
        ("", "G-ccc✅ G-ddd✅", 2),
    ]
    d = [r.description for r in preview.rows]
    assert d[0] == "Before the change (2 available)"
    assert d[1] == ("Deployment creates G-ccc, G-ddd on the new revision; Deployment "
                    "terminates G-bbb; G-ccc is ungated at once and creates its workers; "
                    "G-ddd stays SchedulingGated until G-bbb (leader + workers) finishes "
                    "terminating")
    assert d[2] == "G-bbb finishes terminating; G-ddd is ungated and creates its workers"
    assert d[3] == "G-ccc becomes ready (2 available); Deployment terminates G-aaa"
    assert d[4] == ("G-aaa finishes terminating; G-ddd becomes ready (2 available); rollout "
                    "complete on the new revision")
    assert preview.complete
    assert preview.min_available == 1
    assert (preview.max_unavailable, preview.max_surge) == (1, 1)


def test_immediate_ungates_replacements_at_once() -> None:
    preview = preview_hash_rollout(at_rest(2, policy="Immediate", names=("G-ccc", "G-ddd")))
    assert rows(preview) == [
        ("G-aaa✅ G-bbb✅", "", 2),
        ("G-aaa✅ G-bbb🗑️", "G-ccc⏳ G-ddd⏳", 1),
        ("G-aaa✅", "G-ccc⏳ G-ddd⏳", 1),
        ("G-aaa🗑️", "G-ccc✅ G-ddd✅", 2),
        ("", "G-ccc✅ G-ddd✅", 2),
    ]
    assert "G-ccc, G-ddd are ungated at once" in preview.rows[1].description
    assert "SchedulingGated" not in " ".join(r.description for r in preview.rows)
    assert preview.complete


def test_max_surge_zero_replaces_one_group_at_a_time() -> None:
    """No surge: the Deployment terminates first; the replacement stays gated until its
    predecessor is gone (G-n: stand-ins for the random keys)."""
    preview = preview_hash_rollout(at_rest(2, max_surge=0))
    assert rows(preview) == [
        ("G-aaa✅ G-bbb✅", "", 2),
        ("G-aaa✅ G-bbb🗑️", "G-1🔒", 1),
        ("G-aaa✅", "G-1⏳", 1),
        ("G-aaa🗑️", "G-1✅ G-2🔒", 1),
        ("", "G-1✅ G-2⏳", 1),
        ("", "G-1✅ G-2✅", 2),
    ]
    assert preview.complete


@pytest.mark.parametrize("policy", ["PostTermination", "Immediate"])
@pytest.mark.parametrize(("replicas", "unavailable", "surge"),
                         [(4, 1, 1), (6, 2, 1), (5, "20%", "40%"), (8, 0, 2), (3, 3, 0)])
def test_larger_sets_keep_the_deployments_bounds(replicas: int, unavailable: int | str,
                                                 surge: int | str, policy: str) -> None:
    """Every stage keeps at least replicas - maxUnavailable groups available, at most
    replicas + maxSurge live leaders, at most replicas ungated on the new revision, and under
    PostTermination no more replacements ungated than groups gone; the rollout completes."""
    preview = preview_hash_rollout(at_rest(replicas, max_unavailable=unavailable,
                                           max_surge=surge, policy=policy))
    assert preview.complete
    for row in preview.rows:
        groups = row.old + row.new
        live = [c for c in groups if c.state != TEARING]
        assert row.available >= replicas - preview.max_unavailable
        assert len(live) <= replicas + preview.max_surge
        assert sum(c.state in (READY, STARTING) for c in row.new) <= replicas
        if policy == "PostTermination":
            # ungated leaders of both revisions never exceed the capacity not held by a
            # group still tearing down
            tearing = sum(c.state == TEARING for c in groups)
            ungated = sum(c.state in (READY, STARTING) for c in groups)
            assert ungated + tearing <= replicas + preview.max_surge
    assert [c.state for c in preview.rows[-1].new] == [READY] * replicas


def test_scale_up_with_a_template_change_disrupts_no_old_group_first() -> None:
    """LWS docs, "Combined Template Update and Scale-Up": 2 -> 4 with maxUnavailable 1, so
    newReplicas - oldReplicas >= maxUnavailable: the added capacity comes up on the new
    revision and no old group is disrupted until new groups are Ready."""
    preview = preview_hash_rollout(at_rest(2, new_replicas=4))
    assert rows(preview)[1] == ("G-aaa✅ G-bbb✅", "G-1⏳ G-2⏳ G-3⏳", 2)
    assert rows(preview)[2][0] == "G-aaa🗑️ G-bbb🗑️"
    assert preview.complete
    assert len(preview.rows[-1].new) == 4


def test_scale_up_below_max_unavailable_updates_old_groups_at_once() -> None:
    """newReplicas - oldReplicas (1) < maxUnavailable (2): one old group begins updating
    alongside the added group."""
    preview = preview_hash_rollout(at_rest(2, new_replicas=3, max_unavailable=2, max_surge=0))
    stage2 = preview.rows[1]
    assert sum(c.state == TEARING for c in stage2.old) == 1
    assert preview.complete


def test_scale_without_template_change_adds_groups_on_the_current_revision() -> None:
    preview = preview_hash_rollout(at_rest(2, new_replicas=4, template_changed=False))
    assert rows(preview) == [
        ("", "G-aaa✅ G-bbb✅", 2),
        ("", "G-aaa✅ G-bbb✅ G-1⏳ G-2⏳", 2),
        ("", "G-aaa✅ G-bbb✅ G-1✅ G-2✅", 4),
    ]


def test_a_live_group_not_ready_holds_the_rollout() -> None:
    """A group not Ready now and not replaced is not assumed to heal (maxSurge 0,
    maxUnavailable 1: the Deployment cleans the unhealthy old group up first)."""
    inp = HashPreviewInput("s", 2, 1, 0, "PostTermination", False,
                           (LiveHashGroup("k1", READY, True), LiveHashGroup("k2", STARTING,
                                                                             True)))
    preview = preview_hash_rollout(inp)
    assert len(preview.rows) == 1
    assert not preview.complete


def test_invalid_bounds_are_an_error() -> None:
    with pytest.raises(HashPreviewError):
        preview_hash_rollout(at_rest(2, max_surge="lots"))


@pytest.mark.parametrize(("pod", "state"), [
    ({"metadata": {"deletionTimestamp": "t"}}, TEARING),
    ({"spec": {"schedulingGates": [{"name": "leaderworkerset.sigs.k8s.io/group-replacement"}]}},
     GATED),
    ({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, READY),
    ({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, STARTING),
])
def test_live_state_of_a_leader(pod: dict, state: str) -> None:  # type: ignore[type-arg]
    assert hash_state(pod) == state


def test_data_matches_the_ordinal_shape() -> None:
    """``-o json|yaml``: the Ordinal keys (complete, minAvailable, error, steps with stage,
    available, description), old/new groups in place of partition and per-ordinal states."""
    data = hash_preview_data(preview_hash_rollout(GUIDE))
    assert data["complete"] is True
    assert data["minAvailable"] == 1
    assert data["error"] is None
    assert data["deployment"] == {"maxUnavailable": 1, "maxSurge": 1}
    assert data["steps"][1] == {
        "stage": 2,
        "oldGroups": [{"name": "G-aaa", "state": "ready"}, {"name": "G-bbb", "state": "tearing"}],
        "newGroups": [{"name": "G-ccc", "state": "starting"}, {"name": "G-ddd", "state": "gated"}],
        "available": 1, "description": data["steps"][1]["description"]}


def test_the_printed_table() -> None:
    preview = preview_hash_rollout(GUIDE)
    data = {"namespace": "ns", "name": "s", "rollout": True,
            "templateDifference": "spec.leaderWorkerTemplate.workerTemplate", "replicas":
            {"from": 2, "to": 2}, "maxUnavailable": 1, "maxSurge": 1,
            "groupReplacementPolicy": "PostTermination", "note": None}
    lines = summary(data, preview, Paint(False))
    table = hash_table(preview, 2, Paint(False))
    assert lines[-len(table) - 2:-2] == table
    assert table[0].split() == ["STAGE", "OLD", "GROUPS", "NEW", "GROUPS", "AVAILABLE",
                                "DESCRIPTION"]
    assert table[2].startswith("2      G-aaa ✅, G-bbb 🗑️  G-ccc ⏳, G-ddd 🔒  1/2")
    assert table[5].startswith("5      none                G-ccc ✅, G-ddd ✅  2/2")
    assert lines[-1] == "Complete after 4 steps; at least 1 of 2 groups available throughout."
