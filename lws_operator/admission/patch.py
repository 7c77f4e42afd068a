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

import orjson


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def same(a: Any, b: Any) -> bool:
    """JSON equality: like ``==`` but a bool never equals a number.

    Most of an admitted object is unchanged by its mutation, and walking those parts in Python
    was most of the pod webhook's own time. Two values that are JSON-equal are also ``==``
    (which runs in C), so ``!=`` settles most differences at once; two values whose JSON texts
    are the same bytes are JSON-equal, so that settles the unchanged parts, also in C. Only
    values ``==`` but written differently (a bool for a number, ``1`` for ``1.0``, keys in
    another order) are walked."""
    if isinstance(a, dict | list):
        if a != b:
            return False
        text = _text(a)
        if text is not None and text == _text(b):
            return True
        return _same(a, b)
    return _same(a, b)


def _text(value: Any) -> bytes | None:
    """The JSON text of ``value``; None when orjson cannot write it (an integer beyond 64
    bits)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return None


def _same(a: Any, b: Any) -> bool:
    """``same`` by walking both values."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(b, dict | list):
        return False
    return bool(a == b)


def diff(old: Any, new: Any, path: str = "") -> list[dict[str, Any]]:
    """Operations that turn ``old`` into ``new``; empty when they are equal."""
    if isinstance(old, dict) and isinstance(new, dict):
        if same(old, new):  # an unchanged part, settled in C
            return []
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
            elif (was := old[key]) is not value:  # a copy shares its scalars with the original
                ops += diff(was, value, f"{path}/{_escape(key)}")
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
