"""A DisaggregatedSet's world for the reconciler's table tests: the real reconciler, the real
runner, the real executor and cache, and a simulated API server behind the executor.

``DsWorld.reconcile`` runs one whole pass of ``DisaggregatedSetReconciler`` (every step, the
runner's carry and error joining, the executor's policies and its writes into the watch cache).
Only the requests are simulated (``SimulatedExecutor._send``): the API server's objects live in
``server``, a create of a taken name answers 409, a patch naming another UID or an older
resourceVersion answers 409, a delete checks its UID precondition. Objects the controller's
watches would see (LeaderWorkerSets and Services carrying the set's name label, every scaler and
set) are mirrored into the cache as watch events would bring them. Each request is logged as one
short line, each Event as ``event <Reason>: <note>``, so a test reads as the pass's writes; the
writes of the set's revision history (ControllerRevisions, ``logic.disaggregated.history``) go to
a log of their own (``history``), so the rollout tables read as upstream's and the history's
tests read its writes alone.

``ready`` makes every LeaderWorkerSet ready at its replicas (the LeaderWorkerSet controller and
the kubelet, collapsed), as upstream's reconciler tests do between passes.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes.aio.client.exceptions import ApiException

from lws_operator.api.disaggregated import (
    API_VERSION,
    KIND,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    SCALER_KIND,
    SLICE_LABEL,
)
from lws_operator.controllers.disaggregated_runtime import KINDS
from lws_operator.controllers.disaggregatedset import DisaggregatedSetReconciler, PassFailed
from lws_operator.kube.cache import ClusterCache, ds_owner_key
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.executor import Executor
from lws_operator.logic.identity.writes import apply_merge_patch
from lws_operator.logic.objects.events import Event
from lws_operator.logic.reconcile.plan import Apply, Create, Delete, Patch, Update

NAMESPACE = "ns"
DS_NAME = "my-ds"
DS_UID = "ds-uid"
NOW = "2026-01-01T00:10:00Z"
LWS_API = "leaderworkerset.x-k8s.io/v1"
KIND_OF_PLURAL = {"leaderworkersets": "LeaderWorkerSet", "services": "Service",
                  "disaggregatedsets": KIND, "disaggregatedsetrolescalers": SCALER_KIND,
                  "controllerrevisions": "ControllerRevision"}


def role(name: str, replicas: int | None = 1, image: str = "app:1", size: int = 1,
         surge: int | str | None = None, unavailable: int | str | None = None,
         external: bool = False) -> dict[str, Any]:
    """A role as the API server stores it (the schema's defaults written out)."""
    spec: dict[str, Any] = {"leaderWorkerTemplate": {
        "size": size, "restartPolicy": "RecreateGroupOnPodRestart",
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": image}]}}},
        "startupPolicy": "LeaderCreated"}
    if replicas is not None:
        spec["replicas"] = replicas
    if surge is not None or unavailable is not None:
        spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxSurge": 0 if surge is None else surge,
            "maxUnavailable": 1 if unavailable is None else unavailable, "partition": 0}}
    out: dict[str, Any] = {"name": name, "spec": spec}
    if external:
        out["scaling"] = {"mode": "External"}
    return out


def disaggregated_set(*roles: dict[str, Any], slices: int | None = None,
                      name: str = DS_NAME) -> dict[str, Any]:
    spec: dict[str, Any] = {"roles": list(roles)}
    if slices is not None:
        spec["slices"] = slices
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": DS_UID, "generation": 1,
                         "resourceVersion": "1", "creationTimestamp": NOW},
            "spec": spec}


class _Events(EventRecorder):
    """Events as lines of the world's log."""

    def __init__(self, log: list[str]) -> None:  # no client: nothing is sent
        self.log = log

    def record(self, regarding: Mapping[str, Any], event: Event,
               related: Mapping[str, Any] | None = None) -> None:
        self.log.append(f"event {event.reason}: {event.note}")


def _conflict(reason: str) -> ApiException:
    return ApiException(status=409, reason=reason)


