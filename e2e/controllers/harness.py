"""The controller end-to-end harness: the operator running in-process on the full tier."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest_asyncio
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from conftest import Clusters
from e2e.bench.figures import WRITE_VERBS
from e2e.bench.webhook_latency import Webhooks, options_for, start_webhooks, stop_webhooks
from e2e.cluster import LocalCluster
from e2e.kube import Kube
from e2e.operator import start_controllers
from lws_operator.controllers.runtime import ControllerRuntime

MANAGED_RESOURCES = {"leaderworkersets", "statefulsets", "services", "controllerrevisions",
                     "pods", "persistentvolumeclaims", "podgroups", "workloads"}


@dataclass
class Operator:
    kube: Kube
    namespace: str
    runtime: ControllerRuntime
    registry: CollectorRegistry
    kubeconfig: str
    cluster: LocalCluster

    async def server_writes(self) -> dict[tuple[str, str], float]:
        """kube-apiserver's own count of write requests to the kinds the operator manages."""
        text = await asyncio.to_thread(self.cluster.kubectl, "get", "--raw", "/metrics")
        out: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(text):
            if family.name != "apiserver_request":
                continue
            for metric in family.samples:
                labels = metric.labels
                if (metric.name == "apiserver_request_total"
                        and labels.get("verb") in {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
                        and labels.get("resource") in MANAGED_RESOURCES):
                    key = (labels["verb"], labels["resource"])
                    out[key] = out.get(key, 0.0) + metric.value
        return out

    async def resync(self, passes: int = 3) -> None:
        """Every LeaderWorkerSet the operator has cached queued for a pass, ``passes`` times,
        a second apart: what a resync does, and a set at rest must cost no write in it."""
        for _ in range(passes):
            for key in list(self.runtime.cache["LeaderWorkerSet"].owners()):
                self.runtime.queue.add(key)
            await asyncio.sleep(1)

    def writes(self) -> dict[tuple[str, str], float]:
        """The operator's own write requests so far, by (verb, resource)."""
        out: dict[tuple[str, str], float] = {}
        for metric in self.registry.collect():
            if metric.name != "lws_operator_api_requests":
                continue
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.labels["verb"] in WRITE_VERBS:
                    key = (sample.labels["verb"], sample.labels["resource"])
                    out[key] = out.get(key, 0.0) + sample.value
        return out


@contextlib.asynccontextmanager
async def running_operator(cluster: LocalCluster,
                           scheduler_provider: str | None = None) -> AsyncIterator[Operator]:
    """Our webhooks (confined to a fresh namespace) and controllers in this process, on
    ``cluster`` (which must have the CRD), with an optional scheduler provider on both sides."""
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    hooks: Webhooks = await start_webhooks(
        str(cluster.kubeconfig), options_for(namespace, scheduler_provider=scheduler_provider))
    controllers = await start_controllers(str(cluster.kubeconfig),
                                          scheduler_provider=scheduler_provider)
    yield Operator(kube, namespace, controllers.runtime, controllers.registry,
                   str(cluster.kubeconfig), cluster)
    # LeaderWorkerSets a test left behind go first: deleted by the namespace later, they could
    # outlive this operator and keep the next module's one busy with a terminating namespace.
    for lws in await kube.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", namespace):
        await kube.delete("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
                          lws["metadata"]["name"], namespace)
    await controllers.close()
    await stop_webhooks(hooks)
    await kube.delete("v1", "Namespace", namespace)
    await kube.close()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def operator(clusters: Clusters) -> AsyncIterator[Operator]:
    """The full-tier cluster with the CRD, our webhooks (confined to one namespace) and our
    controllers running in this process."""
    cluster: LocalCluster = clusters.get("full")
    cluster.install_crd()
    async with running_operator(cluster) as op:
        yield op
