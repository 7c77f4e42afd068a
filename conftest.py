"""Shared pytest fixtures: a real local cluster per tier, a client per cluster, a namespace per
test.

A test marked ``full`` runs on the full tier (controllers, scheduler, kwok nodes); one marked
``api`` runs on etcd + kube-apiserver alone; one marked ``node`` on the full tier plus a real
kubelet node (root: ``make e2e-node``). Each tier's cluster starts once per session in its own
directory under ``.cluster/`` and stops at the end (set ``LWS_KEEP_CLUSTER=1`` to keep it for the
next run, which then starts in well under a second). Unmarked tests get no cluster.

``LWS_E2E_KUBECONFIG=/path/to/kubeconfig`` runs every cluster test against an existing cluster
instead (for example kind with kwok, see docs/control-plane.md); nothing is started or stopped then.

Fixtures live here; whatever a test imports (the cluster registry, the builder, the launcher,
the waits) comes from the harness package ``e2e.harness``, never from this module.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.clusters import Clusters
from e2e.harness.disaggregated import running_ds_operator
from e2e.harness.launcher import Operator, running_operator
from e2e.harness.plugin_wheel import SharedInstall
from e2e.harness.replicas import Env, running_env
from e2e.kube import Kube
from lws_operator.kube.client import KubeClient


@pytest.fixture(scope="session")
def clusters() -> Iterator[Clusters]:
    registry = Clusters()
    yield registry
    registry.stop()


def _tier(request: pytest.FixtureRequest) -> str:
    if request.node.get_closest_marker("node"):
        return "node"
    if request.node.get_closest_marker("full"):
        return "full"
    if request.node.get_closest_marker("api"):
        return "api"
    raise pytest.UsageError(f"{request.node.nodeid} needs a cluster: mark it `api` or `full`")


@pytest.fixture(scope="session")
def plugin_wheel(tmp_path_factory: pytest.TempPathFactory) -> SharedInstall:
    """The plugin's wheel installed alone in a fresh virtualenv, built on first use and shared
    by the session's tests of it (``e2e.harness.plugin_wheel``)."""
    return SharedInstall(tmp_path_factory.mktemp("plugin-wheel"))


@pytest.fixture(scope="session")
def lws_crd(clusters: Clusters) -> LocalCluster:
    """The api-tier cluster with the committed CRD installed (once per session) and served."""
    cluster = clusters.get("api")
    cluster.install_crd()
    return cluster


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def admitted(lws_crd: LocalCluster) -> AsyncIterator[tuple[Kube, str]]:
    """A namespace whose LeaderWorkerSets and pods go through our admission webhooks (served
    in-process, registered by URL and confined to it), shared by a module's tests, with a
    client of its own; yields the client and the namespace."""
    kube = await Kube.connect(str(lws_crd.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    hooks = await start_webhooks(str(lws_crd.kubeconfig), options_for(namespace))
    yield kube, namespace
    await stop_webhooks(hooks)
    await kube.delete("v1", "Namespace", namespace)
    await kube.delete("v1", "Namespace", f"{namespace}-op")
    await kube.close()


@pytest.fixture
def cluster(request: pytest.FixtureRequest, clusters: Clusters) -> LocalCluster:
    """The running cluster of the test's tier."""
    return clusters.get(_tier(request))


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def _clients() -> AsyncIterator[dict[str, Kube]]:
    clients: dict[str, Kube] = {}
    yield clients
    for kube in clients.values():
        await kube.close()


@pytest_asyncio.fixture(loop_scope="session")
async def kube(cluster: LocalCluster, _clients: dict[str, Kube]) -> Kube:
    """A client of the test's cluster (one per cluster per session)."""
    key = str(cluster.dir)
    if key not in _clients:
        _clients[key] = await Kube.connect(str(cluster.kubeconfig))
    return _clients[key]


@pytest_asyncio.fixture(loop_scope="session")
async def client(cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    """The operator's own client (``KubeClient``) of the test's cluster, one per test: for tests
    of what the operator itself sends and reads (its encoding, leases), where ``kube`` is the
    test's client."""
    out = await KubeClient.connect(str(cluster.kubeconfig))
    yield out
    await out.close()


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(kube: Kube) -> AsyncIterator[str]:
    """A fresh namespace, deleted (in the background) after the test."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    await kube.delete("v1", "Namespace", name)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def operator(clusters: Clusters) -> AsyncIterator[Operator]:
    """The full-tier cluster with the CRD, our webhooks (confined to one namespace) and our
    controllers running in this process (one per module)."""
    cluster: LocalCluster = clusters.get("full")
    cluster.install_crd()
    async with running_operator(cluster) as op:
        yield op


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ds_operator(clusters: Clusters) -> AsyncIterator[Operator]:
    """``operator`` with both DisaggregatedSet CRDs installed; the DisaggregatedSets left in its
    namespace are deleted before it stops (one per module)."""
    async with running_ds_operator(clusters.get("full")) as op:
        yield op


@pytest_asyncio.fixture(loop_scope="session")
async def env(request: pytest.FixtureRequest, clusters: Clusters, tmp_path: Path,
              ) -> AsyncIterator[Env]:
    """Operator replicas run as processes on the full tier, into a namespace of their own, with
    our webhooks confined to a fresh one (``e2e.harness.replicas.running_env``); a module marked
    ``replicas(suffix=..., drain_timeout=...)`` passes those arguments on."""
    marker = request.node.get_closest_marker("replicas")
    async with running_env(clusters, tmp_path, **(marker.kwargs if marker else {})) as out:
        yield out
