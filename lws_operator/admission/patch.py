"""The JSON patch (RFC 6902) that turns an admitted object into its mutated form.

Mutating webhooks answer with a patch, while our pure functions return the whole mutated object;
this module bridges the two. It is written here rather than taken from a library because the
rules the API server cares about are few and a dependency for them is not worth it:

* paths escape ``~`` and ``/`` (label keys such as ``leaderworkerset.sigs.k8s.io/name`` contain
  slashes);
* ``True`` and ``1`` differ (Python's ``==`` says they are equal);
* lists of equal length are diffed element by element, so adding an env var to one container
  touches only that container; a list that only grew gets ``add`` operations; any other list
  change replaces the list (prepending ``LWS_LEADER_ADDRESS`` does that, as upstream's own
  patch does in effect).
"""

from __future__ import annotations

from typing import Any


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def same(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but a bool never equals a number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(
            same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(b, dict | list):
        return False
    return bool(a == b)


def diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Operations that turn ``old`` into ``new``; empty when they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            sub = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": sub, "value": value})
            else:
                ops += diff(old[key], value, sub)
        return ops
    if isinstance(old, list) and isinstance(new, list):
        if same(old, new):
            return []
        if len(old) == len(new):
            ops = []
            for i, (a, b) in enumerate(zip(old, new, strict=True)):
                ops += diff(a, b, f"{path}/{i}")
            return ops
        if len(new) > len(old) and same(old, new[: len(old)]):
            return [{"op": "add", "path": f"{path}/{i}", "value": new[i]}
                    for i in range(len(old), len(new))]
        return [{"op": "replace", "path": path, "value": new}]
    if same(old, new):
        return []
    return [{"op": "replace", "path": path, "value": new}]
