"""``helm install`` for real, the long form (``make e2e-helm``, ``LWS_E2E_HELM=full``): leader
election between the two operator pods with the leader deleted mid-rollout, ``helm uninstall``
and install again under running sets, and a set in a namespace made after the install."""

from __future__ import annotations

import os
import time
import uuid

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.helm import release as r
from e2e.helm.release import Release

pytestmark = [
    pytest.mark.node,
    pytest.mark.skipif(os.environ.get("LWS_E2E_HELM") != "full",
                       reason="the long helm form: make e2e-helm (LWS_E2E_HELM=full)"),
]

IMAGE = "vllm/vllm-openai:latest"
UPDATED = "vllm/vllm-openai:v0.11.0"


def _slow(lws: dict[str, object], delay: str) -> dict[str, object]:
    """Its pods turn Ready ``delay`` after they start (kwok), so a rollout takes a while."""
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]  # type: ignore[index]
    template["metadata"] = {"annotations": {READY_DELAY_ANNOTATION: delay}}
    return lws


def test_leader_failover_mid_rollout(installed: Release) -> None:
    cluster, ns = installed.cluster, installed.namespace
    rolling = r.example("rolling", ns, replicas=4, size=2, image=IMAGE, gpus=False)
    r.apply(cluster, _slow(rolling, "3s"),
            r.example("steady", ns, replicas=2, size=2, image=IMAGE, gpus=False))
    r.wait_converged(cluster, ns, "rolling", 4, 2, IMAGE)
    r.wait_converged(cluster, ns, "steady", 2, 2, IMAGE)
    steady = r.incarnations(r.set_pods(cluster, ns, "steady"))
    leader = r.wait("a lease holder", lambda: r.lease_holder(cluster), timeout=60)
    r.set_image(cluster, ns, "rolling", UPDATED, gpus=False)

    def mid_rollout() -> dict[str, r.Incarnation] | None:
        """The Ready pods of the new image once some, not all, groups run it."""
        pods = [p for p in r.set_pods(cluster, ns, "rolling")
                if not p["metadata"].get("deletionTimestamp")]
        new = [p for p in pods if p["spec"]["containers"][0]["image"] == UPDATED and r.ready(p)]
        return r.incarnations(new) if 0 < len(new) < 8 else None

    updated = r.wait("the rollout under way", mid_rollout, timeout=120, interval=0.2)
    cluster.kubectl("delete", "pod", leader, "-n", r.NAMESPACE, "--wait=false")
    deleted = time.monotonic()
    successor = r.wait("another pod leading", lambda: (
        holder if (holder := r.lease_holder(cluster)) not in (None, leader) else None),
        timeout=120, interval=0.2)
    failover = time.monotonic() - deleted
    print(f"leader {leader} deleted; {successor} leads after {failover:.1f} s")
    after = r.wait_converged(cluster, ns, "rolling", 4, 2, UPDATED, timeout=240)
    # The groups already running the new image kept running; nothing restarted anywhere.
    current = r.incarnations(after)
    assert {n: current.get(n) for n in updated} == updated
    assert r.incarnations(r.set_pods(cluster, ns, "steady")) == steady
    assert all(restarts == 0 for _, _, restarts in current.values())


def test_uninstall_then_install_keeps_the_sets(installed: Release) -> None:
    cluster, ns = installed.cluster, installed.namespace
    r.apply(cluster, r.example("kept", ns, replicas=2, size=3, image=IMAGE, gpus=False))
    r.wait_converged(cluster, ns, "kept", 2, 3, IMAGE)
    before = r.all_set_pods(cluster)
    sets = {s["metadata"]["uid"] for s in r.get(
        cluster, "leaderworkersets.leaderworkerset.x-k8s.io", "-A")["items"]}
    r.uninstall(cluster)
    r.wait("the operator pods gone", lambda: not r.operator_pods(cluster) or None)
    # helm leaves the CRDs (crds/ is never deleted), so the sets and their pods stay.
    for crd in ("leaderworkersets.leaderworkerset.x-k8s.io",
                "disaggregatedsets.disaggregatedset.x-k8s.io"):
        assert r.get(cluster, "crd", crd)["metadata"]["name"] == crd
    assert r.all_set_pods(cluster) == before
    r.install(cluster, installed.image)
    pods = r.wait("the operator rolled out", lambda: r.rolled_out(cluster, installed.image))
    names = {p["metadata"]["name"] for p in pods}
    r.wait("a new pod leading", lambda: r.lease_holder(cluster) in names or None, timeout=90)
    r.wait("the new leader's caches", lambda: any(
        "caches synced" in r.logs(cluster, name) for name in names) or None, timeout=60)
    r.wait_converged(cluster, ns, "kept", 2, 3, IMAGE)
    assert {s["metadata"]["uid"] for s in r.get(
        cluster, "leaderworkersets.leaderworkerset.x-k8s.io", "-A")["items"]} == sets
    assert r.all_set_pods(cluster) == before


def test_a_set_in_a_namespace_made_after_the_install(installed: Release) -> None:
    cluster = installed.cluster
    ns = r.temp_namespace(cluster, f"late-{uuid.uuid4().hex[:8]}")
    try:
        r.apply(cluster, r.example("late", ns, image=IMAGE))
        pods = r.wait_converged(cluster, ns, "late", 2, 4, IMAGE)
        assert all(p["metadata"]["labels"].get(r.GROUP_KEY_LABEL) for p in pods)
    finally:
        cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
