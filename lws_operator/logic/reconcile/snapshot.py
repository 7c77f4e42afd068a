"""``Observed``: everything one step of a LeaderWorkerSet pass reads, as one immutable value.

The controller builds it from the watch caches before every step (``controllers.
leaderworkerset``), so a step sees the answers of the writes the steps before it made (the
executor stores each answer in the cache). What a later step needs of an earlier step's
*decision* (the revision key, the rollout's partition, the admission of Hash leaders, the
scheduling facts) is not here: the pass function (``logic.leaderworkerset.pipeline.reconcile``)
hands it to the later step as an argument.

``memory`` is the one thing that outlives a pass, and it is bounded and documented where it is kept
(``Memory``, with the data of the features it holds: ``Deferral``, ``Recreation``); nothing a pass
must not lose lives there: what must survive a failed pass or a change of leader is derived from the
objects (pods, the restart annotations) and the tombstones the watch cache keeps.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lws_operator.api.view import LeaderWorkerSetView, is_leader
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.objects.owners import owned_by
from lws_operator.logic.reconcile.memo import Memo

Obj = dict[str, Any]


@dataclass(frozen=True)
class PodWebhook:
    """What the operator knows of its pod webhook (``logic.mutation.recreation``): its
    configuration entry while it reaches this operator and the listener answers (``hook``), and
    the clock when that view began."""

    hook: Mapping[str, Any]
    since: float


@dataclass(frozen=True)
class Recreation:
    """A set's recreations of its unmutated pods under one webhook view
    (``logic.mutation.recreation``): the attempts per group, the group in flight (its deleted
    pods' UIDs, when), the groups given up on, and the sentence the condition's message ends
    with."""

    since: float
    attempts: tuple[tuple[str, int], ...] = ()
    group: str | None = None
    deleted: frozenset[str] = frozenset()
    at: float = 0.0
    given_up: frozenset[str] = frozenset()
    note: str | None = None

    @property
    def in_flight(self) -> bool:
        return self.group is not None


@dataclass(frozen=True)
class Deferral:
    """A counters-only status change not written yet (``logic.status.pacing``): when the first
    one was seen (``since``), when the counters last moved (``moved``) and what they were then
    (``counters``)."""

    since: float
    moved: float
    counters: tuple[Any, ...]


@dataclass(frozen=True)
class Options:
    """The operator's options a pass reads: how long a rollout may stall before it is
    reported, the scheduler provider (``--scheduler-provider``), and whether the API server
    serves the native Workload and PodGroup kinds (found by discovery at start). And what the
    operator knows of its own pod webhook (``logic.mutation.recreation``): its configuration entry
    while it serves (None otherwise), and the sets whose unmutated pods are being recreated
    (the recreation's global bound). And how many of its sets are being created or rolled
    out, as their stored status says (``logic.status.pacing``'s shared budget of counters
    writes), counted at most once a second."""

    stall_grace: float
    provider: str | None = None
    native_scheduling: bool = True
    pod_webhook: PodWebhook | None = None
    recreating: frozenset[tuple[str, str]] = frozenset()
    under_way: int = 0


@dataclass(frozen=True)
class Memory:
    """What the controller remembers per LeaderWorkerSet between passes (``controllers.
    leaderworkerset`` keeps it; a step's plan hands the new value over in a ``Remember``).

    * ``reported``: the failed pods whose GroupUnschedulable Warning was recorded, so it is
      recorded once per pod and not once per pass. Bounded by the pods that exist (a pass
      forgets the others); losing it on a leader change records one more Warning per pod.
    * ``expected_gone``: the leaders we deleted, until the cache shows them gone: a watch event
      older than our delete may still show one alive, and a second recreation would spend
      restart budget twice (controller-runtime's "expectations"). Bounded by the pods that
      exist; after a leader change the counted-leader annotation (``logic.failures.restart_budget``)
      keeps the count from being spent twice.
    * ``backoff_reported``: the leaders whose recreation the restart backoff defers and whose
      GroupRestartBackoff Event was recorded (once per deferral, not once per pass). The
      deferral itself is recomputed every pass, from the pods, the restart counts annotation
      and the tombstones the cache keeps until they trigger nothing (``kube.cache``), so it
      survives a failed pass and a change of leader; losing this set on a leader change only
      records the Event once more.
    * ``status_deferral``: a status write that would change only the group counters, held
      back until it is due (``logic.status.pacing``); the status step asks for a pass then.
      One per set; losing it makes the next pass write the status or defer it anew.
    * ``recreation``: the recreation of the set's unmutated pods
      (``logic.mutation.recreation``): the
      attempts per group under the current webhook view, the group in flight. One per set,
      bounded by its groups; losing it starts the attempts again.
    """

    reported: frozenset[str] = frozenset()
    expected_gone: frozenset[str] = frozenset()
    backoff_reported: frozenset[str] = frozenset()
    status_deferral: Deferral | None = None
    recreation: Recreation | None = None


@dataclass(frozen=True)
class Remember:
    """What a step's plan asks the controller to keep beyond the pass (``Plan.carry``), taken
    before the plan is carried out, so a plan that ends or fails the pass keeps it too: the
    set's new ``memory``, and (the failures step) the UIDs of the tombstones that still trigger
    something (a deferred recreation), None to leave them; once the plan has run uninterrupted
    the controller drops the others."""

    memory: Memory
    kept_tombstones: frozenset[str] | None = None


# The fields of a snapshot read from the watch caches (``Observed.assemble``).
CACHED_FIELDS = ("body", "pods", "all_pods", "statefulsets", "deployments", "services",
                 "revisions", "pod_groups", "workloads", "volcano_groups", "memo")


@dataclass(frozen=True, init=False)
class Observed:
    """A LeaderWorkerSet and its objects as the caches hold them, plus the clock and options.

    ``pods`` are the pods the pod webhook admitted (``logic.mutation.unmutated``: the others carry
    none of the labels a decision reads, and are only reported, from ``all_pods``). ``collected``:
    the failure reasons the previous step's plan collected
    (``logic.reconcile.plan.Policy.collect``). ``fetched``: the objects a step asked the runner
    to read (``logic.reconcile.plan.Read``)."""

    body: Obj
    pods: tuple[Obj, ...]
    all_pods: tuple[Obj, ...]
    statefulsets: tuple[Obj, ...]
    deployments: tuple[Obj, ...]
    services: Mapping[str, Obj]
    revisions: tuple[Obj, ...]
    pod_groups: tuple[Obj, ...]
    workloads: Mapping[str, Obj]  # every Workload of the namespace, by name
    volcano_groups: Mapping[str, Obj]
    tombstones: tuple[Obj, ...]
    now: str
    clock: float
    options: Options
    memory: Memory = Memory()
    collected: tuple[str, ...] = ()
    fetched: Mapping[str, Obj] = field(default_factory=dict)
    # Facts derived from the fields above, shared by the snapshots of a set built over the
    # same objects (``logic.reconcile.memo``: reused only for identical inputs, so it decides
    # nothing). The facts a feature's rules judge are derived in the feature (``facts`` of
    # ``logic.failures``, ``logic.rollout``, ``logic.status``), memoized here all the same.
    memo: Memo = field(default_factory=Memo, compare=False, repr=False)

    def __init__(self, body: Obj, pods: tuple[Obj, ...], all_pods: tuple[Obj, ...],
                 statefulsets: tuple[Obj, ...], deployments: tuple[Obj, ...],
                 services: Mapping[str, Obj], revisions: tuple[Obj, ...],
                 pod_groups: tuple[Obj, ...], workloads: Mapping[str, Obj],
                 volcano_groups: Mapping[str, Obj], tombstones: tuple[Obj, ...], now: str,
                 clock: float, options: Options, memory: Memory = Memory(),
                 collected: tuple[str, ...] = (),
                 fetched: Mapping[str, Obj] | None = None, memo: Memo | None = None) -> None:
        # One update of the instance's dict: the frozen dataclass's own __init__ sets each
        # field through object.__setattr__, and a snapshot is built before every step.
        self.__dict__.update(
            body=body, pods=pods, all_pods=all_pods, statefulsets=statefulsets,
            deployments=deployments, services=services, revisions=revisions,
            pod_groups=pod_groups, workloads=workloads, volcano_groups=volcano_groups,
            tombstones=tombstones, now=now, clock=clock, options=options, memory=memory,
            collected=collected,
            fetched={} if fetched is None else fetched, memo=Memo() if memo is None else memo)

    @classmethod
    def assemble(cls, cached: Mapping[str, Any], tombstones: tuple[Obj, ...], now: str,
                 clock: float, options: Options, memory: Memory,
                 collected: tuple[str, ...], fetched: Mapping[str, Obj]) -> Observed:
        """The snapshot ``Observed(**cached, tombstones=..., ...)`` builds, ``cached``
        holding the ``CACHED_FIELDS`` by name: the controller keeps them while its cache has
        not changed for the set, and builds a snapshot before every step (eighteen keyword
        arguments cost more than the dict copy)."""
        obs = cls.__new__(cls)
        fields = obs.__dict__
        fields.update(cached)
        fields["tombstones"] = tombstones
        fields["now"] = now
        fields["clock"] = clock
        fields["options"] = options
        fields["memory"] = memory
        fields["collected"] = collected
        fields["fetched"] = fetched
        return obs

    @property
    def lws(self) -> LeaderWorkerSetView:
        """The set as a typed view, the same view for the same body (``logic.reconcile.memo``). Kept
        in the instance once asked: ``functools.cached_property`` takes a lock on every first
        read (before Python 3.12), and every step's snapshot asks for it (a twentieth of a
        pass)."""
        fields = self.__dict__
        view: LeaderWorkerSetView | None = fields.get("_lws")
        if view is None:
            view = fields["_lws"] = self.memo.get("lws", (self.body,),
                                                  lambda: LeaderWorkerSetView(self.body))
        return view

    @property
    def leader_pods(self) -> tuple[Obj, ...]:
        """The leader pods among ``pods``: the same tuple while they are the same objects
        (``logic.reconcile.memo.Memo.select``), so what is derived from the leaders alone is kept
        while only workers change."""
        return self.memo.select("leaders", self.pods, is_leader)

    @property
    def leaders(self) -> list[Obj]:
        return list(self.leader_pods)

    @property
    def moment(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.clock, dt.UTC)

    @property
    def leader_statefulset(self) -> Obj | None:
        """The Ordinal leader StatefulSet: named after the set and controlled by it."""
        return self.memo.get("leader_statefulset", (self.statefulsets, self.body),
                             lambda: self._leader_owner(self.statefulsets))

    @property
    def leader_deployment(self) -> Obj | None:
        """The Hash leader Deployment: named after the set and controlled by it."""
        return self.memo.get("leader_deployment", (self.deployments, self.body),
                             lambda: self._leader_owner(self.deployments))

    def _leader_owner(self, objects: tuple[Obj, ...]) -> Obj | None:
        name = self.lws.name
        return next((o for o in objects if name_of(o) == name and owned_by(o, self.body)), None)

    @property
    def worker_statefulsets(self) -> list[Obj]:
        def compute() -> tuple[Obj, ...]:
            leader = self.leader_statefulset
            return tuple(s for s in self.statefulsets if s is not leader)
        return list(self.memo.get("worker_statefulsets", (self.statefulsets, self.body),
                                  compute))

    @property
    def own_revisions(self) -> list[Mapping[str, Any]]:
        return list(self.memo.get("own_revisions", (self.revisions, self.body), lambda: tuple(
            r for r in self.revisions if owned_by(r, self.body))))

    @property
    def unmutated_pods(self) -> list[Obj]:
        """The pods the pod webhook never saw: ``all_pods`` less ``pods`` (``logic.
        unmutated``), in their order."""
        if len(self.pods) == len(self.all_pods):
            return []  # ``pods`` is a selection of ``all_pods``: all of them, none unmutated

        def compute() -> tuple[Obj, ...]:
            admitted = {id(p) for p in self.pods}
            return tuple(p for p in self.all_pods if id(p) not in admitted)
        return list(self.memo.get("unmutated_pods", (self.all_pods, self.pods), compute))

    def pod(self, name: str) -> Obj | None:
        return next((p for p in self.all_pods if name_of(p) == name), None)

    def uids(self, pods: tuple[Obj, ...] | list[Obj] | None = None) -> frozenset[str]:
        if pods is None:
            return self.memo.get("uids", (self.pods,), lambda: _uids(self.pods))
        return _uids(pods)


def _uids(pods: tuple[Obj, ...] | list[Obj]) -> frozenset[str]:
    return frozenset(str(meta_of(p).get("uid")) for p in pods)
