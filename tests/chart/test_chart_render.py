"""The Helm chart without a cluster: lint, golden renderings, and the facts that tie the chart to
the code (the CRD file, the webhook registrations, the operator's flags, the RBAC it needs)."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from lws_operator.__main__ import _add_run
from lws_operator.admission import registration
from tests.chart.helm import CHART, GOLDEN_CASES, REPO, golden_path, helm, objects, render

CRD_NAME = "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
# Families of flags the chart renders for features other branches add to the operator (leader
# election, feature gates). While the operator knows no flag of a family, the family's flags are
# left out of the checks below (and of the RBAC run's command line); once it knows one, every
# flag of the family that the chart renders must be one it knows.
PENDING_FAMILIES = ("--leader-elect", "--feature-gates")


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objs, kind)
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def manager_role(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator's ClusterRole (the others are for people)."""
    found = [r for r in by_kind(objs, "ClusterRole") if r["metadata"]["name"].endswith("-manager")]
    assert len(found) == 1
    return found[0]


def run_parser() -> tuple[argparse.ArgumentParser, set[str]]:
    """``lws-operator``'s parser with its ``run`` command, and the flags ``run`` knows."""
    parser = argparse.ArgumentParser(prog="lws-operator")
    sub = parser.add_subparsers(dest="command")
    _add_run(sub)
    return parser, set(sub.choices["run"]._option_string_actions)


def pending(args: list[str]) -> list[str]:
    """The arguments of a family the operator does not have yet (``PENDING_FAMILIES``)."""
    _, known = run_parser()
    absent = [f for f in PENDING_FAMILIES if not any(k.startswith(f) for k in known)]
    return [a for a in args if a.split("=", 1)[0].startswith(tuple(absent))] if absent else []


def container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    spec = one(objs, "Deployment")["spec"]["template"]["spec"]
    found: dict[str, Any] = spec["containers"][0]
    return found


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_lint(case: str, tmp_path: Any) -> None:
    import yaml

    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(GOLDEN_CASES[case][2]))
    done = helm("lint", "--strict", str(CHART), "-f", str(values), check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_golden(case: str) -> None:
    release, namespace, values = GOLDEN_CASES[case]
    path = golden_path(case)
    assert render(release, namespace, values) == path.read_text(), (
        f"the chart renders differently from {path.relative_to(REPO)}: review the change and "
        "run `make chart-golden` to accept it")


def test_crd_is_the_generated_one() -> None:
    """The chart ships crds/ byte for byte (``make crd`` regenerates only crds/)."""
    assert (CHART / "crds" / CRD_NAME).read_bytes() == (REPO / "crds" / CRD_NAME).read_bytes(), (
        f"cp crds/{CRD_NAME} charts/lws-operator/crds/")
    assert [p.name for p in (CHART / "crds").iterdir()] == [CRD_NAME]


@pytest.mark.parametrize("namespace", ["lws-system", "kube-system", "ml-platform"])
def test_webhook_configurations_are_the_operators(namespace: str) -> None:
    """The chart registers what ``lws_operator.admission.registration`` renders (the source of
    ``webhooks/*.yaml``), apart from Helm's labels."""
    objs = objects(render(namespace=namespace))
    rendered = [o for o in objs if o["kind"].endswith("WebhookConfiguration")]
    for obj in rendered:
        assert obj["metadata"].pop("labels")["app.kubernetes.io/managed-by"] == "Helm"
    expected = registration.render(registration.ServiceTarget(namespace=namespace),
                                   operator_namespace=namespace)
    assert sorted(rendered, key=lambda o: o["kind"]) == sorted(expected, key=lambda o: o["kind"])


def test_webhook_names_and_selectors_follow_values() -> None:
    extra = {"key": "team", "operator": "In", "values": ["a"]}
    objs = objects(render(values={"webhook": {
        "mutatingConfigurationName": "m", "validatingConfigurationName": "v",
        "serviceName": "hooks", "servicePort": 8443, "failurePolicy": "Ignore",
        "timeoutSeconds": 5, "namespaceSelectorExpressions": [extra]}}))
    assert one(objs, "MutatingWebhookConfiguration")["metadata"]["name"] == "m"
    assert one(objs, "ValidatingWebhookConfiguration")["metadata"]["name"] == "v"
    for config in by_kind(objs, "MutatingWebhookConfiguration") + by_kind(
            objs, "ValidatingWebhookConfiguration"):
        for hook in config["webhooks"]:
            assert hook["clientConfig"]["service"]["name"] == "hooks"
            assert hook["clientConfig"]["service"]["port"] == 8443
            assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 5)
            assert extra in hook["namespaceSelector"]["matchExpressions"]
    service = next(s for s in by_kind(objs, "Service") if s["metadata"]["name"] == "hooks")
    assert service["spec"]["ports"][0]["port"] == 8443
    args = container(objs)["args"]
    assert "--webhook-service=hooks" in args
    assert "--mutating-webhook-configuration=m" in args


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_every_rendered_flag_is_the_operators(case: str) -> None:
    """``lws-operator run`` accepts the Deployment's arguments (a renamed flag would crash the
    pod at start)."""
    release, namespace, values = GOLDEN_CASES[case]
    args = container(objects(render(release, namespace, values)))["args"]
    parser, _ = run_parser()
    left_out = pending(args)
    parsed = parser.parse_args(["run", *(a for a in args if a not in left_out)])
    assert parsed.command == "run"


