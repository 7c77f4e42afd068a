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
    REASON_FAILED_CREATE,
    REASON_FAILED_UPDATE,
    REASON_GROUPS_PROGRESSING,
    REASON_RECREATE_GROUP,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.client import APPLY_PATCH, MERGE_PATCH, ApiException, KubeClient, is_status
from lws_operator.kube.events import EventRecorder
from lws_operator.logic.events import Event
from lws_operator.logic.objects import labels_of, meta_of
from lws_operator.logic.readiness import pod_ready
from lws_operator.logic.reconcile import (
    decide_revision,
    first_difference,
    owned_by,
    revision_for_key,
)
from lws_operator.logic.restart import plan_recreations
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
    leader_statefulset,
    worker_statefulset,
)
from lws_operator.logic.status import compute_status

log = logging.getLogger(__name__)

APPS = "/apis/apps/v1/namespaces/{ns}"
CORE = "/api/v1/namespaces/{ns}"
LWS_PATH = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets/{name}"
STS_DELETING_REQUEUE = 5.0
MISSING_REVISION_REQUEUE = 1.0


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
                 stall_grace: float = DEFAULT_GRACE_SECONDS) -> None:
        self.kube = kube
        self.cache = cache
        self.events = events
        self.now = now
        self.clock = clock
        self.stall_grace = stall_grace

    async def reconcile(self, key: Key) -> float | None:
        """One pass; returns seconds after which to look again, or None."""
        namespace, name = key
        lws = self.cache["LeaderWorkerSet"].get(namespace, name)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            self.cache.take_tombstones(key)  # nothing to recreate; don't keep them around
            return None  # garbage collection cascades everything; there are no finalizers
        if not self.cache.synced:
            return 1.0
        lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", **lws}
        statefulsets = self.cache["StatefulSet"].owned_by(key)
        leader_sts = next((s for s in statefulsets if meta_of(s).get("name") == name
                           and owned_by(s, lws)), None)
        if leader_sts is not None and meta_of(leader_sts).get("deletionTimestamp"):
            return STS_DELETING_REQUEUE
        workers = [s for s in statefulsets if s is not leader_sts]
        if await self._recreate_failed_groups(lws, self.cache["Pod"].owned_by(key), statefulsets,
                                              self.cache.take_tombstones(key)):
            return None  # the deletions' watch events bring the next pass
        pods = self.cache["Pod"].owned_by(key)
        leaders = [p for p in pods if labels_of(p).get(WORKER_INDEX_LABEL) == "0"]
        revisions: list[Mapping[str, Any]] = [
            r for r in self.cache["ControllerRevision"].owned_by(key) if owned_by(r, lws)]

        decision = decide_revision(lws, leader_sts, revisions)
        if decision.create is not None:
            created = await self._create(f"{APPS}/controllerrevisions", namespace, decision.create)
            if created is not None:
                self.cache["ControllerRevision"].upsert(created)
            revisions.append(created or decision.create)
        for event in decision.events:
            await self.events.record(lws, event)
        key_now = decision.current_key

        rollout = plan_rollout(rollout_snapshot(lws, leader_sts, leaders, workers, key_now,
                                                decision.updated))
        for event in rollout.events:
            await self.events.record(lws, event)
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

        await self._ensure_services(lws, leaders)
        requeue = await self._ensure_worker_statefulsets(lws, leaders, workers, revisions)

        assert leader_sts is not None
        now = self.now()
        observed = lws.get("status") or {}
        status = compute_status({**lws, "status": unstall_view(observed)}, key_now, leader_sts,
                                leaders, workers, now)
        stall = find_stall(pods, key_now, self.clock(), self.stall_grace)
        desired_status, stall_events = apply_stall(status.status, observed, stall, now)
        requeue = _earliest(requeue, stall.recheck_after)
        if desired_status != observed:
            body = {"metadata": {"resourceVersion": meta_of(lws).get("resourceVersion")},
                    "status": desired_status}
            written = await self.kube.request(
                "PATCH", LWS_PATH.format(ns=namespace, name=name) + "/status", body=body,
                content_type=MERGE_PATCH)
            self.cache["LeaderWorkerSet"].upsert(written)  # the next pass must not redo it
            for event in (*status.events, *stall_events):
                await self.events.record(lws, event)
        if status.update_done:
            await self._prune_revisions(namespace, key_now, revisions)
        return requeue

    async def _recreate_failed_groups(
        self, lws: dict[str, Any], pods: list[dict[str, Any]],
        statefulsets: list[dict[str, Any]], deleted: list[dict[str, Any]],
    ) -> bool:
        """SPEC 4.6: delete the leader of every failed group, foreground and guarded by its UID,
        so the whole group is rebuilt. Returns whether any group is being recreated."""
        namespace = str(meta_of(lws).get("namespace"))
        recreating = False
        for recreation in plan_recreations(lws, pods, statefulsets, deleted):
            log.info("recreating group %s of %s/%s: %s", recreation.group, namespace,
                     meta_of(lws).get("name"), recreation.why)
            try:
                gone = await self.kube.request(
                    "DELETE", f"{CORE.format(ns=namespace)}/pods/{recreation.leader}",
                    body={"propagationPolicy": "Foreground",
                          "preconditions": {"uid": recreation.leader_uid}})
            except ApiException as exc:
                if is_status(exc, 404, 409):
                    continue  # already gone, or another incarnation: nothing to recreate
                raise
            recreating = True
            if gone.get("kind") == "Pod":
                self.cache["Pod"].upsert(gone)  # now terminating: nothing else is built for it
            leader = self.cache["Pod"].get(namespace, recreation.leader) or gone
            await self.events.record(lws, Event(REASON_RECREATE_GROUP, EVENT_TYPE_NORMAL,
                                                EVENT_ACTION_DELETE, recreation.note),
                                     related=leader)
        return recreating

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
            pod_name = str(meta_of(pod).get("name"))
            if meta_of(pod).get("deletionTimestamp") or services.get(str(namespace), pod_name):
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
            pod_name = str(meta_of(pod).get("name"))
            if meta_of(pod).get("deletionTimestamp") or pod_name in existing:
                continue
            if spec.get("startupPolicy") == "LeaderReady" and not pod_ready(pod):
                continue
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
        return requeue

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

