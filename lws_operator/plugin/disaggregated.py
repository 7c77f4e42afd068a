"""Reading a DisaggregatedSet for the plugin's subcommands: the set, the child LeaderWorkerSets and
role scalers it controls, its Services, and its target revision as the controller decides it
(``logic.disaggregated.revision.target_revision``: a revision adopted from the upstream
controller, else the spec's own), so every subcommand names the same revision the controller
converges to.

Only objects the set controls count (a controller ownerReference to its UID), as for the
controller; objects being deleted are left out (a drained old revision on its way out). A
cluster that does not serve the DisaggregatedSet API has none: listing them gives nothing
rather than an error, so ``kubectl lws tree`` works on a cluster without the CRD.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from lws_operator.api import constants as lws_api
from lws_operator.api import disaggregated as ds_api
from lws_operator.api.disaggregated import DisaggregatedSetView, RoleScalerView
from lws_operator.api.view import deleting, lws_view
from lws_operator.kube.client import ApiException, KubeClient
from lws_operator.logic.disaggregated import scaling, slices
from lws_operator.logic.disaggregated.revision import target_revision
from lws_operator.plugin.analysis.ds_rollout import SliceRollout, slice_rollout
from lws_operator.plugin.analysis.ds_tree import DsNode, build_ds_tree
from lws_operator.plugin.analysis.group_tree import build_tree
from lws_operator.plugin.analysis.rollout_status import Verdict, ds_verdict

Obj = dict[str, Any]


def ds_path(namespace: str | None, name: str | None = None) -> str:
    base = f"/apis/{ds_api.API_VERSION}"
    path = (f"{base}/namespaces/{namespace}/{ds_api.PLURAL}" if namespace
            else f"{base}/{ds_api.PLURAL}")
    return f"{path}/{quote(name)}" if name else path


def children_path(namespace: str) -> str:
    return f"/apis/{lws_api.API_VERSION}/namespaces/{namespace}/{lws_api.PLURAL}"


async def items(kube: KubeClient, path: str, selector: str | None = None,
                live: bool = True) -> list[Obj]:
    """The objects a LIST returns (``live``: those not being deleted); none when the API is
    not served."""
    try:
        answer = await kube.request("GET", path, query={"labelSelector": selector}
                                    if selector else None)
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise
    return [o for o in answer.get("items") or [] if not (live and deleting(o))]


async def list_sets(kube: KubeClient, namespace: str | None) -> list[Obj]:
    """Every DisaggregatedSet in ``namespace`` (None: every namespace); none when the user may
    not list them (``kubectl lws tree`` still shows the LeaderWorkerSets they may)."""
    try:
        return await items(kube, ds_path(namespace))
    except ApiException as exc:
        if exc.status == 403:
            return []
        raise


@dataclass(frozen=True)
class DsScene:
    """A set and what it controls, read together."""

    ds: Mapping[str, Any]
    children: tuple[Obj, ...]
    scalers: tuple[Obj, ...]
    services: tuple[Obj, ...]
    revision: str

    @property
    def view(self) -> DisaggregatedSetView:
        return DisaggregatedSetView.of(self.ds)

    def rollouts(self) -> list[SliceRollout]:
        """Each slice's coordinated rollout to the target revision."""
        return [slice_rollout(self.ds, self.children, self.revision, k, self.scalers)
                for k in range(self.view.slices)]

    def verdict(self) -> Verdict:
        """Where the rollout stands (``rollout_status.ds_verdict``): each role's wanted groups
        over every slice, each slice's step, the target revision's children."""
        view = self.view
        bound = {s.role: s for s in (RoleScalerView(x) for x in self.scalers)}
        wants = {r.name: scaling.target_replicas(r, bound, 0) * view.slices for r in view.roles}
        current = [c for c in self.children if slices.revision_label(c) == self.revision]
        return ds_verdict(self.ds, wants, self.rollouts(), current)


async def read_scene(kube: KubeClient, ds: Mapping[str, Any], services: bool = False) -> DsScene:
    """The set's children and scalers (and, with ``services``, its Services)."""
    view = DisaggregatedSetView.of(ds)
    selector = f"{ds_api.NAME_LABEL}={view.name}"
    ns = view.namespace
    reads = [items(kube, children_path(ns), selector),
             items(kube, f"/apis/{ds_api.API_VERSION}/namespaces/{ns}/{ds_api.SCALER_PLURAL}",
                   selector)]
    if services:
        reads.append(items(kube, f"/api/v1/namespaces/{ns}/services", selector))
    got = await asyncio.gather(*reads)
    children = slices.owned(got[0], view)
    return DsScene(ds=ds, children=tuple(dict(c) for c in children),
                   scalers=tuple(dict(s) for s in slices.owned(got[1], view)),
                   services=tuple(dict(s) for s in slices.owned(got[2], view))
                   if services else (),
                   revision=target_revision(view, children))


async def _leader_workload(kube: KubeClient, lws: Mapping[str, Any]) -> Obj | None:
    view = lws_view(lws)
    kind = "deployments" if view.hashed else "statefulsets"
    return await kube.get(f"/apis/apps/v1/namespaces/{view.namespace}/{kind}/{quote(view.name)}")


async def read_tree(kube: KubeClient, ds: Mapping[str, Any]) -> DsNode:
    """The set's tree: its scene, its pods (one LIST by the set's label) and each child's
    leader workload."""
    scene = await read_scene(kube, ds, services=True)
    view = scene.view
    pods = await items(kube, f"/api/v1/namespaces/{view.namespace}/pods",
                       f"{ds_api.NAME_LABEL}={view.name}", live=False)
    workloads = await asyncio.gather(*(_leader_workload(kube, c) for c in scene.children))
    trees = {lws_view(c).name: build_tree(c, pods, w)
             for c, w in zip(scene.children, workloads, strict=True)}
    return build_ds_tree(ds, scene.revision, scene.children, trees, scene.services)
