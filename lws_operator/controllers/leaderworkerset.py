"""One reconcile pass of a LeaderWorkerSet: observe from the caches, decide, write the difference.

The upstream controller splits this work between an LWS controller and a pod controller; here one
pass per LeaderWorkerSet does both (DESIGN: every child event wakes the owning LWS), in SPEC 3.2's
order: revision, leader StatefulSet (server-side apply), shared Service, then per leader pod the
per-replica Service and the worker StatefulSet (SPEC 4.2), then status and revision pruning.

Every decision comes from the pure ``logic`` layer; this module only reads the cache, performs
the writes and records Events. Writes happen only where the cache shows a difference, so a pass
over a LeaderWorkerSet at rest issues no request at all.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_ACTION_DELETE,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    FIELD_MANAGER,
    GROUP_INDEX_LABEL,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    GROUP_RESTART_COUNTED_ANNOTATION,
    GROUP_RESTART_COUNTS_ANNOTATION,
    MAX_INT32,
    REASON_FAILED_CREATE,
    REASON_FAILED_UPDATE,
    REASON_GROUPS_PROGRESSING,
    REASON_RECREATE_GROUP,
    SCHEDULER_PROVIDER_VOLCANO,
    SCHEDULING_LEVEL_LABEL,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.client import (
    APPLY_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    ApiException,
    KubeClient,
    is_status,
)
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.logcontext import bind_group
from lws_operator.logic import gang, hash_groups, unmutated, volcano
from lws_operator.logic.events import Event
from lws_operator.logic.objects import host_name, labels_of, meta_of, name_of
from lws_operator.logic.readiness import containers_ready, pod_ready
from lws_operator.logic.reconcile import (
    RevisionDecision,
    decide_revision,
    first_difference,
    owned_by,
    revision_for_key,
)
from lws_operator.logic.restart import (
    REASON_GROUP_UNSCHEDULABLE,
    Recreation,
    apply_unschedulable,
    recreating,
    scan_failures,
)
from lws_operator.logic.restart_budget import (
    CLEANUP_FINALIZER,
    REASON_GROUP_RECOVERED,
    Release,
    apply_degraded,
    backoff_event,
    counted_for,
    exhaustion_events,
    plan_release,
    plan_restarts,
    read_counted,
    read_counts,
    render_counts,
    settled_counts,
    still_pending,
    unfinished_exhaustions,
    without_finalizer,
)
from lws_operator.logic.revision import apply_revision
from lws_operator.logic.rollout import plan_rollout, rollout_snapshot
from lws_operator.logic.services import (
    replica_service,
    shared_service,
    wants_replica_service,
    wants_shared_service,
)
from lws_operator.logic.stall import DEFAULT_GRACE_SECONDS, apply_stall, find_stall, unstall_view
from lws_operator.logic.statefulsets import (
    exclusive_topology_key,
    hashed,
    leader_statefulset,
    spec_replicas,
    worker_statefulset,
)
from lws_operator.logic.status import StatusDecision, compute_hash_status, compute_status
from lws_operator.logic.termination import worker_sets_to_stop

log = logging.getLogger(__name__)

APPS = "/apis/apps/v1/namespaces/{ns}"
CORE = "/api/v1/namespaces/{ns}"
LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/{name}"
STS_DELETING_REQUEUE = 5.0
MISSING_REVISION_REQUEUE = 1.0
CONFLICT_REQUEUE = 1.0
SCHEDULING_RETRY = 10.0
SCHEDULING = "/apis/scheduling.k8s.io/v1beta1/namespaces/{ns}"
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _earliest(*delays: float | None) -> float | None:
    """The soonest of several requeue delays (None: no requeue)."""
    return min((d for d in delays if d is not None), default=None)


class LeaderWorkerSetReconciler:
    """Reconciles one LeaderWorkerSet per call; safe to call for many keys concurrently, never
    twice at once for the same key (the work queue guarantees that)."""

    def __init__(self, kube: KubeClient, cache: ClusterCache, events: EventRecorder,
                 now: Callable[[], str] = _now, clock: Callable[[], float] = time.time,
                 stall_grace: float = DEFAULT_GRACE_SECONDS,
                 scheduler_provider: str | None = None) -> None:
        self.kube = kube
        self.scheduler_provider = scheduler_provider
        # Whether the API server serves scheduling.k8s.io/v1beta1 Workload and PodGroup (set by
        # discovery when the runtime starts).
        self.native_scheduling = True
        self.cache = cache
        self.events = events
        self.now = now
        self.clock = clock
        self.stall_grace = stall_grace
        # Per LeaderWorkerSet: recreations deferred by the restart backoff (a deleted worker is
        # seen once and must be remembered until its group's delay is over), and the failed pods
        # whose GroupUnschedulable Event was recorded (once per pod, not once per pass).
        self._deferred: dict[Key, list[Recreation]] = {}
        self._unschedulable_reported: dict[Key, set[str]] = {}
        # Leaders we deleted, until the cache shows them gone: a watch event older than our
        # delete may still arrive and show one alive, and a second recreation would spend
        # restart budget twice (the controller-runtime "expectations" pattern).
        self._deleted_leaders: dict[Key, set[str]] = {}

    def _pods(self, key: Key) -> list[dict[str, Any]]:
        """The pods of ``key`` that the pod webhook admitted: those it never saw have none of
        the labels a decision reads, and are only reported (``logic.unmutated``)."""
        return unmutated.split(self.cache["Pod"].owned_by(key))[0]

    async def reconcile(self, key: Key) -> float | None:
        """One pass; returns seconds after which to look again, or None."""
        namespace, name = key
        lws = self.cache["LeaderWorkerSet"].get(namespace, name)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            return await self._clean_up_after(key, lws)
        self.cache.forget_departed(key)
        if not self.cache.synced:
            return 1.0
        lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", **lws}
        if hashed(lws):
            return await self._reconcile_hash(key, lws)
        statefulsets = self.cache["StatefulSet"].owned_by(key)
        leader_sts = next((s for s in statefulsets if meta_of(s).get("name") == name
                           and owned_by(s, lws)), None)
        if leader_sts is not None and meta_of(leader_sts).get("deletionTimestamp"):
            return STS_DELETING_REQUEUE
        handled, restart_requeue = await self._handle_failures(
            key, lws, self._pods(key), statefulsets,
            unmutated.split(self.cache.take_tombstones(key))[0])
        if handled:
            return restart_requeue  # the writes' watch events bring the next pass
        await self._stop_workers(lws, self._pods(key), statefulsets)
        statefulsets = self.cache["StatefulSet"].owned_by(key)
        workers = [s for s in statefulsets if s is not leader_sts]
        pods = self._pods(key)
        leaders = [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"]
        decision, revisions = await self._ensure_revision(key, lws, leader_sts, workers)
        key_now = decision.current_key

        rollout = plan_rollout(rollout_snapshot(lws, leader_sts, leaders, workers, key_now,
                                                decision.updated))
        for event in rollout.events:
            await self.events.record(lws, event)
        scheduling: dict[str, Any] | None = None
        if gang.level_of(lws) is not None:
            scheduling, ready = await self._ensure_scheduling(lws, pods)
            if not ready:
                # No member pod may exist before its Workload (and whole-LWS PodGroup): the
                # leader StatefulSet waits, and the status says why.
                await self._write_scheduling_condition(lws, scheduling)
                return SCHEDULING_RETRY
            pods = self._pods(key)
            leaders = [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"]
        elif self.scheduler_provider == SCHEDULER_PROVIDER_VOLCANO:
            await self._ensure_volcano_pod_groups(lws, leaders)
        desired = leader_statefulset(lws, key_now, rollout.partition, rollout.replicas)
        difference = "." if leader_sts is None else first_difference(desired, leader_sts)
        if difference is not None:
            if leader_sts is not None:
                log.info("applying leader statefulset %s/%s: %s differs", namespace, name,
                         difference)
            try:
                leader_sts = await self.kube.request(
                    "PATCH", f"{APPS.format(ns=namespace)}/statefulsets/{name}",
                    body=desired, query={"fieldManager": FIELD_MANAGER, "force": "true"},
                    content_type=APPLY_PATCH)
            except ApiException as exc:
                first = leader_sts is None
                verb = "create" if first else "update"
                await self.events.record(lws, Event(
                    REASON_FAILED_CREATE if first else REASON_FAILED_UPDATE, EVENT_TYPE_WARNING,
                    EVENT_ACTION_CREATE if first else EVENT_ACTION_UPDATE,
                    f"Failed to {verb} leader statefulset {name}: {exc.reason}"))
                raise
            self.cache["StatefulSet"].upsert(leader_sts)
            for event in rollout.events_after_apply:
                await self.events.record(lws, event)

        release = plan_release(pods, replicas=rollout.replicas, current_key=key_now,
                               partition=rollout.partition)
        if release.pods:
            return await self._release(lws, release)

        await self._ensure_services(lws, leaders)
        requeue = await self._ensure_worker_statefulsets(lws, leaders, workers, revisions)

        assert leader_sts is not None
        now = self.now()
        observed = lws.get("status") or {}
        status = compute_status({**lws, "status": unstall_view(observed)}, key_now, leader_sts,
                                leaders, workers, now)
        return await self._finish(lws, key_now, status, pods, scheduling, revisions,
                                  _earliest(requeue, restart_requeue), now)

    async def _finish(self, lws: dict[str, Any], key_now: str, status: StatusDecision,
                      pods: list[dict[str, Any]], scheduling: dict[str, Any] | None,
                      revisions: list[Mapping[str, Any]], requeue: float | None,
                      now: str) -> float | None:
        """The end of a pass in both identity modes: the stall, unschedulable, Degraded and
        scheduling conditions over the computed status, one status write if it differs, its
        Events, and revision and (Ordinal) restart-count pruning once the update is done."""
        if status.update_done and not hashed(lws):
            # Hash mode moves and drops its counts as it admits replacement leaders.
            pruned = settled_counts(read_counts(lws), key_now, spec_replicas(lws))
            if pruned is not None:
                written = await self._write_counts(lws, pruned)
                if written is None:
                    return CONFLICT_REQUEUE
                lws = written
        namespace, name = str(meta_of(lws).get("namespace")), str(meta_of(lws).get("name"))
        observed = lws.get("status") or {}
        stall = find_stall(pods, key_now, self.clock(), self.stall_grace)
        desired_status, stall_events = apply_stall(
            apply_unschedulable(status.status, lws, pods), observed, stall, now)
        desired_status, progressing_events = unmutated.apply_unmutated(
            desired_status, observed, namespace, self.cache["Pod"].owned_by((namespace, name)),
            now, stall_events)
        desired_status = apply_degraded(desired_status, pods,
                                        int(meta_of(lws).get("generation") or 0), now)
        if scheduling is not None:
            desired_status = gang.apply_condition(desired_status, gang.scheduling_condition(
                observed.get("conditions") or [], now=now,
                generation=int(meta_of(lws).get("generation") or 0), **scheduling))
        requeue = _earliest(requeue, stall.recheck_after)
        if desired_status != observed:
            body = {"metadata": {"resourceVersion": meta_of(lws).get("resourceVersion")},
                    "status": desired_status}
            written = await self.kube.request(
                "PATCH", LWS_PATH.format(ns=namespace, name=name) + "/status", body=body,
                content_type=MERGE_PATCH)
            self.cache["LeaderWorkerSet"].upsert(written)  # the next pass must not redo it
            for event in (*status.events, *progressing_events):
                await self.events.record(lws, event)
        if status.update_done:
            await self._prune_revisions(namespace, key_now, revisions)
        return requeue

    # ------------------------------------------------------------------ Hash group identity

    async def _reconcile_hash(self, key: Key, lws: dict[str, Any]) -> float | None:
        """A pass over a Hash-mode LeaderWorkerSet (``logic.hash_groups``): failures as in
        Ordinal mode, then the revision, the leader Deployment, retained groups, Services,
        admission of gated leaders, worker StatefulSets, group-ready conditions and status."""
        name = key[1]
        statefulsets = self.cache["StatefulSet"].owned_by(key)
        handled, restart_requeue = await self._handle_failures(
            key, lws, self._pods(key), statefulsets,
            unmutated.split(self.cache.take_tombstones(key))[0])
        if handled:
            return restart_requeue
        await self._stop_workers(lws, self._pods(key), statefulsets)
        deployment = next((d for d in self.cache["Deployment"].owned_by(key)
                           if name_of(d) == name and owned_by(d, lws)), None)
        decision, revisions = await self._ensure_revision(
            key, lws, deployment, self.cache["StatefulSet"].owned_by(key))
        key_now = decision.current_key

        pods = self._pods(key)
        admission = hash_groups.plan_admission(lws, pods, read_counts(lws))
        scheduling: dict[str, Any] | None = None
        if gang.level_of(lws) is not None:
            admitted = {str(meta_of(p).get("uid")) for p in admission.ungate}
            scheduling, ready = await self._ensure_scheduling(
                lws, pods, may_ungate=lambda p: str(meta_of(p).get("uid")) in admitted)
            if not ready:
                await self._write_scheduling_condition(lws, scheduling)
                return SCHEDULING_RETRY
        elif self.scheduler_provider == SCHEDULER_PROVIDER_VOLCANO:
            await self._ensure_volcano_pod_groups(
                lws, [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"])
        await self._apply_leader_deployment(lws, key_now, deployment)

        release = plan_release(pods, replicas=None, current_key=key_now, partition=MAX_INT32,
                               groups=hash_groups.release_scaled_down(lws, pods, key_now))
        if release.pods:
            return await self._release(lws, release)
        if admission.counts is not None:
            written = await self._write_counts(lws, admission.counts)
            if written is None:
                return CONFLICT_REQUEUE
            lws = written
        if gang.level_of(lws) is None:
            for leader in admission.ungate:
                await self._ungate(dict(leader))

        pods = self._pods(key)
        leaders = [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"]
        workers = self.cache["StatefulSet"].owned_by(key)
        await self._ensure_services(lws, leaders)
        requeue = await self._ensure_worker_statefulsets(lws, leaders, workers, revisions)
        workers = self.cache["StatefulSet"].owned_by(key)
        for change in hash_groups.readiness_updates(leaders, workers):
            await self._set_group_ready(change)
        pods = self._pods(key)
        leaders = [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"]
        now = self.now()
        observed = lws.get("status") or {}
        status = compute_hash_status({**lws, "status": unstall_view(observed)}, key_now,
                                     leaders, workers, now)
        return await self._finish(lws, key_now, status, pods, scheduling, revisions,
                                  _earliest(requeue, restart_requeue), now)

    async def _ensure_revision(self, key: Key, lws: dict[str, Any],
                               leader_owner: Mapping[str, Any] | None,
                               workers: list[dict[str, Any]]
                               ) -> tuple[RevisionDecision, list[Mapping[str, Any]]]:
        """SPEC 3.2 steps 3-4 in both identity modes: the revision the leader StatefulSet or
        Deployment (``leader_owner``) carries, created when missing, with its Events; returns
        the decision and the LeaderWorkerSet's revisions, the new one included. ``workers``
        (the worker StatefulSets) tell whether that revision is rolled out completely, which
        makes it current as it stands (``logic.adoption``)."""
        revisions: list[Mapping[str, Any]] = [
            r for r in self.cache["ControllerRevision"].owned_by(key) if owned_by(r, lws)]
        decision = decide_revision(lws, leader_owner, revisions, workers)
        if decision.create is not None:
            created = await self._create(f"{APPS}/controllerrevisions", key[0], decision.create)
            if created is not None:
                self.cache["ControllerRevision"].upsert(created)
            revisions.append(created or decision.create)
        for event in decision.events:
            await self.events.record(lws, event)
        return decision, revisions

    async def _apply_leader_deployment(self, lws: dict[str, Any], key_now: str,
                                       live: dict[str, Any] | None) -> None:
        """Server-side apply the leader Deployment when the cached one differs."""
        namespace, name = str(meta_of(lws).get("namespace")), str(meta_of(lws).get("name"))
        desired = hash_groups.leader_deployment(lws, key_now)
        difference = "." if live is None else first_difference(desired, live)
        if difference is None:
            return
        if live is not None:
            log.info("applying leader deployment %s/%s: %s differs", namespace, name, difference)
        try:
            written = await self.kube.request(
                "PATCH", f"{APPS.format(ns=namespace)}/deployments/{name}", body=desired,
                query={"fieldManager": FIELD_MANAGER, "force": "true"},
                content_type=APPLY_PATCH)
        except ApiException as exc:
            first = live is None
            await self.events.record(lws, Event(
                REASON_FAILED_CREATE if first else REASON_FAILED_UPDATE, EVENT_TYPE_WARNING,
                EVENT_ACTION_CREATE if first else EVENT_ACTION_UPDATE,
                f"Failed to {'create' if first else 'update'} leader deployment {name}: "
                f"{exc.reason}"))
            raise
        self.cache["Deployment"].upsert(written)

    async def _set_group_ready(self, change: hash_groups.GroupReadiness) -> None:
        """Write a leader's ``group-ready`` condition (strategic merge: the other conditions
        are the kubelet's), guarded by the resourceVersion it was decided from."""
        meta = meta_of(change.leader)
        condition = hash_groups.group_ready_condition(change.ready, dt.datetime.now(dt.UTC))
        try:
            written = await self.kube.request(
                "PATCH", f"{CORE.format(ns=meta.get('namespace'))}/pods/{meta.get('name')}"
                         "/status",
                body={"metadata": {"resourceVersion": meta.get("resourceVersion")},
                      "status": {"conditions": [condition]}},
                content_type=STRATEGIC_MERGE_PATCH)
        except ApiException as exc:
            if is_status(exc, 404, 409):
                return  # gone, or changed since: the watch event brings the next pass
            raise
        self.cache["Pod"].upsert(written)

    async def _handle_failures(
        self, key: Key, lws: dict[str, Any], pods: list[dict[str, Any]],
        statefulsets: list[dict[str, Any]], deleted: list[dict[str, Any]],
    ) -> tuple[bool, float | None]:
        """SPEC 4.6 with the guide's budget and backoff: recreate, exhaust or defer the groups
        whose pods failed. Returns whether anything was written (the pass then ends: the watch
        events of those writes bring the next one) and when to look again for a deferral."""
        scan = scan_failures(lws, pods, statefulsets, deleted)
        await self._report_unschedulable(key, lws, pods, scan.unschedulable)
        expected_gone = self._deleted_leaders.setdefault(key, set())
        expected_gone &= {str(meta_of(p).get("uid")) for p in pods}
        deferred = self._deferred.get(key, ()) if recreating(lws) else ()
        candidates = [r for r in still_pending(deferred, pods, scan.recreations)
                      if r.leader_uid not in expected_gone]
        plan = plan_restarts(lws, candidates, self.clock())
        exhaust = {r.leader_uid: r for r in [*plan.exhaust, *unfinished_exhaustions(pods)]}
        before = {r.leader_uid for r in self._deferred.get(key, ())}
        for deferral in plan.deferred:
            if deferral.recreation.leader_uid not in before:
                await self.events.record(lws, backoff_event(deferral))
        self._deferred[key] = [d.recreation for d in plan.deferred]
        if not self._deferred[key]:
            del self._deferred[key]
        if not plan.recreate and not exhaust:
            return False, plan.requeue_after
        if plan.counts is not None:
            written = await self._write_counts(lws, plan.counts, plan.counted)
            if written is None:
                return True, CONFLICT_REQUEUE  # someone else wrote it: decide again
            lws = written
        for recreation in plan.recreate:
            expected_gone.add(recreation.leader_uid)
            if await self._delete_leader(lws, recreation):
                leader = self.cache["Pod"].get(str(meta_of(lws).get("namespace")),
                                               recreation.leader)
                await self.events.record(lws, Event(REASON_RECREATE_GROUP, EVENT_TYPE_NORMAL,
                                                    EVENT_ACTION_DELETE, recreation.note),
                                         related=leader)
        notes = dict((r.leader_uid, e) for r, e in exhaustion_events(plan, lws))
        for recreation in exhaust.values():
            if not await self._retain_group(lws, recreation, pods):
                return True, CONFLICT_REQUEUE
            if recreation.leader_uid in notes:
                await self.events.record(lws, notes[recreation.leader_uid])
        return True, plan.requeue_after

    async def _report_unschedulable(self, key: Key, lws: dict[str, Any],
                                    pods: list[dict[str, Any]], skips: list[Any]) -> None:
        """One GroupUnschedulable Warning per failed pod whose group cannot be scheduled."""
        reported = self._unschedulable_reported.setdefault(key, set())
        reported &= {str(meta_of(p).get("uid")) for p in pods}  # forget pods that are gone
        for skip in skips:
            if skip.trigger_uid in reported:
                continue
            reported.add(skip.trigger_uid)
            await self.events.record(lws, Event(REASON_GROUP_UNSCHEDULABLE, EVENT_TYPE_WARNING,
                                                EVENT_ACTION_DELETE, skip.note))
        if not reported:
            del self._unschedulable_reported[key]

    async def _write_counts(self, lws: dict[str, Any], counts: dict[str, int],
                            counted: dict[str, str] | None = None) -> dict[str, Any] | None:
        """Write the restart counts annotation and, in the same write, the counted leaders
        (``counted``, else the recorded ones of the keys ``counts`` keeps), guarded by
        resourceVersion; the LWS as written, or None when someone else wrote it first (409:
        every caller then ends its pass and decides again on the newer object)."""
        meta = meta_of(lws)
        value = render_counts(counts) if counts else None
        leaders = counted_for(counts, read_counted(lws) if counted is None else counted)
        had_leaders = GROUP_RESTART_COUNTED_ANNOTATION in (meta.get("annotations") or {})
        annotations: dict[str, Any] = {GROUP_RESTART_COUNTS_ANNOTATION: value}
        if leaders or had_leaders:
            annotations[GROUP_RESTART_COUNTED_ANNOTATION] = render_counts(leaders) if leaders \
                else None
        try:
            written = await self.kube.request(
                "PATCH", LWS_PATH.format(ns=meta.get("namespace"), name=meta.get("name")),
                body={"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                   "annotations": annotations}},
                content_type=MERGE_PATCH)
        except ApiException as exc:
            if is_status(exc, 409):
                return None
            raise
        self.cache["LeaderWorkerSet"].upsert(written)
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", **written}

    async def _delete_leader(self, lws: dict[str, Any], recreation: Recreation) -> bool:
        """Foreground-delete a group's leader, guarded by its UID; False if it is gone already
        or is another incarnation."""
        namespace = str(meta_of(lws).get("namespace"))
        bind_group(recreation.group)
        log.info("deleting leader %s/%s of group %s: %s", namespace, recreation.leader,
                 recreation.group, recreation.why or recreation.note)
        try:
            gone = await self.kube.request(
                "DELETE", f"{CORE.format(ns=namespace)}/pods/{recreation.leader}",
                body={"propagationPolicy": "Foreground",
                      "preconditions": {"uid": recreation.leader_uid}})
        except ApiException as exc:
            if is_status(exc, 404, 409):
                return False
            raise
        if gone.get("kind") == "Pod":
            self.cache["Pod"].upsert(gone)  # now terminating: nothing else is built for it
        return True

    async def _retain_group(self, lws: dict[str, Any], recreation: Recreation,
                            pods: list[dict[str, Any]]) -> bool:
        """Stop an exhausted group but keep its pods: our finalizer on every live pod of the
        group (workers first), the exhausted mark on the leader, then the same foreground
        deletion as a recreation. The terminating leader keeps the leader StatefulSet from
        replacing it. False on a write conflict (the next pass finishes the job)."""
        namespace = str(meta_of(lws).get("namespace"))
        members = [p for p in pods
                   if labels_of(p).get(GROUP_INDEX_LABEL) == recreation.group
                   and not meta_of(p).get("deletionTimestamp")]
        members.sort(key=lambda p: labels_of(p).get(WORKER_INDEX_LABEL) == "0")  # leader last
        for pod in members:
            meta = meta_of(pod)
            is_leader = meta.get("uid") == recreation.leader_uid
            finalizers = list(meta.get("finalizers") or [])
            marked = (meta.get("annotations") or {}).get(
                GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION) == "true"
            if CLEANUP_FINALIZER in finalizers and (marked or not is_leader):
                continue
            patch: dict[str, Any] = {"resourceVersion": meta.get("resourceVersion"),
                                     "finalizers": sorted({*finalizers, CLEANUP_FINALIZER})}
            if is_leader:
                patch["annotations"] = {GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION: "true"}
            try:
                written = await self.kube.request(
                    "PATCH", f"{CORE.format(ns=namespace)}/pods/{meta.get('name')}",
                    body={"metadata": patch}, content_type=MERGE_PATCH)
            except ApiException as exc:
                if is_status(exc, 404):
                    continue
                if is_status(exc, 409):
                    return False
                raise
            self.cache["Pod"].upsert(written)
        await self._delete_leader(lws, recreation)
        return True

    async def _release(self, lws: dict[str, Any] | None, release: Release) -> float | None:
        """Let retained pods go: clear recovered groups' counts, then remove our finalizer."""
        if lws is not None and release.clear_counts:
            counts = read_counts(lws)
            remaining = {k: v for k, v in counts.items() if k not in release.clear_counts}
            if remaining != counts:
                written = await self._write_counts(lws, remaining)
                if written is None:
                    return CONFLICT_REQUEUE
                lws = written
        requeue: float | None = None
        for pod in release.pods:
            meta = meta_of(pod)
            try:
                written = await self.kube.request(
                    "PATCH", f"{CORE.format(ns=meta.get('namespace'))}/pods/{meta.get('name')}",
                    body={"metadata": {"resourceVersion": meta.get("resourceVersion"),
                                       "finalizers": without_finalizer(pod) or None}},
                    content_type=MERGE_PATCH)
            except ApiException as exc:
                if is_status(exc, 404):
                    continue
                if is_status(exc, 409):
                    requeue = CONFLICT_REQUEUE
                    continue
                raise
            if written.get("kind") == "Pod":
                self.cache["Pod"].upsert(written)
        if lws is not None:
            for leader in release.recovered:
                await self.events.record(lws, Event(
                    REASON_GROUP_RECOVERED, EVENT_TYPE_NORMAL, EVENT_ACTION_DELETE,
                    f"Recovering group of leader pod {leader}: restart count cleared, retained "
                    "pods released"))
        return requeue

    async def _stop_workers(self, lws: dict[str, Any] | None, pods: list[dict[str, Any]],
                            statefulsets: list[dict[str, Any]], lws_deleting: bool = False
                            ) -> None:
        """Parallel termination: foreground-delete the worker StatefulSets of terminating
        leaders (or all of them while the LeaderWorkerSet is deleted), guarded by UID."""
        for sts in worker_sets_to_stop(lws, pods, statefulsets, lws_deleting=lws_deleting):
            meta = meta_of(sts)
            try:
                gone = await self.kube.request(
                    "DELETE", f"{APPS.format(ns=meta.get('namespace'))}/statefulsets/"
                              f"{meta.get('name')}",
                    body={"propagationPolicy": "Foreground",
                          "preconditions": {"uid": meta.get("uid")}})
            except ApiException as exc:
                if is_status(exc, 404, 409):
                    continue
                raise
            if gone.get("kind") == "StatefulSet":
                self.cache["StatefulSet"].upsert(gone)

    async def _clean_up_after(self, key: Key, lws: dict[str, Any] | None) -> float | None:
        """The LeaderWorkerSet is being deleted or gone: garbage collection removes its
        objects, except that retained pods need our finalizer removed, and Parallel stops the
        workers together with the leaders."""
        self.cache.take_tombstones(key)  # nothing to recreate; don't keep them around
        self._deferred.pop(key, None)
        self._unschedulable_reported.pop(key, None)
        self._deleted_leaders.pop(key, None)
        if not self.cache.synced:
            return 1.0
        pods = self.cache["Pod"].owned_by(key)
        statefulsets = self.cache["StatefulSet"].owned_by(key)
        if not pods and not statefulsets:
            self.cache.forget_departed(key)
            return None
        await self._stop_workers(lws or self.cache.departed(key), pods, statefulsets,
                                 lws_deleting=True)
        release = plan_release(pods, replicas=None, current_key="", partition=0, deleting=True)
        return await self._release(None, release) if release.pods else None

    async def _create(self, path: str, namespace: str,
                      body: dict[str, Any]) -> dict[str, Any] | None:
        """Create; None if it already exists (a cache that lags behind our own writes)."""
        try:
            return await self.kube.request("POST", path.format(ns=namespace), body=body)
        except ApiException as exc:
            if is_status(exc, 409):
                return None
            raise

    async def _ensure_services(self, lws: dict[str, Any], leaders: list[dict[str, Any]]) -> None:
        namespace, name = meta_of(lws).get("namespace"), meta_of(lws).get("name")
        services = self.cache["Service"]
        if wants_shared_service(lws) and services.get(str(namespace), str(name)) is None:
            try:
                await self._create(f"{CORE}/services", str(namespace), shared_service(lws))
            except ApiException as exc:
                await self.events.record(lws, Event(
                    REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE,
                    f"Failed to create headless service for error: {exc.reason}"))
                raise
        if not wants_replica_service(lws):
            return
        for pod in leaders:
            if (meta_of(pod).get("deletionTimestamp") or gang.gated(pod)
                    or services.get(str(namespace), host_name(pod))):
                continue
            await self._create(f"{CORE}/services", str(namespace), replica_service(lws, pod))

    async def _ensure_worker_statefulsets(
        self, lws: dict[str, Any], leaders: list[dict[str, Any]], workers: list[dict[str, Any]],
        revisions: list[Mapping[str, Any]],
    ) -> float | None:
        """SPEC 4.2 steps 10-16 for every leader pod; returns a requeue delay when a leader's
        revision is not visible yet."""
        spec = lws.get("spec") or {}
        if int((spec.get("leaderWorkerTemplate") or {}).get("size") or 1) == 1:
            return None
        namespace = str(meta_of(lws).get("namespace"))
        existing = {str(meta_of(s).get("name")) for s in workers}
        requeue: float | None = None
        for pod in leaders:
            bind_group(labels_of(pod).get(GROUP_INDEX_LABEL))
            pod_name = str(meta_of(pod).get("name"))
            if meta_of(pod).get("deletionTimestamp") or host_name(pod) in existing:
                continue
            if gang.gated(pod):
                continue  # its PodGroups first: the gate is lifted once they exist
            if spec.get("startupPolicy") == "LeaderReady" and not (
                    containers_ready(pod) if hashed(lws) else pod_ready(pod)):
                continue  # a Hash leader's group-ready gate waits for its workers
            revision = revision_for_key(revisions,
                                        str(labels_of(pod).get(TEMPLATE_REVISION_HASH_LABEL) or ""))
            if revision is None:
                requeue = MISSING_REVISION_REQUEUE
                continue
            node_labels: dict[str, str] | None = None
            if exclusive_topology_key(lws) is not None:
                node = (pod.get("spec") or {}).get("nodeName")
                if not node:
                    continue  # placed once the leader is scheduled (its update wakes us)
                got = await self.kube.request("GET", f"/api/v1/nodes/{node}")
                node_labels = dict(labels_of(got))
            revision_lws = apply_revision(lws, dict(revision.get("data") or {}))
            body = worker_statefulset(revision_lws, lws, pod, node_labels)
            try:
                created = await self._create(f"{APPS}/statefulsets", namespace, body)
            except ApiException as exc:
                await self.events.record(lws, Event(
                    REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE,
                    f"Failed to create worker statefulset for leader pod {pod_name}: "
                    f"{exc.reason}"), related=pod)
                raise
            if created is not None:
                self.cache["StatefulSet"].upsert(created)
                await self.events.record(lws, Event(
                    REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL, EVENT_ACTION_CREATE,
                    f"Created worker statefulset for leader pod {pod_name}"), related=pod)
        bind_group(None)
        return requeue

    # ------------------------------------------------------------------ native gang scheduling

    async def _ensure_scheduling(
        self, lws: dict[str, Any], pods: list[dict[str, Any]],
        may_ungate: Callable[[Mapping[str, Any]], bool] = lambda _: True,
    ) -> tuple[dict[str, Any], bool]:
        """Workload, then PodGroups, then the gates of the leaders whose PodGroups exist; stale
        PodGroups go. Returns the WorkloadSchedulingCreated facts (``ok``, ``reason``,
        ``message``) and whether member pods may be created (the Workload, and the whole-LWS
        PodGroup, exist)."""
        namespace = str(meta_of(lws).get("namespace"))
        if not self.native_scheduling:
            return {"ok": False, "reason": gang.REASON_API_NOT_AVAILABLE,
                    "message": "the API server does not serve scheduling.k8s.io/v1beta1 Workload "
                               "and PodGroup (enable the GenericWorkload feature gate)"}, False
        leaders = [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"]
        desired_workload = gang.desired_workload(lws, leaders)
        if desired_workload is None:  # a parent controller owns the Workload
            source, why = gang.find_parent_workload(
                lws, self.cache["Workload"].in_namespace(namespace))
            if source is None:
                return {"ok": False, "reason": gang.REASON_PARENT_NOT_READY,
                        "message": why}, False
            message = (f"PodGroups instantiate template {source.parent_template} of the parent's "
                       f"Workload {source.workload}")
        else:
            failure = await self._ensure_workload(lws, desired_workload)
            if failure is not None:
                return failure, False
            source = gang.Source(str(desired_workload["metadata"]["name"]))
            message = f"Workload {source.workload} is created"
        existing = {name_of(g): g for g in self.cache["PodGroup"].owned_by(
            (namespace, str(meta_of(lws).get("name"))))}
        failed: list[str] = []
        desired = gang.desired_pod_groups(lws, source, leaders)
        for group in desired:
            name = name_of(group)
            live = existing.get(name)
            if live is None:
                try:
                    created = await self._create(f"{SCHEDULING}/podgroups", namespace, group)
                except ApiException as exc:
                    failed.append(f"{name}: {exc.reason}")
                    await self.events.record(lws, Event(
                        REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE,
                        f"Failed to create PodGroup {name}: {exc.reason}"))
                    continue
                if created is not None:
                    self.cache["PodGroup"].upsert(created)
                    existing[name] = created
                    await self.events.record(lws, Event(
                        REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL, EVENT_ACTION_CREATE,
                        f"Created PodGroup {name}"))
            elif meta_of(live).get("deletionTimestamp"):
                failed.append(f"{name} is still being deleted")
            elif (labels_of(group).get(SCHEDULING_LEVEL_LABEL) == "lws"
                  and gang.min_count_of(group) != gang.min_count_of(live)
                  and gang.min_count_of(live) is not None):
                patched = await self.kube.request(
                    "PATCH", f"{SCHEDULING.format(ns=namespace)}/podgroups/{name}",
                    body={"metadata": {"resourceVersion": meta_of(live).get("resourceVersion")},
                          "spec": {"schedulingPolicy": {"gang": {
                              "minCount": gang.min_count_of(group)}}}},
                    content_type=MERGE_PATCH)
                self.cache["PodGroup"].upsert(patched)
        ready = {n for n, g in existing.items() if not meta_of(g).get("deletionTimestamp")}
        if gang.level_of(lws) == "lws" and desired and name_of(desired[0]) not in ready:
            return {"ok": False, "reason": gang.REASON_POD_GROUP_CREATE_FAILED,
                    "message": "; ".join(failed)}, False
        for leader in leaders:
            if (gang.gated(leader) and not meta_of(leader).get("deletionTimestamp")
                    and may_ungate(leader)
                    and set(gang.names_for_leader(lws, gang.workload_name(lws), leader))
                    <= ready):
                await self._ungate(leader)
        await self._recreate_mismatched(lws, gang.workload_name(lws), pods)
        for stale in gang.stale_pod_groups(existing.values(), [name_of(g) for g in desired],
                                           pods):
            await self._delete_pod_group(stale)
        if failed:
            return {"ok": False, "reason": gang.REASON_POD_GROUP_CREATE_FAILED,
                    "message": "; ".join(failed)}, True
        return {"ok": True, "reason": gang.REASON_CREATED, "message": message}, True

    async def _ensure_workload(self, lws: dict[str, Any], desired: dict[str, Any]
                               ) -> dict[str, Any] | None:
        """Create the Workload, or bring its gang minimums up to date; the failure, or None."""
        namespace = str(meta_of(lws).get("namespace"))
        name = name_of(desired)
        live = self.cache["Workload"].get(namespace, name)
        try:
            if live is None:
                created = await self._create(f"{SCHEDULING}/workloads", namespace, desired)
                if created is not None:
                    self.cache["Workload"].upsert(created)
                    await self.events.record(lws, Event(
                        REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL, EVENT_ACTION_CREATE,
                        f"Created Workload {name}"))
                return None
            if not owned_by(live, lws):
                return {"ok": False, "reason": gang.REASON_WORKLOAD_CREATE_FAILED,
                        "message": f"Workload {name} exists but is not controlled by this "
                                   "LeaderWorkerSet"}
            patch = gang.workload_update(desired, live)
            if patch is not None:
                written = await self.kube.request(
                    "PATCH", f"{SCHEDULING.format(ns=namespace)}/workloads/{name}", body=patch,
                    content_type=MERGE_PATCH)
                self.cache["Workload"].upsert(written)
        except ApiException as exc:
            if is_status(exc, 409):
                return {"ok": False, "reason": gang.REASON_WORKLOAD_CREATE_FAILED,
                        "message": f"Workload {name}: conflict, retrying"}
            await self.events.record(lws, Event(
                REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE,
                f"Failed to create Workload {name}: {exc.reason}"))
            return {"ok": False, "reason": gang.REASON_WORKLOAD_CREATE_FAILED,
                    "message": f"Workload {name}: {exc.reason}"}
        return None

    async def _ungate(self, leader: dict[str, Any]) -> None:
        """Lift the group-replacement gate (guarded by resourceVersion; a conflict is retried
        by the pass its watch event brings)."""
        meta = meta_of(leader)
        try:
            written = await self.kube.request(
                "PATCH", f"{CORE.format(ns=meta.get('namespace'))}/pods/{meta.get('name')}",
                body={"metadata": {"resourceVersion": meta.get("resourceVersion")},
                      "spec": {"schedulingGates": gang.gates_without_ours(leader) or None}},
                content_type=MERGE_PATCH)
        except ApiException as exc:
            if is_status(exc, 404, 409):
                return
            raise
        self.cache["Pod"].upsert(written)

    async def _recreate_mismatched(self, lws: dict[str, Any], workload: str,
                                   pods: list[dict[str, Any]]) -> None:
        """Upgrade skew: a group whose workers joined another PodGroup than their leader's is
        recreated by deleting its leader, while none of its workers is scheduled."""
        for leader in gang.mismatched_groups(lws, workload, pods):
            meta = meta_of(leader)
            group = str(labels_of(leader).get(GROUP_INDEX_LABEL, ""))
            note = (f"Workers of leader pod {meta.get('name')} joined another PodGroup than the "
                    f"leader's; deleted leader pod {meta.get('name')} to recreate group {group}")
            recreation = Recreation(leader=str(meta.get("name")), leader_uid=str(meta.get("uid")),
                                    trigger=str(meta.get("name")), group=group, why=note)
            if await self._delete_leader(lws, recreation):
                await self.events.record(lws, Event(REASON_RECREATE_GROUP, EVENT_TYPE_NORMAL,
                                                    EVENT_ACTION_DELETE, note), related=leader)

    async def _delete_pod_group(self, group: Mapping[str, Any]) -> None:
        meta = meta_of(group)
        try:
            await self.kube.request(
                "DELETE", f"{SCHEDULING.format(ns=meta.get('namespace'))}/podgroups/"
                          f"{meta.get('name')}",
                body={"preconditions": {"uid": meta.get("uid")}})
        except ApiException as exc:
            if not is_status(exc, 404, 409):
                raise
        self.cache["PodGroup"].delete(group)

    async def _write_scheduling_condition(self, lws: dict[str, Any],
                                          facts: dict[str, Any]) -> None:
        """The WorkloadSchedulingCreated condition alone, when the pass stops before status."""
        meta = meta_of(lws)
        observed = lws.get("status") or {}
        status = gang.apply_condition(dict(observed), gang.scheduling_condition(
            observed.get("conditions") or [], now=self.now(),
            generation=int(meta.get("generation") or 0), **facts))
        if status == observed:
            return
        written = await self.kube.request(
            "PATCH", LWS_PATH.format(ns=meta.get("namespace"), name=meta.get("name")) + "/status",
            body={"metadata": {"resourceVersion": meta.get("resourceVersion")},
                  "status": status}, content_type=MERGE_PATCH)
        self.cache["LeaderWorkerSet"].upsert(written)

    async def _ensure_volcano_pod_groups(self, lws: dict[str, Any],
                                         leaders: list[dict[str, Any]]) -> None:
        """SPEC 5.1: a volcano PodGroup per (non-deleting) leader, created if missing, never
        updated, owned by the leader pod."""
        namespace = str(meta_of(lws).get("namespace"))
        store = self.cache["VolcanoPodGroup"]
        for leader in leaders:
            if meta_of(leader).get("deletionTimestamp"):
                continue
            body = volcano.pod_group(lws, leader)
            if body is None or store.get(namespace, name_of(body)) is not None:
                continue
            try:
                created = await self._create(f"{VOLCANO}/podgroups", namespace, body)
            except ApiException as exc:
                await self.events.record(lws, Event(
                    REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE,
                    f"Failed to create volcano PodGroup {name_of(body)}: {exc.reason}"),
                    related=leader)
                continue
            if created is not None:
                store.upsert(created)

    async def _prune_revisions(self, namespace: str, current: str,
                               revisions: list[Mapping[str, Any]]) -> None:
        """Delete revisions other than the current one, each guarded by its UID."""
        for revision in revisions:
            if labels_of(revision).get(TEMPLATE_REVISION_HASH_LABEL) == current:
                continue
            meta = meta_of(revision)
            try:
                await self.kube.request(
                    "DELETE", f"{APPS.format(ns=namespace)}/controllerrevisions/{meta.get('name')}",
                    body={"preconditions": {"uid": meta.get("uid")}})
            except ApiException as exc:
                if not is_status(exc, 404, 409):
                    raise
            self.cache["ControllerRevision"].delete(revision)

