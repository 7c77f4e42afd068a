"""The cached objects of one kind in one namespace, as a mapping by name: what the snapshots of
both controllers (LeaderWorkerSet, DisaggregatedSet) hold for "is this name taken, and by whom".
Its own module, so that neither controller imports the other to share it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from lws_operator.kube.cache import KindStore
from lws_operator.logic.objects.meta import name_of


class InNamespace(Mapping[str, dict[str, Any]]):
    """The cached objects of one kind in one namespace, by name, looked up on demand (a pass
    asks for a few names; copying the namespace's objects per step would cost more)."""

    def __init__(self, store: KindStore, namespace: str) -> None:
        self.store = store
        self.namespace = namespace

    def __getitem__(self, name: str) -> dict[str, Any]:
        found = self.store.get(self.namespace, name)
        if found is None:
            raise KeyError(name)
        return found

    def __iter__(self) -> Iterator[str]:
        return (name_of(o) for o in self.store.in_namespace(self.namespace))

    def __len__(self) -> int:
        return len(self.store.in_namespace(self.namespace))
