"""A LeaderWorkerSet's world for the reconciler's table tests: its objects in the operator's
real watch cache, built as production builds them, and one pass planned over it.

``plan_pass`` runs the pass (``logic.leaderworkerset.pipeline.reconcile``) with a ``run`` that does
what the controller's runner does, with no API server: before each step it builds the snapshot from
the cache, and it stores what a create or an apply would leave in the cache (the object planned,
with a UID), as the executor stores the answers, so later steps see them; a patch of a set or
a pod, and an update (of a ControllerRevision) unless its resourceVersion is stale, are stored
too. Deletes and other patches only appear in the plan (a pass that makes one ends, or moves on
without reading it back). The result is the pass's
actions in order, each as one short line.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from lws_operator.controllers.leaderworkerset import Held
from lws_operator.controllers.passes import PassEnds, plan_through
from lws_operator.kube.cache import ClusterCache
from lws_operator.logic.hash_mode import hash_groups
from lws_operator.logic.identity.revision import apply_revision
from lws_operator.logic.identity.revision_decision import decide_revision
from lws_operator.logic.leaderworkerset.pipeline import configuration, reconcile
from lws_operator.logic.mutation import unmutated
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.providers import none
from lws_operator.logic.reconcile.plan import (
    Apply,
    Create,
    Delete,
    Patch,
    Plan,
    Planned,
    Record,
    Update,
    earliest,
)
from lws_operator.logic.reconcile.snapshot import Memory, Observed, Options, Remember
from lws_operator.logic.workloads.statefulsets import leader_statefulset, worker_statefulset
from tests.harness.as_operated import NAMESPACE, cached, created_pod, running, stored_lws

NOW = "2026-01-01T00:10:00Z"
CLOCK = 1_767_226_200.0  # 2026-01-01T00:10:00Z
P = "leaderworkerset.sigs.k8s.io/"
GATE = {"name": P + "group-replacement"}  # the scheduling gate of a replaced group's pods


def manifest(size: int = 3, replicas: int = 2, annotations: dict[str, str] | None = None,
             template: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": {"spec": {"containers": [
        {"name": "main", "image": "app:1"}]}}}
    lwt.update(template or {})
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt, **spec}}


@dataclass
class World:
    """The cache, the set's key, and what the pass may read beyond the cache."""

    cache: ClusterCache
    key: tuple[str, str] = (NAMESPACE, "sample")
    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    memory: Memory = field(default_factory=Memory)
    options: Options = field(default_factory=lambda: Options(stall_grace=600.0))
    clock: float = CLOCK  # the pass's clock; ``now`` stays NOW, as conditions stamp it
    held: Held | None = None
    _uids: int = 0

    def uid(self, prefix: str) -> str:
        self._uids += 1
        return f"{prefix}-{self._uids}"

    @property
    def lws(self) -> dict[str, Any]:
        found = self.cache["LeaderWorkerSet"].get(*self.key)
        assert found is not None
        return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", **found}

    def observe(self, fetched: Mapping[str, Any]) -> Observed:
        """The snapshot as the controller builds it: from what it holds of the set between
        steps and passes (``controllers.leaderworkerset.Held``), so the tables also check that
        nothing it keeps, nor the memo of derived facts, changes a plan."""
        key, cache = self.key, self.cache
        lws = cache["LeaderWorkerSet"].get(*key)
        assert lws is not None
        if self.held is None:
            self.held = Held(cache, key[0])
        held = self.held
        held.refresh(cache, key, lws)
        return Observed(
            body=held.body, pods=held.pods, all_pods=held.owned["Pod"],
            statefulsets=held.owned["StatefulSet"], deployments=held.owned["Deployment"],
            services={name_of(s): s for s in cache["Service"].in_namespace(key[0])},
            revisions=held.owned["ControllerRevision"], pod_groups=held.owned["PodGroup"],
            workloads={name_of(w): w for w in cache["Workload"].in_namespace(key[0])},
            volcano_groups={name_of(g): g
                            for g in cache["VolcanoPodGroup"].in_namespace(key[0])},
            tombstones=tuple(unmutated.split(cache.tombstones(key))[0]),
            now=NOW, clock=self.clock, options=self.options, memory=self.memory,
            fetched=dict(fetched), memo=held.memo)


def new_world(body: Mapping[str, Any]) -> World:
    """A set just created: nothing of it exists yet."""
    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    lws = stored_lws(body)
    cache["LeaderWorkerSet"].upsert(lws)
    return World(cache)


