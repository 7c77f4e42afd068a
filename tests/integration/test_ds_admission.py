"""DisaggregatedSets and their role scalers through a real kube-apiserver: the CRDs (schema,
defaults, CEL rule, subresources, ``kubectl explain``), our ``vdisaggregatedset.kb.io`` webhook
(upstream's test/integration/webhooks/disaggregatedset_test.go and the exact texts users see) and
the pod webhook's DISAGGREGATEDSET_* variables.

The CRDs are installed and our webhooks registered by URL, confined to one namespace per module
(the ``admitted`` fixture): every object goes through the API server as ``kubectl`` sends it.
"""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster import LocalCluster
from e2e.harness.admission import lws_pod
from e2e.kube import MERGE_PATCH, Kube
from lws_operator.api import disaggregated as ds
from tests.harness.api_answers import status, webhook_denial

pytestmark = pytest.mark.api

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "e2e" / "controllers" / "upstream_samples"
API = ds.API_VERSION
KIND = ds.KIND
SCALER = ds.SCALER_KIND
DENIED = 'admission webhook "vdisaggregatedset.kb.io" denied the request: '
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
# As kube-apiserver v1.37 words a CEL refusal (older servers put "object" before the message).
CEL = ("spec: Invalid value: replicas must be zero for all non-External roles or non-zero for "
       "all non-External roles")


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def role(name: str, replicas: int | None = 1, **spec: Any) -> dict[str, Any]:
    """A role as upstream's integration fixture writes it: RollingUpdate and LeaderCreated
    spelled out."""
    body: dict[str, Any] = {"name": name, "spec": {
        "rolloutStrategy": {"type": "RollingUpdate"},
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}}
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    body["spec"].update(spec)
    return body


def new_ds(name: str, roles: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name},
            "spec": {"roles": roles if roles is not None else [role("prefill"), role("decode")],
                     **spec}}


def policy(kind: str = "ExclusiveSlice", topology: str = "kubernetes.io/hostname",
           ) -> dict[str, Any]:
    return {"type": kind, "topology": topology}


def denied_by_webhook(exc: DynamicApiError) -> str:
    return webhook_denial(exc, DENIED)


async def rejected(kube: Kube, ns: str, body: dict[str, Any]) -> DynamicApiError:
    with pytest.raises(DynamicApiError) as exc:
        await kube.create(body, ns)
    assert await kube.get(API, KIND, body["metadata"]["name"], ns) is None, "half-applied"
    return exc.value


def invalid(exc: DynamicApiError, name: str) -> str:
    """The API server's own refusal (schema or CEL): 422 Invalid, the causes after the
    object's name."""
    got = status(exc)
    assert (exc.status, got.get("reason")) == (422, "Invalid"), got
    prefix = f'{KIND}.{ds.GROUP} "{name}" is invalid: '
    message = str(got["message"])
    assert message.startswith(prefix), message
    return message[len(prefix):]


async def update_rejected(kube: Kube, ns: str, name: str, patch: Any,
                          content_type: str = MERGE_PATCH) -> DynamicApiError:
    before = await kube.get(API, KIND, name, ns)
    with pytest.raises(DynamicApiError) as exc:
        await kube.patch(API, KIND, name, patch, ns, content_type=content_type)
    after = await kube.get(API, KIND, name, ns)
    assert before is not None
    assert after is not None
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    return exc.value


def kubectl(cluster: LocalCluster, tmp: Path, *args: str, stdin: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """The cluster's kubectl with a private discovery cache (it must see the new CRDs)."""
    return subprocess.run(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig),
         "--cache-dir", str(tmp / "kube-cache"), *args],
        input=stdin, capture_output=True, text=True, check=False)


