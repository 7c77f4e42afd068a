"""The JSON patch (RFC 6902) that turns an admitted object into its mutated form.

Mutating webhooks answer with a patch, while our pure functions return the whole mutated object;
this module bridges the two. The operations are ``jsonpatch``'s (paths escape ``~`` and ``/``,
as label keys such as ``leaderworkerset.sigs.k8s.io/name`` need; ``True`` and ``1`` differ; a
list that grew or shrank gets element operations, so prepending ``LWS_LEADER_ADDRESS`` to a
container's env adds one entry rather than replacing the list).

Most of an admitted object is unchanged by its mutation, and ``jsonpatch`` compares every value
of the two documents in Python, so ``diff`` first finds the parts that changed (``changed``),
comparing whole subtrees in C (``same``), and asks ``jsonpatch`` for the operations of each
changed part only, prefixed with the part's path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jsonpatch
import orjson

# One changed part: the path to it (keys and list indices) and its value before and after.
Part = tuple[list[str | int], Any, Any]


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


def changed(old: Any, new: Any, at: list[str | int] | None = None) -> Iterator[Part]:
    """The smallest parts in which ``new`` differs from ``old``: objects with the same keys and
    lists of the same length are descended into, member by member; anything else that differs
    (an object that gained or lost a key, a list that changed length, a scalar) is one part."""
    at = at or []
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() == new.keys():
        pairs: Iterator[tuple[str | int, Any, Any]] = ((k, old[k], new[k]) for k in old)
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        pairs = ((i, a, b) for i, (a, b) in enumerate(zip(old, new, strict=True)))
    else:
        if not same(old, new):
            yield at, old, new
        return
    for key, was, now in pairs:
        # a copy shares its unchanged values with the original: ``is`` settles them at once
        if was is not now and not same(was, now):
            yield from changed(was, now, [*at, key])


def diff(old: Any, new: Any) -> list[dict[str, Any]]:
    """Operations that turn ``old`` into ``new``; empty when they are equal."""
    ops: list[dict[str, Any]] = []
    for at, was, now in changed(old, new):
        prefix = jsonpatch.path_join(at)
        for op in jsonpatch.make_patch(was, now).patch:
            op["path"] = prefix + op["path"]
            if "from" in op:
                op["from"] = prefix + op["from"]
            ops.append(op)
    return ops
