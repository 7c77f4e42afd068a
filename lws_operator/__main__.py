"""The ``lws-operator`` command line.

``lws-operator run`` is the operator process: the admission webhooks with self-managed
certificates and the health/metrics endpoint, all on one asyncio event loop, which the kopf-based
controllers join (they take the same ``stop`` event as kopf's ``stop_flag``). With leader election
(the default) every replica watches and serves webhooks, and only the Lease holder reconciles.
The controllers reconcile only once the webhooks serve, and wait for the LeaderWorkerSet CRD to
be served rather than exit without it; readiness (``/readyz``) names what is still awaited.

SIGTERM and SIGINT set ``stop``: reconcile passes in flight finish, registrations made in local
mode are removed, in-flight admissions finish, then the Lease is released (a standby takes over
within one retry period) and the process exits 0. A leader that cannot renew its Lease exits at
once with status 1 (see ``_leadership_lost``).

Settings come from ``--config`` (upstream's ``Configuration`` file) and flags; a flag set
explicitly wins (``lws_operator.options``). Every flag can also come from the environment:
``--webhook-port`` from ``LWS_WEBHOOK_PORT`` and so on; ``--kubeconfig`` from ``KUBECONFIG``;
``--namespace`` also from ``POD_NAMESPACE``.

Exit status: 0 after a graceful stop; 2 for an invalid flag or configuration file (one message
naming the field); 1 when the cluster lacks something the operator needs (its namespace, a
permission, Volcano's CRD with ``--scheduler-provider volcano``: one line naming it), when a
port cannot be bound (one line naming the flag: ``--health-port 8081: cannot listen on
0.0.0.0:8081: address already in use``), or when the leadership was lost.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

from lws_operator import __version__, flags
from lws_operator.api.constants import DEFAULT_WORKERS
from lws_operator.flags import env
from lws_operator.options import add_config_flags, load_config, resolve

if TYPE_CHECKING:
    from lws_operator.admission.fork import ForkedChild
    from lws_operator.options import RunOptions

# Record attributes that become fields of their own (set by kube.logcontext.ContextFilter for
# reconcile passes, or passed as ``extra=``).
_CONTEXT_FIELDS = ("lws", "group")


class _JsonFormatter(logging.Formatter):
    """One JSON object per line, the shape log pipelines ingest without parsing rules; lines
    from a reconcile pass carry ``lws`` (namespace/name) and, about one group, ``group``."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in _CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                entry[name] = str(value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


class _TextFormatter(logging.Formatter):
    """The human format, with the reconcile context appended as ``key=value``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = " ".join(f"{name}={getattr(record, name)}" for name in _CONTEXT_FIELDS
                           if getattr(record, name, None) is not None)
        return f"{text} [{context}]" if context else text


def _log_level(level: str, zap_level: str | None) -> str:
    """``--log-level``, unless the Go manager's ``--zap-log-level`` was given."""
    if zap_level is None:
        return level
    if zap_level.isdigit():
        return "debug" if int(zap_level) > 0 else "info"
    return {"warn": "warning", "dpanic": "error", "panic": "error", "fatal": "critical"}.get(
        zap_level.lower(), zap_level)


def _setup_logging(level: str, fmt: str) -> None:
    from lws_operator.kube.logcontext import ContextFilter

    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(_JsonFormatter() if fmt == "json" else _TextFormatter())
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)
    if logging.getLogger().level < logging.INFO:
        # Debug is for our own code: kopf's debug output is a line per watch event (the Go
        # manager's deployment passes --zap-log-level=2, which lands here).
        logging.getLogger("kopf").setLevel(logging.INFO)


