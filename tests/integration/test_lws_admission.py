"""LeaderWorkerSet defaulting and validation through a real kube-apiserver (upstream's
test/integration/webhooks/leaderworkerset_test.go, the LWS docs).

The CRD is installed and our admission webhooks are registered by URL, confined to one namespace
per module; every object goes through the API server exactly as ``kubectl apply`` sends it, so
the tests see what users see: the stored, defaulted object, or the server's rejection message.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster import LocalCluster
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.kube import MERGE_PATCH, Kube
from tests.harness.api_answers import status, webhook_denial
from tests.harness.lws_bodies import ruc, set_fields, upstream_defaults

pytestmark = pytest.mark.api

REPO = Path(__file__).resolve().parents[2]
# Upstream's samples, as the repository keeps them (e2e/controllers/test_upstream_samples.py).
SAMPLES = REPO / "e2e" / "controllers" / "upstream_samples"
API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
SGS = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
# How the API server words a refusal by upstream's validating webhook (and ours).
DENIED = 'admission webhook "vleaderworkerset.kb.io" denied the request: '
# apimachinery's IsDNS1035Label message (validation.IsDNS1035Label's RegexError).
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
           "with an alphabetic character, and end with an alphanumeric character (e.g. "
           "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


def new_lws(name: str, **spec: Any) -> dict[str, Any]:
    """A minimal LWS; keyword ``t_<field>`` goes into ``leaderWorkerTemplate``."""
    body: dict[str, Any] = {
        "apiVersion": API, "kind": KIND, "metadata": {"name": name},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
            {"name": "main", "image": "nginx:1.27"}]}}}},
    }
    return set_fields(body, spec)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def rejection(exc: DynamicApiError) -> str:
    return str(status(exc).get("message", ""))


def denied_by_webhook(exc: DynamicApiError) -> str:
    return webhook_denial(exc, DENIED)


async def create(kube: Kube, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    return await kube.create(body, ns)


async def rejected(kube: Kube, ns: str, body: dict[str, Any]) -> str:
    """The validating webhook's message refusing to create ``body`` (nothing is stored)."""
    with pytest.raises(DynamicApiError) as exc:
        await kube.create(body, ns)
    assert await kube.get(API, KIND, body["metadata"]["name"], ns) is None, "half-applied"
    return denied_by_webhook(exc.value)


# ------------------------------------------------------------------------------- defaulting


