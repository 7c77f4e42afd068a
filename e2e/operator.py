"""The operator's controllers in-process, for tests: started against a cluster, stopped cleanly."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.kube.metrics import ClientMetrics


@dataclass
class Controllers:
    runtime: ControllerRuntime
    registry: CollectorRegistry
    client: KubeClient
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def close(self) -> None:
        self.stop.set()
        try:
            await asyncio.wait_for(self.task, 30)
        finally:
            await self.client.close()


async def start_controllers(kubeconfig: str, workers: int = 4, stall_grace: float = 5.0,
                            scheduler_provider: str | None = None) -> Controllers:
    """Controllers with a private metrics registry (their API requests are counted there) and a
    short rollout-stall grace period, so stall tests need not wait a minute."""
    registry = CollectorRegistry()
    client = await KubeClient.connect(kubeconfig, metrics=ClientMetrics.for_registry(registry))
    runtime = ControllerRuntime(client, ControllerOptions(
        workers=workers, stall_grace_seconds=stall_grace,
        scheduler_provider=scheduler_provider), registry)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    return Controllers(runtime, registry, client, stop, task)