def _add_run(sub: Any) -> None:
    """``run``'s flags; each defaults to its ``LWS_*`` variable, parsed after the command line
    (``lws_operator.flags``), so a bad value is one line naming both."""
    run = sub.add_parser("run", help="run the operator: controllers, webhooks and metrics")
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"),
                     help="kubeconfig file (default: in-cluster credentials, else $KUBECONFIG)")
    run.add_argument("--context", default=env("context"), help="kubeconfig context")
    run.add_argument("--namespace", default=env("namespace", "POD_NAMESPACE"),
                     help="the operator's namespace, home of the certificate Secret "
                          "(default: the pod's, else lws-system)")
    run.add_argument("--webhook-port", type=flags.port, default=env("webhook_port"),
                     help="HTTPS admission port (default: webhook.port of --config, 9443)")
    run.add_argument("--health-port", type=flags.port, default=env("health_port"),
                     help="plain HTTP /healthz and /readyz (default: the port of "
                          "--health-probe-bind-address, 8081)")
    run.add_argument("--bind-address", default=env("bind_address"),
                     help="listen address of both ports (default: the webhook host in local "
                          "mode, else all interfaces)")
    run.add_argument("--webhook-host", default=env("webhook_host"),
                     help="local mode: register the webhooks by URL https://HOST:PORT/<path> "
                          "(e.g. 127.0.0.1) instead of through the webhook Service")
    run.add_argument("--webhook-service", default=env("webhook_service"),
                     help="default: internalCertManagement.webhookServiceName of --config, "
                          "lws-webhook-service")
    run.add_argument("--webhook-secret", default=env("webhook_secret"),
                     help="default: internalCertManagement.webhookSecretName of --config, "
                          "lws-webhook-server-cert")
    run.add_argument("--mutating-webhook-configuration",
                     default=env("mutating_webhook_configuration")
                     or "lws-mutating-webhook-configuration")
    run.add_argument("--validating-webhook-configuration",
                     default=env("validating_webhook_configuration")
                     or "lws-validating-webhook-configuration")
    run.add_argument("--cert-validity", type=flags.duration,
                     default=env("cert_validity") or dt.timedelta(hours=8760),
                     help="serving certificate lifetime (a Go duration: 8760h); renewed at 2/3 "
                          "of it")
    run.add_argument("--ca-validity", type=flags.duration,
                     default=env("ca_validity") or dt.timedelta(hours=87600),
                     help="CA lifetime; rotated with an overlap at 2/3 of it")
    run.add_argument("--cert-sync-interval", type=flags.duration,
                     default=env("cert_sync_interval") or dt.timedelta(seconds=10),
                     help="longest wait before a failed certificate pass is retried (the "
                          "Secret and webhook configurations are watched, not polled)")
    run.add_argument("--cert-propagation-delay", type=flags.duration,
                     default=env("cert_propagation_delay") or dt.timedelta(seconds=30),
                     help="time API servers get to pick up a new caBundle before it is relied on")
    run.add_argument("--cert-management", choices=["self", "external"],
                     type=flags.one_of("self", "external"),
                     default=env("cert_management") or "self",
                     help="self: issue and rotate the webhook certificates in --webhook-secret "
                          "and inject the caBundles; external: serve what another tool "
                          "(cert-manager) keeps in that Secret, and write nothing")
    run.add_argument("--no-register-webhooks", dest="register_webhooks", action=flags.Switch,
                     const=False, default=env("register_webhooks"),
                     help="local mode: only inject the caBundle into configurations that "
                          "exist, instead of registering them (LWS_REGISTER_WEBHOOKS=false)")
    run.add_argument("--scheduler-provider", default=env("scheduler_provider"),
                     choices=["volcano"], type=flags.one_of("volcano"),
                     help="gang-scheduling provider for LeaderWorkerSets without spec.scheduling: "
                          "volcano (PodGroup annotation on pods, volcano PodGroups per group)")
    run.add_argument("--workers", type=flags.count(1), default=env("workers") or DEFAULT_WORKERS,
                     help="LeaderWorkerSets reconciled concurrently (a pass mostly waits on the "
                          "API server, so a burst of sets created or rolled out together "
                          "needs many at once)")
    run.add_argument("--kube-api-qps", type=flags.number, default=env("kube_api_qps"),
                     help="client-side limit on API requests per second (0: unlimited; "
                          "default: clientConnection.qps of --config, 500)")
    run.add_argument("--kube-api-burst", type=flags.count(0), default=env("kube_api_burst"),
                     help="requests allowed above --kube-api-qps in a burst (default: "
                          "clientConnection.burst of --config, 500)")
    run.add_argument("--rollout-stall-grace", type=flags.duration,
                     default=env("rollout_stall_grace") or dt.timedelta(seconds=60),
                     help="how long new-revision pods may stay unschedulable before a rollout "
                          "is reported stalled (Progressing=False, RolloutStalled)")
    run.add_argument("--disable-controllers", action=flags.Switch,
                     default=env("disable_controllers"),
                     help="serve admission only (no reconciliation)")
    # --- metrics server (upstream's flag names in cmd/main.go); --metrics-bind-address is
    # with the configuration flags ---
    run.add_argument("--metrics-secure", type=flags.boolean, nargs="?", const=True,
                     default=env("metrics_secure") or True,
                     help="HTTPS, each scrape checked with TokenReview and SubjectAccessReview "
                          "(get on /metrics); --metrics-secure=false: plain HTTP, no checks")
    run.add_argument("--metrics-cert-path", default=env("metrics_cert_path"),
                     help="directory with the metrics serving certificate (default: a "
                          "self-signed one generated at start)")
    run.add_argument("--metrics-cert-name", default=env("metrics_cert_name") or "tls.crt")
    run.add_argument("--metrics-cert-key", default=env("metrics_cert_key") or "tls.key")
    # --- end of metrics server flags ---
    run.add_argument("--log-level", type=flags.log_level, choices=flags.LOG_LEVELS,
                     default=env("log_level") or "info")
    run.add_argument("--log-format", choices=["json", "text"], type=flags.one_of("json", "text"),
                     default=env("log_format"),
                     help="default: json in a cluster, text elsewhere")
    add_config_flags(run)


