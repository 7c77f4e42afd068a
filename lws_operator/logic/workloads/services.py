"""Headless Services that give every pod of a LeaderWorkerSet a stable DNS name (upstream's
CreateHeadlessServiceIfNotExists (controller_utils.go)).

Workers find their leader through `LWS_LEADER_ADDRESS`, and TPU hosts through
`TPU_WORKER_HOSTNAMES`: both are `<pod>.<subdomain>` names that only resolve while a headless
Service of that subdomain selects the pods. Two layouts exist, chosen by
`spec.networkConfig.subdomainPolicy`:

* `Shared` (the default, also when `networkConfig` is absent): one Service `<lws>`, owned by the
  LeaderWorkerSet, selecting every pod of the set;
* `UniquePerReplica`: one Service per group, named like its leader (`<lws>-<i>`), owned by the
  leader pod so garbage collection removes it with the group.

Both publish not-ready addresses: a group's pods must resolve each other while they rendezvous,
long before any of them reports Ready. The controllers create these Services only when missing
and never update them, as upstream does; so the builders return the whole desired object and
leave the create-if-absent decision to the caller.

This module also holds the effective subdomain policy, which the StatefulSet builders read too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    SUBDOMAIN_POLICY_SHARED,
    SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import group_index, lws_view
from lws_operator.logic.objects.meta import host_name, meta_of
from lws_operator.logic.objects.owners import lws_reference, pod_reference


def subdomain_policy(lws: LWS) -> str:
    """`spec.networkConfig.subdomainPolicy`, `Shared` when unset (as the defaulting webhook and
    the revision snapshot both treat a missing `networkConfig`)."""
    return lws_view(lws).subdomain_policy


def wants_shared_service(lws: LWS) -> bool:
    """Whether the LeaderWorkerSet controller keeps the Service `<lws>`.

    A switch to UniquePerReplica leaves an existing shared Service in place (upstream never
    deletes it); this only says whether a missing one is created."""
    return subdomain_policy(lws) == SUBDOMAIN_POLICY_SHARED


def wants_replica_service(lws: LWS) -> bool:
    """Whether the pod controller creates a Service per leader pod. Decided on the *live* LWS
    (upstream's pod Reconcile (pod_controller.go)), not the leader's revision."""
    return subdomain_policy(lws) == SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA


def _headless_service(
    name: str, namespace: str, lws_name: str, selector: dict[str, str], owner: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {NAME_LABEL: lws_name},
            "ownerReferences": [owner],
        },
        "spec": {
            "clusterIP": "None",
            "selector": selector,
            "publishNotReadyAddresses": True,
        },
    }


def shared_service(lws: LWS) -> dict[str, Any]:
    """The Service `<lws>` selecting every pod of the set, owned by the LeaderWorkerSet."""
    view = lws_view(lws)
    return _headless_service(
        view.name, view.namespace, view.name, {NAME_LABEL: view.name}, lws_reference(view)
    )


def replica_service(lws: LWS, leader_pod: Mapping[str, Any]) -> dict[str, Any]:
    """The Service `<leader host name>` (the pod name in Ordinal mode) selecting one group by its
    `group-index`, owned by the leader pod. It carries only the `name` label, like upstream's
    (no `group-index` label).

    Raises ValueError when the leader has no `group-index` label (the pod webhook sets it on
    every leader; without it the Service would select the whole set)."""
    view = lws_view(lws)
    leader_name = str(meta_of(leader_pod).get("name") or "")
    index = group_index(leader_pod)
    if index is None:
        raise ValueError(f"leader pod {leader_name} has no {GROUP_INDEX_LABEL} label")
    return _headless_service(
        host_name(leader_pod),
        view.namespace,
        view.name,
        {NAME_LABEL: view.name, GROUP_INDEX_LABEL: index},
        pod_reference(leader_pod),
    )
