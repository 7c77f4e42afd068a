"""A chart release on the node tier, and what the helm tests read back from the cluster.

Everything here is synchronous and goes through ``kubectl`` and ``helm`` against the cluster's
kubeconfig, as a user at a terminal would.
"""

from __future__ import annotations

import copy
import json
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml

from e2e.cluster import PLACEMENT, LocalCluster
from e2e.demo import SAMPLE
from e2e.harness.chart import CHART, helm
from e2e.image import Image

T = TypeVar("T")

RELEASE = "lws"
NAMESPACE = "lws-system"
DEPLOYMENT = "lws-controller-manager"
PDB = DEPLOYMENT
METRICS_SERVICE = "lws-controller-manager-metrics-service"
METRICS_READER = "lws-metrics-reader"
LEASE = "b8b2488c.x-k8s.io"
OPERATOR_PODS = "control-plane=controller-manager"
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
REVISION_LABEL = "leaderworkerset.sigs.k8s.io/template-revision-hash"
STARTUP_LINE = "webhooks behind Service lws-webhook-service"


def wait(what: str, probe: Callable[[], T | None], timeout: float = 180.0,
         interval: float = 0.5) -> T:
    """Poll ``probe`` until it returns something truthy (a liveness deadline naming ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def get(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json"))


def apply(cluster: LocalCluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": list(docs)}))


def ready(obj: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


@dataclass
class Release:
    """The installed chart a test module shares."""

    cluster: LocalCluster
    image: Image
    namespace: str  # where the module's sets live


# ------------------------------------------------------------------------------------ helm

def values(image: Image) -> dict[str, Any]:
    """The chart's defaults, but for the image (on the node, never pulled) and the placement of
    the operator pods on the real node."""
    return {**image.helm_values(), "nodeSelector": PLACEMENT["nodeSelector"],
            "tolerations": PLACEMENT["tolerations"]}


def run_helm(cluster: LocalCluster, *args: str) -> str:
    return helm(*args, "--kubeconfig", str(cluster.kubeconfig)).stdout


def install(cluster: LocalCluster, image: Image, verb: str = "install") -> str:
    """``helm install`` (or ``upgrade --install``) of the chart with :func:`values`; waits until
    the Deployment is rolled out (helm's ``--wait``)."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values(image), f)
        f.flush()
        extra = ["--create-namespace"] + (["--install"] if verb == "upgrade" else [])
        return run_helm(cluster, verb, RELEASE, str(CHART), "-n", NAMESPACE, "-f", f.name,
                        "--wait", "--timeout", "5m", *extra)


def uninstall(cluster: LocalCluster) -> None:
    run_helm(cluster, "uninstall", RELEASE, "-n", NAMESPACE, "--wait", "--timeout", "5m")


def operator_pods(cluster: LocalCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, "pods", "-n", NAMESPACE, "-l",
                                      OPERATOR_PODS)["items"]
    return items


def rolled_out(cluster: LocalCluster, image: Image) -> list[dict[str, Any]] | None:
    """The operator pods once exactly the Deployment's replicas run ``image``, all Ready and
    none terminating."""
    pods = operator_pods(cluster)
    if (len(pods) == 2 and all(ready(p) and not p["metadata"].get("deletionTimestamp")
                               and p["spec"]["containers"][0]["image"].endswith(
                                   f"{image.repository}:{image.tag}") for p in pods)):
        return pods
    return None


def lease_holder(cluster: LocalCluster) -> str | None:
    """The pod holding the leader-election Lease (its identity is ``<hostname>_<uuid>``)."""
    lease = json.loads(cluster.kubectl("get", "lease", LEASE, "-n", NAMESPACE, "-o", "json",
                                       check=False) or "{}")
    holder = (lease.get("spec") or {}).get("holderIdentity")
    return str(holder).split("_", 1)[0] if holder else None


def logs(cluster: LocalCluster, pod: str) -> str:
    return cluster.kubectl("logs", "-n", NAMESPACE, pod)


# ------------------------------------------------------------------------------- the sets

def example(name: str, namespace: str, replicas: int = 2, size: int = 4,
            image: str = "vllm/vllm-openai:latest", gpus: bool = True) -> dict[str, Any]:
    """The LWS docs' architecture example (``make demo``'s set) under another name; without
    ``gpus`` its pods ask for no GPUs (the kwok nodes have 8 each, one such pod per node)."""
    lws = copy.deepcopy(SAMPLE)
    lws["metadata"] = {"name": name, "namespace": namespace}
    lws["spec"]["replicas"] = replicas
    template = lws["spec"]["leaderWorkerTemplate"]
    template["size"] = size
    template["workerTemplate"]["spec"]["containers"] = [container(image, gpus)]
    return lws


def container(image: str, gpus: bool = True) -> dict[str, Any]:
    """The example's container with ``image``."""
    out: dict[str, Any] = {"name": "vllm", "image": image}
    if gpus:
        out["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    return out


def set_image(cluster: LocalCluster, namespace: str, name: str, image: str,
              gpus: bool = True) -> None:
    """Roll the set to ``image`` (a merge patch of its worker template)."""
    patch = {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {
        "containers": [container(image, gpus)]}}}}}
    cluster.kubectl("patch", "leaderworkersets.leaderworkerset.x-k8s.io", name, "-n", namespace,
                    "--type=merge", "-p", json.dumps(patch))


