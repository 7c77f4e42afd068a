"""The configuration file (lws_operator.api.config): upstream's Configuration loads with
upstream's defaults; anything unknown or invalid is an error naming the field."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from lws_operator.api.config import (
    ConfigError,
    Configuration,
    load,
    parse_bind_address,
    parse_go_duration,
)

SAMPLES = Path(__file__).resolve().parents[3] / "e2e" / "controllers" / "upstream_samples"
HEAD = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as exc:
        load(text, "f.yaml")
    assert str(exc.value).startswith("f.yaml: ")
    return exc.value.problems


def test_defaults_are_upstreams() -> None:
    c = load(HEAD).config
    assert (c.webhook.port, c.webhook.host, c.webhook.certDir) == (
        9443, "", "/tmp/k8s-webhook-server/serving-certs")
    le = c.leaderElection
    assert le.leaderElect is True
    assert (le.leaseDuration, le.renewDeadline, le.retryPeriod) == (
        dt.timedelta(seconds=15), dt.timedelta(seconds=10), dt.timedelta(seconds=2))
    assert (le.resourceLock, le.resourceName) == ("leases", "b8b2488c.x-k8s.io")
    assert c.metrics.bindAddress == ":8443"
    assert (c.health.healthProbeBindAddress, c.health.readinessEndpointName,
            c.health.livenessEndpointName) == (":8081", "/readyz", "/healthz")
    assert c.tls is None
    icm = c.internalCertManagement
    assert (icm.enable, icm.webhookServiceName, icm.webhookSecretName) == (
        True, "lws-webhook-service", "lws-webhook-server-cert")
    assert (c.clientConnection.qps, c.clientConnection.burst) == (500.0, 500)
    assert c.gangSchedulingManagement is None
    assert c == Configuration()


def test_the_upstream_sample_file_loads_unchanged() -> None:
    """Upstream's config/samples file (the stale lws.x-k8s.io/v1alpha1 shape, settings under
    spec, all commented out): accepted, flagged as legacy, defaults only."""
    loaded = load((SAMPLES / "lws_v1alpha1_configuration.yaml").read_text())
    assert loaded.legacy
    assert loaded.config == Configuration()
    assert loaded.explicit == frozenset()


def test_the_legacy_sample_shape() -> None:
    """The same shape as upstream's sample (for machines without it), and settings under its
    spec, which are read with the same strict rules."""
    loaded = load("apiVersion: lws.x-k8s.io/v1alpha1\nkind: Configuration\n"
                  "metadata:\n  name: configuration-sample\nspec:\n  # all commented out\n")
    assert loaded.legacy
    assert loaded.config == Configuration()
    loaded = load("apiVersion: lws.x-k8s.io/v1alpha1\nkind: Configuration\n"
                  "spec:\n  webhook: {port: 9444}\n")
    assert loaded.config.webhook.port == 9444
    assert loaded.explicit == {"webhook", "webhook.port"}


def test_the_kustomize_configuration_loads() -> None:
    loaded = load(HEAD + "leaderElection:\n  leaderElect: true\n"
                  "internalCertManagement:\n  enable: true\n")
    assert not loaded.legacy
    assert loaded.explicit == {"leaderElection", "leaderElection.leaderElect",
                               "internalCertManagement", "internalCertManagement.enable"}


def test_every_field_set() -> None:
    c = load(HEAD + """
webhook: {port: 9444, host: 127.0.0.1, certDir: /certs}
leaderElection:
  leaderElect: false
  leaseDuration: 1m
  renewDeadline: 45s
  retryPeriod: 500ms
  resourceLock: leases
  resourceName: my-lease
  resourceNamespace: elsewhere
metrics: {bindAddress: "0"}
health: {healthProbeBindAddress: "0.0.0.0:9000", readinessEndpointName: ready,
         livenessEndpointName: /live}
tls: {minVersion: VersionTLS12, cipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
      TLS_AES_128_GCM_SHA256]}
