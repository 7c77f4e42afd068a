"""Hypothesis strategies over the whole LeaderWorkerSet spec (the bad-input fuzzing).

Two kinds of cases come out of here, both plain dicts ready to send to the API server:

* :class:`ValidCase`: a spec every layer (CRD schema, defaulting and validating webhooks) must
  accept and the operator must realise. Every field of ``spec`` is drawn: replicas, size,
  restartPolicy, maxGroupRestarts, restartBackoff, subGroupPolicy, both pod templates,
  volumeClaimTemplates and their retention policy, rolloutStrategy (type, maxUnavailable and
  maxSurge as ints or percents, partition), startupPolicy, networkConfig.subdomainPolicy,
  groupIdentity, groupReplacementPolicy, podTerminationPolicy, native gang scheduling at each of
  its three levels, and the two placement annotations the LWS docs give meaning to
  (exclusive-topology and subgroup-exclusive-topology). The draws are kept *schedulable* on the
  kwok nodes (16 GPU nodes of 8 ``nvidia.com/gpu`` in racks of 4, two zones, plus 4 TPU nodes):
  small groups, at most 8 GPUs per case, exclusive placement only with as many topology domains
  as groups (surge included), so "valid" can be held to "becomes Available". A case may carry
  an :class:`Update`: a valid one (scale, resize, new image, rollout settings, ...) that must
  converge again, or an invalid one (an immutable field, a broken value) that must be rejected.
* :class:`InvalidCase`: a valid spec changed by exactly ONE targeted mutation (see
  ``MUTATIONS``), with the field path the rejection must name and the layer expected to reject
  it (``schema``: the CRD's OpenAPI schema in the API server; ``webhook``: our validating
  webhook, whose rules are pure and cross-checked against ``lws_operator.api.validation``).

Names are drawn too (DNS-1035 labels of every length the API allows, shorter under Hash
identity). The test gives each valid case a namespace of its own, so names may repeat.
"""

from __future__ import annotations

import copy
import string
from dataclasses import dataclass, field
from typing import Any, Literal

from hypothesis import strategies as st

from lws_operator.api.constants import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    HASH_MODE_NAME_LIMIT,
    HASH_MODE_NAME_LIMIT_SIZE_ONE,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
)

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
LWT = "spec.leaderWorkerTemplate"
RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
SGS = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
Layer = Literal["schema", "webhook", "api"]

# Topology keys of the kwok nodes and how many domains each has (e2e/cluster/nodes.py: 16 GPU
# nodes in racks of 4 over two zones, each rack its own node pool, plus one TPU rack/pool of 4).
DOMAINS = {
    "kubernetes.io/hostname": 20,
    "topology.kubernetes.io/rack": 5,
    "topology.kubernetes.io/zone": 2,
    "cloud.google.com/gke-nodepool": 5,
}
MAX_GPUS_PER_CASE = 8  # a batch of 8 cases takes at most half the 128 GPUs: never fragmented out
IMAGES = ("engine:v1", "engine:v2", "nginx:1.27", "registry.local:5000/team/model-server:2026.11")
NAME_ALPHABET = string.ascii_lowercase + string.digits + "-"


# ------------------------------------------------------------------------------ valid specs


@dataclass(frozen=True)
class Update:
    """A change applied (as a JSON merge patch) to a converged case."""

    label: str
    patch: dict[str, Any]
    path: str | None = None  # the field an invalid update must be rejected at; None: valid
    replicas: int = 0  # after a valid update
    size: int = 0
    subresource: str | None = None  # "scale": sent to the scale subresource
    updated: int | None = None  # groups on the new revision after it; None: all of them


@dataclass(frozen=True)
class ValidCase:
    body: dict[str, Any]
    replicas: int  # effective (after defaulting)
    size: int
    hashed: bool
    features: tuple[str, ...] = ()  # what the case exercises, for the closing counts
    update: Update | None = None


@dataclass(frozen=True)
class InvalidCase:
    body: dict[str, Any]
    mutation: str
    path: str  # must appear in the rejection message
    layer: Layer  # who is expected to reject it
    origin: dict[str, Any] = field(default_factory=dict, compare=False)  # the valid spec


def dns_label(min_size: int = 1, max_size: int = 63) -> st.SearchStrategy[str]:
    """A DNS-1035 label: a letter, then letters/digits/'-', ending alphanumeric."""

    @st.composite
    def build(draw: st.DrawFn) -> str:
        length = draw(st.integers(min_size, max_size))
        first = draw(st.sampled_from(string.ascii_lowercase))
        if length == 1:
            return first
        middle = draw(st.text(NAME_ALPHABET, min_size=length - 2, max_size=length - 2))
        last = draw(st.sampled_from(string.ascii_lowercase + string.digits))
        return first + middle + last

    return build()


def percent_or_int(total: int, low: int = 0) -> st.SearchStrategy[int | str]:
    return st.one_of(st.integers(low, max(low, total + 1)),
                     st.sampled_from([0, 1, 2]).map(lambda n: max(n, low)),
                     st.integers(low, 100).map(lambda p: f"{p}%"))


