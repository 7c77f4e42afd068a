"""The group disruption budget through a real kube-apiserver: Evictions created through the
API are answered 201 or 429 by our eviction webhook (``admission.eviction``), the 429 reaching
the client as the API's "too many requests" (what ``kubectl drain`` retries on), and the
annotation is validated by the LeaderWorkerSet webhook.

No controller runs on the api tier: the test creates the pods (as the StatefulSet controller
would), marks them Ready through the status subresource (as a kubelet would) and fills the
guard's cache from the API server's own listings before each eviction.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster import LocalCluster
from e2e.harness.admission import Webhooks, options_for, start_webhooks, stop_webhooks
from e2e.harness.builder import LeaderWorkerSet
from e2e.kube import Kube
from lws_operator.admission.eviction import ApiReservations, EvictionGuard
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from lws_operator.kube.cache import ClusterCache
from lws_operator.kube.client import ApiException, status_message
from lws_operator.logic.disruption.reservations import parse_reservations

pytestmark = pytest.mark.api

LWS_API = "leaderworkerset.x-k8s.io/v1"


class Budgeted:
    """A namespace with our webhooks, an eviction guard over a cache this test fills."""

    def __init__(self, kube: Kube, namespace: str, hooks: Webhooks) -> None:
        self.kube, self.namespace, self.hooks = kube, namespace, hooks
        self.cache = ClusterCache()
        for store in self.cache.stores.values():
            store.synced = True  # the kinds this test does not list hold nothing
        # Reservations in the set, written through the API server as the operator writes them.
        self.guard = EvictionGuard(self.cache, None, None, store=ApiReservations(hooks.client))
        hooks.runtime.evictions.decider = self.guard.handle

    async def refresh(self) -> None:
        """The cache as a watch would have it: what the API server lists now."""
        for kind, api in (("Pod", "v1"), ("LeaderWorkerSet", LWS_API)):
            store = self.cache[kind]
            listed = await self.kube.list(api, kind, self.namespace)
            names = {o["metadata"]["name"] for o in listed}
            for obj in store.in_namespace(self.namespace):
                if obj["metadata"]["name"] not in names:
                    store.delete(obj)
            for obj in listed:
                store.upsert({"apiVersion": api, "kind": kind, **obj})

    async def group(self, lws: str, group: int, size: int) -> None:
        """``size`` Ready pods of group ``group`` of ``lws``."""
        for worker in range(size):
            name = f"{lws}-{group}" if worker == 0 else f"{lws}-{group}-{worker}"
            await self.kube.create({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "labels": {
                    NAME_LABEL: lws, GROUP_INDEX_LABEL: str(group),
                    WORKER_INDEX_LABEL: str(worker)},
                    "annotations": {SIZE_ANNOTATION: str(size)}},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                self.namespace)
            await self.kube.patch("v1", "Pod", name, {"status": {"phase": "Running",
                                                                 "conditions": [
                {"type": "Ready", "status": "True"}]}}, self.namespace, subresource="status")

    async def evict(self, pod: str, dry_run: bool = False) -> tuple[int, str]:
        """Create an Eviction; (HTTP status, message)."""
        query = {"dryRun": "All"} if dry_run else None
        try:
            await self.hooks.client.request(
                "POST", f"/api/v1/namespaces/{self.namespace}/pods/{pod}/eviction",
                query=query, body={"apiVersion": "policy/v1", "kind": "Eviction",
                                   "metadata": {"name": pod, "namespace": self.namespace}})
        except ApiException as exc:
            return int(exc.status), status_message(exc)
        return 201, ""


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def budgeted(lws_crd: LocalCluster) -> AsyncIterator[Budgeted]:
    kube = await Kube.connect(str(lws_crd.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    hooks = await start_webhooks(str(lws_crd.kubeconfig), options_for(namespace))
    yield Budgeted(kube, namespace, hooks)
    await stop_webhooks(hooks)
    await kube.delete("v1", "Namespace", namespace)
    await kube.delete("v1", "Namespace", f"{namespace}-op")
    await kube.close()


def lws(name: str, replicas: int, size: int, budget: str | None) -> dict[str, Any]:
    built = LeaderWorkerSet(name).replicas(replicas).size(size).image("busybox")
    if budget is not None:
        built = built.annotation(MAX_DISRUPTED_GROUPS_ANNOTATION, budget)
    return built.build()


async def test_a_second_healthy_group_is_refused_with_too_many_requests(
        budgeted: Budgeted) -> None:
    b = budgeted
    await b.kube.create(lws("serve", 3, 2, "1"), b.namespace)
    for group in range(3):
        await b.group("serve", group, 2)
    await b.refresh()
    # A dry run is answered like the real thing and reserves nothing.
    assert await b.evict("serve-1-1", dry_run=True) == (201, "")
    assert await b.evict("serve-0-1") == (201, "")
    stored = await b.kube.get(LWS_API, "LeaderWorkerSet", "serve", b.namespace)
    assert stored is not None
    assert set(parse_reservations(stored["metadata"]["annotations"])) == {"0"}
    # The cache has not seen that eviction yet: the reservation holds group 0.
    code, message = await b.evict("serve-1-1")
    assert code == 429, message
    assert message.startswith(
        'admission webhook "veviction.lws-operator.dev" denied the request: Cannot evict pod as '
        f"it would violate the group disruption budget of LeaderWorkerSet {b.namespace}/serve: "
        "group 1 is healthy and 1 group(s) [0] are already disrupted")
    await b.refresh()  # now it has: group 0 counts from the cache
    assert (await b.evict("serve-2"))[0] == 429
    # More of the disrupted group costs nothing.
    assert await b.evict("serve-0") == (201, "")
    assert b.hooks.runtime.evictions.decider is not None


async def test_two_guards_of_stale_caches_allow_one_group(budgeted: Budgeted) -> None:
    """Two replicas' guards, each with a cache of the same moment, decide evictions of two
    healthy groups at once: the resourceVersion precondition of the reservation's write lets
    exactly one through; the other reads the set again and refuses."""
    b = budgeted
    await b.kube.create(lws("pair", 3, 1, "1"), b.namespace)
    for group in range(3):
        await b.group("pair", group, 1)
    await b.refresh()
    other = EvictionGuard(b.cache, None, None, store=ApiReservations(b.hooks.client))
    requests = [{"operation": "CREATE", "subResource": "eviction", "namespace": b.namespace,
                 "name": pod, "dryRun": False} for pod in ("pair-0", "pair-1")]
    answers = await asyncio.gather(b.guard.decide(requests[0]), other.decide(requests[1]))
    assert sorted(a["allowed"] for a in answers) == [False, True]
    refused = next(a for a in answers if not a["allowed"])
    assert refused["status"]["code"] == 429
    stored = await b.kube.get(LWS_API, "LeaderWorkerSet", "pair", b.namespace)
    assert stored is not None
    assert len(parse_reservations(stored["metadata"]["annotations"])) == 1


async def test_the_429_is_the_apis_too_many_requests(budgeted: Budgeted) -> None:
    """What ``kubectl drain`` checks (``IsTooManyRequests``): reason TooManyRequests and code
    429 in the Status the client gets, as for a PodDisruptionBudget's refusal."""
    b = budgeted
    await b.kube.create(lws("status", 2, 1, "50%"), b.namespace)
    for group in range(2):
        await b.group("status", group, 1)
    await b.refresh()
    assert await b.evict("status-0") == (201, "")
    try:
        await b.hooks.client.request(
            "POST", f"/api/v1/namespaces/{b.namespace}/pods/status-1/eviction",
            body={"apiVersion": "policy/v1", "kind": "Eviction",
                  "metadata": {"name": "status-1", "namespace": b.namespace}})
    except ApiException as exc:
        status = json.loads(exc.body or "{}")
    else:
        pytest.fail("the second eviction was allowed")
    assert (status["code"], status["reason"]) == (429, "TooManyRequests")


async def test_sets_without_a_budget_and_other_pods_are_never_refused(
        budgeted: Budgeted) -> None:
    b = budgeted
    await b.kube.create(lws("free", 2, 1, None), b.namespace)
    for group in range(2):
        await b.group("free", group, 1)
    await b.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain"},
                         "spec": {"containers": [{"name": "main", "image": "busybox"}]}},
                        b.namespace)
    await b.refresh()
    assert await b.evict("free-0") == (201, "")
    assert await b.evict("free-1") == (201, "")
    assert await b.evict("plain") == (201, "")


async def test_a_bad_budget_is_refused_by_the_lws_webhook(budgeted: Budgeted) -> None:
    with pytest.raises(DynamicApiError) as refused:
        await budgeted.kube.create(lws("bad", 2, 1, "two"), budgeted.namespace)
    assert refused.value.status == 403
    assert json.loads(refused.value.body or "{}")["message"] == (
        'admission webhook "vleaderworkerset.kb.io" denied the request: '
        f'metadata.annotations.{MAX_DISRUPTED_GROUPS_ANNOTATION}: Invalid value: "two": must be '
        "a number of groups (e.g. '1') or a percentage of spec.replicas (e.g. '25%')")
