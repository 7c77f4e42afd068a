"""The DisaggregatedSet revision: which child LeaderWorkerSets run the current spec (upstream's
ComputeRevision (lws_manager.go)), and which revision to keep when a set made by another
controller is taken over.

What is hashed
--------------
The revision is the first 8 hex characters of the SHA-256 of the role list, in spec order:
``[{"name": <role>, "template": <spec.leaderWorkerTemplate as stored>}, ...]``. So a change of any
role's templates, a role's name, or the list of roles (adding, removing, reordering) rolls every
role together; replicas, the rollout strategy, the startup policy, the network configuration,
role metadata, scaling, slices and the placement policy are left out, and changing them never
restarts a pod (the controller never updates a child's spec but for ``spec.replicas``).

The LWS docs add: "within a DisaggregatedSet a role can change [group identity] modes, which rolls
the affected LeaderWorkerSets as a normal template update". ``groupIdentity`` is immutable on a
LeaderWorkerSet, so the only way to apply a change is a new child, hence a new revision. The same
holds for the other immutable LeaderWorkerSet fields the LWS docs add outside the template,
``podTerminationPolicy`` and ``scheduling``. Each is added to its role's entry only when it says
something other than the LeaderWorkerSet default (``Ordinal``, ``Sequential``, no gang
scheduling): a role that leaves them alone, or spells out the default, hashes exactly as before,
so adding the fields changed no existing revision and writing ``groupIdentity: Ordinal`` rolls
nothing.

The serialization, and the Go controller's revisions
----------------------------------------------------
Upstream hashes Go's ``encoding/json`` rendering of its typed structs: keys in struct-field
order across the whole PodSpec tree, ``omitempty`` rules, zero values of non-pointer fields
written out. Reproducing it byte for byte would mean carrying the field order and the omission
rule of every Kubernetes core type, for every Kubernetes release, and would still break on a
field our types do not know. So the bytes hashed here are Python's canonical JSON (sorted keys,
compact separators, UTF-8), the same as the LeaderWorkerSet revision's
(``logic.identity.revision``), and the values differ from the Go controller's.

The difference only matters when a DisaggregatedSet made by the Go controller is taken over: its
children carry the Go revision, our hash is on none of them, and a naive controller would start a
full rollout for an unchanged spec. :func:`adopted_revision` prevents that by content: when no
owned child carries our revision and one revision's owned children hold, role for role, the same
templates (and group identity) as the spec, that revision is the target, with its names kept.
The comparison undoes what the builder adds (the system labels, the placement terms) and compares
normal forms (``logic.identity.template_form``), so the two JSON renderings of the same
templates agree.

Upstream quirk kept or fixed: reordering ``spec.roles`` changes the hash. With adoption by
content a pure reorder finds the running revision matching role for role, so it no longer rolls
anything (the pods would have been identical); any real change still does.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from lws_operator.api.defaults import apply_defaults
from lws_operator.api.disaggregated import (
    NAME_LABEL,
    REVISION_LABEL,
    REVISION_LENGTH,
    ROLE_LABEL,
    SLICE_LABEL,
    DisaggregatedSetView,
    RoleView,
)
from lws_operator.api.view import metadata
from lws_operator.logic.disaggregated.names import APP_LABEL
from lws_operator.logic.disaggregated.placement import without_placement
from lws_operator.logic.disaggregated.slices import owned, revision_label, role_of
from lws_operator.logic.identity.revision import canonical_json
from lws_operator.logic.identity.template_form import first_difference, normal_form

# Fields outside ``leaderWorkerTemplate`` that are immutable on a LeaderWorkerSet, with the value
# that means the same as absent (None: any value means something).
IMMUTABLE_SPEC_FIELDS: Final[Mapping[str, str | None]] = {
    "groupIdentity": "Ordinal",
    "podTerminationPolicy": "Sequential",
    "scheduling": None,
}
_SYSTEM_LABEL_KEYS: Final = (APP_LABEL, NAME_LABEL, ROLE_LABEL, SLICE_LABEL, REVISION_LABEL)

Obj = Mapping[str, Any]


def _immutable_fields(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The role's immutable fields that differ from their default (module docstring)."""
    out = {}
    for key, default in IMMUTABLE_SPEC_FIELDS.items():
        value = spec.get(key)
        if value is not None and value != default:
            out[key] = value
    return out


