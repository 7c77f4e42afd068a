"""The LeaderWorkerSet CRD, as a real kube-apiserver serves it, with no webhook installed.

What is checked is what a user sees: upstream manifests apply unchanged, a broken pod template is
refused by the API server with the field's path, the CRD defaults land on stored objects, ``kubectl
get``/``explain``/``scale`` behave, and the committed file is what the generator produces from the
pinned server's own OpenAPI documents.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import yaml
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import CRD_FILE, CRD_FILES, CRD_NAME, DS_SCALER_CRD_FILE
from e2e.harness.builder import LeaderWorkerSet
from e2e.kube import MERGE_PATCH, Kube

if TYPE_CHECKING:
    pass

pytestmark = pytest.mark.api

REPO = Path(__file__).resolve().parents[2]
# Upstream's samples, as the repository keeps them (e2e/controllers/test_upstream_samples.py).
SAMPLES = REPO / "e2e" / "controllers" / "upstream_samples"
API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
PINNED = "v1.37.2"

POD_SPEC: dict[str, Any] = {"containers": [{"name": "main", "image": "nginx:1.27"}]}

# LWS docs examples that use the fields no upstream sample does (applied unchanged, like samples).
GUIDE_MANIFESTS = {
    "volume-claim-templates": """
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 4
    volumeClaimTemplates:
      - metadata:
          name: model-cache
        spec:
          storageClassName: standard-rwo
          accessModes: ["ReadWriteOnce"]
          resources:
            requests:
              storage: 100Gi
    persistentVolumeClaimRetentionPolicy:
      whenDeleted: Delete
      whenScaled: Retain
    leaderTemplate:
      spec:
        containers:
          - name: leader
            image: leader-image:latest
            volumeMounts:
              - mountPath: /mnt/models
                name: model-cache
    workerTemplate:
      spec:
        containers:
          - name: worker
            image: worker-image:latest
            volumeMounts:
              - mountPath: /mnt/models
                name: model-cache
""",
    "restart-budget-and-backoff": """
spec:
  replicas: 2
  podTerminationPolicy: Parallel
  leaderWorkerTemplate:
    restartPolicy: RecreateGroupOnPodRestart
    maxGroupRestarts: 3
    restartBackoff:
      baseSeconds: 10
      capSeconds: 300
    size: 4
    workerTemplate:
      spec:
        containers:
        - name: worker
          image: worker-image:latest
""",
    "hash-identity-and-rollout": """
spec:
  groupIdentity: Hash
  groupReplacementPolicy: Immediate
  startupPolicy: LeaderReady
  networkConfig:
    subdomainPolicy: UniquePerReplica
  rolloutStrategy:
    type: RollingUpdate
    rollingUpdateConfiguration:
      maxUnavailable: 25%
      maxSurge: 2
  replicas: 4
  leaderWorkerTemplate:
    size: 4
    subGroupPolicy:
      subGroupPolicyType: LeaderExcluded
      subGroupSize: 3
    workerTemplate:
      spec:
        containers:
        - name: nginx
          image: nginxinc/nginx-unprivileged:1.27
""",
    "replica-level-gang": """
spec:
  scheduling: {}
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: worker
          image: worker-image:latest
""",
    "whole-lws-gang": """
spec:
  scheduling:
    schedulingPolicy:
      gang: {}
    schedulingConstraints:
      topology:
      - key: topology.kubernetes.io/rack
    disruptionMode:
      all: {}
    resourceClaims:
    - name: shared-gpu
      resourceClaimTemplateName: gpu-template
  leaderWorkerTemplate:
    size: 2
    workerTemplate:
      spec:
        containers:
        - name: worker
          image: worker-image:latest
""",
    "role-level-gang": """
spec:
  scheduling:
    replica:
      leader:
        schedulingPolicy:
          basic: {}
      worker:
        schedulingPolicy:
          gang:
            minCount: 3
        disruptionMode:
          single: {}
  leaderWorkerTemplate:
    size: 4
    workerTemplate:
      spec:
        containers:
        - name: worker
          image: worker-image:latest
