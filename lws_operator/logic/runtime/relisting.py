"""What a relisting means for a watch cache: the informer's "replace the store" as a decision.

A watch that expired (410 Gone: the API server restarted, or its history moved past the watch's
resourceVersion) is followed by a LIST of the whole kind. That listing is the truth at its
resourceVersion: a cached object it lacks was deleted while no watch event could say so, and a
listed object cached at another state changed meanwhile. client-go's informers replace their
store with the listing and deliver the difference as deletions and updates; the watch layer
(``kube.watch``) does the same with the two answers here, and delivers them through the path
watch events take, so a deletion found this way is a deletion like any other (a pod's
tombstone, the owner woken, a deleted set's metrics removed by its next pass).

Identity is (namespace, name, UID): a name listed with another UID than the cached one is a
deleted incarnation and a new one, not an update. One exception to "the listing is the truth":
a cached object newer than the listing (a resourceVersion above the listing's) was stored after
the listing was taken, by the answer to one of the operator's own writes, and stays; its watch
event follows. A resourceVersion that is not an integer cannot be compared, so the listing
wins, as in client-go.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

Name = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Held:
    """One object as a cache or a listing holds it: its name, its UID and its
    resourceVersion (None when it is not an integer)."""

    key: Name
    uid: str
    version: int | None


def deleted(cached: Iterable[Held], listed: Iterable[Held], at: int | None) -> list[Held]:
    """The cached objects a complete listing at resourceVersion ``at`` proves deleted: not
    listed under their name and UID, and not newer than the listing (module docstring). In
    name order, so deliveries are reproducible."""
    present = {(entry.key, entry.uid) for entry in listed}
    return sorted((entry for entry in cached
                   if (entry.key, entry.uid) not in present
                   and not _newer(entry.version, at)),
                  key=lambda entry: (entry.key, entry.uid))


def stale(cached: Iterable[Held], listed: Iterable[Held]) -> list[Held]:
    """The listed objects the cache does not hold as they are (absent, another UID, another
    resourceVersion): each is delivered as an update. An object listed exactly as cached
    brings nothing and wakes no one. In listing order."""
    held = {(entry.key, entry.uid, entry.version) for entry in cached}
    return [entry for entry in listed
            if entry.version is None or (entry.key, entry.uid, entry.version) not in held]


def _newer(version: int | None, at: int | None) -> bool:
    return version is not None and at is not None and version > at
