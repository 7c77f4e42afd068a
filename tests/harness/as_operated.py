"""Objects exactly as the running operator holds them, for tests of the logic that reads them.

The operator never sees a hand-made pod: a StatefulSet or Deployment creates it from the
template our builders wrote, the API server defaults it, our pod webhook mutates it, the scheduler
binds it, the kubelet (kwok) reports its status, and the watch cache trims it on the way in. A
builder tested on a hand-made full pod can pass while production, which only has the trimmed
one, gets another answer (found running upstream's TPU
samples: the cache dropped the containers that tell whether a leader
requests TPUs). So these helpers build every pod along that path, and hand it to the logic
through the cache's real store (``KindStore.upsert``), never through a copy of its trimming.

``Watched`` wraps a cached object so that every read of a key the cache dropped is recorded:
the guard that the logic never needs what the cache trims.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

from lws_operator.api.defaults import apply_defaults
from lws_operator.kube.cache import KindStore
from lws_operator.logic.mutation.pod import mutate_pod

NAMESPACE = "ns"
NODE = "tpu-node-000"
# The conditions a kubelet reports of a started pod, in its order.
KUBELET_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                      "PodScheduled")


def cached(kind: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """``obj`` as the operator's watch cache of ``kind`` stores it (its real store)."""
    store = KindStore(kind)
    store.upsert(obj)
    meta = obj.get("metadata") or {}
    out = store.get(str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    assert out is not None
    return out


def stored_lws(manifest: Mapping[str, Any], name: str = "sample",
               uid: str = "00000000-0000-4000-8000-00000000aaaa") -> dict[str, Any]:
    """A LeaderWorkerSet manifest as the API server stores it after our defaulting webhook,
    with the apiVersion and kind a pass adds to the cached object."""
    lws = apply_defaults(copy.deepcopy(dict(manifest)))
    lws["apiVersion"] = "leaderworkerset.x-k8s.io/v1"
    lws["kind"] = "LeaderWorkerSet"
    lws["metadata"] = {**(lws.get("metadata") or {}), "name": name, "namespace": NAMESPACE,
                       "uid": uid, "generation": 1, "resourceVersion": "100",
                       "creationTimestamp": "2026-01-01T00:00:00Z",
                       "managedFields": [{"manager": "kubectl", "operation": "Update"}]}
    return lws


def _api_defaults(spec: dict[str, Any]) -> None:
    """What the API server adds to a pod spec (a representative subset)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("serviceAccountName", "default")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("tolerations", [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
         "tolerationSeconds": 300}])
    spec.setdefault("volumes", []).append(
        {"name": "kube-api-access-x1y2z", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}})
    for kind in ("containers", "initContainers"):
        for container in spec.get(kind) or []:
            container.setdefault("imagePullPolicy", "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            resources = container.setdefault("resources", {})
            limits = resources.get("limits") or {}
            if limits:  # requests default to the limits
                resources["requests"] = {**limits, **(resources.get("requests") or {})}
            container.setdefault("volumeMounts", []).append(
                {"name": "kube-api-access-x1y2z", "mountPath": "/var/run/secrets"})


def created_pod(template: Mapping[str, Any], name: str, *, owner: Mapping[str, Any],
                service_name: str | None, uid: str, random_key: str = "f" * 40,
                scheduler_provider: str | None = None) -> dict[str, Any]:
    """The pod a StatefulSet (``service_name`` set: it names the pod's subdomain and host) or a
    Deployment creates from ``template``, as stored after API defaulting and our webhook."""
    pod: dict[str, Any] = copy.deepcopy(dict(template))
    meta = pod.setdefault("metadata", {})
    meta.update(name=name, namespace=NAMESPACE, uid=uid, resourceVersion="200",
                creationTimestamp="2026-01-01T00:00:01Z", ownerReferences=[{
                    "apiVersion": "apps/v1", "kind": owner.get("kind"),
                    "name": owner["metadata"]["name"],
                    "uid": owner["metadata"].get("uid", "owner-uid"), "controller": True,
                    "blockOwnerDeletion": True}])
    meta.setdefault("labels", {})
    meta.setdefault("annotations", {})
    pod["apiVersion"], pod["kind"] = "v1", "Pod"
    spec = pod.setdefault("spec", {})
    if service_name is not None:
        meta["labels"]["statefulset.kubernetes.io/pod-name"] = name
        spec["hostname"] = name
        spec["subdomain"] = service_name
    _api_defaults(spec)
    admitted = mutate_pod(pod, scheduler_provider=scheduler_provider,
                          incarnation=lambda: "bcdfg", random_key=lambda: random_key)
    admitted["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    return admitted


def running(pod: Mapping[str, Any], node: str = NODE) -> dict[str, Any]:
    """``pod`` ungated, bound to ``node`` and reported Running and Ready by the kubelet."""
    out = copy.deepcopy(dict(pod))
    out["spec"].pop("schedulingGates", None)
    out["spec"]["nodeName"] = node
    now = "2026-01-01T00:00:05Z"
    out["status"] = {
        "phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1", "startTime": now,
        # Every condition a kubelet reports of a started pod, as it reports them.
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": now}
                       for t in KUBELET_CONDITIONS],
        "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                               "started": True, "image": c.get("image", ""),
                               "state": {"running": {"startedAt": now}}}
                              for c in out["spec"].get("containers") or []],
    }
    return out


def env_of(pod: Mapping[str, Any]) -> list[list[tuple[str, str]]]:
    """Each container's environment as (name, value) pairs, in order."""
    return [[(e["name"], e.get("value", "")) for e in c.get("env") or []]
            for c in (pod.get("spec") or {}).get("containers") or []]


class Misses:
    """The paths of reads of keys a cached object lacks and the full object has (``paths``),
    and of every key read (``reads``)."""

    def __init__(self) -> None:
        self.paths: set[str] = set()
        self.reads: set[str] = set()


def _wrap(value: Any, full: Any, path: str, misses: Misses) -> Any:
    if isinstance(value, dict) and not isinstance(value, Watched):
        return Watched(value, full if isinstance(full, Mapping) else {}, path, misses)
    if isinstance(value, list) and not isinstance(value, WatchedList):
        return WatchedList(value, full if isinstance(full, list) else [], path, misses)
    return value


class Watched(dict[str, Any]):
    """A cached object (dict) that records a read of any key the cache dropped: present in the
    full object, absent here. Values read are wrapped in turn, so reads at any depth count."""

    def __init__(self, cached: Mapping[str, Any], full: Mapping[str, Any], path: str,
                 misses: Misses) -> None:
        super().__init__(cached)
        self._full, self._path, self._misses = full, path, misses

    def _read(self, key: Any) -> None:
        self._misses.reads.add(f"{self._path}.{key}")
        if not super().__contains__(key) and key in self._full:
            self._misses.paths.add(f"{self._path}.{key}")

    def _child(self, key: Any, value: Any) -> Any:
        return _wrap(value, self._full.get(key), f"{self._path}.{key}", self._misses)

    def __getitem__(self, key: Any) -> Any:
        self._read(key)
        return self._child(key, super().__getitem__(key))

    def get(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return self._child(key, super().get(key, default))

    def __contains__(self, key: Any) -> bool:
        self._read(key)
        return super().__contains__(key)

    def setdefault(self, key: Any, default: Any = None) -> Any:
        self._read(key)
        return self._child(key, super().setdefault(key, default))

    def pop(self, key: Any, *default: Any) -> Any:
        self._read(key)
        return super().pop(key, *default)

    def items(self) -> Iterator[tuple[str, Any]]:  # type: ignore[override]
        return ((k, self._child(k, v)) for k, v in super().items())

    def values(self) -> Iterator[Any]:  # type: ignore[override]
        return (self._child(k, v) for k, v in super().items())

    def __deepcopy__(self, memo: dict[int, Any]) -> Watched:
        return Watched(copy.deepcopy(dict(super().items()), memo), self._full, self._path,
                       self._misses)


class WatchedList(list[Any]):
    """A cached list whose dict elements are watched against the full list's, by position."""

    def __init__(self, cached: list[Any], full: list[Any], path: str, misses: Misses) -> None:
        super().__init__(cached)
        self._full, self._path, self._misses = full, path, misses

    def _child(self, index: int, value: Any) -> Any:
        return _wrap(value, self._full_item(index, value), f"{self._path}[{index}]",
                     self._misses)

    def _full_item(self, index: int, value: Any) -> Any:
        """The full list's item that ``value`` was cached from: the one at the same position,
        unless the cache kept only some items (conditions of some types,
        ``logic.reconcile.observed.Select``): then the full list's item of the same type."""
        if len(self) != len(self._full) and isinstance(value, Mapping) and "type" in value:
            kind = str(value["type"])  # a plain str: compared without being recorded
            return next((item for item in self._full
                         if isinstance(item, Mapping) and item.get("type") == kind), None)
        return self._full[index] if -len(self._full) <= index < len(self._full) else None

    def __getitem__(self, index: Any) -> Any:
        value = super().__getitem__(index)
        if isinstance(index, slice):
            return [self._child(i, v) for i, v in
                    zip(range(*index.indices(len(self))), value, strict=True)]
        return self._child(index, value)

    def __iter__(self) -> Iterator[Any]:
        return (self._child(i, v) for i, v in enumerate(super().__iter__()))


def watched(kind: str, full: Mapping[str, Any], misses: Misses, path: str = "") -> Watched:
    """``full`` as the cache of ``kind`` holds it, recording reads of what it dropped."""
    name = path or str((full.get("metadata") or {}).get("name"))
    return Watched(cached(kind, full), full, name, misses)
