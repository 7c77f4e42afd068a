"""``lws-operator run`` stops at start, with one line naming the problem and no traceback, when its
input is invalid (exit 2) or the cluster lacks something it needs (exit 1): its namespace, a
permission; and it waits, not ready, for the LeaderWorkerSet CRD. Real processes against a
private API server (etcd + kube-apiserver, a few seconds to start), so the CRD can be absent
without disturbing other tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster import LocalCluster, NodeLayout
from e2e.cluster.launcher import (
    CRD_FILE,
    DS_CRD_FILE,
    DS_CRD_NAME,
    DS_SCALER_CRD_FILE,
    DS_SCALER_CRD_NAME,
    free_port,
)
from e2e.harness.builder import LeaderWorkerSet
from e2e.harness.clusters import install_volcano_crd
from e2e.harness.launcher import answers_ready, reaped
from e2e.kube import Kube, wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("LWS_E2E_KUBECONFIG")),
    reason="needs a private API server (the CRD is removed and installed here)")


@pytest.fixture(scope="module")
def private(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("startup-cluster"))
    cluster.up("api", NodeLayout(), timeout=180)
    try:
        yield cluster
    finally:
        cluster.down()


def operator_command(kubeconfig: Path | str, *flags: str, health_port: int | None = None,
                     metrics_address: str | None = None) -> list[str]:
    """``lws-operator run`` on free local ports (``health_port`` and ``metrics_address`` when
    given), text logs, then ``flags``."""
    return [sys.executable, "-m", "lws_operator", "run", "--kubeconfig", str(kubeconfig),
            "--webhook-host", "127.0.0.1", "--webhook-port", str(free_port()),
            "--health-port", str(health_port or free_port()),
            "--metrics-bind-address", metrics_address or f"127.0.0.1:{free_port()}",
            "--log-format", "text", *flags]


async def run_operator(kubeconfig: Path | str, *flags: str, timeout: float = 60.0,  # noqa: ASYNC109
                       ) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *operator_command(kubeconfig, *flags),
        cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        # The whole group: asyncio's wait() also waits for the pipes, which an admission child
        # left behind would hold open for ever.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), 30)
        raise
    assert proc.returncode is not None
    return proc.returncode, err.decode()


def startup_errors(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if "startup error:" in line]


async def test_an_invalid_configuration_file_exits_2(private: LocalCluster,
                                                     tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"
                      "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n"
                      "clientConnection:\n  burst: many\n")
    code, err = await run_operator(private.kubeconfig, "--config", str(config))
    assert code == 2
    assert "Traceback" not in err
    assert err.strip().splitlines() == [
        f"lws-operator: error: invalid configuration: {config}: leaderElection: leaseDuration "
        "must be greater than renewDeadline; clientConnection.burst: Input should be a valid "
        "integer (got 'many')"]


async def test_an_invalid_flag_exits_2(private: LocalCluster) -> None:
    code, err = await run_operator(private.kubeconfig, "--leader-elect-retry-period", "often")
    assert code == 2
    assert "--leader-elect-retry-period" in err
    assert "not a duration" in err
    assert "Traceback" not in err


async def _new_namespace(kube: Kube) -> str:
    namespace = f"op-{uuid.uuid4().hex[:8]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return namespace


async def _crd_and_namespace(cluster: LocalCluster) -> str:
    """The CRD installed (if it was not) and a new namespace for the operator."""
    await asyncio.to_thread(cluster.install_crd)
    kube = await Kube.connect(str(cluster.kubeconfig))
    try:
        return await _new_namespace(kube)
    finally:
        await kube.close()


async def test_missing_namespace(private: LocalCluster) -> None:
    """The namespace missing: one line naming it; the process ends instead of retrying. The
    CRD, missing too here, is not one of the problems (it is waited for, below)."""
    code, err = await run_operator(private.kubeconfig, "--namespace", "no-such-namespace")
    assert code == 1, err
    [line] = startup_errors(err)
    assert line.endswith("startup error: the operator namespace 'no-such-namespace' does not "
                         "exist (create it, or pass --namespace)"), line


def _readyz(port: int) -> tuple[int, str]:
    """``/readyz``'s status and text (0 and "" while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError:
        return 0, ""


