"""Guard: what the watch cache keeps of each kind is what ``logic.reconcile.observed`` declares.

Only the kinds in ``CACHED_SPEC_SHAPES`` and ``CACHED_STATUS_SHAPES`` are trimmed, to their
declared shapes (the pods' are checked against every read of the logic in
``test_cached_pod_reads.py``); every other kind the
cache holds is kept whole but for ``metadata.managedFields``, which nothing in the operator
reads. A kind trimmed without a declaration, or a declaration the cache ignores, fails here.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

import lws_operator
from lws_operator.kube.cache import ClusterCache, lean
from lws_operator.logic.reconcile.observed import (
    CACHED_SPEC_SHAPES,
    CACHED_STATUS_SHAPES,
    POD_SPEC_SHAPE,
    POD_STATUS_SHAPE,
    project,
)


def full(kind: str) -> dict[str, Any]:
    """An object with a bit of everything: nested spec parts, status, managedFields."""
    return {
        "apiVersion": "v1", "kind": kind,
        "metadata": {"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                     "labels": {"a": "b"}, "annotations": {"c": "d"},
                     "ownerReferences": [{"uid": "o", "controller": True}],
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"replicas": 2, "template": {"spec": {"containers": [
                     {"name": "main", "image": "i", "env": [{"name": "E", "value": "v"}],
                     "resources": {"limits": {"google.com/tpu": 4, "cpu": "1"}}}]}},
                 "containers": [{"name": "main", "image": "i",
                                 "resources": {"limits": {"google.com/tpu": 4, "cpu": "1"}}}],
                 "nodeName": "n", "tolerations": [{"key": "k"}], "minMember": 3},
        "status": {"replicas": 2, "conditions": [{"type": "Ready", "status": "True"}]},
        "data": {"revision": 1},
    }


def without_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    del out["metadata"]["managedFields"]
    return out


def test_shapes_are_declared_for_cached_kinds_only() -> None:
    assert set(CACHED_SPEC_SHAPES) <= set(ClusterCache.KINDS)
    assert CACHED_SPEC_SHAPES["Pod"] is POD_SPEC_SHAPE
    assert set(CACHED_STATUS_SHAPES) <= set(ClusterCache.KINDS)
    assert CACHED_STATUS_SHAPES["Pod"] is POD_STATUS_SHAPE


@pytest.mark.parametrize("kind", ClusterCache.KINDS)
def test_the_cache_keeps_each_kind_as_declared(kind: str) -> None:
    obj = full(kind)
    cache = ClusterCache()
    cache[kind].upsert(obj)
    stored = cache[kind].get("ns", "x")
    expected = without_managed_fields(obj)
    shape = CACHED_SPEC_SHAPES.get(kind)
    if shape is not None:
        expected["spec"] = project(obj["spec"], shape)
        assert expected["spec"] != obj["spec"]  # the sample has something to trim
    status_shape = CACHED_STATUS_SHAPES.get(kind)
    if status_shape is not None:
        expected["status"] = project(obj["status"], status_shape)
        assert expected["status"] != obj["status"]
    assert stored == expected
    assert lean(obj, kind) == expected
    assert obj == full(kind)  # the event's object is left as it came


def test_nothing_in_the_operator_reads_managed_fields() -> None:
    """The one part every kind loses: no module but the cache (which drops it) names the key."""
    root = Path(lws_operator.__file__).parent
    readers = [str(p.relative_to(root)) for p in root.rglob("*.py")
               if any(f"{q}managedFields{q}" in p.read_text() for q in "\"'")]
    assert readers == ["kube/cache.py"]
