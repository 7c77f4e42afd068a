"""One kind, listed and then watched on the main loop, each event handed straight to the cache.

kopf watches a kind in a thread of its own and runs every event through its machinery (a body
wrapper, causes, a per-object worker task, handler invocation) before our handler sees it; then
the event crosses to the main loop. For the kinds the operator only caches (pods above all,
then StatefulSets, Services, ControllerRevisions) that was most of the controller's CPU in the
benchmark: per pod event, kopf's processing and its standard-library JSON decoding cost several
times what caching the object does. ``ListWatch`` is the informer's list-and-watch without
that: the stream's lines are decoded with orjson and each event goes to the watch layer's
``observe`` at once, on the loop where the caches live, so nothing crosses a thread.

It behaves as kopf's watch did towards the rest of the operator (``kube.watch``, ``kube.gaps``):

* it watches from the resourceVersion of the listing the caches were primed from (``resume``),
  so no second listing of the kind follows the operator's own at start;
* a stream the server ends (``timeoutSeconds``, or a dropped connection) is resumed from the
  last resourceVersion seen, BOOKMARK events included, so resuming misses nothing;
* a watch that expired (410 Gone, as an ERROR event or as the answer; or 504, a resourceVersion
  newer than the server has) is listed again, and the listing's objects reach ``observe`` as
  events without a type, exactly as kopf's relisting did: ``kube.gaps`` takes them as the
  signal to resync every kind, and an empty relisting signals nothing (the case the
  architecture doc leaves open, by choice);
* it takes the loop in slices (``SLICE``), as kopf's thread took the interpreter: the events
  one read brings are cached one after another until the watch has spent its slice, then
  whatever else is ready runs (a pass's next step, another kind's events) before its next ones;
* its requests are not the controller's: like kopf's session, the stream is neither counted
  among the operator's API requests, nor held to its client-side rate limit, nor reported to
  its ``Reachability`` (which stays the signal of the operator's own requests).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

import aiohttp

from lws_operator.kube.client import (
    WATCH_READ_BUFFER,
    ApiException,
    KubeClient,
    Reachability,
    is_status,
    loads,
)

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
# next step, another kind's events, a Lease renewal): one read can bring hundreds of pod events
# (``WATCH_READ_BUFFER``), which cached in one step of the loop held every pass up. About what a
# turn of the loop's passes takes under load, so that a busy watch and the passes share the loop
# about evenly, as kopf's watch thread and the main loop shared the interpreter.
SLICE = 0.02
# A clock for the slice: seconds, monotonic.
Clock = Callable[[], float]

# What the caches are told of an event: the kind, its type (None for a listing's object) and
# the object as decoded.
Observe = Callable[[str, str | None, dict[str, Any]], None]


class Expired(Exception):
    """The watch's resourceVersion is too old (410 Gone): list again."""


class ListWatch:
    """``kind``'s objects at ``path`` (a collection), optionally with a label ``selector``,
    listed and watched until cancelled; each event goes to ``observe``."""

    def __init__(self, kube: KubeClient, kind: str, path: str, selector: str | None,
                 observe: Observe, *, chunk_size: int = 500,
                 server_timeout: int = SERVER_TIMEOUT, slice_seconds: float = SLICE,
                 clock: Clock = time.perf_counter) -> None:
        # The operator's ApiClient (its credentials, TLS and connection pool), without its
        # counters, rate limit and reachability (the module docstring).
        self.kube = KubeClient(kube.api, limiter=None, metrics=None,
                               reachability=Reachability())
        self.kind = kind
        self.path = path
        self.selector = selector
        self.observe = observe
        self.chunk_size = chunk_size
        self.server_timeout = server_timeout
        self.slice = slice_seconds
        self.clock = clock
        self.version: str | None = None  # where the watch resumes; None: list first
        self.lists = 0  # listings made (not the priming one)
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
                log.debug("the watch of %s expired; listing again", self.kind)
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
                        continue
                log.warning("watching %s failed: %s %s", self.kind, exc.status, exc.reason)
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                log.warning("watching %s failed: %s", self.kind, exc or type(exc).__name__)
            finally:
                self.watching.clear()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def _list(self) -> None:
        """A chunked LIST whose objects reach ``observe`` as events without a type (kopf's
        convention for a listing, which ``kube.gaps`` reads); the watch resumes from its
        resourceVersion."""
        token: str | None = None
        version: str | None = None
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
                self.observe(self.kind, None, item)
            token = meta.get("continue") or None
            if not token:
                break
            await asyncio.sleep(0)  # a long listing lets the loop run between its pages
        self.lists += 1
        self.version = version

    async def _watch(self) -> None:
        query = {**self._query(), "watch": "true", "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(self.server_timeout)}
        if self.version:
            query["resourceVersion"] = self.version
        async with self.kube.stream(self.path, query=query, read_timeout=READ_TIMEOUT,
                                    read_size=WATCH_READ_BUFFER) as lines:
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
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Expired(obj.get("message"))
            raise ApiException(status=obj.get("code") or 500, reason=obj.get("reason"),
                               body=json.dumps(obj))
        version = (obj.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = str(version)
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self.observe(self.kind, kind, obj)

