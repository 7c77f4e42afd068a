"""The DisaggregatedSet controller against etcd + kube-apiserver alone.

Only the DisaggregatedSet controller runs (``DisaggregatedSetRuntime``), so the test plays the
LeaderWorkerSet controller: it writes the child LeaderWorkerSets' status itself, as upstream's
reconciler tests make their children ready. A set is created, its children (LeaderWorkerSets,
the External role's scaler, then the Services once every role is ready) appear, its status says
Available, and passes over the set at rest write nothing at all.

The DisaggregatedSet CRDs are installed by the test when the API server does not serve them yet:
a minimal pair (any spec, the status subresource, the scaler's scale subresource), enough for
the controller, which reads sets through its typed views; the full schemas are the API's own
tests' business.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from e2e.cluster import LocalCluster
from e2e.kube import Kube, wait_for
from lws_operator.api.disaggregated import (
    API_VERSION,
    GROUP,
    KIND,
    NAME_LABEL,
    PLURAL,
    SCALER_KIND,
    SCALER_PLURAL,
)
from lws_operator.controllers.disaggregated_runtime import DisaggregatedSetRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.kube.metrics import ClientMetrics

pytestmark = pytest.mark.api

LWS_API = "leaderworkerset.x-k8s.io/v1"


def _crd(kind: str, plural: str, scale: bool) -> dict[str, Any]:
    subresources: dict[str, Any] = {"status": {}}
    if scale:
        subresources["scale"] = {"specReplicasPath": ".spec.replicas",
                                 "statusReplicasPath": ".status.replicas",
                                 "labelSelectorPath": ".status.selector"}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                           "singular": kind.lower()},
                 "versions": [{"name": "v1", "served": True, "storage": True,
                               "subresources": subresources,
                               "schema": {"openAPIV3Schema": {
                                   "type": "object",
                                   "x-kubernetes-preserve-unknown-fields": True}}}]}}


async def _served(kube: Kube, kind: str) -> bool:
    try:
        await kube.list(API_VERSION, kind, "default")
        return True
    except Exception:
        return False


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ds_crds(lws_crd: LocalCluster) -> AsyncIterator[LocalCluster]:
    """The DisaggregatedSet CRDs served (installed here when absent, removed afterwards)."""
    kube = await Kube.connect(str(lws_crd.kubeconfig))
    installed = []
    for kind, plural, scale in ((KIND, PLURAL, False), (SCALER_KIND, SCALER_PLURAL, True)):
        name = f"{plural}.{GROUP}"
        if await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) is None:
            await kube.create(_crd(kind, plural, scale))
            installed.append(name)
        await wait_for(lambda k=kind: _served(kube, k), what=f"{kind} served")  # type: ignore[misc]
    yield lws_crd
    for name in installed:
        await kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    await kube.close()


@pytest_asyncio.fixture(loop_scope="session")
async def env(ds_crds: LocalCluster) -> AsyncIterator[tuple[Kube, str, DisaggregatedSetRuntime,
                                                           CollectorRegistry]]:
    kube = await Kube.connect(str(ds_crds.kubeconfig))
    ns = f"ds-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    registry = CollectorRegistry()
    client = await KubeClient.connect(str(ds_crds.kubeconfig),
                                      metrics=ClientMetrics.for_registry(registry))
    runtime = DisaggregatedSetRuntime(client, registry, workers=2)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    yield kube, ns, runtime, registry
    stop.set()
    await asyncio.wait_for(task, 30)
    await client.close()
    await kube.delete("v1", "Namespace", ns)
    await kube.close()


def _role(name: str, replicas: int, external: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "spec": {
        "replicas": replicas, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "spec": {"containers": [{"name": "main", "image": "nginx:1"}]}}}}}
    if external:
        out["scaling"] = {"mode": "External"}
    return out


async def _make_ready(kube: Kube, ns: str) -> None:
    """Play the LeaderWorkerSet controller: every child ready at its replicas."""
    for lws in await kube.list(LWS_API, "LeaderWorkerSet", ns):
        replicas = lws["spec"].get("replicas", 1)
        status = {"replicas": replicas, "readyReplicas": replicas,
                  "updatedReplicas": replicas}
        if any(lws.get("status", {}).get(k) != v for k, v in status.items()):
            await kube.patch(LWS_API, "LeaderWorkerSet", lws["metadata"]["name"],
                             {"status": status}, ns, subresource="status")


async def test_a_set_gets_its_children_and_rests(
        env: tuple[Kube, str, DisaggregatedSetRuntime, CollectorRegistry]) -> None:
    kube, ns, runtime, registry = env
    ds = await kube.create({"apiVersion": API_VERSION, "kind": KIND,
                            "metadata": {"name": "llm", "namespace": ns},
                            "spec": {"roles": [_role("prefill", 2, external=True),
                                               _role("decode", 3)]}}, ns)
    uid = ds["metadata"]["uid"]

    async def children() -> dict[str, int]:
        found = {o["metadata"]["name"]: o["spec"]["replicas"]
                 for o in await kube.list(LWS_API, "LeaderWorkerSet", ns)}
        return found if len(found) == 2 else {}

    lws: dict[str, int] = await wait_for(children, what="two child LeaderWorkerSets")
    by_role = {name.rsplit("-", 1)[1]: count for name, count in lws.items()}
    assert by_role == {"prefill": 1, "decode": 3}  # prefill: the scaler's seed
    for child in await kube.list(LWS_API, "LeaderWorkerSet", ns):
        assert child["metadata"]["labels"][NAME_LABEL] == "llm"
        assert [(r["kind"], r["uid"], r["controller"])
                for r in child["metadata"]["ownerReferences"]] == [(KIND, uid, True)]
    scaler = await kube.get(API_VERSION, SCALER_KIND, "llm-prefill", ns)
    assert scaler is not None
    assert scaler["spec"] == {"replicas": 1}
    assert scaler["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] is True

    # Scale the External role through its scaler, as an HPA would.
    await kube.patch(API_VERSION, SCALER_KIND, "llm-prefill", {"spec": {"replicas": 2}}, ns)

    async def scaled() -> bool:
        found = await children()
        return {n.rsplit("-", 1)[1]: c for n, c in found.items()} == {
            "prefill": 2, "decode": 3}
    await wait_for(scaled, what="prefill scaled to 2 by its scaler")

    await _make_ready(kube, ns)

    async def available() -> dict[str, Any]:
        got = await kube.get(API_VERSION, KIND, "llm", ns) or {}
        conditions = {c["type"]: c["status"] for c in got.get("status", {}).get(
            "conditions", [])}
        services = await kube.list("v1", "Service", ns)
        return got if conditions.get("Available") == "True" and len(services) == 2 else {}

    done: dict[str, Any] = await wait_for(available, what="the set Available with its Services")
    assert [s["name"] for s in done["status"]["roleStatuses"]] == ["prefill", "decode"]
    for service in await kube.list("v1", "Service", ns):
        assert service["spec"]["clusterIP"] == "None"
        assert not service["spec"].get("ports")

    async def scaler_reported() -> bool:
        got = await kube.get(API_VERSION, SCALER_KIND, "llm-prefill", ns)
        return (got or {}).get("status", {}).get("replicas") == 2
    await wait_for(scaler_reported, what="the scaler's status")

    # At rest: three more passes over the set write nothing. Counted on the set's own objects
    # (resourceVersions, and nothing new in its namespace, Events included): the process's
    # request counters also see other tests' sets, left in namespaces this tier (no namespace
    # controller) never finishes deleting, whose passes keep retrying.
    # Events are written after their pass (``kube.events``): both counts wait for what was
    # recorded before them.
    await runtime.events.flush()
    before = await _objects(kube, ns)
    for _ in range(3):
        passes = _passes(registry)
        runtime.queue.add((ns, "llm"))

        async def passed(after: float = passes) -> bool:
            return _passes(registry) > after
        await wait_for(passed, what="a pass over the set at rest")
    await runtime.events.flush()
    assert await _objects(kube, ns) == before


async def _objects(kube: Kube, ns: str) -> dict[tuple[str, str], str]:
    """Every object of the kinds the controller writes in ``ns``, by (kind, name): its
    resourceVersion."""
    out: dict[tuple[str, str], str] = {}
    for api, kind in ((API_VERSION, KIND), (API_VERSION, SCALER_KIND),
                      (LWS_API, "LeaderWorkerSet"), ("v1", "Service"), ("v1", "Event")):
        for obj in await kube.list(api, kind, ns):
            out[(kind, obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
    return out


def _passes(registry: CollectorRegistry) -> float:
    """Passes of the DisaggregatedSet controller that ended, whatever their result."""
    return sum(sample.value for metric in registry.collect()
               if metric.name == "controller_runtime_reconcile"
               for sample in metric.samples
               if sample.name.endswith("_total")
               and sample.labels.get("controller") == "disaggregatedset")