def scaled(value: int | str, total: int, round_up: bool) -> int:
    if isinstance(value, int):
        return value
    exact = int(value[:-1]) * total
    return -(-exact // 100) if round_up else exact // 100


@st.composite
def container(draw: st.DrawFn, name: str, gpus: int) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "image": draw(st.sampled_from(IMAGES))}
    resources: dict[str, Any] = {}
    if draw(st.booleans()):
        resources["requests"] = {"cpu": draw(st.sampled_from(["10m", "100m", "250m"])),
                                 "memory": draw(st.sampled_from(["16Mi", "64Mi", "128Mi"]))}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if resources:
        out["resources"] = resources
    if draw(st.booleans()):
        out["env"] = [{"name": "MODEL", "value": draw(st.sampled_from(["llama", "", "a=b"]))}]
    if draw(st.booleans()):
        out["ports"] = [{"containerPort": draw(st.integers(1, 65535)), "protocol": "TCP"}]
    if draw(st.booleans()):
        out["args"] = draw(st.lists(st.text(string.printable, max_size=8), max_size=3))
    return out


@st.composite
def pod_template(draw: st.DrawFn, gpus: int, role: str) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(["main", "engine", "sidecar", "proxy", "w-0"]),
                          min_size=1, max_size=2, unique=True))
    spec: dict[str, Any] = {
        "containers": [draw(container(n, gpus if i == 0 else 0)) for i, n in enumerate(names)]}
    if draw(st.booleans()):
        spec["terminationGracePeriodSeconds"] = draw(st.integers(0, 5))
    if draw(st.booleans()):
        spec["initContainers"] = [{"name": "init", "image": "busybox:1"}]
    if draw(st.booleans()):
        spec["tolerations"] = [{"key": "example.com/spot", "operator": "Exists"}]
    meta: dict[str, Any] = {}
    if draw(st.booleans()):
        meta["labels"] = {"app": role, "team.example.com/tier": draw(st.sampled_from(
            ["a", "b-1", "x.y"]))}
    if draw(st.booleans()):
        meta["annotations"] = {"example.com/note": draw(st.text(string.printable, max_size=20))}
    with_meta: bool = bool(meta) or draw(st.booleans())
    return {"metadata": meta, "spec": spec} if with_meta else {"spec": spec}


def subgroup_sizes(size: int, policy: str) -> list[int]:
    """Every valid subGroupSize for ``size`` under ``policy`` (LWS docs "SubGroup Sizing")."""
    out = []
    for sgs in range(1, size + 1):
        fits = size % sgs == 0 or (size - 1) % sgs == 0
        if policy == "LeaderExcluded":
            fits = (size - 1) % sgs == 0
        if fits:
            out.append(sgs)
    return out


