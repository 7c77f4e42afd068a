"""``kubectl lws plan``'s pure parts: the rollout preview against the LWS docs' trace table
and the rollouts of upstream's test/integration/controllers/leaderworkerset_test.go, the
readiness orders, and the proposed change (does it roll?).

Rows are written as the LWS docs write them: partition, leader StatefulSet replicas, and one
symbol per group (✅ new and Ready, ⏳ new and not Ready, ❎ old and Ready, ❌ old and not
Ready)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from lws_operator.logic.rollout.pacing import LeaderStatefulSetState
from lws_operator.plugin.analysis.rollout_preview import (
    BATCH,
    ONE,
    SYMBOLS,
    LiveGroup,
    PreviewInput,
    preview_rollout,
)
from lws_operator.plugin.analysis.set_change import (
    ChangeError,
    ImageChange,
    parse_image,
    proposed,
    refusal,
    template_change,
)

Row = tuple[int, int, str]


def at_rest(replicas: int, *, max_unavailable: int | str = 1, max_surge: int | str = 0,
            partition: int = 0, new_replicas: int | None = None,
            template_changed: bool = True, ready: str | None = None) -> PreviewInput:
    """A set at rest on one revision (``ready``: per group "y"/"n", default all Ready),
    changed to ``new_replicas`` and (``template_changed``) new templates."""
    states = ready or "y" * replicas
    return PreviewInput(
        name="s", replicas=replicas if new_replicas is None else new_replicas,
        partition=partition, max_unavailable=max_unavailable, max_surge=max_surge, size=4,
        template_changed=template_changed,
        leader_sts=LeaderStatefulSetState(replicas, 0, str(replicas)),
        groups=tuple(LiveGroup(ready=c == "y", current=True) for c in states))


def rows(inp: PreviewInput, order: str = BATCH,
         schedule: Sequence[Sequence[int]] | None = None) -> list[Row]:
    preview = preview_rollout(inp, order, schedule)
    return [(r.partition, r.replicas, "".join(SYMBOLS[g] for g in r.groups))
            for r in preview.rows]


def test_the_guides_trace_table_exactly() -> None:
    """LWS docs, "Rolling Update Process": 4 replicas, maxUnavailable 2, maxSurge 2, the groups
    turning Ready in the order the docs' stages show; all nine stages, descriptions too."""
    inp = at_rest(4, max_unavailable=2, max_surge=2)
    preview = preview_rollout(inp, schedule=[[4], [5], [2, 3], [1], [0]])
    assert [(r.stage, r.partition, r.replicas, "".join(SYMBOLS[g] for g in r.groups))
            for r in preview.rows] == [
        (1, 0, 4, "✅✅✅✅"),  # before the rolling update
        (2, 4, 6, "❎❎❎❎⏳⏳"),  # rolling update starts; 2 surge replicas created
        (3, 2, 6, "❎❎⏳⏳⏳⏳"),  # partition decreases to 2; R-2 & R-3 begin update
        (4, 2, 6, "❎❎⏳⏳✅⏳"),  # R-4 becomes ready; partition waits for R-5
        (5, 0, 6, "⏳⏳⏳⏳✅✅"),  # R-5 becomes ready; partition drops to 0; R-0 & R-1 begin
        (6, 0, 6, "⏳⏳✅✅✅✅"),  # become ready
        (7, 0, 4, "⏳⏳✅✅"),  # scaled down to 4 replicas; surge replicas reclaimed
        (8, 0, 4, "⏳✅✅✅"),  # R-1 becomes ready
        (9, 0, 4, "✅✅✅✅"),  # R-0 becomes ready; rolling update complete
    ]
    assert [r.description for r in preview.rows] == [
        "Before the change",
        "2 surge replicas created (R-4, R-5); partition rises to 4",
        "Partition decreases to 2; R-2, R-3 begin update",
        "R-4 becomes ready",
        "R-5 becomes ready; partition decreases to 0; R-0, R-1 begin update",
        "R-2, R-3 become ready",
        "Scaled down to 4 replicas; surge replicas reclaimed",
        "R-1 becomes ready",
        "R-0 becomes ready; rolling update complete",
    ]
    assert [r.available for r in preview.rows] == [4, 4, 2, 3, 2, 4, 2, 3, 4]
    assert preview.complete
    assert preview.min_available == 2  # replicas - maxUnavailable, never fewer