@dataclass
class DsWorld:
    """The simulated API server's objects by (kind, name), the controller's cache, the log."""

    cache: ClusterCache
    server: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)
    history: list[str] = field(default_factory=list)
    version: int = 100
    tick: int = 0
    uids: int = 0

    # ------------------------------------------------------------------- the API server

    def next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def put(self, kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store ``obj`` on the server (a fresh resourceVersion; a UID and creation time when
        it has none) and show it to the cache when the controller's watches would."""
        body = copy.deepcopy(dict(obj))
        meta = body.setdefault("metadata", {})
        meta.setdefault("namespace", NAMESPACE)
        if not meta.get("uid"):
            self.uids += 1
            meta["uid"] = f"{kind.lower()}-{self.uids}"
        if not meta.get("creationTimestamp"):
            self.tick += 1
            meta["creationTimestamp"] = f"2026-01-01T01:{self.tick // 60:02d}:{self.tick % 60:02d}Z"
        meta["resourceVersion"] = self.next_version()
        self.server[(kind, meta["name"])] = body
        watched = kind in (KIND, SCALER_KIND) or NAME_LABEL in (meta.get("labels") or {})
        if watched:
            self.cache[kind].upsert(body)
        return copy.deepcopy(body)

    def remove(self, kind: str, name: str) -> None:
        obj = self.server.pop((kind, name), None)
        if obj is not None:
            self.cache[kind].delete(obj, gone=True)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        return self.server.get((kind, name))

    # ----------------------------------------------------------------------- the objects

    @property
    def ds(self) -> dict[str, Any]:
        found = self.get(KIND, DS_NAME)
        assert found is not None
        return found

    def edit(self, how: Any) -> None:
        """Change the set's spec (a new generation), as ``kubectl apply`` would."""
        ds = copy.deepcopy(self.ds)
        how(ds)
        ds["metadata"]["generation"] += 1
        self.put(KIND, ds)

    def objects(self, kind: str) -> dict[str, dict[str, Any]]:
        return {name: obj for (k, name), obj in sorted(self.server.items()) if k == kind}

    def lws(self) -> dict[str, dict[str, Any]]:
        return self.objects("LeaderWorkerSet")

    def replicas(self) -> dict[str, int | None]:
        """Every LeaderWorkerSet's ``spec.replicas`` by name."""
        return {name: obj["spec"].get("replicas") for name, obj in self.lws().items()}

    def by_revision(self, role_order: Iterable[str]) -> dict[str, tuple[int, ...]]:
        """Replicas per revision label, one number per role (0 for a role without a child)."""
        roles = list(role_order)
        out: dict[str, list[int]] = {}
        for obj in self.lws().values():
            labels = obj["metadata"]["labels"]
            counts = out.setdefault(labels[REVISION_LABEL], [0] * len(roles))
            counts[roles.index(labels[ROLE_LABEL])] += obj["spec"].get("replicas", 1)
        return {rev: tuple(c) for rev, c in out.items()}

    def ready(self) -> None:
        """Every LeaderWorkerSet ready and updated at its replicas."""
        for name, obj in self.lws().items():
            replicas = obj["spec"].get("replicas", 1)
            status = {"replicas": replicas, "readyReplicas": replicas,
                      "updatedReplicas": replicas}
            if obj.get("status") != status:
                self.put("LeaderWorkerSet", {**obj, "status": status})
            del name

    def child(self, name: str, role_name: str, rev: str, replicas: int | None,
              slice_index: int | None = 0, owner_uid: str = DS_UID, ready: bool = True,
              created: str | None = None, annotations: Mapping[str, str] | None = None
              ) -> dict[str, Any]:
        """A child LeaderWorkerSet as a controller made it (``slice_index`` None: a legacy one
        without a slice label)."""
        labels = {NAME_LABEL: DS_NAME, ROLE_LABEL: role_name, REVISION_LABEL: rev}
        if slice_index is not None:
            labels[SLICE_LABEL] = str(slice_index)
        spec: dict[str, Any] = {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "spec": {"containers": [{"name": "main", "image": "old"}]}}}}
        if replicas is not None:
            spec["replicas"] = replicas
        count = 1 if replicas is None else replicas
        meta: dict[str, Any] = {
            "name": name, "namespace": NAMESPACE, "labels": labels,
            "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": DS_NAME,
                                 "uid": owner_uid, "controller": True}]}
        if created:
            meta["creationTimestamp"] = created
        if annotations:
            meta["annotations"] = dict(annotations)
        return self.put("LeaderWorkerSet", {
            "apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": meta, "spec": spec,
            "status": {"replicas": count, "readyReplicas": count if ready else 0,
                       "updatedReplicas": count}})

    # --------------------------------------------------------------------------- a pass

    def reconcile(self, caches_current: bool = True) -> Pass:
        """One pass of the real reconciler; the requests and Events it made, in order.
        ``caches_current``: whether the children's watches are open (False: a watch gap)."""
        start = len(self.log)
        reconciler = DisaggregatedSetReconciler(
            SimulatedExecutor(self), self.cache, now=lambda: NOW)
        reconciler.caches_current = lambda: caches_current
        error: str | None = None
        requeue: float | None = None
        try:
            requeue = asyncio.run(reconciler.reconcile((NAMESPACE, DS_NAME)))
        except PassFailed as exc:
            error = str(exc)
        return Pass(self.log[start:], requeue, error)


