"""The write of a ControllerRevision's number and annotations (``logic.identity.history``),
shared by the revision step and the status step.

Its ``data`` is immutable, and the API server compares it byte for byte. Revisions this operator
created hold the bytes its client wrote (JSON with spaces), which only a PUT of the same object
sends again as they were; a patch re-encodes them compact and is refused (422). Revisions a Go
client created (the upstream controller's) are compact already: a patch keeps them and a PUT,
encoded by this client, is refused. So the write is a PUT of the cached object with the change
merged in, guarded by its resourceVersion, falling back to the merge patch itself on a 422.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.reconcile.plan import GONE_OR_CHANGED_SKIP, Common, Patch, Update, apps


def apply_merge_patch(obj: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` merged into ``obj``, in place, and ``obj`` (RFC 7386: null removes, maps
    merge, anything else replaces)."""
    for key, value in patch.items():
        if value is None:
            obj.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(obj.get(key), dict):
            obj[key] = apply_merge_patch(obj[key], value)
        else:
            obj[key] = copy.deepcopy(value)
    return obj


def revision_update(namespace: str, revision: Mapping[str, Any],
                    patch: Mapping[str, Any]) -> Update:
    """The write of merge patch ``patch`` (metadata and ``revision`` only) onto the cached
    ``revision`` (module docstring). Gone or changed meanwhile: skipped, decided again on the
    next pass."""
    target = apps(namespace, "controllerrevisions", "ControllerRevision")
    common = Common(policy=GONE_OR_CHANGED_SKIP)
    body = apply_merge_patch(copy.deepcopy(dict(revision)), patch)
    body.setdefault("apiVersion", "apps/v1")
    body.setdefault("kind", "ControllerRevision")
    guarded = {"metadata": {"resourceVersion": meta_of(revision).get("resourceVersion")}}
    fallback = Patch(target, name_of(revision),
                     apply_merge_patch(copy.deepcopy(dict(patch)), guarded), common=common)
    return Update(target, name_of(revision), body, fallback=fallback, common=common)
