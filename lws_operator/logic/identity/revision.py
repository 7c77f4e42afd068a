"""Template revisions: what a LeaderWorkerSet revision contains and how its key is computed.

A revision snapshots exactly the fields whose change must roll the groups (upstream's revision
(revision_utils.go)):
``spec.leaderWorkerTemplate`` in full and ``spec.networkConfig``. Replicas, the rollout strategy,
the startup policy and metadata are left out, so scaling or retuning a rollout never restarts a
pod. The snapshot is stored in a ControllerRevision as a strategic-merge patch with
``$patch: replace`` on both fields, so applying it onto the live object restores the stored
templates while keeping the live replicas and strategy (upstream's revision_utils.go).

The key is the 32-bit FNV-1 hash of the patch's compact, key-sorted JSON, printed in decimal and
mapped through the safe-encoding alphabet Kubernetes uses for pod-template hashes. It is stable
for a given stored object; it is not byte-compatible with the Go controller's keys, which hash
Go's own JSON rendering of typed structs. That matters only when objects created by the Go
controller are taken over, and then no key is recomputed: the revision a StatefulSet carries is
compared by content (``template_difference``, where the two JSON renderings agree) and kept when
the templates are the same, and one the previous controller rolled out completely is kept as it
stands (``logic.identity.adoption``).

``maxGroupRestarts`` and ``restartBackoff`` are left out of the snapshot although they sit in
``leaderWorkerTemplate``: they tell the controller how to react to failures and change nothing
in a pod, so retuning them must not roll every group; and the LWS docs say editing
``maxGroupRestarts`` does not recover an exhausted group, which a rollout replacing it would.
The controller reads both from the live object.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import SUBDOMAIN_POLICY_SHARED
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import lws_view
from lws_operator.logic.identity.template_form import first_difference, normal_form

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_FNV_OFFSET = 2166136261
_FNV_PRIME = 16777619
_NAME_LIMIT = 220
# Fields of leaderWorkerTemplate that configure the controller, not the pods (see above).
_NOT_IN_REVISION = ("maxGroupRestarts", "restartBackoff")


def revision_patch(lws: LWS) -> dict[str, Any]:
    """The revision snapshot of ``lws`` as a strategic-merge patch: a copy of its templates as
    written, with a missing subdomain policy filled in. Exactly as written otherwise (not the
    view's effective values): the bytes are hashed into the revision key, and a key that moves
    rolls every group."""
    view = lws_view(lws)
    template = copy.deepcopy(dict(view.template))
    for controller_only in _NOT_IN_REVISION:
        template.pop(controller_only, None)
    network = copy.deepcopy(dict(view.network_config))
    if network.get("subdomainPolicy") is None:
        network["subdomainPolicy"] = SUBDOMAIN_POLICY_SHARED
    template["$patch"] = "replace"
    network["$patch"] = "replace"
    return {"spec": {"leaderWorkerTemplate": template, "networkConfig": network}}


def canonical_json(obj: Any) -> bytes:
    """Compact JSON with sorted keys: the bytes that are hashed and stored."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def fnv1_32(data: bytes) -> int:
    """32-bit FNV-1 (multiply, then xor), as Go's ``hash/fnv.New32``."""
    value = _FNV_OFFSET
    for byte in data:
        value = (value * _FNV_PRIME) & 0xFFFFFFFF
        value ^= byte
    return value


def safe_encode(text: str) -> str:
    """Map each character into an alphabet without vowels or look-alikes (no accidental words)."""
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in text)


def revision_key(lws: LWS) -> str:
    """The ``template-revision-hash`` of ``lws``'s current templates."""
    return safe_encode(str(fnv1_32(canonical_json(revision_patch(lws)))))


def revision_name(lws_name: str, key: str, number: int) -> str:
    """ControllerRevision name: ``<lws name, at most 220 chars>-<key>-<number>``."""
    return f"{lws_name[:_NAME_LIMIT]}-{key}-{number}"


def _strategic_replace(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Apply the subset of strategic-merge semantics revisions use: nested maps merge, a map
    carrying ``$patch: replace`` replaces the target's value whole."""
    out = dict(target)
    for key, value in patch.items():
        if isinstance(value, dict):
            if value.get("$patch") == "replace":
                out[key] = {k: copy.deepcopy(v) for k, v in value.items() if k != "$patch"}
            else:
                current = out.get(key)
                out[key] = _strategic_replace(current if isinstance(current, dict) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_revision(live: LWS, patch: dict[str, Any]) -> dict[str, Any]:
    """The live LWS with the templates stored in revision ``patch`` (live metadata, replicas and
    rollout strategy are kept): what the old groups of a rollout are rebuilt from."""
    return _strategic_replace(dict(lws_view(live).raw), patch)


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) turning ``old`` into ``new``: removed keys are null.
    Custom resources take no strategic merge patch, so a revision's ``$patch: replace`` is
    carried out as this."""
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return new
    out: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        if key not in old:
            out[key] = value
        elif old[key] != value:
            out[key] = merge_patch(old[key], value)
    return out


def restore_spec_patch(live: LWS, patch: dict[str, Any]) -> dict[str, Any]:
    """The merge patch of ``live``'s spec putting back the templates stored in revision
    ``patch`` (a rollback, an undo): ``leaderWorkerTemplate`` and ``networkConfig`` as stored,
    the controller-only fields of the live template kept (they are not in revisions), only the
    fields that differ. Empty when the templates are those already."""
    view = lws_view(live)
    restored = apply_revision(view.raw, patch)
    spec = dict(restored.get("spec") or {})
    template = dict(spec.get("leaderWorkerTemplate") or {})
    for field in _NOT_IN_REVISION:
        if field in view.template:
            template[field] = view.template[field]
    live_spec = view.raw.get("spec") or {}
    return {key: merge_patch(live_spec.get(key), value) for key, value in
            (("leaderWorkerTemplate", template), ("networkConfig", spec.get("networkConfig")))
            if value is not None and live_spec.get(key) != value}


def template_difference(lws: LWS, patch: dict[str, Any]) -> str | None:
    """Where the templates stored in revision ``patch`` differ from ``lws``'s, or None when they
    are the same templates however each was written (``logic.identity.template_form``): the stored
    ones are restored onto the live object first, as upstream compares, so a revision without
    ``networkConfig`` (older releases) takes the live one."""
    stored = normal_form(revision_patch(apply_revision(lws, patch)))
    return first_difference(stored, normal_form(revision_patch(lws)))
