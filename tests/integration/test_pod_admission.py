"""Pod mutation through a real kube-apiserver (upstream's test/integration/webhooks/pod_test.go):
leader, worker, subgroup, TPU and
exclusive-placement pods come back from the API server exactly as upstream's webhook leaves them.

The pods are created directly (no controller runs on the api tier), carrying what the
StatefulSet controller would have copied from our templates: the name and worker-index labels,
the size annotation and, for workers, the leader's labels and name.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.kube import Kube

pytestmark = pytest.mark.api

P = "leaderworkerset.sigs.k8s.io/"


def sha1(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


def lws_pod(name: str, *, lws: str = "test-sample", size: int = 2, worker: int | None = None,
            subdomain: str = "default", labels: dict[str, str] | None = None,
            annotations: dict[str, str] | None = None, tpus: int = 0,
            containers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    all_labels = {P + "name": lws, P + "worker-index": "0" if worker is None else str(worker)}
    if worker is not None:
        del all_labels[P + "worker-index"]  # the webhook derives it from the name
    all_labels.update(labels or {})
    limits = {"google.com/tpu": str(tpus)} if tpus else {}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": all_labels,
                     "annotations": {P + "size": str(size), **(annotations or {})}},
        "spec": {"subdomain": subdomain, "containers": containers or [
            {"name": "main", "image": "busybox", "resources": {"limits": limits}}]},
    }


def env(pod: dict[str, Any], container: int = 0) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in
            pod["spec"]["containers"][container].get("env") or []}


async def admit(kube: Kube, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    await kube.create(body, ns)
    stored = await kube.get("v1", "Pod", body["metadata"]["name"], ns)
    assert stored is not None
    return stored


async def test_pods_without_the_name_label_are_untouched(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "plain", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    stored = await admit(kube, ns, body)
    assert stored["metadata"]["labels"] == {"app": "x"}
    assert "env" not in stored["spec"]["containers"][0]


async def test_leader_pod(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    stored = await admit(kube, ns, lws_pod("test-1", lws="test", subdomain="test"))
    labels = stored["metadata"]["labels"]
    assert labels[P + "group-index"] == "1"
    assert labels[P + "group-key"] == sha1(f"{ns}/test-1")
    assert [e["name"] for e in stored["spec"]["containers"][0]["env"]][:3] == [
        "LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX"]
    assert env(stored) == {"LWS_LEADER_ADDRESS": f"test-1.test.{ns}", "LWS_GROUP_SIZE": "2",
                           "LWS_WORKER_INDEX": "0"}


async def test_worker_pod(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    stored = await admit(kube, ns, lws_pod(
        "test-1-1", lws="test", worker=1, subdomain="test",
        labels={P + "group-index": "1"}, annotations={P + "leader-name": "test-1"}))
    assert stored["metadata"]["labels"] == {P + "name": "test", P + "worker-index": "1",
                                            P + "group-index": "1"}
    assert env(stored)["LWS_LEADER_ADDRESS"] == f"test-1.test.{ns}"
    assert env(stored)["LWS_WORKER_INDEX"] == "1"


async def test_user_env_is_kept_after_the_lws_variables(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = lws_pod("test-sample-1-1", worker=1, subdomain="test-sample",
                   labels={P + "group-index": "1"},
                   annotations={P + "leader-name": "test-sample-1"},
                   containers=[{"name": "a", "image": "x", "env": [
                       {"name": "USER", "value": "1"},
                       {"name": "LWS_GROUP_SIZE", "value": "99"}]},
                       {"name": "b", "image": "x"}])
    stored = await admit(kube, ns, body)
    for index in (0, 1):
        names = [e["name"] for e in stored["spec"]["containers"][index]["env"]]
        assert names[0] == "LWS_LEADER_ADDRESS"
    assert [e["name"] for e in stored["spec"]["containers"][0]["env"]] == [
        "LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX", "USER"]
    assert env(stored)["LWS_GROUP_SIZE"] == "2"
    assert env(stored)["LWS_LEADER_ADDRESS"] == f"test-sample-1.test-sample.{ns}"


async def test_unique_per_replica_leader_gets_its_own_subdomain(
    admitted: tuple[Kube, str]
) -> None:
    kube, ns = admitted
    stored = await admit(kube, ns, lws_pod(
        "test-sample-1", size=5, tpus=4, subdomain="test-sample",
        annotations={P + "subdomainPolicy": "UniquePerReplica"}))
    assert stored["spec"]["subdomain"] == "test-sample-1"
    assert env(stored)["TPU_WORKER_HOSTNAMES"] == ",".join(
        ["test-sample-1.test-sample-1"] + [f"test-sample-1-{k}.test-sample-1" for k in range(1, 5)])
    assert env(stored)["LWS_LEADER_ADDRESS"] == f"test-sample-1.test-sample-1.{ns}"


@pytest.mark.parametrize(
    ("name", "worker", "size", "leader_tpu", "hosts", "worker_id"),
    [
        ("test-sample-1", None, 5, True,
         "test-sample-1.default," + ",".join(f"test-sample-1-{k}.default" for k in range(1, 5)),
         "0"),
        ("test-sample-1-3", 3, 5, False,
         ",".join(f"test-sample-1-{k}.default" for k in range(1, 5)), "2"),
        ("test-sample-1-3", 3, 5, True,
         "test-sample-1.default," + ",".join(f"test-sample-1-{k}.default" for k in range(1, 5)),
         "3"),
        ("test-sample-1-1", 1, 2, True, "test-sample-1.default,test-sample-1-1.default", "1"),
        ("test-sample-1", None, 1, True, "test-sample-1.default", "0"),
    ],
)
async def test_tpu_env(admitted: tuple[Kube, str], name: str, worker: int | None, size: int,
                       leader_tpu: bool, hosts: str, worker_id: str) -> None:
    kube, ns = admitted
    annotations = {P + "leader-name": "test-sample-1"} if worker else {}
    if worker and leader_tpu:
        annotations[P + "leader-requests-tpus"] = "true"
    labels = {P + "group-index": "1"} if worker else {}
    body = lws_pod(f"{name}", size=size, worker=worker, tpus=4, labels=labels,
                   annotations=annotations)
    body["metadata"]["name"] = name
    await kube.delete("v1", "Pod", name, ns)  # names repeat across cases
    stored = await admit(kube, ns, body)
    assert env(stored)["TPU_WORKER_HOSTNAMES"] == hosts
    assert env(stored)["TPU_WORKER_ID"] == worker_id
    assert env(stored)["TPU_NAME"] == "test-sample-1"


@pytest.mark.parametrize(
    ("name", "worker", "size", "sgs", "leader_tpu", "index"),
    [
        ("sg-1", None, 4, 2, True, "0"),
        ("sg-2-3", 3, 4, 2, True, "1"),
        ("sg-3-4", 4, 5, 2, False, "1"),
    ],
)
async def test_subgroup_labels(admitted: tuple[Kube, str], name: str, worker: int | None,
                               size: int, sgs: int, leader_tpu: bool, index: str) -> None:
    kube, ns = admitted
    leader = name if worker is None else name.rsplit("-", 1)[0]
    annotations = {P + "subgroup-size": str(sgs)}
    labels = {}
    if worker is not None:
        annotations[P + "leader-name"] = leader
        labels[P + "group-index"] = leader.rsplit("-", 1)[1]
        if leader_tpu:
            annotations[P + "leader-requests-tpus"] = "true"
    stored = await admit(kube, ns, lws_pod(name, lws="sg", size=size, worker=worker,
                                           labels=labels, annotations=annotations))
    assert stored["metadata"]["labels"][P + "subgroup-index"] == index
    assert stored["metadata"]["labels"][P + "subgroup-key"] == sha1(f"{leader}/{index}")


def required_terms(pod: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    affinity = pod["spec"].get("affinity") or {}
    terms: list[dict[str, Any]] = (affinity.get(kind) or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or []
    return terms


async def test_exclusive_placement_leader_and_worker(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    topology = {P + "exclusive-topology": "topology.kubernetes.io/rack",
                P + "subgroup-exclusive-topology": "kubernetes.io/hostname",
                P + "subgroup-size": "2"}
    leader = await admit(kube, ns, lws_pod("ex-0", lws="ex", size=4, annotations=topology))
    key = sha1(f"{ns}/ex-0")
    affinity = required_terms(leader, "podAffinity")
    anti = required_terms(leader, "podAntiAffinity")
    assert affinity == [
        {"labelSelector": {"matchExpressions": [
            {"key": P + "group-key", "operator": "In", "values": [key]}]},
         "topologyKey": "topology.kubernetes.io/rack"},
        {"labelSelector": {"matchExpressions": [
            {"key": P + "subgroup-key", "operator": "In", "values": [sha1("ex-0/0")]}]},
         "topologyKey": "kubernetes.io/hostname"},
    ]
    assert anti[0] == {"labelSelector": {"matchExpressions": [
        {"key": P + "group-key", "operator": "Exists"},
        {"key": P + "group-key", "operator": "NotIn", "values": [key]}]},
        "topologyKey": "topology.kubernetes.io/rack"}
    worker = await admit(kube, ns, lws_pod(
        "ex-0-3", lws="ex", size=4, worker=3, labels={P + "group-index": "0", P + "group-key": key},
        annotations={**topology, P + "leader-name": "ex-0"}))
    assert [t["topologyKey"] for t in required_terms(worker, "podAffinity")] == [
        "kubernetes.io/hostname"]
    assert [t["topologyKey"] for t in required_terms(worker, "podAntiAffinity")] == [
        "kubernetes.io/hostname"]


async def test_user_affinity_terms_come_first(admitted: tuple[Kube, str]) -> None:
    kube, ns = admitted
    body = lws_pod("keep-0", lws="keep", annotations={P + "exclusive-topology": "zone"})
    user_term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    body["spec"]["affinity"] = {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [user_term]}}
    stored = await admit(kube, ns, body)
    terms = required_terms(stored, "podAffinity")
    assert terms[0] == user_term
    assert len(terms) == 2


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "nosize-0", "labels": {P + "name": "x", P + "worker-index": "0"}},
          "spec": {"containers": [{"name": "m", "image": "busybox"}]}},
         "size annotation is unexpectedly missing for pod nosize-0"),
        (lws_pod("noordinal"), "parsing pod ordinal for pod noordinal"),
    ],
)
async def test_malformed_lws_pods_are_rejected(admitted: tuple[Kube, str],
                                               body: dict[str, Any], message: str) -> None:
    kube, ns = admitted
    with pytest.raises(DynamicApiError) as exc:
        await kube.create(body, ns)
    got = json.loads(exc.value.body or "{}")["message"]
    assert 'admission webhook "mpod.kb.io" denied the request' in got
    assert message in got
    assert await kube.get("v1", "Pod", body["metadata"]["name"], ns) is None
