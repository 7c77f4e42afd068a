"""What a DisaggregatedSet revision stores, how it is found, and how an undo writes it back: the
facts of the set's revision history (``logic.disaggregated.history``) that the controller and
``kubectl lws rollout history|undo`` (``plugin.analysis.ds_history``) share.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any, Final

from lws_operator.api.constants import NAME_LABEL as LWS_NAME_LABEL
from lws_operator.api.disaggregated import (
    NAME_LABEL,
    REVISION_LABEL,
    DisaggregatedSetView,
    controlled_by,
)
from lws_operator.api.view import labels
from lws_operator.logic.disaggregated.revision import IMMUTABLE_SPEC_FIELDS, revision_input

Obj = Mapping[str, Any]
DS = Obj | DisaggregatedSetView
# A revision's name: ``<set name, at most this long>-<key>-<number>`` (a name is at most 253).
_NAME_LIMIT: Final = 220


def selector(ds_name: str | None = None) -> str:
    """The label selector of the sets' revisions (of one set, ``ds_name``): the set's name
    label without the LeaderWorkerSet's. The StatefulSets of a set's children keep
    ControllerRevisions of their own, labelled with their pod template's labels, which carry
    both; they are the children's, and selecting them out keeps them out of the set's cache."""
    name = NAME_LABEL if ds_name is None else f"{NAME_LABEL}={ds_name}"
    return f"{name},!{LWS_NAME_LABEL}"


def key_of(revision: Obj | None) -> str:
    """The set revision a ControllerRevision records ('' when it carries none)."""
    return str(labels(revision).get(REVISION_LABEL) or "")


def revision_name(ds_name: str, key: str, number: int) -> str:
    return f"{ds_name[:_NAME_LIMIT]}-{key}-{number}"


def revision_data(ds: DS) -> dict[str, Any]:
    """What a revision stores: the roles as the revision hash covers them."""
    return {"roles": copy.deepcopy(revision_input(DisaggregatedSetView.of(ds).roles))}


def stored_roles(revision: Obj) -> list[dict[str, Any]]:
    """The role entries a revision stores (none when its data is not ours)."""
    roles = (revision.get("data") or {}).get("roles")
    if not isinstance(roles, list):
        return []
    return [dict(r) for r in roles if isinstance(r, Mapping) and r.get("name")]


def owned(ds: DS, revisions: Iterable[Obj]) -> list[Obj]:
    """The revisions ``ds`` controls (its UID in their controller ownerReference) that carry a
    key: the cache lists by name label, which anyone can write."""
    uid = DisaggregatedSetView.of(ds).uid
    return [r for r in revisions if controlled_by(r, uid) and key_of(r)]


def _default_absent(spec: Mapping[str, Any], field: str) -> bool:
    """Whether the immutable ``field`` says what absent says (the hash leaves it out)."""
    value = spec.get(field)
    return value is None or value == IMMUTABLE_SPEC_FIELDS[field]


def roles_restored(ds: DS, revision: Obj) -> list[dict[str, Any]]:
    """``spec.roles`` with the roles ``revision`` stores written back, in its order: each
    role's ``leaderWorkerTemplate`` and immutable fields as stored; everything the revision does
    not cover (replicas, scaling, the rollout strategy, metadata) kept from the live role of that
    name. A role the set no longer has comes back with its stored fields alone, at 0 groups when
    every Static role of the set is at 0 (the API's rule: all or none), else the default."""
    view = DisaggregatedSetView.of(ds)
    live = {role.name: role.raw for role in view.roles}
    static = [role for role in view.roles if not role.external]
    all_zero = bool(static) and all(role.replicas == 0 for role in static)
    out = []
    for entry in stored_roles(revision):
        name = str(entry["name"])
        role = copy.deepcopy(dict(live.get(name) or {"name": name}))
        spec = dict(role.get("spec") or {})
        if name not in live and all_zero:
            spec["replicas"] = 0
        spec["leaderWorkerTemplate"] = copy.deepcopy(entry.get("template"))
        if spec["leaderWorkerTemplate"] is None:
            del spec["leaderWorkerTemplate"]
        for field in IMMUTABLE_SPEC_FIELDS:
            if field in entry:
                spec[field] = copy.deepcopy(entry[field])
            elif not _default_absent(spec, field):
                del spec[field]
        role["spec"] = spec
        out.append(role)
    return out
