"""Whether a desired object is already in place, so a pass that changes nothing writes nothing.

The desired object must be contained in the live one (the server adds defaults and status, so
equality would never hold), and resource quantities must have the same value, not the same text
(the server stores them in canonical form).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.logic.objects.quantity import quantity_unit, same_quantity


def contains(desired: Any, live: Any) -> bool:
    """True if every field of ``desired`` has the same value in ``live``.

    Maps may have extra keys in ``live`` (server defaults); lists must have the same length and
    contain each other element-wise (their order is meaningful in Kubernetes objects).
    """
    return first_difference(desired, live) is None


def first_difference(desired: Any, live: Any, path: str = "") -> str | None:
    """The path of the first field of ``desired`` that ``live`` lacks or holds differently
    (``.`` for the whole object), or None when ``live`` contains ``desired``.

    Resource quantities are compared by value (``logic.objects.quantity``): the server stores them
    in canonical form (``4`` as ``"4"``, ``"1024Mi"`` as ``"1Gi"``), the desired object holds the
    template's values as written."""
    return _difference(desired, live, path, ())


def _difference(desired: Any, live: Any, path: str, keys: tuple[str, ...]) -> str | None:
    if isinstance(desired, Mapping):
        return _map_difference(desired, live, path, keys)
    if isinstance(desired, list):
        return _list_difference(desired, live, path, keys)
    unit = quantity_unit(keys)
    if unit is not None:
        return None if same_quantity(desired, live, unit) else path or "."
    return None if desired == live else path or "."


def _map_difference(desired: Mapping[str, Any], live: Any, path: str,
                    keys: tuple[str, ...]) -> str | None:
    """``_difference`` of a map: every key of ``desired`` but those holding None, a key
    ``live`` lacks being a difference unless the server may drop its value."""
    if not isinstance(live, Mapping):
        return path or "."
    for key, value in desired.items():
        if value is None:
            continue
        if key not in live:
            if _omitted_when_empty(value):
                continue
            return f"{path}.{key}"
        found = _difference(value, live[key], f"{path}.{key}", (*keys, str(key)))
        if found is not None:
            return found
    return None


def _list_difference(desired: list[Any], live: Any, path: str,
                     keys: tuple[str, ...]) -> str | None:
    """``_difference`` of a list: the same length, element by element."""
    if not isinstance(live, list) or len(desired) != len(live):
        return path or "."
    for i, (d, x) in enumerate(zip(desired, live, strict=True)):
        found = _difference(d, x, f"{path}[{i}]", keys)
        if found is not None:
            return found
    return None


def _omitted_when_empty(value: Any) -> bool:
    """Whether the API server may drop ``value`` from what it stores: an empty string, list or
    map, or false, in an ``omitempty`` field (a container's ``args: []``, an env var's
    ``value: ""``). Comparing it with the missing key as a difference made every pass re-apply
    the leader StatefulSet or Deployment of a set whose template held one (found by the
    bad-input fuzzing)."""
    return value is False or (isinstance(value, (str, list, Mapping)) and len(value) == 0)