@pytest.mark.parametrize(("inp", "order", "want"), [
    # The LWS docs' example in the two built-in orders.
    (at_rest(4, max_unavailable=2, max_surge=2), BATCH, [
        (0, 4, "✅✅✅✅"), (4, 6, "❎❎❎❎⏳⏳"), (2, 6, "❎❎⏳⏳⏳⏳"), (0, 6, "⏳⏳⏳⏳✅✅"),
        (0, 6, "⏳⏳✅✅✅✅"), (0, 4, "⏳⏳✅✅"), (0, 4, "✅✅✅✅")]),
    (at_rest(4, max_unavailable=2, max_surge=2), ONE, [
        (0, 4, "✅✅✅✅"), (4, 6, "❎❎❎❎⏳⏳"), (2, 6, "❎❎⏳⏳⏳⏳"), (2, 6, "❎❎⏳⏳✅⏳"),
        (0, 6, "⏳⏳⏳⏳✅✅"), (0, 6, "⏳⏳✅⏳✅✅"), (0, 6, "⏳⏳✅✅✅✅"), (0, 4, "⏳⏳✅✅"),
        (0, 4, "✅⏳✅✅"), (0, 4, "✅✅✅✅")]),
    # Upstream's "leaderTemplate changed with default strategy" (maxUnavailable 1, maxSurge 0):
    # partition 4, then 3, and one group at a time down to 0.
    (at_rest(4), BATCH, [
        (0, 4, "✅✅✅✅"), (4, 4, "❎❎❎❎"), (3, 4, "❎❎❎⏳"), (2, 4, "❎❎⏳✅"),
        (1, 4, "❎⏳✅✅"), (0, 4, "⏳✅✅✅"), (0, 4, "✅✅✅✅")]),
    # Upstream's "...maxUnavailable greater than replicas": the partition drops straight to 0.
    (at_rest(4, max_unavailable=10), BATCH, [
        (0, 4, "✅✅✅✅"), (4, 4, "❎❎❎❎"), (0, 4, "⏳⏳⏳⏳"), (0, 4, "✅✅✅✅")]),
    # Upstream's "...maxUnavailable zero and maxSurge set": one surge group, replicas back to 4
    # only at the end.
    (at_rest(4, max_unavailable=0, max_surge=1), BATCH, [
        (0, 4, "✅✅✅✅"), (4, 5, "❎❎❎❎⏳"), (3, 5, "❎❎❎⏳✅"), (2, 5, "❎❎⏳✅✅"),
        (1, 5, "❎⏳✅✅✅"), (0, 5, "⏳✅✅✅✅"), (0, 5, "✅✅✅✅✅"), (0, 4, "✅✅✅✅")]),
    # LWS docs, "Combined Template Update and Scale-Up": 4 -> 6 with maxUnavailable 1: the new
    # ordinals come up on the new revision and no old group is disrupted until they are Ready.
    (at_rest(4, new_replicas=6), BATCH, [
        (0, 4, "✅✅✅✅"), (4, 6, "❎❎❎❎⏳⏳"), (3, 6, "❎❎❎⏳✅✅"), (2, 6, "❎❎⏳✅✅✅"),
        (1, 6, "❎⏳✅✅✅✅"), (0, 6, "⏳✅✅✅✅✅"), (0, 6, "✅✅✅✅✅✅")]),
    # The user's partition holds the groups below it on the old revision.
    (at_rest(4, partition=2), BATCH, [
        (0, 4, "✅✅✅✅"), (4, 4, "❎❎❎❎"), (3, 4, "❎❎❎⏳"), (2, 4, "❎❎⏳✅"),
        (2, 4, "❎❎✅✅")]),
    # No template change: a scale-up adds groups on the current revision, replaces none.
    (at_rest(2, new_replicas=4, template_changed=False), BATCH, [
        (0, 2, "✅✅"), (0, 4, "✅✅⏳⏳"), (0, 4, "✅✅✅✅")]),
    # A scale-down removes the highest ordinals.
    (at_rest(4, new_replicas=2, template_changed=False), BATCH, [
        (0, 4, "✅✅✅✅"), (0, 2, "✅✅")]),
    # A group not Ready now stays so and uses up maxUnavailable (upstream's rollingUpdateParameters:
    # groups already down below the window count against it): with maxUnavailable 1 nothing moves.
    (at_rest(4, ready="ynyy"), BATCH, [(0, 4, "✅⏳✅✅"), (4, 4, "❎❌❎❎")]),
    # With maxUnavailable 2 the rollout goes on, and replaces the broken group when the
    # partition reaches it.
    (at_rest(4, max_unavailable=2, ready="ynyy"), BATCH, [
        (0, 4, "✅⏳✅✅"), (4, 4, "❎❌❎❎"), (3, 4, "❎❌❎⏳"), (1, 4, "❎⏳⏳✅"),
        (0, 4, "⏳✅✅✅"), (0, 4, "✅✅✅✅")]),
])
def test_traces(inp: PreviewInput, order: str, want: list[Row]) -> None:
    assert rows(inp, order) == want


