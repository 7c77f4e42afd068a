"""The plan executor (``kube.executor``) against a real kube-apiserver.

The executor owns every error policy of the reconciler's writes (``logic.reconcile.plan.Policy``):
what a 404, a 409 or any other error means, which Events are recorded, what the watch cache holds
after each answer. Each case runs a small ``Plan`` of the real action types against real objects in
a fresh namespace and checks what the API server then holds, what the cache holds, the
``Outcome`` and the Events written (read back from ``events.k8s.io/v1``, once the recorder has
written what it queued: ``record`` only queues).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster
from e2e.kube import Kube
from lws_operator.api.constants import EVENT_REPORTING_CONTROLLER, FIELD_MANAGER, NAME_LABEL
from lws_operator.kube.cache import ClusterCache
from lws_operator.kube.client import ApiException, KubeClient
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.identity.writes import revision_update
from lws_operator.logic.objects.events import Event
from lws_operator.logic.reconcile.plan import (
    CREATE_IF_ABSENT,
    Apply,
    Common,
    Create,
    Delete,
    Patch,
    Plan,
    Policy,
    Read,
    Record,
    Target,
    Then,
    core,
)

pytestmark = pytest.mark.api

INSTANCE = "exectest"  # the recorder's reportingInstance
OWNER = "sample"  # the LeaderWorkerSet the Services belong to (their name label)
CREATED = Event("Created", "Normal", "Create", "created the thing")
PATCHED = Event("Patched", "Normal", "Update", "patched the thing")
FAILED = Event("FailedCreate", "Warning", "Create", "could not write: {reason}")


@dataclass
class World:
    """An executor on its own client, cache and recorder, and the namespace it writes in."""

    executor: Executor
    cache: ClusterCache
    kube: Kube
    namespace: str
    regarding: dict[str, Any]  # a real ConfigMap the Events are about
    recorder: EventRecorder

    @property
    def services(self) -> Target:
        return core(self.namespace, "services", "Service")

    @property
    def configmaps(self) -> Target:
        return core(self.namespace, "configmaps", None)  # not cached

    def cached(self, name: str) -> dict[str, Any] | None:
        return self.cache["Service"].get(self.namespace, name)

    async def stored(self, name: str) -> dict[str, Any] | None:
        return await self.kube.get("v1", "Service", name, self.namespace)

    async def events(self) -> list[dict[str, Any]]:
        """The Events this executor recorded (the API server records some of its own), once
        every Event queued so far is written."""
        await self.recorder.flush()
        return await self.written()

    async def written(self) -> list[dict[str, Any]]:
        """The Events of this executor the API server holds now."""
        return [e for e in await self.kube.list("events.k8s.io/v1", "Event", self.namespace)
                if e.get("reportingController") == EVENT_REPORTING_CONTROLLER
                and e.get("reportingInstance") == INSTANCE]

    async def reasons(self) -> list[str]:
        return sorted(e["reason"] for e in await self.events())

    async def run(self, plan: Plan) -> Outcome:
        return await self.executor.execute(plan, self.regarding)

    async def service(self, name: str, **extra: Any) -> dict[str, Any]:
        """A Service created directly (not by the executor) and put into the cache, as its
        watch event would."""
        body = service(name)
        body["metadata"].update(extra)
        created = await self.kube.create(body, self.namespace)
        self.cache["Service"].upsert(created)
        return created


def service(name: str, label: str = "a") -> dict[str, Any]:
    """A headless Service (as the controller's own): no cluster IP, so the API server's
    cluster-IP repair loop neither touches it nor records Events about it."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "labels": {NAME_LABEL: OWNER, "mark": label}},
            "spec": {"clusterIP": "None", "ports": [{"port": 80}], "selector": {"app": name}}}


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


def invalid_service(name: str) -> dict[str, Any]:
    """A body the API server rejects as invalid (422): no port is above 65535."""
    body = service(name)
    body["spec"]["ports"] = [{"port": 70000}]
    return body


@pytest_asyncio.fixture(loop_scope="session")
async def world(cluster: LocalCluster, kube: Kube, namespace: str) -> AsyncIterator[World]:
    client = await KubeClient.connect(str(cluster.kubeconfig))
    cache = ClusterCache()
    regarding = await kube.create(configmap("about"), namespace)
    recorder = EventRecorder(client, INSTANCE)
    async with recorder.sending():
        yield World(Executor(client, cache, recorder), cache, kube, namespace, regarding,
                    recorder)
    await client.close()