def test_defaults_people_expect() -> None:
    objs = objects(render())
    deployment = one(objs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True
    main = container(objs)
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    assert main["securityContext"]["allowPrivilegeEscalation"] is False
    assert main["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert {"--cert-management=self", "--leader-elect", "--kube-api-qps=50",
            "--kube-api-burst=100", "--log-level=info"} <= set(main["args"])
    assert main["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert main["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # Self-managed certificates: an empty Secret the operator fills, no cert-manager objects.
    secret = one(objs, "Secret")
    assert secret["metadata"]["name"] == "lws-webhook-server-cert"
    assert "data" not in secret
    assert not by_kind(objs, "Certificate")
    assert not by_kind(objs, "Issuer")
    assert one(objs, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    assert not by_kind(objs, "ServiceMonitor")


def test_cert_manager_mode() -> None:
    objs = objects(render(namespace="ops", values={"webhook": {"certificates": "cert-manager"}}))
    certificate = one(objs, "Certificate")
    assert certificate["spec"]["secretName"] == "lws-webhook-server-cert"
    assert certificate["spec"]["dnsNames"] == ["lws-webhook-service.ops.svc",
                                               "lws-webhook-service.ops.svc.cluster.local"]
    assert certificate["spec"]["issuerRef"]["name"] == one(objs, "Issuer")["metadata"]["name"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(objs, kind)["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == (
            f"ops/{certificate['metadata']['name']}")
    assert "--cert-management=external" in container(objs)["args"]
    assert not by_kind(objs, "Secret"), "cert-manager owns the Secret"
    # The operator only reads the Secret then, and writes no webhook configuration.
    role = one(objs, "Role")
    assert {"apiGroups": [""], "resources": ["secrets"],
            "resourceNames": ["lws-webhook-server-cert"], "verbs": ["get"]} in role["rules"]
    cluster_role = manager_role(objs)
    assert not any("admissionregistration.k8s.io" in r["apiGroups"]
                   for r in cluster_role["rules"])


@pytest.mark.parametrize(("setting", "message"), [
    ("webhook.certificates=vault", "value must be one of 'self', 'cert-manager'"),
    ("replicaCont=3", "additional properties 'replicaCont' not allowed"),
    ("webhook.failurePolicy=fail", "value must be one of 'Fail', 'Ignore'"),
    ("gangSchedulingManagement.schedulerProvider=kueue", "value must be 'volcano'"),
])
def test_values_schema_refuses_mistakes(setting: str, message: str) -> None:
    done = helm("template", "x", str(CHART), "--set", setting, check=False)
    assert done.returncode != 0
    assert message in done.stderr


def test_template_refuses_an_unknown_certificate_mode_without_the_schema() -> None:
    done = helm("template", "x", str(CHART), "--set", "webhook.certificates=vault",
                "--skip-schema-validation", check=False)
    assert done.returncode != 0
    assert "webhook.certificates must be self or cert-manager" in done.stderr


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_rbac_has_no_wildcards(case: str) -> None:
    release, namespace, values = GOLDEN_CASES[case]
    objs = objects(render(release, namespace, values))
    roles = by_kind(objs, "ClusterRole") + by_kind(objs, "Role")
    assert roles
    for role in roles:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), (role["metadata"]["name"], rule)
            assert not rule.get("nonResourceURLs")
            # Secrets only by name, in the release namespace.
            if "secrets" in rule["resources"]:
                assert role["kind"] == "Role"
                assert rule["resourceNames"]
                assert set(rule["verbs"]) <= {"get", "update"}


def test_people_get_leaderworkersets_through_the_default_roles() -> None:
    objs = objects(render())
    roles = {r["metadata"]["name"]: r for r in by_kind(objs, "ClusterRole")}
    editor = roles["lws-operator-leaderworkerset-editor"]
    viewer = roles["lws-operator-leaderworkerset-viewer"]
    assert editor["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert viewer["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert {"get", "update", "patch"} <= set(editor["rules"][1]["verbs"])  # scale
    assert set(viewer["rules"][0]["verbs"]) == {"get", "list", "watch"}
    # Bound to nobody by the chart: the operator's ServiceAccount gains nothing from them.
    bound = {b["roleRef"]["name"] for b in by_kind(objs, "ClusterRoleBinding")}
    assert bound == {"lws-operator-manager"}
    off = objects(render(values={"rbac": {"aggregateToDefaultRoles": False}}))
    assert [r["metadata"]["name"] for r in by_kind(off, "ClusterRole")] == [
        "lws-operator-manager"]


def test_optional_rbac_follows_values() -> None:
    def groups(values: dict[str, Any]) -> set[str]:
        role = manager_role(objects(render(values=values)))
        return {g for r in role["rules"] for g in r["apiGroups"]}

    assert "scheduling.volcano.sh" not in groups({})
    assert "scheduling.volcano.sh" in groups(
        {"gangSchedulingManagement": {"schedulerProvider": "volcano"}})
    assert "scheduling.k8s.io" in groups({})
    assert "scheduling.k8s.io" not in groups({"rbac": {"nativeGangScheduling": False}})
    role = one(objects(render(values={"leaderElection": {"enabled": False}})), "Role")
    assert not any("coordination.k8s.io" in r["apiGroups"] for r in role["rules"])
    args = container(objects(render(values={"leaderElection": {"enabled": False}})))["args"]
    assert not any(a.startswith("--leader-elect") for a in args)
    bare = objects(render(values={"rbac": {"create": False}}))
    assert not [o for o in bare if o["kind"] in {"ClusterRole", "Role", "ClusterRoleBinding",
                                                 "RoleBinding"}]
    assert by_kind(bare, "Deployment")


def test_chart_and_package_versions_agree() -> None:
    from lws_operator import __version__

    chart = (CHART / "Chart.yaml").read_text()
    app_version = re.search(r'^appVersion: "?([^"\n]+)"?$', chart, re.M)
    assert app_version
    assert app_version.group(1) == __version__
