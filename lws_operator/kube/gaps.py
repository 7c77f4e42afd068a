"""When to resync the watch caches: the gaps in kopf's watch streams, found without kopf's log.

A watch stream has gaps: when a watch expires (410 Gone, after an API server restart or when the
server's history no longer reaches the watch's resourceVersion), kopf lists the kind again and
watches on from there. A listing shows what exists, never what was deleted meanwhile, so every
cached object the new listing lacks must be found and dropped by a LIST of our own (the resync,
``kube.watch``). kopf's public API does not tell when it lists again: the objects of a
relisting reach the event handlers as events without a type, the end of the listing does not
(kopf keeps its ``LISTED`` mark and the server's BOOKMARK events to itself), and an empty
relisting reaches them not at all. Reading kopf's debug log for the expiry is no API. The
operator's own watches of the kinds it only caches (``kube.list_watch``) deliver a relisting
the same way, so the signals below hold for every kind.

So the caches are resynced, every kind at once, on three signals the operator gets anyway, at
no cost in requests while nothing goes wrong (and once when kopf's watchers start, after the
listing the caches were filled from):

* ``listed``: an event without a type, of any kind. What ends one watch's history ends the
  others': an API server restart expires every watch (its new watch cache starts at etcd's
  current revision), and a compaction only matters to a watch that was down, as they all were
  if the server was. Resyncing every kind covers the kinds whose relisting was empty, as long
  as one kind's was not; the LeaderWorkerSet watch has no label selector, so any set left in
  the cluster is enough.
* ``reconnected``: a request of the operator's own found the API server away (no answer, or
  502/503/504) and a later one was answered (``kube.client.Reachability``). The Lease is renewed
  or polled every retry period, so with leader election any outage longer than that is seen,
  even one after which every relisting is empty.
* ``leftovers``: a LeaderWorkerSet is created (an ADDED event, not a listing) while the cache
  still holds objects under its name: the children of a deleted set of the same name, whose
  deletion the cache missed, or has not yet seen. A pass must not take them for the new set's.

A resync is one LIST per kind the cache holds anything of, and drops only what that listing
proves deleted, so a signal that turns out unneeded costs those LISTs and changes nothing.

What none of them sees: a watch that expires on its own (not an API server restart: the
operator fell so far behind that the server dropped it and its history moved on), whose kind's
relisting is empty, while every other watch resumed and no request of ours failed. The objects
it missed stay cached until a resync or a restart; see the architecture doc.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from lws_operator.kube.metrics import WatchMetrics
from lws_operator.kube.workers import EXPECTED_ERRORS, describe_error

log = logging.getLogger(__name__)

# How long events without a type (of any kind) must pause before the caches are resynced: one
# LIST per kind per relisting rather than one per chunk of it.
RESYNC_SETTLE = 1.0
# A resync that fails (the API server went away again) is tried again after a delay that
# starts at RESYNC_SETTLE and doubles up to this.
RESYNC_RETRY_MAX = 30.0

STARTED = "started"
LISTED = "listed"
RECONNECTED = "reconnected"
LEFTOVERS = "leftovers"
REASONS = (STARTED, LISTED, RECONNECTED, LEFTOVERS)


class WatchGaps:
    """Collects the signals (module docstring) and runs ``resync`` once they settle, again
    after a failure until one succeeds: until then an object deleted while the watches were
    down stays cached (a worker StatefulSet the controller never recreates), and no further
    signal may come. Runs on the main loop."""

    def __init__(self, resync: Callable[[], Awaitable[None]], metrics: WatchMetrics, *,
                 settle: float = RESYNC_SETTLE, retry_max: float = RESYNC_RETRY_MAX) -> None:
        self.resync = resync
        self.metrics = metrics
        self.settle = settle
        self.retry_max = retry_max
        self._wanted = False
        self._counted = False  # a trigger is counted for the resync to come
        self._task: asyncio.Task[None] | None = None
        # kopf's initial listings (which follow our own) are not relistings: a kind first
        # listed before the first resync settled is listed for the first time.
        self._initial = True
        # The storage key ("namespace/name") of the last object listed, per kind listed yet.
        self._last_listed: dict[str, str] = {}
        for reason in REASONS:
            metrics.triggers.labels(reason)

    def started(self) -> None:
        """kopf's watchers start (its ``ready_flag``): they list every kind first, after the
        listing our caches were filled from, so what was deleted in between is found the same
        way, once their listings settle; a resync then is wanted even if every one is empty."""
        self.want(STARTED)

    def listed(self, kind: str, key: str) -> None:
        """An event without a type: ``kind`` is being listed, and this is the object at storage
        key ``key`` ("namespace/name"). After kopf's initial listings that means its watch
        expired, counted once per listing.

        A listing comes in chunks, and the pause between two chunks of a big one (50,000 pods
        on a busy machine) can outlast the resync's settling time, so time cannot tell a new
        listing from the next chunk of the same one. Order can: a chunked LIST returns objects
        in storage-key order (its continue token is the last key returned), so the next chunk
        goes on past the last key listed, and a new listing starts again at or before it."""
        last = self._last_listed.get(kind)
        self._last_listed[kind] = key
        if (last is None and not self._initial) or (last is not None and key <= last):
            self.metrics.relistings.labels(kind).inc()
            log.info("kopf lists %s again (its watch expired); resyncing the caches", kind)
        self.want(LISTED)

    def reconnected(self) -> None:
        """The API server answered again after a request of ours found it away."""
        log.info("the API server answers again; resyncing the caches")
        self.want(RECONNECTED)

    def leftovers(self, kind: str, namespace: str, name: str) -> None:
        """A LeaderWorkerSet was created while objects under its name are cached."""
        log.info("%s %s/%s created while objects under its name are cached; resyncing the "
                 "caches", kind, namespace, name)
        self.want(LEFTOVERS)

    def want(self, reason: str) -> None:
        """Resync once the signals settle (a running resync goes on; another follows it)."""
        if not self._counted:
            self.metrics.triggers.labels(reason).inc()
            self._counted = True
        self._wanted = True
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name="resync the watch caches")

    @property
    def pending(self) -> bool:
        """A resync is wanted or under way."""
        return self._task is not None and not self._task.done()

    async def _run(self) -> None:
        retry = self.settle
        while self._wanted:
            self._wanted = False
            await asyncio.sleep(self.settle)
            if self._wanted:
                continue  # still listing: wait for the end of it
            self._initial = False
            self._counted = False
            try:
                await self.resync()
            except EXPECTED_ERRORS as exc:  # the API server is away or overloaded
                log.warning("resyncing the caches failed (%s); retrying in %.0fs",
                            describe_error(exc), retry)
            except Exception:
                log.exception("resyncing the caches failed; retrying in %.0fs", retry)
            else:
                retry = self.settle
                continue
            self._wanted = True
            await asyncio.sleep(max(retry - self.settle, 0.0))  # the settling wait is the rest
            retry = min(retry * 2, self.retry_max)

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