async def test_the_crd_is_waited_for(private: LocalCluster, tmp_path: Path) -> None:
    """Started before the LeaderWorkerSet CRD is applied, the operator does not exit: it logs
    that it waits for the CRD, ``/readyz`` names ``leaderworkerset-api`` as not ready; once
    the CRD is applied it becomes ready and reconciles (a set gets its leader StatefulSet).
    Before the change it exited 1 with "is not installed: apply crds/ first"."""
    await asyncio.to_thread(private.kubectl, "delete", "--ignore-not-found", "--wait",
                            "-f", str(CRD_FILE))
    kube = await Kube.connect(str(private.kubeconfig))
    proc: asyncio.subprocess.Process | None = None
    try:
        namespace = await _new_namespace(kube)
        log = tmp_path / "operator.log"
        health = free_port()

        def waiting() -> bool:
            status, text = _readyz(health)
            return (status == 503 and "leaderworkerset-api" in text
                    and "waiting for the CustomResourceDefinition leaderworkersets."
                        "leaderworkerset.x-k8s.io (version v1) to be served"
                    in log.read_text(errors="replace"))

        proc = await _operator_until(waiting, log, operator_command(
            private.kubeconfig, "--namespace", namespace, "--metrics-secure=false",
            "--mutating-webhook-configuration", f"lws-mutating-{namespace}",
            "--validating-webhook-configuration", f"lws-validating-{namespace}",
            health_port=health))
        await asyncio.to_thread(private.install_crd)

        async def ready() -> bool:
            assert proc is not None
            assert proc.returncode is None, log.read_text(errors="replace")
            return (await asyncio.to_thread(_readyz, health))[0] == 200

        await wait_for(ready, what="/readyz 200 once the CRD is served")
        await kube.create(LeaderWorkerSet("late").replicas(1).size(1).image("nginx:1").build(),
                          namespace)
        await wait_for(lambda: _leader_statefulset(kube, namespace, "late"),
                       what="the LeaderWorkerSet's leader StatefulSet")
        proc.send_signal(signal.SIGTERM)
        assert await reaped(proc, 60) == 0, log.read_text(errors="replace")
        text = log.read_text(errors="replace")
        assert "startup error" not in text
        assert "Traceback" not in text, text
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await kube.close()


async def _service_account_kubeconfig(kube: Kube, cluster: LocalCluster, namespace: str,
                                      path: Path) -> None:
    """A kubeconfig for a new service account of ``namespace`` (a TokenRequest token)."""
    await kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "operator"}}, namespace)
    review = await kube.api.call_api(
        *await kube.api.param_serialize(
            method="POST",
            resource_path=f"/api/v1/namespaces/{namespace}/serviceaccounts/operator/token",
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": 3600}},
            auth_settings=["BearerToken"]))
    token = yaml.safe_load(await review.read())["status"]["token"]
    admin = yaml.safe_load(await asyncio.to_thread(Path(cluster.kubeconfig).read_text))
    text = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {
            "cluster": admin["clusters"][0]["name"], "user": "operator"}}],
        "current-context": "operator"})
    await asyncio.to_thread(path.write_text, text)


async def test_missing_permissions(private: LocalCluster, tmp_path: Path) -> None:
    """An identity allowed only part of what the operator does: one line listing the rest."""
    await asyncio.to_thread(private.install_crd)
    kube = await Kube.connect(str(private.kubeconfig))
    try:
        namespace = await _new_namespace(kube)
        kubeconfig = tmp_path / "operator.kubeconfig"
        await _service_account_kubeconfig(kube, private, namespace, kubeconfig)
        # Everything but the LeaderWorkerSets and the Lease.
        await kube.create({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": f"{namespace}-partial"},
            "rules": [
                {"apiGroups": [""],
                 "resources": ["pods", "pods/status", "services", "secrets", "events", "nodes"],
                 "verbs": ["*"]},
                {"apiGroups": ["apps"],
                 "resources": ["statefulsets", "deployments", "controllerrevisions"],
                 "verbs": ["*"]},
                {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
                {"apiGroups": ["admissionregistration.k8s.io"],
                 "resources": ["mutatingwebhookconfigurations",
                               "validatingwebhookconfigurations"], "verbs": ["*"]},
            ]})
        await kube.create({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": f"{namespace}-partial"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": f"{namespace}-partial"},
            "subjects": [{"kind": "ServiceAccount", "name": "operator",
                          "namespace": namespace}]})
        code, err = await run_operator(kubeconfig, "--namespace", namespace,
                                       "--metrics-secure=false")
        assert code == 1, err
        [line] = startup_errors(err)
        missing = line.split("startup error: missing permissions: ", 1)[1].split(", ")
        assert missing == [
            "get leaderworkersets.leaderworkerset.x-k8s.io (cluster-wide)",
            "list leaderworkersets.leaderworkerset.x-k8s.io (cluster-wide)",
            "watch leaderworkersets.leaderworkerset.x-k8s.io (cluster-wide)",
            "patch leaderworkersets.leaderworkerset.x-k8s.io (cluster-wide)",
            "patch leaderworkersets.leaderworkerset.x-k8s.io/status (cluster-wide)",
            f"get leases.coordination.k8s.io in namespace {namespace}",
            f"create leases.coordination.k8s.io in namespace {namespace}",
            f"update leases.coordination.k8s.io in namespace {namespace}",
        ]
        # Without leader election the Lease is not needed.
        code, err = await run_operator(kubeconfig, "--namespace", namespace,
                                       "--leader-elect=false")
        assert code == 1, err
        [line] = startup_errors(err)
        assert "leases" not in line
    finally:
        await kube.close()


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port on 127.0.0.1 that another socket listens on."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        yield int(busy.getsockname()[1])


