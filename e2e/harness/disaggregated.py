"""DisaggregatedSets on a real cluster: the CRDs, what a converged set looks like from the API,
the exact content of its pods, LeaderWorkerSets and Services, and a watch that follows a
rollout continuously.

Every expectation is computed here from the LWS docs and upstream's rules (its lws_manager.go,
service_manager.go and placement.go), never by ``lws_operator.logic``: the tests compare the
operator's objects against it. The revision is the one value taken from the cluster (upstream
hashes Go's JSON, ours does not; the LWS docs only show its shape, 8 lowercase hex characters), and
it must then be the same on every object of that revision.

The rollout watch (:class:`RolloutMonitor`) sees every change of ``spec.replicas`` of the set's
LeaderWorkerSets in the API server's order (one watch over the namespace: one sequence). One
pass of the controller writes a revision's roles in consecutive calls (upstream's executor
scales a revision's roles one after another; ours drains the old before it scales up the new),
so an observer sees e.g.
``prefill 0 -> 1`` an instant before ``decode 0 -> 1``. The invariant is therefore judged on the
sequence with each run of consecutive changes to one (slice, revision) taken as one step: a
revision left with one role at 0 while a sibling is above 0 when anything else happens next is a
violation, and so is one left that way at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2e.cluster import LocalCluster
from e2e.harness.builder import API, DS_API, DS_KIND, KIND, SCALER_KIND, P
from e2e.harness.clusters import REPO
from e2e.harness.converge import until_no_reason
from e2e.harness.launcher import Operator, running_operator
from e2e.kube import Kube, condition, is_ready, wait_for

GROUP = "disaggregatedset.x-k8s.io"
NAME_LABEL = f"{GROUP}/name"
ROLE_LABEL = f"{GROUP}/role"
SLICE_LABEL = f"{GROUP}/slice"
REVISION_LABEL = f"{GROUP}/revision"
INITIAL_REPLICAS = f"{GROUP}/initial-replicas"
CRD_FILES = sorted((REPO / "crds").glob(f"{GROUP}_*.yaml"))
PAUSE = "registry.k8s.io/pause:3.9"  # upstream's e2e image (kwok never pulls it)
NODE_TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")
AVAILABLE_MESSAGE = ("All roles have reached their desired replica count, ready and updated to "
                     "the current revision")

Key = tuple[str, str, str]  # (slice, revision, role)


def install_crds(cluster: LocalCluster, timeout: float = 60.0) -> None:
    """Every CRD of ``crds/`` (LeaderWorkerSet, DisaggregatedSet, its role scaler) Established,
    and the DisaggregatedSet API discoverable (the operator finds it by discovery)."""
    assert len(CRD_FILES) == 2, "crds/ holds no DisaggregatedSet CRDs"
    cluster.install_crd(timeout=timeout)
    deadline = time.monotonic() + timeout
    while '"disaggregatedsets"' not in cluster.kubectl("get", "--raw", f"/apis/{DS_API}",
                                                      check=False):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{DS_API} not discoverable after {timeout}s")
        time.sleep(0.2)
    # A CRD just created or changed answers 429 "storage is (re)initializing" for a moment.
    for path in (f"/apis/{API}/leaderworkersets", f"/apis/{DS_API}/disaggregatedsets",
                 f"/apis/{DS_API}/disaggregatedsetrolescalers"):
        while not cluster.kubectl("get", "--raw", f"{path}?limit=1", check=False).strip():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{path} does not list after {timeout}s")
            time.sleep(0.2)


# ------------------------------------------------------------------------------ the manifest


def roles_of(ds: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((ds.get("spec") or {}).get("roles") or [])


def slices_of(ds: Mapping[str, Any]) -> int:
    return int((ds.get("spec") or {}).get("slices") or 1)


def replicas_of(role: Mapping[str, Any]) -> int:
    """A Static role's groups per slice (absent: the CRD's default 1)."""
    value = (role.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def size_of(role: Mapping[str, Any]) -> int:
    return int(((role.get("spec") or {}).get("leaderWorkerTemplate") or {}).get("size") or 1)


def lws_name(ds: str, slice_: int, revision: str, role: str) -> str:
    return f"{ds}-{slice_}-{revision}-{role}"


def system_labels(ds: str, slice_: int, revision: str, role: str) -> dict[str, str]:
    """The five labels upstream's lws_manager.go puts on a child and its pod templates."""
    return {"app": f"{ds}-{slice_}-{role}", NAME_LABEL: ds, ROLE_LABEL: role,
            SLICE_LABEL: str(slice_), REVISION_LABEL: revision}