""",
}


# ------------------------------------------------------------------------------------ helpers


def kubectl(cluster: LocalCluster, tmp: Path, *args: str, stdin: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """The cluster's kubectl with a private discovery cache (it must see the new CRD)."""
    return subprocess.run(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig),
         "--cache-dir", str(tmp / "kube-cache"), *args],
        input=stdin, capture_output=True, text=True, check=False,
    )


def lws(name: str, **spec: Any) -> dict[str, Any]:
    return LeaderWorkerSet(name).worker_template({"spec": POD_SPEC}).spec(**spec).build()


DELETE = object()  # set_path value: remove the key


def set_path(body: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (list indexes as numbers), creating objects on the way."""
    node: Any = body
    steps = path.split(".")
    for step in steps[:-1]:
        node = node[int(step)] if isinstance(node, list) else node.setdefault(step, {})
    last = steps[-1]
    if isinstance(node, list):
        node[int(last)] = value
    elif value is DELETE:
        node.pop(last, None)
    else:
        node[last] = value


async def rejection(kube: Kube, body: dict[str, Any], namespace: str) -> str:
    """The API server's message refusing ``body``; fails the test if it is accepted."""
    with pytest.raises(DynamicApiError) as err:
        await kube.create(body, namespace)
    assert err.value.status == 422, err.value
    return str(json.loads(err.value.body or "{}")["message"])


def missing_from(stored: Any, given: Any, path: str = "spec") -> Iterator[str]:
    """Paths of ``given`` that ``stored`` lacks or holds differently (pruned or rewritten)."""
    if isinstance(given, dict):
        if not isinstance(stored, dict):
            yield path
            return
        for key, value in given.items():
            yield from missing_from(stored.get(key), value, f"{path}.{key}")
    elif isinstance(given, list):
        if not isinstance(stored, list) or len(stored) != len(given):
            yield path
            return
        for i, (s, g) in enumerate(zip(stored, given, strict=True)):
            yield from missing_from(s, g, f"{path}[{i}]")
    elif stored != given:
        yield f"{path}: {given!r} stored as {stored!r}"


def apply_unchanged(cluster: LocalCluster, tmp: Path, manifest: str, namespace: str) -> None:
    """Server-side apply with strict field validation: an unknown field is an error, not a
    silent prune."""
    proc = kubectl(cluster, tmp, "apply", "--server-side", "--validate=strict", "-n", namespace,
                   "-f", "-", stdin=manifest)
    assert proc.returncode == 0, proc.stderr
    assert "unknown field" not in proc.stderr, proc.stderr


def sample_manifests() -> dict[str, str]:
    """The upstream sample files that hold LeaderWorkerSets, by name."""
    texts = {f.stem: f.read_text() for f in sorted(SAMPLES.glob("*.yaml"))}
    return {name: text for name, text in texts.items()
            if any((d or {}).get("kind") == KIND for d in yaml.safe_load_all(text))}


SAMPLE_TEXTS = sample_manifests()


# --------------------------------------------------------------------------- the file itself


def _generate(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO / "hack" / "gen_crd.py"), "--kubeconfig",
         str(cluster.kubeconfig), *args],
        capture_output=True, text=True, check=False, cwd=REPO, timeout=300,
    )


def _server_version(cluster: LocalCluster) -> str:
    return str(json.loads(cluster.kubectl("get", "--raw", "/version"))["gitVersion"])