# --- Apply -------------------------------------------------------------------------------------


async def test_apply_creates_then_updates_with_our_field_manager(world: World) -> None:
    first = Apply(world.services, service("svc", "one"), Common(events=(CREATED,)))
    outcome = await world.run(Plan((first,)))
    assert outcome == Outcome()
    stored = await world.stored("svc")
    assert stored is not None
    assert stored["metadata"]["labels"]["mark"] == "one"
    managers = {(m["manager"], m["operation"]) for m in stored["metadata"]["managedFields"]}
    assert (FIELD_MANAGER, "Apply") in managers
    cached = world.cached("svc")
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert await world.reasons() == ["Created"]

    await world.run(Plan((Apply(world.services, service("svc", "two")),)))
    updated = await world.stored("svc")
    assert updated is not None
    assert updated["metadata"]["labels"]["mark"] == "two"
    assert updated["metadata"]["uid"] == stored["metadata"]["uid"]
    cached = world.cached("svc")
    assert cached is not None
    assert cached["metadata"]["labels"]["mark"] == "two"
    assert cached["metadata"]["resourceVersion"] == updated["metadata"]["resourceVersion"]
    assert await world.reasons() == ["Created"]  # the second apply named no Event


# --- Create ------------------------------------------------------------------------------------


async def test_create_of_an_existing_object_if_absent_is_skipped(world: World) -> None:
    existing = await world.service("svc")
    create = Create(world.services, service("svc", "other"),
                    Common(events=(CREATED,), policy=CREATE_IF_ABSENT))
    after = Create(world.configmaps, configmap("after"))
    outcome = await world.run(Plan((create, after)))
    assert outcome == Outcome()
    stored = await world.stored("svc")
    assert stored is not None
    assert stored["metadata"]["labels"]["mark"] == "a"
    cached = world.cached("svc")
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == existing["metadata"]["resourceVersion"]
    assert await world.kube.get("v1", "ConfigMap", "after", world.namespace) is not None
    assert await world.reasons() == []  # no success Event for a create that did not happen


async def test_create_rejected_as_invalid_records_the_failure_and_fails(world: World) -> None:
    create = Create(world.services, invalid_service("bad"),
                    Common(events=(CREATED,), policy=Policy(failure=FAILED)))
    after = Create(world.configmaps, configmap("after"))
    with pytest.raises(ApiException) as raised:
        await world.run(Plan((create, after)))
    assert raised.value.status == 422
    assert await world.stored("bad") is None
    assert world.cached("bad") is None
    assert await world.kube.get("v1", "ConfigMap", "after", world.namespace) is None
    [event] = await world.events()
    assert (event["reason"], event["type"], event["action"]) == (
        "FailedCreate", "Warning", "Create")
    assert event["note"] == f"could not write: {raised.value.reason}"
    assert raised.value.reason
    assert "{reason}" not in event["note"]


async def test_create_rejected_with_collect_keeps_the_reason_and_goes_on(world: World) -> None:
    policy = Policy(failure=FAILED, collect=True, reason_prefix="Service bad: ")
    create = Create(world.services, invalid_service("bad"), Common(events=(CREATED,),
                                                                   policy=policy))
    after = Create(world.services, service("after"))
    outcome = await world.run(Plan((create, after), requeue_after=30.0))
    assert outcome.collected == ["Service bad: Unprocessable Entity"]
    assert (outcome.stop, outcome.requeue_after, outcome.interrupted) == (False, 30.0, False)
    assert await world.stored("bad") is None
    assert await world.stored("after") is not None
    assert world.cached("after") is not None
    assert await world.reasons() == ["FailedCreate"]


# --- Patch guarded by a stale resourceVersion: 409 ---------------------------------------------


@dataclass(frozen=True)
class ConflictCase:
    then: Then
    outcome: Outcome
    goes_on: bool  # the action after the conflicting patch runs


CONFLICTS = [
    ConflictCase(Then.SKIP, Outcome(requeue_after=30.0), goes_on=True),
    ConflictCase(Then.STOP, Outcome(stop=True, requeue_after=7.0, interrupted=True),
                 goes_on=False),
    ConflictCase(Then.REQUEUE, Outcome(requeue_after=7.0), goes_on=True),
    ConflictCase(Then.COLLECT, Outcome(requeue_after=30.0,
                                       collected=["Service svc: changed meanwhile"]),
                 goes_on=True),
]


