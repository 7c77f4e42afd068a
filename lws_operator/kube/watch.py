"""The watch layer: watches feed the caches and tell a controller what changed.

Every kind a controller caches, its own kind (the owner: LeaderWorkerSets, or DisaggregatedSets)
included, is listed and watched by a ``kube.list_watch.ListWatch`` on the main loop, with
informer semantics: each event updates the cache and calls the controller's
``changed(kind, type, owner, object)``, with which a controller enqueues the owner (the
LeaderWorkerSet controller: its work queue). The server-side label selectors keep unrelated
pods, StatefulSets and Services out of the process entirely. ``Watches`` is parameterised by
the watched kinds (``Watch``) and that callback, so a second controller watches its own kinds
and feeds its own queue.

Before the watches start, one chunked LIST per kind fills the caches and marks them synced
(``prime``): a pass must not act on a half-filled cache. The watches start from that
listing's resourceVersion, so no kind is listed twice. The controller then enqueues what it
owns once; after that only events wake a pass.

A watch stream has gaps: a watch expires (410 Gone: after an API server restart, or when the
server's history no longer reaches the watch's resourceVersion) and its kind is listed again.
The relisting replaces the kind's store, as client-go's informer does (``_replace``): a cached
object the listing lacks was deleted in the gap and is delivered as a DELETED event, through the
same path as the watch's own (a pod's tombstone, the owner woken, a departed set remembered for
its cleanup pass); a listed object cached at another state is delivered as an update. Which is
which is ``logic.runtime.relisting``'s decision. Before the deletions of a set's children are
delivered, the set itself is asked for, and delivered as deleted first if the server has it no
more (``_confirm_owners``): kinds relist in no order. No signal, guess or periodic LIST is
involved: every watch that expires relists, and every relisting is complete, empty ones
included.

kopf remains for what its semantics suffice for: the watches that only signal (``signal_on``,
a CustomResourceDefinition installed later), in a thread of its own and only when some signal
is wanted (``kube.signal_watch``, imported only then).

An event of an owner (a LeaderWorkerSet) that brings nothing new wakes no pass: when what the
cache keeps of it (``kube.cache.lean``: no managedFields) equals what it kept before but for
the resourceVersion, no decision can come out differently. That is, above all, the echo of the
status write that ends a pass, whose answer the executor stored already. Children's echoes
still wake a pass (joining the children's coalesced one): a pass may decide differently right
after its own writes, as upstream's does (the partition of a rollout's first pass, which created
the revision, is the next pass's to lower), and the watch event of the write is what brings
that pass.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry

from lws_operator.api.constants import GROUP, NAME_LABEL, PLURAL, VERSION
from lws_operator.kube.api_served import discovery_lists
from lws_operator.kube.cache import ClusterCache, Key, KindStore, cached_key, cached_uid, held
from lws_operator.kube.client import ApiException, KubeClient, is_status
from lws_operator.kube.list_watch import ListWatch
from lws_operator.kube.metrics import WatchMetrics
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.runtime import relisting

log = logging.getLogger(__name__)

# Objects of a relisting delivered in one step of the main loop (``Watches._replace``), so a
# relisting of 50,000 pods never holds the loop (and with it the Lease's renewals) up for long.
RELIST_BATCH = 500

# How many times, a second apart, the owner of children a relisting found deleted is asked for
# (``Watches._confirm_owners``) before their deletions are delivered without it.
CONFIRM_ATTEMPTS = 60
CONFIRM_DELAY = 1.0

# (kind, group, version, plural, list path, label selector)
Watch = tuple[str, str, str, str, str, str | None]
# What a controller is told of every event that changed what the cache holds: the kind, the
# event's type (None for a relisting's update), the key of the object's owner (namespace and
# LeaderWorkerSet name, the cache's ``Key``) and the object as the event brought it.
Changed = Callable[[str, str | None, Key, Mapping[str, Any]], None]
# (group, version, plural, field selector): a kind watched only to be told of its events (one
# object, say, selected by ``metadata.name=...``), never cached; and what is told: the event's
# type and the object.
Signal = tuple[str, str, str, str]
Signalled = Callable[[str | None, Mapping[str, Any]], None]

# The LeaderWorkerSet controller's kinds.
WATCHED: tuple[Watch, ...] = (
    ("LeaderWorkerSet", GROUP, VERSION, PLURAL, f"/apis/{GROUP}/{VERSION}/{PLURAL}", None),
    ("StatefulSet", "apps", "v1", "statefulsets", "/apis/apps/v1/statefulsets", NAME_LABEL),
    ("Deployment", "apps", "v1", "deployments", "/apis/apps/v1/deployments", NAME_LABEL),
    ("Pod", "", "v1", "pods", "/api/v1/pods", NAME_LABEL),
    ("Service", "", "v1", "services", "/api/v1/services", NAME_LABEL),
    ("ControllerRevision", "apps", "v1", "controllerrevisions", "/apis/apps/v1/controllerrevisions",
     NAME_LABEL),
)

# Watched only where the API server serves them (found by discovery at start): native gang
# scheduling's PodGroups (ours carry the name label) and Workloads (all of them: a parent
# controller's Workload, which LWS PodGroups may instantiate, carries no label of ours); and
# volcano's PodGroups when that provider is configured.
SCHEDULING_API = "/apis/scheduling.k8s.io/v1beta1"
VOLCANO_API = "/apis/scheduling.volcano.sh/v1beta1"
NATIVE_SCHEDULING: tuple[Watch, ...] = (
    ("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", f"{SCHEDULING_API}/podgroups",
     NAME_LABEL),
    ("Workload", "scheduling.k8s.io", "v1beta1", "workloads", f"{SCHEDULING_API}/workloads",
     None),
)
VOLCANO: tuple[Watch, ...] = (
    ("VolcanoPodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups",
     f"{VOLCANO_API}/podgroups", NAME_LABEL),
)


class Watches:
    """The watches of ``watched`` kinds into ``cache``, each event reported to ``changed``.

    ``owner_kind`` is the kind the other kinds' objects belong to (by the name label): a
    departed one is remembered for its cleanup pass, and its events that change nothing wake
    none."""

    def __init__(self, kube: KubeClient, cache: ClusterCache, registry: CollectorRegistry,
                 watched: Iterable[Watch], changed: Changed, *,
                 owner_kind: str = "LeaderWorkerSet", list_chunk_size: int = 500) -> None:
        self.kube = kube
        self.cache = cache
        self.changed = changed
        self.owner_kind = owner_kind
        self.list_chunk_size = list_chunk_size
        self.watched: list[Watch] = list(watched)
        self.signals: list[tuple[Signal, Signalled]] = []
        self._thread_stop = threading.Event()
        self.watch_metrics = WatchMetrics.for_registry(registry)
        # The resourceVersion of each kind's priming listing, where its watch starts.
        self._primed: dict[str, str | None] = {}
        # The watches of every cached kind (``kube.list_watch``), while they run.
        self.own: dict[str, ListWatch] = {}

    # ----------------------------------------------------------------------------- watching

    def _observe(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """Runs on the main loop: update the cache, tell the controller of the owner. A type
        of None is a relisting's update (``_replace``)."""
        store = self.cache[kind]
        if event_type is None and store.holds(body):
            # Listed again as cached: no news for its owner, and no second copy to build.
            if kind == self.owner_kind:
                self.watch_metrics.unchanged.labels(kind).inc()
            return
        if event_type == "DELETED":
            owner = store.delete(body, gone=True)
            if kind == "Pod" and owner is not None:
                self.cache.bury(owner, body)
            if kind == self.owner_kind and owner is not None:
                self.cache.depart(owner, body)
        else:
            key = cached_key(body)
            before = store.get(*key)
            owner = store.upsert(body)
            if kind == self.owner_kind and not news(before, store.get(*key)):
                self.watch_metrics.unchanged.labels(kind).inc()
                return
        if owner is not None and owner[1]:
            self.changed(kind, event_type, owner, body)

    async def _replace(self, kind: str, items: list[dict[str, Any]],
                       version: str | None) -> None:
        """A relisting of ``kind`` at resourceVersion ``version`` replaces what the cache
        holds of it (module docstring): each cached object it proves deleted is delivered as a
        DELETED event (its last cached state standing for the final one, which nobody saw),
        then each listed object the cache does not hold as it is, as an update. The loop runs
        other work every ``RELIST_BATCH`` deliveries."""
        store = self.cache[kind]
        self.watch_metrics.relistings.labels(kind).inc()
        cached = {held(obj): obj for obj in store.objects()}
        listed = {held(item): item for item in items}
        at = int(version) if version and version.isdigit() else None
        gone = relisting.deleted(cached, listed, at)
        if gone:
            log.info("%s: %d cached object(s) missing from the relisting (deleted while the "
                     "watch was down): %s", kind, len(gone),
                     ", ".join("/".join(entry.key) for entry in gone[:10]))
        if gone and kind != self.owner_kind:
            await self._confirm_owners(store, [cached[entry] for entry in gone])
        delivered = 0
        for entry in gone:
            self.watch_metrics.relisting_deletions.labels(kind).inc()
            self._observe(kind, "DELETED", cached[entry])
            delivered += 1
            if delivered % RELIST_BATCH == 0:
                await asyncio.sleep(0)
        for entry in relisting.stale(cached, listed):
            self._observe(kind, None, listed[entry])
            delivered += 1
            if delivered % RELIST_BATCH == 0:
                await asyncio.sleep(0)

    async def _confirm_owners(self, store: KindStore, objects: list[dict[str, Any]]) -> None:
        """Before a relisting delivers the deletions of children (``objects`` of ``store``'s
        kind), asks the API server for each owner the cache holds as live: one deleted in the
        same gap is delivered as deleted first, through ``_observe``, and a newer state of one
        as an update.

        The kinds relist one by one, in no order: after an API server restart, the children's
        relistings could come first, and the pass their deletions woke saw a set the cache
        still held, without its children, and created them again, owned by the deleted UID.
        Those orphans kept the set's departed copy cached (its StatefulSets were still there),
        and, where no garbage collector removes them soon, blocked a set of the same name created
        next: its leader StatefulSet's name was taken. An owner that cannot be read now is left
        as cached (its own watch will tell)."""
        owners = self.cache[self.owner_kind]
        spec = next((watch for watch in self.watched if watch[0] == self.owner_kind), None)
        if spec is None:
            return
        _kind, group, version, plural, _path, _selector = spec
        prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
        for key in sorted({owner for obj in objects if (owner := store.owner(obj)) is not None}):
            cached = owners.get(*key)
            if cached is None or meta_of(cached).get("deletionTimestamp"):
                continue  # departing already: its deletion was delivered
            found, live = await self._read(f"{prefix}/namespaces/{key[0]}/{plural}/{key[1]}")
            if not found:
                log.info("%s %s/%s could not be read before its children's deletions",
                         self.owner_kind, *key)
                continue
            current = owners.get(*key)
            if current is None or cached_uid(current) != cached_uid(cached) \
                    or meta_of(current).get("deletionTimestamp"):
                continue  # its own watch or relisting told us meanwhile
            if live is None or cached_uid(live) != cached_uid(current):
                log.info("%s %s/%s was deleted while the watch was down too",
                         self.owner_kind, *key)
                # A deletion found by a relisting, as its own kind's would have been.
                self.watch_metrics.relisting_deletions.labels(self.owner_kind).inc()
                self._observe(self.owner_kind, "DELETED", current)
            else:
                self._observe(self.owner_kind, None, live)

    async def _read(self, path: str) -> tuple[bool, dict[str, Any] | None]:
        """(True, the object at ``path`` or None if there is none), retried while the server
        is not ready to answer (right after an API server's restart it answers a custom
        resource with 503 or 429 for a while, the very moment the relistings come); (False,
        None) if it never answers."""
        for attempt in range(CONFIRM_ATTEMPTS):
            try:
                return True, await self.kube.get(path)
            except ApiException as exc:
                if not is_status(exc, 429, 500, 503, 504):
                    return False, None
                failure: Exception = exc
            except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                failure = exc
            if attempt < CONFIRM_ATTEMPTS - 1:
                log.debug("reading %s: %s, retrying", path, failure)
                await asyncio.sleep(CONFIRM_DELAY)
        return False, None

    async def _pages(self, path: str, selector: str | None) -> AsyncIterator[dict[str, Any]]:
        """The pages of one chunked LIST (``list_chunk_size`` items each), in order."""
        token: str | None = None
        while True:
            query = {"limit": str(self.list_chunk_size)}
            if selector:
                query["labelSelector"] = selector
            if token:
                query["continue"] = token
            page = await self._list(path, query)
            yield page
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return

    # ---------------------------------------------------------------------------- priming

    async def served(self, group_version_path: str, *plurals: str) -> bool:
        """Whether discovery lists every one of ``plurals`` under ``group_version_path``."""
        return await discovery_lists(self.kube, group_version_path, *plurals)

    def watch_also(self, watches: Iterable[Watch]) -> None:
        """Add optional kinds found served by discovery (before :meth:`discovered`)."""
        self.watched.extend(watches)

    def signal_on(self, signal: Signal, told: Signalled) -> None:
        """Tell ``told`` (on the main loop) of every event of the objects ``signal`` selects,
        from kopf's listing on; nothing is cached (before :meth:`discovered`). For a fact the
        operator must notice without asking again and again (a CRD installed later)."""
        self.signals.append((signal, told))

    def discovered(self) -> None:
        """Discovery is done: the cached kinds not watched stay empty (and synced)."""
        watched = {w[0] for w in self.watched}
        for kind in self.cache.stores:
            if kind not in watched:
                self.cache[kind].synced = True

    async def _list(self, path: str, query: dict[str, str], attempts: int = 30
                    ) -> dict[str, Any]:
        """One LIST page, retried while the server answers that it is not ready for it yet
        (429 "storage is (re)initializing" right after a CRD is established, 5xx): starting
        up must not fail on a transient answer."""
        for attempt in range(attempts):
            try:
                return await self.kube.request("GET", path, query=query)
            except ApiException as exc:
                if not is_status(exc, 429, 500, 503, 504) or attempt == attempts - 1:
                    raise
                log.info("listing %s: %s, retrying", path, exc.reason)
                await asyncio.sleep(1.0)
        raise AssertionError("unreachable")

    async def prime(self) -> None:
        """Fill every cache with one chunked LIST per kind and mark it synced."""
        begin = time.monotonic()
        for kind, _group, _version, _plural, path, selector in self.watched:
            first = True
            async for page in self._pages(path, selector):
                if first:
                    self._primed[kind] = str((page.get("metadata") or {}).get(
                        "resourceVersion") or "") or None
                    first = False
                for item in page.get("items") or []:
                    # List items carry no apiVersion/kind; watch events do. Cached objects must
                    # look the same either way (a pass compares them with what it would write).
                    item.setdefault("apiVersion", page.get("apiVersion"))
                    item.setdefault("kind", kind)
                    self.cache[kind].upsert(item)
            self.cache[kind].synced = True
        log.info("%s caches synced: %s in %.1fs", self.owner_kind,
                 ", ".join(f"{len(self.cache[w[0]])} {w[0]}" for w in self.watched),
                 time.monotonic() - begin)

    # ---------------------------------------------------------------------------- running

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[asyncio.Future[None]]:
        """Run the watches while the block runs: every cached kind's on this loop
        (``kube.list_watch``), kopf's signal watches, if any, in their thread. Yields a future
        that is done only if one of them ended on its own (an error: kopf stopped, or a watch
        failed unexpectedly). On exit every watch is stopped (``halt``, which the block may
        call earlier) and awaited."""
        self._thread_stop = threading.Event()
        self.own = {}
        for kind, _group, _version, _plural, path, selector in self.watched:
            own = ListWatch(self.kube, kind, path, selector, self._observe, self._replace,
                            chunk_size=self.list_chunk_size)
            own.resume(self._primed.get(kind))
            self.own[kind] = own
        watching = asyncio.ensure_future(self._watch_all())
        try:
            yield watching
        finally:
            self.halt()
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)

    async def _watch_all(self) -> None:
        """Our watches and kopf's thread (only with signals to watch), until one of them ends
        (kopf when told to stop, or any of them failing) or this is cancelled; the others are
        then stopped too, kopf's thread awaited."""
        lists = [asyncio.create_task(own.run(), name=f"watch {kind}")
                 for kind, own in self.own.items()]
        tasks: list[asyncio.Future[None]] = list(lists)
        if self.signals:
            from lws_operator.kube import signal_watch  # kopf, only now (its module docstring)

            tasks.append(signal_watch.run_in_thread(self.kube, self.signals,
                                                    self.list_chunk_size, self._thread_stop))
        try:
            if not tasks:
                await asyncio.Event().wait()  # nothing to watch: until cancelled
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()
        finally:
            self._thread_stop.set()
            for task in lists:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    def current(self, *kinds: str) -> bool:
        """Whether the watch of each of ``kinds`` is open now. While one is not (a gap, a
        relisting) its cache may lag the others': a pod's deletion before its StatefulSet's."""
        return all(own.watching.is_set() for kind, own in self.own.items() if kind in kinds)

    def halt(self) -> None:
        """Tell kopf's thread to stop (it may take a moment: :meth:`running` awaits it; our
        own watches are cancelled there)."""
        self._thread_stop.set()


def news(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> bool:
    """Whether an event changed what the cache holds of an object (``before`` and ``after``
    the stored projections around it): stored anew, or different in anything but the
    resourceVersion (module docstring). An event that was not stored (older than the stored
    object, or of a deleted one) brings nothing."""
    if after is before:
        return False
    if before is None or after is None:
        return True
    if len(before) != len(after):
        return True
    for field, value in after.items():
        if field == "metadata":
            continue
        if before.get(field, _ABSENT) != value:
            return True
    meta_before, meta_after = before.get("metadata") or {}, after.get("metadata") or {}
    if len(meta_before) != len(meta_after):
        return True
    return any(name != "resourceVersion" and meta_before.get(name, _ABSENT) != value
               for name, value in meta_after.items())


_ABSENT = object()
