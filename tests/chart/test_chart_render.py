"""The Helm chart without a cluster: lint, golden renderings, and the facts that tie the chart to
the code (the CRD file, the webhook registrations, the operator's flags, the RBAC it needs)."""

from __future__ import annotations

import argparse
import re
from typing import Any

import pytest

from e2e.harness.chart import (
    CHART,
    GOLDEN_CASES,
    REPO,
    UPSTREAM_VALUES,
    golden_path,
    helm,
    objects,
    render,
)
from lws_operator.__main__ import _add_run
from lws_operator.admission import registration

CRD_NAME = "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
# Every CRD of crds/: LeaderWorkerSet, DisaggregatedSet and its role scaler.
CRD_NAMES = sorted(p.name for p in (REPO / "crds").glob("*.yaml"))


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objs, kind)
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]


def manager_role(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator's ClusterRole (the others are for people)."""
    found = [r for r in by_kind(objs, "ClusterRole")
             if r["metadata"]["name"].endswith("-manager-role")]
    assert len(found) == 1
    return found[0]


def manager_namespace_role(objs: list[dict[str, Any]]) -> dict[str, Any]:
    """The operator's Role in the release namespace (the certificate Secret, the Lease)."""
    found = [r for r in by_kind(objs, "Role") if r["metadata"]["name"].endswith("-manager-role")]
    assert len(found) == 1
    return found[0]


def run_parser() -> tuple[argparse.ArgumentParser, set[str]]:
    """``lws-operator``'s parser with its ``run`` command, and the flags ``run`` knows."""
    parser = argparse.ArgumentParser(prog="lws-operator")
    sub = parser.add_subparsers(dest="command")
    _add_run(sub)
    return parser, set(sub.choices["run"]._option_string_actions)


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


def test_crds_are_the_generated_ones() -> None:
    """The chart ships crds/ byte for byte (``make crd`` regenerates only crds/), the
    DisaggregatedSet CRDs included (upstream's chart ships them unconditionally too)."""
    expected = sorted([CRD_NAME, "disaggregatedset.x-k8s.io_disaggregatedsets.yaml",
                       "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml"])
    assert expected == CRD_NAMES
    for name in CRD_NAMES:
        assert (CHART / "crds" / name).read_bytes() == (REPO / "crds" / name).read_bytes(), (
            f"cp crds/{name} charts/lws-operator/crds/")
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == CRD_NAMES


@pytest.mark.parametrize("namespace", ["lws-system", "kube-system", "ml-platform"])
def test_webhook_configurations_are_the_operators(namespace: str) -> None:
    """The chart registers what ``lws_operator.admission.registration`` renders (the source of
    ``webhooks/*.yaml``), apart from Helm's labels."""
    objs = objects(render(namespace=namespace))
    rendered = [o for o in objs if o["kind"].endswith("WebhookConfiguration")]
    for obj in rendered:
        assert obj["metadata"].pop("labels")["app.kubernetes.io/managed-by"] == "Helm"
    expected = registration.render(registration.ServiceTarget(namespace=namespace))
    assert sorted(rendered, key=lambda o: o["kind"]) == sorted(expected, key=lambda o: o["kind"])


@pytest.mark.parametrize("namespace", ["lws-system", "kube-system"])
def test_webhooks_serve_every_namespace_by_default(namespace: str) -> None:
    """As upstream: no namespaceSelector, so a LeaderWorkerSet in the release namespace or
    kube-system starts like any other; the pod webhooks see LeaderWorkerSet pods only."""
    objs = objects(render(namespace=namespace))
    hooks = [h for o in objs if o["kind"].endswith("WebhookConfiguration") for h in o["webhooks"]]
    assert len(hooks) == 5
    for hook in hooks:
        assert "namespaceSelector" not in hook, hook["name"]
        if hook["name"] == "mpod.kb.io":
            assert hook["objectSelector"] == {"matchExpressions": [
                {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_eviction_webhook_never_blocks(policy: str) -> None:
    """The group disruption budget's webhook sees every eviction of the cluster, so whatever
    the other webhooks' failure policy and timeout, it lets evictions through when the
    operator cannot answer, and declares no side effects on dry runs only."""
    objs = objects(render(values={"webhook": {"failurePolicy": policy,
                                              "timeoutSeconds": 30}}))
    hooks = {h["name"]: h for h in one(objs, "ValidatingWebhookConfiguration")["webhooks"]}
    eviction = hooks[registration.EVICTION_WEBHOOK]
    assert (eviction["failurePolicy"], eviction["timeoutSeconds"], eviction["sideEffects"]) == (
        "Ignore", 5, "NoneOnDryRun")
    assert eviction["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                  "operations": ["CREATE"], "resources": ["pods/eviction"]}]
    assert "objectSelector" not in eviction
    assert hooks["vleaderworkerset.kb.io"]["failurePolicy"] == policy


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
            # Exactly the user's: nothing of ours is added, to the pod webhooks either.
            assert hook["namespaceSelector"] == {"matchExpressions": [extra]}
    service = next(s for s in by_kind(objs, "Service") if s["metadata"]["name"] == "hooks")
    assert service["spec"]["ports"][0]["port"] == 8443
    args = container(objs)["args"]
    assert "--webhook-service=hooks" in args
    assert "--mutating-webhook-configuration=m" in args


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_every_rendered_flag_is_the_operators(case: str) -> None:
    """``lws-operator run`` accepts every one of the Deployment's arguments (a renamed flag
    would crash the pod at start), and resolves them into valid options."""
    from lws_operator.options import resolve

    release, namespace, values = GOLDEN_CASES[case]
    args = container(objects(render(release, namespace, values)))["args"]
    parser, known = run_parser()
    for arg in args:
        assert arg.split("=", 1)[0] in known, f"lws-operator run has no flag {arg}"
    parsed = parser.parse_args(["run", *args])
    assert parsed.command == "run"
    resolve(parsed, None)  # ConfigError on e.g. bad leader-election timings


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
            "--kube-api-burst=100", "--log-level=info", "--metrics-bind-address=:8443",
            "--metrics-secure=true"} <= set(main["args"])
    assert {p["name"]: p["containerPort"] for p in main["ports"]} == {
        "webhook-server": 9443, "health": 8081, "metrics": 8443}
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


def test_replicas_prefer_different_nodes_unless_affinity_is_given() -> None:
    """Two replicas on one node would both go with it (the webhooks fail closed) and a drain
    of it would be held by the PodDisruptionBudget; the default asks the scheduler to spread
    them, and an affinity given in the values replaces that."""
    deployment = one(objects(render()), "Deployment")
    terms = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert [t["podAffinityTerm"]["topologyKey"] for t in terms] == ["kubernetes.io/hostname"]
    assert terms[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == deployment["spec"][
        "selector"]["matchLabels"]
    given = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["infra"]}]}]}}}
    deployment = one(objects(render(values={"affinity": given})), "Deployment")
    assert deployment["spec"]["template"]["spec"]["affinity"] == given


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
    # The operator only reads (and watches) the Secret then, and writes no webhook
    # configuration.
    role = manager_namespace_role(objs)
    assert {"apiGroups": [""], "resources": ["secrets"],
            "resourceNames": ["lws-webhook-server-cert"],
            "verbs": ["get", "list", "watch"]} in role["rules"]
    cluster_role = manager_role(objs)
    assert not any("admissionregistration.k8s.io" in r["apiGroups"]
                   for r in cluster_role["rules"])