def test_regenerating_from_the_pinned_server_gives_the_committed_file(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    if _server_version(cluster) != PINNED:
        pytest.skip(f"the CRD is generated from kube-apiserver {PINNED}")
    proc = _generate(cluster, "--dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in CRD_FILES)
    for committed in CRD_FILES:  # LeaderWorkerSet, DisaggregatedSet and its role scaler
        assert (tmp_path / committed.name).read_bytes() == committed.read_bytes(), (
            f"the committed {committed.name} is stale: run .venv/bin/python hack/gen_crd.py")


def test_check_mode_passes_on_the_committed_file_and_fails_on_an_edited_one(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    if _server_version(cluster) != PINNED:
        pytest.skip(f"the CRD is generated from kube-apiserver {PINNED}")
    assert _generate(cluster, "--check").returncode == 0
    for committed in CRD_FILES:
        (tmp_path / committed.name).write_bytes(committed.read_bytes())
    edited = tmp_path / DS_SCALER_CRD_FILE.name
    edited.write_text(edited.read_text().replace("shortNames:\n    - dsrs",
                                                 "shortNames:\n    - dsr"))
    proc = _generate(cluster, "--check", "--dir", str(tmp_path))
    assert proc.returncode == 1
    assert f"{edited} is stale" in proc.stderr
    assert "- dsr" in proc.stderr
    assert f"{tmp_path / CRD_FILE.name} is up to date" in proc.stdout


# ---------------------------------------------------------------------------- installation


async def test_crd_is_structural_established_and_reapplies_cleanly(
    lws_crd: LocalCluster, kube: Kube
) -> None:
    crd = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
    assert crd is not None
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"
    assert "NonStructuralSchema" not in conditions
    assert crd["status"]["acceptedNames"]["shortNames"] == ["lws"]
    # Installing again (as other suites may) is a no-op.
    lws_crd.kubectl("apply", "--server-side", "--force-conflicts",
                    "--field-manager=lws-operator-tests", "-f", str(CRD_FILE))
    again = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)
    assert again is not None
    assert again["metadata"]["generation"] == crd["metadata"]["generation"]


def test_kubectl_explain_reaches_into_the_pod_template(
    lws_crd: LocalCluster, tmp_path: Path
) -> None:
    deadline = time.monotonic() + 60  # the OpenAPI of a new CRD is published asynchronously
    while True:
        proc = kubectl(lws_crd, tmp_path, "explain",
                       "lws.spec.leaderWorkerTemplate.workerTemplate.spec.containers")
        if proc.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "KIND:       LeaderWorkerSet" in out
    assert "FIELD: containers <[]Object>" in out
    for field in ("image", "env", "ports", "resources", "livenessProbe", "volumeMounts"):
        assert f"  {field}\t<" in out, field
    assert "name\t<string> -required-" in out

    proc = kubectl(lws_crd, tmp_path, "explain", "lws.spec.leaderWorkerTemplate.restartPolicy")
    assert proc.returncode == 0, proc.stderr
    assert "RecreateGroupAfterStart" in proc.stdout


# --------------------------------------------------------------------------- what is accepted


@pytest.mark.parametrize("sample", sorted(SAMPLE_TEXTS))
async def test_upstream_samples_are_accepted_unchanged(
    lws_crd: LocalCluster, kube: Kube, namespace: str, tmp_path: Path, sample: str
) -> None:
    text = SAMPLE_TEXTS[sample]
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert all(d["kind"] == KIND for d in docs), "a sample file holds LeaderWorkerSets only"
    apply_unchanged(lws_crd, tmp_path, text, namespace)
    for doc in docs:
        stored = await kube.get(API, KIND, doc["metadata"]["name"], namespace)
        assert stored is not None
        assert list(missing_from(stored["spec"], doc["spec"])) == []


def test_there_are_upstream_samples() -> None:
    assert len(SAMPLE_TEXTS) >= 4


@pytest.mark.parametrize("name", sorted(GUIDE_MANIFESTS))
async def test_guide_fields_are_accepted_unchanged(
    lws_crd: LocalCluster, kube: Kube, namespace: str, tmp_path: Path, name: str
) -> None:
    spec = yaml.safe_load(GUIDE_MANIFESTS[name])["spec"]
    manifest = {"apiVersion": API, "kind": KIND, "metadata": {"name": name}, "spec": spec}
    apply_unchanged(lws_crd, tmp_path, yaml.safe_dump(manifest), namespace)
    stored = await kube.get(API, KIND, name, namespace)
    assert stored is not None
    assert list(missing_from(stored["spec"], spec)) == []


async def test_template_metadata_keeps_only_the_embedded_fields(
    lws_crd: LocalCluster, kube: Kube, namespace: str
) -> None:
    body = lws("meta")
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "labels": {"app": "x"}, "annotations": {"a": "b"}, "creationTimestamp": None,
        "generateName": "dropped-", "ownerReferences": [],
    }
    created = await kube.create(body, namespace)
    meta = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
    assert meta == {"labels": {"app": "x"}, "annotations": {"a": "b"}}


# --------------------------------------------------------------------------- what is refused


MALFORMED: dict[str, tuple[str, Any, str]] = {
    # case: (path under spec.leaderWorkerTemplate, value, expected fragment of the message)
    "containers-as-string": (
        "workerTemplate.spec.containers", "nginx",
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers: Invalid value: \"string\""),
    "container-without-name": (
        "workerTemplate.spec.containers", [{"image": "nginx:1.27"}],
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].name: Required value"),
    "pod-spec-without-containers": (
        "leaderTemplate", {"spec": {"restartPolicy": "Always"}},
        "spec.leaderWorkerTemplate.leaderTemplate.spec.containers: Required value"),
    "duplicate-container-names": (
        "workerTemplate.spec.containers",
        [{"name": "a", "image": "x"}, {"name": "a", "image": "y"}],
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[1]: Duplicate value"),
    "port-not-a-number": (
        "workerTemplate.spec.containers.0.ports", [{"containerPort": "http"}],
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].ports[0].containerPort"),
    "env-as-map": (
        "workerTemplate.spec.containers.0.env", {"A": "1"},
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].env: Invalid value"),
    "bad-cpu-quantity": (
        "workerTemplate.spec.containers.0.resources", {"limits": {"cpu": "fast"}},
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.limits.cpu"),
    "bad-storage-quantity": (
        "volumeClaimTemplates",
        [{"metadata": {"name": "c"}, "spec": {"resources": {"requests": {"storage": "lots"}}}}],
        "spec.leaderWorkerTemplate.volumeClaimTemplates[0].spec.resources.requests.storage"),
    "toleration-seconds-not-int": (
        "workerTemplate.spec.tolerations", [{"key": "k", "tolerationSeconds": "soon"}],
        "spec.leaderWorkerTemplate.workerTemplate.spec.tolerations[0].tolerationSeconds"),
    "no-worker-template": (
        "workerTemplate", DELETE, "spec.leaderWorkerTemplate.workerTemplate: Required value"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_malformed_pod_templates_are_rejected_by_the_api_server(
    lws_crd: LocalCluster, kube: Kube, namespace: str, case: str
) -> None:
    path, value, expected = MALFORMED[case]
    body = lws("bad")
    set_path(body["spec"]["leaderWorkerTemplate"], path, value)
    message = await rejection(kube, body, namespace)
    assert expected in message, message


ENUMS = {
    "spec.startupPolicy": "LeaderScheduled",
    "spec.rolloutStrategy.type": "Recreate",
    "spec.networkConfig.subdomainPolicy": "PerPod",
    "spec.leaderWorkerTemplate.restartPolicy": "Always",
    "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType": "WorkerOnly",
    "spec.groupIdentity": "Random",
    "spec.groupReplacementPolicy": "Eventually",
    "spec.podTerminationPolicy": "Reverse",
}


@pytest.mark.parametrize("path", sorted(ENUMS))
async def test_enum_violations_are_rejected(
    lws_crd: LocalCluster, kube: Kube, namespace: str, path: str
) -> None:
    body = lws("bad-enum")
    set_path(body, path, ENUMS[path])
    message = await rejection(kube, body, namespace)
    assert f'{path}: Unsupported value: "{ENUMS[path]}"' in message, message


@pytest.mark.parametrize(("path", "value", "expected"), [
    ("spec.replicas", -1, "spec.replicas: Invalid value: -1: "
                          "spec.replicas in body should be greater than or equal to 0"),
    ("spec.replicas", 1000001, "spec.replicas in body should be less than or equal to 1000000"),
    ("spec.leaderWorkerTemplate", DELETE, "spec.leaderWorkerTemplate: Required value"),
    ("spec.networkConfig", {}, "spec.networkConfig.subdomainPolicy: Required value"),
    ("spec.leaderWorkerTemplate.maxGroupRestarts", -1,
     "spec.leaderWorkerTemplate.maxGroupRestarts in body should be greater than or equal to 0"),
    ("spec.scheduling.resourceClaims", [{"resourceClaimName": "c"}],
     "spec.scheduling.resourceClaims[0].name: Required value"),
    ("spec.scheduling.schedulingPolicy.gang.minCount", "all",
     "spec.scheduling.schedulingPolicy.gang.minCount: Invalid value"),
])
async def test_bounds_and_required_fields_are_enforced(
    lws_crd: LocalCluster, kube: Kube, namespace: str, path: str, value: Any, expected: str
) -> None:
    body = lws("bad-field")
    set_path(body, path, value)
    message = await rejection(kube, body, namespace)
    assert expected in message, message


# --------------------------------------------------------------------------------- defaults


async def test_crd_defaults_fill_a_minimal_object_and_nothing_else(
    lws_crd: LocalCluster, kube: Kube, namespace: str
) -> None:
    created = await kube.create(lws("minimal"), namespace)
    assert created["spec"] == {
        "replicas": 1,
        "startupPolicy": "LeaderCreated",
        "leaderWorkerTemplate": {
            "size": 1,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "workerTemplate": {"spec": POD_SPEC},
        },
    }


@pytest.mark.parametrize(("given", "stored"), [
    ({"rolloutStrategy": {}}, {"rolloutStrategy": {"type": "RollingUpdate"}}),
    ({"rolloutStrategy": {"rollingUpdateConfiguration": {}}},
     {"rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
         "partition": 0, "maxUnavailable": 1, "maxSurge": 0}}}),
    ({"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": "50%"}}},
     {"rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
         "partition": 0, "maxUnavailable": 1, "maxSurge": "50%"}}}),
    ({"leaderWorkerTemplate": {"subGroupPolicy": {"subGroupSize": 2}}},
     {"leaderWorkerTemplate": {"subGroupPolicy": {"subGroupSize": 2,
                                                  "subGroupPolicyType": "LeaderWorker"}}}),
    # The defaults the LWS docs add belong to the webhook: the CRD leaves these blocks as written.
    ({"leaderWorkerTemplate": {"restartBackoff": {}}},
     {"leaderWorkerTemplate": {"restartBackoff": {}}}),
    ({"scheduling": {}}, {"scheduling": {}}),
    ({"leaderWorkerTemplate": {"size": 3, "restartPolicy": "None"}},
     {"leaderWorkerTemplate": {"size": 3, "restartPolicy": "None"}}),
])
async def test_crd_defaults_inside_present_blocks(
    lws_crd: LocalCluster, kube: Kube, namespace: str, given: dict[str, Any],
    stored: dict[str, Any]
) -> None:
    body = lws("partial")
    for key, value in given.items():
        if key == "leaderWorkerTemplate":
            body["spec"][key].update(value)
        else:
            body["spec"][key] = value
    created = await kube.create(body, namespace)
    assert list(missing_from(created["spec"], stored)) == []
    for key in ("groupIdentity", "groupReplacementPolicy", "podTerminationPolicy",
                "networkConfig"):
        assert key not in created["spec"], key