@pytest.mark.parametrize(("flag", "value"), [
    ("--webhook-port", "{port}"),
    ("--health-port", "{port}"),
    ("--metrics-bind-address", "127.0.0.1:{port}"),
], ids=["webhook", "health", "metrics"])
async def test_a_port_in_use_is_one_line_naming_the_flag(private: LocalCluster, busy_port: int,
                                                         flag: str, value: str) -> None:
    """Each of the three ports, taken by another process: exit 1 with one line naming the
    flag, the address and the reason; no traceback, and (the webhook port) no endless retry
    once the certificate is there."""
    namespace = await _crd_and_namespace(private)
    code, err = await run_operator(private.kubeconfig, "--namespace", namespace,
                                   flag, value.format(port=busy_port))
    assert code == 1, err
    [line] = startup_errors(err)
    assert line.endswith(f"startup error: {flag} {busy_port}: cannot listen on "
                         f"127.0.0.1:{busy_port}: address already in use"), line


async def _operator_until(ready: Callable[[], bool], log: Path, command: list[str]
                          ) -> asyncio.subprocess.Process:
    """``command`` (an :func:`operator_command`) logging to ``log``, once ``ready()`` (called
    in a thread) is true; killed if it exits or is not ready within 120 s."""
    with log.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            *command, cwd=REPO, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL)
    try:
        async with asyncio.timeout(120):
            while not await asyncio.to_thread(ready):
                assert proc.returncode is None, log.read_text(errors="replace")  # noqa: ASYNC240
                await asyncio.sleep(0.2)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    return proc


async def _operator_until_watching(kubeconfig: Path | str, log: Path, *flags: str
                                   ) -> asyncio.subprocess.Process:
    """``lws-operator run`` logging to ``log``, once its watches run and its workers reconcile
    (logged after the caches are primed, the watches started and the webhooks serve)."""
    return await _operator_until(lambda: RECONCILING in log.read_text(errors="replace"), log,
                                 operator_command(kubeconfig, *flags))


RECONCILING = "the webhooks serve: reconciling"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_signals_stop_the_operator_and_kopf_does_not_claim_otherwise(
        private: LocalCluster, tmp_path: Path, sig: signal.Signals) -> None:
    """SIGTERM and SIGINT each stop the whole process cleanly (exit 0, no traceback) while the
    watches run. kopf, when it runs (its signal watches, in a thread of its own), warns at
    every start that "OS signals are ignored"; they are not (the main thread's handlers set the
    stop flag it watches), and the warning is kept out of the log."""
    namespace = await _crd_and_namespace(private)
    log = tmp_path / "operator.log"
    proc = await _operator_until_watching(private.kubeconfig, log, "--namespace", namespace,
                                          "--metrics-secure=false")
    # Serving its certificate (and reading its expiry for the metric) left ``cryptography``
    # out of the process: it is only ever loaded by the short-lived planner children.
    await asyncio.sleep(2)
    maps = await asyncio.to_thread(Path(f"/proc/{proc.pid}/maps").read_text)
    assert "cryptography" not in maps, "the operator process loaded cryptography"
    proc.send_signal(sig)
    code = await reaped(proc, 60)
    text = log.read_text(errors="replace")
    assert code == 0, text
    assert "OS signals are ignored" not in text
    assert "Traceback" not in text
    assert text.rstrip().endswith("lws_operator: stopped"), text[-2000:]


VOLCANO_MISSING = ("startup error: --scheduler-provider volcano: the CustomResourceDefinition "
                   "podgroups.scheduling.volcano.sh (version v1beta1) is not installed: "
                   "install Volcano, or run without a scheduler provider")


