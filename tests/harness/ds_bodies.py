"""DisaggregatedSet test bodies: sets, roles and the child LeaderWorkerSets, Services and
scalers a controller would find, as the API server stores them."""

from __future__ import annotations

import copy
from typing import Any

from lws_operator.api.disaggregated import (
    API_VERSION,
    INITIAL_REPLICAS_ANNOTATION,
    KIND,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    SCALER_KIND,
    SLICE_LABEL,
)

DS_UID = "ds-uid-1"


def role(name: str, replicas: int | None = 1, image: str = "nginx:1.0", size: int = 1,
         external: bool = False, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "spec": {
            "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": image}]}},
            },
            **spec,
        },
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    if external:
        body["scaling"] = {"mode": "External"}
    return body


def ds(*roles: dict[str, Any], name: str = "my-ds", slices: int | None = None,
       uid: str = DS_UID, generation: int = 1, placement: dict[str, Any] | None = None,
       status: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"roles": list(roles or (role("prefill"), role("decode")))}
    if slices is not None:
        spec["slices"] = slices
    if placement is not None:
        spec["placementPolicy"] = placement
    body: dict[str, Any] = {
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": name, "namespace": "default", "uid": uid, "generation": generation},
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return body


def owner(uid: str = DS_UID, name: str = "my-ds") -> list[dict[str, Any]]:
    return [{"apiVersion": API_VERSION, "kind": KIND, "name": name, "uid": uid,
             "controller": True}]


def child(role_name: str, rev: str, slice_index: int | None = 0, replicas: int | None = 1,
          ready: int = 0, status_replicas: int = 0, updated: int = 0, ds_name: str = "my-ds",
          uid: str | None = DS_UID, name: str | None = None, initial: str | None = None,
          created: str = "2026-01-01T00:00:00Z",
          spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A child LeaderWorkerSet; ``slice_index=None`` is a legacy (pre-slices) one."""
    labels = {NAME_LABEL: ds_name, ROLE_LABEL: role_name, REVISION_LABEL: rev}
    if slice_index is not None:
        labels[SLICE_LABEL] = str(slice_index)
    default_name = (f"{ds_name}-{rev}-{role_name}" if slice_index is None
                    else f"{ds_name}-{slice_index}-{rev}-{role_name}")
    meta: dict[str, Any] = {"name": name or default_name, "namespace": "default",
                            "labels": labels, "creationTimestamp": created}
    if uid is not None:
        meta["ownerReferences"] = owner(uid, ds_name)
    if initial is not None:
        meta["annotations"] = {INITIAL_REPLICAS_ANNOTATION: initial}
    body_spec: dict[str, Any] = dict(spec or {})
    if replicas is not None:
        body_spec["replicas"] = replicas
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": meta, "spec": body_spec,
            "status": {"replicas": status_replicas, "readyReplicas": ready,
                       "updatedReplicas": updated}}


def service(name: str, rev: str, role_name: str, slice_index: int | None = 0,
            ds_name: str = "my-ds") -> dict[str, Any]:
    labels = {NAME_LABEL: ds_name, ROLE_LABEL: role_name, REVISION_LABEL: rev}
    if slice_index is not None:
        labels[SLICE_LABEL] = str(slice_index)
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": "default", "labels": labels}}


def scaler(role_name: str, replicas: int | None = 1, uid: str | None = DS_UID,
           name: str | None = None, ds_name: str = "my-ds", generation: int = 1,
           status: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name or f"{ds_name}-{role_name}", "namespace": "default",
                            "labels": {NAME_LABEL: ds_name, ROLE_LABEL: role_name},
                            "generation": generation}
    if uid is not None:
        meta["ownerReferences"] = [{**owner(uid, ds_name)[0], "blockOwnerDeletion": True}]
    body: dict[str, Any] = {"apiVersion": API_VERSION, "kind": SCALER_KIND, "metadata": meta,
                            "spec": {} if replicas is None else {"replicas": replicas}}
    if status is not None:
        body["status"] = status
    return body


def go_rendering(lws: dict[str, Any]) -> dict[str, Any]:
    """A child as the Go controller and the API server would store it: Go's zero values written
    out, the LeaderWorkerSet defaults filled in, quantities in canonical form."""
    out = copy.deepcopy(lws)
    spec = out["spec"]
    spec.setdefault("startupPolicy", "LeaderCreated")
    spec["rolloutStrategy"] = {"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "maxSurge": 0, "maxUnavailable": 1, "partition": 0}}
    template = spec["leaderWorkerTemplate"]
    template.setdefault("restartPolicy", "RecreateGroupOnPodRestart")
    worker = template["workerTemplate"]
    worker["metadata"]["creationTimestamp"] = None
    for container in worker["spec"]["containers"]:
        container["resources"] = {}
        if container.get("args") is None:
            container["args"] = []
    return out