def ds_env(ds: str, role: str, slice_: str, revision: str) -> list[dict[str, str]]:
    """The LWS docs' four variables (Environment Variables table), values of the pod's labels."""
    return [{"name": "DISAGGREGATEDSET_NAME", "value": ds},
            {"name": "DISAGGREGATEDSET_ROLE", "value": role},
            {"name": "DISAGGREGATEDSET_SLICE", "value": slice_},
            {"name": "DISAGGREGATEDSET_REVISION", "value": revision}]


def lws_env(lws: str, ns: str, group: int, worker: int, size: int) -> list[dict[str, str]]:
    """Upstream's AddLWSVariables (pod_utils.go), Shared subdomain policy."""
    return [{"name": "LWS_LEADER_ADDRESS", "value": f"{lws}-{group}.{lws}.{ns}"},
            {"name": "LWS_GROUP_SIZE", "value": str(size)},
            {"name": "LWS_WORKER_INDEX", "value": str(worker)}]


def placement_terms(ds: str, slice_: int, type_: str, topology: str) -> dict[str, Any]:
    """The terms upstream's placement.go appends (upstream's KEP-848, with the
    code's extra ``Exists`` expressions), in its exact order."""
    k = str(slice_)
    mine = {"labelSelector": {"matchExpressions": [
        {"key": NAME_LABEL, "operator": "In", "values": [ds]},
        {"key": SLICE_LABEL, "operator": "In", "values": [k]}]}, "topologyKey": topology}
    spread = [{"key": NAME_LABEL, "operator": "In", "values": [ds]}]
    if slice_ == 0:
        spread.append({"key": SLICE_LABEL, "operator": "Exists"})
    spread.append({"key": SLICE_LABEL, "operator": "NotIn", "values": [k]})
    anti = [{"labelSelector": {"matchExpressions": spread}, "topologyKey": topology}]
    if type_ == "ExclusiveTopology":
        anti.append({"labelSelector": {"matchExpressions": [
            {"key": NAME_LABEL, "operator": "Exists"},
            {"key": NAME_LABEL, "operator": "NotIn", "values": [ds]},
            {"key": SLICE_LABEL, "operator": "Exists"}]}, "topologyKey": topology})
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [mine]},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}}


