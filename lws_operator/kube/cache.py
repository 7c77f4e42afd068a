"""Watch caches: the operator's view of the cluster, fed by watch events, read by every pass.

A pass never LISTs: it reads the objects of one LeaderWorkerSet from here. Objects are indexed by
namespace and the ``leaderworkerset.sigs.k8s.io/name`` label (LeaderWorkerSets by their own
name), which is exactly the grouping a pass needs. The DisaggregatedSet controller keeps a cache
of its own, indexed by its owner (``ds_owner_key``): the index is a parameter of the cache.
``managedFields`` are dropped on the way in: they are the bulk of an object and nothing reads
them; a pod keeps only the parts of its spec and status that some decision reads, as the logic
declares them (``lean``); keys and short strings are interned (``shared``).

Events of one object UID arrive in order, but the answers to the operator's own writes are
stored beside them (``upsert`` from the executor), and a relisting's objects beside late events
(kopf, which once watched every kind, delivered different UIDs in separate streams): when a pod
is deleted and recreated under the same name (a StatefulSet replacing a leader), the old
incarnation's late MODIFIED or DELETED events can arrive after the new one's ADDED. A store
keyed by name alone would then hold the dead incarnation, or nothing, and a pass would build a
worker StatefulSet owned by a dead leader (which the garbage collector deletes at once) or
recreate a healthy group. So an event for another UID than the stored one only wins when its
resourceVersion is newer, and a DELETED event removes only the UID it names. resourceVersions
are compared as integers, as every etcd-backed API server issues them; one
that is not an integer falls back to "the latest event wins".

The same holds within one UID: a pass stores the answers of its own writes (an ungated Hash
leader, a group-ready condition, a status) so the next pass does not redo them, but that answer
can reach the cache after the watch events of later changes by others (the scheduler binding
the ungated leader, kwok making it Ready) when the process is short of CPU. Stored last, the
older answer replaced the newer object, no further event came, and the set stayed at one group
not ready for good (the bad-input fuzzing's stuck Hash sets). So an object never
replaces a stored one of the same UID with a newer resourceVersion, as client-go's mutation
cache decides with its integer resourceVersion comparator. Nor does an object come back once
its DELETED event has been seen: the answer of a write to it (the create of a worker
StatefulSet whose leader was deleted meanwhile, a foreground delete) can arrive after that
event, and stored then it was a zombie no event would ever remove (a load run's group stayed
without its worker StatefulSet, because the cache said it existed). The UIDs of deleted objects
are remembered for ``GONE_MEMORY`` seconds, far longer than any write takes to answer.

Each kind has a "synced" flag, set once its initial listing has been delivered; a pass must not
act on the absence of an object (create, scale down, write status) before the kinds it reads are
synced, or a cold cache would make it redo work that exists.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from lws_operator.api import disaggregated as ds_api
from lws_operator.api.constants import NAME_LABEL
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.reconcile.observed import observed_spec, observed_status
from lws_operator.logic.runtime.relisting import Held

_intern = sys.intern
Key = tuple[str, str]  # (namespace, name)
GONE_MEMORY = 600.0  # seconds a deleted object's UID is remembered (module docstring)
# Which owner an object of a kind belongs to (its index key), None for none.
Index = Callable[[str, Mapping[str, Any]], Key | None]


def owner_key(kind: str, obj: Mapping[str, Any]) -> Key | None:
    """The LeaderWorkerSet an object belongs to: itself for a LeaderWorkerSet, else its
    ``name`` label (None when it carries none)."""
    meta = meta_of(obj)
    namespace = str(meta.get("namespace") or "")
    if kind == "LeaderWorkerSet":
        return namespace, str(meta.get("name") or "")
    lws = (meta.get("labels") or {}).get(NAME_LABEL)
    return (namespace, str(lws)) if lws else None


def ds_owner_key(kind: str, obj: Mapping[str, Any]) -> Key | None:
    """The DisaggregatedSet an object belongs to: itself for a DisaggregatedSet, else the one its
    ``disaggregatedset.x-k8s.io/name`` label names, confirmed by a controller ownerReference to
    a DisaggregatedSet of that name (None otherwise). A hand-made object carrying the label, or
    a deleted namesake's child, then wakes no pass and is listed as nobody's; a pass still finds
    it by name (a foreign object at a child's name) and checks the owner's UID itself
    (``api.disaggregated.controlled_by``)."""
    meta = meta_of(obj)
    namespace = str(meta.get("namespace") or "")
    if kind == ds_api.KIND:
        return namespace, str(meta.get("name") or "")
    name = (meta.get("labels") or {}).get(ds_api.NAME_LABEL)
    if not name:
        return None
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True \
                and ref.get("kind") == ds_api.KIND and ref.get("name") == name \
                and str(ref.get("apiVersion") or "").startswith(f"{ds_api.GROUP}/"):
            return namespace, str(name)
    return None


# Strings up to this length are interned in cached objects (``shared``): names, labels,
# timestamps, condition types and states repeat across objects; longer ones (a revision's
# serialized templates, a message) seldom do.
SHARED_STRING_LENGTH = 64


def shared(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the JSON tree ``obj`` whose keys and short string values are interned, so
    every cached object holds one copy of each, not one per object.

    Each watch event is decoded on its own, so every cached object held its own copies of the
    same keys ("lastTransitionTime", "ownerReferences") and values ("True", the set's name, a
    timestamp): most of a cached pod's memory (docs/performance.md, "The watch cache").
    Dicts and lists are new, so the cached object shares no container with ``obj``; immutable
    leaves are shared."""
    out = {}
    for key, value in obj.items():
        kind = type(value)
        if kind is str:
            if len(value) <= SHARED_STRING_LENGTH:
                value = _intern(value)
        elif kind is dict:
            value = shared(value)
        elif kind is list:
            value = [shared(item) if type(item) is dict
                     else _intern(item) if type(item) is str
                     and len(item) <= SHARED_STRING_LENGTH else item
                     for item in value]
        elif kind not in _LEAVES and isinstance(value, Mapping):
            value = shared(value)
        out[_intern(key) if type(key) is str else key] = value
    return out


# The JSON leaves besides strings: no Mapping, and asking ``isinstance(value, Mapping)`` of each
# went through the ABC's ``__instancecheck__``, a Python call per number, boolean and null (a
# large share of ``shared``'s time on a pod, and visible in the delete phase's profile, where
# every pod is cached again for its deletionTimestamp; docs/performance.md).
_LEAVES: Final = frozenset({int, float, bool, type(None)})


def lean(obj: Mapping[str, Any], kind: str,
         before: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of an object of ``kind`` without ``metadata.managedFields``; a pod also
    without the parts of its spec and status no decision reads; its keys and short strings
    interned (``shared``).

    Which kinds are trimmed and what they keep is declared once, in the logic that reads them
    (``logic.reconcile.observed.CACHED_SPEC_SHAPES`` and ``CACHED_STATUS_SHAPES``, for pods
    ``POD_SPEC_SHAPE`` and ``POD_STATUS_SHAPE``): the decisions and
    this cache share the declaration, so they cannot drift apart (the cache once dropped the
    containers that tell whether a leader requests TPUs: found running upstream's TPU samples).
    The store's kind decides, not the object's ``kind`` field, which a watch event may lack.

    ``before``: the stored copy of the same object (its previous state); a top-level part the
    new state keeps equal (a terminating pod's spec and status, a pod's spec when only its
    status moved) is taken from it as it is, already interned, instead of interned anew: the
    delete phase cached every pod once more for its deletionTimestamp alone. Cached objects
    are replaced, never edited, so sharing a part with the previous state changes nothing a
    reader sees."""
    out = dict(obj)
    if isinstance(out.get("spec"), Mapping):
        out["spec"] = observed_spec(kind, out["spec"])
    if isinstance(out.get("status"), Mapping):
        out["status"] = observed_status(kind, out["status"])
    meta = dict(meta_of(obj))
    meta.pop("managedFields", None)
    out["metadata"] = meta
    if before is None:
        return shared(out)
    fresh = shared({field: value for field, value in out.items()
                    if before.get(field, _ABSENT) != value})
    return {_intern(field): fresh[field] if field in fresh else before[field] for field in out}


_ABSENT = object()


def cached_key(obj: Mapping[str, Any]) -> Key:
    """An object's (namespace, name)."""
    meta = meta_of(obj)
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def cached_uid(obj: Mapping[str, Any]) -> str:
    return str(meta_of(obj).get("uid") or "")


def cached_version(obj: Mapping[str, Any]) -> int | None:
    """An object's resourceVersion as an integer; None when it is not one."""
    text = str(meta_of(obj).get("resourceVersion") or "")
    return int(text) if text.isdigit() else None


def held(obj: Mapping[str, Any]) -> Held:
    """What a relisting compares of an object (``logic.runtime.relisting``)."""
    return Held(cached_key(obj), cached_uid(obj), cached_version(obj))


def _newer(stored: Mapping[str, Any], incoming: Mapping[str, Any]) -> bool:
    """Whether ``stored`` is newer than ``incoming``: another incarnation of the name, or the
    same one at a later resourceVersion (module docstring)."""
    if not cached_uid(incoming):
        return False
    mine, theirs = cached_version(stored), cached_version(incoming)
    return mine is not None and theirs is not None and mine > theirs


class KindStore:
    """Objects of one kind by (namespace, name), with an index by owner (``index``: the
    owning LeaderWorkerSet by default)."""

    def __init__(self, kind: str, clock: Callable[[], float] = time.monotonic,
                 index: Index = owner_key) -> None:
        self.kind = kind
        self._index = index
        self.synced = False
        self._objects: dict[Key, dict[str, Any]] = {}
        self._by_owner: dict[Key, set[Key]] = defaultdict(set)
        self._owner_of: dict[Key, Key] = {}
        self._clock = clock
        self._gone: set[str] = set()  # UIDs of deleted objects, never stored again
        self._gone_order: deque[tuple[float, str]] = deque()  # (when, uid), oldest first
        # When each owner's objects last changed (``changed``), for owners that have some.
        self._stamp = 0
        self._changed: dict[Key, int] = {}
        # Per owner: its objects' keys in name order, until one joins or leaves (``owned_by``
        # sorted them on every call, and most events change an object, not the membership).
        self._sorted: dict[Key, list[Key]] = {}

    def __len__(self) -> int:
        return len(self._objects)

    def upsert(self, obj: Mapping[str, Any]) -> Key | None:
        """Store ``obj`` unless a newer object of the name is stored (another incarnation, or
        a later version of this one); returns its owning LeaderWorkerSet's key either way (its
        owner still has news)."""
        meta = meta_of(obj)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        owner = self._index(self.kind, obj)
        stored = self._objects.get(key)
        if (stored is not None and _newer(stored, obj)) or cached_uid(obj) in self._gone:
            return owner
        if owner is not None and self._owner_of.get(key) == owner:
            # A new state of an object its owner holds already: the membership stays.
            self._objects[key] = lean(obj, self.kind, stored if stored is not None
                                      and cached_uid(stored) == cached_uid(obj) else None)
            self._stamp += 1
            self._changed[owner] = self._stamp
            return owner
        self._unindex(key)
        self._objects[key] = lean(obj, self.kind)
        if owner is not None:
            self._by_owner[owner].add(key)
            self._sorted.pop(owner, None)
            self._owner_of[key] = owner
            self._stamp += 1
            self._changed[owner] = self._stamp
        return owner

    def delete(self, obj: Mapping[str, Any], gone: bool = False) -> Key | None:
        """Forget ``obj`` if it is the stored incarnation; returns its owner's key. ``gone``:
        its DELETED event (not our own delete request, which a finalizer may hold up), so its
        UID is never stored again (module docstring)."""
        meta = meta_of(obj)
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        stored = self._objects.get(key)
        if stored is not None and cached_uid(stored) != cached_uid(obj) and cached_uid(obj):
            if gone:
                self._remember_gone(cached_uid(obj))
            return self._index(self.kind, obj)  # a late event of a replaced incarnation
        owner = self._owner_of.get(key) or self._index(self.kind, obj)
        self._unindex(key)
        self._objects.pop(key, None)
        if gone:
            self._remember_gone(cached_uid(obj) or (cached_uid(stored) if stored else ""))
        return owner

    def _remember_gone(self, uid: str) -> None:
        now = self._clock()
        while self._gone_order and self._gone_order[0][0] < now - GONE_MEMORY:
            self._gone.discard(self._gone_order.popleft()[1])
        if uid and uid not in self._gone:
            self._gone.add(uid)
            self._gone_order.append((now, uid))

    def _unindex(self, key: Key) -> None:
        owner = self._owner_of.pop(key, None)
        if owner is not None:
            self._stamp += 1
            self._changed[owner] = self._stamp
            self._sorted.pop(owner, None)
            members = self._by_owner.get(owner)
            if members is not None:
                members.discard(key)
                if not members:
                    del self._by_owner[owner]
                    del self._changed[owner]

    def owner(self, obj: Mapping[str, Any]) -> Key | None:
        """The key of ``obj``'s owner, by this store's index."""
        return self._index(self.kind, obj)

    def holds(self, obj: Mapping[str, Any]) -> bool:
        """Whether ``obj`` is stored as it is: the same UID at the same resourceVersion (a
        resourceVersion names one state of an object, so nothing in it can be new)."""
        meta = meta_of(obj)
        stored = self._objects.get((str(meta.get("namespace") or ""),
                                    str(meta.get("name") or "")))
        version = meta.get("resourceVersion")
        return stored is not None and bool(version) and cached_uid(stored) == cached_uid(obj) \
            and meta_of(stored).get("resourceVersion") == version

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get((namespace, name))

    def changed(self, owner: Key) -> int:
        """A number that differs from every earlier answer for ``owner`` whenever the objects
        ``owned_by`` returns have changed since (0: it has none), so a reader can keep what it
        derived from them until then (``controllers.leaderworkerset``)."""
        return self._changed.get(owner, 0)

    def owned_by(self, owner: Key) -> list[dict[str, Any]]:
        """Objects labelled with the LeaderWorkerSet ``owner``, in name order."""
        keys = self._sorted.get(owner)
        if keys is None:
            members = self._by_owner.get(owner)
            if not members:
                return []
            keys = self._sorted[owner] = sorted(members)
        objects = self._objects
        return [objects[k] for k in keys]

    def in_namespace(self, namespace: str) -> list[dict[str, Any]]:
        """Every object of the namespace, labelled or not (for kinds watched without a label
        selector, such as a parent controller's Workloads)."""
        return [obj for (ns, _), obj in sorted(self._objects.items()) if ns == namespace]

    def owners(self) -> Iterable[Key]:
        return list(self._by_owner)

    def objects(self) -> list[dict[str, Any]]:
        """Every stored object, in name order (a relisting compares them with the listing)."""
        return [obj for _, obj in sorted(self._objects.items())]


class ClusterCache:
    """One store per kind the controller reads (``kinds``; the LeaderWorkerSet controller's by
    default), each indexed by ``index``."""

    KINDS = ("LeaderWorkerSet", "StatefulSet", "Deployment", "Pod", "Service",
             "ControllerRevision", "PodGroup", "Workload", "VolcanoPodGroup")

    def __init__(self, kinds: Iterable[str] = KINDS, index: Index = owner_key) -> None:
        self.stores = {kind: KindStore(kind, index=index) for kind in kinds}
        # The last state of pods seen deleted, per LeaderWorkerSet: a pod may vanish without
        # ever being seen terminating, and its deletion can matter (a deleted worker recreates
        # its group). Kept until a pass has acted on them (``drop_tombstones``), so a pass that
        # fails does not lose the trigger, and a standby, whose cache sees the same DELETED
        # events, has them when it takes over.
        self._tombstones: dict[Key, list[dict[str, Any]]] = defaultdict(list)
        # The last state of LeaderWorkerSets seen deleted, until their objects are gone: cleaning
        # up after one (its pod termination policy) needs its spec after it has vanished.
        self._departed: dict[Key, dict[str, Any]] = {}

    def bury(self, owner: Key, pod: Mapping[str, Any]) -> None:
        """Keep the last state of a deleted pod for its owner's next pass, unless the owner is
        being deleted or gone: its passes only clean up and drop every tombstone unread
        (``controllers.leaderworkerset``), so a deleted set's pods cost no copy."""
        if self.departing(owner):
            return
        self._tombstones[owner].append(lean(pod, "Pod"))

    def departing(self, owner: Key) -> bool:
        """Whether the LeaderWorkerSet ``owner`` is cached as being deleted, or was seen
        deleted and is not cached again (a namesake created since is not departing)."""
        store = self.stores.get("LeaderWorkerSet")
        if store is None:
            return False
        lws = store.get(*owner)
        if lws is None:
            return owner in self._departed
        return bool(meta_of(lws).get("deletionTimestamp"))

    def take_tombstones(self, owner: Key) -> list[dict[str, Any]]:
        return self._tombstones.pop(owner, [])

    def tombstones(self, owner: Key) -> list[dict[str, Any]]:
        """The tombstones of ``owner``, left in place."""
        return list(self._tombstones.get(owner, ()))

    def drop_tombstones(self, owner: Key, uids: Iterable[str]) -> None:
        """Forget the tombstones of these pod UIDs (a pass acted on them, or they no longer
        trigger anything); tombstones buried since the pass read them stay."""
        gone = set(uids)
        kept = [t for t in self._tombstones.get(owner, ()) if cached_uid(t) not in gone]
        if kept:
            self._tombstones[owner] = kept
        else:
            self._tombstones.pop(owner, None)

    def depart(self, owner: Key, lws: Mapping[str, Any]) -> None:
        self._departed[owner] = lean(lws, "LeaderWorkerSet")

    def departed(self, owner: Key) -> dict[str, Any] | None:
        return self._departed.get(owner)

    def forget_departed(self, owner: Key) -> None:
        self._departed.pop(owner, None)

    def __getitem__(self, kind: str) -> KindStore:
        return self.stores[kind]

    @property
    def synced(self) -> bool:
        return all(store.synced for store in self.stores.values())