def set_pods(cluster: LocalCluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, "pods", "-n", namespace, "-l",
                                      f"{NAME_LABEL}={name}")["items"]
    return items


def converged(cluster: LocalCluster, namespace: str, name: str, replicas: int, size: int,
              image: str) -> list[dict[str, Any]] | None:
    """The set's pods once its status says every group is Ready and updated, Available, and
    exactly ``replicas * size`` live pods run ``image``, all Ready and on one revision."""
    lws = get(cluster, "leaderworkersets.leaderworkerset.x-k8s.io", name, "-n", namespace)
    status = lws.get("status") or {}
    available = any(c["type"] == "Available" and c["status"] == "True"
                    for c in status.get("conditions") or [])
    pods = set_pods(cluster, namespace, name)
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if (status.get("readyReplicas") == replicas and status.get("updatedReplicas") == replicas
            and available and len(pods) == len(live) == replicas * size
            and all(ready(p) for p in live)
            and {c["image"] for p in live for c in p["spec"]["containers"]} == {image}
            and len({p["metadata"]["labels"].get(REVISION_LABEL) for p in live}) == 1):
        return live
    return None


def wait_converged(cluster: LocalCluster, namespace: str, name: str, replicas: int, size: int,
                   image: str, timeout: float = 180.0) -> list[dict[str, Any]]:
    return wait(f"{namespace}/{name} converged",
                lambda: converged(cluster, namespace, name, replicas, size, image), timeout)


Incarnation = tuple[str, str, int]  # uid, creationTimestamp, restarts of its containers


def incarnations(pods: list[dict[str, Any]]) -> dict[str, Incarnation]:
    """Pod name -> the incarnation it is: a restarted or recreated pod differs."""
    return {p["metadata"]["name"]: (
        p["metadata"]["uid"], p["metadata"]["creationTimestamp"],
        sum(c.get("restartCount", 0) for c in (p.get("status") or {}).get(
            "containerStatuses") or [])) for p in pods}


def all_set_pods(cluster: LocalCluster) -> dict[str, Incarnation]:
    """Every LeaderWorkerSet pod of the cluster, ``namespace/name`` -> incarnation."""
    pods = get(cluster, "pods", "-A", "-l", NAME_LABEL)["items"]
    return {f"{p['metadata']['namespace']}/{name}": inc
            for p in pods for name, inc in incarnations([p]).items()}


# ------------------------------------------------------------------------- the rollout's view

@dataclass
class RolloutWatch:
    """What a poller saw of the operator pods while the block ran: the fewest Ready ones not
    terminating, the fewest healthy pods the PodDisruptionBudget counted, and every pod name."""

    min_ready: int = 99
    min_healthy: int = 99
    seen: set[str] = field(default_factory=set)
    samples: int = 0


