"""What the scale benchmark creates: the LeaderWorkerSets, and the same pods as plain StatefulSets.

Pure data, so the two topologies can be compared by a unit test rather than by eye.

The **operator** side is K LeaderWorkerSets of R replicas of size S, rolled with ``maxSurge: 1``
(and the default ``maxUnavailable: 1``), so at most two groups are being replaced at a time.

The **baseline** is what the control plane does with the same pods when no operator is involved:
per LeaderWorkerSet one headless Service, one leader StatefulSet of R pods and one worker
StatefulSet of S - 1 pods per group (ordinals from 1, so the pods have the operator's names), all
created up front (the operator has to wait for each
leader pod before it can create that group's workers; the baseline does not, which is exactly
the overhead being measured). Both pod management policies are ``Parallel``, as the operator's.
It is rolled "the same way": the leader StatefulSet replaces ``maxSurge + maxUnavailable`` = 2
leaders at a time (StatefulSet ``maxUnavailable``, Beta and on in 1.37), and each worker
StatefulSet replaces all its pods at once, as a group recreation does.

Every pod of both sides carries the ``bench.lws-operator.dev/set`` label naming its set, so one
watch tracks either side. Images are never pulled (kwok), so they are plain names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SET_LABEL = "bench.lws-operator.dev/set"
ROLE_LABEL = "bench.lws-operator.dev/role"
IMAGE = "bench/model-server:v1"
ROLLED_IMAGE = "bench/model-server:v2"
MAX_SURGE = 1
MAX_UNAVAILABLE = 1


@dataclass(frozen=True)
class Profile:
    """One benchmark size: ``sets`` LeaderWorkerSets x ``replicas`` groups x ``size`` pods."""

    name: str
    sets: int
    replicas: int
    size: int
    nodes: int  # kwok nodes the benchmark's own cluster gets
    steady_seconds: float  # how long the operator is watched at rest
    timeout: float  # per phase

    @property
    def groups(self) -> int:
        return self.sets * self.replicas

    @property
    def pods(self) -> int:
        return self.groups * self.size

    def check(self) -> None:
        """Refuse sizes that cannot run, before anything is created."""
        for field, value, low in (("sets", self.sets, 1), ("replicas", self.replicas, 1),
                                  ("size", self.size, 2), ("nodes", self.nodes, 1)):
            if value < low:
                raise ValueError(f"--{field} must be at least {low}, got {value}")
        if self.sets > 999:
            raise ValueError(f"--sets must be at most 999, got {self.sets}")
        if self.steady_seconds < 0 or self.timeout <= 0:
            raise ValueError("--steady-seconds must be >= 0 and --timeout > 0")


PROFILES = {
    # The default: 800 pods, within 15 minutes on a 2-core machine.
    "default": Profile("default", sets=20, replicas=5, size=8, nodes=20, steady_seconds=120,
                       timeout=900),
    # 5,000 pods on 80 nodes of 110 pods each (kwok's nodes allocate 110 pods, as a kubelet
    # does by default): room for every pod plus a surge group per set (6,000) with a third to
    # spare. The operator reads no Node in this profile, so the node count changes nothing it
    # does. 700 nodes (about 7 pods each, a production-like density) were never run: on the 2-core
    # machine, the control plane's work per node (kwok's heartbeats and status, the scheduler
    # scoring every node for every pod) would compete with the operator for the CPU it is
    # measured on. An hour per phase: creating 5,000 pods through the full control plane on
    # that machine is its own limit, and a phase that ends early is never penalised.
    "large": Profile("large", sets=125, replicas=5, size=8, nodes=80, steady_seconds=120,
                     timeout=3600),
    # The short variant `make test` runs: every phase and figure, in about a minute.
    "smoke": Profile("smoke", sets=3, replicas=2, size=3, nodes=20, steady_seconds=10,
                     timeout=300),
}


def set_name(index: int) -> str:
    return f"bench-{index:03d}"


def _pod_template(name: str, role: str, image: str) -> dict[str, Any]:
    return {
        "metadata": {"labels": {SET_LABEL: name, ROLE_LABEL: role}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "model", "image": image,
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
        },
    }


def leaderworkerset(name: str, profile: Profile, image: str = IMAGE) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": profile.replicas,
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                "maxSurge": MAX_SURGE, "maxUnavailable": MAX_UNAVAILABLE}},
            "leaderWorkerTemplate": {
                "size": profile.size,
                "leaderTemplate": _pod_template(name, "leader", image),
                "workerTemplate": _pod_template(name, "worker", image),
            },
        },
    }


def rolled_leaderworkerset_patch(image: str = ROLLED_IMAGE) -> dict[str, Any]:
    """A merge patch changing both templates' image: one rolling update."""
    container = {"containers": [{"name": "model", "image": image,
                                 "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}
    return {"spec": {"leaderWorkerTemplate": {"leaderTemplate": {"spec": container},
                                              "workerTemplate": {"spec": container}}}}


def pod_names(name: str, profile: Profile) -> frozenset[str]:
    """The pods of set ``name`` once it is complete, the same on both sides: leaders
    ``<name>-<group>``, workers ``<name>-<group>-<1..size-1>``. A phase is done when exactly
    these exist; a count alone can be met mid-rollout by a surge group standing in for one
    being replaced."""
    leaders = [f"{name}-{group}" for group in range(profile.replicas)]
    return frozenset([*leaders, *(f"{leader}-{worker}" for leader in leaders
                                  for worker in range(1, profile.size))])


def _statefulset(name: str, set_: str, role: str, replicas: int, max_unavailable: int | str,
                 service: str, image: str, first_ordinal: int = 0) -> dict[str, Any]:
    selector = {SET_LABEL: set_, ROLE_LABEL: role, "bench.lws-operator.dev/sts": name}
    template = _pod_template(set_, role, image)
    template["metadata"]["labels"].update(selector)
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "labels": {SET_LABEL: set_}},
        "spec": {
            "replicas": replicas,
            "serviceName": service,
            "podManagementPolicy": "Parallel",
            "ordinals": {"start": first_ordinal},
            "selector": {"matchLabels": selector},
            "updateStrategy": {"type": "RollingUpdate",
                               "rollingUpdate": {"maxUnavailable": max_unavailable}},
            "template": template,
        },
    }


def baseline(name: str, profile: Profile, image: str = IMAGE) -> list[dict[str, Any]]:
    """The plain objects standing in for LeaderWorkerSet ``name``: Service, leader
    StatefulSet, one worker StatefulSet per group."""
    service = {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "labels": {SET_LABEL: name}},
        "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                 "selector": {SET_LABEL: name}},
    }
    objects = [service, _statefulset(name, name, "leader", profile.replicas,
                                     MAX_SURGE + MAX_UNAVAILABLE, name, image)]
    objects += [_statefulset(f"{name}-{group}", name, "worker", profile.size - 1, "100%", name,
                             image, first_ordinal=1) for group in range(profile.replicas)]
    return objects


def rolled_statefulset_patch(image: str = ROLLED_IMAGE) -> dict[str, Any]:
    return {"spec": {"template": {"spec": {"containers": [{"name": "model", "image": image}]}}}}