async def test_volcano_provider_needs_volcanos_crd(private: LocalCluster,
                                                   tmp_path: Path) -> None:
    """``--scheduler-provider volcano`` on an API server without Volcano's PodGroup CRD: the
    start fails with one line naming the flag and the CRD (not a start that then fails every
    PodGroup create); with the CRD installed the same command starts and watches them."""
    namespace = await _crd_and_namespace(private)
    code, err = await run_operator(private.kubeconfig, "--namespace", namespace,
                                   "--scheduler-provider", "volcano")
    assert code == 1, err
    [line] = startup_errors(err)
    assert line.endswith(VOLCANO_MISSING), line
    # Admission alone creates no PodGroups: no Volcano needed there.
    log = tmp_path / "admission.log"
    health = free_port()
    proc = await _operator_until(lambda: answers_ready(health), log, operator_command(
        private.kubeconfig, "--namespace", namespace, "--disable-controllers",
        "--scheduler-provider", "volcano",
        "--mutating-webhook-configuration", f"lws-mutating-{namespace}",
        "--validating-webhook-configuration", f"lws-validating-{namespace}",
        health_port=health, metrics_address="0"))
    proc.send_signal(signal.SIGTERM)
    assert await reaped(proc, 60) == 0, log.read_text(errors="replace")

    await asyncio.to_thread(install_volcano_crd, private)
    log = tmp_path / "operator.log"
    proc = await _operator_until_watching(private.kubeconfig, log, "--namespace", namespace,
                                          "--scheduler-provider", "volcano")
    proc.send_signal(signal.SIGTERM)
    assert await reaped(proc, 60) == 0, log.read_text(errors="replace")
    text = log.read_text(errors="replace")
    assert "startup error" not in text
    assert "PodGroup API is not served" not in text


async def test_a_metrics_certificate_that_cannot_be_loaded_is_one_line(
        private: LocalCluster, tmp_path: Path) -> None:
    namespace = await _crd_and_namespace(private)
    missing = tmp_path / "no-such-dir"
    code, err = await run_operator(private.kubeconfig, "--namespace", namespace,
                                   "--metrics-cert-path", str(missing))
    assert code == 1, err
    [line] = startup_errors(err)
    assert line.endswith(f"startup error: --metrics-cert-path {missing}: cannot load tls.crt "
                         "and tls.key: No such file or directory"), line


# ----------------------------------------------------------- the DisaggregatedSet controller