def built_world(body: Mapping[str, Any], states: Mapping[str, Callable[[dict[str, Any]], None]]
                | None = None, worker_sets: bool = True, provider: str | None = None) -> World:
    """A set whose groups all exist as production creates them (Ordinal or Hash), every pod
    Running and Ready unless ``states`` (``group/worker`` -> a function changing the pod)
    says otherwise; the revision and leader owner exist. Its status is not written yet."""
    world = new_world(body)
    lws = world.lws
    decision = decide_revision(lws, None, [])
    assert decision.create is not None
    revision = {**decision.create, "metadata": {**decision.create["metadata"],
                                                 "uid": "revision-uid"}}
    world.cache["ControllerRevision"].upsert(revision)
    key = decision.current_key
    revision_lws = apply_revision(lws, dict(revision["data"]))
    hashed = lws["spec"].get("groupIdentity") == "Hash"
    replicas = int(lws["spec"]["replicas"])
    owner = (hash_groups.leader_deployment(lws, key) if hashed
             else leader_statefulset(lws, key, 0, replicas))
    owner["metadata"]["uid"] = "owner-uid"
    owner["metadata"]["resourceVersion"] = "150"
    owner["status"] = {"replicas": replicas, "readyReplicas": replicas,
                       "availableReplicas": replicas, "updatedReplicas": replicas,
                       "currentReplicas": replicas}
    world.cache["Deployment" if hashed else "StatefulSet"].upsert(owner)
    states = states or {}
    size = int(lws["spec"]["leaderWorkerTemplate"]["size"])
    for group in range(replicas):
        leader = running(created_pod(
            owner["spec"]["template"], f"sample-6f7d9c-{group}x" if hashed else f"sample-{group}",
            owner=owner, service_name=None if hashed else owner["spec"]["serviceName"],
            uid=f"leader-{group}", random_key=f"{group:08x}" + "c" * 32,
            scheduler_provider=provider))
        if f"{group}/0" in states:
            states[f"{group}/0"](leader)
        world.cache["Pod"].upsert(leader)
        if size == 1 or not worker_sets:
            continue
        sts = worker_statefulset(revision_lws, lws, cached("Pod", leader), None)
        sts["metadata"]["uid"] = f"sts-{group}"
        sts["status"] = {"replicas": size - 1, "readyReplicas": size - 1,
                         "availableReplicas": size - 1, "updatedReplicas": size - 1,
                         "currentReplicas": size - 1}
        world.cache["StatefulSet"].upsert(sts)
        for ordinal in range(1, size):
            worker = running(created_pod(
                sts["spec"]["template"], f"{sts['metadata']['name']}-{ordinal}", owner=sts,
                service_name=sts["spec"]["serviceName"], uid=f"worker-{group}-{ordinal}",
                scheduler_provider=provider))
            if f"{group}/{ordinal}" in states:
                states[f"{group}/{ordinal}"](worker)
            world.cache["Pod"].upsert(worker)
    return world


def at_rest(world: World) -> World:
    """``world`` after one pass wrote what it plans for a set whose objects all exist (its
    status, its shared Service): the state the operator leaves it in."""
    plan_pass(world)
    return world


def _line(action: Any) -> str:
    if isinstance(action, Record):
        return f"event {action.event.reason}: {action.event.note}"
    kind = action.target.kind or action.target.collection.rsplit("/", 1)[-1]
    if isinstance(action, Apply):
        return f"apply {kind} {name_of(action.body)}"
    if isinstance(action, Create):
        return f"create {kind} {name_of(action.body)}"
    if isinstance(action, Patch):
        what = "status" if action.subresource == "status" else "patch"
        return f"{what} {kind} {action.name}"
    if isinstance(action, Update):
        return f"update {kind} {action.name}"
    assert isinstance(action, Delete)
    return f"delete {kind} {action.name}"


@dataclass
class Pass:
    """What one pass planned: its actions (the plans' actions, then their Events on success,
    each as a line), when it asks to be looked at again, and every action itself."""

    lines: list[str]
    requeue: float | None
    actions: list[Any]

    def writes(self) -> list[str]:
        return [line for line in self.lines if not line.startswith("event ")]

    def events(self) -> list[str]:
        return [line for line in self.lines if line.startswith("event ")]