@contextmanager
def watching_rollout(cluster: LocalCluster, interval: float = 0.3) -> Iterator[RolloutWatch]:
    view = RolloutWatch()
    done = threading.Event()

    def sample() -> None:
        pods = operator_pods(cluster)
        view.seen.update(p["metadata"]["name"] for p in pods)
        view.min_ready = min(view.min_ready, sum(
            1 for p in pods if ready(p) and not p["metadata"].get("deletionTimestamp")))
        pdb = get(cluster, "pdb", PDB, "-n", NAMESPACE)
        view.min_healthy = min(view.min_healthy, int(pdb["status"].get("currentHealthy", 0)))
        view.samples += 1

    def loop() -> None:
        while not done.is_set():
            sample()
            done.wait(interval)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield view
    finally:
        done.set()
        thread.join()
        sample()


# ------------------------------------------------------------------------------- /metrics

SCRAPER = """
import json, os, ssl, urllib.error, urllib.request
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE  # the operator's self-signed /metrics certificate
own = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read().strip()
out = {}
for case, token in (("bound", own), ("anonymous", None), ("unbound", os.environ["UNBOUND"])):
    request = urllib.request.Request(os.environ["URL"])
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=20) as resp:
            body = resp.read().decode()
            out[case] = [resp.status, "lws_" in body and "# TYPE" in body]
    except urllib.error.HTTPError as error:
        out[case] = [error.code, False]
print("SCRAPE " + json.dumps(out))
"""


def scrape_metrics(cluster: LocalCluster, image: Image, namespace: str) -> dict[str, list[Any]]:
    """Scrape /metrics as upstream's e2e does: from a pod whose ServiceAccount is bound to the
    metrics-reader ClusterRole, over HTTPS through the metrics Service (its ClusterIP: the local
    cluster runs no DNS); the same request without a token, and with the token of a
    ServiceAccount bound to nothing. Returns case -> [HTTP status, whether metrics came]."""
    ip = get(cluster, "service", METRICS_SERVICE, "-n", NAMESPACE)["spec"]["clusterIP"]
    apply(cluster,
          {"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": "scraper", "namespace": namespace}},
          {"apiVersion": "v1", "kind": "ServiceAccount",
           "metadata": {"name": "nobody", "namespace": namespace}},
          {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
           "metadata": {"name": f"{namespace}-scraper"},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                       "name": METRICS_READER},
           "subjects": [{"kind": "ServiceAccount", "name": "scraper",
                         "namespace": namespace}]})
    unbound = cluster.kubectl("create", "token", "nobody", "-n", namespace).strip()
    apply(cluster, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "scraper", "namespace": namespace},
        "spec": {**PLACEMENT, "serviceAccountName": "scraper", "restartPolicy": "Never",
                 "containers": [{
                     "name": "scraper", "image": image.reference, "imagePullPolicy": "Never",
                     "command": ["python", "-c", SCRAPER],
                     "env": [{"name": "URL", "value": f"https://{ip}:8443/metrics"},
                             {"name": "UNBOUND", "value": unbound}]}]},
    })
    try:
        phase = wait("the scraper pod to finish", lambda: get(
            cluster, "pod", "scraper", "-n", namespace).get("status", {}).get("phase")
            in ("Succeeded", "Failed") or None, timeout=120)
        out = cluster.kubectl("logs", "-n", namespace, "scraper")
        assert phase, out
        line = next((x for x in out.splitlines() if x.startswith("SCRAPE ")), None)
        assert line is not None, out
        result: dict[str, list[Any]] = json.loads(line.removeprefix("SCRAPE "))
        return result
    finally:
        cluster.kubectl("delete", "clusterrolebinding", f"{namespace}-scraper",
                        "--ignore-not-found", check=False)


def temp_namespace(cluster: LocalCluster, name: str) -> str:
    apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name

