"""``lws-operator run`` settings (lws_operator.options): the configuration file, and flags that
override it only when set explicitly (upstream's cmd/main.go); invalid input exits 2 naming the
field."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from lws_operator.__main__ import _add_run, main
from lws_operator.api.config import ConfigError
from lws_operator.logic.runtime.leaderelection import Timings
from lws_operator.options import RunOptions, load_config, resolve

HEAD = "apiVersion: config.lws.x-k8s.io/v1alpha1\nkind: Configuration\n"


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("LWS_"):
            monkeypatch.delenv(name)


def options(tmp_path: Path, *flags: str, config: str | None = None) -> RunOptions:
    parser = argparse.ArgumentParser()
    _add_run(parser.add_subparsers(dest="command"))
    argv = ["run", *flags]
    if config is not None:
        path = tmp_path / "config.yaml"
        path.write_text(HEAD + config)
        argv += ["--config", str(path)]
    args = parser.parse_args(argv)
    return resolve(args, load_config(args.config))


def test_without_a_file_the_configuration_defaults_apply(tmp_path: Path) -> None:
    o = options(tmp_path)
    assert (o.webhook_port, o.webhook_bind, o.health) == (9443, "0.0.0.0", ("0.0.0.0", 8081))
    assert (o.qps, o.burst) == (500.0, 500)
    assert (o.leader_elect, o.lease_name, o.lease_namespace) == (True, "b8b2488c.x-k8s.io", None)
    assert o.timings == Timings(15.0, 10.0, 2.0)
    assert (o.webhook_service, o.webhook_secret) == ("lws-webhook-service",
                                                     "lws-webhook-server-cert")
    assert o.scheduler_provider is None
    assert (o.liveness_path, o.readiness_path, o.serve_metrics) == ("/healthz", "/readyz", True)
    assert o.metrics_bind == ("", 8443)
    assert o.notices == ()


def test_the_file_applies_where_no_flag_is_set(tmp_path: Path) -> None:
    o = options(tmp_path, config="""
webhook: {port: 9444}
leaderElection: {leaderElect: false, leaseDuration: 30s, renewDeadline: 20s, retryPeriod: 4s,
                 resourceName: my-lease}
health: {healthProbeBindAddress: "127.0.0.1:9081", livenessEndpointName: /live}
clientConnection: {qps: 20, burst: 30}
internalCertManagement: {webhookServiceName: my-svc, webhookSecretName: my-secret}
gangSchedulingManagement: {schedulerProvider: volcano}
tls: {minVersion: VersionTLS13}
""")
    assert (o.webhook_port, o.health, o.liveness_path) == (9444, ("127.0.0.1", 9081), "/live")
    assert (o.qps, o.burst) == (20.0, 30)
    assert (o.leader_elect, o.lease_name) == (False, "my-lease")
    assert o.timings == Timings(30.0, 20.0, 4.0)
    assert (o.webhook_service, o.webhook_secret) == ("my-svc", "my-secret")
    assert o.scheduler_provider == "volcano"
    assert (o.tls_min_version, o.tls_ciphers) == ("VersionTLS13", None)


def test_explicit_flags_override_the_file(tmp_path: Path) -> None:
    o = options(tmp_path, "--webhook-port", "9555", "--kube-api-qps", "5",
                "--leader-elect=true", "--leader-elect-lease-duration", "20s",
                "--leader-elect-resource-name", "flag-lease",
                "--leader-elect-resource-namespace", "elsewhere",
                "--health-probe-bind-address", ":9999", "--webhook-secret", "flag-secret",
                config="webhook: {port: 9444}\nclientConnection: {qps: 20, burst: 30}\n"
                       "leaderElection: {leaderElect: false, resourceName: file-lease}\n"
                       "internalCertManagement: {webhookSecretName: file-secret}\n")
    assert (o.webhook_port, o.qps, o.burst) == (9555, 5.0, 30)
    assert (o.leader_elect, o.lease_name, o.lease_namespace) == (True, "flag-lease",
                                                                 "elsewhere")
    assert o.timings == Timings(20.0, 10.0, 2.0)
    assert o.health == ("0.0.0.0", 9999)
    assert o.webhook_secret == "flag-secret"


def test_environment_variables_count_as_explicit(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LWS_WEBHOOK_PORT", "9666")
    monkeypatch.setenv("LWS_LEADER_ELECT", "false")
    o = options(tmp_path, config="webhook: {port: 9444}\n")
    assert (o.webhook_port, o.leader_elect) == (9666, False)


def test_the_health_port_flag_and_local_mode(tmp_path: Path) -> None:
    o = options(tmp_path, "--webhook-host", "127.0.0.1", "--health-port", "18081")
    assert (o.webhook_bind, o.health) == ("127.0.0.1", ("127.0.0.1", 18081))


def test_unhonoured_settings_are_reported(tmp_path: Path) -> None:
    o = options(tmp_path, config="webhook: {certDir: /certs}\nmetrics: {bindAddress: ':8443'}\n"
                                 "leaderElection: {resourceNamespace: other}\n")
    text = "\n".join(o.notices)
    assert "webhook.certDir (/certs) is not used" in text
    assert "metrics" not in text  # metrics.bindAddress is honoured (the metrics server)
    assert "leaderElection.resourceNamespace (other) is ignored" in text
    assert o.lease_namespace is None  # ignored, as upstream ignores it


def test_metrics_can_be_disabled(tmp_path: Path) -> None:
    assert not options(tmp_path, "--metrics-bind-address", "0").serve_metrics
    assert not options(tmp_path, config="metrics: {bindAddress: '0'}\n").serve_metrics


def test_the_metrics_address_comes_from_the_flag_over_the_file(tmp_path: Path) -> None:
    assert options(tmp_path).metrics_bind == ("", 8443)
    assert options(tmp_path, config="metrics: {bindAddress: '127.0.0.1:9090'}\n"
                   ).metrics_bind == ("127.0.0.1", 9090)
    assert options(tmp_path, "--metrics-bind-address", "127.0.0.1:8080",
                   config="metrics: {bindAddress: ':9090'}\n").metrics_bind == ("127.0.0.1", 8080)


def test_origins_name_the_setting_a_message_should_point_at(tmp_path: Path) -> None:
    """A port in use or a missing Volcano CRD is reported naming the setting that chose the
    value: the flag, or the file's field when only the file set it."""
    assert options(tmp_path).origins == {
        "webhook_port": "--webhook-port", "health": "--health-port",
        "metrics_bind": "--metrics-bind-address", "scheduler_provider": "--scheduler-provider"}
    config = tmp_path / "config.yaml"
    from_file = options(tmp_path, config="webhook: {port: 9444}\n"
                        "health: {healthProbeBindAddress: ':9081'}\n"
                        "metrics: {bindAddress: ':9090'}\n"
                        "gangSchedulingManagement: {schedulerProvider: volcano}\n")
    assert from_file.origins == {
        "webhook_port": f"webhook.port of {config}",
        "health": f"health.healthProbeBindAddress of {config}",
        "metrics_bind": f"metrics.bindAddress of {config}",
        "scheduler_provider": f"gangSchedulingManagement.schedulerProvider of {config}"}
    flags = options(tmp_path, "--webhook-port", "1", "--health-probe-bind-address", ":2",
                    "--metrics-bind-address", ":3", "--scheduler-provider", "volcano",
                    config="webhook: {port: 9444}\nmetrics: {bindAddress: ':9090'}\n")
    assert flags.origins == {
        "webhook_port": "--webhook-port", "health": "--health-probe-bind-address",
        "metrics_bind": "--metrics-bind-address", "scheduler_provider": "--scheduler-provider"}
    assert options(tmp_path, "--health-port", "5", "--health-probe-bind-address", ":2"
                   ).origins["health"] == "--health-port"  # the port comes from --health-port


