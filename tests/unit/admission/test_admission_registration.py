"""The webhook registration objects: the files in webhooks/ are the renderer's output."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from lws_operator.admission import registration
from lws_operator.api.constants import MUTATE_POD_PATH

WEBHOOKS = Path(__file__).resolve().parents[3] / "webhooks"


def test_webhooks_directory_is_generated_from_the_renderer() -> None:
    files = registration.manifest_files()
    assert sorted(p.name for p in WEBHOOKS.glob("*.yaml")) == sorted(files)
    for name, text in files.items():
        assert (WEBHOOKS / name).read_text() == text, (
            f"webhooks/{name} is stale: "
            "run python -m lws_operator.admission.registration webhooks/")


def test_upstream_names_paths_and_policies() -> None:
    mutating, validating = registration.render(registration.ServiceTarget())
    assert mutating["metadata"]["name"] == "lws-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "lws-validating-webhook-configuration"
    hooks = {h["name"]: h for h in mutating["webhooks"] + validating["webhooks"]}
    # Ours, beside upstream's: the group disruption budget, which never blocks an eviction
    # when the operator cannot answer.
    eviction = hooks.pop(registration.EVICTION_WEBHOOK)
    assert (eviction["failurePolicy"], eviction["sideEffects"], eviction["timeoutSeconds"]) == (
        "Ignore", "NoneOnDryRun", 5)
    assert eviction["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                                  "operations": ["CREATE"], "resources": ["pods/eviction"]}]
    assert eviction["clientConfig"]["service"]["path"] == "/validate--v1-pod-eviction"
    assert "objectSelector" not in eviction
    assert "namespaceSelector" not in eviction
    # Upstream's vpod.kb.io allows every pod: not registered (the module docstring).
    assert set(hooks) == {"mleaderworkerset.kb.io", "mpod.kb.io", "vleaderworkerset.kb.io",
                          "vdisaggregatedset.kb.io"}
    for hook in hooks.values():
        assert hook["failurePolicy"] == "Fail"
        assert hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["timeoutSeconds"] == 10
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            "lws-webhook-service", "lws-system", 443)
    assert hooks["mpod.kb.io"]["rules"][0]["operations"] == ["CREATE"]
    assert hooks["mpod.kb.io"]["objectSelector"] == {"matchExpressions": [
        {"key": "leaderworkerset.sigs.k8s.io/name", "operator": "Exists"}]}
    for name in ("mleaderworkerset.kb.io", "vleaderworkerset.kb.io"):
        assert hooks[name]["rules"] == [{"apiGroups": ["leaderworkerset.x-k8s.io"],
                                         "apiVersions": ["v1"],
                                         "operations": ["CREATE", "UPDATE"],
                                         "resources": ["leaderworkersets"]}]
    for hook in hooks.values():
        assert "namespaceSelector" not in hook
    # Upstream's DisaggregatedSet webhook: its name, path and rule; no objectSelector.
    ds = hooks["vdisaggregatedset.kb.io"]
    assert ds["clientConfig"]["service"]["path"] == (
        "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset")
    assert ds["rules"] == [{"apiGroups": ["disaggregatedset.x-k8s.io"], "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["disaggregatedsets"]}]
    assert "objectSelector" not in ds
    assert [h["name"] for h in validating["webhooks"]][-2:] == [
        "vdisaggregatedset.kb.io", registration.EVICTION_WEBHOOK]


def test_the_manifests_have_no_yaml_aliases() -> None:
    """Every hook's rule lists are its own: shared lists would dump as ``&id001`` anchors,
    which some tools (and readers) do not follow."""
    for name, text in registration.manifest_files().items():
        assert "&id" not in text, name
        assert "*id" not in text, name


@pytest.mark.parametrize("namespace", ["lws-system", "kube-system", "ml-platform"])
def test_every_namespace_is_served(namespace: str) -> None:
    """As upstream's: no namespaceSelector, the operator's own namespace and kube-system
    included (an LWS there must start); only the objectSelector keeps the pod webhooks away
    from every pod that is not a LeaderWorkerSet's."""
    for obj in registration.render(registration.ServiceTarget(namespace=namespace)):
        for hook in obj["webhooks"]:
            assert "namespaceSelector" not in hook, (hook["name"], hook["namespaceSelector"])
    for name, text in registration.manifest_files(namespace).items():
        assert "namespaceSelector" not in text, name


def test_local_mode_renders_the_same_objects_with_urls() -> None:
    service = registration.render(registration.ServiceTarget())
    local = registration.render(registration.UrlTarget("https://127.0.0.1:9443"),
                                ca_bundle=b"PEM")
    for s_obj, l_obj in zip(service, local, strict=True):
        for s_hook, l_hook in zip(s_obj["webhooks"], l_obj["webhooks"], strict=True):
            path = s_hook["clientConfig"]["service"]["path"]
            assert l_hook["clientConfig"] == {"url": "https://127.0.0.1:9443" + path,
                                              "caBundle": base64.b64encode(b"PEM").decode()}
            assert {k: v for k, v in s_hook.items() if k != "clientConfig"} == {
                k: v for k, v in l_hook.items() if k != "clientConfig"}
    assert local[0]["webhooks"][1]["clientConfig"]["url"].endswith(MUTATE_POD_PATH)


def test_confinement_to_namespaces_adds_to_every_webhook() -> None:
    objs = registration.render(registration.UrlTarget("https://127.0.0.1:1"),
                               only_namespaces=["t-1"])
    for obj in objs:
        for hook in obj["webhooks"]:
            assert {"key": "kubernetes.io/metadata.name", "operator": "In",
                    "values": ["t-1"]} in hook["namespaceSelector"]["matchExpressions"]


def test_main_writes_the_files(tmp_path: Path) -> None:
    registration.main([str(tmp_path), "--namespace", "ops"])
    doc = yaml.safe_load((tmp_path / "mutating-webhook-configuration.yaml").read_text())
    assert doc["webhooks"][0]["clientConfig"]["service"]["namespace"] == "ops"
