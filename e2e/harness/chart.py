"""The chart's test helpers: the pinned helm binary, rendering, the golden cases, and running
the operator as the chart's container would (``start``, ``stop``, ``http_get``).

``python -m e2e.harness.chart`` (``make chart-golden``) rewrites ``tests/chart/golden/*.yaml``
from the current chart; review the diff like any other change.
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "lws-operator"
GOLDEN = REPO / "tests" / "chart" / "golden"
BUILD = REPO / "e2e" / "cluster" / "build.sh"
VERSIONS = REPO / "e2e" / "cluster" / "versions.env"
# A values file written for the upstream chart (its keys only), rendered and installed as is.
UPSTREAM_VALUES_FILE = REPO / "tests" / "chart" / "upstream-values.yaml"
UPSTREAM_VALUES: dict[str, Any] = yaml.safe_load(UPSTREAM_VALUES_FILE.read_text())

# name -> (release, namespace, values). Together they switch every optional part on and off.
GOLDEN_CASES: dict[str, tuple[str, str, dict[str, Any]]] = {
    "default": ("lws-operator", "lws-system", {}),
    "cert-manager-volcano": ("lws", "ml-platform", {
        "replicaCount": 1,
        "image": {"repository": "example.com/ml/lws-operator", "tag": "0.1.0-rc1",
                  "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "pull"}],
        "logLevel": "debug",
        "kubeAPI": {"qps": 200, "burst": 400},
        "gangSchedulingManagement": {"schedulerProvider": "volcano"},
        "leaderElection": {"enabled": False},
        "webhook": {"certificates": "cert-manager", "failurePolicy": "Ignore",
                    "validateDisaggregatedSets": False, "evictions": {"enabled": False},
                    "namespaceSelectorExpressions": [
                        {"key": "lws-operator.dev/enabled", "operator": "In",
                         "values": ["true"]}]},
        "metrics": {"certSecretName": "lws-metrics-cert", "serviceMonitor": {
            "enabled": True, "additionalLabels": {"release": "prom"},
            "tlsConfig": {"ca": {"secret": {"name": "lws-metrics-cert", "key": "ca.crt"}},
                          "serverName": "lws-controller-manager-metrics-service.ml-platform.svc"}}},
        "rbac": {"nativeGangScheduling": False},
        "podAnnotations": {"example.com/team": "ml"},
        "podLabels": {"team": "ml"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra",
                         "effect": "NoSchedule"}],
        "priorityClassName": "system-cluster-critical",
        "extraArgs": ["--rollout-stall-grace=120s"],
        "extraEnv": [{"name": "PYTHONASYNCIODEBUG", "value": "0"}],
    }),
    "plain-metrics": ("lws-operator", "lws-system", {
        "replicaCount": 1,
        "metrics": {"secure": False, "port": 8080, "servicePort": 8080,
                    "serviceMonitor": {"enabled": True}},
    }),
    "upstream": ("lws", "lws-system", UPSTREAM_VALUES),
    "monitoring": ("lws", "lws-system", {
        "dashboard": {"enabled": True, "namespace": "monitoring",
                      "annotations": {"grafana_folder": "LeaderWorkerSet"}},
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"},
                           "alertLabels": {"team": "ml-platform"},
                           "alerts": {"groupNotReady": {"for": "30m"},
                                      "webhookSlow": {"enabled": False}}},
    }),
    "external-issuer": ("lws-operator", "lws-system", {
        "serviceAccount": {"name": "lws-controller"},
        "metrics": {"enabled": False},
        "webhook": {"certificates": "cert-manager",
                    "certManager": {"issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer"}}},
    }),
}


def helm_binary() -> Path:
    """The pinned helm, built into the cache on first use (about two minutes, once)."""
    versions = dict(line.split("=", 1) for line in VERSIONS.read_text().splitlines()
                    if line and not line.startswith("#"))
    cache = Path(os.environ.get("LWS_CACHE", Path.home() / ".cache" / "lws-operator"))
    path = cache / "helm" / f"v{versions['HELM_VERSION']}" / "bin" / "helm"
    if not path.exists():
        subprocess.run(["bash", str(BUILD), "helm"], check=True)
    return path


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    # HOME-independent: helm keeps no state we need, so point its dirs at a scratch place.
    scratch = Path(tempfile.gettempdir()) / "lws-operator-helm"
    env = {**os.environ, "HELM_CACHE_HOME": str(scratch / "cache"),
           "HELM_CONFIG_HOME": str(scratch / "config"), "HELM_DATA_HOME": str(scratch / "data")}
    done = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True, env=env)
    if check and done.returncode != 0:
        raise RuntimeError(f"helm {' '.join(args)} failed:\n{done.stderr}")
    return done


def render(release: str = "lws-operator", namespace: str = "lws-system",
           values: dict[str, Any] | None = None) -> str:
    """``helm template`` of the chart (without its CRDs) as text."""
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(values or {}, f)
        f.flush()
        done = helm("template", release, str(CHART), "--namespace", namespace, "-f", f.name)
    return done.stdout


def objects(text: str) -> list[dict[str, Any]]:
    return [o for o in yaml.safe_load_all(text) if o]


def golden_path(case: str) -> Path:
    return GOLDEN / f"{case}.yaml"


def main() -> int:
    GOLDEN.mkdir(exist_ok=True)
    for case, (release, namespace, values) in GOLDEN_CASES.items():
        golden_path(case).write_text(render(release, namespace, values))
        print(f"wrote {golden_path(case).relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())


def http_get(url: str, token: str | None = None) -> tuple[int, str]:
    """GET ``url``; HTTPS without verifying the certificate (the operator's self-signed
    metrics certificate), with ``token`` as the bearer token if given."""
    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}"} if token else {})
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def start(argv: list[str], env: dict[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)


def stop(proc: subprocess.Popen[bytes], grace: float = 30.0) -> int:
    """SIGTERM, SIGKILL after ``grace`` seconds; the exit code."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()
