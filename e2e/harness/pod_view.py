"""A namespace's pods as a watch shows them, kept current for tests that judge every change.

List, then watch from the listing's resourceVersion; a watch that ends or fails (an API server
restart, an expired resourceVersion) lists again, so the view never silently stops. Each
added, modified or deleted pod calls ``on_event`` after the view has it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from e2e.kube import Kube


class PodView:
    """The pods of ``namespace`` (those matching ``selector``, if given), by name."""

    def __init__(self, kube: Kube, namespace: str, selector: str | None = None,
                 on_event: Callable[[], None] | None = None) -> None:
        self.kube, self.namespace, self.selector = kube, namespace, selector
        self.pods: dict[str, dict[str, Any]] = {}
        self.listed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.on_event = on_event

    async def _run(self) -> None:
        dyn = self.kube.dyn
        resource = await dyn.resources.get(api_version="v1", kind="Pod")
        scope: dict[str, Any] = {"namespace": self.namespace}
        if self.selector is not None:
            scope["label_selector"] = self.selector
        while True:
            with contextlib.suppress(Exception):
                listing = await dyn.get(resource, **scope)
                self.pods = {p["metadata"]["name"]: p for p in listing.to_dict()["items"]}
                self.listed.set()
                async for event in dyn.watch(resource, **scope,
                                             resource_version=listing.metadata.resourceVersion):
                    obj = event["raw_object"]
                    if event["type"] == "DELETED":
                        self.pods.pop(obj["metadata"]["name"], None)
                    elif event["type"] in ("ADDED", "MODIFIED"):
                        self.pods[obj["metadata"]["name"]] = obj
                    if self.on_event is not None:
                        self.on_event()
            await asyncio.sleep(0.2)

    async def start(self) -> None:
        self.task = asyncio.create_task(self._run())
        await asyncio.wait_for(self.listed.wait(), 30)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.task
