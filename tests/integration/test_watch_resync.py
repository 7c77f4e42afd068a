"""The resync after a relisting (``kube.gaps.WatchGaps``) against a real
kube-apiserver reached through a TCP relay the test can cut, as an API server that goes away
again just after a watch was re-established.

Until a resync succeeds, an object deleted while the watch was down stays in the cache: the
controller then skips "existing" objects that are gone. A resync that fails must therefore be
tried again, not left for a next expiry that may never come.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from prometheus_client import CollectorRegistry

from e2e.chaos.admission_load import RoundRobinProxy
from e2e.cluster import LocalCluster
from e2e.kube import wait_for
from lws_operator.api.constants import NAME_LABEL
from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.kube.gaps import RESYNC_SETTLE

pytestmark = pytest.mark.api


def _relayed_kubeconfig(cluster: LocalCluster, port: int, path: Path) -> Path:
    """The cluster's kubeconfig with its server on the relay's port (same certificates: the
    API server's serves 127.0.0.1, whatever the port)."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(config))
    return path


def _api_port(cluster: LocalCluster) -> int:
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    port = urlsplit(config["clusters"][0]["cluster"]["server"]).port
    assert port is not None
    return port


def _counted(registry: CollectorRegistry, metric: str) -> float | None:
    return registry.get_sample_value(metric, {"kind": "Service"})


async def test_a_failed_resync_is_tried_again_until_it_drops_what_was_deleted(
        lws_crd: LocalCluster, tmp_path: Path) -> None:
    relay = RoundRobinProxy([_api_port(lws_crd)])
    port = await relay.start()
    kube = await KubeClient.connect(str(_relayed_kubeconfig(lws_crd, port, tmp_path / "kc")))
    registry = CollectorRegistry()
    runtime = ControllerRuntime(kube, ControllerOptions(), registry)
    # A Service that a listing reported and that was deleted before the resync's own LIST.
    namespace = f"gone-{uuid.uuid4().hex[:8]}"
    ghost: dict[str, Any] = {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "ghost", "namespace": namespace, "uid": str(uuid.uuid4()),
        "resourceVersion": "1", "labels": {NAME_LABEL: "ghost"}}}
    store = runtime.cache["Service"]

    async def dropped() -> bool:
        return store.get(namespace, "ghost") is None
    try:
        await relay.stop()  # the API server goes away again
        runtime.watches._observe("Service", None, ghost)  # an event of kopf's relisting
        assert not await dropped()

        await asyncio.sleep(RESYNC_SETTLE + 3)  # the first resync (and a retry) fail
        assert not await dropped()
        assert not _counted(registry, "lws_operator_cache_resyncs_total")

        await relay.start(port)  # the API server is back; no watch expires again
        await wait_for(dropped, timeout=60, what="the ghost Service dropped by a resync")
        assert _counted(registry, "lws_operator_cache_resyncs_total") == 1
        assert _counted(registry, "lws_operator_cache_resync_dropped_total") == 1
    finally:
        await runtime.watches.gaps.close()
        await relay.stop()
        await kube.close()