async def kubectl_async(cluster: LocalCluster, tmp: Path, *args: str,
                        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(kubectl, cluster, tmp, *args, stdin=stdin)


# ------------------------------------------------------- upstream's integration cases (274-280)


async def test_274_placement_policy_alone_is_allowed(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    stored = await kube.create(new_ds(unique("pp"), placementPolicy=policy()), ns)
    assert stored["spec"]["placementPolicy"] == policy()


async def test_275_exclusive_topology_annotation_alone_is_allowed(
        admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = new_ds(unique("ann"))
    body["spec"]["roles"][0]["metadata"] = {"annotations": {EXCLUSIVE: "rack"}}
    await kube.create(body, ns)


async def test_276_policy_and_exclusive_topology_on_role_metadata(
        admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = new_ds(unique("both"), placementPolicy=policy())
    body["spec"]["roles"][0]["metadata"] = {"annotations": {EXCLUSIVE: "rack"}}
    assert denied_by_webhook(await rejected(kube, ns, body)) == (
        f'spec.roles[0]: Forbidden: the "{EXCLUSIVE}" annotation must not be combined with a '
        "non-None spec.placementPolicy.type (ExclusiveSlice)")


async def test_277_exclusive_topology_policy_and_annotation_on_a_worker_template(
        admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = new_ds(unique("wt"), placementPolicy=policy("ExclusiveTopology"))
    worker = body["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["metadata"] = {"annotations": {EXCLUSIVE: "rack"}}
    assert denied_by_webhook(await rejected(kube, ns, body)) == (
        f'spec.roles[1]: Forbidden: the "{EXCLUSIVE}" annotation must not be combined with a '
        "non-None spec.placementPolicy.type (ExclusiveTopology)")


async def test_278_policy_and_subgroup_exclusive_topology(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = new_ds(unique("sub"), placementPolicy=policy())
    body["spec"]["roles"][0]["metadata"] = {"annotations": {SUBGROUP_EXCLUSIVE: "rack"}}
    assert SUBGROUP_EXCLUSIVE in denied_by_webhook(await rejected(kube, ns, body))


async def test_279_adding_the_annotation_to_a_set_with_a_policy(
        admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    name = unique("upd-ann")
    await kube.create(new_ds(name, placementPolicy=policy()), ns)
    # The role list is a map keyed by name: a merge patch replaces the whole list.
    roles = [role("prefill"), role("decode")]
    roles[0]["metadata"] = {"annotations": {EXCLUSIVE: "rack"}}
    exc = await update_rejected(kube, ns, name, {"spec": {"roles": roles}})
    assert denied_by_webhook(exc) == (
        f'spec.roles[0]: Forbidden: the "{EXCLUSIVE}" annotation must not be combined with a '
        "non-None spec.placementPolicy.type (ExclusiveSlice)")


async def test_280_adding_a_policy_to_a_set_with_the_annotation(
        admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    name = unique("upd-pp")
    body = new_ds(name)
    body["spec"]["roles"][1]["metadata"] = {"annotations": {EXCLUSIVE: "rack"}}
    await kube.create(body, ns)
    exc = await update_rejected(kube, ns, name,
                                {"spec": {"placementPolicy": policy("ExclusiveTopology")}})
    assert EXCLUSIVE in denied_by_webhook(exc)


# -------------------------------------------------------------------- the webhook's other texts


@pytest.mark.parametrize(("roles", "spec", "message"), [
    pytest.param(
        [role("prefill", rolloutStrategy={"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "partition": 1}}), role("decode")], {},
        "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition: Forbidden: "
        "partition is not supported by DisaggregatedSet; rolling updates are managed across "
        "roles by the DisaggregatedSet controller",
        # The schema fills maxSurge 0 / maxUnavailable 1 first: only the partition fires.
        id="partition-after-schema-defaults"),
    pytest.param(
        [role("prefill", 2, rolloutStrategy={"type": "RollingUpdate",
                                             "rollingUpdateConfiguration": {
                                                 "maxSurge": "0%", "maxUnavailable": "0%"}}),
         role("decode", 2)], {},
        'spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable: Invalid '
        'value: "0%": must not be 0 when `maxSurge` is 0',
        id="0%/0%"),
    pytest.param(
        [role("r" * 8), role("decode")], {},
        f'spec.roles[0].name: Invalid value: "{"r" * 8}": the generated service name (64 chars) '
        "would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet name "
        "and/or role name (combined limit: 47 characters)",
        id="service-name"),
    pytest.param(
        [{**role("prefill"), "scaling": {"mode": "External"}}, role("decode")], {"slices": 2},
        "spec.slices: Forbidden: spec.slices > 1 is not supported while any role has "
        "scaling.mode: External (alpha restriction)",
        id="external-with-slices"),
    pytest.param(
        [role("prefill"), role("decode")], {"placementPolicy": {"type": "ExclusiveSlice"}},
        "spec.placementPolicy.topology: Required value: topology is required when type is not "
        "None",
        id="no-topology"),
])
async def test_exact_denials(admitted: tuple[Kube, str], roles: list[dict[str, Any]],
                             spec: dict[str, Any], message: str) -> None:
    kube, ns = admitted
    # 40 characters of set name (the service-name case counts on it).
    name = f"n{uuid.uuid4().hex[:8]}" + "x" * 31
    assert denied_by_webhook(await rejected(kube, ns, new_ds(name, roles, **spec))) == message


async def test_kubectl_apply_prints_upstreams_refusal(admitted: tuple[Kube, str],
                                                      lws_crd: LocalCluster,
                                                      tmp_path: Path) -> None:
    """What a user's terminal (and a script matching it) shows."""
    _kube, ns = admitted
    body = new_ds("applied", [role("prefill", rolloutStrategy={"type": "RollingUpdate",
                                                               "rollingUpdateConfiguration": {
                                                                   "partition": 2}}),
                              role("decode")])
    done = await kubectl_async(lws_crd, tmp_path, "apply", "-n", ns, "-f", "-",
                               stdin=yaml.safe_dump(body))
    assert done.returncode == 1
    assert done.stderr == (
        'Error from server (Forbidden): error when creating "STDIN": ' + DENIED
        + "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition: Forbidden: "
        "partition is not supported by DisaggregatedSet; rolling updates are managed across "
        "roles by the DisaggregatedSet controller\n")


async def test_kubectl_apply_prints_the_external_replicas_warning(
        admitted: tuple[Kube, str], lws_crd: LocalCluster, tmp_path: Path) -> None:
    kube, ns = admitted
    name = unique("ext")
    body = new_ds(name, [{**role("prefill", 3), "scaling": {"mode": "External"}},
                         role("decode")])
    done = await kubectl_async(lws_crd, tmp_path, "apply", "-n", ns, "-f", "-",
                               stdin=yaml.safe_dump(body))
    assert done.returncode == 0, done.stderr
    assert done.stderr == (
        f'Warning: role "prefill" sets scaling.mode: External and spec.replicas: 3 \u2014 '
        f'spec.replicas is ignored; drive replicas via DisaggregatedSetRoleScaler '
        f'"{name}-prefill" instead\n')
    assert done.stdout == f"disaggregatedset.{ds.GROUP}/{name} created\n"
    assert await kube.get(API, KIND, name, ns) is not None


async def test_delete_is_never_refused(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    name = unique("del")
    await kube.create(new_ds(name), ns)
    await kube.delete(API, KIND, name, ns)
    assert await kube.get(API, KIND, name, ns) is None


# ----------------------------------------------------------------- the CRD: schema and CEL rule


async def test_defaults_are_applied_to_the_stored_object(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    roles = [{"name": "prefill", "scaling": {}, "spec": {"leaderWorkerTemplate": {
                  "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}}},
             {"name": "decode", "spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {}},
                                         "leaderWorkerTemplate": {"workerTemplate": {"spec": {
                                             "containers": [{"name": "c", "image": "x",
                                                             "ports": [{"containerPort": 80}]}]
                                         }}}}}]
    stored = (await kube.create(new_ds(unique("def"), roles,
                                       placementPolicy={"topology": "zone"}), ns))["spec"]
    assert stored["slices"] == 1
    assert stored["placementPolicy"] == {"type": "None", "topology": "zone"}
    prefill, decode = stored["roles"]
    assert prefill["scaling"] == {"mode": "Static"}
    assert "scaling" not in decode  # absent stays absent (and means Static)
    assert prefill["spec"]["replicas"] == 1
    assert prefill["spec"]["startupPolicy"] == "LeaderCreated"
    assert prefill["spec"]["leaderWorkerTemplate"]["size"] == 1
    assert prefill["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert "rolloutStrategy" not in prefill["spec"]  # no default: the controller's own (1, 0)
    assert decode["spec"]["rolloutStrategy"] == {"type": "RollingUpdate",
                                                 "rollingUpdateConfiguration": {
                                                     "maxSurge": 0, "maxUnavailable": 1,
                                                     "partition": 0}}
    port = decode["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "ports"][0]
    assert port == {"containerPort": 80, "protocol": "TCP"}
    # The LeaderWorkerSet fields the LWS docs add get no CRD default (the LWS webhook owns them).
    assert "groupIdentity" not in prefill["spec"]


@pytest.mark.parametrize(("replicas", "accepted"), [
    ((0, 0), True),  # the paused state
    ((1, 3), True),
    ((None, 2), True),  # absent is defaulted to 1 first: non-zero
    ((0, 1), False),
    ((None, 0), False),
])
async def test_the_all_or_nothing_replicas_rule(admitted: tuple[Kube, str],
                                                replicas: tuple[int | None, int | None],
                                                accepted: bool) -> None:
    kube, ns = admitted
    name = unique("cel")
    body = new_ds(name, [role("prefill", replicas[0]), role("decode", replicas[1])])
    if accepted:
        await kube.create(body, ns)
        return
    assert invalid(await rejected(kube, ns, body), name) == CEL


async def test_external_roles_are_exempt_from_the_replicas_rule(
        admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    external = {**role("prefill", 0), "scaling": {"mode": "External"}}
    await kube.create(new_ds(unique("ext0"), [external, role("decode", 2), role("encode", 1)]),
                      ns)
    name = unique("ext1")
    body = new_ds(name, [external, role("decode", 2), role("encode", 0)])
    assert invalid(await rejected(kube, ns, body), name) == CEL


async def test_the_replicas_rule_on_update(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    name = unique("celu")
    await kube.create(new_ds(name), ns)
    exc = await update_rejected(kube, ns, name, {"spec": {"roles": [role("prefill", 0),
                                                                    role("decode", 1)]}})
    assert invalid(exc, name) == CEL
    await kube.patch(API, KIND, name, {"spec": {"roles": [role("prefill", 0),
                                                          role("decode", 0)]}}, ns)


@pytest.mark.parametrize(("mutate", "message"), [
    pytest.param(lambda b: b["spec"].update(roles=[role("prefill")]),
                 "spec.roles: Invalid value: 1: spec.roles in body should have at least 2 items",
                 id="one-role"),
    pytest.param(lambda b: b["spec"].update(roles=[role(f"r{i}") for i in range(11)]),
                 "spec.roles: Too many: 11: must have at most 10 items", id="eleven-roles"),
    pytest.param(lambda b: b["spec"].update(roles=[role("prefill"), role("prefill")]),
                 'spec.roles[1]: Duplicate value: {"name":"prefill"}',
                 id="duplicate-names"),
    pytest.param(lambda b: b["spec"].update(slices=0),
                 "spec.slices: Invalid value: 0: spec.slices in body should be greater than or "
                 "equal to 1", id="slices-0"),
    pytest.param(lambda b: b["spec"].update(slices=101),
                 "spec.slices: Invalid value: 101: spec.slices in body should be less than or "
                 "equal to 100", id="slices-101"),
    pytest.param(lambda b: b["spec"].update(placementPolicy={"type": "Rack", "topology": "z"}),
                 'spec.placementPolicy.type: Unsupported value: "Rack": supported values: '
                 '"None", "ExclusiveSlice", "ExclusiveTopology"', id="placement-type"),
    pytest.param(lambda b: b["spec"]["roles"][0].update(scaling={"mode": "Auto"}),
                 'spec.roles[0].scaling.mode: Unsupported value: "Auto": supported values: '
                 '"Static", "External"', id="scaling-mode"),
    pytest.param(lambda b: b["spec"]["roles"][0].update(name="Prefill"),
                 'spec.roles[0].name: Invalid value: "Prefill": spec.roles[0].name in body '
                 "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'", id="role-name"),
    pytest.param(lambda b: b["spec"]["roles"][0]["spec"].update(replicas=1000001),
                 "spec.roles[0].spec.replicas: Invalid value: 1000001: spec.roles[0].spec."
                 "replicas in body should be less than or equal to 1000000", id="replicas"),
])
async def test_schema_limits(admitted: tuple[Kube, str], mutate: Any, message: str) -> None:
    kube, ns = admitted
    name = unique("lim")
    body = new_ds(name)
    mutate(body)
    got = invalid(await rejected(kube, ns, body), name)
    assert message in got, got


async def test_a_broken_pod_template_is_refused_with_its_path(
        admitted: tuple[Kube, str]) -> None:
    """The embedded LeaderWorkerSet schema reaches into the pod templates."""
    kube, ns = admitted
    name = unique("pod")
    body = new_ds(name)
    worker = body["spec"]["roles"][1]["spec"]["leaderWorkerTemplate"]["workerTemplate"]
    worker["spec"]["containers"] = [{"image": "nginx"}]
    got = invalid(await rejected(kube, ns, body), name)
    # The CEL rule is not evaluated on an object that fails the schema: the server says so.
    assert got == (
        "[spec.roles[1].spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name: "
        "Required value, <nil>: Invalid value: null: some validation rules were not checked "
        "because the object was invalid; correct the existing errors to complete validation]")


@pytest.mark.parametrize("sample", ["disaggregatedset_v1_disaggregatedset.yaml",
                                    "disaggregatedset_v1_3role.yaml"])
async def test_upstream_samples_are_accepted_unchanged(admitted: tuple[Kube, str],
                                                       sample: str) -> None:
    kube, ns = admitted
    body = yaml.safe_load((SAMPLES / sample).read_text())
    body["metadata"].pop("namespace", None)  # into the test's namespace, otherwise as written
    stored = await kube.create(copy.deepcopy(body), ns)
    assert [r["name"] for r in stored["spec"]["roles"]] == [
        r["name"] for r in body["spec"]["roles"]]


async def test_status_subresource(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    name = unique("st")
    await kube.create(new_ds(name), ns)
    statuses = [{"name": "prefill", "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1}]
    await kube.patch(API, KIND, name, {"status": {"observedGeneration": 1,
                                                  "roleStatuses": statuses}}, ns,
                     subresource="status")
    stored = await kube.get(API, KIND, name, ns)
    assert stored is not None
    assert stored["status"]["roleStatuses"] == statuses
    assert stored["metadata"]["generation"] == 1


def test_kubectl_explain_disaggregatedset_spec_roles(lws_crd: LocalCluster,
                                                     tmp_path: Path) -> None:
    deadline = time.monotonic() + 60  # the OpenAPI of a new CRD is published asynchronously
    while True:
        proc = kubectl(lws_crd, tmp_path, "explain", "disaggregatedset.spec.roles")
        if proc.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "GROUP:      disaggregatedset.x-k8s.io" in out
    assert "KIND:       DisaggregatedSet" in out
    assert "FIELD: roles <[]Object>" in out
    for field in ("name\t<string> -required-", "scaling\t<Object>", "metadata\t<Object>",
                  "spec\t<Object>"):
        assert field in out, out
    deep = kubectl(lws_crd, tmp_path, "explain",
                   "disaggregatedset.spec.roles.spec.leaderWorkerTemplate.workerTemplate.spec."
                   "containers.image")
    assert deep.returncode == 0, deep.stderr
    assert "FIELD: image <string>" in deep.stdout


def test_kubectl_knows_the_short_names(lws_crd: LocalCluster, tmp_path: Path) -> None:
    resources = kubectl(lws_crd, tmp_path, "api-resources", f"--api-group={ds.GROUP}",
                        "--no-headers")
    assert resources.returncode == 0, resources.stderr
    rows = sorted(line.split() for line in resources.stdout.splitlines())
    assert rows == [
        ["disaggregatedsetrolescalers", "dsrs", f"{ds.GROUP}/v1", "true", SCALER],
        ["disaggregatedsets", f"{ds.GROUP}/v1", "true", KIND],
    ]


# ------------------------------------------------------------------------------ the role scaler


async def test_scale_of_a_fresh_scaler_returns_spec_replicas(
        admitted: tuple[Kube, str], lws_crd: LocalCluster, tmp_path: Path) -> None:
    """An autoscaler's first read, before anyone wrote status: the spec count comes back (the
    spec is always materialised, even for a scaler written without one). A Scale omits a zero
    ``spec.replicas`` (autoscaling/v1 ``omitempty``); a missing field would be an error
    instead: "the spec replicas field does not exist"."""
    kube, ns = admitted
    base = f"/apis/{ds.GROUP}/v1/namespaces/{ns}/{ds.SCALER_PLURAL}"
    for name, spec, expected in ((unique("seeded"), {"replicas": 3}, 3),
                                 (unique("empty"), {}, 0), (unique("nospec"), None, 0)):
        body: dict[str, Any] = {"apiVersion": API, "kind": SCALER, "metadata": {"name": name}}
        if spec is not None:
            body["spec"] = spec
        await kube.create(body, ns)
        done = await kubectl_async(lws_crd, tmp_path, "get", "--raw", f"{base}/{name}/scale")
        assert done.returncode == 0, done.stderr
        scale = json.loads(done.stdout)
        assert (scale["apiVersion"], scale["kind"]) == ("autoscaling/v1", "Scale")
        assert scale["spec"] == ({"replicas": expected} if expected else {}), scale
        assert scale["metadata"]["name"] == name
        stored = await kube.get(API, SCALER, name, ns)
        assert stored is not None
        assert stored["spec"] == {"replicas": expected}


async def test_scaling_a_scaler_and_its_columns(admitted: tuple[Kube, str],
                                                lws_crd: LocalCluster, tmp_path: Path) -> None:
    kube, ns = admitted
    name = unique("hpa")
    await kube.create({"apiVersion": API, "kind": SCALER, "metadata": {"name": name},
                       "spec": {"replicas": 1}}, ns)
    selector = f"{ds.NAME_LABEL}=x,{ds.ROLE_LABEL}=prefill"
    await kube.patch(API, SCALER, name, {"status": {"replicas": 2, "selector": selector}}, ns,
                     subresource="status")
    done = await kubectl_async(lws_crd, tmp_path, "scale", "-n", ns, f"dsrs/{name}",
                               "--replicas=5")
    assert done.returncode == 0, done.stderr
    stored = await kube.get(API, SCALER, name, ns)
    assert stored is not None
    assert stored["spec"]["replicas"] == 5
    raw = await kubectl_async(lws_crd, tmp_path, "get", "--raw",
                              f"/apis/{ds.GROUP}/v1/namespaces/{ns}/{ds.SCALER_PLURAL}/{name}"
                              "/scale")
    scale = json.loads(raw.stdout)
    assert scale["status"] == {"replicas": 2, "selector": selector}
    table = await kubectl_async(lws_crd, tmp_path, "get", "-n", ns, "dsrs", name)
    header, row = table.stdout.splitlines()
    assert header.split() == ["NAME", "DESIRED", "CURRENT", "AGE"]
    assert row.split()[:3] == [name, "5", "2"]
    # The set itself: no printer columns, NAME and AGE only.
    set_name = unique("cols")
    await kube.create(new_ds(set_name), ns)
    table = await kubectl_async(lws_crd, tmp_path, "get", "-n", ns, "disaggregatedset",
                                set_name)
    assert table.stdout.splitlines()[0].split() == ["NAME", "AGE"]


async def test_scaler_replicas_cannot_be_negative(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    with pytest.raises(DynamicApiError) as exc:
        await kube.create({"apiVersion": API, "kind": SCALER, "metadata": {"name": "neg"},
                           "spec": {"replicas": -1}}, ns)
    assert exc.value.status == 422
    assert "should be greater than or equal to 0" in status(exc.value)["message"]


# ---------------------------------------------------------------- the pod webhook's variables


async def test_pods_of_a_disaggregatedset_get_the_guide_variables(
        admitted: tuple[Kube, str]) -> None:
    """A pod as a DisaggregatedSet's LeaderWorkerSet's StatefulSet creates it: the system
    labels come from its template; the pod webhook turns them into the four variables."""
    kube, ns = admitted
    pod = lws_pod("my-llm-0-a1b2c3d4-prefill-0", group="my-llm-0-a1b2c3d4-prefill")
    pod["metadata"]["labels"].update({ds.NAME_LABEL: "my-llm", ds.ROLE_LABEL: "prefill",
                                      ds.SLICE_LABEL: "0", ds.REVISION_LABEL: "a1b2c3d4"})
    pod["spec"]["containers"][0]["env"] = [{"name": "DISAGGREGATEDSET_ROLE", "value": "mine"},
                                           {"name": "MODEL", "value": "m"}]
    pod["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    stored = await kube.create(pod, ns)
    env = stored["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env[:3]] == ["LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE",
                                            "LWS_WORKER_INDEX"]
    assert env[3:] == [{"name": "DISAGGREGATEDSET_NAME", "value": "my-llm"},
                       {"name": "DISAGGREGATEDSET_SLICE", "value": "0"},
                       {"name": "DISAGGREGATEDSET_REVISION", "value": "a1b2c3d4"},
                       {"name": "DISAGGREGATEDSET_ROLE", "value": "mine"},
                       {"name": "MODEL", "value": "m"}]
    init = stored["spec"]["initContainers"][0]["env"]
    assert init[3:] == [{"name": "DISAGGREGATEDSET_NAME", "value": "my-llm"},
                        {"name": "DISAGGREGATEDSET_ROLE", "value": "prefill"},
                        {"name": "DISAGGREGATEDSET_SLICE", "value": "0"},
                        {"name": "DISAGGREGATEDSET_REVISION", "value": "a1b2c3d4"}]