def subgroup_count(size: int, sgs: int, policy: str) -> int:
    """How many subgroups a group has (each needs a domain of its own when exclusive)."""
    if policy == "LeaderExcluded":
        return max(1, (size - 1) // sgs)
    return size // sgs if size % sgs == 0 else max(1, (size - 1) // sgs)


@st.composite
def valid_cases(draw: st.DrawFn, with_update: bool = True,
                hashed: bool | None = None) -> ValidCase:
    features: list[str] = []
    if hashed is None:
        hashed = draw(st.booleans())
    identity_field = draw(st.sampled_from(["set", "absent"])) if not hashed else "set"
    replicas_field = draw(st.one_of(st.none(), st.integers(0, 3)))
    replicas = 1 if replicas_field is None else replicas_field
    size_field = draw(st.one_of(st.none(), st.integers(1, 4)))
    size = 1 if size_field is None else size_field

    spec: dict[str, Any] = {}
    lwt: dict[str, Any] = {}
    annotations: dict[str, str] = {}
    if replicas_field is not None:
        spec["replicas"] = replicas_field
    if size_field is not None:
        lwt["size"] = size_field
    features += [f"replicas={replicas}", f"size={size}"]
    if hashed or identity_field == "set":
        spec["groupIdentity"] = "Hash" if hashed else "Ordinal"
        features.append(f"groupIdentity={spec['groupIdentity']}")

    # Rollout: maxUnavailable/maxSurge as ints or percents, never both zero with replicas > 0.
    surge = 0
    if draw(st.booleans()):
        config: dict[str, Any] = {}
        if draw(st.booleans()):
            config["maxUnavailable"] = draw(percent_or_int(replicas))
        if draw(st.booleans()):
            config["maxSurge"] = draw(percent_or_int(replicas))
        if not hashed and draw(st.booleans()):
            config["partition"] = draw(st.integers(0, 4))
        elif hashed and draw(st.booleans()):
            config["partition"] = 0
        unavailable = scaled(config.get("maxUnavailable", 1), replicas, False)
        surge = min(scaled(config.get("maxSurge", 0), replicas, True), replicas)
        if unavailable == 0 and surge == 0 and replicas:
            config["maxUnavailable"] = 1
        strategy: dict[str, Any] = {"type": "RollingUpdate"}
        with_config: bool = bool(config) or draw(st.booleans())
        if with_config:
            strategy["rollingUpdateConfiguration"] = config
        spec["rolloutStrategy"] = strategy
        features.append("rolloutStrategy")

    # Failure handling: maxGroupRestarts and restartBackoff only with a recreating policy.
    restart = draw(st.sampled_from([None, "RecreateGroupOnPodRestart", "RecreateGroupAfterStart",
                                    "None", "Default"]))
    if restart is not None:
        lwt["restartPolicy"] = restart
        features.append(f"restartPolicy={restart}")
    if restart not in ("None", "Default"):
        if draw(st.booleans()):
            lwt["maxGroupRestarts"] = draw(st.integers(0, 5))
            features.append("maxGroupRestarts")
        if draw(st.booleans()):
            backoff: dict[str, Any] = {}
            base = draw(st.one_of(st.none(), st.integers(0, 30)))
            if base is not None:
                backoff["baseSeconds"] = base
            if draw(st.booleans()):
                backoff["capSeconds"] = draw(st.integers(10 if base is None else base, 600))
            lwt["restartBackoff"] = backoff
            features.append("restartBackoff")

    # Subgroups (immutable presence and size) and the two placement annotations.
    subgroups = 1
    sg_policy = "LeaderWorker"
    if draw(st.integers(0, 3)) == 0:
        sg_policy = draw(st.sampled_from(["LeaderWorker", "LeaderExcluded"]))
        sgs = draw(st.sampled_from(subgroup_sizes(size, sg_policy)))
        policy: dict[str, Any] = {"subGroupSize": sgs}
        if sg_policy == "LeaderExcluded" or draw(st.booleans()):
            policy["subGroupPolicyType"] = sg_policy
        lwt["subGroupPolicy"] = policy
        subgroups = subgroup_count(size, sgs, sg_policy)
        features.append(f"subGroupPolicy={sg_policy}")

    groups = replicas + surge + 1  # +1: a scale-up update may add a group
    placement = draw(st.sampled_from(["none", "none", "exclusive", "subgroup"]))
    if placement == "exclusive":
        keys = [k for k, n in DOMAINS.items() if n >= groups]
        if keys:
            annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION] = draw(st.sampled_from(keys))
            features.append("exclusive-topology")
    elif placement == "subgroup" and "subGroupPolicy" in lwt:
        keys = [k for k, n in DOMAINS.items() if n >= groups * subgroups]
        if keys:
            annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION] = draw(st.sampled_from(keys))
            features.append("subgroup-exclusive-topology")

    # Native gang scheduling, not with exclusive-topology or LeaderReady (LWS docs, "Gang
    # Scheduling").
    scheduled = (EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations
                 and draw(st.integers(0, 4)) == 0)
    if scheduled:
        level = draw(st.sampled_from(["empty", "replica", "lws", "role"]))
        policy_value = draw(st.sampled_from([{"gang": {}}, {"basic": {}},
                                             {"gang": {"minCount": 1}}]))
        if level == "empty":
            spec["scheduling"] = {}
        elif level == "replica":
            spec["scheduling"] = {"replica": {"schedulingPolicy": policy_value}}
        elif level == "lws":
            spec["scheduling"] = {"schedulingPolicy": policy_value}
        else:
            roles = draw(st.lists(st.sampled_from(["leader", "worker"]), min_size=1,
                                  max_size=2, unique=True))
            spec["scheduling"] = {"replica": {r: {"schedulingPolicy": policy_value}
                                              for r in roles}}
        features.append(f"scheduling={level}")

    startup = draw(st.sampled_from([None, "LeaderCreated", "LeaderReady"]))
    if scheduled and startup == "LeaderReady":
        startup = "LeaderCreated"
    if startup is not None:
        spec["startupPolicy"] = startup
        features.append(f"startupPolicy={startup}")
    subdomain = draw(st.sampled_from([None, "Shared", "UniquePerReplica"]))
    if subdomain is not None:
        spec["networkConfig"] = {"subdomainPolicy": subdomain}
        features.append(f"subdomainPolicy={subdomain}")
    termination = draw(st.sampled_from([None, "Sequential", "Parallel"]))
    if termination is not None:
        spec["podTerminationPolicy"] = termination
        features.append(f"podTerminationPolicy={termination}")
    replacement = draw(st.sampled_from([None, "PostTermination"]
                                       + (["Immediate"] if hashed else [])))
    if replacement is not None:
        spec["groupReplacementPolicy"] = replacement
        features.append(f"groupReplacementPolicy={replacement}")

    # Templates: GPUs only without exclusive placement, and at most MAX_GPUS_PER_CASE in all.
    gpus = 0
    if not annotations and draw(st.booleans()):
        gpus = draw(st.sampled_from([1, 2]))
        if (replicas + surge + 1) * max(size, 2) * gpus > MAX_GPUS_PER_CASE:
            gpus = 0
    lwt["workerTemplate"] = draw(pod_template(gpus, "worker"))
    if draw(st.booleans()):
        lwt["leaderTemplate"] = draw(pod_template(gpus, "leader"))
        features.append("leaderTemplate")
    if gpus:
        features.append("gpus")
    if not hashed and draw(st.integers(0, 3)) == 0:
        claims = draw(st.lists(st.sampled_from(["cache", "scratch"]), min_size=1, max_size=2,
                               unique=True))
        lwt["volumeClaimTemplates"] = [
            {"metadata": {"name": c}, "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "1Gi"}}}}
            for c in claims]
        mounts = [{"name": c, "mountPath": f"/mnt/{c}"} for c in claims]
        for key in ("workerTemplate", "leaderTemplate"):
            if key in lwt:
                lwt[key]["spec"]["containers"][0]["volumeMounts"] = mounts
        if draw(st.booleans()):
            lwt["persistentVolumeClaimRetentionPolicy"] = {
                "whenDeleted": draw(st.sampled_from(["Retain", "Delete"])),
                "whenScaled": draw(st.sampled_from(["Retain", "Delete"]))}
        features.append("volumeClaimTemplates")

    # Ordinal: the StatefulSets are <name> and <name>-<group> (groups below 10 here), and the
    # StatefulSet controller creates no pod for a StatefulSet name over 52 characters (its
    # controller-revision-hash label value would pass 63). Validation accepts up to 63
    # (upstream's DNS-1035 rule), so such a set is accepted but never runs: reported when the
    # fuzzing landed, kept out of the cases that must converge.
    limit = 52 - len("-9")
    if hashed:
        limit = HASH_MODE_NAME_LIMIT_SIZE_ONE if size == 1 else HASH_MODE_NAME_LIMIT
    name = draw(dns_label(1, draw(st.sampled_from([8, 20, limit]))))
    spec["leaderWorkerTemplate"] = lwt
    metadata: dict[str, Any] = {"name": name}
    with_annotations: bool = bool(annotations) or draw(st.booleans())
    if with_annotations:
        metadata["annotations"] = {**annotations, "example.com/owner": "fuzz"}
    body = {"apiVersion": API, "kind": KIND, "metadata": metadata, "spec": spec}
    case = ValidCase(body, replicas, size, hashed, tuple(features))
    if with_update and draw(st.booleans()):
        update = draw(updates(case))
        case = ValidCase(body, replicas, size, hashed, tuple(features), update)
    return case


# ------------------------------------------------------------------------------------ updates


def _lwt(case: ValidCase) -> dict[str, Any]:
    return dict(case.body["spec"]["leaderWorkerTemplate"])


@st.composite
def updates(draw: st.DrawFn, case: ValidCase) -> Update:
    """One change to a converged case: valid ones keep it schedulable, invalid ones name the
    field they break (immutable fields above all: the update-only rules)."""
    spec, lwt = case.body["spec"], _lwt(case)
    annotations = case.body["metadata"].get("annotations") or {}
    sg = lwt.get("subGroupPolicy")
    sg_policy = (sg or {}).get("subGroupPolicyType", "LeaderWorker")
    exclusive = EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations
    valid: list[str] = ["image", "rollout", "startup", "replacement", "labels"]
    if not exclusive and SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations:
        valid += ["scale", "resize"]
    invalid = ["groupIdentity", "podTerminationPolicy", "size-zero", "replicas-negative",
               "subgroup-toggle", "scheduling-toggle", "scale-subresource-invalid"]
    if sg is not None:
        invalid.append("subgroup-size")
    kind = draw(st.sampled_from(valid + invalid))
    r, s = case.replicas, case.size
    # An Ordinal partition keeps the groups below it on the old revision through a template
    # change (the LWS docs' staged rollout), so fewer than all groups end up updated.
    partition = int(((spec.get("rolloutStrategy") or {}).get("rollingUpdateConfiguration")
                     or {}).get("partition") or 0)
    if kind == "image":
        template = copy.deepcopy(lwt["workerTemplate"])
        template["spec"]["containers"][0]["image"] = draw(st.sampled_from(
            [i for i in IMAGES if i != template["spec"]["containers"][0]["image"]]))
        return Update("image", {"spec": {"leaderWorkerTemplate": {"workerTemplate": template}}},
                      replicas=r, size=s, updated=r - min(partition, r))
    if kind == "rollout":
        config: dict[str, Any]
        if r == 0:
            config = {"maxUnavailable": draw(st.integers(0, 2)), "maxSurge": 0}
        else:
            config = {"maxUnavailable": draw(st.sampled_from([1, "50%", "100%"])),
                      "maxSurge": draw(st.sampled_from([0, 1, "25%"]))}
        if case.hashed or exclusive:
            config["maxSurge"] = 0
        if r and scaled(config["maxUnavailable"], r, False) == 0 and scaled(
                config["maxSurge"], r, True) == 0:
            config["maxUnavailable"] = 1
        return Update("rollout", {"spec": {"rolloutStrategy": {
            "type": "RollingUpdate", "rollingUpdateConfiguration": config}}}, replicas=r, size=s)
    if kind == "startup":
        value = "LeaderCreated" if "scheduling" in spec else draw(st.sampled_from(
            ["LeaderCreated", "LeaderReady"]))
        return Update("startupPolicy", {"spec": {"startupPolicy": value}}, replicas=r, size=s)
    if kind == "replacement":
        value = draw(st.sampled_from(["PostTermination", "Immediate"] if case.hashed
                                     else ["PostTermination"]))
        return Update("groupReplacementPolicy", {"spec": {"groupReplacementPolicy": value}},
                      replicas=r, size=s)
    if kind == "labels":
        return Update("metadata", {"metadata": {"labels": {"fuzz.example.com/touched": "yes"}}},
                      replicas=r, size=s)
    if kind == "scale":
        new = draw(st.sampled_from([n for n in range(0, 4) if n != r]))
        gpus = _gpus(lwt)
        if gpus and (new + 1) * max(s, 2) * gpus > MAX_GPUS_PER_CASE:
            new = max(0, r - 1)
        # Through the spec (both webhooks) or the scale subresource (no webhook, as HPA does).
        via = draw(st.sampled_from(["spec", "scale"]))
        return Update(f"scale via {via}", {"spec": {"replicas": new}}, replicas=new, size=s,
                      subresource="scale" if via == "scale" else None)
    if kind == "scale-subresource-invalid":
        bad = draw(st.one_of(st.integers(-1000, -1), st.integers(1_000_001, 2**31 - 1)))
        return Update("replicas via scale", {"spec": {"replicas": bad}}, "spec.replicas",
                      subresource="scale")
    if kind == "resize":
        sizes = [n for n in range(1, 5) if n != s]
        if sg is not None:
            sgs = sg["subGroupSize"]
            sizes = [n for n in sizes if sgs in subgroup_sizes(n, sg_policy)]
        gpus = _gpus(lwt)
        sizes = [n for n in sizes if not gpus or (r + 1) * max(n, 2) * gpus <= MAX_GPUS_PER_CASE]
        if not sizes:
            return Update("metadata", {"metadata": {"labels": {"fuzz.example.com/t": "1"}}},
                          replicas=r, size=s)
        new = draw(st.sampled_from(sizes))
        patch: dict[str, Any] = {"spec": {"leaderWorkerTemplate": {"size": new}}}
        if partition:
            # Every group resized, so every group has the new size: the partition is lifted
            # in the same write (a staged resize is left to the rollout tests).
            patch["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"partition": 0}}
        return Update("resize", patch, replicas=r, size=new)
    if kind == "groupIdentity":
        value = "Ordinal" if case.hashed else "Hash"
        return Update("groupIdentity", {"spec": {"groupIdentity": value}}, "spec.groupIdentity")
    if kind == "podTerminationPolicy":
        value = "Sequential" if spec.get("podTerminationPolicy") == "Parallel" else "Parallel"
        return Update("podTerminationPolicy", {"spec": {"podTerminationPolicy": value}},
                      "spec.podTerminationPolicy")
    if kind == "size-zero":
        return Update("size", {"spec": {"leaderWorkerTemplate": {"size": draw(
            st.integers(-3, 0))}}}, f"{LWT}.size")
    if kind == "replicas-negative":
        return Update("replicas", {"spec": {"replicas": draw(st.integers(-5, -1))}},
                      "spec.replicas")
    if kind == "subgroup-toggle":
        toggled = None if sg is not None else {"subGroupSize": 1}
        return Update("subGroupPolicy", {"spec": {"leaderWorkerTemplate": {
            "subGroupPolicy": toggled}}}, SGS)
    if kind == "subgroup-size":
        assert sg is not None
        return Update("subGroupSize", {"spec": {"leaderWorkerTemplate": {"subGroupPolicy": {
            "subGroupSize": sg["subGroupSize"] + s}}}}, SGS)
    scheduling: dict[str, Any] | None = None if "scheduling" in spec else {}
    return Update("scheduling", {"spec": {"scheduling": scheduling}}, "spec.scheduling")


def _gpus(lwt: dict[str, Any]) -> int:
    limits = (lwt["workerTemplate"]["spec"]["containers"][0].get("resources") or {}).get(
        "limits") or {}
    return int(limits.get("nvidia.com/gpu", 0))


# ---------------------------------------------------------------------------------- mutations


def _set(body: dict[str, Any], path: str, value: Any) -> None:
    """Set ``spec.a.b`` (dot path, creating dicts) to ``value``."""
    keys = path.split(".")
    obj = body
    for key in keys[:-1]:
        if not isinstance(obj.get(key), dict):
            obj[key] = {}
        obj = obj[key]
    obj[keys[-1]] = value


WRONG_TYPES: tuple[Any, ...] = ("seven", 1.5, True, [1], {"a": 1})
ENUMS: dict[str, tuple[str, ...]] = {
    "spec.startupPolicy": ("LeaderCreated", "LeaderReady"),
    "spec.groupIdentity": ("Ordinal", "Hash"),
    "spec.groupReplacementPolicy": ("PostTermination", "Immediate"),
    "spec.podTerminationPolicy": ("Sequential", "Parallel"),
    "spec.networkConfig.subdomainPolicy": ("Shared", "UniquePerReplica"),
    "spec.rolloutStrategy.type": ("RollingUpdate",),
    f"{LWT}.restartPolicy": ("Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart",
                             "None"),
    f"{LWT}.subGroupPolicy.subGroupPolicyType": ("LeaderWorker", "LeaderExcluded"),
}
OBJECT_FIELDS = ("spec.rolloutStrategy", "spec.networkConfig", "spec.scheduling",
                 f"{LWT}.subGroupPolicy", f"{LWT}.restartBackoff",
                 f"{LWT}.persistentVolumeClaimRetentionPolicy", f"{LWT}.workerTemplate",
                 f"{LWT}.leaderTemplate", "spec.rolloutStrategy.rollingUpdateConfiguration")


def bad_enum(allowed: tuple[str, ...]) -> st.SearchStrategy[str]:
    near = [a.lower() for a in allowed] + [a + " " for a in allowed] + ["Unknown", "null"]
    return st.one_of(st.sampled_from(near),
                     st.text(string.ascii_letters, min_size=1, max_size=12)).filter(
        lambda v: v not in allowed)


def bad_int_or_percent() -> st.SearchStrategy[Any]:
    return st.one_of(st.integers(-100, -1), st.integers(101, 1000).map(lambda p: f"{p}%"),
                     st.sampled_from(["abc", "5", "-5%", "1.5%", "%", "50 %", "ten%"]))


INVALID_KINDS = ("replicas-range", "replicas-type", "size-range", "size-type", "product",
                 "enum", "int-or-percent", "both-zero", "partition", "name", "object-type",
                 "restart-budget", "backoff", "container-name", "containers-type",
                 "worker-template-missing", "retention", "vct-type", "subgroup-annotation",
                 "immediate", "hash-vct", "hash-partition", "hash-name", "subgroup-size",
                 "gang")


@st.composite
def invalid_cases(draw: st.DrawFn,
                  kind: str | None = None) -> InvalidCase:
    """A valid spec plus ONE targeted mutation (of ``kind``, one of ``INVALID_KINDS``, drawn
    when None), the field it breaks and who must say so."""
    hash_only = kind in ("hash-vct", "hash-partition", "hash-name")
    base = draw(valid_cases(with_update=False, hashed=True if hash_only else (
        False if kind == "immediate" else None)))
    body = copy.deepcopy(base.body)
    spec, lwt = body["spec"], body["spec"]["leaderWorkerTemplate"]
    annotations = body["metadata"].setdefault("annotations", {})
    hashed, size, replicas = base.hashed, base.size, base.replicas
    if kind is None:
        kind = draw(st.sampled_from(INVALID_KINDS))
    if kind == "subgroup-annotation" and "subGroupPolicy" in lwt:
        kind = "subgroup-size"
    if kind == "immediate" and hashed:
        kind = "hash-vct"
    if kind in ("hash-vct", "hash-partition", "hash-name") and not hashed:
        kind = "immediate"
    if kind == "both-zero" and replicas == 0:
        kind = "partition"

    def out(mutation: str, path: str, layer: Layer) -> InvalidCase:
        return InvalidCase(body, mutation, path, layer, base.body)

    if kind == "replicas-range":
        spec["replicas"] = draw(st.one_of(st.integers(-(2**31), -1),
                                          st.integers(1_000_001, 2**31 - 1)))
        return out("replicas out of [0, 1000000]", "spec.replicas", "schema")
    if kind == "replicas-type":
        spec["replicas"] = draw(st.sampled_from((*WRONG_TYPES, 2**40)))
        return out("replicas of the wrong type", "spec.replicas", "schema")
    if kind == "size-range":
        lwt["size"] = draw(st.integers(-(2**31), 0))
        lwt.pop("subGroupPolicy", None)
        annotations.pop(SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION, None)
        return out("size < 1", f"{LWT}.size", "webhook")
    if kind == "size-type":
        lwt["size"] = draw(st.sampled_from((*WRONG_TYPES, 2**35)))
        return out("size of the wrong type", f"{LWT}.size", "schema")
    if kind == "product":
        spec["replicas"] = draw(st.integers(2148, 1_000_000))
        lwt["size"] = draw(st.integers(2**31 // spec["replicas"] + 1, 2**31 - 1))
        lwt.pop("subGroupPolicy", None)
        annotations.pop(SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION, None)
        spec.pop("scheduling", None)
        return out("replicas * size > 2^31-1", "spec.replicas", "webhook")
    if kind == "enum":
        path = draw(st.sampled_from(sorted(ENUMS)))
        if path.endswith("subGroupPolicyType") and "subGroupPolicy" not in lwt:
            lwt["subGroupPolicy"] = {"subGroupSize": 1}
        _set(body, path, draw(bad_enum(ENUMS[path])))
        if path == "spec.rolloutStrategy.type":
            spec["rolloutStrategy"].pop("rollingUpdateConfiguration", None)
        return out(f"unknown {path.rsplit('.', 1)[-1]}", path, "schema")
    if kind == "int-or-percent":
        key = draw(st.sampled_from(["maxUnavailable", "maxSurge"]))
        _set(body, f"{RUC}.{key}", draw(bad_int_or_percent()))
        spec["rolloutStrategy"]["type"] = "RollingUpdate"
        return out(f"bad {key}", f"{RUC}.{key}", "webhook")
    if kind == "both-zero":
        zero = draw(st.sampled_from([0, "0%"]))
        _set(body, f"{RUC}.maxUnavailable", zero)
        _set(body, f"{RUC}.maxSurge", draw(st.sampled_from([0, "0%"])))
        spec["rolloutStrategy"]["type"] = "RollingUpdate"
        return out("maxUnavailable and maxSurge both 0", f"{RUC}.maxUnavailable", "webhook")
    if kind == "partition":
        _set(body, f"{RUC}.partition", draw(st.integers(-(2**31), -1)))
        spec["rolloutStrategy"]["type"] = "RollingUpdate"
        return out("negative partition", f"{RUC}.partition", "webhook")
    if kind == "name":
        name = draw(st.one_of(
            dns_label(1, 62).map(lambda n: "1" + n),  # starts with a digit
            st.tuples(dns_label(1, 20), dns_label(1, 20)).map(lambda t: f"{t[0]}.{t[1]}"),
            dns_label(64, 120),  # too long for a Service name
            dns_label(1, 40).map(lambda n: n + "-"),  # ends with '-': also a bad subdomain
        ))
        body["metadata"]["name"] = name
        return out("name not a DNS-1035 label", "metadata.name",
                   "api" if name.endswith("-") else "webhook")
    if kind == "object-type":
        path = draw(st.sampled_from(OBJECT_FIELDS))
        value = draw(st.sampled_from(["x", 5, [1, 2], True]))
        _set(body, path, value)
        return out(f"{path.rsplit('.', 1)[-1]} not an object", path, "schema")
    if kind == "restart-budget":
        if draw(st.booleans()):
            lwt["maxGroupRestarts"] = draw(st.integers(-(2**31), -1))
            lwt["restartPolicy"] = "RecreateGroupOnPodRestart"
            lwt.pop("restartBackoff", None)
            return out("negative maxGroupRestarts", f"{LWT}.maxGroupRestarts", "schema")
        lwt["maxGroupRestarts"] = draw(st.integers(0, 10))
        lwt["restartPolicy"] = draw(st.sampled_from(["None", "Default"]))
        lwt.pop("restartBackoff", None)
        return out("maxGroupRestarts with restartPolicy None", f"{LWT}.maxGroupRestarts",
                   "webhook")
    if kind == "backoff":
        lwt.pop("maxGroupRestarts", None)
        choice = draw(st.sampled_from(["negative", "cap-below-base", "policy-none"]))
        if choice == "negative":
            key = draw(st.sampled_from(["baseSeconds", "capSeconds"]))
            lwt["restartPolicy"] = "RecreateGroupOnPodRestart"
            lwt["restartBackoff"] = {key: draw(st.integers(-1000, -1))}
            return out(f"negative {key}", f"{LWT}.restartBackoff.{key}", "schema")
        if choice == "cap-below-base":
            base_s = draw(st.integers(1, 600))
            lwt["restartPolicy"] = "RecreateGroupAfterStart"
            lwt["restartBackoff"] = {"baseSeconds": base_s,
                                     "capSeconds": draw(st.integers(0, base_s - 1))}
            return out("capSeconds < baseSeconds", f"{LWT}.restartBackoff.capSeconds",
                       "webhook")
        lwt["restartPolicy"] = draw(st.sampled_from(["None", "Default"]))
        lwt["restartBackoff"] = {}
        return out("restartBackoff with restartPolicy None", f"{LWT}.restartBackoff",
                   "webhook")
    if kind == "container-name":
        key = draw(st.sampled_from(["workerTemplate", "leaderTemplate"]))
        if key not in lwt:
            lwt[key] = copy.deepcopy(lwt["workerTemplate"])
        del lwt[key]["spec"]["containers"][0]["name"]
        return out("container without a name", f"{LWT}.{key}.spec.containers[0].name", "schema")
    if kind == "containers-type":
        lwt["workerTemplate"]["spec"]["containers"] = draw(st.sampled_from(
            ["main", {"name": "main"}, 3]))
        return out("containers not a list", f"{LWT}.workerTemplate.spec.containers", "schema")
    if kind == "worker-template-missing":
        del lwt["workerTemplate"]
        return out("no workerTemplate", f"{LWT}.workerTemplate", "schema")
    if kind == "retention":
        key = draw(st.sampled_from(["whenDeleted", "whenScaled"]))
        policy = dict(lwt.get("persistentVolumeClaimRetentionPolicy") or {})
        policy[key] = draw(bad_enum(("Retain", "Delete")))
        lwt["persistentVolumeClaimRetentionPolicy"] = policy
        return out(f"unknown {key}", f"{LWT}.persistentVolumeClaimRetentionPolicy.{key}",
                   "webhook")
    if kind == "vct-type":
        lwt["volumeClaimTemplates"] = [draw(st.sampled_from(["cache", 1, ["x"]]))]
        return out("volumeClaimTemplates item not an object", f"{LWT}.volumeClaimTemplates[0]",
                   "schema")
    if kind == "subgroup-annotation":
        annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION] = draw(st.sampled_from(
            sorted(DOMAINS)))
        return out("subgroup-exclusive-topology without subGroupPolicy",
                   f"metadata.annotations.{SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}", "webhook")
    if kind == "immediate":
        spec["groupReplacementPolicy"] = "Immediate"
        return out("Immediate with Ordinal identity", "spec.groupReplacementPolicy", "webhook")
    if kind == "hash-vct":
        lwt["volumeClaimTemplates"] = [{"metadata": {"name": "cache"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
        return out("volumeClaimTemplates with Hash identity", f"{LWT}.volumeClaimTemplates",
                   "webhook")
    if kind == "hash-partition":
        _set(body, f"{RUC}.partition", draw(st.integers(1, 2**31 - 1)))
        spec["rolloutStrategy"]["type"] = "RollingUpdate"
        return out("partition with Hash identity", f"{RUC}.partition", "webhook")
    if kind == "hash-name":
        limit = HASH_MODE_NAME_LIMIT_SIZE_ONE if size == 1 else HASH_MODE_NAME_LIMIT
        body["metadata"]["name"] = draw(dns_label(limit + 1, 63))
        return out("name too long for Hash identity", "metadata.name", "webhook")
    if kind == "subgroup-size":
        policy_type = draw(st.sampled_from(["LeaderWorker", "LeaderExcluded"]))
        bad = [n for n in range(-2, size + 4) if n not in subgroup_sizes(size, policy_type)]
        sgs: Any = draw(st.one_of(st.sampled_from(bad), st.none()))
        lwt["subGroupPolicy"] = {"subGroupSize": sgs, "subGroupPolicyType": policy_type}
        return out("subGroupSize that does not fit size", SGS, "webhook")
    return draw(gang_mutation(body, base, out))


@st.composite
def gang_mutation(draw: st.DrawFn, body: dict[str, Any], base: ValidCase,
                  out: Any) -> InvalidCase:
    """The LWS docs' gang-scheduling restrictions, each broken alone."""
    spec, lwt = body["spec"], body["spec"]["leaderWorkerTemplate"]
    annotations = body["metadata"].setdefault("annotations", {})
    annotations.pop(EXCLUSIVE_TOPOLOGY_ANNOTATION, None)
    if spec.get("startupPolicy") == "LeaderReady":
        spec["startupPolicy"] = "LeaderCreated"
    choice = draw(st.sampled_from(["leader-ready", "exclusive", "scheduling-group", "mixed",
                                   "basic-and-gang", "min-count", "claims", "priority"]))
    if choice == "mixed":
        spec["scheduling"] = {"schedulingPolicy": {"gang": {}},
                              "replica": {"schedulingPolicy": {"gang": {}}}}
        return out("two scheduling levels", "spec.scheduling", "webhook")
    spec.setdefault("scheduling", {"replica": {"schedulingPolicy": {"gang": {}}}})
    if choice == "leader-ready":
        spec["startupPolicy"] = "LeaderReady"
        return out("LeaderReady with gang scheduling", "spec.startupPolicy", "webhook")
    if choice == "exclusive":
        annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION] = draw(st.sampled_from(sorted(DOMAINS)))
        return out("exclusive-topology with gang scheduling",
                   f"metadata.annotations.{EXCLUSIVE_TOPOLOGY_ANNOTATION}", "webhook")
    if choice == "scheduling-group":
        key = draw(st.sampled_from(["workerTemplate", "leaderTemplate"]))
        if key not in lwt:
            lwt[key] = copy.deepcopy(lwt["workerTemplate"])
        lwt[key]["spec"]["schedulingGroup"] = {"podGroupName": "mine"}
        return out("schedulingGroup in a template", f"{LWT}.{key}.spec.schedulingGroup",
                   "webhook")
    if choice == "priority":
        lwt["leaderTemplate"] = copy.deepcopy(lwt["workerTemplate"])
        lwt["leaderTemplate"]["spec"]["priorityClassName"] = draw(dns_label(1, 30))
        return out("leader and worker priority classes differ",
                   f"{LWT}.leaderTemplate.spec.priorityClassName", "webhook")
    spec["scheduling"] = {"replica": {}}
    settings = spec["scheduling"]["replica"]
    if choice == "basic-and-gang":
        settings["schedulingPolicy"] = {"basic": {}, "gang": {}}
        return out("basic and gang together", "spec.scheduling.replica.schedulingPolicy",
                   "webhook")
    if choice == "min-count":
        settings["schedulingPolicy"] = {"gang": {"minCount": draw(st.integers(-(2**31), 0))}}
        return out("gang.minCount < 1", "spec.scheduling.replica.schedulingPolicy.gang.minCount",
                   "webhook")
    settings["schedulingPolicy"] = {"gang": {}}
    settings["resourceClaims"] = [{"name": f"c{i}", "resourceClaimName": f"claim-{i}"}
                                  for i in range(draw(st.integers(5, 8)))]
    return out("more than 4 resourceClaims", "spec.scheduling.replica.resourceClaims", "webhook")