async def test_minimal_object_is_defaulted(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    spec = (await create(kube, ns, new_lws(unique("min"))))["spec"]
    assert spec["replicas"] == 1
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["groupIdentity"] == "Ordinal"
    assert spec["podTerminationPolicy"] == "Sequential"
    assert spec["groupReplacementPolicy"] == "PostTermination"
    assert spec["rolloutStrategy"] == {"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "maxUnavailable": 1, "maxSurge": 0, "partition": 0}}
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert spec["leaderWorkerTemplate"]["size"] == 1
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert "scheduling" not in spec


@pytest.mark.parametrize(
    ("spec", "path", "expected"),
    [
        ({"t_restartPolicy": "Default"}, ("leaderWorkerTemplate", "restartPolicy"), "None"),
        ({"t_restartPolicy": "None"}, ("leaderWorkerTemplate", "restartPolicy"), "None"),
        ({"startupPolicy": "LeaderReady"}, ("startupPolicy",), "LeaderReady"),
        ({"replicas": 3, "t_size": 4}, ("leaderWorkerTemplate", "size"), 4),
        ({"rolloutStrategy": ruc(partition=2, maxUnavailable=2, maxSurge=1)},
         ("rolloutStrategy",), ruc(partition=2, maxUnavailable=2, maxSurge=1)),
        ({"t_restartBackoff": {}}, ("leaderWorkerTemplate", "restartBackoff"),
         {"baseSeconds": 10, "capSeconds": 300}),
        ({"t_restartBackoff": {"baseSeconds": 5}}, ("leaderWorkerTemplate", "restartBackoff"),
         {"baseSeconds": 5, "capSeconds": 300}),
        ({"t_size": 4, "t_subGroupPolicy": {"subGroupSize": 2}},
         ("leaderWorkerTemplate", "subGroupPolicy"),
         {"subGroupSize": 2, "subGroupPolicyType": "LeaderWorker"}),
        ({"scheduling": {}}, ("scheduling",), {"replica": {"schedulingPolicy": {"gang": {}}}}),
        ({"scheduling": {"replica": {"worker": {}}}}, ("scheduling",),
         {"replica": {"worker": {"schedulingPolicy": {"gang": {}}}}}),
        ({"groupIdentity": "Hash", "groupReplacementPolicy": "Immediate"},
         ("groupReplacementPolicy",), "Immediate"),
    ],
)
async def test_defaults_and_kept_values(admitted: tuple[Kube, str], spec: dict[str, Any],
                                        path: tuple[str, ...], expected: Any) -> None:
    kube, ns = admitted
    stored: Any = (await create(kube, ns, new_lws(unique("d"), **spec)))["spec"]
    for key in path:
        stored = stored[key]
    assert stored == expected


# ------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("name", "spec", "message"),
    [
        ("2cube", {}, f"metadata.name: Invalid value: \"2cube\": {DNS1035}"),
        ("ovf", {"replicas": 100000, "t_size": 1000000},
         "spec.replicas: Invalid value: 100000: the product of replicas and worker replicas must "
         "not exceed 2147483647"),
        ("neg-size", {"t_size": -1},
         "spec.leaderWorkerTemplate.size: Invalid value: -1: size must be equal or greater "
         "than 1"),
        ("neg-sgs", {"t_size": 4, "t_subGroupPolicy": {"subGroupSize": -1}},
         f"{SGS}: Invalid value: -1: subGroupSize must be equal or greater than 1"),
        ("zero-sgs", {"t_size": 4, "t_subGroupPolicy": {"subGroupSize": 0}},
         f"{SGS}: Invalid value: 0: subGroupSize must be equal or greater than 1"),
        ("big-sgs", {"t_size": 1, "t_subGroupPolicy": {"subGroupSize": 2}},
         f"{SGS}: Invalid value: 2: subGroupSize cannot be larger than size"),
        ("excluded", {"t_size": 4, "t_subGroupPolicy": {
            "subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}},
         f"{SGS}: Invalid value: 2: size-1 must be divisible by subGroupSize when using "
         "LeaderExcluded"),
        ("indivisible", {"t_size": 10, "t_subGroupPolicy": {"subGroupSize": 8}},
         f"{SGS}: Invalid value: 8: size or size - 1 must be divisible by subGroupSize"),
        # Upstream's webhook panics on these two (nil dereference, division by zero).
        ("empty-sgp", {"t_size": 4, "t_subGroupPolicy": {}},
         f"{SGS}: Invalid value: null: subGroupSize must be equal or greater than 1"),
        # Upstream adds "invalid value" and "must not be 0 when `maxSurge` is 0" to this one.
        ("bad-pct", {"rolloutStrategy": ruc(maxUnavailable="abc")},
         f"{RUC}.maxUnavailable: Invalid value: \"abc\": a valid percent string must be a "
         "numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for "
         "validation is '[0-9]+%')"),
        ("unavail", {"rolloutStrategy": ruc(maxUnavailable="200%")},
         f"{RUC}.maxUnavailable: Invalid value: \"200%\": must not be greater than 100%"),
        ("unavail-neg", {"rolloutStrategy": ruc(maxUnavailable=-1)},
         f"{RUC}.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"),
        ("surge", {"rolloutStrategy": ruc(maxSurge="101%")},
         f"{RUC}.maxSurge: Invalid value: \"101%\": must not be greater than 100%"),
        ("surge-neg", {"rolloutStrategy": ruc(maxSurge=-1)},
         f"{RUC}.maxSurge: Invalid value: -1: must be greater than or equal to 0"),
        ("both-zero", {"rolloutStrategy": ruc(maxUnavailable=0, maxSurge=0)},
         f"{RUC}.maxUnavailable: Invalid value: 0: must not be 0 when `maxSurge` is 0"),
        ("pct-zero", {"replicas": 2, "rolloutStrategy": ruc(maxUnavailable="25%", maxSurge=0)},
         f"{RUC}.maxUnavailable: Invalid value: \"25%\": must not be 0 when `maxSurge` is 0"),
        ("partition", {"rolloutStrategy": ruc(partition=-1)},
         f"{RUC}.partition: Invalid value: -1: must be greater than or equal to 0"),
        ("hash-vct", {"groupIdentity": "Hash", "t_volumeClaimTemplates": [{
            "metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]},
         "spec.leaderWorkerTemplate.volumeClaimTemplates: Forbidden: volumeClaimTemplates are "
         "not supported with groupIdentity Hash"),
        ("hash-partition", {"groupIdentity": "Hash", "rolloutStrategy": ruc(partition=1)},
         f"{RUC}.partition: Forbidden: partition is not supported with groupIdentity Hash"),
        ("immediate", {"groupReplacementPolicy": "Immediate"},
         "spec.groupReplacementPolicy: Invalid value: \"Immediate\": Immediate is only "
         "supported with groupIdentity Hash"),
        ("budget", {"t_restartPolicy": "None", "t_maxGroupRestarts": 2},
         "spec.leaderWorkerTemplate.maxGroupRestarts: Forbidden: maxGroupRestarts is not "
         "supported with restartPolicy None"),
        ("backoff", {"t_restartBackoff": {"baseSeconds": 60, "capSeconds": 30}},
         "spec.leaderWorkerTemplate.restartBackoff.capSeconds: Invalid value: 30: must be "
         "greater than or equal to baseSeconds (60)"),
        ("backoff-default-base", {"t_restartBackoff": {"capSeconds": 5}},
         "spec.leaderWorkerTemplate.restartBackoff.capSeconds: Invalid value: 5: must be "
         "greater than or equal to baseSeconds (10)"),
        ("gang-ready", {"scheduling": {}, "startupPolicy": "LeaderReady"},
         "spec.startupPolicy: Invalid value: \"LeaderReady\": LeaderReady is not supported with "
         "gang scheduling (spec.scheduling): the gang could never form"),
        ("a" * 44, {"groupIdentity": "Hash", "t_size": 2},
         "metadata.name: Invalid value: \"" + "a" * 44 + "\": must be no more than 43 "
         "characters with groupIdentity Hash"),
    ],
)
async def test_invalid_creations(admitted: tuple[Kube, str], name: str, spec: dict[str, Any],
                                 message: str) -> None:
    """Exactly the text upstream's webhook gives its users (envelope and message), one error."""
    kube, ns = admitted
    assert await rejected(kube, ns, new_lws(name, **spec)) == message


async def test_all_errors_are_reported_together(admitted: tuple[Kube, str]) -> None:
    """Several errors: one message, bracketed and comma-joined as apimachinery's aggregate."""
    kube, ns = admitted
    got = await rejected(kube, ns, new_lws("many", replicas=2, t_size=5, t_subGroupPolicy={
        "subGroupSize": 3}, rolloutStrategy=ruc(maxUnavailable="25%", maxSurge=0)))
    assert got == (f"[{RUC}.maxUnavailable: Invalid value: \"25%\": must not be 0 when "
                   f"`maxSurge` is 0, {SGS}: Invalid value: 3: size or size - 1 must be "
                   "divisible by subGroupSize]")
    got = await rejected(kube, ns, new_lws("sgs", t_size=2, t_subGroupPolicy={"subGroupSize": 3}))
    assert got == (f"[{SGS}: Invalid value: 3: size or size - 1 must be divisible by "
                   f"subGroupSize, {SGS}: Invalid value: 3: subGroupSize cannot be larger than "
                   "size]")


async def test_kubectl_prints_upstreams_refusal(admitted: tuple[Kube, str],
                                                lws_crd: LocalCluster) -> None:
    """What a user's terminal (and a script matching it) shows."""
    _kube, ns = admitted
    done = await kubectl_create(lws_crd, ns, new_lws("neg", t_size=-1))
    assert done.returncode == 1
    assert done.stderr == (
        'Error from server (Forbidden): error when creating "STDIN": ' + DENIED
        + "spec.leaderWorkerTemplate.size: Invalid value: -1: size must be equal or greater "
        "than 1\n")


async def test_enum_and_bounds_rejected_by_the_crd(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    for spec in ({"startupPolicy": "Whenever"}, {"replicas": 1000001},
                 {"t_restartPolicy": "Sometimes"}, {"groupIdentity": "Random"}):
        with pytest.raises(DynamicApiError) as exc:
            await kube.create(new_lws(unique("enum"), **spec), ns)
        assert exc.value.status == 422


@pytest.mark.parametrize(
    "spec",
    [
        {"replicas": 0, "rolloutStrategy": ruc(maxUnavailable="25%", maxSurge="25%")},
        {"replicas": 3, "rolloutStrategy": ruc(maxUnavailable=10, maxSurge=10)},
        {"replicas": 2, "rolloutStrategy": ruc(maxUnavailable=0, maxSurge=1)},
        {"replicas": 3, "rolloutStrategy": ruc(partition=5)},
        {"replicas": 3, "rolloutStrategy": ruc(partition=3)},
        {"t_size": 9, "t_subGroupPolicy": {"subGroupSize": 8,
                                           "subGroupPolicyType": "LeaderExcluded"}},
        {"groupIdentity": "Hash", "groupReplacementPolicy": "Immediate", "t_size": 3},
        {"t_maxGroupRestarts": 0, "t_restartBackoff": {"baseSeconds": 1, "capSeconds": 8}},
        {"scheduling": {"schedulingPolicy": {"gang": {}}}},
        {"networkConfig": {"subdomainPolicy": "UniquePerReplica"}},
    ],
)
async def test_valid_creations(admitted: tuple[Kube, str], spec: dict[str, Any]) -> None:
    kube, ns = admitted
    assert (await create(kube, ns, new_lws(unique("ok"), **spec)))["metadata"]["uid"]


async def kubectl_create(cluster: LocalCluster, ns: str,
                         body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    """``kubectl create`` as a user runs it: its stderr carries the server's warnings."""
    return await asyncio.to_thread(
        subprocess.run, [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig),
                         "create", "-n", ns, "-f", "-"],
        input=json.dumps(body), capture_output=True, text=True, check=False)


async def test_a_name_too_long_to_run_is_accepted_with_a_warning(
        admitted: tuple[Kube, str], lws_crd: LocalCluster) -> None:
    """kubectl prints the webhook's warning; the set is created all the same, as upstream
    creates it (its worker StatefulSet ``<name>-0`` would be 53 characters)."""
    kube, ns = admitted
    name = unique("w" * 44)  # 51 characters
    done = await kubectl_create(lws_crd, ns, new_lws(name, t_size=2))
    assert done.returncode == 0, done.stderr
    assert f"Warning: metadata.name: StatefulSet '{name}-0' would be 53 characters" \
        in done.stderr, done.stderr
    assert await kube.get(API, KIND, name, ns) is not None
    # A name that runs gets no warning.
    done = await kubectl_create(lws_crd, ns, new_lws(unique("short"), t_size=2))
    assert done.returncode == 0, done.stderr
    assert "Warning" not in done.stderr, done.stderr


async def test_upstream_samples_are_accepted_unchanged(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    samples = 0
    for path in sorted(SAMPLES.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc or doc.get("kind") != KIND:
                continue
            doc = copy.deepcopy(doc)
            doc["metadata"].pop("namespace", None)
            stored = await kube.create(doc, ns)
            for key in ("leaderTemplate", "workerTemplate"):
                sent = doc["spec"]["leaderWorkerTemplate"].get(key)
                if sent is None:
                    continue
                kept = stored["spec"]["leaderWorkerTemplate"][key]["spec"]["containers"]
                # Only the schema's list-key default (ports[].protocol: TCP) may be added.
                for container in kept:
                    for port in container.get("ports", []):
                        assert port.pop("protocol") == "TCP"
                assert kept == sent["spec"]["containers"]
            await kube.delete(API, KIND, doc["metadata"]["name"], ns)  # samples share names
            samples += 1
    assert samples == 4


# ---------------------------------------------------------------------------------- updates


async def update(kube: Kube, ns: str, name: str, patch: dict[str, Any]) -> dict[str, Any]:
    return await kube.patch(API, KIND, name, patch, ns, content_type=MERGE_PATCH)


async def update_rejected(kube: Kube, ns: str, name: str,
                          patch: dict[str, Any]) -> DynamicApiError:
    before = await kube.get(API, KIND, name, ns)
    with pytest.raises(DynamicApiError) as exc:
        await update(kube, ns, name, patch)
    after = await kube.get(API, KIND, name, ns)
    assert before is not None
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    return exc.value


@pytest.mark.parametrize(
    ("spec", "patch", "message"),
    [
        ({"t_size": 2}, {"spec": {"replicas": 100000, "leaderWorkerTemplate": {
            "size": 100000000}}}, "spec.replicas: Invalid value: 100000: the product of replicas "
         "and worker replicas must not exceed 2147483647"),
        ({}, {"spec": {"replicas": -1}}, None),
        ({}, {"spec": {"startupPolicy": "Never"}}, None),
        ({}, {"spec": {"replicas": 1000001}}, None),
        ({}, {"spec": {"leaderWorkerTemplate": {"restartPolicy": "Always"}}}, None),
        ({}, {"spec": {"rolloutStrategy": {"type": "Recreate"}}}, None),
        ({}, {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": -1}}}},
         f"{RUC}.partition: Invalid value: -1: must be greater than or equal to 0"),
        ({"t_size": 4, "t_subGroupPolicy": {"subGroupSize": 1}},
         {"spec": {"leaderWorkerTemplate": {"subGroupPolicy": {"subGroupSize": 2}}}},
         f"{SGS}: Invalid value: 2: field is immutable"),
        ({"t_size": 4}, {"spec": {"leaderWorkerTemplate": {"subGroupPolicy": {
            "subGroupSize": 2}}}},
         f"{SGS}: Invalid value: 2: cannot enable subGroupSize after the lws is already "
         "created"),
        ({"t_size": 4, "t_subGroupPolicy": {"subGroupSize": 2}},
         {"spec": {"leaderWorkerTemplate": {"subGroupPolicy": None}}},
         f"{SGS}: Invalid value: 2: cannot remove subGroupSize after enabled"),
        ({"t_size": 8, "t_subGroupPolicy": {"subGroupSize": 8}},
         {"spec": {"leaderWorkerTemplate": {"size": 10}}},
         f"{SGS}: Invalid value: 8: size or size - 1 must be divisible by subGroupSize"),
        ({}, {"spec": {"groupIdentity": "Hash"}},
         "spec.groupIdentity: Invalid value: \"Hash\": field is immutable"),
        ({}, {"spec": {"podTerminationPolicy": "Parallel"}},
         "spec.podTerminationPolicy: Invalid value: \"Parallel\": field is immutable"),
        ({}, {"spec": {"scheduling": {}}},
         "spec.scheduling: Forbidden: gang scheduling cannot be added after creation"),
        ({"scheduling": {}}, {"spec": {"scheduling": None}},
         "spec.scheduling: Forbidden: gang scheduling cannot be removed after creation"),
        ({"scheduling": {}}, {"spec": {"scheduling": {"replica": {
            "schedulingPolicy": None, "leader": {}}}}},
         "spec.scheduling: Forbidden: the scheduling level cannot change after creation (was "
         "replica, now role)"),
    ],
)
async def test_invalid_updates(admitted: tuple[Kube, str], spec: dict[str, Any],
                               patch: dict[str, Any], message: str | None) -> None:
    """``message``: the webhook's exact refusal; None where the CRD schema refuses first (the
    API server's own 422, as under upstream)."""
    kube, ns = admitted
    name = unique("u")
    await create(kube, ns, new_lws(name, **spec))
    exc = await update_rejected(kube, ns, name, patch)
    if message is None:
        assert exc.status == 422, rejection(exc)
        assert DENIED not in rejection(exc)
    else:
        assert denied_by_webhook(exc) == message


@pytest.mark.parametrize(
    ("spec", "patch", "check"),
    [
        ({"t_size": 2}, {"spec": {"leaderWorkerTemplate": {"size": 3}}},
         lambda s: s["leaderWorkerTemplate"]["size"] == 3),
        ({}, {"spec": {"replicas": 3}}, lambda s: s["replicas"] == 3),
        ({}, {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
            {"name": "main", "image": "nginx:1.28"}]}}}}},
         lambda s: s["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
             "image"] == "nginx:1.28"),
        ({"networkConfig": {"subdomainPolicy": "UniquePerReplica"}},
         {"spec": {"networkConfig": {"subdomainPolicy": "Shared"}}},
         lambda s: s["networkConfig"]["subdomainPolicy"] == "Shared"),
        ({}, {"spec": {"networkConfig": {"subdomainPolicy": "UniquePerReplica"}}},
         lambda s: s["networkConfig"]["subdomainPolicy"] == "UniquePerReplica"),
        # Defaulting runs before validation: a null subdomainPolicy is re-defaulted.
        ({}, {"spec": {"networkConfig": {"subdomainPolicy": None}}},
         lambda s: s["networkConfig"]["subdomainPolicy"] == "Shared"),
        ({}, {"spec": {"networkConfig": None}},
         lambda s: s["networkConfig"]["subdomainPolicy"] == "Shared"),
        ({}, {"spec": {"leaderWorkerTemplate": {"restartPolicy": "None"}}},
         lambda s: s["leaderWorkerTemplate"]["restartPolicy"] == "None"),
        ({}, {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {"partition": 7}}}},
         lambda s: s["rolloutStrategy"]["rollingUpdateConfiguration"]["partition"] == 7),
        ({"t_size": 4, "t_subGroupPolicy": {"subGroupSize": 2}},
         {"spec": {"leaderWorkerTemplate": {"size": 5, "subGroupPolicy": {
             "subGroupPolicyType": "LeaderExcluded"}}}},
         lambda s: s["leaderWorkerTemplate"]["subGroupPolicy"] == {
             "subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}),
    ],
)
async def test_valid_updates(admitted: tuple[Kube, str], spec: dict[str, Any],
                             patch: dict[str, Any], check: Any) -> None:
    kube, ns = admitted
    name = unique("v")
    await create(kube, ns, new_lws(name, **spec))
    assert check((await update(kube, ns, name, patch))["spec"])


async def test_scale_subresource_bypasses_webhooks(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    name = unique("hpa")
    await create(kube, ns, new_lws(name))
    await kube.patch(API, KIND, name, {"spec": {"replicas": 3}}, ns, content_type=MERGE_PATCH,
                     subresource="scale")
    stored = await kube.get(API, KIND, name, ns)
    assert stored is not None
    assert stored["spec"]["replicas"] == 3


# ------------------------------------------------------ objects written by the upstream controller


def as_upstream_stores(name: str, **spec: Any) -> dict[str, Any]:
    """A LeaderWorkerSet as it sits in etcd after upstream's webhooks admitted it: upstream's
    defaults (upstream's Default) written out, none of the LWS docs' additions (``groupIdentity``,
    ``podTerminationPolicy``, ``groupReplacementPolicy``)."""
    return new_lws(name, **{"replicas": 1, "t_size": 2, **upstream_defaults(), **spec})


def image_patch(image: str) -> dict[str, Any]:
    return {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
        {"name": "main", "image": image}]}}}}}


async def test_objects_written_by_upstream_can_be_updated(lws_crd: LocalCluster) -> None:
    """Taking over from upstream: ``kubectl patch`` of an image must not be refused, as it once
    was, with ``spec.groupIdentity: Invalid value: "Ordinal": field is immutable``.

    The objects are written through the real API server before our webhooks serve their
    namespace (as upstream's were, before the switch), then updated through them."""
    kube = await Kube.connect(str(lws_crd.kubeconfig))
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        bodies = [
            as_upstream_stores("plain"),
            as_upstream_stores("subgroups", t_size=4, t_subGroupPolicy={
                "subGroupSize": 2, "subGroupPolicyType": "LeaderWorker"}),
            as_upstream_stores("unique", networkConfig={"subdomainPolicy": "UniquePerReplica"},
                               t_restartPolicy="None",
                               rolloutStrategy=ruc(maxUnavailable=1, maxSurge=1, partition=1)),
        ]
        untouched = as_upstream_stores("untouched")
        for body in [*bodies, untouched]:
            stored = await kube.create(body, ns)
            assert "groupIdentity" not in stored["spec"]
            assert "podTerminationPolicy" not in stored["spec"]
        hooks = await start_webhooks(str(lws_crd.kubeconfig), options_for(ns))
        try:
            for body in bodies:
                name = body["metadata"]["name"]
                spec = (await update(kube, ns, name, image_patch("nginx:1.28")))["spec"]
                worker = spec["leaderWorkerTemplate"]["workerTemplate"]["spec"]
                assert worker["containers"][0]["image"] == "nginx:1.28"
                # Defaulting now writes what absence meant.
                assert spec["groupIdentity"] == "Ordinal"
                assert spec["podTerminationPolicy"] == "Sequential"
            # Absent meant the default: moving off it is still refused.
            for key, value in (("groupIdentity", "Hash"), ("podTerminationPolicy", "Parallel")):
                exc = await update_rejected(kube, ns, "untouched", {"spec": {key: value}})
                assert denied_by_webhook(exc) == (
                    f'spec.{key}: Invalid value: "{value}": field is immutable')
        finally:
            await stop_webhooks(hooks)
    finally:
        await kube.delete("v1", "Namespace", ns)
        await kube.close()