def revision_input(roles: Iterable[RoleView]) -> list[dict[str, Any]]:
    """What is hashed: one entry per role, in spec order."""
    out = []
    for role in roles:
        entry: dict[str, Any] = {"name": role.name, "template": role.spec.get(
            "leaderWorkerTemplate")}
        entry.update(_immutable_fields(role.spec))
        out.append(entry)
    return out


def compute_revision(ds: Obj | DisaggregatedSetView) -> str:
    """The revision of the set's current roles: 8 lowercase hex characters (also for an empty
    role list)."""
    data = canonical_json(revision_input(DisaggregatedSetView.of(ds).roles))
    return hashlib.sha256(data).hexdigest()[:REVISION_LENGTH]


# ------------------------------------------------------------------ adoption by content

def _comparable(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a role's or a child's LeaderWorkerSet spec a revision stands for, with the
    LeaderWorkerSet defaults applied and what the builder adds removed, in normal form."""
    defaulted = apply_defaults({"spec": copy.deepcopy(dict(spec))})["spec"]
    template = defaulted.get("leaderWorkerTemplate")
    template = template if isinstance(template, dict) else {}
    for key in ("workerTemplate", "leaderTemplate"):
        pod = template.get(key)
        if not isinstance(pod, dict):
            continue
        meta = pod.get("metadata")
        if isinstance(meta, dict) and isinstance(meta.get("labels"), dict):
            meta["labels"] = {k: v for k, v in meta["labels"].items()
                              if k not in _SYSTEM_LABEL_KEYS}
        pod_spec = pod.get("spec")
        if isinstance(pod_spec, dict) and "affinity" in pod_spec:
            stripped = without_placement(pod_spec.get("affinity"))
            if stripped is None:
                del pod_spec["affinity"]
            else:
                pod_spec["affinity"] = stripped
    form = {"template": template, **{key: defaulted.get(key) for key in IMMUTABLE_SPEC_FIELDS}}
    out = normal_form(form)
    return out if isinstance(out, dict) else {}


def role_difference(role: RoleView, lws: Obj) -> str | None:
    """Where a child LeaderWorkerSet's templates (and immutable fields) differ from the role's,
    or None when they are the same however each was written."""
    return first_difference(_comparable(role.spec), _comparable(_spec(lws)))


def _spec(lws: Obj) -> Mapping[str, Any]:
    spec = lws.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _created(lws: Obj) -> str:
    return str(metadata(lws).get("creationTimestamp") or "")


def adopted_revision(ds: Obj | DisaggregatedSetView, lws_objects: Iterable[Obj]) -> str | None:
    """The revision to keep instead of ours, or None.

    None when an owned child already carries our revision (the set is ours, or a rollout to it
    is under way) or when no revision matches. Otherwise the revision whose owned children, over
    all slices, are exactly the spec's roles and each hold its role's templates: taking over a set
    the Go controller made starts no rollout. When several match (a reorder of roles with a
    rollout in flight), the one whose newest child is newest wins, then the greatest label, so
    every pass decides the same."""
    view = DisaggregatedSetView.of(ds)
    ours = compute_revision(view)
    children = owned(lws_objects, view)
    if any(revision_label(lws) == ours for lws in children):
        return None
    roles = {role.name: role for role in view.roles}
    if not roles:
        return None
    groups: dict[str, list[Obj]] = {}
    for lws in children:
        rev = revision_label(lws)
        if rev:
            groups.setdefault(rev, []).append(lws)
    forms = {name: _comparable(role.spec) for name, role in roles.items()}
    matching = []
    for rev, members in groups.items():
        if {role_of(lws) for lws in members} != set(roles):
            continue
        if all(first_difference(forms[role_of(lws)], _comparable(_spec(lws))) is None
               for lws in members):
            matching.append((max(_created(lws) for lws in members), rev))
    return max(matching)[1] if matching else None


def target_revision(ds: Obj | DisaggregatedSetView, lws_objects: Iterable[Obj]) -> str:
    """The revision the set converges to: an adopted one (:func:`adopted_revision`), else ours."""
    children = list(lws_objects)
    return adopted_revision(ds, children) or compute_revision(ds)
