"""A LeaderWorkerSet stored while the operator is down gets only mutated pods when it starts.

Local mode removes its webhook configurations on exit, so a set stored meanwhile meets an operator
start with no pod webhook registered. Before the fix the controllers reconciled it at once,
before the configurations were registered: its leader pods were created unmutated and the set
never became Ready. The controllers now reconcile only once the webhooks serve
(``admission.runtime``). Each certificate mode the operator has is run as ``lws-operator run``:

- ``local``: self-managed certificates, configurations registered by URL by the operator;
- ``self-managed``: self-managed certificates, configurations installed beforehand (as the chart
  installs them, without a caBundle), the operator injecting the CA (``--no-register-webhooks``);
- ``external``: certificates kept by someone else (``--cert-management external``): this test
  writes the Secret and the caBundles as cert-manager and its cainjector do.

In each, no pod may be older than the pod webhook's configuration (creation timestamps, which
have a resolution of a second), every pod must carry what the pod webhook adds, and the set
converges.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import uuid
from pathlib import Path
from typing import Any

import pytest

from e2e.harness.builder import API, KIND, LeaderWorkerSet
from e2e.harness.clusters import Clusters
from e2e.harness.converge import lws_pods, wait_converged
from e2e.harness.launcher import OperatorProcess
from e2e.kube import Kube, wait_for
from lws_operator.admission import registration
from lws_operator.api.constants import WORKER_INDEX_LABEL
from lws_operator.logic.mutation.unmutated import missing_labels
from lws_operator.logic.runtime import certs

pytestmark = pytest.mark.full

ADMISSION = "admissionregistration.k8s.io/v1"
MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
IMAGE = "nginx:1"
REPLICAS, SIZE = 2, 2
MODES = ("local", "self-managed", "external")


def _time(obj: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(obj["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


async def _prepare(kube: Kube, mode: str, op: OperatorProcess, namespace: str) -> None:
    """What exists before the operator starts in ``mode`` besides the set."""
    mutating, validating = op.configurations
    if mode == "local":
        return
    bundle = None
    if mode == "external":
        # As cert-manager leaves the Secret (a CA-issued serving certificate with ca.crt).
        options = registration_options(op)
        data = certs.plan(None, now=dt.datetime.now(dt.UTC), policy=options.policy(),
                          bundle_injected=False).data
        assert data is not None
        await kube.create({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "lws-webhook-server-cert"},
            "data": {k: base64.b64encode(data[k]).decode()
                     for k in (certs.TLS_CERT_KEY, certs.TLS_KEY_KEY, certs.CA_CERT_KEY)}},
            op.namespace)
        bundle = data[certs.CA_CERT_KEY]  # what cert-manager's cainjector writes
    for obj in registration.render(
            registration.UrlTarget(f"https://127.0.0.1:{op.webhook_port}"), ca_bundle=bundle,
            mutating_name=mutating, validating_name=validating,
            only_namespaces=(namespace,)):
        await kube.create(obj)


def registration_options(op: OperatorProcess) -> Any:
    from lws_operator.admission.runtime import WebhookOptions

    return WebhookOptions(namespace=op.namespace, webhook_host="127.0.0.1",
                          port=op.webhook_port)


EXTRA_ARGS = {
    "local": [],
    "self-managed": ["--no-register-webhooks"],
    "external": ["--cert-management", "external"],
}


@pytest.mark.parametrize("mode", MODES)
async def test_a_set_stored_while_the_operator_was_down_gets_only_mutated_pods(
        clusters: Clusters, tmp_path: Path, mode: str) -> None:
    cluster = clusters.get("full")
    await asyncio.to_thread(cluster.install_crd)
    kube = await Kube.connect(str(cluster.kubeconfig))
    run_id = uuid.uuid4().hex[:8]
    namespace = f"t-start-{run_id}"
    op = OperatorProcess.local(str(cluster.kubeconfig), run_id, tmp_path / "operator.log",
                               extra_args=EXTRA_ARGS[mode])
    mutating, validating = op.configurations
    try:
        for ns in (namespace, op.namespace):
            await kube.create({"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": ns}})
        name = "stored"
        # Stored first: once configurations exist, nothing is admitted without the operator.
        await kube.create(LeaderWorkerSet(name).replicas(REPLICAS).size(SIZE).image(IMAGE)
                          .build(), namespace)
        await _prepare(kube, mode, op, namespace)
        await op.start()
        config = await kube.get(ADMISSION, MUTATING, mutating)
        assert config is not None, op.log_tail()
        registered = _time(config)

        async def leaders() -> list[dict[str, Any]] | None:
            pods = [p for p in await lws_pods(kube, namespace, name)
                    if p["metadata"]["labels"].get(WORKER_INDEX_LABEL) == "0"]
            return pods if len(pods) == REPLICAS else None

        # The leader pods are the first the start creates: checked before anything could
        # replace them.
        first = await wait_for(leaders, timeout=120, what="both leader pods")
        assert first is not None
        for pod in first:
            assert _time(pod) >= registered, (pod["metadata"]["name"], registered)
            assert missing_labels(pod) == (), (pod["metadata"], op.log_tail())
        await wait_converged(kube, namespace, name, REPLICAS, SIZE, IMAGE)
        pods = await lws_pods(kube, namespace, name)
        assert len(pods) == REPLICAS * SIZE
        for pod in pods:
            assert _time(pod) >= registered, (pod["metadata"]["name"], registered)
            assert missing_labels(pod) == (), pod["metadata"]
        log = op.log_text(200_000)
        assert log.index("the webhooks serve (") < log.index("the webhooks serve: reconciling")
        assert "Traceback" not in log
    finally:
        with contextlib.suppress(Exception):
            await kube.delete(API, KIND, "stored", namespace)
        if op.alive:
            # Deleted while the operator runs (its finalizer may hold retained pods).
            with contextlib.suppress(AssertionError):
                await wait_for(lambda: _gone(kube, namespace), timeout=60, what="pods gone")
        code = await op.stop()
        assert code in (0, None), op.log_tail()
        if mode != "local":
            for kind, config_name in ((MUTATING, mutating), (VALIDATING, validating)):
                with contextlib.suppress(Exception):
                    await kube.delete(ADMISSION, kind, config_name)
        for ns in (namespace, op.namespace):
            with contextlib.suppress(Exception):
                await kube.delete("v1", "Namespace", ns)
        await kube.close()


async def _gone(kube: Kube, namespace: str) -> bool:
    await asyncio.sleep(0)
    return not await kube.list("v1", "Pod", namespace)
