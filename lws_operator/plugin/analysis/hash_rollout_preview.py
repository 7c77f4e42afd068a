"""A dry run of a Hash-mode rollout: the LWS docs' Hash step table ("Rolling Update Process",
"Hash Mode"), from the leader Deployment's rolling update and our own admission decisions.

In Hash mode the leader Deployment paces the rollout (``logic.hash_mode.hash_groups``): its
controller scales the new ReplicaSet up within ``maxSurge`` and the old one down within
``maxUnavailable``, counting as available only leaders whose whole group is Ready (the
``group-ready`` readiness gate). Every new leader starts behind the ``group-replacement``
scheduling gate, and which gated leaders may schedule is decided by the controller's own
``hash_groups.plan_admission``, which this simulation calls on synthetic leader pods rather
than re-deriving it (PostTermination holds one gated leader per group tearing down,
Immediate none; at most ``replicas`` groups of one revision are ungated; a gated leader of the
old revision is never admitted).

The Deployment controller is modelled after upstream's rolling update (``rolling.go`` of
kube-controller-manager): the new ReplicaSet grows to at most ``replicas + maxSurge`` pods in
all; unhealthy old pods are cleaned up first, then old pods are scaled down while more than
``replicas - maxUnavailable`` groups stay available. A ReplicaSet removes gated (unscheduled)
leaders first, then not-Ready ones, then Ready ones, newest first; a gated leader has nothing
to tear down and is gone at once. Its brief scale of the old ReplicaSet on a combined replicas
and template change is not shown: the LWS docs note those leaders never schedule.

Timing is a model, as in the LWS docs' trace: a group tearing down is gone one stage later; an
ungated group (leader scheduled, then its workers created) is Ready two stages after it was
ungated. A live group not Ready now and not replaced stays so (what is broken now is not
assumed to heal). One row per stage in which something happens.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    GROUP_REPLACEMENT_GATE,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.validation import scaled_value
from lws_operator.api.view import LEADER_INDEX
from lws_operator.logic.hash_mode.hash_groups import plan_admission
from lws_operator.logic.objects.meta import meta_of

READY: Final = "ready"  # the whole group Ready: available to the Deployment
STARTING: Final = "starting"  # ungated, not Ready yet
GATED: Final = "gated"  # behind the group-replacement scheduling gate, nothing built
TEARING: Final = "tearing"  # leader terminating or gone, some pod still exists
HASH_SYMBOLS: Final = {READY: "✅", STARTING: "⏳", GATED: "🔒", TEARING: "🗑️"}
POLICIES: Final = ("PostTermination", "Immediate")

_OLD: Final = "old"
_NEW: Final = "new"


class HashPreviewError(ValueError):
    """The rollout settings cannot be simulated (an invalid int-or-percent)."""


@dataclass(frozen=True)
class LiveHashGroup:
    """One live group of the leader Deployment."""

    name: str
    state: str  # READY, STARTING, GATED or TEARING
    current: bool  # on the live current revision


@dataclass(frozen=True)
class HashPreviewInput:
    """The set after the change, and its live groups (oldest first)."""

    name: str
    replicas: int  # spec.replicas after the change
    max_unavailable: int | str
    max_surge: int | str
    policy: str  # groupReplacementPolicy
    template_changed: bool
    groups: tuple[LiveHashGroup, ...]
    new_names: tuple[str, ...] = ()  # names of the groups created (default G-1, G-2, ...)


@dataclass(frozen=True)
class HashCell:
    name: str
    state: str


@dataclass(frozen=True)
class HashRow:
    stage: int
    old: tuple[HashCell, ...]  # groups of the previous revision(s)
    new: tuple[HashCell, ...]  # groups of the revision rolled out
    available: int  # Ready groups not tearing down, both revisions
    description: str


@dataclass(frozen=True)
class HashPreview:
    rows: tuple[HashRow, ...]
    complete: bool  # exactly ``replicas`` groups, all on the new revision and Ready
    min_available: int
    max_unavailable: int  # as the Deployment resolves them against replicas
    max_surge: int


@dataclass
class _Group:
    name: str
    revision: str
    state: str
    since: int | None  # the stage clock of the last state change; None: never progresses
    seq: int  # creation order


def _names(groups: Sequence[_Group]) -> str:
    return ", ".join(g.name for g in groups)


def _verb(groups: Sequence[_Group], one: str, many: str) -> str:
    return one if len(groups) == 1 else many


def deployment_bounds(replicas: int, max_unavailable: int | str,
                      max_surge: int | str) -> tuple[int, int]:
    """``maxUnavailable`` (rounded down) and ``maxSurge`` (rounded up) as the Deployment
    resolves them; both zero becomes one unavailable, as ``hash_groups.leader_deployment``
    hands it over."""
    unavailable = scaled_value(max_unavailable, replicas, False)
    surge = scaled_value(max_surge, replicas, True)
    if unavailable is None or surge is None:
        raise HashPreviewError(f"invalid maxUnavailable {max_unavailable!r} or maxSurge "
                               f"{max_surge!r}")
    if unavailable == 0 and surge == 0:
        unavailable = 1
    return unavailable, surge


class _Simulation:
    def __init__(self, inp: HashPreviewInput) -> None:
        self.inp = inp
        self.unavailable, self.surge = deployment_bounds(inp.replicas, inp.max_unavailable,
                                                         inp.max_surge)
        self.groups: list[_Group] = []
        for i, g in enumerate(inp.groups):
            revision = _NEW if g.current and not inp.template_changed else _OLD
            self.groups.append(_Group(g.name, revision, g.state,
                                      None if g.state == STARTING else -1, i))
        self.seq = len(self.groups)
        self.targets = {rev: sum(1 for g in self.groups
                                 if g.revision == rev and g.state != TEARING)
                        for rev in (_OLD, _NEW)}
        self.clock = 0
        self.fresh = self._fresh_names()
        self.lws: Mapping[str, Any] = {
            "metadata": {"name": inp.name},
            "spec": {"replicas": inp.replicas, "groupIdentity": "Hash",
                     "groupReplacementPolicy": inp.policy}}

    def _fresh_names(self) -> Iterator[str]:
        yield from self.inp.new_names
        taken = {g.name for g in self.groups} | set(self.inp.new_names)
        n = 0
        while True:
            n += 1
            if f"G-{n}" not in taken:
                yield f"G-{n}"

    def live(self, revision: str) -> list[_Group]:
        return [g for g in self.groups if g.revision == revision and g.state != TEARING]

    def available(self, revision: str | None = None) -> int:
        return sum(1 for g in self.groups if g.state == READY
                   and (revision is None or g.revision == revision))

    # ------------------------------------------------------------------ the Deployment

    def deployment_sync(self) -> None:
        """One sync of the Deployment controller's rolling update: the ReplicaSets' targets."""
        replicas, t = self.inp.replicas, self.targets
        if t[_NEW] > replicas:
            t[_NEW] = replicas
        elif t[_NEW] < replicas:
            current = t[_OLD] + t[_NEW]
            most = replicas + self.surge
            if current < most:
                t[_NEW] += min(most - current, replicas - t[_NEW])
        if t[_OLD] == 0:
            return
        min_available = replicas - self.unavailable
        new_unavailable = t[_NEW] - self.available(_NEW)
        budget = t[_OLD] + t[_NEW] - min_available - new_unavailable
        if budget <= 0:
            return
        old_unhealthy = t[_OLD] - self.available(_OLD)
        cleanup = min(budget, max(0, old_unhealthy))
        t[_OLD] -= cleanup
        spare = self.available() - min_available
        if spare > 0:
            t[_OLD] -= min(t[_OLD], spare)

    def replicasets(self, created: list[_Group], removed: list[_Group]) -> None:
        """Each ReplicaSet creates (gated) or removes leaders to match its target."""
        rank = {GATED: 0, STARTING: 1, READY: 2}
        for revision in (_OLD, _NEW):
            live = self.live(revision)
            target = self.targets[revision]
            for _ in range(target - len(live)):
                group = _Group(next(self.fresh), revision, GATED, self.clock, self.seq)
                self.seq += 1
                self.groups.append(group)
                created.append(group)
            victims = sorted(live, key=lambda g: (rank[g.state], -g.seq))[:max(0, len(live)
                                                                              - target)]
            for group in victims:
                removed.append(group)
                if group.state == GATED:
                    self.groups.remove(group)  # nothing to tear down
                else:
                    group.state, group.since = TEARING, self.clock

    # ------------------------------------------------------------------ our controller

    def _pod(self, group: _Group) -> dict[str, Any]:
        labels = {WORKER_INDEX_LABEL: LEADER_INDEX, GROUP_KEY_LABEL: group.name,
                  GROUP_INDEX_LABEL: group.name, TEMPLATE_REVISION_HASH_LABEL: group.revision}
        meta: dict[str, Any] = {"name": group.name, "labels": labels,
                                "creationTimestamp": f"{group.seq:08d}"}
        if group.state == TEARING:
            meta["deletionTimestamp"] = "terminating"
        spec = {"schedulingGates": [{"name": GROUP_REPLACEMENT_GATE}]} if group.state == GATED \
            else {}
        return {"metadata": meta, "spec": spec}

    def admit(self) -> tuple[list[_Group], list[_Group]]:
        """The controller's admission (``hash_groups.plan_admission``): ungated, held."""
        by_name = {g.name: g for g in self.groups}
        admission = plan_admission(self.lws, [self._pod(g) for g in self.groups], {}, _NEW)
        admitted = [by_name[str(meta_of(p).get("name"))] for p in admission.ungate]
        for group in admitted:
            group.state, group.since = STARTING, self.clock
        held = [g for g in self.groups if g.state == GATED]
        return admitted, held

    # ------------------------------------------------------------------ stages

    def settle(self, parts: list[str]) -> bool:
        """Deployment syncs and admission passes until nothing changes; what happened."""
        created: list[_Group] = []
        removed: list[_Group] = []
        admitted: list[_Group] = []
        for _ in range(16):
            before = (dict(self.targets), [(g.name, g.state) for g in self.groups])
            self.deployment_sync()
            self.replicasets(created, removed)
            admitted += self.admit()[0]
            if before == (dict(self.targets), [(g.name, g.state) for g in self.groups]):
                break
        else:
            raise HashPreviewError("the simulated rollout did not settle")
        held = [g for g in self.groups if g.state == GATED]
        if created:
            by_rev = [g for g in created if g.revision == _NEW] or created
            where = "new" if by_rev[0].revision == _NEW else "old"
            parts.append(f"Deployment creates {_names(created)} on the {where} revision")
        gone = [g for g in removed if g.state == TEARING]
        dropped = [g for g in removed if g not in gone]
        if gone:
            parts.append(f"Deployment terminates {_names(gone)}")
        if dropped:
            parts.append(f"Deployment removes gated {_names(dropped)}")
        if admitted:
            what = "ungated at once" if all(g in created for g in admitted) else "ungated"
            parts.append(f"{_names(admitted)} {_verb(admitted, 'is', 'are')} {what} and "
                         f"{_verb(admitted, 'creates its', 'create their')} workers")
        if held and (created or admitted or gone or dropped):
            tearing = [g for g in self.groups if g.state == TEARING]
            if tearing and self.inp.policy != "Immediate":
                reason = (f"until {_names(tearing)} (leader + workers) "
                          f"{_verb(tearing, 'finishes', 'finish')} terminating")
            else:
                reason = (f"(at most {self.inp.replicas} groups of a revision ungated)")
            parts.append(f"{_names(held)} {_verb(held, 'stays', 'stay')} SchedulingGated "
                         f"{reason}")
        return bool(created or removed or admitted)

    def tick(self, parts: list[str]) -> bool:
        """One stage of the cluster: terminations finish, started groups turn Ready."""
        self.clock += 1
        finished = [g for g in self.groups if g.state == TEARING and g.since is not None
                    and self.clock - g.since >= 1]
        ready = [g for g in self.groups if g.state == STARTING and g.since is not None
                 and self.clock - g.since >= 2]
        for group in finished:
            self.groups.remove(group)
        for group in ready:
            group.state = READY
        if finished:
            parts.append(f"{_names(finished)} {_verb(finished, 'finishes', 'finish')} "
                         "terminating")
        if ready:
            parts.append(f"{_names(ready)} {_verb(ready, 'becomes', 'become')} ready "
                         f"({self.available()} available)")
        return bool(finished or ready)

    def pending(self) -> bool:
        return any(g.since is not None and g.state in (TEARING, STARTING) for g in self.groups)

    def row(self, stage: int, description: str) -> HashRow:
        def cells(revision: str) -> tuple[HashCell, ...]:
            return tuple(HashCell(g.name, g.state)
                         for g in sorted(self.groups, key=lambda g: g.seq)
                         if g.revision == revision)
        return HashRow(stage, cells(_OLD), cells(_NEW), self.available(), description)

    def complete(self) -> bool:
        return (len(self.groups) == self.inp.replicas
                and all(g.revision == _NEW and g.state == READY for g in self.groups))


def preview_hash_rollout(inp: HashPreviewInput, max_rows: int = 200) -> HashPreview:
    """The step table of the Hash-mode rollout ``inp`` describes."""
    sim = _Simulation(inp)
    rows = [sim.row(1, f"Before the change ({sim.available()} available)")]
    parts: list[str] = []
    if sim.settle(parts):
        rows.append(sim.row(len(rows) + 1, "; ".join(parts)))
    while len(rows) < max_rows and sim.pending():
        parts = []
        moved = sim.tick(parts)
        moved = sim.settle(parts) or moved
        if moved:
            rows.append(sim.row(len(rows) + 1, "; ".join(parts)))
    complete = sim.complete()
    if complete and len(rows) > 1:
        last = rows[-1]
        rows[-1] = HashRow(last.stage, last.old, last.new, last.available,
                           f"{last.description}; rollout complete on the new revision")
    return HashPreview(tuple(rows), complete, min(r.available for r in rows),
                       sim.unavailable, sim.surge)
