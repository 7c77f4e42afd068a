"""Certificate rotation under admission load: zero failed admissions.

Two ``lws-operator run`` processes share one certificate Secret, as the chart's two replicas do;
a round-robin TCP front stands in for their Service, and the webhook configurations (created here,
as the chart installs them; the replicas only inject the caBundle) point at it. Validities are
seconds long, so within the run the serving certificate is renewed and the CA rotated: new CA added
to the bundle, serving certificate re-issued by it, old CA dropped; the replicas race for every
write. Meanwhile a generator drives dry-run admissions (LWS pods, valid and invalid
LeaderWorkerSets) through the real API server, offered at 200 per second, every one of which must
come back with its expected answer. Requests the machine cannot take in time (more than a second
late) are shed and counted, not sent, so the achieved rate is what the machine sustained.

Short (CI): until one renewal and one complete CA rotation (about 40 s of load). Full: 10 minutes,
about 9 CA rotations and 20 renewals. The rate, latencies and where the CPU went are printed
(``-s``), not asserted: they depend on the machine; a failed admission fails the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from e2e.chaos import FULL, size
from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.admission import served_certificate, wait_until_admitting
from e2e.harness.admission_load import (
    MUTATING,
    VALIDATING,
    AdmissionLoad,
    CertHistory,
    CpuMeter,
    ProxyProcess,
    delete_registrations,
    histogram_totals,
    mean_ms,
    metrics_text,
    secret_data,
    served_reviews,
    watch_certificates,
)
from e2e.harness.launcher import OperatorProcess
from e2e.kube import wait_for
from lws_operator.admission import registration
from lws_operator.kube.client import ApiException, KubeClient
from lws_operator.logic.runtime import certs

pytestmark = [pytest.mark.api, pytest.mark.chaos_run]

SECRET = "lws-webhook-server-cert"
WEBHOOK_LATENCY = "controller_runtime_webhook_latency_seconds"
APISERVER_WEBHOOK_DURATION = "apiserver_admission_webhook_admission_duration_seconds"
RATE = 200
# Short: renewal at 12 s, CA rotation from 24 s, complete about 10 s later. Full: a CA rotation
# every 60 s, a renewal every 20 s or sooner, for 10 minutes.
CERT_VALIDITY = "30s" if FULL else "18s"
CA_VALIDITY = "90s" if FULL else "36s"
PROPAGATION = "5s" if FULL else "4s"
LOAD_SECONDS = size(0, 600)
WANT_RENEWALS = size(1, 10)
WANT_CA_ROTATIONS = size(1, 5)


@dataclass
class Replicas:
    kube: KubeClient
    namespace: str
    run_id: str
    proxy: ProxyProcess
    processes: list[OperatorProcess]
    metrics_ports: list[int]

    @property
    def operator_namespace(self) -> str:
        return self.processes[0].namespace


async def served_pem(port: int) -> bytes:
    """The PEM certificate a new TLS connection to a replica's listener gets."""
    der = await served_certificate(port)
    return x509.load_der_x509_certificate(der).public_bytes(serialization.Encoding.PEM)


@pytest_asyncio.fixture(loop_scope="session")
async def replicas(lws_crd: LocalCluster, tmp_path: Path) -> AsyncIterator[Replicas]:
    kubeconfig = str(lws_crd.kubeconfig)
    kube = await KubeClient.connect(kubeconfig)
    run_id = uuid.uuid4().hex[:8]
    namespace = f"t-rot-{run_id}"
    metrics_ports = [free_port(), free_port()]
    processes = [
        OperatorProcess.local(kubeconfig, run_id, tmp_path / f"replica-{i}.log", extra_args=[
            "--no-register-webhooks", "--disable-controllers",
            "--cert-validity", CERT_VALIDITY, "--ca-validity", CA_VALIDITY,
            "--cert-sync-interval", "1s", "--cert-propagation-delay", PROPAGATION,
            "--metrics-bind-address", f"127.0.0.1:{port}", "--metrics-secure=false"])
        for i, port in enumerate(metrics_ports)]
    proxy = ProxyProcess([p.webhook_port for p in processes])
    await proxy.start()
    mutating, validating = (f"lws-mutating-{run_id}", f"lws-validating-{run_id}")
    for ns in (namespace, processes[0].namespace):
        await kube.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        # As the chart installs them: no caBundle yet, the replicas inject it. Confined to the
        # test namespace, so nothing else on the cluster depends on these replicas.
        for obj in registration.render(
                registration.UrlTarget(f"https://127.0.0.1:{proxy.port}"),
                mutating_name=mutating, validating_name=validating,
                only_namespaces=(namespace,)):
            await kube.request("POST", MUTATING if obj["kind"].startswith("Mutating")
                               else VALIDATING, body=obj)
        await asyncio.gather(*(p.start() for p in processes))
        yield Replicas(kube, namespace, run_id, proxy, processes, metrics_ports)
    finally:
        for p in processes:
            code = await p.stop()
            assert code in (0, None), p.log_tail()
        await proxy.stop()
        await delete_registrations(kube, mutating, validating)
        for ns in (namespace, processes[0].namespace):
            with contextlib.suppress(ApiException):
                await kube.request("DELETE", f"/api/v1/namespaces/{ns}")
        await kube.close()