@pytest.mark.parametrize(("flags", "config", "message"), [
    ((), "leaderElection: {leaseDurationx: 15s}\n", "leaderElection.leaseDurationx: unknown "
                                                    "field"),
    (("--leader-elect-renew-deadline", "20s"), None, "leaseDuration must be greater than "
                                                     "renewDeadline"),
    (("--leader-elect-resource-lock", "configmaps"), None, "--leader-elect-resource-lock: "
                                                           "unsupported resource lock"),
    (("--health-probe-bind-address", "nowhere"), None, "--health-probe-bind-address: invalid "
                                                       "bind address"),
    (("--kube-api-burst", "0"), None, "clientConnection.burst (--kube-api-burst)"),
])
def test_invalid_merges(tmp_path: Path, flags: tuple[str, ...], config: str | None,
                        message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        options(tmp_path, *flags, config=config)


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["run", *argv])
    return code, capsys.readouterr().err


def test_main_exits_2_naming_the_field(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(HEAD + "clientConnection: {qps: fast}\n")
    code, err = run_main(capsys, "--config", str(bad))
    assert code == 2
    assert err.strip() == (f"lws-operator: error: invalid configuration: {bad}: "
                           "clientConnection.qps: Input should be a valid number (got 'fast')")
    assert "Traceback" not in err
    code, err = run_main(capsys, "--config", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert "missing.yaml: cannot read the file" in err


@pytest.mark.parametrize("flags", [("--leader-elect=maybe",),
                                   ("--leader-elect-retry-period", "soon")])
def test_bad_flags_exit_2(flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", *flags])
    assert exc.value.code == 2
    assert flags[0].split("=")[0] in capsys.readouterr().err


def test_a_replica_is_not_ready_until_its_caches_are_synced() -> None:
    """The eviction webhook allows everything before the caches sync: the replica stays out of
    the Service until then (``add_cache_readiness``)."""
    from types import SimpleNamespace

    from lws_operator.__main__ import add_cache_readiness
    from lws_operator.admission.health import HealthServer

    health = HealthServer("127.0.0.1", 0)
    cache = SimpleNamespace(synced=False)
    add_cache_readiness(health, cache)
    assert health.failing() == ["caches-synced"]
    cache.synced = True
    assert health.failing() == []