@pytest.mark.parametrize("case", CONFLICTS, ids=lambda c: c.then.value)
async def test_a_patch_guarded_by_a_stale_version_conflicts(world: World,
                                                            case: ConflictCase) -> None:
    old = await world.service("svc")
    newer = await world.kube.patch("v1", "Service", "svc",
                                   {"metadata": {"labels": {"mark": "newer"}}}, world.namespace)
    world.cache["Service"].upsert(newer)
    policy = Policy(conflict=case.then, requeue=7.0, failure=FAILED,
                    reason_prefix="Service svc: ", conflict_reason="changed meanwhile")
    patch = Patch(world.services, "svc", {"metadata": {
        "resourceVersion": old["metadata"]["resourceVersion"], "labels": {"mark": "stale"}}},
        common=Common(events=(PATCHED,), policy=policy))
    after = Create(world.configmaps, configmap("after"))
    outcome = await world.run(Plan((patch, after), requeue_after=30.0))
    assert outcome == case.outcome
    stored = await world.stored("svc")
    assert stored is not None
    assert stored["metadata"]["labels"]["mark"] == "newer"
    cached = world.cached("svc")
    assert cached is not None
    assert cached["metadata"]["labels"]["mark"] == "newer"
    ran_after = await world.kube.get("v1", "ConfigMap", "after", world.namespace) is not None
    assert ran_after == case.goes_on
    assert await world.reasons() == []  # neither the success nor the failure Event


