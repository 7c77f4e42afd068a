"""One kind, listed and then watched on the main loop, each event handed straight to the cache.

kopf, which once watched these kinds, watches in a thread of its own and runs every event
through its machinery (a body wrapper, causes, a per-object worker task, handler invocation)
before a handler sees it; then the event crossed to the main loop. For pods above all that was
most of the controller's CPU in the benchmark: per pod event, kopf's processing and its
standard-library JSON decoding cost several times what caching the object does. And after a
watch expired, kopf's relisting reached handlers as plain events, without its end or an empty
listing ever showing, so nothing could tell what the listing lacked. ``ListWatch`` is the
informer's list-and-watch: the stream's lines are decoded with orjson and each event goes to
the watch layer's ``observe`` at once, on the loop where the caches live, so nothing crosses a
thread.

It is the only watch of every kind a controller caches, its own kind (LeaderWorkerSets,
DisaggregatedSets) included:

* it watches from the resourceVersion of the listing the caches were primed from (``resume``),
  so no second listing of the kind follows the operator's own at start;
* a stream the server ends (``timeoutSeconds``, or a dropped connection) is resumed from the
  last resourceVersion seen, BOOKMARK events included: the server then either sends every event
  since, deletions included, or answers that the history is gone (410);
* a watch that expired (410 Gone, as an ERROR event or as the answer; or 504, a resourceVersion
  newer than the server has) is listed again, chunk by chunk, and the whole listing goes to
  ``replace`` at once, with its resourceVersion: the watch layer replaces the kind's store with
  it, as an informer does, and delivers what the listing lacks as deletions
  (``logic.runtime.relisting``). Only a complete listing can prove a deletion, so nothing of it is
  delivered before its last chunk; an empty listing proves every cached object gone;
* it takes the loop in slices (``SLICE``), as kopf's thread once took the interpreter: the events
  one read brings are cached one after another until the watch has spent its slice, then
  whatever else is ready runs (a pass's next step, another kind's events) before its next ones;
* its requests are not the controller's: the stream is not counted among the operator's API
  requests, nor is it held to the operator's client-side rate limit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from lws_operator.kube.client import ApiException, KubeClient, is_status, loads

log = logging.getLogger(__name__)

# Seconds after which the API server ends a watch request (then it is resumed where it ended),
# and the longest silence tolerated on one: a bookmark comes about every minute, so a longer
# silence is a connection that died without telling us.
SERVER_TIMEOUT = 300
READ_TIMEOUT = SERVER_TIMEOUT + 60
# Backoff between failed attempts (the API server away, a refused request).
BACKOFF_FIRST = 0.5
BACKOFF_MAX = 30.0

# The longest one watch runs its events on the loop before letting other work run (a pass's
# next step, another kind's events, a Lease renewal): one read brings every event that has
# arrived (``kube.client.lines_of``), hundreds of pods' under load, which cached in one step of
# the loop held every pass up. About what a
# turn of the loop's passes takes under load, so that a busy watch and the passes share the loop
# about evenly, as kopf's watch thread and the main loop once shared the interpreter.
SLICE = 0.02
# A clock for the slice: seconds, monotonic.
Clock = Callable[[], float]

# What the caches are told of an event: the kind, its type (ADDED, MODIFIED, DELETED) and the
# object as decoded.
Observe = Callable[[str, str | None, dict[str, Any]], None]
# What the caches are told of a relisting: the kind, every object listed, and the listing's
# resourceVersion (None if the server gave none).
Replace = Callable[[str, list[dict[str, Any]], str | None], Awaitable[None]]


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


def event_of(event: dict[str, Any]) -> tuple[str | None, dict[str, Any], str | None]:
    """A watch event's type, object and resourceVersion (None when it carries none). An ERROR
    event is raised: ``Expired`` for 410 Gone (list again), an ``ApiException`` for any other,
    so every watch of ours ends on the same errors."""
    kind, obj = event.get("type"), event.get("object") or {}
    if kind == "ERROR":
        if obj.get("code") == 410:
            raise Expired(obj.get("message"))
        raise ApiException(status=obj.get("code") or 500, reason=obj.get("reason"),
                           body=json.dumps(obj))
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return kind, obj, str(version) if version else None


class ListWatch:
    """``kind``'s objects at ``path`` (a collection), optionally with a label ``selector``,
    listed and watched until cancelled; each event goes to ``observe``, each relisting to
    ``replace``."""

    def __init__(self, kube: KubeClient, kind: str, path: str, selector: str | None,
                 observe: Observe, replace: Replace, *, chunk_size: int = 500,
                 server_timeout: int = SERVER_TIMEOUT, slice_seconds: float = SLICE,
                 clock: Clock = time.perf_counter) -> None:
        # The operator's ApiClient (its credentials, TLS and connection pool), without its
        # counters and rate limit (the module docstring).
        self.kube = KubeClient(kube.api, limiter=None, metrics=None)
        self.kind = kind
        self.path = path
        self.selector = selector
        self.observe = observe
        self.replace = replace
        self.chunk_size = chunk_size
        self.server_timeout = server_timeout
        self.slice = slice_seconds
        self.clock = clock
        self.version: str | None = None  # where the watch resumes; None: list first
        self.lists = 0  # listings made (not the priming one)
        self.expired = 0  # watches found expired (410 Gone), each followed by a listing
        self.watching = asyncio.Event()  # set while a watch request is open

    def resume(self, version: str | None) -> None:
        """Watch from ``version`` (the listing the cache was primed from), not list first."""
        self.version = version or None

    def _query(self) -> dict[str, str]:
        return {"labelSelector": self.selector} if self.selector else {}

    async def run(self) -> None:
        """List if there is no resourceVersion to resume from, then watch; forever. Failures
        are logged and retried with backoff; only an expired watch is listed again."""
        backoff = BACKOFF_FIRST
        loop = asyncio.get_running_loop()
        while True:
            try:
                if self.version is None:
                    await self._list()
                started = loop.time()
                await self._watch()
                # The server ended the stream: resume at once, unless streams end as soon as
                # they start (a proxy cutting them), which must not spin.
                if loop.time() - started > BACKOFF_MAX:
                    backoff = BACKOFF_FIRST
                    continue
            except Expired:
                log.info("the watch of %s expired; listing it again", self.kind)
                self.expired += 1
                self.version = None
                backoff = BACKOFF_FIRST
                continue
            except ApiException as exc:
                if is_status(exc, 410, 504):
                    # Expired, or newer than the server has (504 "Too large resource version":
                    # an API server behind the one that answered before): list again, as
                    # client-go's reflector does for both.
                    self.version = None
                    if is_status(exc, 410):
                        log.info("the watch of %s expired; listing it again", self.kind)
                        self.expired += 1
                        continue
                log.warning("watching %s failed: %s %s", self.kind, exc.status, exc.reason)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                log.warning("watching %s failed: %s", self.kind, exc or type(exc).__name__)
            finally:
                self.watching.clear()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def _list(self) -> None:
        """A chunked LIST, handed whole to ``replace`` (module docstring); the watch resumes
        from its resourceVersion. A continue token that expired meanwhile answers 410, and the
        listing starts over."""
        token: str | None = None
        version: str | None = None
        items: list[dict[str, Any]] = []
        while True:
            query = {**self._query(), "limit": str(self.chunk_size)}
            if token:
                query["continue"] = token
            page = loads(await self.kube.raw("GET", self.path, query=query,
                                             accept="application/json", timeout=60.0))
            meta = page.get("metadata") or {}
            if version is None:
                version = str(meta.get("resourceVersion") or "") or None
            for item in page.get("items") or []:
                # A listing's items carry no apiVersion and kind; watch events do.
                item.setdefault("apiVersion", page.get("apiVersion"))
                item.setdefault("kind", self.kind)
                items.append(item)
            token = meta.get("continue") or None
            if not token:
                break
            await asyncio.sleep(0)  # a long listing lets the loop run between its pages
        self.lists += 1
        await self.replace(self.kind, items, version)
        self.version = version

    async def _watch(self) -> None:
        query = {**self._query(), "watch": "true", "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(self.server_timeout)}
        if self.version:
            query["resourceVersion"] = self.version
        async with self.kube.stream(self.path, query=query, read_timeout=READ_TIMEOUT) as lines:
            self.watching.set()
            spent = 0.0  # seconds of the loop this watch has taken since it last yielded
            async for line in lines:
                if not line.strip():
                    continue
                began = self.clock()
                self._event(loads(line))
                spent += self.clock() - began
                if spent >= self.slice:
                    # Its slice is used up (``SLICE``): whatever else is ready runs first.
                    await asyncio.sleep(0)
                    spent = 0.0

    def _event(self, event: dict[str, Any]) -> None:
        kind, obj, version = event_of(event)
        if version:
            self.version = version
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.observe(self.kind, kind, obj)