def test_a_stalled_rollout_is_not_complete() -> None:
    """A broken group using up maxUnavailable: the simulation ends where the controller
    would wait, and says the rollout does not complete."""
    preview = preview_rollout(at_rest(4, ready="ynyy"))
    assert not preview.complete
    assert preview.error is None
    assert preview.min_available == 3


# ---------------------------------------------------------------------------- the change

def live() -> dict[str, Any]:
    """A stored set (defaulted, as admission left it): 2 groups of 2."""
    return proposed({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                     "metadata": {"name": "test-sample", "namespace": "default"},
                     "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2,
                              "workerTemplate": {"spec": {"containers": [
                                  {"name": "c", "image": "img:v1"}]}}}}})


def test_parse_image() -> None:
    assert parse_image("engine=img:v2") == ImageChange("engine", "img:v2")
    assert parse_image("img:v2") == ImageChange(None, "img:v2")
    assert parse_image("*=img:v2") == ImageChange(None, "img:v2")
    assert parse_image("registry:5000/img:v2") == ImageChange(None, "registry:5000/img:v2")
    with pytest.raises(ChangeError):
        parse_image("=img")


@pytest.mark.parametrize(("change", "rolls"), [
    ({"replicas": 5}, False),
    ({"size": 3}, True),
    ({"images": [ImageChange(None, "other:v9")]}, True),
    ({"manifest": {"kind": "LeaderWorkerSet", "metadata": {"name": "test-sample"},
                   "spec": {"replicas": 7, "leaderWorkerTemplate": {"size": 2,
                            "workerTemplate": {"spec": {"containers": [
                                {"name": "c", "image": "img:v1"}]}}}}}}, False),
])
def test_whether_a_change_rolls(change: dict[str, Any], rolls: bool) -> None:
    base = live()
    new = proposed(base, **change)
    assert (template_change(base, new) is not None) is rolls
    assert base["spec"]["leaderWorkerTemplate"]["size"] == 2  # the live object is untouched


def test_unknown_container_and_foreign_manifest_are_refused() -> None:
    with pytest.raises(ChangeError, match="no container named 'nope'"):
        proposed(live(), images=[ImageChange("nope", "x")])
    with pytest.raises(ChangeError, match="names 'other'"):
        proposed(live(), manifest={"metadata": {"name": "other"}, "spec": {}})
    with pytest.raises(ChangeError, match="a Deployment"):
        proposed(live(), manifest={"kind": "Deployment", "spec": {}})


def test_admission_refusal_is_reported() -> None:
    base = live()
    assert refusal(base, proposed(base, replicas=3)) is None
    assert refusal(base, proposed(base, replicas=-1)) is not None
