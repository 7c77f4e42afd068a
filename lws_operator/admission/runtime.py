"""The admission side of the operator process, wired: certificates, listener and registration.

``__main__`` runs it next to the controllers on one event loop; tests and the latency benchmark run
it in-process against a real API server with the same code path.

**When the webhooks serve.** The controllers start reconciling only then (``WebhookRuntime.
serves``): a pod created before the pod webhook is registered is never mutated. The admission
listener runs in a child process (``admission.process``), and the parent knows that the child
confirmed each certificate; that alone does not say the API server can call it. So "serve"
means, checked in order: the certificate manager's watched objects say the webhooks are in place
(``WebhookCertManager.in_place_now``: a certificate served, the configurations registered or
injected with a CA; for certificates managed elsewhere, the configurations' caBundles as the
operator may read them), and a TLS connection to the listener, made as the API server makes
it (the host name it checks, each caBundle a configuration carries as the only trust), gets an
HTTP answer. The connection goes to the listener's own address, not through the webhook
Service: this replica is not behind the Service until it is ready, and it is ready only when
it serves. The check repeats until it passes (a few times at start); once passed it stays
passed, and readiness still follows the listener and its certificate.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import ipaddress
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from lws_operator.admission import registration
from lws_operator.admission.eviction import EvictionEndpoint
from lws_operator.admission.fork import ForkedChild
from lws_operator.admission.metrics import CertificateMetrics, WebhookMetrics
from lws_operator.admission.process import AdmissionProcess, ChildSettings
from lws_operator.api.constants import MUTATE_POD_PATH
from lws_operator.kube import cert_planner
from lws_operator.kube.cert_planner import PlannerFailed
from lws_operator.kube.certs import (
    CONFIG_PATHS,
    MUTATING,
    SECRET,
    CertSettings,
    WebhookCertManager,
)
from lws_operator.kube.client import ApiException, KubeClient, is_status
from lws_operator.kube.named_watch import NamedObject, until_stop
from lws_operator.logic.mutation import scope as webhook_scope
from lws_operator.logic.mutation.unmutated import POD_WEBHOOK
from lws_operator.logic.runtime import certs

if TYPE_CHECKING:  # the in-process server's modules: imported only when it runs (__init__)
    from lws_operator.admission.server import AdmissionServer, Observer, ServingTLS

log = logging.getLogger(__name__)

POD_WEBHOOK_CHECK = 1.0  # seconds between looks at the pod webhook (``follow_pod_webhook``)
# The serving check: its first retry, its longest wait between retries, and how long one TLS
# connection to the listener may take.
_SERVES_FIRST_RETRY = 0.05
_SERVES_LONGEST_RETRY = 0.25
_PROBE_TIMEOUT = 5.0
# After this many seconds without serving, what is missing is logged as a warning.
_SERVES_SLOW = 10.0


@dataclass(frozen=True)
class WebhookOptions:
    """Everything the admission side can be told (``lws-operator run`` flags map onto it)."""

    namespace: str = registration.OPERATOR_NAMESPACE
    bind_address: str = "0.0.0.0"  # in a pod the Service reaches us on the pod IP
    port: int = 9443
    # Local mode: the API server calls https://<webhook_host>:<port>/<path>, and (unless
    # register_webhooks is False: a second replica) we register the configurations ourselves.
    webhook_host: str | None = None
    register_webhooks: bool = True
    service_name: str = registration.WEBHOOK_SERVICE
    secret_name: str = "lws-webhook-server-cert"
    mutating_configuration: str = registration.MUTATING_CONFIGURATION
    validating_configuration: str = registration.VALIDATING_CONFIGURATION
    ca_validity: dt.timedelta = dt.timedelta(days=3650)
    cert_validity: dt.timedelta = dt.timedelta(days=365)
    sync_interval: float = 10.0
    propagation_delay: dt.timedelta = dt.timedelta(seconds=30)
    # Confine registered webhooks to these namespaces (tests on a shared cluster).
    only_namespaces: Sequence[str] = field(default=())
    scheduler_provider: str | None = None
    # The configuration's tls section: minimum version, OpenSSL cipher list for TLS 1.2.
    tls_min_version: str | None = None
    tls_ciphers: str | None = None
    # "self": we issue and rotate the certificates in the Secret and inject the caBundles.
    # "external": another tool (cert-manager) writes the Secret and the caBundles; we only
    # read the Secret's tls.crt/tls.key and serve them, and write nothing.
    cert_management: str = "self"
    # Serve admissions from a child process (``admission.process``), as ``lws-operator run``
    # does; in-process (tests, the benchmark's embedders) otherwise. The child logs as told.
    isolated: bool = False
    log_level: str = "info"
    log_format: str = "text"

    def policy(self) -> certs.CertPolicy:
        dns = list(certs.service_dns_names(self.service_name, self.namespace))
        ips: list[str] = []
        if self.webhook_host:
            try:
                ips.append(str(ipaddress.ip_address(self.webhook_host)))
            except ValueError:
                dns.insert(0, self.webhook_host)
        return certs.CertPolicy(
            dns_names=tuple(dns), ip_addresses=tuple(ips),
            ca_validity=self.ca_validity, cert_validity=self.cert_validity,
            propagation_delay=self.propagation_delay,
            # Every replica re-reads the Secret within one interval; leave room for two.
            reload_delay=self.propagation_delay + dt.timedelta(seconds=2 * self.sync_interval),
        )

    def server_name(self) -> str:
        """The host name the API server checks the certificate against: the URL's host in
        local mode, the Service's DNS name otherwise."""
        return self.webhook_host or f"{self.service_name}.{self.namespace}.svc"

    def probe_address(self) -> str:
        """Where this process reaches its own listener: the bind address, loopback for a
        wildcard."""
        host = self.bind_address or "0.0.0.0"
        return {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)

    def base_url(self, port: int) -> str:
        host = self.webhook_host or ""
        if ":" in host:
            host = f"[{host}]"
        return f"https://{host}:{port}"


