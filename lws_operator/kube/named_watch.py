"""One object, by name, kept current by a watch: no request while nothing changes.

The webhook certificates need three objects (the certificate Secret and the two webhook
configurations), and reading them again every few seconds cost the operator requests at rest
that upstream's controller does not make. ``NamedObject`` lists the object once (a field selector
on its name, so RBAC restricted by ``resourceNames`` suffices), then watches from that listing's
resourceVersion. An event stores the object and calls ``on_change``; a stream the server ends
(after its own timeout, half an hour or more) is resumed from the last resourceVersion seen; an
expired one (410 Gone) is listed again. The answer to one of our own writes is stored at once
(``store``), so the next decision does not wait for its echo from the watch.

resourceVersions are compared as integers, as ``kube.cache`` does: an event older than a stored
answer to our write does not bring the older object back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp

from lws_operator.kube.client import ApiException, KubeClient, is_status, loads
from lws_operator.kube.list_watch import Expired, event_of

log = logging.getLogger(__name__)

# The API server ends a watch after 30 to 60 minutes (its --min-request-timeout, randomised):
# silence longer than this means a connection that died without telling us.
READ_TIMEOUT = 3900.0
_MAX_BACKOFF = 30.0


def _version(obj: Mapping[str, Any] | None) -> int | None:
    text = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


class NamedObject:
    """The object ``name`` of the collection at ``collection`` (a list path), kept current."""

    def __init__(self, kube: KubeClient, collection: str, name: str,
                 on_change: Callable[[], None] = lambda: None) -> None:
        self.kube = kube
        self.collection = collection
        self.name = name
        self.on_change = on_change
        self.obj: dict[str, Any] | None = None
        self.synced = asyncio.Event()
        self._version: str | None = None  # where the watch resumes
        self.lists = 0  # listings made (the first, then one per expired watch)

    @property
    def path(self) -> str:
        return f"{self.collection}/{self.name}"

    @property
    def _selector(self) -> dict[str, str]:
        return {"fieldSelector": f"metadata.name={self.name}"}

    def store(self, obj: dict[str, Any] | None, *, deleted: bool = False,
              notify: bool = True) -> None:
        """Keep ``obj`` unless the stored copy is newer; ``deleted``: it is gone. ``notify``
        False for the answer to our own write: the writer knows, and a write whose answer
        differs from what it meant (a server default) must not start another pass at once."""
        if deleted:
            if obj is None or self.obj is None or _version(self.obj) is None or (
                    (_version(obj) or 0) >= (_version(self.obj) or 0)):
                changed, self.obj = self.obj is not None, None
            else:
                changed = False
        else:
            assert obj is not None
            old, new = _version(self.obj), _version(obj)
            if self.obj is not None and old is not None and new is not None and new < old:
                return
            changed = self.obj != obj
            self.obj = obj
        if changed and notify:
            self.on_change()

    async def refresh(self) -> dict[str, Any] | None:
        """GET the object now (after a write conflict: the watch may not have caught up) and
        store it; a request only when a write lost a race, never at rest."""
        obj = await self.kube.get(self.path)
        if obj is None:
            self.store(None, deleted=True)
        else:
            self.store(obj)
        return self.obj

    async def _list(self) -> None:
        listed = await self.kube.request("GET", self.collection, query=self._selector)
        self.lists += 1
        items = [i for i in listed.get("items") or []
                 if (i.get("metadata") or {}).get("name") == self.name]
        if items:
            item = items[0]
            # A listing's items come without kind and apiVersion; keep the object whole.
            kind = str(listed.get("kind") or "").removesuffix("List")
            item.setdefault("kind", kind)
            item.setdefault("apiVersion", listed.get("apiVersion"))
            self.store(item)
        else:
            self.store(None, deleted=True)
        self._version = str((listed.get("metadata") or {}).get("resourceVersion") or "") or None
        if not self.synced.is_set():
            self.synced.set()
            self.on_change()  # the first listing is news, even of an absent object

    async def _watch(self) -> None:
        query = {**self._selector, "watch": "true", "allowWatchBookmarks": "true"}
        if self._version:
            query["resourceVersion"] = self._version
        async with self.kube.stream(self.collection, query=query,
                                    read_timeout=READ_TIMEOUT) as lines:
            async for line in lines:
                if line.strip():
                    self._event(loads(line))

    def _event(self, event: dict[str, Any]) -> None:
        kind, obj, version = event_of(event)
        if version:
            self._version = version
        if kind == "BOOKMARK" or (obj.get("metadata") or {}).get("name") != self.name:
            return
        if kind == "DELETED":
            self.store(obj, deleted=True)
        elif kind in ("ADDED", "MODIFIED"):
            self.store(obj)

    async def run(self) -> None:
        """List, then watch, forever (cancel to stop). Failures are logged and retried with
        backoff; a listing is repeated only when the watch has expired."""
        backoff = 0.5
        while True:
            try:
                if self._version is None or not self.synced.is_set():
                    await self._list()
                started = asyncio.get_running_loop().time()
                await self._watch()
                # The server ended the stream (its timeout): resume where it ended, at once
                # unless streams end as soon as they start (a proxy cutting them).
                if asyncio.get_running_loop().time() - started > _MAX_BACKOFF:
                    backoff = 0.5
                    continue
            except Expired:
                log.debug("watch of %s expired; listing again", self.path)
                self._version = None
                continue
            except ApiException as exc:
                if is_status(exc, 410):
                    self._version = None
                    continue
                log.warning("watching %s failed: %s %s", self.path, exc.status, exc.reason)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                log.warning("watching %s failed: %s", self.path, exc or type(exc).__name__)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, _MAX_BACKOFF)


class NamedObjects:
    """Several ``NamedObject`` run together, with one event set whenever any changes."""

    def __init__(self, objects: Mapping[str, NamedObject]) -> None:
        self.objects = dict(objects)
        self.changed = asyncio.Event()
        for obj in self.objects.values():
            obj.on_change = self.changed.set
        self._tasks: list[asyncio.Task[None]] = []

    def __getitem__(self, key: str) -> NamedObject:
        return self.objects[key]

    def start(self) -> None:
        if not self._tasks:
            self._tasks = [asyncio.create_task(o.run(), name=f"watch {o.path}")
                           for o in self.objects.values()]

    async def synced(self) -> None:
        await asyncio.gather(*(o.synced.wait() for o in self.objects.values()))

    async def stop(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def until_stop(stop: asyncio.Event, waited: Awaitable[Any],
                     timeout: float | None = None) -> None:  # noqa: ASYNC109
    """Wait for ``waited``, ``stop`` or ``timeout``, whichever comes first."""
    tasks = [asyncio.ensure_future(waited), asyncio.ensure_future(stop.wait())]
    try:
        await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