@pytest.mark.parametrize(("setting", "message"), [
    ("webhook.certificates=vault", "value must be one of 'self', 'cert-manager'"),
    ("replicaCont=3", "additional properties 'replicaCont' not allowed"),
    ("webhook.failurePolicy=fail", "value must be one of 'Fail', 'Ignore'"),
    ("gangSchedulingManagement.schedulerProvider=kueue", "value must be 'volcano'"),
    ("image.manager.repo=x", "additional properties 'repo' not allowed"),
    ("enableCertManager=yes", "got string, want boolean"),
    ("webhook.evictions.enabled=maybe", "got string, want boolean"),
    ("webhook.evictions.enable=false", "additional properties 'enable' not allowed"),
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
            # Non-resource URLs: only reading /metrics, in the role for scrapers.
            if rule.get("nonResourceURLs"):
                assert role["metadata"]["name"].endswith("-metrics-reader")
                assert rule == {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
            # Secrets only by name, in the release namespace. list and watch restricted by
            # resourceNames are allowed only with a field selector on that name (the
            # certificate Secret is watched), so they read nothing a get could not.
            if "secrets" in rule.get("resources", []):
                assert role["kind"] == "Role"
                assert rule["resourceNames"]
                assert set(rule["verbs"]) <= {"get", "list", "watch", "update"}


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
    assert bound == {"lws-operator-manager-role"}
    off = objects(render(values={"rbac": {"aggregateToDefaultRoles": False}}))
    assert sorted(r["metadata"]["name"] for r in by_kind(off, "ClusterRole")) == [
        "lws-operator-manager-role", "lws-operator-metrics-reader"]


def test_people_get_disaggregatedsets_through_the_default_roles() -> None:
    """Editors run DisaggregatedSets and scale their role scalers; the controller alone creates
    and deletes scalers; viewers read all of it."""
    roles = {r["metadata"]["name"]: r for r in by_kind(objects(render()), "ClusterRole")}

    def verbs(role: dict[str, Any], resource: str) -> set[str]:
        return {v for rule in role["rules"] if "disaggregatedset.x-k8s.io" in rule["apiGroups"]
                and resource in rule["resources"] for v in rule["verbs"]}

    editor = roles["lws-operator-leaderworkerset-editor"]
    assert verbs(editor, "disaggregatedsets") == {
        "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}
    assert verbs(editor, "disaggregatedsetrolescalers") == {"get", "list", "watch"}
    assert verbs(editor, "disaggregatedsetrolescalers/scale") == {"get", "update", "patch"}
    assert verbs(editor, "disaggregatedsets/status") == {"get"}
    viewer = roles["lws-operator-leaderworkerset-viewer"]
    for resource in ("disaggregatedsets", "disaggregatedsets/status",
                     "disaggregatedsetrolescalers", "disaggregatedsetrolescalers/scale",
                     "disaggregatedsetrolescalers/status"):
        assert verbs(viewer, resource) == {"get", "list", "watch"}, resource


def test_optional_rbac_follows_values() -> None:
    def groups(values: dict[str, Any]) -> set[str]:
        role = manager_role(objects(render(values=values)))
        return {g for r in role["rules"] for g in r["apiGroups"]}

    assert "scheduling.volcano.sh" not in groups({})
    assert "scheduling.volcano.sh" in groups(
        {"gangSchedulingManagement": {"schedulerProvider": "volcano"}})
    assert "scheduling.k8s.io" in groups({})
    assert "scheduling.k8s.io" not in groups({"rbac": {"nativeGangScheduling": False}})
    role = manager_namespace_role(objects(render(values={"leaderElection": {"enabled": False}})))
    assert not any("coordination.k8s.io" in r["apiGroups"] for r in role["rules"])
    # The operator elects by default: off must be said.
    args = container(objects(render(values={"leaderElection": {"enabled": False}})))["args"]
    assert [a for a in args if a.startswith("--leader-elect")] == ["--leader-elect=false"]
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


def test_metrics_follow_values() -> None:
    """Secure by default: HTTPS on its own port, the reviews granted to the operator, a role for
    scrapers; plain HTTP without either; nothing at all when disabled."""
    objs = objects(render(values={"metrics": {"serviceMonitor": {"enabled": True}}}))
    service = next(s for s in by_kind(objs, "Service")
                   if s["metadata"]["name"] == "lws-operator-controller-manager-metrics-service")
    assert service["spec"]["ports"] == [{"name": "https", "port": 8443, "targetPort": "metrics",
                                         "protocol": "TCP"}]
    endpoint = one(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["scheme"]) == ("https", "https")
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    reviews = [{"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"],
                "verbs": ["create"]},
               {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"],
                "verbs": ["create"]}]
    rules = manager_role(objs)["rules"]
    assert all(r in rules for r in reviews)
    reader = next(r for r in by_kind(objs, "ClusterRole")
                  if r["metadata"]["name"] == "lws-operator-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    health = container(objs)["livenessProbe"]["httpGet"]["port"]
    assert health == "health"

    plain = objects(render(values={"metrics": {"secure": False, "port": 8080,
                                               "serviceMonitor": {"enabled": True}}}))
    args = container(plain)["args"]
    assert {"--metrics-bind-address=:8080", "--metrics-secure=false"} <= set(args)
    assert {"name": "metrics", "containerPort": 8080, "protocol": "TCP"} in container(plain)[
        "ports"]
    endpoint = one(plain, "ServiceMonitor")["spec"]["endpoints"][0]
    assert (endpoint["port"], endpoint["scheme"]) == ("http", "http")
    assert "tlsConfig" not in endpoint
    assert "bearerTokenFile" not in endpoint
    assert not any(r in manager_role(plain)["rules"] for r in reviews)
    assert "lws-operator-metrics-reader" not in {
        r["metadata"]["name"] for r in by_kind(plain, "ClusterRole")}

    off = objects(render(values={"metrics": {"enabled": False}}))
    assert "--metrics-bind-address=0" in container(off)["args"]
    assert not any(a.startswith("--metrics-secure") for a in container(off)["args"])
    assert "metrics" not in {p["name"] for p in container(off)["ports"]}
    assert not any(s["metadata"]["name"].endswith("-metrics-service")
                   for s in by_kind(off, "Service"))
    assert not any(r in manager_role(off)["rules"] for r in reviews)

    # A serving certificate from a Secret: mounted, and passed as --metrics-cert-path.
    own = objects(render(values={"metrics": {"certSecretName": "mc"}}))
    pod = one(own, "Deployment")["spec"]["template"]["spec"]
    mount = next(m for m in container(own)["volumeMounts"] if m["name"] == "metrics-certs")
    assert f"--metrics-cert-path={mount['mountPath']}" in container(own)["args"]
    assert {"name": "metrics-certs", "secret": {"secretName": "mc"}} in pod["volumes"]


def granted(rules: list[dict[str, Any]], verb: str, group: str, resource: str,
            name: str = "") -> bool:
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", [])
               and verb in r["verbs"]
               and (not r.get("resourceNames") or (name and name in r["resourceNames"]))
               for r in rules)


@pytest.mark.parametrize("case", sorted(GOLDEN_CASES))
def test_rbac_covers_the_startup_check(case: str) -> None:
    """Every permission ``lws-operator run`` with the Deployment's arguments asks for at start
    (``kube.preflight``; it refuses to start without one) is granted by the rendered roles,
    where the check asks for it: cluster-wide, or in the release namespace. So are the
    DisaggregatedSet controller's (checked, but not required, at start) and the watch of its
    CRD by name (asked before that watch starts)."""
    from lws_operator.controllers.runtime import DS_CRD_WATCH
    from lws_operator.kube.preflight import (
        AdmissionNeeds,
        disaggregated_permissions,
        needed_permissions,
    )
    from lws_operator.options import resolve

    release, namespace, values = GOLDEN_CASES[case]
    objs = objects(render(release, namespace, values))
    parser, _ = run_parser()
    args = parser.parse_args(["run", *container(objs)["args"]])
    opts = resolve(args, None)
    needs = AdmissionNeeds(
        secret=opts.webhook_secret, mutating=args.mutating_webhook_configuration,
        validating=args.validating_webhook_configuration,
        manage_certificates=args.cert_management == "self",
        review_metrics=opts.metrics_bind is not None and args.metrics_secure)
    needed = needed_permissions(namespace=namespace, controllers=True,
                                lease_namespace=namespace if opts.leader_elect else None,
                                admission=needs)
    needed += [*disaggregated_permissions(), *DS_CRD_WATCH]
    cluster_rules = manager_role(objs)["rules"]
    role = manager_namespace_role(objs)
    assert role["metadata"]["namespace"] == namespace
    missing = [str(p) for p in needed
               if not granted(cluster_rules, p.verb, p.group,
                              f"{p.resource}/{p.subresource}" if p.subresource else p.resource,
                              p.name)
               and not (p.namespace == namespace and granted(
                   role["rules"], p.verb, p.group, p.resource, p.name))]
    assert not missing, f"the chart does not grant: {missing}"


# ------------------------------------------------------- values written for the upstream chart


def test_upstream_values_file_gets_upstream_names_and_meanings() -> None:
    """Release ``lws``: upstream's object names and selector (a ``helm upgrade`` of an upstream
    release keeps its Deployment: the selector is immutable), and each key's effect."""
    objs = objects(render("lws", "lws-system", UPSTREAM_VALUES))
    names = {(o["kind"], o["metadata"]["name"]) for o in objs}
    assert {("Deployment", "lws-controller-manager"), ("ServiceAccount", "lws-controller-manager"),
            ("Service", "lws-controller-manager-metrics-service"),
            ("Service", "lws-webhook-service"), ("Secret", "lws-webhook-server-cert"),
            ("ServiceMonitor", "lws-controller-manager-metrics-monitor"),
            ("ClusterRole", "lws-manager-role"), ("ClusterRoleBinding", "lws-manager-rolebinding"),
            ("ClusterRole", "lws-metrics-reader"),
            ("MutatingWebhookConfiguration", "lws-mutating-webhook-configuration"),
            ("ValidatingWebhookConfiguration", "lws-validating-webhook-configuration"),
            } <= names
    assert not by_kind(objs, "Job"), "crdUpgrade has no effect"
    deployment = one(objs, "Deployment")
    assert deployment["metadata"]["namespace"] == "lws-system"
    assert deployment["metadata"]["labels"]["control-plane"] == "controller-manager"
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector == {"control-plane": "controller-manager", "app.kubernetes.io/name": "lws",
                        "app.kubernetes.io/instance": "lws"}
    template = deployment["spec"]["template"]
    assert selector.items() <= template["metadata"]["labels"].items()
    for service in by_kind(objs, "Service"):
        assert service["spec"]["selector"] == selector, service["metadata"]["name"]
    assert one(objs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"] == selector
    assert deployment["spec"]["replicas"] == UPSTREAM_VALUES["replicaCount"]
    pod = template["spec"]
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
        assert pod[key] == UPSTREAM_VALUES[key], key
    assert pod["serviceAccountName"] == "lws-controller-manager"
    assert template["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    main = container(objs)
    assert main["image"] == "registry.example.com/mirror/lws-operator:0.1.0"
    assert main["imagePullPolicy"] == "IfNotPresent"
    assert main["resources"]["requests"] == {"cpu": 1, "memory": "1Gi"}
    assert {"--scheduler-provider=volcano", "--webhook-port=9443", "--cert-management=self",
            "--metrics-bind-address=:8443", "--metrics-secure=true"} <= set(main["args"])
    assert not any(a.startswith("--feature-gates") for a in main["args"])
    assert "scheduling.volcano.sh" in {g for r in manager_role(objs)["rules"]
                                       for g in r["apiGroups"]}
    metrics = next(s for s in by_kind(objs, "Service")
                   if s["metadata"]["name"] == "lws-controller-manager-metrics-service")
    monitor = one(objs, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= metrics["metadata"][
        "labels"].items()


def test_object_names_follow_the_release_as_upstreams_do() -> None:
    """Upstream's rule: the release name if it contains ``lws``, else ``<release>-lws``."""
    for release, prefix in (("lws", "lws"), ("lws-operator", "lws-operator"),
                            ("ml", "ml-lws")):
        objs = objects(render(release))
        assert one(objs, "Deployment")["metadata"]["name"] == f"{prefix}-controller-manager"
        assert one(objs, "ServiceAccount")["metadata"]["name"] == f"{prefix}-controller-manager"
        assert manager_role(objs)["metadata"]["name"] == f"{prefix}-manager-role"
    objs = objects(render(values={"fullnameOverride": "ops"}))
    assert one(objs, "Deployment")["metadata"]["name"] == "ops-controller-manager"


def test_upstream_service_keys() -> None:
    """``service.port``: the webhook server's container port; ``service.type``: the metrics
    Service's type (the webhook Service stays a ClusterIP)."""
    objs = objects(render(values={"service": {"port": 9555, "type": "NodePort"}}))
    main = container(objs)
    assert "--webhook-port=9555" in main["args"]
    assert {"name": "webhook-server", "containerPort": 9555, "protocol": "TCP"} in main["ports"]
    types = {s["metadata"]["name"]: s["spec"]["type"] for s in by_kind(objs, "Service")}
    assert types == {"lws-webhook-service": "ClusterIP",
                     "lws-operator-controller-manager-metrics-service": "NodePort"}


def test_enable_prometheus() -> None:
    assert not by_kind(objects(render(values={"enablePrometheus": False})), "ServiceMonitor")
    on = objects(render(values={"enablePrometheus": True, "metrics": {"enabled": False}}))
    assert one(on, "ServiceMonitor")
    assert "--metrics-bind-address=:8443" in container(on)["args"]
    # kube-prometheus's Prometheus discovers the metrics Service: reads in the release namespace.
    role = next(r for r in by_kind(on, "Role") if r["metadata"]["name"].endswith("-prometheus-k8s"))
    assert all(set(r["verbs"]) == {"get", "list", "watch"} for r in role["rules"])
    binding = next(b for b in by_kind(on, "RoleBinding") if b["roleRef"]["name"] == role[
        "metadata"]["name"])
    assert {(s["namespace"], s["name"]) for s in binding["subjects"]} == {
        ("monitoring", "prometheus-k8s"), ("monitoring", "prometheus-operator")}
    assert not any(r["metadata"]["name"].endswith("-prometheus-k8s")
                   for r in by_kind(objects(render()), "Role"))


def test_enable_cert_manager() -> None:
    """As upstream's: cert-manager issues the webhook certificate and the metrics certificate
    (``lws-metrics-cert`` into ``lws-metrics-server-cert``), which /metrics serves and the
    ServiceMonitor verifies."""
    objs = objects(render("lws", "lws-system", {"enableCertManager": True,
                                                "enablePrometheus": True}))
    args = container(objs)["args"]
    assert "--cert-management=external" in args
    issuer = one(objs, "Issuer")["metadata"]["name"]
    assert issuer == "lws-selfsigned-issuer"
    certificates = {c["metadata"]["name"]: c["spec"] for c in by_kind(objs, "Certificate")}
    assert set(certificates) == {"lws-serving-cert", "lws-metrics-cert"}
    assert certificates["lws-serving-cert"]["secretName"] == "lws-webhook-server-cert"
    metrics = certificates["lws-metrics-cert"]
    assert metrics["secretName"] == "lws-metrics-server-cert"
    assert metrics["issuerRef"] == {"name": issuer, "kind": "Issuer"}
    assert metrics["dnsNames"][0] == "lws-controller-manager-metrics-service.lws-system.svc"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert one(objs, kind)["metadata"]["annotations"][
            "cert-manager.io/inject-ca-from"] == "lws-system/lws-serving-cert"
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    assert {"name": "metrics-certs", "secret": {"secretName": "lws-metrics-server-cert"}} in pod[
        "volumes"]
    mount = next(m for m in container(objs)["volumeMounts"] if m["name"] == "metrics-certs")
    assert f"--metrics-cert-path={mount['mountPath']}" in args
    endpoint = one(objs, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["tlsConfig"] == {
        "ca": {"secret": {"name": "lws-metrics-server-cert", "key": "ca.crt"}},
        "serverName": "lws-controller-manager-metrics-service.lws-system.svc"}
    # Our own key gives the webhook part only; a named metrics Secret wins over the Certificate.
    ours = objects(render(values={"webhook": {"certificates": "cert-manager"}}))
    assert {c["metadata"]["name"] for c in by_kind(ours, "Certificate")} == {
        "lws-operator-serving-cert"}
    named = objects(render(values={"enableCertManager": True,
                                   "metrics": {"certSecretName": "mine"}}))
    assert len(by_kind(named, "Certificate")) == 1
    assert any(a.startswith("--metrics-cert-path=") for a in container(named)["args"])


def webhook_names(objs: list[dict[str, Any]]) -> list[str]:
    return [h["name"] for o in objs if o["kind"].endswith("WebhookConfiguration")
            for h in o["webhooks"]]


@pytest.mark.parametrize("values", [
    {}, {"enableDisaggregatedSet": False}, {"enableDisaggregatedSet": True},
    {"webhook": {"validateDisaggregatedSets": True}},
])
def test_the_disaggregatedset_webhook_is_registered_unless_switched_off(
        values: dict[str, Any]) -> None:
    """Unlike upstream's chart (only with enableDisaggregatedSet), whatever that key says: an
    upstream values file keeps its default, false, and would otherwise lose the checks."""
    assert "vdisaggregatedset.kb.io" in webhook_names(objects(render(values=values)))


def test_the_disaggregatedset_webhook_can_be_left_out() -> None:
    objs = objects(render(values={"webhook": {"validateDisaggregatedSets": False}}))
    assert webhook_names(objs) == ["mleaderworkerset.kb.io", "mpod.kb.io",
                                   "vleaderworkerset.kb.io", registration.EVICTION_WEBHOOK]
    both = objects(render(values={"enableDisaggregatedSet": True,
                                  "webhook": {"validateDisaggregatedSets": False}}))
    assert "vdisaggregatedset.kb.io" not in webhook_names(both)


def test_the_eviction_webhook_can_be_left_out() -> None:
    """``webhook.evictions.enabled: false`` leaves out the group disruption budget's webhook
    and nothing else: every other object renders exactly as by default."""
    default = objects(render())
    off = objects(render(values={"webhook": {"evictions": {"enabled": False}}}))
    assert registration.EVICTION_WEBHOOK in webhook_names(default)
    assert webhook_names(off) == [name for name in webhook_names(default)
                                  if name != registration.EVICTION_WEBHOOK]

    def without_eviction(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [{**o, "webhooks": [h for h in o["webhooks"]
                                   if h["name"] != registration.EVICTION_WEBHOOK]}
                if o["kind"] == "ValidatingWebhookConfiguration" else o for o in objs]

    assert without_eviction(default) == off


@pytest.mark.parametrize(("setting", "message"), [
    ("image.manager.repository=registry.k8s.io/lws/lws", "upstream's Go controller"),
    ("webhook.validateDisaggregatedSets=maybe", "validateDisaggregatedSets"),
])
def test_upstream_keys_this_operator_cannot_honour_are_refused_with_the_reason(
        setting: str, message: str) -> None:
    done = helm("template", "x", str(CHART), "--set", setting, check=False)
    assert done.returncode != 0
    assert message in done.stderr