async def test_a_patch_with_the_current_version_succeeds_and_records_its_events(
        world: World) -> None:
    current = await world.service("svc")
    patch = Patch(world.services, "svc", {"metadata": {
        "resourceVersion": current["metadata"]["resourceVersion"],
        "labels": {"mark": "patched"}}},
        common=Common(events=(PATCHED,), policy=Policy(conflict=Then.SKIP)))
    assert await world.run(Plan((patch,))) == Outcome()
    stored = await world.stored("svc")
    assert stored is not None
    assert stored["metadata"]["labels"]["mark"] == "patched"
    cached = world.cached("svc")
    assert cached is not None
    assert cached["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert await world.reasons() == ["Patched"]


# --- Patch of a missing object: 404 ------------------------------------------------------------


async def test_a_patch_of_a_missing_object_skipped(world: World) -> None:
    patch = Patch(world.services, "missing", {"metadata": {"labels": {"mark": "x"}}},
                  common=Common(events=(PATCHED,), policy=Policy(
                      not_found=Then.SKIP, failure=FAILED)))
    after = Create(world.configmaps, configmap("after"))
    assert await world.run(Plan((patch, after))) == Outcome()
    assert await world.kube.get("v1", "ConfigMap", "after", world.namespace) is not None
    assert await world.reasons() == []


async def test_a_patch_of_a_missing_object_fails(world: World) -> None:
    patch = Patch(world.services, "missing", {"metadata": {"labels": {"mark": "x"}}},
                  common=Common(events=(PATCHED,), policy=Policy(
                      not_found=Then.FAIL, failure=FAILED)))
    after = Create(world.configmaps, configmap("after"))
    with pytest.raises(ApiException) as raised:
        await world.run(Plan((patch, after)))
    assert raised.value.status == 404
    assert await world.kube.get("v1", "ConfigMap", "after", world.namespace) is None
    [event] = await world.events()
    assert event["reason"] == "FailedCreate"
    assert event["note"] == "could not write: Not Found"


# --- Delete ------------------------------------------------------------------------------------


async def test_a_delete_with_the_right_uid_deletes_and_records_its_events(world: World) -> None:
    created = await world.service("svc")
    delete = Delete(world.services, "svc", created["metadata"]["uid"],
                    common=Common(events=(CREATED,), policy=Policy(conflict=Then.SKIP)))
    assert await world.run(Plan((delete,))) == Outcome()
    assert await world.stored("svc") is None
    assert await world.reasons() == ["Created"]


async def test_a_delete_with_a_wrong_uid_leaves_the_object(world: World) -> None:
    await world.service("svc")
    delete = Delete(world.services, "svc", str(uuid.uuid4()),
                    common=Common(events=(CREATED,), policy=Policy(conflict=Then.SKIP)))
    assert await world.run(Plan((delete,))) == Outcome()
    assert await world.stored("svc") is not None
    assert world.cached("svc") is not None
    assert await world.reasons() == []


async def test_a_delete_with_a_wrong_uid_fails_when_the_policy_says_so(world: World) -> None:
    await world.service("svc")
    delete = Delete(world.services, "svc", str(uuid.uuid4()),
                    common=Common(policy=Policy(failure=FAILED)))
    with pytest.raises(ApiException) as raised:
        await world.run(Plan((delete,)))
    assert raised.value.status == 409
    assert await world.stored("svc") is not None
    assert await world.reasons() == ["FailedCreate"]


async def test_a_delete_of_a_missing_object_is_skipped(world: World) -> None:
    ghost = service("gone")  # cached, but already gone from the API server
    ghost["metadata"].update(namespace=world.namespace, uid=str(uuid.uuid4()),
                             resourceVersion="1")
    world.cache["Service"].upsert(ghost)
    keep = Delete(world.services, "gone", ghost["metadata"]["uid"],
                  common=Common(policy=Policy(not_found=Then.SKIP)))
    assert await world.run(Plan((keep,))) == Outcome()
    assert world.cached("gone") is not None  # its watch event (or a resync) drops it
    forget = Delete(world.services, "gone", ghost["metadata"]["uid"], forget=ghost,
                    common=Common(policy=Policy(not_found=Then.SKIP)))
    assert await world.run(Plan((forget,))) == Outcome()
    assert world.cached("gone") is None


async def test_a_foreground_delete_caches_the_terminating_object(world: World) -> None:
    created = await world.service("held", finalizers=["example.com/hold"])
    try:
        delete = Delete(world.services, "held", created["metadata"]["uid"],
                        propagation="Foreground", common=Common(events=(CREATED,)))
        assert await world.run(Plan((delete,))) == Outcome()
        stored = await world.stored("held")
        assert stored is not None
        assert stored["metadata"].get("deletionTimestamp")
        cached = world.cached("held")
        assert cached is not None
        assert cached["metadata"].get("deletionTimestamp")
        assert cached["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
        assert await world.reasons() == ["Created"]
    finally:
        await world.kube.patch("v1", "Service", "held", {"metadata": {"finalizers": None}},
                               world.namespace)


async def test_a_delete_that_forgets_drops_the_object_from_the_cache(world: World) -> None:
    created = await world.service("held", finalizers=["example.com/hold"])
    try:
        delete = Delete(world.services, "held", created["metadata"]["uid"],
                        propagation="Foreground", forget=created)
        assert await world.run(Plan((delete,))) == Outcome()
        stored = await world.stored("held")
        assert stored is not None
        assert stored["metadata"].get("deletionTimestamp")
        assert world.cached("held") is None
    finally:
        await world.kube.patch("v1", "Service", "held", {"metadata": {"finalizers": None}},
                               world.namespace)


# --- Record ------------------------------------------------------------------------------------


async def test_record_writes_the_event_about_the_object(world: World) -> None:
    related = await world.service("svc")
    event = Event("GroupsProgressing", "Normal", "Create", "a note")
    assert await world.run(Plan((Record(event, related=related),))) == Outcome()
    [written] = await world.events()
    assert (written["reason"], written["type"], written["action"], written["note"]) == (
        "GroupsProgressing", "Normal", "Create", "a note")
    assert written["reportingController"] == EVENT_REPORTING_CONTROLLER
    assert (written["regarding"]["kind"], written["regarding"]["name"],
            written["regarding"]["uid"]) == (
        "ConfigMap", "about", world.regarding["metadata"]["uid"])
    assert (written["related"]["kind"], written["related"]["name"],
            written["related"]["uid"]) == ("Service", "svc", related["metadata"]["uid"])


async def test_a_failed_event_never_fails_the_plan(world: World) -> None:
    # Events regarding an object in a namespace that does not exist: the API server refuses
    # them (404), and the plan goes on.
    elsewhere = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
        "name": "about", "namespace": f"absent-{uuid.uuid4().hex[:8]}", "uid": "x"}}
    event = Event("GroupsProgressing", "Normal", "Create", "a note")
    plan = Plan((Record(event), Create(world.services, service("svc"),
                                       Common(events=(CREATED,)))))
    assert await world.executor.execute(plan, elsewhere) == Outcome()
    assert await world.stored("svc") is not None
    assert world.cached("svc") is not None
    assert await world.reasons() == []