def cluster_pids(cluster: LocalCluster) -> dict[str, int]:
    """kube-apiserver's and etcd's process ids (none for an external cluster)."""
    out = {}
    for name in ("kube-apiserver", "etcd"):
        with contextlib.suppress(OSError, ValueError):
            out[name] = int((cluster.dir / "pids" / f"{name}.pid").read_text())
    return out


async def test_rotation_under_200_admissions_per_second_fails_none(
        replicas: Replicas, lws_crd: LocalCluster) -> None:
    r = replicas
    await wait_until_admitting(r.kube, r.namespace)
    history = CertHistory()
    watcher = asyncio.create_task(watch_certificates(r.kube, r.operator_namespace, SECRET,
                                                     history))
    before = [await asyncio.to_thread(metrics_text, port) for port in r.metrics_ports]
    apiserver_before = histogram_totals((await r.kube.raw("GET", "/metrics")).decode(),
                                        APISERVER_WEBHOOK_DURATION, "name")
    cpu = CpuMeter({"load generator (pytest)": os.getpid(), "proxy": r.proxy.pid,
                    **{f"replica {i}": p.process.pid for i, p in enumerate(r.processes)
                       if p.process is not None},
                    **cluster_pids(lws_crd)})
    # The load has a client (and connection pool) of its own, as users' requests do.
    users = await KubeClient.connect(str(lws_crd.kubeconfig))
    load_average = os.getloadavg()[0]
    cpu.start()
    try:
        load = AdmissionLoad(users, r.namespace, rate=RATE, burst=RATE // 10, max_in_flight=64)
        report = await load.run(
            lambda: history.renewals >= WANT_RENEWALS
            and history.completed_ca_rotations >= WANT_CA_ROTATIONS,
            min_seconds=LOAD_SECONDS, max_seconds=LOAD_SECONDS + 150)
    finally:
        cores = cpu.stop()
        load_average = max(load_average, os.getloadavg()[0])
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await users.close()
    after = [await asyncio.to_thread(metrics_text, port) for port in r.metrics_ports]
    apiserver_after = histogram_totals((await r.kube.raw("GET", "/metrics")).decode(),
                                       APISERVER_WEBHOOK_DURATION, "name")
    await r.proxy.stop()  # its connection counts come with its exit
    per_replica = [round(served_reviews(a) - served_reviews(b))
                   for a, b in zip(after, before, strict=True)]
    server_ms = [mean_ms(histogram_totals(b, WEBHOOK_LATENCY, "webhook"),
                         histogram_totals(a, WEBHOOK_LATENCY, "webhook"))
                 for a, b in zip(after, before, strict=True)]
    logs = [p.log_path.read_text(errors="replace") for p in r.processes]
    steps = {reason: sum(log.count(f"webhook certificates: {reason}") for log in logs)
             for reason in ("serving certificate renewed", "CA rotation started",
                            "serving certificate re-issued by the new CA",
                            "previous CA removed from the bundle")}
    summary = {
        "variant": "full" if FULL else "short", "target_rate_per_s": RATE,
        **report.summary(),
        "serving_certificates_seen": len(history.serving), "renewals": history.renewals,
        "signing_cas_seen": len(history.cas),
        "completed_ca_rotations": history.completed_ca_rotations,
        "bundles_seen": [len(b) for b in history.bundles],
        "rotation_steps_logged": steps,
        "reviews_served_per_replica": per_replica,
        "connections_per_replica": [r.proxy.connections.get(p.webhook_port, 0)
                                    for p in r.processes],
        "webhook_handling_mean_ms_per_replica": server_ms,
        "apiserver_webhook_call_mean_ms": mean_ms(apiserver_before, apiserver_after),
        "cpu_cores_used": cores, "machine_load_average_1m": round(load_average, 1),
    }
    print("\ncertificate rotation under load:", json.dumps(summary, indent=2))

    assert report.failures == [], report.failures[:20]
    assert report.total_ok == report.total_sent > 0
    assert not history.errors, history.errors[-3:]
    assert history.renewals >= WANT_RENEWALS, summary
    assert history.completed_ca_rotations >= WANT_CA_ROTATIONS, summary
    # The CA overlap happened: a bundle of the new and the old CA was in the Secret.
    assert 2 in summary["bundles_seen"], summary
    # Before and after: the first CA has left the trust bundle, and the serving certificate
    # now is another one, signed by a CA of the bundle.
    final = await secret_data(r.kube, r.operator_namespace, SECRET)
    assert final is not None
    bundle = x509.load_pem_x509_certificates(final[certs.CA_CERT_KEY])
    cert = x509.load_pem_x509_certificate(final[certs.TLS_CERT_KEY])
    assert history.cas[0] not in bundle
    assert cert != history.serving[0]
    assert any(certs.signed_by(cert, ca) for ca in bundle)
    # Both replicas took connections and answered admissions through the rotation.
    assert all(n > 0 for n in per_replica), summary
    assert not any(r.proxy.refused.values()), r.proxy.refused
    for log in logs:
        assert "Traceback" not in log

    # Both replicas end up serving the Secret's current certificate.
    async def both_serve_the_secret() -> bool:
        data = await secret_data(r.kube, r.operator_namespace, SECRET)
        assert data is not None
        served = [await served_pem(p.webhook_port) for p in r.processes]
        return all(s == data[certs.TLS_CERT_KEY] for s in served)

    await wait_for(both_serve_the_secret, timeout=30, what="both replicas to serve the Secret")
