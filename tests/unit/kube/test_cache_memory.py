"""What keeps the watch cache small beyond the trimming of pods (``test_cached_shapes.py``):
each cached object holds interned keys and short strings (``kube.cache.shared``), and shares
no dict or list with the decoded event it came from."""

from __future__ import annotations

import json
from typing import Any

from lws_operator.kube.cache import SHARED_STRING_LENGTH, KindStore, lean, shared


def statefulset(name: str) -> dict[str, Any]:
    """A StatefulSet (a kind the cache keeps whole) as one watch event decodes it: its own copy
    of every string."""
    return json.loads(json.dumps({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "labels": {"leaderworkerset.sigs.k8s.io/name": "sample"},
                     "managedFields": [{"manager": "kubelet"}]},
        "spec": {"nodeName": "node-1", "containers": [{"name": "main", "image": "app:1"}]},
        "status": {"phase": "Running", "message": "x" * (SHARED_STRING_LENGTH + 1),
                   "conditions": [{"type": "Ready", "status": "True"}],
                   "podIPs": [{"ip": "10.0.0.1"}], "hostIPs": ["10.1.0.1"]},
    }))


def keys_and_strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [k, *keys_and_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in keys_and_strings(v)]
    return [value] if isinstance(value, str) else []


def test_two_cached_objects_share_their_keys_and_short_strings() -> None:
    store = KindStore("StatefulSet")
    store.upsert(statefulset("a"))
    store.upsert(statefulset("b"))
    a, b = store.get("ns", "a"), store.get("ns", "b")
    assert a is not None
    assert b is not None
    pairs = list(zip(keys_and_strings(a), keys_and_strings(b), strict=True))
    same = [x for x, y in pairs if x == y]
    assert same
    assert all(x is y for x, y in pairs if x == y and len(x) <= SHARED_STRING_LENGTH)
    long = [(x, y) for x, y in pairs if len(x) > SHARED_STRING_LENGTH]
    assert long
    assert all(x is not y for x, y in long)


def test_a_cached_object_shares_no_container_with_its_event() -> None:
    event = statefulset("a")
    cached = lean(event, "StatefulSet")
    assert cached == {**event, "metadata": {k: v for k, v in event["metadata"].items()
                                            if k != "managedFields"}}
    event["status"]["conditions"][0]["status"] = "False"
    event["status"]["hostIPs"].append("10.1.0.2")
    event["metadata"]["labels"]["new"] = "label"
    assert cached["status"]["conditions"][0]["status"] == "True"
    assert cached["status"]["hostIPs"] == ["10.1.0.1"]
    assert "new" not in cached["metadata"]["labels"]


def test_shared_keeps_every_value() -> None:
    tree = {"a": [1, 2.5, None, True, "s", ["nested", {"k": "v"}]], "b": {"c": {}}, "d": []}
    assert shared(tree) == tree
