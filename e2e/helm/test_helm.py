"""``helm install`` for real, the short form ``make test`` runs: one install, the LWS docs' example
and a rolling update of it, /metrics over HTTPS through its Service, and ``helm upgrade`` to a
rebuilt image while the sets run (see the package docstring for the setup)."""

from __future__ import annotations

import pytest

from e2e.cluster.node import NODE_NAME
from e2e.helm import release as r
from e2e.helm.release import Release
from e2e.image import build

pytestmark = pytest.mark.node

EXAMPLE = "arch"
IMAGE = "vllm/vllm-openai:latest"
UPDATED = "vllm/vllm-openai:v0.11.0"


def _operator_started(installed: Release, pods: list[dict[str, object]]) -> None:
    for pod in pods:
        name = pod["metadata"]["name"]  # type: ignore[index]
        out = r.logs(installed.cluster, name)
        assert r.STARTUP_LINE in out, out[-3000:]
        assert "Traceback" not in out, out[-3000:]


def test_operator_pods_run_the_chart_defaults_on_the_real_node(installed: Release) -> None:
    cluster = installed.cluster
    pods = r.wait("the operator rolled out", lambda: r.rolled_out(cluster, installed.image))
    assert {p["spec"]["nodeName"] for p in pods} == {NODE_NAME}
    container = pods[0]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert pods[0]["spec"]["securityContext"]["runAsUser"] == 65532
    pdb = r.get(cluster, "pdb", r.PDB, "-n", r.NAMESPACE)
    assert pdb["spec"]["minAvailable"] == 1
    # Both webhook configurations call the Service, with the caBundle the operator injected.
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        for hook in r.get(cluster, kind, f"lws-{kind.removesuffix('webhookconfiguration')}"
                          "-webhook-configuration")["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] == "lws-webhook-service", hook
            assert "url" not in hook["clientConfig"], hook
            assert hook["clientConfig"].get("caBundle"), hook["name"]
    _operator_started(installed, pods)
    holder = r.wait("a lease holder", lambda: r.lease_holder(cluster), timeout=60)
    assert holder in {p["metadata"]["name"] for p in pods}


def test_the_guides_example_converges_on_kwok_nodes(installed: Release) -> None:
    cluster, ns = installed.cluster, installed.namespace
    r.apply(cluster, r.example(EXAMPLE, ns, image=IMAGE))
    pods = r.wait_converged(cluster, ns, EXAMPLE, 2, 4, IMAGE)
    assert NODE_NAME not in {p["spec"]["nodeName"] for p in pods}
    # The pod webhook, reached through its Service, labelled every pod with its group's key.
    assert all(p["metadata"]["labels"].get(r.GROUP_KEY_LABEL) for p in pods)


def test_a_rolling_update_completes(installed: Release) -> None:
    cluster, ns = installed.cluster, installed.namespace
    before = r.wait_converged(cluster, ns, EXAMPLE, 2, 4, IMAGE)
    revision = before[0]["metadata"]["labels"][r.REVISION_LABEL]
    r.set_image(cluster, ns, EXAMPLE, UPDATED)
    after = r.wait_converged(cluster, ns, EXAMPLE, 2, 4, UPDATED)
    assert after[0]["metadata"]["labels"][r.REVISION_LABEL] != revision
    assert not set(r.incarnations(before)) - set(r.incarnations(after))  # same names
    assert not {u for u, _, _ in r.incarnations(before).values()} & {
        u for u, _, _ in r.incarnations(after).values()}  # every pod replaced


def test_metrics_over_https_through_the_service(installed: Release) -> None:
    got = r.scrape_metrics(installed.cluster, installed.image, installed.namespace)
    assert got == {"bound": [200, True], "anonymous": [401, False],
                   "unbound": [403, False]}, got


def test_helm_upgrade_to_a_new_image_restarts_no_set_pod(installed: Release) -> None:
    cluster, ns = installed.cluster, installed.namespace
    r.apply(cluster, r.example("second", ns, replicas=3, size=2, image=IMAGE, gpus=False))
    r.wait_converged(cluster, ns, "second", 3, 2, IMAGE)
    r.wait_converged(cluster, ns, EXAMPLE, 2, 4, UPDATED)
    old_pods = {p["metadata"]["name"] for p in r.operator_pods(cluster)}
    before = r.all_set_pods(cluster)
    image = build(variant="helm-upgrade")
    assert image.tag != installed.image.tag
    cluster.import_image(image.archive)
    with r.watching_rollout(cluster) as view:
        r.install(cluster, image, verb="upgrade")
        pods = r.wait("the new image rolled out", lambda: r.rolled_out(cluster, image))
    new_pods = {p["metadata"]["name"] for p in pods}
    assert not new_pods & old_pods
    # The PodDisruptionBudget's minAvailable (1) held at every sample of the rollout.
    assert view.samples > 1
    assert view.min_ready >= 1, view
    assert view.min_healthy >= 1, view
    r.wait("a new pod leading", lambda: r.lease_holder(cluster) in new_pods or None, timeout=90)
    _operator_started(installed, pods)
    # The new leader has reconciled what it found (caches synced) without touching a pod.
    r.wait("the new leader's caches", lambda: any(
        "caches synced" in r.logs(cluster, name) for name in new_pods) or None, timeout=60)
    r.wait_converged(cluster, ns, EXAMPLE, 2, 4, UPDATED)
    r.wait_converged(cluster, ns, "second", 3, 2, IMAGE)
    assert r.all_set_pods(cluster) == before
    # It serves: a new set converges through the upgraded webhooks and controller.
    r.apply(cluster, r.example("third", ns, replicas=1, size=2, image=IMAGE, gpus=False))
    r.wait_converged(cluster, ns, "third", 1, 2, IMAGE)
    assert {k: v for k, v in r.all_set_pods(cluster).items()
            if "/third-" not in k and not k.endswith("/third")} == before
