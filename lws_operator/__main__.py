"""The ``lws-operator`` command line.

``lws-operator run`` is the operator process: the admission webhooks with self-managed
certificates and the health/metrics endpoint, all on one asyncio event loop, which the kopf-based
controllers join (they take the same ``stop`` event as kopf's ``stop_flag``). SIGTERM and SIGINT
set ``stop``: registrations made in local mode are removed, in-flight admissions finish, and the
process exits 0.

Every flag can also come from the environment: ``--webhook-port`` from ``LWS_WEBHOOK_PORT`` and
so on; ``--kubeconfig`` from ``KUBECONFIG``; ``--namespace`` also from ``POD_NAMESPACE``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import re
import signal
import sys
from typing import Any

from lws_operator import __version__

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text: str) -> dt.timedelta:
    """``90d``, ``8760h``, ``1h30m``, ``2.5s``, ``500ms``, or plain seconds."""
    text = text.strip()
    try:
        return dt.timedelta(seconds=float(text))
    except ValueError:
        pass
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos != len(text) or not text:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90d, 8760h, 30s)")
    return dt.timedelta(seconds=total)


def _env(name: str, default: Any = None) -> Any:
    return os.environ.get("LWS_" + name.upper().replace("-", "_"), default)


class _JsonFormatter(logging.Formatter):
    """One JSON object per line, the shape log pipelines ingest without parsing rules."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def _add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="run the operator: controllers, webhooks and metrics")
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                     help="kubeconfig file (default: in-cluster credentials, else $KUBECONFIG)")
    run.add_argument("--context", default=_env("context"), help="kubeconfig context")
    run.add_argument("--namespace", default=_env("namespace", os.environ.get("POD_NAMESPACE")),
                     help="the operator's namespace, home of the certificate Secret "
                          "(default: the pod's, else lws-system)")
    run.add_argument("--webhook-port", type=int, default=int(_env("webhook_port", 9443)))
    run.add_argument("--health-port", type=int, default=int(_env("health_port", 8081)),
                     help="plain HTTP /healthz, /readyz and /metrics")
    run.add_argument("--bind-address", default=_env("bind_address"),
                     help="listen address of both ports (default: the webhook host in local "
                          "mode, else all interfaces)")
    run.add_argument("--webhook-host", default=_env("webhook_host"),
                     help="local mode: register the webhooks by URL https://HOST:PORT/<path> "
                          "(e.g. 127.0.0.1) instead of through the webhook Service")
    run.add_argument("--webhook-service", default=_env("webhook_service", "lws-webhook-service"))
    run.add_argument("--webhook-secret",
                     default=_env("webhook_secret", "lws-webhook-server-cert"))
    run.add_argument("--mutating-webhook-configuration",
                     default=_env("mutating_webhook_configuration",
                                  "lws-mutating-webhook-configuration"))
    run.add_argument("--validating-webhook-configuration",
                     default=_env("validating_webhook_configuration",
                                  "lws-validating-webhook-configuration"))
    run.add_argument("--cert-validity", type=parse_duration,
                     default=parse_duration(_env("cert_validity", "8760h")),
                     help="serving certificate lifetime; renewed at 2/3 of it")
    run.add_argument("--ca-validity", type=parse_duration,
                     default=parse_duration(_env("ca_validity", "87600h")),
                     help="CA lifetime; rotated with an overlap at 2/3 of it")
    run.add_argument("--cert-sync-interval", type=parse_duration,
                     default=parse_duration(_env("cert_sync_interval", "10s")),
                     help="how often each replica re-reads the certificate Secret")
    run.add_argument("--cert-propagation-delay", type=parse_duration,
                     default=parse_duration(_env("cert_propagation_delay", "30s")),
                     help="time API servers get to pick up a new caBundle before it is relied on")
    run.add_argument("--cert-management", choices=["self", "external"],
                     default=_env("cert_management", "self"),
                     help="self: issue and rotate the webhook certificates in --webhook-secret "
                          "and inject the caBundles; external: serve what another tool "
                          "(cert-manager) keeps in that Secret, and write nothing")
    run.add_argument("--no-register-webhooks", dest="register_webhooks", action="store_false",
                     default=_env("register_webhooks", "true") not in ("0", "false"),
                     help="local mode: only inject the caBundle into configurations that "
                          "exist, instead of registering them")
    run.add_argument("--scheduler-provider", default=_env("scheduler_provider"),
                     choices=["volcano"],
                     help="gang-scheduling provider for LeaderWorkerSets without spec.scheduling: "
                          "volcano (PodGroup annotation on pods, volcano PodGroups per group)")
    run.add_argument("--workers", type=int, default=int(_env("workers", 8)),
                     help="LeaderWorkerSets reconciled concurrently")
    run.add_argument("--kube-api-qps", type=float, default=float(_env("kube_api_qps", 50)),
                     help="client-side limit on API requests per second (0: unlimited)")
    run.add_argument("--kube-api-burst", type=int, default=int(_env("kube_api_burst", 100)),
                     help="requests allowed above --kube-api-qps in a burst")
    run.add_argument("--rollout-stall-grace", type=parse_duration,
                     default=parse_duration(_env("rollout_stall_grace", "60s")),
                     help="how long new-revision pods may stay unschedulable before a rollout "
                          "is reported stalled (Progressing=False, RolloutStalled)")
    run.add_argument("--disable-controllers", action="store_true",
                     default=_env("disable_controllers", "") in ("1", "true"),
                     help="serve admission only (no reconciliation)")
    run.add_argument("--log-level", default=_env("log_level", "info"))
    run.add_argument("--log-format", choices=["json", "text"], default=_env("log_format"),
                     help="default: json in a cluster, text elsewhere")