LWS_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""],
     "resources": ["pods", "pods/status", "services", "secrets", "events", "nodes"],
     "verbs": ["*"]},
    {"apiGroups": ["apps"], "resources": ["statefulsets", "deployments", "controllerrevisions"],
     "verbs": ["*"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["*"]},
    {"apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
     "verbs": ["*"]},
    {"apiGroups": ["leaderworkerset.x-k8s.io"],
     "resources": ["leaderworkersets", "leaderworkersets/status"], "verbs": ["*"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["podgroups", "workloads"],
     "verbs": ["*"]},
]


async def _bind(kube: Kube, namespace: str, rules: list[dict[str, Any]]) -> None:
    """A ClusterRole of ``rules`` bound to the namespace's service account ``operator``."""
    name = f"{namespace}-operator"
    await kube.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": name}, "rules": rules})
    await kube.create({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": namespace}]})


async def _leader_statefulset(kube: Kube, namespace: str, name: str) -> bool:
    return await kube.get("apps/v1", "StatefulSet", name, namespace) is not None


async def test_without_disaggregatedset_permissions_the_lws_controller_runs(
        private: LocalCluster, tmp_path: Path) -> None:
    """The DisaggregatedSet CRDs served, RBAC granting everything of the LeaderWorkerSet
    controller but nothing of the DisaggregatedSet one (an older chart's ClusterRole): the start
    logs the missing permissions in one line, the DisaggregatedSet controller's failure to
    start is one error line, and the LeaderWorkerSet controller runs (a set gets its leader
    StatefulSet); SIGTERM ends the process cleanly."""
    await asyncio.to_thread(private.install_crd)
    kube = await Kube.connect(str(private.kubeconfig))
    proc: asyncio.subprocess.Process | None = None
    try:
        namespace = await _new_namespace(kube)
        kubeconfig = tmp_path / "operator.kubeconfig"
        await _service_account_kubeconfig(kube, private, namespace, kubeconfig)
        await _bind(kube, namespace, LWS_RULES)
        log = tmp_path / "operator.log"
        proc = await _operator_until_watching(
            kubeconfig, log, "--namespace", namespace, "--leader-elect=false",
            "--metrics-secure=false", "--no-register-webhooks")
        await kube.create(LeaderWorkerSet("plain").replicas(1).size(1).image("nginx:1").build(),
                          namespace)
        await wait_for(lambda: _leader_statefulset(kube, namespace, "plain"),
                       what="the LeaderWorkerSet's leader StatefulSet")
        text = log.read_text(errors="replace")
        assert proc.returncode is None, text
        [line] = [x for x in text.splitlines() if "startup: " in x]
        assert line.split("startup: ", 1)[1] == (
            "the DisaggregatedSet controller will not run: missing permissions: "
            "list disaggregatedsets.disaggregatedset.x-k8s.io (cluster-wide), "
            "watch disaggregatedsets.disaggregatedset.x-k8s.io (cluster-wide), "
            "list disaggregatedsetrolescalers.disaggregatedset.x-k8s.io (cluster-wide), "
            "watch disaggregatedsetrolescalers.disaggregatedset.x-k8s.io (cluster-wide), "
            "create disaggregatedsetrolescalers.disaggregatedset.x-k8s.io (cluster-wide), "
            "delete disaggregatedsetrolescalers.disaggregatedset.x-k8s.io (cluster-wide), "
            "patch disaggregatedsets.disaggregatedset.x-k8s.io/status (cluster-wide), "
            "patch disaggregatedsetrolescalers.disaggregatedset.x-k8s.io/status (cluster-wide) "
            "(the LeaderWorkerSet controller runs; grant them and restart)"), line
        assert "the DisaggregatedSet controller cannot start (403 " in text, text
        assert "startup error" not in text
        proc.send_signal(signal.SIGTERM)
        assert await reaped(proc, 60) == 0, log.read_text(errors="replace")
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await kube.close()


async def _crd_gone(kube: Kube, name: str) -> bool:
    return await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name) is None


def _ds(name: str) -> dict[str, Any]:
    def role(role_name: str) -> dict[str, Any]:
        return {"name": role_name, "spec": {"replicas": 1, "leaderWorkerTemplate": {
            "size": 1, "workerTemplate": {"spec": {"containers": [
                {"name": "main", "image": "nginx:1"}]}}}}}
    return {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "metadata": {"name": name}, "spec": {"roles": [role("prefill"), role("decode")]}}


async def _ds_children(kube: Kube, namespace: str, name: str) -> list[str]:
    found = await kube.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", namespace,
                            label_selector=f"disaggregatedset.x-k8s.io/name={name}")
    return sorted(lws["metadata"]["labels"]["disaggregatedset.x-k8s.io/role"]
                  for lws in found)


async def test_disaggregatedset_crds_installed_after_the_start(private: LocalCluster,
                                                              tmp_path: Path) -> None:
    """The operator starts where only the LeaderWorkerSet CRD is installed (``helm upgrade``
    from a chart without the DisaggregatedSet CRDs); they are applied afterwards, and without
    a restart a DisaggregatedSet then gets its child LeaderWorkerSets."""
    kube = await Kube.connect(str(private.kubeconfig))
    proc: asyncio.subprocess.Process | None = None
    try:
        await asyncio.to_thread(private.install_crd, CRD_FILE)
        for crd in (DS_CRD_NAME, DS_SCALER_CRD_NAME):
            await asyncio.to_thread(private.kubectl, "delete", "crd", crd, "--ignore-not-found")
            await wait_for(lambda c=crd: _crd_gone(kube, c),  # type: ignore[misc]
                           what=f"{crd} deleted")
        namespace = await _new_namespace(kube)
        log = tmp_path / "operator.log"
        proc = await _operator_until_watching(
            private.kubeconfig, log, "--namespace", namespace, "--leader-elect=false",
            "--metrics-secure=false", "--no-register-webhooks")
        assert "the DisaggregatedSet controller starts once its CRDs are installed" in \
            log.read_text(errors="replace")
        await asyncio.to_thread(private.install_crd, DS_SCALER_CRD_FILE)
        await asyncio.to_thread(private.install_crd, DS_CRD_FILE)
        fresh = await Kube.connect(str(private.kubeconfig))  # discovery after the install
        try:
            await fresh.create(_ds("late"), namespace)
            async def both_roles() -> bool:  # the roles' children are created one by one
                return await _ds_children(fresh, namespace, "late") == ["decode", "prefill"]
            await wait_for(both_roles, timeout=120, what="the DisaggregatedSet's two children")
        finally:
            await fresh.close()
        text = log.read_text(errors="replace")
        assert "is served now: starting the DisaggregatedSet controller" in text, text
        assert proc.returncode is None, text
        proc.send_signal(signal.SIGTERM)
        assert await reaped(proc, 60) == 0, log.read_text(errors="replace")
        assert "Traceback" not in log.read_text(errors="replace")
    finally:
        if proc is not None and proc.returncode is None:
            proc.kill()
            await proc.wait()
        await kube.close()
