"""Pods as the StatefulSets of a LeaderWorkerSet create them, before the pod webhook admits them:
the bodies the pod-mutation tests feed the webhook's rules (``logic.mutation.pod``), shared by the
LeaderWorkerSet and DisaggregatedSet ones."""

from __future__ import annotations

from typing import Any

P = "leaderworkerset.sigs.k8s.io/"
NAME = P + "name"
WORKER_INDEX = P + "worker-index"
GROUP_INDEX = P + "group-index"
SIZE = P + "size"
LEADER_NAME = P + "leader-name"

# The variables upstream's pod webhook gives every container of a group.
LWS_ENV_NAMES = ("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX")


def container(
    name: str = "c", *, tpu: bool = False, env: list[Any] | None = None
) -> dict[str, Any]:
    result: dict[str, Any] = {"name": name, "image": "busybox"}
    if tpu:
        result["resources"] = {"limits": {"google.com/tpu": "4"}}
    if env is not None:
        result["env"] = env
    return result


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    *,
    containers: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    subdomain: str | None = "default",
    namespace: str = "default",
    affinity: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or [container()]}
    if subdomain is not None:
        spec["subdomain"] = subdomain
    if init_containers is not None:
        spec["initContainers"] = init_containers
    if affinity is not None:
        spec["affinity"] = affinity
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    if annotations is not None:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def leader(name: str, size: str = "1", **annotations: str) -> dict[str, Any]:
    """A leader as the leader StatefulSet creates it (before admission)."""
    lws = name.rsplit("-", 1)[0]
    return pod(name, {NAME: lws, WORKER_INDEX: "0"}, {SIZE: size, **_keys(annotations)})


def worker(
    name: str, size: str = "2", group_index: str = "1", **annotations: str
) -> dict[str, Any]:
    """A worker as a worker StatefulSet creates it (group labels copied from the leader)."""
    leader_name = name.rsplit("-", 1)[0]
    lws = leader_name.rsplit("-", 1)[0]
    return pod(
        name,
        {NAME: lws, GROUP_INDEX: group_index},
        {SIZE: size, LEADER_NAME: leader_name, **_keys(annotations)},
    )


def _keys(annotations: dict[str, str]) -> dict[str, str]:
    """`subgroup_size="2"` → `{"leaderworkerset.sigs.k8s.io/subgroup-size": "2"}`."""
    return {P + k.replace("_", "-"): v for k, v in annotations.items()}


def hosts(*names: str, sub: str = "default") -> str:
    """The hostnames of pods ``names`` under subdomain ``sub``, comma-separated, as upstream's
    pod webhook lists a group's hosts."""
    return ",".join(f"{n}.{sub}" for n in names)