def _leadership_lost() -> None:
    """The Lease could not be renewed in time: another replica may lead from now on. A pass in
    flight would go on writing next to the new leader, and cancelling it midway is not cleaner
    than ending the process, so end it at once (controller-runtime does the same): the restarted
    process rejoins as a candidate with fresh caches. Webhooks of this replica pause meanwhile;
    the others' keep serving."""
    logging.getLogger("lws_operator").critical("leader election lost: exiting")
    logging.shutdown()
    os._exit(1)


async def _preflight(kube: Any, args: argparse.Namespace, opts: RunOptions, namespace: str,
                     lease_namespace: str | None, webhooks: Any) -> str | None:
    """One line naming what the cluster lacks, or None. What the start can do without (the
    DisaggregatedSet controller's permissions) is logged as an error and the start goes on."""
    import aiohttp

    from lws_operator.kube.client import ApiException, status_message
    from lws_operator.kube.preflight import AdmissionNeeds, StartupError, check

    needs = AdmissionNeeds(
        secret=webhooks.secret_name, mutating=webhooks.mutating_configuration,
        validating=webhooks.validating_configuration,
        manage_certificates=webhooks.cert_management == "self",
        review_metrics=opts.metrics_bind is not None and args.metrics_secure)
    try:
        volcano = (opts.origins.get("scheduler_provider", "--scheduler-provider")
                   if opts.scheduler_provider == "volcano" else None)
        for notice in await check(kube, namespace=namespace,
                                  controllers=not args.disable_controllers,
                                  lease_namespace=lease_namespace, admission=needs,
                                  volcano=volcano):
            logging.getLogger("lws_operator").error("startup: %s", notice)
    except StartupError as exc:
        return "; ".join(exc.problems)
    except ApiException as exc:
        return f"the API server answered {exc.status} {status_message(exc)}"
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        return f"cannot reach the API server at {kube.host or '?'}: {exc or type(exc).__name__}"
    return None


async def _run(args: argparse.Namespace, opts: RunOptions,
               forked: ForkedChild | None = None) -> int:
    from lws_operator.admission.runtime import WebhookOptions
    from lws_operator.kube.client import KubeClient, in_cluster, in_cluster_namespace
    from lws_operator.kube.metrics import ClientMetrics, new_registry
    from lws_operator.kube.ratelimit import TokenBucket

    log = logging.getLogger("lws_operator")
    for notice in opts.notices:
        log.warning("configuration: %s", notice)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    namespace = args.namespace or in_cluster_namespace() or "lws-system"
    elect = opts.leader_elect and not args.disable_controllers
    lease_namespace = (opts.lease_namespace or namespace) if elect else None
    options = WebhookOptions(
        namespace=namespace, bind_address=opts.webhook_bind, port=opts.webhook_port,
        webhook_host=args.webhook_host, service_name=opts.webhook_service,
        secret_name=opts.webhook_secret,
        mutating_configuration=args.mutating_webhook_configuration,
        validating_configuration=args.validating_webhook_configuration,
        ca_validity=args.ca_validity, cert_validity=args.cert_validity,
        sync_interval=args.cert_sync_interval.total_seconds(),
        propagation_delay=args.cert_propagation_delay,
        scheduler_provider=opts.scheduler_provider,
        tls_min_version=opts.tls_min_version, tls_ciphers=opts.tls_ciphers,
        # internalCertManagement.enable: false in the configuration file means the same as
        # --cert-management=external (upstream: certificates come from cert-manager).
        cert_management="external" if not opts.internal_certs else args.cert_management,
        register_webhooks=args.register_webhooks,
        # Admissions are served from a process of their own, so that no reconcile pass delays
        # them (admission.process); it logs like this one.
        isolated=True, log_level=_log_level(args.log_level, args.zap_log_level),
        log_format=args.log_format or {"console": "text", "json": "json"}.get(
            args.zap_encoder or "", "json" if in_cluster() else "text"),
    )
    registry = new_registry()
    try:
        kube = await KubeClient.connect(
            args.kubeconfig, args.context,
            limiter=TokenBucket(opts.qps, opts.burst),
            metrics=ClientMetrics.for_registry(registry))
    except Exception as exc:  # the client library raises a variety of config errors
        log.error("startup error: cannot load the cluster credentials (%s): %s",
                  args.kubeconfig or "in-cluster", " ".join(str(exc).split()))
        return 1
    try:
        problem = await _preflight(kube, args, opts, namespace, lease_namespace, options)
        if problem is not None:
            log.error("startup error: %s", problem)
            return 1
        return await _serve(args, opts, kube, registry, options, stop, namespace,
                            lease_namespace, forked)
    finally:
        await kube.close()