def _store(world: World, action: Any) -> None:
    """What the executor would leave in the cache for the steps after this one."""
    kind = getattr(getattr(action, "target", None), "kind", None)
    if kind is None:
        return
    if isinstance(action, (Apply, Create)):
        body = copy.deepcopy(dict(action.body))
        meta = body.setdefault("metadata", {})
        meta.setdefault("namespace", NAMESPACE)
        meta.setdefault("uid", world.uid(kind.lower()))
        meta["resourceVersion"] = "300"
        if isinstance(action, Apply) and kind in ("StatefulSet", "Deployment"):
            live = world.cache[kind].get(NAMESPACE, name_of(body))
            if live is not None:
                meta["uid"] = meta_of(live).get("uid")
                body["status"] = live.get("status")
        world.cache[kind].upsert(body)
    elif isinstance(action, Update):
        live = world.cache[kind].get(NAMESPACE, action.name)
        if live is None or meta_of(live).get("resourceVersion") != meta_of(
                action.body).get("resourceVersion"):
            return  # gone or changed: the API server's 404 or 409
        body = copy.deepcopy(dict(action.body))
        body["metadata"]["resourceVersion"] = str(int(body["metadata"].get("resourceVersion")
                                                      or 0) + 1)
        world.cache[kind].upsert(body)
    elif isinstance(action, Patch) and kind in ("LeaderWorkerSet", "Pod"):
        live = world.cache[kind].get(NAMESPACE, action.name)
        if live is None:
            return
        obj = _merged(copy.deepcopy(live), action.body, action.strategic)
        obj["metadata"]["resourceVersion"] = str(int(obj["metadata"].get("resourceVersion")
                                                      or 0) + 1)
        world.cache[kind].upsert(obj)


def _merged(obj: dict[str, Any], patch: Mapping[str, Any], strategic: bool) -> dict[str, Any]:
    """A JSON merge patch applied (None removes a key, maps merge, lists replace); a strategic
    one merges ``conditions`` by type, as the API server does for a pod's status."""
    for key, value in patch.items():
        if value is None:
            obj.pop(key, None)
        elif strategic and key == "conditions":
            kept = [c for c in obj.get(key) or [] if c["type"] not in {v["type"] for v in value}]
            obj[key] = [*kept, *value]
        elif isinstance(value, Mapping) and isinstance(obj.get(key), dict):
            obj[key] = _merged(obj[key], value, strategic)
        else:
            obj[key] = copy.deepcopy(value)
    return obj


# A step the pass ran: the step, the snapshot it read, its plan.
Planned_ = tuple[Callable[..., Any], Observed, Plan]


def plan_pass(world: World, skip: bool = True, planned: list[Planned_] | None = None) -> Pass:
    """One pass's plan, step after step (module docstring). ``skip``: the steps the pass skips
    for the set's spec and options (``logic.leaderworkerset.pipeline.Configuration``) and the
    recreation of unmutated pods when there are none are skipped here too; False runs them
    (a Parallel pass, the ``none`` provider asked, the recreation always asked). ``planned``
    receives each step run, its snapshot and its plan."""
    lines: list[str] = []
    actions: list[Any] = []
    last: list[float | None] = [None]  # the soonest requeue any plan asked for

    async def run(step: Callable[..., Plan | Planned[Any]], /, *args: Any, **kwargs: Any) -> Any:
        obs = world.observe({})
        result = step(obs, *args, **kwargs)
        plan = result.plan if isinstance(result, Planned) else result
        if plan.reads:
            fetched = {r.path: {"metadata": {"name": r.path.rsplit("/", 1)[-1], "labels":
                                             world.nodes.get(r.path.rsplit("/", 1)[-1], {})}}
                       for r in plan.reads}
            result = step(world.observe(fetched), *args, **kwargs)
            plan = result.plan if isinstance(result, Planned) else result
        if isinstance(plan.carry, Remember):  # as the controller, before the plan runs
            world.memory = plan.carry.memory
            if plan.carry.kept_tombstones is not None:  # as the controller, once it ran
                world.cache.drop_tombstones(world.key, {
                    str(meta_of(t).get("uid")) for t in world.cache.tombstones(world.key)}
                    - plan.carry.kept_tombstones)
        for action in plan.actions:
            actions.append(action)
            lines.append(_line(action))
            _store(world, action)
            if not isinstance(action, Record):
                lines.extend(f"event {e.reason}: {e.note}" for e in action.common.events)
        if planned is not None:
            planned.append((step, obs, plan))
        last[0] = earliest(last[0], plan.requeue_after)  # as the controller returns it
        if plan.stop:
            raise PassEnds(gone=False)
        return result.value if isinstance(result, Planned) else None

    config = configuration(world.lws, world.options)
    if not skip:
        config = replace(config, parallel=True, provider=config.provider or none.PROVIDER)
    plan_through(reconcile(run, config, lambda: not skip or _may_recreate(world)))
    return Pass(lines, last[0], actions)


def _may_recreate(world: World) -> bool:
    """The controller's ``may_recreate``: unmutated pods, or a recreation remembered."""
    return world.memory.recreation is not None or bool(world.observe({}).unmutated_pods)