def expected_affinity(ds: Mapping[str, Any], slice_: int,
                      user: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The user's affinity with the placement terms appended after the user's own terms."""
    policy = (ds.get("spec") or {}).get("placementPolicy") or {}
    type_, topology = policy.get("type") or "None", policy.get("topology") or ""
    if type_ == "None" or not topology:
        return dict(user) if user else None
    out: dict[str, Any] = json.loads(json.dumps(user or {}))
    for kind, terms in placement_terms(ds["metadata"]["name"], slice_, type_, topology).items():
        required = out.setdefault(kind, {}).setdefault(
            "requiredDuringSchedulingIgnoredDuringExecution", [])
        required.extend(terms["requiredDuringSchedulingIgnoredDuringExecution"])
    return out


# ------------------------------------------------------------------------------ the cluster


def owned(objs: Iterable[dict[str, Any]], uid: str) -> list[dict[str, Any]]:
    return [o for o in objs if any(r.get("controller") and r.get("uid") == uid
                                   for r in o["metadata"].get("ownerReferences") or [])]


async def children(kube: Kube, ns: str, ds: str) -> list[dict[str, Any]]:
    """The LeaderWorkerSets labelled with the set's name (owned or not)."""
    return await kube.list(API, KIND, ns, label_selector=f"{NAME_LABEL}={ds}")


async def ds_pods(kube: Kube, ns: str, ds: str) -> list[dict[str, Any]]:
    return await kube.list("v1", "Pod", ns, label_selector=f"{NAME_LABEL}={ds}")


async def ds_services(kube: Kube, ns: str, ds: str) -> list[dict[str, Any]]:
    return await kube.list("v1", "Service", ns, label_selector=f"{NAME_LABEL}={ds}")


async def get_ds(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    got = await kube.get(DS_API, DS_KIND, name, ns)
    assert got is not None, f"DisaggregatedSet {name} is gone"
    return got


def state_of(lws: Iterable[dict[str, Any]]) -> dict[Key, int]:
    """(slice, revision, role) -> ``spec.replicas`` (absent: 1) of LeaderWorkerSets."""
    out: dict[Key, int] = {}
    for obj in lws:
        if obj["metadata"].get("deletionTimestamp"):
            continue
        labels = obj["metadata"].get("labels") or {}
        replicas = (obj.get("spec") or {}).get("replicas")
        out[(labels.get(SLICE_LABEL) or "0", labels.get(REVISION_LABEL, "?"),
             labels.get(ROLE_LABEL, "?"))] = 1 if replicas is None else int(replicas)
    return out


@dataclass(frozen=True)
class Converged:
    """A DisaggregatedSet at rest: the revision, its LeaderWorkerSets by name, its live pods."""

    ds: dict[str, Any]
    revision: str
    lws: dict[str, dict[str, Any]]
    pods: list[dict[str, Any]]

    def uids(self) -> dict[str, str]:
        return {n: o["metadata"]["uid"] for n, o in self.lws.items()}


async def converged_now(kube: Kube, ns: str, name: str, *, other_than: str | None = None,
                        replicas: Mapping[str, int] | None = None) -> Converged | str:
    """The set converged (one revision, not ``other_than``: every role of every slice at its
    replicas, ready and updated, exactly its pods Ready, the status saying so for this
    generation), or why not. ``replicas`` overrides the manifest's per role (External roles)."""
    ds = await kube.get(DS_API, DS_KIND, name, ns)
    if ds is None:
        return "no DisaggregatedSet"
    roles, slices = roles_of(ds), slices_of(ds)
    want = {r["name"]: (replicas or {}).get(r["name"], replicas_of(r)) for r in roles}
    uid = ds["metadata"]["uid"]
    lws = [o for o in owned(await children(kube, ns, name), uid)
           if not o["metadata"].get("deletionTimestamp")]
    revisions = {(o["metadata"].get("labels") or {}).get(REVISION_LABEL) for o in lws}
    if len(revisions) != 1:
        return f"revisions {sorted(map(str, revisions))}"
    revision = str(revisions.pop())
    if revision == other_than:
        return f"still at revision {revision}"
    names = {lws_name(name, s, revision, r["name"]) for s in range(slices) for r in roles}
    by_name = {o["metadata"]["name"]: o for o in lws}
    if set(by_name) != names:
        return f"LeaderWorkerSets {sorted(by_name)} != {sorted(names)}"
    pods_wanted = 0
    for obj in lws:
        role = obj["metadata"]["labels"][ROLE_LABEL]
        n = want[role]
        status = obj.get("status") or {}
        if (obj["spec"].get("replicas"), status.get("readyReplicas", 0),
                status.get("updatedReplicas", 0)) != (n, n, n):
            return (f"{obj['metadata']['name']}: replicas/ready/updated "
                    f"{obj['spec'].get('replicas')}/{status.get('readyReplicas')}/"
                    f"{status.get('updatedReplicas')} != {n}")
        pods_wanted += n * size_of(next(r for r in roles if r["name"] == role))
    pods = await ds_pods(kube, ns, name)
    if any(p["metadata"].get("deletionTimestamp") for p in pods):
        return "pods terminating"
    if len(pods) != pods_wanted or not all(is_ready(p) for p in pods):
        return f"{sum(map(is_ready, pods))} Ready pods of {len(pods)}, want {pods_wanted}"
    status = ds.get("status") or {}
    statuses = [{"name": r["name"], **{k: want[r["name"]] * slices for k in (
        "replicas", "readyReplicas", "updatedReplicas") if want[r["name"]]}} for r in roles]
    if status.get("roleStatuses") != statuses:
        return f"roleStatuses {status.get('roleStatuses')} != {statuses}"
    generation = ds["metadata"]["generation"]
    if status.get("observedGeneration") != generation:
        return f"observedGeneration {status.get('observedGeneration')} != {generation}"
    if condition(ds, "Available") != "True" or condition(ds, "Progressing") == "True":
        return f"conditions {status.get('conditions')}"
    return Converged(ds, revision, by_name, pods)


async def wait_converged(kube: Kube, ns: str, name: str, *, other_than: str | None = None,
                         replicas: Mapping[str, int] | None = None,
                         timeout: float = 240.0) -> Converged:  # noqa: ASYNC109
    """Wait until :func:`converged_now` holds (a liveness deadline that names what was still
    missing)."""
    return await until_no_reason(
        lambda: converged_now(kube, ns, name, other_than=other_than, replicas=replicas),
        timeout, f"{name} converged")


async def wait_gone(kube: Kube, ns: str, name: str, timeout: float = 180.0  # noqa: ASYNC109
                    ) -> None:
    """Wait until nothing labelled with the set's name is left: LeaderWorkerSets, pods,
    Services and role scalers (the garbage collector's work after the set is deleted)."""

    async def left() -> list[str]:
        out = [f"LeaderWorkerSet/{o['metadata']['name']}" for o in await children(kube, ns, name)]
        out += [f"Pod/{o['metadata']['name']}" for o in await ds_pods(kube, ns, name)]
        out += [f"Service/{o['metadata']['name']}" for o in await ds_services(kube, ns, name)]
        out += [f"{SCALER_KIND}/{o['metadata']['name']}" for o in await kube.list(
            DS_API, SCALER_KIND, ns, label_selector=f"{NAME_LABEL}={name}")]
        return out

    async def gone() -> bool:
        return not await left()

    try:
        await wait_for(gone, timeout=timeout, interval=0.5, what=f"{name}'s children gone")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {await left()}") from None


# ------------------------------------------------------------------------------ exact content


def _template(role: Mapping[str, Any], leader: bool) -> dict[str, Any]:
    lwt = role["spec"]["leaderWorkerTemplate"]
    chosen: dict[str, Any] = (lwt.get("leaderTemplate") if leader else None) or lwt[
        "workerTemplate"]
    return chosen


def check_lws(obj: dict[str, Any], ds: dict[str, Any], role: dict[str, Any], slice_: int,
              revision: str) -> None:
    """One child LeaderWorkerSet as upstream's lws_manager.go builds it: name, labels (the
    role's metadata labels, the five system labels winning), the role's annotations, exactly
    one controller ownerReference, and pod templates with the merged labels and the placement
    terms."""
    name, rname = ds["metadata"]["name"], role["name"]
    meta = obj["metadata"]
    assert meta["name"] == lws_name(name, slice_, revision, rname)
    system = system_labels(name, slice_, revision, rname)
    role_meta = role.get("metadata") or {}
    assert meta.get("labels") == {**(role_meta.get("labels") or {}), **system}, meta["name"]
    annotations = meta.get("annotations") or {}
    for key, value in (role_meta.get("annotations") or {}).items():
        assert annotations.get(key) == value, (meta["name"], key)
    assert meta.get("ownerReferences") == [{
        "apiVersion": DS_API, "kind": DS_KIND, "name": name, "uid": ds["metadata"]["uid"],
        "controller": True}], meta["name"]
    lwt, want = obj["spec"]["leaderWorkerTemplate"], role["spec"]["leaderWorkerTemplate"]
    assert lwt.get("size", 1) == want.get("size", 1)
    for which in ("workerTemplate", "leaderTemplate"):
        if which not in want:
            assert which not in lwt, (meta["name"], which)
            continue
        got, user = lwt[which], want[which]
        user_meta = user.get("metadata") or {}
        assert got["metadata"].get("labels") == {**(user_meta.get("labels") or {}),
                                                 **system}, (meta["name"], which)
        assert (got["metadata"].get("annotations") or {}) == (
            user_meta.get("annotations") or {}), (meta["name"], which)
        assert got["spec"]["containers"] == user["spec"]["containers"], (meta["name"], which)
        assert got["spec"].get("affinity") == expected_affinity(
            ds, slice_, user["spec"].get("affinity")), (meta["name"], which)


def check_pod(pod: dict[str, Any], ds: dict[str, Any], role: dict[str, Any], slice_: int,
              revision: str, lws: dict[str, Any], node_labels: Mapping[str, str]) -> None:
    """Every label, annotation and env entry of one pod of a child LeaderWorkerSet: the user's
    template labels under the five system labels, the LeaderWorkerSet pod labels, the user's
    annotations, and on every container ``LWS_*`` then the four documented ``DISAGGREGATEDSET_*``
    variables (values equal to the pod's own labels) then the user's."""
    name, rname = ds["metadata"]["name"], role["name"]
    ns = pod["metadata"]["namespace"]
    child = lws_name(name, slice_, revision, rname)
    size = size_of(role)
    meta, spec = pod["metadata"], pod["spec"]
    labels = dict(meta["labels"])
    group = int(labels.get(P + "group-index", "-1"))
    worker = int(labels.get(P + "worker-index", "-1"))
    pod_name = f"{child}-{group}" if worker == 0 else f"{child}-{group}-{worker}"
    assert meta["name"] == pod_name
    template = _template(role, worker == 0)
    key = hashlib.sha1(f"{ns}/{child}-{group}".encode()).hexdigest()
    assert labels.pop("controller-revision-hash")  # the StatefulSet controller's own
    for copied in NODE_TOPOLOGY_LABELS:
        if copied in labels:
            assert labels.pop(copied) == node_labels.get(copied), (pod_name, copied)
    lws_revision = labels.get(P + "template-revision-hash")
    assert lws_revision, pod_name
    assert labels == {
        **((template.get("metadata") or {}).get("labels") or {}),
        **system_labels(name, slice_, revision, rname),
        P + "name": child, P + "group-index": str(group), P + "worker-index": str(worker),
        P + "group-key": key, P + "template-revision-hash": lws_revision,
        "statefulset.kubernetes.io/pod-name": pod_name,
        "apps.kubernetes.io/pod-index": str(group if worker == 0 else worker),
    }, pod_name
    annotations = {**((template.get("metadata") or {}).get("annotations") or {}),
                   P + "size": str(size)}
    if worker:
        annotations[P + "leader-name"] = f"{child}-{group}"
    assert meta.get("annotations") == annotations, pod_name
    assert spec["subdomain"] == child
    labelled = meta["labels"]
    guide = ds_env(labelled[NAME_LABEL], labelled[ROLE_LABEL], labelled[SLICE_LABEL],
                   labelled[REVISION_LABEL])
    assert guide == ds_env(name, rname, str(slice_), revision)
    for container, written in zip(spec["containers"], template["spec"]["containers"],
                                  strict=True):
        assert container["name"] == written["name"]
        expected = [*lws_env(child, ns, group, worker, size), *guide, *(written.get("env") or [])]
        assert container.get("env") == expected, (pod_name, container["name"])
    assert spec.get("affinity") == expected_affinity(
        ds, slice_, template["spec"].get("affinity")), pod_name


async def check_everything(kube: Kube, ns: str, got: Converged) -> None:
    """Exact checks on every child, pod and Service of a converged set."""
    ds = got.ds
    roles = {r["name"]: r for r in roles_of(ds)}
    for obj in got.lws.values():
        labels = obj["metadata"]["labels"]
        role, slice_ = roles[labels[ROLE_LABEL]], int(labels[SLICE_LABEL])
        check_lws(obj, ds, role, slice_, got.revision)
    nodes = {n["metadata"]["name"]: n["metadata"].get("labels") or {}
             for n in await kube.list("v1", "Node")}
    for pod in got.pods:
        labels = pod["metadata"]["labels"]
        check_pod(pod, ds, roles[labels[ROLE_LABEL]], int(labels[SLICE_LABEL]), got.revision,
                  got.lws[labels[P + "name"]], nodes.get(pod["spec"].get("nodeName", ""), {}))
    await check_services(kube, ns, got)


async def check_services(kube: Kube, ns: str, got: Converged) -> None:
    """One headless, portless Service ``<lws>-prv`` per child (labels = selector: name, role,
    revision, slice; controller-owned by the set), and its EndpointSlices listing every pod of
    that child as ready, with no ports."""
    ds = got.ds
    name = ds["metadata"]["name"]
    services = {s["metadata"]["name"]: s for s in await ds_services(kube, ns, name)}
    assert set(services) == {f"{n}-prv" for n in got.lws}, sorted(services)
    for lws_name_, obj in got.lws.items():
        svc = services[f"{lws_name_}-prv"]
        labels = obj["metadata"]["labels"]
        selector = {NAME_LABEL: name, ROLE_LABEL: labels[ROLE_LABEL],
                    REVISION_LABEL: labels[REVISION_LABEL], SLICE_LABEL: labels[SLICE_LABEL]}
        assert svc["spec"]["clusterIP"] == "None", lws_name_
        assert not svc["spec"].get("ports"), lws_name_
        assert svc["spec"]["selector"] == selector, lws_name_
        assert svc["metadata"]["labels"] == selector, lws_name_
        assert [(r["kind"], r["name"], r.get("controller")) for r in
                svc["metadata"]["ownerReferences"]] == [(DS_KIND, name, True)], lws_name_
        members = {p["metadata"]["name"] for p in got.pods
                   if p["metadata"]["labels"][P + "name"] == lws_name_}

        async def endpoints(svc_name: str = svc["metadata"]["name"],
                            members: set[str] = members) -> list[dict[str, Any]] | None:
            slices = await kube.list("discovery.k8s.io/v1", "EndpointSlice", ns,
                                     label_selector=f"kubernetes.io/service-name={svc_name}")
            listed = {(e.get("targetRef") or {}).get("name"): e for s in slices
                      for e in s.get("endpoints") or []}
            ready = {n for n, e in listed.items() if (e.get("conditions") or {}).get("ready")}
            return slices if ready == members and set(listed) == members else None

        slices = await wait_for(endpoints, timeout=60, what=f"{lws_name_}-prv's endpoints")
        assert slices is not None
        assert all(not s.get("ports") for s in slices), lws_name_


# ------------------------------------------------------------------------------ the rollout watch


@dataclass
class RolloutMonitor:
    """Watches a set's LeaderWorkerSets and keeps every distinct state of their
    ``spec.replicas`` (:func:`state_of`), in the API server's order."""

    kube: Kube
    namespace: str
    name: str
    states: list[dict[Key, int]] = field(default_factory=list)
    relists: int = 0
    _objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None
    _listed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __aenter__(self) -> RolloutMonitor:
        self._task = asyncio.create_task(self._follow())
        await asyncio.wait_for(self._listed.wait(), 60)
        return self

    async def __aexit__(self, *_: object) -> None:
        await asyncio.sleep(0.5)  # the last events of what the test waited for
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    def _record(self) -> None:
        state = state_of(self._objects.values())
        if not self.states or self.states[-1] != state:
            self.states.append(state)

    async def _follow(self) -> None:
        resource = await self.kube.dyn.resources.get(api_version=API, kind=KIND)
        selector = f"{NAME_LABEL}={self.name}"
        version: str | None = None
        while True:
            if version is None:
                listed = await resource.get(namespace=self.namespace, label_selector=selector)
                self._objects = {o["metadata"]["name"]: o for o in listed.to_dict()["items"]}
                version = listed.metadata.resourceVersion
                if self._listed.is_set():
                    self.relists += 1
                self._record()
                self._listed.set()
            try:
                async for event in self.kube.dyn.watch(
                        resource, namespace=self.namespace, label_selector=selector,
                        resource_version=version, timeout=300):
                    obj = event["raw_object"]
                    if event["type"] == "ERROR":
                        version = None
                        break
                    version = obj["metadata"].get("resourceVersion", version)
                    if event["type"] == "BOOKMARK":
                        continue
                    if event["type"] == "DELETED":
                        self._objects.pop(obj["metadata"]["name"], None)
                    else:
                        self._objects[obj["metadata"]["name"]] = obj
                    self._record()
            except asyncio.CancelledError:
                raise
            except Exception:
                version = None
                await asyncio.sleep(0.2)

    def steps(self) -> list[dict[Key, int]]:
        """The states at the end of each run of consecutive changes to one (slice, revision):
        what the invariant is judged on (see the module docstring)."""
        out: list[dict[Key, int]] = []
        for i, state in enumerate(self.states):
            if 0 < i < len(self.states) - 1:
                arrived, leaving = (_changed(self.states[i - 1], state),
                                    _changed(state, self.states[i + 1]))
                if len(arrived) == 1 and arrived == leaving:
                    continue  # the same revision's next write follows
            out.append(state)
        return out

    def violations(self, bounds: Mapping[str, int] | None = None) -> list[str]:
        """Every step at which some (slice, revision) had a role at 0 while another of its
        roles was above 0, and (with ``bounds``, role -> max(source, target) + surge) every
        observed state, between two calls of one pass too, at which a role's total in one slice
        exceeded its bound (the controller drains before it scales up, so no instant may)."""
        out = []
        for state in self.steps():
            for slice_, revision in {(s, r) for s, r, _ in state}:
                if _split(state, {(slice_, revision)}):
                    out.append(f"revision {revision} (slice {slice_}) split: "
                               f"{_render(state)}")
        out += _over(self.states, bounds or {})
        return out

    def revisions(self) -> list[str]:
        """Every revision seen, in the order it first appeared."""
        out: list[str] = []
        for state in self.states:
            for _, revision, _ in sorted(state):
                if revision not in out:
                    out.append(revision)
        return out

    def trace(self, target: str, roles: list[str], slice_: str = "0") -> list[str]:
        """The rollout as ``old|new`` per role (``P,D|p,d``, old summed over every revision
        but ``target``), one entry per step, consecutive repeats dropped."""
        out: list[str] = []
        for state in self.steps():
            old = [sum(n for (s, rev, r), n in state.items()
                       if s == slice_ and rev != target and r == role) for role in roles]
            new = [state.get((slice_, target, role), 0) for role in roles]
            text = f"{','.join(map(str, old))}|{','.join(map(str, new))}"
            if not out or out[-1] != text:
                out.append(text)
        return out


def _changed(a: dict[Key, int], b: dict[Key, int]) -> set[tuple[str, str]]:
    """The (slice, revision) pairs whose replicas differ between two states."""
    return {(s, r) for s, r, _ in (k for k in a.keys() | b.keys() if a.get(k) != b.get(k))}


def _split(state: dict[Key, int], pairs: set[tuple[str, str]]) -> bool:
    for slice_, revision in pairs:
        counts = [n for (s, r, _), n in state.items() if (s, r) == (slice_, revision)]
        if counts and 0 in counts and any(n > 0 for n in counts):
            return True
    return False


def _totals(state: dict[Key, int]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for (slice_, _, role), n in state.items():
        out[(slice_, role)] = out.get((slice_, role), 0) + n
    return out


def _over(states: Iterable[dict[Key, int]], bounds: Mapping[str, int]) -> list[str]:
    out = []
    for state in states:
        for (slice_, role), total in _totals(state).items():
            if role in bounds and total > bounds[role]:
                out.append(f"{role} (slice {slice_}) at {total} > {bounds[role]}: "
                           f"{_render(state)}")
    return out


def _render(state: dict[Key, int]) -> str:
    return ", ".join(f"{s}/{rev}/{role}={n}" for (s, rev, role), n in sorted(state.items()))


@contextlib.asynccontextmanager
async def running_ds_operator(cluster: LocalCluster) -> AsyncIterator[Operator]:
    """Both DisaggregatedSet CRDs installed, then the harness's in-process operator (webhooks
    confined to a fresh namespace, controllers cluster-wide); every DisaggregatedSet left in
    its namespace is deleted before it stops."""
    await asyncio.to_thread(install_crds, cluster)
    async with running_operator(cluster) as op:
        try:
            yield op
        finally:
            for ds in await op.kube.list(DS_API, DS_KIND, op.namespace):
                await op.kube.delete(DS_API, DS_KIND, ds["metadata"]["name"], op.namespace)