internalCertManagement: {enable: true, webhookServiceName: svc, webhookSecretName: sec.ret}
clientConnection: {qps: 20.5, burst: 40}
gangSchedulingManagement: {schedulerProvider: volcano}
""").config
    assert c.webhook.port == 9444
    assert c.leaderElection.leaseDuration == dt.timedelta(minutes=1)
    assert c.leaderElection.retryPeriod == dt.timedelta(milliseconds=500)
    assert c.health.readinessEndpointName == "/ready"
    assert c.tls is not None
    assert c.tls.openssl_ciphers() == "ECDHE-RSA-AES128-GCM-SHA256"
    assert c.internalCertManagement.webhookSecretName == "sec.ret"
    assert (c.clientConnection.qps, c.clientConnection.burst) == (20.5, 40)
    assert c.gangSchedulingManagement is not None
    assert c.gangSchedulingManagement.schedulerProvider == "volcano"


@pytest.mark.parametrize(("body", "expected"), [
    ("leaderElection: {leaderElekt: true}", ["leaderElection.leaderElekt: unknown field"]),
    ("featureGates: {A: true}", ["featureGates: unknown field"]),
    ("metadata: {name: x}", ["metadata: unknown field"]),
    ("webhook: {port: '9443'}", ["webhook.port: Input should be a valid integer"]),
    ("webhook: {port: 70000}", ["webhook.port: Input should be less than or equal to 65535"]),
    ("leaderElection: {leaseDuration: 15}",
     ["leaderElection.leaseDuration: a duration must be a string"]),
    ("leaderElection: {retryPeriod: 2 seconds}", ["leaderElection.retryPeriod: invalid duration"]),
    ("leaderElection: {leaseDuration: 10s}",
     ["leaderElection: leaseDuration must be greater than renewDeadline"]),
    ("leaderElection: {renewDeadline: 2s}",
     ["leaderElection: renewDeadline must be greater than retryPeriod*1.2"]),
    ("leaderElection: {resourceLock: configmaps}",
     ["leaderElection.resourceLock: unsupported resource lock 'configmaps'"]),
    ("leaderElection: {leaderElect: 'yes'}", ["leaderElection.leaderElect: Input should be a "
                                              "valid boolean"]),
    ("metrics: {bindAddress: 8443}", ["metrics.bindAddress: Input should be a valid string"]),
    ("health: {healthProbeBindAddress: localhost}",
     ["health.healthProbeBindAddress: invalid bind address 'localhost'"]),
    ("tls: {minVersion: VersionTLS11}",
     ["tls.minVersion: invalid minVersion. Please use VersionTLS12 or VersionTLS13"]),
    ("tls: {minVersion: VersionTLS10}",
     ["tls.minVersion: invalid minVersion. Please use VersionTLS12 or VersionTLS13"]),
    ("tls: {minVersion: VersionTLS13, cipherSuites: [TLS_AES_128_GCM_SHA256]}",
     ["tls: cipher suites may not be specified when minVersion is 'VersionTLS13'"]),
    ("tls: {cipherSuites: [TLS_RSA_WITH_RC4_128_SHA]}",
     ["tls.cipherSuites: unsupported cipher suite(s) TLS_RSA_WITH_RC4_128_SHA"]),
    ("internalCertManagement: {webhookServiceName: Web_Hook}",
     ["internalCertManagement: webhookServiceName 'Web_Hook' must be a DNS-1035 label"]),
    ("internalCertManagement: {webhookSecretName: -bad}",
     ["internalCertManagement: webhookSecretName '-bad' must be a DNS-1123 subdomain"]),
    ("clientConnection: {qps: fast}", ["clientConnection.qps: Input should be a valid number"]),
    ("gangSchedulingManagement: {}", ["gangSchedulingManagement.schedulerProvider: Field "
                                      "required"]),
    ("gangSchedulingManagement: {schedulerProvider: kueue}",
     ["gangSchedulingManagement.schedulerProvider: unsupported scheduler provider 'kueue'"]),
])
def test_invalid_fields_are_named(body: str, expected: list[str]) -> None:
    found = problems(HEAD + body)
    assert len(found) == len(expected), found
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


def test_every_problem_is_reported_at_once() -> None:
    found = problems(HEAD + "webhook: {port: x}\nclientConnection: {burst: y}\nextra: 1\n")
    assert [p.split(":")[0] for p in found] == ["webhook.port", "clientConnection.burst",
                                                "extra"]


@pytest.mark.parametrize(("text", "expected"), [
    ("", ["apiVersion: required", "kind: required"]),
    ("kind: Configuration", ["apiVersion: required"]),
    ("apiVersion: v1\nkind: Configuration", ["apiVersion: must be"]),
    (HEAD.replace("kind: Configuration", "kind: Config"), ["kind: must be"]),
    ("[1, 2]", ["(document): must be a mapping"]),
    ("a: [", ["(document): not valid YAML"]),
    (HEAD + "webhook: {port: 1}\nwebhook: {port: 2}\n", ["webhook: duplicate field (line 4)"]),
    (HEAD + "webhook:\n  port: 1\n  port: 2\n", ["port: duplicate field (line 5)"]),
    ("apiVersion: lws.x-k8s.io/v1alpha1\nkind: Configuration\nspec:\n  webhook: {prot: 1}\n",
     ["spec.webhook.prot: unknown field"]),
    ("apiVersion: lws.x-k8s.io/v1alpha1\nkind: Configuration\nwebhook: {}\n",
     ["webhook: unknown field"]),
])
def test_invalid_documents(text: str, expected: list[str]) -> None:
    found = problems(text)
    assert len(found) == len(expected), found
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), (line, prefix)


@pytest.mark.parametrize(("text", "seconds"), [
    ("15s", 15), ("1m30s", 90), ("500ms", 0.5), ("1h", 3600), ("0", 0), ("1.5s", 1.5),
    ("2m0.5s", 120.5), ("100us", 1e-4), ("10ns", 1e-8),
])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_go_duration(text) == dt.timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "15", "1d", "s", "1m 30s", "abc", "5 s"])
def test_bad_go_durations(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_go_duration(text)


@pytest.mark.parametrize(("text", "expected"), [
    (":8081", ("", 8081)), ("0.0.0.0:8443", ("0.0.0.0", 8443)), ("[::1]:9", ("::1", 9)),
    ("0", None),
])
def test_bind_addresses(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(text) == expected


@pytest.mark.parametrize("text", ["8081", "host", ":x", ":99999", ""])
def test_bad_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid bind address"):
        parse_bind_address(text)