async def test_list_map_key_defaults_come_from_the_pod_api(
    lws_crd: LocalCluster, kube: Kube, namespace: str
) -> None:
    body = lws("ports")
    template = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    template["containers"][0]["ports"] = [{"containerPort": 8080}]
    template["imagePullSecrets"] = [{}]
    created = await kube.create(body, namespace)
    stored = created["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert stored["containers"][0]["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    assert stored["imagePullSecrets"] == [{"name": ""}]
    assert "imagePullPolicy" not in stored["containers"][0]  # no other pod defaulting


# -------------------------------------------------------------------- subresources, columns


async def test_status_subresource_is_separate_from_the_spec(
    lws_crd: LocalCluster, kube: Kube, namespace: str
) -> None:
    body = lws("status")
    body["status"] = {"replicas": 7}
    created = await kube.create(body, namespace)
    assert "status" not in created or "replicas" not in created["status"]
    generation = created["metadata"]["generation"]

    status = {"status": {
        "replicas": 1, "readyReplicas": 1, "updatedReplicas": 1, "observedGeneration": 1,
        "hpaPodSelector": "leaderworkerset.sigs.k8s.io/name=status,"
                          "leaderworkerset.sigs.k8s.io/worker-index=0",
        "conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady",
                        "message": "All replicas are ready",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }, "spec": {"replicas": 9}}
    patched = await kube.patch(API, KIND, "status", status, namespace,
                               content_type=MERGE_PATCH, subresource="status")
    assert patched["status"]["readyReplicas"] == 1
    assert patched["status"]["conditions"][0]["reason"] == "AllGroupsReady"
    assert patched["spec"]["replicas"] == 1  # spec changes through /status are ignored
    assert patched["metadata"]["generation"] == generation

    incomplete = {"status": {"conditions": [{"type": "Progressing", "status": "True"}]}}
    with pytest.raises(DynamicApiError) as err:
        await kube.patch(API, KIND, "status", incomplete, namespace,
                         content_type=MERGE_PATCH, subresource="status")
    message = json.loads(err.value.body or "{}")["message"]
    assert "status.conditions[0].reason: Required value" in message


async def test_scale_subresource_drives_spec_replicas(
    lws_crd: LocalCluster, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    await kube.create(lws("scaled"), namespace)
    selector = "leaderworkerset.sigs.k8s.io/name=scaled,leaderworkerset.sigs.k8s.io/worker-index=0"
    await kube.patch(API, KIND, "scaled", {"status": {"replicas": 1, "hpaPodSelector": selector}},
                     namespace, content_type=MERGE_PATCH, subresource="status")

    scale = await kube.patch(API, KIND, "scaled", {"spec": {"replicas": 3}}, namespace,
                             content_type=MERGE_PATCH, subresource="scale")
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 3
    assert scale["status"] == {"replicas": 1, "selector": selector}
    got = await kube.get(API, KIND, "scaled", namespace)
    assert got is not None
    assert got["spec"]["replicas"] == 3

    proc = kubectl(lws_crd, tmp_path, "scale", "-n", namespace, "lws/scaled", "--replicas=5")
    assert proc.returncode == 0, proc.stderr
    got = await kube.get(API, KIND, "scaled", namespace)
    assert got is not None
    assert got["spec"]["replicas"] == 5


async def test_printer_columns_show_ready_desired_and_up_to_date(
    lws_crd: LocalCluster, kube: Kube, namespace: str, tmp_path: Path
) -> None:
    await kube.create(lws("columns", replicas=4), namespace)
    await kube.patch(API, KIND, "columns",
                     {"status": {"replicas": 4, "readyReplicas": 2, "updatedReplicas": 3}},
                     namespace, content_type=MERGE_PATCH, subresource="status")
    proc = kubectl(lws_crd, tmp_path, "get", "lws", "columns", "-n", namespace)
    assert proc.returncode == 0, proc.stderr
    header, row = proc.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "DESIRED", "UP-TO-DATE", "AGE"]
    assert row.split()[:4] == ["columns", "2", "4", "3"]