async def _listen(opts: RunOptions, options: Any, webhooks: Any, health: Any,
                  metrics: Any) -> str | None:
    """Bind every port before anything else starts: the webhook port (listened on once its
    certificate is served), the health probes and the metrics. A port that is taken, or an
    address not on this host, is one line naming the setting that chose it
    (``--webhook-port 9443: cannot listen on 0.0.0.0:9443: address already in use``), or
    None. So is a metrics certificate that cannot be loaded from ``--metrics-cert-path``."""
    from lws_operator.admission.listener import ListenError

    def named(key: str, default: str, exc: ListenError) -> str:
        return f"{opts.origins.get(key, default)} {exc.port}: {exc}"

    try:
        await asyncio.to_thread(webhooks.reserve_port)  # a thread: getaddrinfo blocks
    except ListenError as exc:
        return named("webhook_port", "--webhook-port", exc)
    if health is not None:
        try:
            await health.start()
        except ListenError as exc:
            return named("health", "--health-port", exc)
    if metrics is None:
        return None
    try:
        await metrics.start()
    except ListenError as exc:
        return named("metrics_bind", "--metrics-bind-address", exc)
    except OSError as exc:  # ssl.SSLError is one too
        o = metrics.options
        if not o.cert_dir:
            raise
        return (f"--metrics-cert-path {o.cert_dir}: cannot load {o.cert_name} and "
                f"{o.key_name}: {exc.strerror or exc}")
    return None


def add_cache_readiness(health: Any, cache: Any) -> None:
    """Keep this replica out of the webhook Service until its watch caches are synced.

    The eviction webhook decides the group disruption budget from these caches and, knowing
    nothing before they are synced, allows every eviction (as a down webhook would). Behind the
    Service of several replicas (an operator rolling update, HA) a new replica that is ready on
    its certificates alone would so let evictions through while a synced one refuses them.
    The pod webhook needs no cache, so this costs it only the sync's few seconds at start,
    during which it is unavailable anyway until its certificate is loaded."""
    health.add_readiness_check("caches-synced", lambda: cache.synced)