async def test_a_plan_does_not_wait_for_its_event_writes(cluster: LocalCluster, kube: Kube,
                                                       namespace: str) -> None:
    """The executor returns once the plan's requests are done, its Events only queued: with
    the recorder's senders not running yet (the slowest an Event write can be), the plan's
    object is written and no Event is; once they run, the Events land as recorded."""
    client = await KubeClient.connect(str(cluster.kubeconfig))
    try:
        recorder = EventRecorder(client, INSTANCE)
        regarding = await kube.create(configmap("about"), namespace)
        cache = ClusterCache()
        world = World(Executor(client, cache, recorder), cache, kube, namespace, regarding,
                      recorder)
        progressing = Event("GroupsProgressing", "Normal", "Create", "a note")
        plan = Plan((Record(progressing), Create(world.services, service("svc"),
                                                 Common(events=(CREATED,)))))
        assert await world.run(plan) == Outcome()
        assert await world.stored("svc") is not None
        assert await world.written() == []
        async with recorder.sending():
            written = await world.events()
        assert sorted((e["reason"], e["type"], e["action"], e["note"]) for e in written) == [
            ("Created", "Normal", "Create", "created the thing"),
            ("GroupsProgressing", "Normal", "Create", "a note")]
    finally:
        await client.close()


async def test_events_about_one_object_are_written_in_the_order_recorded(world: World) -> None:
    """Several senders write Events at once, but one object's in the order they were recorded:
    each after the one before was answered, so the API server's resourceVersions (one etcd
    revision per write) ascend in that order."""
    assert world.recorder.senders > 1
    notes = [f"step {i}" for i in range(8)]
    for note in notes:
        world.recorder.record(world.regarding, Event("GroupsProgressing", "Normal", "Update",
                                                     note))
    written = sorted(await world.events(), key=lambda e: int(e["metadata"]["resourceVersion"]))
    assert [e["note"] for e in written] == notes


# --- Read --------------------------------------------------------------------------------------


async def test_read_returns_the_object_at_each_path(world: World) -> None:
    name = f"node-{uuid.uuid4().hex[:8]}"
    await world.kube.create({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "labels": {"topology.example.com/zone": "z1"}}})
    try:
        await world.service("svc")
        paths = (f"/api/v1/nodes/{name}", world.services.item("svc"))
        fetched = await world.executor.read(tuple(Read(p) for p in paths))
        assert set(fetched) == set(paths)
        node = fetched[paths[0]]
        assert node["kind"] == "Node"
        assert node["metadata"]["name"] == name
        assert node["metadata"]["labels"]["topology.example.com/zone"] == "z1"
        assert fetched[paths[1]]["metadata"]["name"] == "svc"
        with pytest.raises(ApiException) as raised:
            await world.executor.read((Read(f"/api/v1/nodes/{name}-missing"),))
        assert raised.value.status == 404
    finally:
        await world.kube.delete("v1", "Node", name)


# --- Update (a ControllerRevision) -------------------------------------------------------------


REVISION_DATA = {"spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {
    "containers": [{"name": "m", "image": "x", "command": ["sh", "-c", "a > b && c"]}]}},
    "$patch": "replace"}}}


def revision(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": name, "labels": {NAME_LABEL: OWNER}},
            "data": REVISION_DATA, "revision": 1}


@pytest.mark.parametrize("created_by", ["this client", "a Go client"])
async def test_a_revision_is_updated_whoever_created_it(world: World, cluster: LocalCluster,
                                                        created_by: str) -> None:
    """Its immutable ``data`` is compared byte for byte: a patch keeps a Go client's bytes and
    refuses ours, a PUT keeps ours and refuses a Go client's (``logic.identity.writes``)."""
    if created_by == "this client":
        posted: dict[str, Any] | None = await world.executor.kube.request(
            "POST", f"/apis/apps/v1/namespaces/{world.namespace}/controllerrevisions",
            body=revision("rev"))
        created = posted
    else:
        await asyncio.to_thread(cluster.kubectl, "-n", world.namespace, "create", "-f", "-",
                                stdin=json.dumps(revision("rev")))
        created = await world.kube.get("apps/v1", "ControllerRevision", "rev", world.namespace)
    assert created is not None
    world.cache["ControllerRevision"].upsert(created)
    update = revision_update(world.namespace, created, {
        "revision": 5, "metadata": {"annotations": {"lws-operator.dev/fully-ready-at": "now"}}})
    outcome = await world.run(Plan((update,)))
    assert outcome == Outcome()
    stored = await world.kube.get("apps/v1", "ControllerRevision", "rev", world.namespace)
    assert stored is not None
    assert stored["revision"] == 5
    assert stored["metadata"]["annotations"] == {"lws-operator.dev/fully-ready-at": "now"}
    assert stored["data"] == REVISION_DATA
    cached = world.cache["ControllerRevision"].get(world.namespace, "rev")
    assert cached is not None
    assert cached["revision"] == 5
