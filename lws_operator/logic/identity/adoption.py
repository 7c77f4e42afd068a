"""Whether the revision a LeaderWorkerSet's groups run was rolled out completely.

When the operator takes a LeaderWorkerSet over from another controller (the upstream Go one, or
an older release of ours), the revision its StatefulSets carry was stored in that controller's
own JSON rendering. Normally the templates are compared by content
(``logic.identity.template_form``), but a rendering can differ in ways no normal form sees: a
controller built against older Kubernetes types drops every field it does not know. If such a
difference counted as a template change, every group would be recreated although nobody
changed anything.

A set the previous controller finished rolling out needs no comparison at all: the controller
saw this very generation of the spec (``status.observedGeneration == metadata.generation``), and
the leader StatefulSet (or, under Hash identity, the leader Deployment) and every worker
StatefulSet carry its revision key on themselves and on their pod templates, with nothing left to
roll (partition 0; the workload controller reports the update finished). Its templates are that
revision, as they stand. A set in the middle of a rollout, partitioned or not, fails one of these
and is decided by content, so an unfinished rollout goes on rather than being taken for done.

Any spec change raises ``metadata.generation`` (the CRD has a status subresource), so a real
template change is never mistaken for a finished rollout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import lws_view, revision_of
from lws_operator.logic.objects.meta import meta_of


def rolled_out(lws: LWS, key: str, leader_owner: Mapping[str, Any] | None,
               workers: Iterable[Mapping[str, Any]]) -> bool:
    """Whether the revision ``key`` is rolled out completely on ``lws`` (module docstring):
    ``leader_owner`` is its leader StatefulSet or Deployment, ``workers`` its worker
    StatefulSets."""
    view = lws_view(lws)
    generation = view.meta.get("generation")  # absent: not observed yet (no 0 default here)
    observed = view.status.get("observedGeneration")
    if not key or leader_owner is None or generation is None or observed != generation:
        return False
    return all(_carries(owner, key) and _settled(owner) for owner in (leader_owner, *workers))


def _carries(owner: Mapping[str, Any], key: str) -> bool:
    """The owner and the pod template it stamps out are both labelled with ``key``."""
    spec = owner.get("spec")
    template = spec.get("template") if isinstance(spec, Mapping) else None
    return revision_of(owner) == key and revision_of(template) == key


def _settled(owner: Mapping[str, Any]) -> bool:
    """The workload controller has seen the owner's spec and has no pod left to update."""
    spec = owner.get("spec")
    status = owner.get("status")
    if not isinstance(spec, Mapping) or not isinstance(status, Mapping):
        return False
    generation = meta_of(owner).get("generation")
    if generation is None or status.get("observedGeneration") != generation:
        return False
    if owner.get("kind") == "Deployment" or "strategy" in spec:
        replicas = spec.get("replicas", 1)
        return bool(status.get("updatedReplicas", 0) == replicas
                    and status.get("replicas", 0) == replicas)
    rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
    if rolling.get("partition") or 0:
        return False
    update = status.get("updateRevision")
    return update is not None and status.get("currentRevision") == update
