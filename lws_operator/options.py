"""``lws-operator run`` settings: the configuration file and the command line, merged.

Precedence is upstream's (upstream's flags (cmd/main.go)): a flag overrides the file only if it was
set explicitly (on
the command line, or through its ``LWS_*`` environment variable); otherwise the file's value, or
the file format's default, applies. So a setting has one default, the ``Configuration``'s, whether
or not ``--config`` is given.

Settings this operator cannot honour as upstream does are never dropped silently: they end up in
``RunOptions.notices``, logged as warnings at startup (or, where ignoring them would be unsafe,
rejected with an error naming the field).

The file's models (``api.config``, pydantic) are imported when the file is read, not with the
flags: ``lws-operator run`` forks its admission child in between (``admission.fork``).
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lws_operator import flags
from lws_operator.api.constants import DEFAULT_LEASE_NAME
from lws_operator.flags import env
from lws_operator.logic.runtime.leaderelection import Timings

if TYPE_CHECKING:
    from lws_operator.api import config as cfg

__all__ = ["RunOptions", "add_config_flags", "load_config", "resolve"]


def add_config_flags(run: argparse.ArgumentParser) -> None:
    """The flags that override the configuration file (upstream's names), each defaulting to
    its environment variable (parsed after the command line: ``lws_operator.flags``) or else
    to "not set"."""
    run.add_argument("--config", default=env("config"), metavar="FILE",
                     help="a config.lws.x-k8s.io/v1alpha1 Configuration file; flags set "
                          "explicitly override it")
    run.add_argument("--leader-elect", nargs="?", const=True, type=flags.boolean,
                     default=env("leader_elect"),
                     help="elect a leader with a Lease; only the leader reconciles "
                          "(default: true; --leader-elect=false turns it off)")
    for name, default in (("lease-duration", "15s"), ("renew-deadline", "10s"),
                          ("retry-period", "2s")):
        run.add_argument(f"--leader-elect-{name}", type=flags.duration,
                         default=env(f"leader_elect_{name}"),
                         help=f"leader election {name.replace('-', ' ')} (default {default})")
    run.add_argument("--leader-elect-resource-lock", default=env("leader_elect_resource_lock"),
                     help="the lock kind; only 'leases' (the default) is supported")
    run.add_argument("--leader-elect-resource-name", default=env("leader_elect_resource_name"),
                     help=f"the Lease's name (default {DEFAULT_LEASE_NAME})")
    run.add_argument("--leader-elect-resource-namespace",
                     default=env("leader_elect_resource_namespace"),
                     help="the Lease's namespace (default: the operator namespace)")
    run.add_argument("--metrics-bind-address", default=env("metrics_bind_address"),
                     help="listen address of /metrics: HOST:PORT, :PORT for all interfaces, "
                          "0 to serve no metrics (default: metrics.bindAddress of --config, "
                          ":8443)")
    run.add_argument("--health-probe-bind-address", default=env("health_probe_bind_address"),
                     help="[host]:port of the health probes (default :8081)")
    run.add_argument("--zap-log-level", type=flags.zap_log_level, default=None,
                     help="accepted for compatibility with the Go manager's flags: debug, info, "
                          "error, or a number (>0 means debug)")
    run.add_argument("--zap-encoder", choices=["json", "console"], default=None,
                     help="accepted for compatibility: json or console (text) logs")


@dataclass(frozen=True)
class RunOptions:
    """What ``run`` does, merged from the file and the flags."""

    webhook_port: int
    webhook_bind: str
    health: tuple[str, int] | None
    liveness_path: str
    readiness_path: str
    serve_metrics: bool
    # metrics.bindAddress / --metrics-bind-address as (host, port), the host "" for every
    # interface; None: "0" (disabled).
    metrics_bind: tuple[str, int] | None
    qps: float
    burst: int
    webhook_service: str
    webhook_secret: str
    scheduler_provider: str | None
    leader_elect: bool
    lease_name: str
    lease_namespace: str | None  # None: the operator namespace
    timings: Timings
    internal_certs: bool
    tls_min_version: str | None
    tls_ciphers: str | None
    notices: tuple[str, ...] = field(default=())
    # Where the user set a value, as a message should name it: "--webhook-port", or
    # "webhook.port of config.yaml" when it came from the file (keys: "webhook_port",
    # "health", "metrics_bind", "scheduler_provider"). A value left at its default is named
    # by the flag that would change it.
    origins: Mapping[str, str] = field(default_factory=dict)


def load_config(path: str | None) -> cfg.LoadedConfiguration | None:
    """The file at ``path`` (``ConfigError`` if unreadable or invalid), or None."""
    from lws_operator.api import config as cfg

    if not path:
        return None
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise cfg.ConfigError(path, [f"cannot read the file: {exc.strerror or exc}"]) from None
    return cfg.load(text, path)


def _seconds(value: dt.timedelta) -> float:
    return value.total_seconds()


def _named(flag: str, value: Any) -> str:
    """The flag, and its environment variable when the value came from there."""
    return f"{flag} ({value.variable})" if isinstance(value, flags.EnvValue) else flag


def _pick(flag: Any, value: Any) -> Any:
    """The flag's value if it was set, else the file's (or the file format's default)."""
    return value if flag is None else flag


def resolve(args: argparse.Namespace, loaded: cfg.LoadedConfiguration | None) -> RunOptions:
    """Merge; ``ConfigError`` (naming the flag or field) when the merge is invalid."""
    from lws_operator.api import config as cfg

    c = loaded.config if loaded is not None else cfg.Configuration()
    explicit = loaded.explicit if loaded is not None else frozenset()
    source = str(getattr(args, "config", None) or "flags")
    notices: list[str] = []
    if loaded is not None and loaded.legacy:
        notices.append(f"{source}: uses the stale sample format ({cfg.LEGACY_API_VERSION} with "
                       f"spec); write apiVersion {cfg.API_VERSION} with the settings at the top "
                       "level, as the Go manager requires")

    # Webhook server.
    webhook_port = _pick(args.webhook_port, c.webhook.port)
    webhook_bind = args.bind_address or c.webhook.host or args.webhook_host or "0.0.0.0"
    if "webhook.certDir" in explicit:
        notices.append(f"webhook.certDir ({c.webhook.certDir}) is not used: certificates are "
                       "read from the Secret and served from memory, never written to disk")

    # Health probes (/metrics has a server of its own: admission.metrics_server).
    health = _health(args, c)
    metrics = _bind_address("--metrics-bind-address", args.metrics_bind_address,
                            c.metrics.bindAddress)

    # Client.
    qps = _pick(args.kube_api_qps, c.clientConnection.qps)
    burst = _pick(args.kube_api_burst, c.clientConnection.burst)
    if qps > 0 and burst < 1:
        raise cfg.ConfigError(source, ["clientConnection.burst (--kube-api-burst): must be at "
                                       "least 1 when qps is above 0"])

    # Certificates.
    icm = c.internalCertManagement
    webhook_service = _pick(args.webhook_service,
                            icm.webhookServiceName or "lws-webhook-service")
    webhook_secret = _pick(args.webhook_secret,
                           icm.webhookSecretName or "lws-webhook-server-cert")

    # Gang scheduling.
    provider = c.gangSchedulingManagement.schedulerProvider \
        if c.gangSchedulingManagement is not None else None
    provider = _pick(args.scheduler_provider, provider)

    leader_elect, timings = _leader_election(args, c.leaderElection, explicit, source, notices)

    tls = c.tls or cfg.TLSOptions()
    return RunOptions(
        webhook_port=webhook_port, webhook_bind=webhook_bind, health=health,
        liveness_path=c.health.livenessEndpointName,
        readiness_path=c.health.readinessEndpointName, serve_metrics=metrics is not None,
        metrics_bind=metrics,
        qps=float(qps), burst=int(burst), webhook_service=webhook_service,
        webhook_secret=webhook_secret, scheduler_provider=provider, leader_elect=leader_elect,
        lease_name=_pick(args.leader_elect_resource_name, c.leaderElection.resourceName),
        lease_namespace=args.leader_elect_resource_namespace or None, timings=timings,
        internal_certs=icm.enable, tls_min_version=tls.minVersion,
        tls_ciphers=tls.openssl_ciphers(), notices=tuple(notices),
        origins=_origins(args, explicit, source))


def _bind_address(flag: str, flag_value: Any, value: str) -> tuple[str, int] | None:
    """``flag``'s address if it was set, else the file's, parsed (``cfg.parse_bind_address``);
    ``ConfigError`` naming the flag (and its variable) when it is not one."""
    from lws_operator.api import config as cfg

    try:
        return cfg.parse_bind_address(_pick(flag_value, value))
    except ValueError as exc:
        raise cfg.ConfigError(_named(flag, flag_value), [str(exc)]) from None


def _health(args: argparse.Namespace, c: cfg.Configuration) -> tuple[str, int] | None:
    """Where the health probes listen: ``--health-port`` overrides the port of the probe
    address, ``--bind-address`` (else the webhook host) its host; None when disabled."""
    probe = _bind_address("--health-probe-bind-address", args.health_probe_bind_address,
                          c.health.healthProbeBindAddress)
    if probe is not None:
        host, port = probe
        return (args.bind_address or host or args.webhook_host or "0.0.0.0",
                args.health_port if args.health_port is not None else port)
    if args.health_port is not None:
        return (args.bind_address or args.webhook_host or "0.0.0.0", args.health_port)
    return None


def _leader_election(args: argparse.Namespace, le: cfg.LeaderElection,
                     explicit: frozenset[str], source: str,
                     notices: list[str]) -> tuple[bool, Timings]:
    """Whether to elect a leader, and the Lease's timings (checked only when electing); a
    notice when the file's ``resourceNamespace`` is ignored."""
    from lws_operator.api import config as cfg

    lock = _pick(args.leader_elect_resource_lock, le.resourceLock)
    if lock != "leases":
        raise cfg.ConfigError("--leader-elect-resource-lock",
                              [f"unsupported resource lock {lock!r}: only \"leases\" is "
                               "supported"])
    if "leaderElection.resourceNamespace" in explicit and le.resourceNamespace:
        notices.append(f"leaderElection.resourceNamespace ({le.resourceNamespace}) is ignored, "
                       "as by the Go manager: the Lease lives in the operator namespace "
                       "(--leader-elect-resource-namespace overrides it)")
    timings = Timings(
        lease_duration=_seconds(_pick(args.leader_elect_lease_duration, le.leaseDuration)),
        renew_deadline=_seconds(_pick(args.leader_elect_renew_deadline, le.renewDeadline)),
        retry_period=_seconds(_pick(args.leader_elect_retry_period, le.retryPeriod)))
    leader_elect = bool(_pick(args.leader_elect, le.leaderElect))
    if leader_elect:
        try:
            timings.validate()
        except ValueError as exc:
            raise cfg.ConfigError(source, [
                f"leader election timings (--leader-elect-lease-duration/-renew-deadline/"
                f"-retry-period, leaderElection.*): {exc}"]) from None
    return leader_elect, timings


def _origins(args: argparse.Namespace, explicit: frozenset[str],
             source: str) -> dict[str, str]:
    """``RunOptions.origins``: for each value a message may name, the flag, or the file's
    field when only the file set it."""

    def origin(flag: str, flag_value: Any, key: str) -> str:
        """``flag`` unless only the file's ``key`` set the value."""
        return f"{key} of {source}" if flag_value is None and key in explicit else flag

    health_origin = "--health-port"  # set, or the default: the flag to change it with
    if args.health_port is None and (args.health_probe_bind_address is not None
                                     or "health.healthProbeBindAddress" in explicit):
        health_origin = origin("--health-probe-bind-address", args.health_probe_bind_address,
                               "health.healthProbeBindAddress")
    return {
        "webhook_port": origin("--webhook-port", args.webhook_port, "webhook.port"),
        "health": health_origin,
        "metrics_bind": origin("--metrics-bind-address", args.metrics_bind_address,
                               "metrics.bindAddress"),
        "scheduler_provider": origin("--scheduler-provider", args.scheduler_provider,
                                     "gangSchedulingManagement.schedulerProvider"),
    }
