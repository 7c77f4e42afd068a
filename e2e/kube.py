"""A small dict-in, dict-out helper over ``kubernetes.aio``'s dynamic client for tests.

Tests assert on what a user sees through the API, so they want plain dicts and a way to wait for
a condition without sleeping blindly. Every call goes to the real API server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from kubernetes.aio import client, config
from kubernetes.aio.dynamic import DynamicClient
from kubernetes.aio.dynamic.exceptions import NotFoundError, ResourceNotFoundError

T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"


class Kube:
    """Dict-based CRUD, list and wait against one cluster."""

    def __init__(self, api: client.ApiClient, dyn: DynamicClient) -> None:
        self.api = api
        self.dyn = dyn
        self._cache_file: str | None = None

    @classmethod
    async def connect(cls, kubeconfig: str) -> Kube:
        api = await config.new_client_from_config(config_file=kubeconfig)
        # A discovery cache of our own: the default file is shared by every client of the same
        # address, so a cluster that reuses a port would inherit a previous cluster's kinds.
        cache = os.path.join(tempfile.gettempdir(), f"lws-discovery-{uuid.uuid4().hex}.json")
        dyn = await DynamicClient(api, cache_file=cache)
        kube = cls(api, dyn)
        kube._cache_file = cache
        return kube

    async def close(self) -> None:
        await self.api.close()
        if self._cache_file is not None:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._cache_file)

    async def _resource(self, api_version: str, kind: str) -> Any:
        """The API resource, rediscovered once if unknown (a CRD installed after we connected)."""
        try:
            return await self.dyn.resources.get(api_version=api_version, kind=kind)
        except ResourceNotFoundError:
            await self.dyn.resources.invalidate_cache()
            return await self.dyn.resources.get(api_version=api_version, kind=kind)

    async def create(self, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        res = await self._resource(body["apiVersion"], body["kind"])
        out = await self.dyn.create(res, body=body, namespace=namespace)
        return dict(out.to_dict())

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        res = await self._resource(api_version, kind)
        try:
            out = await self.dyn.get(res, name=name, namespace=namespace)
        except NotFoundError:
            return None
        return dict(out.to_dict())

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, **selectors: str
    ) -> list[dict[str, Any]]:
        res = await self._resource(api_version, kind)
        out = await self.dyn.get(res, namespace=namespace, **selectors)
        return [dict(i) for i in out.to_dict()["items"]]

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        namespace: str | None = None,
        content_type: str = MERGE_PATCH,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        res = await self._resource(api_version, kind)
        if subresource:
            res = res.subresources[subresource]
        out = await self.dyn.patch(res, body=body, name=name, namespace=namespace,
                                   content_type=content_type)
        return dict(out.to_dict())

    async def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: str | None = None,
    ) -> dict[str, Any] | None:
        """Delete and return the server's answer: the object while finalizers hold it, else a
        Status. None when it was already gone."""
        res = await self._resource(api_version, kind)
        body = {"propagationPolicy": propagation} if propagation else None
        try:
            out = await self.dyn.delete(res, name=name, namespace=namespace, body=body)
        except NotFoundError:
            return None
        return dict(out.to_dict())


@contextlib.asynccontextmanager
async def polling(probe: Callable[[], Awaitable[None]],
                  interval: float = 0.2) -> AsyncIterator[None]:
    """Run ``probe`` on entry, then every ``interval`` seconds while the block runs, and once
    more after it: for tests that record what they see during an operation."""
    done = asyncio.Event()

    async def loop() -> None:
        while True:
            await asyncio.sleep(interval)
            await probe()
            if done.is_set():
                return

    await probe()
    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        done.set()
        await task


async def wait_for(
    probe: Callable[[], Awaitable[T]],
    timeout: float = 60.0,  # noqa: ASYNC109 - a deadline that names the condition on failure
    interval: float = 0.25,
    what: str = "condition",
) -> T:
    """Poll ``probe`` until it returns something truthy; fail with its last value on timeout."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        await asyncio.sleep(interval)


def condition(obj: dict[str, Any] | None, kind: str) -> str | None:
    """The status of condition ``kind`` on ``obj`` (``"True"``/``"False"``/...), or None."""
    for cond in (obj or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            return str(cond.get("status"))
    return None


def is_ready(pod: dict[str, Any] | None) -> bool:
    return condition(pod, "Ready") == "True"