async def _serve(args: argparse.Namespace, opts: RunOptions, kube: Any, registry: Any,
                 options: Any, stop: asyncio.Event, namespace: str,
                 lease_namespace: str | None, forked: ForkedChild | None = None) -> int:
    from lws_operator.admission.health import HealthServer
    from lws_operator.admission.metrics_server import metrics_server
    from lws_operator.admission.runtime import WebhookRuntime
    from lws_operator.kube.leaderelection import LeaderElector

    log = logging.getLogger("lws_operator")
    webhooks = WebhookRuntime(kube, options, registry=registry, forked=forked)
    health = None
    if opts.health is not None:
        health = HealthServer(opts.health[0], opts.health[1],
                              liveness_path=opts.liveness_path,
                              readiness_path=opts.readiness_path)
        # Not ready until the webhooks serve as the API server calls them
        # (``admission.runtime``); the controllers wait for the same.
        health.add_readiness_check("webhooks-serve", lambda: webhooks.serves_now)
        # The same checks as lws_operator_readiness_check{check}: what puts the replica in
        # the webhook Service's endpoints, for an alert on a webhook without any.
        from lws_operator.admission.metrics import ReadinessCollector

        checks = health.readiness
        registry.register(ReadinessCollector(lambda: checks))
    elector = None
    if lease_namespace is not None:
        elector = LeaderElector(kube, opts.lease_name, lease_namespace, timings=opts.timings,
                                registry=registry, on_lost=_leadership_lost)
    metrics = metrics_server(registry, kube, opts.metrics_bind, args.metrics_secure,
                             args.metrics_cert_path, args.metrics_cert_name,
                             args.metrics_cert_key, refresh=webhooks.refresh_metrics)
    try:
        problem = await _listen(opts, options, webhooks, health, metrics)
        if problem is not None:
            log.error("startup error: %s", problem)
            await webhooks.server.stop()  # the reserved webhook port
            return 1
        log.info(
            "lws-operator %s: namespace %s, %s, %s", __version__, namespace,
            f"local mode, webhooks at {options.base_url(options.port)}" if args.webhook_host
            else f"webhooks behind Service {options.service_name}",
            "controllers disabled" if args.disable_controllers
            else f"leader election on Lease {lease_namespace}/{opts.lease_name} as "
                 f"{elector.identity}" if elector is not None else "leader election off")
        tasks = [asyncio.create_task(webhooks.run(stop), name="webhooks")]
        if not args.disable_controllers:
            from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime

            controllers = ControllerRuntime(kube, ControllerOptions(
                workers=args.workers,
                stall_grace_seconds=args.rollout_stall_grace.total_seconds(),
                scheduler_provider=opts.scheduler_provider), registry,
                gate=elector.leading if elector is not None else None,
                admission=webhooks.serves)
            # The group disruption budget decides evictions from the controllers' caches
            # (watched on a standby replica too).
            from lws_operator.admission.eviction import ApiReservations, EvictionGuard

            webhooks.evictions.decider = EvictionGuard(
                controllers.cache, controllers.events, registry,
                store=ApiReservations(kube)).handle
            if health is not None:
                # Waited for, not a reason to exit (``kube.api_served``).
                health.add_readiness_check("leaderworkerset-api",
                                           lambda: controllers.api.served)
                add_cache_readiness(health, controllers.cache)
            tasks.append(asyncio.create_task(controllers.run(stop), name="controllers"))
            # Unmutated pods are recreated once the pod webhook serves them.
            webhooks.add_pod_webhook_listener(controllers.pod_webhook_changed)
            tasks.append(asyncio.create_task(webhooks.follow_pod_webhook(stop),
                                             name="pod-webhook"))
        # The elector keeps renewing until every pass has finished, then releases.
        release = asyncio.Event()
        electing = [asyncio.create_task(elector.run(release), name="leader-election")] \
            if elector is not None else []
        try:
            # Any part ending (an error, or stop) ends the process: stop the others, then
            # re-raise the first error.
            done, _ = await asyncio.wait([*tasks, *electing],
                                         return_when=asyncio.FIRST_COMPLETED)
            stop.set()
            await asyncio.gather(*tasks, return_exceptions=True)
            release.set()
            await asyncio.gather(*electing, return_exceptions=True)
            if elector is not None:
                await elector.release()
            for task in done:
                task.result()
        finally:
            stop.set()
            release.set()
        log.info("stopped")
    finally:
        if metrics is not None:
            await metrics.stop()
        if health is not None:
            await health.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = flags.Parser(
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
        from lws_operator.kube.arenas import limit_arenas, trim_freed_memory

        limit_arenas()  # before any thread allocates (kube.arenas), and for the child
        trim_freed_memory()
        from lws_operator.kube.extensions import skip_frozenlist_extension

        skip_frozenlist_extension()  # before aiohttp is imported (kube.extensions)
        # The admission child, forked while this process holds little more than what the
        # child serves with, and no thread or loop exists (``admission.fork``); it waits to be
        # started with the first certificate, and ends with this process.
        from lws_operator.admission.fork import fork_admission_child

        forked = fork_admission_child()
        try:
            return _run_command(args, forked)
        finally:
            if forked is not None:
                forked.discard()
    return 0


def _run_command(args: argparse.Namespace, forked: ForkedChild | None) -> int:
    """``run`` once its flags are read (and its admission child forked, ``forked``)."""
    from lws_operator.api.config import ConfigError
    from lws_operator.kube.client import in_cluster

    try:
        opts = resolve(args, load_config(args.config))
    except ConfigError as exc:
        print(f"lws-operator: error: invalid configuration: {exc}", file=sys.stderr)
        return 2
    fmt = args.log_format or {"console": "text", "json": "json"}.get(
        args.zap_encoder or "", "json" if in_cluster() else "text")
    _setup_logging(_log_level(args.log_level, args.zap_log_level), fmt)
    # uvloop (libuv, its TLS layer in Cython) runs the controllers' loop, and the admission
    # child's: asyncio's own loop and TLS layer, pure Python, were the largest part of the
    # admission process's CPU per request and a large one of the controllers' (``make
    # bench``). kopf's thread keeps asyncio's loop (``kube.watch``).
    import uvloop

    return uvloop.run(_run(args, opts, forked))


if __name__ == "__main__":
    sys.exit(main())
