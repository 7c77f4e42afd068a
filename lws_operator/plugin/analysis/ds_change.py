"""A proposed change to a DisaggregatedSet, as ``kubectl lws plan`` takes it (a new manifest,
``-f``; new images, ``--set-image``), and whether it rolls the set.

Whether it rolls is the controller's revision question (``logic.disaggregated.revision``): a
change of the roles (added, removed, renamed) or of a role's templates or immutable fields rolls
every role together; replicas, rollout budgets, metadata, scaling, slices and the placement
policy do not. Templates are compared by content, as the controller compares them when it takes
a set over (``revision.role_difference``): a manifest that leaves out what the API server
defaults, or only reorders the roles, is no change.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from lws_operator.api.disaggregated import KIND, DisaggregatedSetView
from lws_operator.logic.disaggregated.revision import role_difference
from lws_operator.plugin.analysis.set_change import ChangeError, ImageChange


def _set_images(roles: Sequence[dict[str, Any]], change: ImageChange) -> None:
    """``change`` applied to the leader and worker templates of every role; ChangeError when
    no container of any role has the name."""
    found = False
    for role in roles:
        template = (role.get("spec") or {}).get("leaderWorkerTemplate") or {}
        for key in ("leaderTemplate", "workerTemplate"):
            pod = (template.get(key) or {}).get("spec") or {}
            for field in ("initContainers", "containers"):
                for container in pod.get(field) or []:
                    if change.container is None or container.get("name") == change.container:
                        container["image"] = change.image
                        found = True
    if not found:
        raise ChangeError(f"no container named {change.container!r} in any role's leader or "
                          "worker template")


def proposed_ds(live: Mapping[str, Any], *, manifest: Mapping[str, Any] | None = None,
                images: Sequence[ImageChange] = ()) -> dict[str, Any]:
    """The live set with the change applied (a copy): a manifest replaces the spec, as
    ``kubectl apply`` of a full manifest would; the images apply on top."""
    out = copy.deepcopy(dict(live))
    if manifest is not None:
        meta = manifest.get("metadata") or {}
        live_name = (out.get("metadata") or {}).get("name")
        if manifest.get("kind") not in (None, KIND):
            raise ChangeError(f"the manifest is a {manifest.get('kind')}, not a {KIND}")
        if meta.get("name") not in (None, live_name):
            raise ChangeError(f"the manifest names {meta.get('name')!r}, not {live_name!r}")
        out["spec"] = copy.deepcopy(dict(manifest.get("spec") or {}))
    roles = [r for r in (out.setdefault("spec", {}).get("roles") or []) if isinstance(r, dict)]
    for change in images:
        _set_images(roles, change)
    return out


def rollout_cause(live: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why the change rolls the set (the first difference), or None when it rolls nothing."""
    before, after = DisaggregatedSetView.of(live), DisaggregatedSetView.of(new)
    names_before = [r.name for r in before.roles]
    names_after = [r.name for r in after.roles]
    if sorted(names_before) != sorted(names_after):
        return f"the roles change ({', '.join(names_before)} → {', '.join(names_after)})"
    for role in after.roles:
        old = before.role(role.name)
        difference = role_difference(role, {"spec": old.spec if old else {}})
        if difference is not None:
            return f"role {role.name}'s templates change (first difference: {difference})"
    return None


def replicas_change(live: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The Static roles whose replicas change, as ``prefill 2 → 3``."""
    before, after = DisaggregatedSetView.of(live), DisaggregatedSetView.of(new)
    out = []
    for role in after.roles:
        old = before.role(role.name)
        if old is not None and not role.external and old.replicas != role.replicas:
            out.append(f"{role.name} {old.replicas} → {role.replicas}")
    return out