async def _run(args: argparse.Namespace) -> int:
    from lws_operator.admission.health import HealthServer
    from lws_operator.admission.metrics import WebhookMetrics
    from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
    from lws_operator.kube.client import KubeClient, in_cluster_namespace
    from lws_operator.kube.metrics import ClientMetrics, new_registry
    from lws_operator.kube.ratelimit import TokenBucket

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    namespace = args.namespace or in_cluster_namespace() or "lws-system"
    bind = args.bind_address or args.webhook_host or "0.0.0.0"  # all interfaces: in a pod
    options = WebhookOptions(
        namespace=namespace, bind_address=bind, port=args.webhook_port,
        webhook_host=args.webhook_host, service_name=args.webhook_service,
        secret_name=args.webhook_secret,
        mutating_configuration=args.mutating_webhook_configuration,
        validating_configuration=args.validating_webhook_configuration,
        ca_validity=args.ca_validity, cert_validity=args.cert_validity,
        sync_interval=args.cert_sync_interval.total_seconds(),
        propagation_delay=args.cert_propagation_delay,
        scheduler_provider=args.scheduler_provider,
        cert_management=args.cert_management,
        register_webhooks=args.register_webhooks,
    )
    registry = new_registry()
    kube = await KubeClient.connect(
        args.kubeconfig, args.context,
        limiter=TokenBucket(args.kube_api_qps, args.kube_api_burst),
        metrics=ClientMetrics.for_registry(registry))
    webhooks = WebhookRuntime(kube, options, metrics=WebhookMetrics(registry))
    health = HealthServer(bind, args.health_port, registry)
    health.add_readiness_check("webhook-certificates", lambda: webhooks.ready)
    try:
        await health.start()
        logging.getLogger("lws_operator").info(
            "lws-operator %s: namespace %s, %s", __version__, namespace,
            f"local mode, webhooks at {options.base_url(options.port)}" if args.webhook_host
            else f"webhooks behind Service {args.webhook_service}")
        tasks = [asyncio.create_task(webhooks.run(stop), name="webhooks")]
        if not args.disable_controllers:
            from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime

            controllers = ControllerRuntime(kube, ControllerOptions(
                workers=args.workers,
                stall_grace_seconds=args.rollout_stall_grace.total_seconds(),
                scheduler_provider=args.scheduler_provider), registry)
            tasks.append(asyncio.create_task(controllers.run(stop), name="controllers"))
        try:
            # Either side ending (an error, or stop) ends the process: stop the other, then
            # re-raise the first error.
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in done:
                task.result()
        finally:
            stop.set()
        logging.getLogger("lws_operator").info("stopped")
    finally:
        await health.stop()
        await kube.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lws-operator",
        description="A LeaderWorkerSet (leaderworkerset.x-k8s.io/v1) operator.",
    )
    parser.add_argument("--version", action="version", version=f"lws-operator {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version", help="print the version and exit")
    _add_run(sub)
    args = parser.parse_args(argv)
    if args.command == "version":
        print(f"lws-operator {__version__}")
        return 0
    if args.command == "run":
        from lws_operator.kube.client import in_cluster

        _setup_logging(args.log_level, args.log_format or ("json" if in_cluster() else "text"))
        return asyncio.run(_run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