@dataclass
class Pass:
    lines: list[str]
    requeue: float | None
    error: str | None

    def writes(self) -> list[str]:
        return [line for line in self.lines if not line.startswith("event ")]

    def events(self) -> list[str]:
        return [line for line in self.lines if line.startswith("event ")]


class SimulatedExecutor(Executor):
    """The real executor, its requests answered by the world instead of an API server."""

    def __init__(self, world: DsWorld) -> None:
        super().__init__(None, world.cache, _Events(world.log))  # type: ignore[arg-type]
        self.world = world

    async def _send(self, action: Apply | Create | Patch | Update | Delete) -> dict[str, Any]:
        world = self.world
        plural = action.target.collection.rsplit("/", 1)[-1]
        kind = KIND_OF_PLURAL[plural]
        log = world.history if kind == "ControllerRevision" else world.log
        if isinstance(action, Create):
            name = str(action.body["metadata"]["name"])
            if world.get(kind, name) is not None:
                log.append(f"create {kind} {name}: 409")
                raise _conflict("AlreadyExists")
            line = f"create {kind} {name}"
            if kind == "LeaderWorkerSet":
                line += f" replicas={action.body['spec']['replicas']}"
            log.append(line)
            return world.put(kind, action.body)
        if isinstance(action, Patch):
            live = world.get(kind, action.name)
            if live is None:
                raise ApiException(status=404, reason="NotFound")
            meta = action.body.get("metadata") or {}
            if meta.get("uid") not in (None, live["metadata"]["uid"]):
                raise _conflict("Precondition failed: UID")
            if meta.get("resourceVersion") not in (None, live["metadata"]["resourceVersion"]):
                raise _conflict("the object has been modified")
            body = {k: v for k, v in action.body.items() if k != "metadata"}
            extra = {k: v for k, v in meta.items() if k not in ("uid", "resourceVersion")}
            if extra:
                body["metadata"] = extra
            log.append(_patch_line(kind, action.name, action.subresource, body))
            return world.put(kind, apply_merge_patch(copy.deepcopy(live), body))
        if isinstance(action, Update):
            live = world.get(kind, action.name)
            if live is None:
                raise ApiException(status=404, reason="NotFound")
            version = action.body["metadata"].get("resourceVersion")
            if version != live["metadata"]["resourceVersion"]:
                raise _conflict("the object has been modified")
            log.append(f"update {kind} {action.name}")
            return world.put(kind, action.body)
        if isinstance(action, Delete):
            live = world.get(kind, action.name)
            if live is None:
                raise ApiException(status=404, reason="NotFound")
            if live["metadata"]["uid"] != action.uid:
                raise _conflict("Precondition failed: UID")
            log.append(f"delete {kind} {action.name}")
            world.remove(kind, action.name)
            return {"kind": "Status", "status": "Success"}
        raise AssertionError(f"the DisaggregatedSet controller never applies: {action}")


def _patch_line(kind: str, name: str, subresource: str | None, body: Mapping[str, Any]) -> str:
    if subresource == "status":
        return f"status {kind} {name}"
    spec = body.get("spec") or {}
    if set(body) == {"spec"} and set(spec) == {"replicas"}:
        return f"scale {name} to {spec['replicas']}"
    annotations = (body.get("metadata") or {}).get("annotations") or {}
    if set(body) == {"metadata"} and annotations:
        return f"annotate {name} " + ",".join(f"{k.rsplit('/', 1)[-1]}={v}"
                                              for k, v in sorted(annotations.items()))
    return f"patch {kind} {name}"


def new_world(ds: Mapping[str, Any]) -> DsWorld:
    """A world holding the set (and nothing else yet), every cache synced."""
    world = DsWorld(ClusterCache(KINDS, ds_owner_key))
    for store in world.cache.stores.values():
        store.synced = True
    world.put(KIND, ds)
    return world