class WebhookRuntime:
    """Serves admissions with a certificate from the Secret, from the first certificate on."""

    def __init__(
        self,
        kube: KubeClient,
        options: WebhookOptions,
        *,
        metrics: WebhookMetrics | None = None,
        observer: Observer | None = None,
        registry: CollectorRegistry | None = None,
        forked: ForkedChild | None = None,
    ) -> None:
        """In-process, ``metrics`` (made on ``registry`` if not given) and ``observer`` see
        each admission; isolated, the child's metrics are served from ``registry``, and the
        child is ``forked`` when ``lws-operator run`` forked it at its start."""
        self.options = options
        # The in-process server's TLS context (an isolated child has its own: None).
        self.tls: ServingTLS | None = None
        # The group disruption budget's path: allows every eviction until the controllers'
        # caches give it a guard (``admission.eviction``).
        self.evictions = EvictionEndpoint()
        self.server: AdmissionServer | AdmissionProcess
        if options.isolated:
            self.server = AdmissionProcess(ChildSettings(
                host=options.bind_address, port=options.port,
                scheduler_provider=options.scheduler_provider,
                tls_min_version=options.tls_min_version, tls_ciphers=options.tls_ciphers,
                log_level=options.log_level, log_format=options.log_format), registry, forked)
            self.server.on_eviction = self.evictions.handle
        else:
            # The webhooks' own modules (review, mutation, the HTTP server) load only in the
            # process that serves them: in-process here, else only the child imports them.
            from lws_operator.admission import review
            from lws_operator.admission.server import AdmissionServer, ServingTLS

            self.tls = ServingTLS(options.tls_min_version, options.tls_ciphers)
            if metrics is None and registry is not None:
                metrics = WebhookMetrics(registry)
            self.server = AdmissionServer(
                tls=self.tls, handlers=review.serving_handlers(options.scheduler_provider,
                                                               self.evictions.handle),
                host=options.bind_address, port=options.port, metrics=metrics,
                observer=observer)
        settings = CertSettings(
            namespace=options.namespace, policy=options.policy(),
            secret_name=options.secret_name,
            mutating_configuration=options.mutating_configuration,
            validating_configuration=options.validating_configuration,
            sync_interval=options.sync_interval,
        )
        external = options.cert_management == "external"
        register = (self._render if options.webhook_host and options.register_webhooks
                    and not external else None)
        self.certs = WebhookCertManager(kube, settings, self._serve_certificate, register)
        # Certificates from elsewhere (cert-manager): read and served, the Secret never written.
        self.external = (ExternalCertificates(kube, settings, self._serve_certificate)
                         if external else None)
        # Set once the listener serves a certificate from the Secret (never cleared).
        self.serving = asyncio.Event()
        # The served certificate's notAfter, whichever mode issued it.
        self.cert_metrics = CertificateMetrics(registry) if registry is not None else None
        # Told when ``pod_webhook`` changes (``follow_pod_webhook``).
        self._pod_webhook_listeners: list[Callable[[dict[str, Any] | None], None]] = []
        # Set once the webhooks serve as the API server calls them (the module docstring;
        # never cleared); ``why_not`` says what the last check lacked.
        self.serves = asyncio.Event()
        self.why_not = "not checked yet"

    @property
    def ready(self) -> bool:
        """Listening with a certificate from the Secret."""
        return self.server.listening and (self.external or self.certs).ready

    @property
    def serves_now(self) -> bool:
        """Readiness: the webhooks served once as the API server calls them, and the listener
        still serves a certificate from the Secret."""
        return self.serves.is_set() and self.ready

    async def in_place(self) -> str | None:
        """None if the webhooks serve now (the module docstring), else why not."""
        if not self.ready:
            return "the admission listener does not serve a certificate yet"
        if self.external is not None:
            bundles, problem = await self.external.in_place_now()
        else:
            bundles, problem = self.certs.in_place_now()
        if problem is not None:
            return problem
        trusted: list[bytes | None] = [*bundles] or [None]
        for bundle in trusted:
            problem = await self._answers(bundle)
            if problem is not None:
                return problem
        return None

    async def _answers(self, bundle: bytes | None) -> str | None:
        """Connect to the listener as the API server does, trusting only ``bundle`` (any
        certificate when None: a configuration without a caBundle relies on the system's
        trust, which this process need not share), and read one HTTP answer."""
        name = self.options.server_name()
        if bundle is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            try:
                ctx = ssl.create_default_context(cadata=bundle.decode())
            except (ssl.SSLError, ValueError) as exc:
                return f"a caBundle does not load: {exc}"
        host, port = self.options.probe_address(), self.server.port
        writer = None
        try:
            async with asyncio.timeout(_PROBE_TIMEOUT):
                reader, writer = await asyncio.open_connection(
                    host, port, ssl=ctx, server_hostname=name)
                writer.write(f"GET / HTTP/1.1\r\nHost: {name}\r\n"
                             "Connection: close\r\n\r\n".encode())
                line = await reader.readline()
        except ssl.SSLCertVerificationError as exc:
            return (f"the listener's certificate does not verify for {name} with the "
                    f"configured caBundle: {exc.verify_message}")
        except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
            return f"the listener at {host}:{port} does not answer over TLS: {exc!r}"
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(OSError, TimeoutError):
                    async with asyncio.timeout(_PROBE_TIMEOUT):
                        await writer.wait_closed()
        if not line.startswith(b"HTTP/1."):
            return f"the listener at {host}:{port} answered no HTTP response"
        return None

    async def _until_serving(self, stop: asyncio.Event) -> None:
        """Check until the webhooks serve, then set ``serves`` (once)."""
        delay = _SERVES_FIRST_RETRY
        loop = asyncio.get_running_loop()
        started = loop.time()
        warned = False
        while not stop.is_set():
            try:
                problem = await self.in_place()
            except ApiException as exc:  # reading the configurations (external mode)
                problem = f"reading the webhook configurations: {exc.status} {exc.reason}"
            except Exception as exc:  # a bug: retried all the same, the controllers wait
                problem = f"the serving check failed: {exc!r}"
                if problem != self.why_not:
                    log.exception("the serving check failed")
            if problem is None:
                self.why_not = ""
                self.serves.set()
                log.info("the webhooks serve (%s, checked over TLS with the configured CA) "
                         "after %.2fs", self.options.server_name(), loop.time() - started)
                return
            if problem != self.why_not:
                # A start's usual steps at debug level; a wait that lasts is worth a warning.
                slow = loop.time() - started >= _SERVES_SLOW
                log.log(logging.WARNING if slow else logging.DEBUG,
                        "the webhooks do not serve yet: %s", problem)
                self.why_not = problem
                warned = slow
            elif not warned and loop.time() - started >= _SERVES_SLOW:
                log.warning("the webhooks do not serve yet: %s", problem)
                warned = True
            await until_stop(stop, asyncio.sleep(delay))
            delay = min(delay * 2, _SERVES_LONGEST_RETRY)

    def _render(self, ca_bundle: bytes) -> list[dict[str, Any]]:
        o = self.options
        return registration.render(
            registration.UrlTarget(o.base_url(self.server.port)),
            ca_bundle=ca_bundle,
            mutating_name=o.mutating_configuration, validating_name=o.validating_configuration,
            only_namespaces=o.only_namespaces)

    def reserve_port(self) -> None:
        """Bind the webhook port now (``OSError`` if that fails); it is listened on once a
        certificate is served (:meth:`AdmissionServer.reserve`)."""
        self.server.reserve()

    async def _serve_certificate(self, cert: bytes, key: bytes) -> None:
        await self.server.serve(cert, key)
        self.serving.set()
        if self.cert_metrics is not None:
            # The planner's answer named it when the Secret's certificate is ours (no child).
            known = self.certs.planner.known_not_after(cert)
            try:
                self.cert_metrics.served(known if known is not None
                                         else await cert_planner.not_after(cert))
            except (PlannerFailed, OSError, ValueError, TimeoutError) as exc:
                # The metric keeps the last value (or none); the certificate is served anyway.
                log.warning("could not read the served certificate's expiry: %s", exc)

    async def refresh_metrics(self) -> None:
        """Before a scrape: fetch the admission process's metrics (nothing in-process)."""
        if isinstance(self.server, AdmissionProcess):
            await self.server.refresh()

    def pod_webhook(self) -> dict[str, Any] | None:
        """Our pod webhook's entry of the live MutatingWebhookConfiguration while it serves:
        the listener serves a certificate from the Secret, and the entry reaches this
        listener (our URL in local mode, our Service otherwise) with the Secret's CA as its
        caBundle (``logic.mutation.scope.pod_webhook_entry``). None otherwise, and always with
        certificates managed externally, where the configurations are not watched (nothing is
        then recreated: ``logic.mutation.recreation``)."""
        if not self.ready or self.external is not None:
            return None
        watched = self.certs.watched
        configuration = watched[MUTATING].obj
        ca_bundle = ((watched[SECRET].obj or {}).get("data") or {}).get(certs.CA_CERT_KEY)
        if configuration is None or not ca_bundle:
            return None
        o = self.options
        hook = webhook_scope.pod_webhook_entry(
            configuration, POD_WEBHOOK, ca_bundle=str(ca_bundle),
            url=(o.base_url(self.server.port) + MUTATE_POD_PATH) if o.webhook_host else None,
            service=None if o.webhook_host else (o.namespace, o.service_name))
        return None if hook is None else dict(hook)

    def add_pod_webhook_listener(self, listener: Callable[[dict[str, Any] | None], None],
                                 ) -> None:
        """Call ``listener`` with :meth:`pod_webhook` whenever it changes, while
        :meth:`follow_pod_webhook` runs (the controllers recreate unmutated pods then)."""
        self._pod_webhook_listeners.append(listener)

    async def follow_pod_webhook(self, stop: asyncio.Event,
                                 interval: float = POD_WEBHOOK_CHECK) -> None:
        """Until ``stop``: look at :meth:`pod_webhook` every ``interval`` seconds (what the
        certificate manager's watches and the listener hold already: no request) and tell the
        listeners when it changed."""
        seen: dict[str, Any] | None = None
        while not stop.is_set():
            hook = self.pod_webhook()
            if hook != seen:
                seen = hook
                log.info("pod webhook %s %s", POD_WEBHOOK,
                         "serves" if hook is not None else "does not serve")
                for listener in self._pod_webhook_listeners:
                    try:
                        listener(hook)
                    except Exception:
                        log.exception("a pod webhook listener failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), interval)

    async def run(self, stop: asyncio.Event) -> None:
        """Until ``stop``: keep certificates rotated and served. Then, in registration mode,
        unregister first (so the API server stops calling), and drain the listener."""
        checking = asyncio.create_task(self._until_serving(stop), name="webhooks-serve")
        try:
            await (self.external or self.certs).run(stop)
        finally:
            checking.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checking
            try:
                await self.certs.unregister()
            finally:
                await self.server.stop()


class ExternalCertificates:
    """Certificates that someone else manages (cert-manager's Certificate writes the Secret and
    its cainjector the caBundles): watch the Secret and serve its ``tls.crt``/``tls.key`` once
    they change. Nothing is written, so the operator needs only ``get``, ``list`` and ``watch``
    on that one Secret and nothing on the webhook configurations."""

    def __init__(self, kube: KubeClient, settings: CertSettings,
                 on_certificate: Callable[[bytes, bytes], Awaitable[None]]) -> None:
        self.kube = kube
        self.settings = settings
        self.on_certificate = on_certificate
        self.served: bytes | None = None
        self._waiting = False  # logged once until the Secret holds a certificate
        self.changed = asyncio.Event()
        self.secret = NamedObject(kube, f"/api/v1/namespaces/{settings.namespace}/secrets",
                                  settings.secret_name, self.changed.set)

    @property
    def ready(self) -> bool:
        return self.served is not None

    async def in_place_now(self) -> tuple[list[bytes], str | None]:
        """As ``WebhookCertManager.in_place_now``, for configurations someone else keeps: the
        caBundles of the configurations this process may read (cert-manager's cainjector
        writes them; one without a caBundle is not in place yet), else the Secret's
        ``ca.crt``. A configuration it may not read (the chart grants nothing on them in this
        mode) or that does not exist is not waited for."""
        if self.served is None:
            return [], "no webhook certificate served yet"
        bundles: dict[bytes, None] = {}
        for kind, name in self.settings.configurations().items():
            try:
                live = await self.kube.request("GET", f"{CONFIG_PATHS[kind]}/{name}")
            except ApiException as exc:
                if is_status(exc, 401, 403, 404):
                    continue
                raise
            for hook in live.get("webhooks") or []:
                encoded = (hook.get("clientConfig") or {}).get("caBundle")
                if not encoded:
                    return [], (f"{kind} {name}: webhook {hook.get('name')} has no caBundle "
                                "yet (cert-manager's cainjector writes it)")
                bundles[base64.b64decode(encoded)] = None
        secret = self.secret.obj
        ca = ((secret or {}).get("data") or {}).get(certs.CA_CERT_KEY)
        if not bundles and ca:
            bundles[base64.b64decode(ca)] = None
        return list(bundles), None

    async def sync(self) -> None:
        secret = self.secret.obj
        data = {k: base64.b64decode(v) for k, v in ((secret or {}).get("data") or {}).items()}
        cert, key = data.get(certs.TLS_CERT_KEY), data.get(certs.TLS_KEY_KEY)
        if not cert or not key:
            if not self._waiting:
                log.info("waiting for Secret %s/%s to hold tls.crt and tls.key",
                         self.settings.namespace, self.settings.secret_name)
            self._waiting = True
            return
        self._waiting = False
        if cert != self.served:
            await self.on_certificate(cert, key)
            self.served = cert
            log.info("serving the webhook certificate of Secret %s/%s (managed externally)",
                     self.settings.namespace, self.settings.secret_name)

    async def run(self, stop: asyncio.Event) -> None:
        """Serve the Secret's certificate whenever the watch brings a new one; a certificate
        that does not load is retried after the sync interval."""
        watch = asyncio.create_task(self.secret.run(), name=f"watch {self.secret.path}")
        try:
            while not stop.is_set():
                self.changed.clear()
                timeout = None
                if self.secret.synced.is_set():
                    try:
                        await self.sync()
                    except (ValueError, OSError) as exc:  # OSError: ssl.SSLError
                        log.warning("serving the webhook certificate Secret failed: %s", exc)
                        timeout = self.settings.sync_interval
                await until_stop(stop, self.changed.wait(), timeout=timeout)
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
