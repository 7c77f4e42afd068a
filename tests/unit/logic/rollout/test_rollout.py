"""Rollout pacing (upstream's rollingUpdateParameters, leaderworkerset_controller.go): every
trace it implies, the rollout entries of upstream's
test/integration/controllers/leaderworkerset_test.go
(#N: the entry's position in its table), the LWS docs' nine-stage table and its combined
template-update-and-scale-up rules.

A trace is a table of successive controller passes. Each row gives the group states observed before
the pass and the leader StatefulSet's (partition, replicas) expected after it, plus the exact event
notes. The runner chains the rows the way the cluster would: the next pass sees the StatefulSet
this pass applied (its replicas, partition and `replicas` annotation = spec.replicas).

Group codes, one character per ordinal of the leader StatefulSet (`[0, stsR)`):
  R = ready and updated, o = ready on an old revision, u = updated but not ready (being created
  or starting on the new revision), - = neither (missing, or old and unready).
Upstream's integration tests have no StatefulSet controller, so groups above the partition stay
"o" until a test marks them ready; the traces below use realistic "u" states where upstream's
numbers do not depend on it, and the integration tests' states where they do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    REPLICAS_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.logic.objects.events import Event
from lws_operator.logic.rollout.pacing import (
    GroupState,
    LeaderStatefulSetState,
    RolloutError,
    RolloutSnapshot,
    group_states,
    leader_sts_max_unavailable,
    plan_rollout,
    rollout_snapshot,
    scaled_max_surge,
    scaled_max_unavailable,
)

_CODES = {
    "R": GroupState(ready=True, updated=True),
    "o": GroupState(ready=True, updated=False),
    "u": GroupState(ready=False, updated=True),
    "-": GroupState(ready=False, updated=False),
}


def _groups(code: str) -> tuple[GroupState, ...]:
    return tuple(_CODES[c] for c in code)


@dataclass(frozen=True)
class Pass:
    groups: str
    expect: tuple[int, int]
    notes: tuple[str, ...] = ()
    replicas: int | None = None  # spec.replicas edited just before this pass
    updated: bool = False  # this pass created a new revision
    lws_partition: int | None = None  # rollingUpdateConfiguration.partition edited


@dataclass(frozen=True)
class Trace:
    replicas: int
    passes: tuple[Pass, ...]
    max_unavailable: int | str = 1
    max_surge: int | str = 0
    lws_partition: int = 0
    start: tuple[int, int] | None = None  # leader sts (partition, replicas); None = at rest
    name: str = "test-sample"
    size: int = 2
    extra: dict[str, Any] = field(default_factory=dict)


def _run(trace: Trace) -> None:
    replicas, lws_partition = trace.replicas, trace.lws_partition
    partition, sts_replicas = trace.start if trace.start else (lws_partition, replicas)
    sts = LeaderStatefulSetState(sts_replicas, partition, str(replicas))
    for number, step in enumerate(trace.passes, start=1):
        if step.replicas is not None:
            replicas = step.replicas
        if step.lws_partition is not None:
            lws_partition = step.lws_partition
        assert len(step.groups) == sts.replicas, f"pass {number}: table lists wrong ordinals"
        decision = plan_rollout(
            RolloutSnapshot(
                lws_name=trace.name,
                replicas=replicas,
                lws_partition=lws_partition,
                max_unavailable=trace.max_unavailable,
                max_surge=trace.max_surge,
                size=trace.size,
                lws_updated=step.updated,
                current_key="new",
                leader_sts=sts,
                groups=_groups(step.groups),
            )
        )
        got = (decision.partition, decision.replicas)
        notes = tuple(e.note for e in decision.events + decision.events_after_apply)
        assert (got, notes) == (step.expect, step.notes), f"pass {number}"
        sts = LeaderStatefulSetState(decision.replicas, decision.partition, str(replicas))


def _upd(p: int, q: int | None = None) -> str:
    if q is None:
        return f"Updating replica {p}"
    return f"Updating replicas {p} to {q} (inclusive)"


def _surge(a: int, b: int | None = None, name: str = "test-sample") -> str:
    if b is None:
        return f"deleting surge replica {name}-{a}"
    return f"deleting surge replicas from {name}-{a} to {name}-{b}"


TRACES: dict[str, Trace] = {
    # #27: defaults, R 4: 4 -> 3 -> 2 ... -> 0; a group turning unready again does
    # not move the partition back up; group 1 ready early does not skip group 2.
    "default-strategy-27": Trace(
        replicas=4,
        passes=(
            Pass("oooo", (4, 4), updated=True),
            Pass("oooo", (3, 4), (_upd(3),)),
            Pass("ooou", (3, 4)),
            Pass("oooR", (2, 4), (_upd(2),)),
            Pass("oRoR", (2, 4)),
            Pass("oRou", (2, 4)),
            Pass("RRRR", (0, 4), (_upd(0, 1),)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # maxUnavailable 2: 4 -> 2 -> 1 (after group 3) -> 0 (after group 2). #28.
    "max-unavailable-2-28": Trace(
        replicas=4,
        max_unavailable=2,
        passes=(
            Pass("oooo", (4, 4), updated=True),
            Pass("oooo", (2, 4), (_upd(2, 3),)),
            Pass("oouR", (1, 4), (_upd(1),)),
            Pass("ouRR", (0, 4), (_upd(0),)),
            Pass("uuRR", (0, 4)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # maxUnavailable >= R drops straight to 0 (on the pass after the new revision). #29.
    "max-unavailable-over-replicas-29": Trace(
        replicas=4,
        max_unavailable=10,
        passes=(
            Pass("oooo", (4, 4), updated=True),
            Pass("oooo", (0, 4), (_upd(0, 3),)),
            Pass("uuuu", (0, 4)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # maxUnavailable 0, maxSurge 1: partition 4, then 3, 2, 1, 0 as groups 4, 3, 2, 1
    # become ready; replicas back to 4 only once every group is ready. #33.
    "max-unavailable-0-surge-1-33": Trace(
        replicas=4,
        max_unavailable=0,
        max_surge=1,
        passes=(
            Pass("oooo", (4, 5), updated=True),
            Pass("oooou", (4, 5)),
            Pass("ooooR", (3, 5), (_upd(3),)),
            Pass("ooouR", (3, 5)),
            Pass("oooRR", (2, 5), (_upd(2),)),
            Pass("ooRRR", (1, 5), (_upd(1),)),
            Pass("oRRRR", (0, 5), (_upd(0),)),
            Pass("uRRRR", (0, 5)),
            Pass("RRRRR", (0, 4), (_surge(4),)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # maxSurge 1, R 4: replicas 5, partition 4 then 3; each tail group lowers it by one;
    # replicas drop to 4 after group 1 is ready, before group 0. #34.
    "max-surge-1-34": Trace(
        replicas=4,
        max_surge=1,
        passes=(
            Pass("oooo", (4, 5), updated=True),
            Pass("oooou", (3, 5), (_upd(3),)),
            Pass("ooouR", (2, 5), (_upd(2),)),
            Pass("oouRR", (1, 5), (_upd(1),)),
            Pass("ouRRR", (0, 5), (_upd(0),)),
            Pass("uRRRR", (0, 4), (_surge(4),)),
            Pass("uRRR", (0, 4)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # maxUnavailable 2, maxSurge 2: replicas 6, partition 2; reclaim to 4 once groups 2
    # and 3 are ready (surge still unready), then partition 0. #35.
    "max-unavailable-2-surge-2-35": Trace(
        replicas=4,
        max_unavailable=2,
        max_surge=2,
        passes=(
            Pass("oooo", (4, 6), updated=True),
            Pass("oooouu", (2, 6), (_upd(2, 3),)),
            Pass("ooRRuu", (2, 4), (_surge(4, 5),)),
            Pass("ooRR", (0, 4), (_upd(0, 1),)),
            Pass("uuRR", (0, 4)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # maxSurge 4 > R 2 is capped at 2: wantReplicas(2) = 2 + max(0, 2 - 1) = 3, then
    # partition 1. #38.
    "max-surge-over-replicas-38": Trace(
        replicas=2,
        max_surge=4,
        passes=(
            Pass("oo", (2, 3), updated=True),
            Pass("oou", (1, 3), (_upd(1),)),
            Pass("ouR", (0, 3), (_upd(0),)),
            Pass("uRR", (0, 2), (_surge(2),)),
            Pass("RR", (0, 2)),
        ),
    ),
    # maxSurge == R gives 2R - maxUnavailable leader replicas (e2e: R 4, surge 4 -> 7).
    "max-surge-equals-replicas": Trace(
        replicas=4,
        max_surge=4,
        passes=(
            Pass("oooo", (4, 7), updated=True),
            Pass("oooouuu", (3, 7), (_upd(3),)),
            Pass("ooouuuu", (3, 7)),
            Pass("ooouRRR", (0, 7), (_upd(0, 2),)),
            Pass("uuuRRRR", (0, 6), (_surge(6),)),
            Pass("uuRRRR", (0, 5), (_surge(5),)),
            Pass("uRRRR", (0, 4), (_surge(4),)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # #30: template and replicas changed together (4 -> 6): partition 4 = old R,
    # replicas 6; the partition holds until ordinals 4 and 5 are ready.
    "template-and-scale-up-30": Trace(
        replicas=4,
        passes=(
            Pass("oooo", (4, 6), updated=True, replicas=6),
            Pass("oooouu", (4, 6)),
            Pass("ooooRu", (4, 6)),
            Pass("ooooRR", (3, 6), (_upd(3),)),
            Pass("ooouRR", (3, 6)),
            Pass("oooRRR", (2, 6), (_upd(2),)),
            Pass("ooRRRR", (1, 6), (_upd(1),)),
            Pass("oRRRRR", (0, 6), (_upd(0),)),
            Pass("RRRRRR", (0, 6)),
        ),
    ),
    # LWS docs "Combined Template Update and Scale-Up", newReplicas - oldReplicas >= maxUnavailable
    # (4 -> 6, maxUnavailable 2): no old group is disrupted until new ones are ready.
    "guide-combined-delta-covers-max-unavailable": Trace(
        replicas=4,
        max_unavailable=2,
        passes=(
            Pass("oooo", (4, 6), updated=True, replicas=6),
            Pass("oooouu", (4, 6)),
            Pass("ooooRu", (4, 6)),
            Pass("ooooRR", (2, 6), (_upd(2, 3),)),
        ),
    ),
    # LWS docs "Combined Template Update and Scale-Up", newReplicas - oldReplicas < maxUnavailable
    # (4 -> 5, maxUnavailable 3): 3 - 1 = 2 old groups (2 and 3) start updating at once.
    "guide-combined-delta-below-max-unavailable": Trace(
        replicas=4,
        max_unavailable=3,
        passes=(
            Pass("oooo", (4, 5), updated=True, replicas=5),
            Pass("oooou", (2, 5), (_upd(2, 3),)),
            Pass("oouuu", (2, 5)),
            Pass("ooRRR", (0, 5), (_upd(0, 1),)),
        ),
    ),
    # #36: R 2 -> 4 with a template change, maxSurge 2: partition 2 = old R; the
    # next pass bursts to 6; replicas come back through 5 and 4 as targets become ready.
    "template-and-scale-up-surge-36": Trace(
        replicas=2,
        max_surge=2,
        passes=(
            Pass("oo", (2, 4), updated=True, replicas=4),
            Pass("oouu", (2, 6)),
            Pass("oouuuu", (2, 6)),
            Pass("ooRRRR", (0, 5), (_surge(5), _upd(0, 1))),
            Pass("uuRRR", (0, 5)),
            Pass("uRRRR", (0, 4), (_surge(4),)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # #31: replicas raised mid-rollout (4 -> 6, no surge): partition kept at 2,
    # replicas 6; ready new ordinals 4 and 5 extend the ready tail.
    "scale-up-mid-rollout-31": Trace(
        replicas=4,
        passes=(
            Pass("oooo", (4, 4), updated=True),
            Pass("oooo", (3, 4), (_upd(3),)),
            Pass("oooR", (2, 4), (_upd(2),)),
            Pass("oouR", (2, 6), replicas=6),
            Pass("oouRRR", (2, 6)),
            Pass("ooRRRR", (1, 6), (_upd(1),)),
            Pass("oRRRRR", (0, 6), (_upd(0),)),
            Pass("RRRRRR", (0, 6)),
        ),
    ),
    # #32: replicas lowered mid-rollout (6 -> 3): replicas 3, partition
    # min(5, burst 3) = 3, then 2 on later passes.
    "scale-down-mid-rollout-32": Trace(
        replicas=6,
        passes=(
            Pass("oooooo", (6, 6), updated=True),
            Pass("oooooo", (5, 6), (_upd(5),)),
            Pass("ooooou", (3, 3), (_surge(3, 5), _upd(3, 4)), replicas=3),
            Pass("ooo", (2, 3), (_upd(2),)),
            Pass("oou", (2, 3)),
            Pass("ooR", (1, 3), (_upd(1),)),
            Pass("ouR", (1, 3)),
            Pass("oRR", (0, 3), (_upd(0),)),
            Pass("RRR", (0, 3)),
        ),
    ),
    # #37: template change with a scale-down (6 -> 3, maxSurge 2): partition
    # min(3, 6) = 3, replicas wantReplicas(3) = 5 ("deleting surge replica test-sample-5"), then 2.
    "template-and-scale-down-surge-37": Trace(
        replicas=6,
        max_surge=2,
        passes=(
            Pass("oooooo", (3, 5), (_surge(5),), updated=True, replicas=3),
            Pass("ooouu", (2, 5), (_upd(2),)),
            Pass("oouuu", (2, 5)),
            Pass("ooRRR", (0, 4), (_surge(4), _upd(0, 1))),
            Pass("uuRR", (0, 4)),
            Pass("uRRR", (0, 3), (_surge(3),)),
            Pass("RRR", (0, 3)),
        ),
    ),
    # #39: scale up then down during a rollout with maxSurge 2.
    "scale-up-and-down-mid-rollout-surge-39": Trace(
        replicas=4,
        max_surge=2,
        passes=(
            Pass("oooo", (4, 6), updated=True),
            Pass("oooouu", (3, 6), (_upd(3),)),
            Pass("ooouuu", (3, 8), replicas=6),
            Pass("ooouuuuu", (3, 8)),
            Pass("ooouuuRR", (3, 8)),
            Pass("ooouuuRR", (3, 3), (_surge(3, 7),), replicas=2),
            Pass("oou", (1, 3), (_upd(1, 2),)),
            Pass("ouR", (0, 3), (_upd(0),)),
            Pass("uRR", (0, 2), (_surge(2),)),
            Pass("uR", (0, 2)),
            Pass("RR", (0, 2)),
        ),
    ),
    # #40: a second template change mid-rollout resets the partition to min(R, stsR) = 4,
    # then 3 (the integration test's groups stay ready on the previous revisions).
    "second-update-mid-rollout-40": Trace(
        replicas=4,
        max_surge=2,
        passes=(
            Pass("oooo", (4, 6), updated=True),
            Pass("oooouu", (3, 6), (_upd(3),)),
            Pass("ooouRR", (1, 6), (_upd(1, 2),)),
            Pass("oooooo", (4, 6), updated=True),
            Pass("oooooo", (3, 6), (_upd(3),)),
            Pass("RRRRRR", (0, 4), (_surge(4, 5), _upd(0, 2))),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # #47: R 4, maxUnavailable 2, group 1 already unready: base 2 plus one unavailable
    # below gives partition 3, not 2.
    "unhealthy-below-window-47": Trace(
        replicas=4,
        max_unavailable=2,
        passes=(
            Pass("o-oo", (4, 4), updated=True),
            Pass("o-oo", (3, 4), (_upd(3),)),
            Pass("o-ou", (3, 4)),
            Pass("o-oR", (1, 4), (_upd(1, 2),)),
            Pass("ouuR", (1, 4)),
            Pass("oRRR", (0, 4), (_upd(0),)),
            Pass("RRRR", (0, 4)),
        ),
    ),
    # #48: no group ready (R 2): partition 1 right away, 0 once group 1 is ready.
    "no-ready-groups-48": Trace(
        replicas=2,
        passes=(
            Pass("--", (2, 2), updated=True),
            Pass("--", (1, 2), (_upd(1),)),
            Pass("-R", (0, 2), (_upd(0),)),
            Pass("RR", (0, 2)),
        ),
    ),
    # #50: lwsP 4 of 6 holds the rollout at 4; lowering it to 2 resumes (case 5).
    "lws-partition-holds-lower-ordinals-50": Trace(
        replicas=6,
        lws_partition=4,
        passes=(
            Pass("RRRRRR", (4, 6)),
            Pass("oooooo", (6, 6), updated=True),
            Pass("oooooo", (5, 6), (_upd(5),)),
            Pass("ooooou", (5, 6)),
            Pass("oooooR", (4, 6), (_upd(4),)),
            Pass("oooouR", (4, 6)),
            Pass("ooooRR", (4, 6)),
            Pass("ooooRR", (3, 6), (_upd(3),), lws_partition=2),
            Pass("ooouRR", (3, 6)),
            Pass("oooRRR", (2, 6), (_upd(2),)),
            Pass("ooRRRR", (2, 6)),
        ),
    ),
    # #51: lwsP with maxSurge: the surge stays until lwsP is 0 and the rollout ends.
    "lws-partition-with-surge-51": Trace(
        replicas=3,
        max_surge=1,
        lws_partition=2,
        passes=(
            Pass("RRR", (2, 3)),
            Pass("ooo", (3, 4), updated=True),
            Pass("ooou", (2, 4), (_upd(2),)),
            Pass("oouR", (2, 4)),
            Pass("ooRR", (2, 4)),
            Pass("ooRR", (2, 4)),
            Pass("ooRR", (0, 4), (_upd(0, 1),), lws_partition=0),
            Pass("uuRR", (0, 4)),
            Pass("RRRR", (0, 3), (_surge(3),)),
            Pass("RRR", (0, 3)),
        ),
    ),
    # Upstream's "Rolling update with PodGroup recreation" (volcano): R 3 with defaults; each
    # replaced group ready moves it down by one.
    "gang-rolling-update-G2": Trace(
        replicas=3,
        size=3,
        passes=(
            Pass("ooo", (3, 3), updated=True),
            Pass("ooo", (2, 3), (_upd(2),)),
            Pass("oo-", (2, 3)),
            Pass("oou", (2, 3)),
            Pass("ooR", (1, 3), (_upd(1),)),
            Pass("oRR", (0, 3), (_upd(0),)),
            Pass("RRR", (0, 3)),
        ),
    ),
    # Percentages: maxUnavailable 25% of 3 rounds down to 0, maxSurge 50% of 3 rounds up to 2.
    "percent-surge-rounds-up-unavailable-down": Trace(
        replicas=3,
        max_unavailable="25%",
        max_surge="50%",
        passes=(
            Pass("ooo", (3, 5), updated=True),
            Pass("ooouu", (3, 5)),
            Pass("oooRR", (1, 5), (_upd(1, 2),)),
            Pass("ouuRR", (1, 5)),
            Pass("oRRRR", (0, 4), (_surge(4), _upd(0))),
            Pass("uRRR", (0, 4)),
            Pass("RRRR", (0, 3), (_surge(3),)),
            Pass("RRR", (0, 3)),
        ),
    ),
    # Percent surge above R is capped at R: 200% of 2 -> 2, 50% unavailable of 2 -> 1.
    "percent-surge-capped": Trace(
        replicas=2,
        max_unavailable="50%",
        max_surge="200%",
        passes=(
            Pass("oo", (2, 3), updated=True),
            Pass("oou", (1, 3), (_upd(1),)),
        ),
    ),
    # #1-#4, #6: plain scaling at rest. A scale-down reports the removed ordinals as "surge"
    # (quirk kept).
    "scale-up-at-rest-1": Trace(
        replicas=2,
        passes=(Pass("RR", (0, 3), replicas=3), Pass("RRu", (0, 3)), Pass("RRR", (0, 3))),
    ),
    "scale-down-at-rest-2": Trace(
        replicas=4,
        passes=(Pass("----", (0, 3), (_surge(3),), replicas=3), Pass("---", (0, 3))),
    ),
    "scale-down-ready-at-rest-with-surge": Trace(
        replicas=4,
        max_surge=1,
        passes=(Pass("RRRR", (0, 2), (_surge(2, 3),), replicas=2), Pass("RR", (0, 2))),
    ),
    "scale-down-to-zero-3": Trace(
        replicas=2,
        passes=(Pass("--", (0, 0), (_surge(0, 1),), replicas=0), Pass("", (0, 0))),
    ),
    "scale-up-from-zero-4": Trace(
        replicas=0,
        passes=(Pass("", (0, 3), replicas=3), Pass("---", (0, 3))),
    ),
}


@pytest.mark.parametrize("trace", TRACES.values(), ids=TRACES.keys())
def test_rollout_trace(trace: Trace) -> None:
    _run(trace)


# The docs' nine stages (R 4, maxUnavailable 2, maxSurge 2), stage by stage. Each row: the stage,
# the group states the pass producing it observes (the docs' glyphs: ✅ updated and ready, ❎ old
# revision, ⏳ updating), whether that pass created the new revision, and the stage's (partition,
# replicas). Most passes observe the previous stage's glyphs; stage 5's pass observes the change
# its own row describes (R-5 ready, before start); stage 2's sees stage 1's groups as
# old, since the new revision makes them so.
GUIDE_STAGES = (
    (1, "✅✅✅✅", False, (0, 4)),
    (2, "❎❎❎❎", True, (4, 6)),
    (3, "❎❎❎❎⏳⏳", False, (2, 6)),
    (4, "❎❎⏳⏳⏳⏳", False, (2, 6)),
    (4, "❎❎⏳⏳✅⏳", False, (2, 6)),
    (5, "❎❎⏳⏳✅✅", False, (0, 6)),
    (6, "⏳⏳⏳⏳✅✅", False, (0, 6)),
    (7, "⏳⏳✅✅✅✅", False, (0, 4)),
    (8, "⏳⏳✅✅", False, (0, 4)),
    (9, "⏳✅✅✅", False, (0, 4)),
    (9, "✅✅✅✅", False, (0, 4)),
)
_GLYPHS = {"✅": "R", "❎": "o", "⏳": "u"}


def test_guide_nine_stage_table() -> None:
    sts = LeaderStatefulSetState(replicas=4, partition=0, replicas_annotation="4")
    seen = []
    for stage, glyphs, updated, expect in GUIDE_STAGES:
        assert len(glyphs) == sts.replicas, f"stage {stage}"
        decision = plan_rollout(
            RolloutSnapshot(
                lws_name="leaderworkerset-sample",
                replicas=4,
                lws_partition=0,
                max_unavailable=2,
                max_surge=2,
                size=4,
                lws_updated=updated,
                current_key="new",
                leader_sts=sts,
                groups=_groups("".join(_GLYPHS[g] for g in glyphs)),
            )
        )
        seen.append((stage, decision.partition, decision.replicas))
        assert (decision.partition, decision.replicas) == expect, f"stage {stage}"
        sts = LeaderStatefulSetState(decision.replicas, decision.partition, "4")
    assert sorted(set(seen)) == [
        (1, 0, 4), (2, 4, 6), (3, 2, 6), (4, 2, 6), (5, 0, 6), (6, 0, 6), (7, 0, 4), (8, 0, 4),
        (9, 0, 4),
    ]  # fmt: skip


def _snapshot(**overrides: Any) -> RolloutSnapshot:
    values: dict[str, Any] = {
        "lws_name": "test-sample",
        "replicas": 4,
        "lws_partition": 0,
        "max_unavailable": 1,
        "max_surge": 0,
        "size": 2,
        "lws_updated": False,
        "current_key": "new",
        "leader_sts": LeaderStatefulSetState(4, 2, "4"),
        "groups": _groups("oooR"),
    }
    values.update(overrides)
    return RolloutSnapshot(**values)


def test_case_1_no_leader_sts_creates_with_all_replicas_and_lws_partition() -> None:
    decision = plan_rollout(_snapshot(leader_sts=None, groups=(), lws_partition=3))
    assert (decision.partition, decision.replicas) == (3, 4)
    assert decision.events == ()
    assert decision.events_after_apply == (
        Event("GroupsProgressing", "Normal", "Create", "Created leader statefulset test-sample"),
    )


@pytest.mark.parametrize("replicas", [0, 1, 5])
def test_case_1_uses_spec_replicas(replicas: int) -> None:
    decision = plan_rollout(_snapshot(leader_sts=None, groups=(), replicas=replicas))
    assert (decision.partition, decision.replicas) == (0, replicas)


def test_events_carry_reason_type_and_action() -> None:
    decision = plan_rollout(
        _snapshot(
            replicas=3,
            leader_sts=LeaderStatefulSetState(6, 5, "6"),
            groups=_groups("ooooou"),
        )
    )
    assert decision.events == (
        Event(
            "GroupsProgressing",
            "Normal",
            "Delete",
            "deleting surge replicas from test-sample-3 to test-sample-5",
        ),
    )
    assert decision.events_after_apply == (
        Event("GroupsUpdating", "Normal", "Update", "Updating replicas 3 to 4 (inclusive)"),
    )


def test_new_revision_pass_never_reports_groups_updating() -> None:
    decision = plan_rollout(
        _snapshot(lws_updated=True, leader_sts=LeaderStatefulSetState(4, 0, "4"))
    )
    assert (decision.partition, decision.replicas) == (4, 4)
    assert decision.events_after_apply == ()


def test_raising_lws_partition_reports_the_upstream_wording() -> None:
    decision = plan_rollout(
        _snapshot(
            lws_partition=3, leader_sts=LeaderStatefulSetState(4, 0, "4"), groups=_groups("RRRR")
        )
    )
    assert decision.partition == 3
    assert [e.note for e in decision.events_after_apply] == [
        "Updating replicas 3 to -1 (inclusive)"
    ]


@pytest.mark.parametrize("annotation", [None, "", "four", "4.0", " 4"])
def test_unreadable_replicas_annotation_fails_the_pass(annotation: str | None) -> None:
    with pytest.raises(RolloutError, match=r"leaderworkerset\.sigs\.k8s\.io/replicas"):
        plan_rollout(_snapshot(leader_sts=LeaderStatefulSetState(4, 2, annotation)))


def test_replicas_annotation_is_not_read_at_rest_or_while_scaling_up() -> None:
    at_rest = plan_rollout(_snapshot(leader_sts=LeaderStatefulSetState(4, 0, None)))
    assert (at_rest.partition, at_rest.replicas) == (0, 4)
    scaling = plan_rollout(_snapshot(replicas=6, leader_sts=LeaderStatefulSetState(4, 2, "x")))
    assert (scaling.partition, scaling.replicas) == (2, 6)
    updated = plan_rollout(
        _snapshot(lws_updated=True, leader_sts=LeaderStatefulSetState(4, 2, None))
    )
    assert (updated.partition, updated.replicas) == (4, 4)


def test_fewer_group_states_than_ordinals_count_as_not_ready() -> None:
    # Ordinal 3 of 4 is not listed: it is treated as absent, so nothing is ready at the tail.
    decision = plan_rollout(
        _snapshot(leader_sts=LeaderStatefulSetState(4, 3, "4"), groups=_groups("ooo"))
    )
    assert (decision.partition, decision.replicas) == (3, 4)


# Single passes of case 5 (a rollout in progress), one rule each. Columns: R, maxUnavailable,
# maxSurge, leader sts (replicas, partition), groups, expected (partition, replicas).
CASE_5 = {
    # Step 3 slides across a ready group that is already updated (2), stopping only at an old one.
    "slides-over-updated": (4, 2, 0, (4, 4), "-oRu", (2, 4)),
    # ...and across unready ones, down to base but not below it.
    "slides-over-unready-to-base": (4, 2, 0, (4, 4), "o--u", (2, 4)),
    # Two groups unavailable below the window push the partition up by two.
    "unready-below-window": (5, 3, 0, (5, 5), "--ooo", (4, 5)),
    # The partition never rises within a rollout, even when the window would allow it.
    "never-rises": (4, 1, 0, (4, 1), "ooou", (1, 4)),
    # The tail counts only contiguous ready-and-updated groups from the top.
    "tail-is-contiguous": (4, 1, 0, (4, 3), "oRuR", (2, 4)),
    # An old ready group at the top stops the tail at zero.
    "old-top-group-stops-tail": (4, 1, 0, (4, 3), "RRRo", (3, 4)),
}


@pytest.mark.parametrize("row", CASE_5.values(), ids=CASE_5.keys())
def test_case_5_rules(row: tuple[int, int, int, tuple[int, int], str, tuple[int, int]]) -> None:
    replicas, unavailable, surge, (sts_replicas, partition), groups, expect = row
    decision = plan_rollout(
        _snapshot(
            replicas=replicas,
            max_unavailable=unavailable,
            max_surge=surge,
            leader_sts=LeaderStatefulSetState(sts_replicas, partition, str(replicas)),
            groups=_groups(groups),
        )
    )
    assert (decision.partition, decision.replicas) == expect


@pytest.mark.parametrize(
    ("value", "replicas", "expected"),
    [
        (1, 4, 1),
        (10, 4, 10),
        ("25%", 2, 0),
        ("25%", 4, 1),
        ("50%", 3, 1),
        ("100%", 4, 4),
        ("0%", 4, 0),
        ("30%", 0, 0),
    ],
)
def test_scaled_max_unavailable_rounds_down(value: int | str, replicas: int, expected: int) -> None:
    assert scaled_max_unavailable(value, replicas) == expected


@pytest.mark.parametrize(
    ("value", "replicas", "expected"),
    [
        (0, 4, 0),
        (1, 4, 1),
        (4, 2, 2),
        ("50%", 3, 2),
        ("25%", 2, 1),
        ("1%", 4, 1),
        ("100%", 4, 4),
        ("200%", 3, 3),
        (5, 0, 0),
    ],
)
def test_scaled_max_surge_rounds_up_and_caps(
    value: int | str, replicas: int, expected: int
) -> None:
    assert scaled_max_surge(value, replicas) == expected


@pytest.mark.parametrize("bad", ["abc", "10", "-5%", None, 1.5])
def test_malformed_int_or_percent_is_an_error(bad: Any) -> None:
    with pytest.raises(RolloutError):
        scaled_max_surge(bad, 4)
    with pytest.raises(RolloutError):
        scaled_max_unavailable(bad, 4)


@pytest.mark.parametrize(
    ("replicas", "max_unavailable", "max_surge", "expected"),
    [
        (4, 1, 0, 1),
        (4, 2, 2, 4),
        (2, 1, 4, 3),
        (0, 1, 0, 1),
        (0, 0, 1, 1),
        (0, "25%", "50%", 1),
        (4, "50%", "100%", 6),
        (3, "25%", "50%", 2),
        (4, 0, 1, 1),
    ],
)
def test_leader_sts_max_unavailable(
    replicas: int, max_unavailable: int | str, max_surge: int | str, expected: int
) -> None:
    assert leader_sts_max_unavailable(replicas, max_unavailable, max_surge) == expected


# --- group states from observed objects (each ordinal as upstream's rollout reads it) ---


def _leader(
    index: int | str,
    key: str = "new",
    ready: bool = True,
    name: str | None = None,
    lws: str = "test-sample",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name if name is not None else f"{lws}-{index}",
            "labels": {
                NAME_LABEL: lws,
                WORKER_INDEX_LABEL: "0",
                GROUP_INDEX_LABEL: str(index),
                TEMPLATE_REVISION_HASH_LABEL: key,
            },
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def _worker_sts(
    index: int | str,
    key: str = "new",
    ready: bool = True,
    name: str | None = None,
    lws: str = "test-sample",
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name if name is not None else f"{lws}-{index}",
            "labels": {
                NAME_LABEL: lws,
                GROUP_INDEX_LABEL: str(index),
                TEMPLATE_REVISION_HASH_LABEL: key,
            },
        },
        "spec": {"replicas": 1},
        "status": {"availableReplicas": 1 if ready else 0},
    }


_LEADER_STS = {
    "metadata": {
        "name": "test-sample",
        "labels": {NAME_LABEL: "test-sample", TEMPLATE_REVISION_HASH_LABEL: "new"},
    },
    "spec": {"replicas": 4},
    "status": {"availableReplicas": 4},
}


def _codes(states: tuple[GroupState, ...]) -> str:
    inverse = {v: k for k, v in _CODES.items()}
    return "".join(inverse[s] for s in states)


def test_group_states_place_objects_by_group_index_and_check_names() -> None:
    leaders = [
        _leader(3, key="old"),
        _leader(0),
        _leader(1, ready=False),
        _leader(2, name="test-sample-7"),  # wrong name: being rebuilt
    ]
    workers = [_worker_sts(1), _worker_sts(0), _LEADER_STS, _worker_sts(2), _worker_sts(3)]
    states = group_states("test-sample", 2, "new", 5, leaders, workers)
    assert _codes(states) == "Ru-o-"


def test_group_states_size_greater_than_one_needs_the_worker_sts() -> None:
    states = group_states(
        "test-sample",
        3,
        "new",
        3,
        [_leader(0), _leader(1), _leader(2)],
        [_worker_sts(0), _worker_sts(1, name="test-sample-9"), _worker_sts(2, key="old")],
    )
    assert _codes(states) == "R-o"


def test_group_states_worker_sts_readiness_and_key() -> None:
    states = group_states(
        "test-sample",
        2,
        "new",
        2,
        [_leader(0), _leader(1)],
        [_worker_sts(0, ready=False), _worker_sts(1, key="old", ready=False)],
    )
    assert _codes(states) == "u-"


def test_group_states_take_worker_statefulsets_confirmed_ready_by_their_pods() -> None:
    """A worker StatefulSet its pods show ready (``readiness.confirmed_by_pods``) makes its
    group Ready before its status says so; the others still wait for their status."""
    states = group_states(
        "test-sample", 2, "new", 3, [_leader(0), _leader(1), _leader(2, ready=False)],
        [_worker_sts(0, ready=False), _worker_sts(1, ready=False), _worker_sts(2, ready=False)],
        frozenset({"test-sample-0", "test-sample-2"}))
    assert _codes(states) == "Ruu"


def test_group_states_size_one_ignores_worker_statefulsets() -> None:
    states = group_states(
        "test-sample",
        1,
        "new",
        3,
        [_leader(0), _leader(1, key="old"), _leader(2, ready=False)],
        [],
    )
    assert _codes(states) == "Rou"


def test_group_states_ignore_foreign_unindexed_and_out_of_range_objects() -> None:
    other = _leader(0, key="new", lws="other")
    unindexed = _leader(1)
    unindexed["metadata"]["labels"].pop(GROUP_INDEX_LABEL)
    bad_index = _leader("x", name="test-sample-1")
    worker_pod = _leader(1)
    worker_pod["metadata"]["labels"][WORKER_INDEX_LABEL] = "1"
    states = group_states(
        "test-sample",
        1,
        "new",
        2,
        [other, unindexed, bad_index, worker_pod, _leader(5), _leader(-1, name="test-sample-0")],
        [],
    )
    assert _codes(states) == "--"


def test_group_states_prefer_the_correctly_named_duplicate() -> None:
    right, wrong = _leader(0), _leader(0, name="test-sample-x")
    assert _codes(group_states("test-sample", 1, "new", 1, [right, wrong], [])) == "R"
    assert _codes(group_states("test-sample", 1, "new", 1, [wrong, right], [])) == "R"


def test_group_states_running_phase_is_required() -> None:
    pending = _leader(0)
    pending["status"]["phase"] = "Pending"
    assert _codes(group_states("test-sample", 1, "new", 1, [pending], [])) == "u"


def test_rollout_snapshot_reads_lws_and_leader_sts() -> None:
    lws = {
        "metadata": {"name": "test-sample"},
        "spec": {
            "replicas": 3,
            "leaderWorkerTemplate": {"size": 2},
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {
                    "partition": 1,
                    "maxUnavailable": "50%",
                    "maxSurge": 2,
                },
            },
        },
    }
    sts = {
        "metadata": {"name": "test-sample", "annotations": {REPLICAS_ANNOTATION: "3"}},
        "spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
    }
    snapshot = rollout_snapshot(
        lws,
        sts,
        [_leader(0), _leader(3, key="old")],
        [_worker_sts(0), _worker_sts(3)],
        "new",
        lws_updated=False,
    )
    assert snapshot == RolloutSnapshot(
        lws_name="test-sample",
        replicas=3,
        lws_partition=1,
        max_unavailable="50%",
        max_surge=2,
        size=2,
        lws_updated=False,
        current_key="new",
        leader_sts=LeaderStatefulSetState(replicas=4, partition=2, replicas_annotation="3"),
        groups=_groups("R--o"),
    )


def test_rollout_snapshot_defaults_and_missing_sts() -> None:
    snapshot = rollout_snapshot({"metadata": {"name": "a"}, "spec": {}}, None, [], [], "k", True)
    assert snapshot == RolloutSnapshot(
        lws_name="a",
        replicas=1,
        lws_partition=0,
        max_unavailable=1,
        max_surge=0,
        size=1,
        lws_updated=True,
        current_key="k",
        leader_sts=None,
        groups=(),
    )
    no_partition = rollout_snapshot(
        {"metadata": {"name": "a"}, "spec": {"replicas": 2}},
        {"metadata": {"name": "a"}, "spec": {"replicas": 2}},
        [],
        [],
        "k",
        False,
    )
    assert no_partition.leader_sts == LeaderStatefulSetState(2, 0, None)
    assert no_partition.groups == _groups("--")
