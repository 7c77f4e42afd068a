"""The admission side of the operator process, wired: certificates, listener and registration.

``__main__`` runs it next to the controllers on one event loop; tests and the latency benchmark run
it in-process against a real API server with the same code path.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import ipaddress
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.admission import registration, review
from lws_operator.admission.eviction import EvictionEndpoint
from lws_operator.admission.metrics import WebhookMetrics
from lws_operator.admission.process import AdmissionProcess, ChildSettings
from lws_operator.admission.server import AdmissionServer, Observer, ServingTLS
from lws_operator.api.constants import MUTATE_POD_PATH
from lws_operator.kube.certs import MUTATING, SECRET, CertSettings, WebhookCertManager
from lws_operator.kube.client import KubeClient
from lws_operator.kube.named_watch import NamedObject, until_stop
from lws_operator.logic import certs, webhook_scope
from lws_operator.logic.unmutated import POD_WEBHOOK

log = logging.getLogger(__name__)

POD_WEBHOOK_CHECK = 1.0  # seconds between looks at the pod webhook (``follow_pod_webhook``)


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
    ) -> None:
        """In-process, ``metrics`` (made on ``registry`` if not given) and ``observer`` see
        each admission; isolated, the child's metrics are served from ``registry``."""
        self.options = options
        # The in-process server's TLS context (an isolated child has its own).
        self.tls = ServingTLS(options.tls_min_version, options.tls_ciphers)
        # The group disruption budget's path: allows every eviction until the controllers'
        # caches give it a guard (``admission.eviction``).
        self.evictions = EvictionEndpoint()
        self.server: AdmissionServer | AdmissionProcess
        if options.isolated:
            self.server = AdmissionProcess(ChildSettings(
                host=options.bind_address, port=options.port,
                scheduler_provider=options.scheduler_provider,
                tls_min_version=options.tls_min_version, tls_ciphers=options.tls_ciphers,
                log_level=options.log_level, log_format=options.log_format), registry)
            self.server.on_eviction = self.evictions.handle
        else:
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
        # Told when ``pod_webhook`` changes (``follow_pod_webhook``).
        self._pod_webhook_listeners: list[Callable[[dict[str, Any] | None], None]] = []

    @property
    def ready(self) -> bool:
        """Listening with a certificate from the Secret."""
        return self.server.listening and (self.external or self.certs).ready

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

    async def refresh_metrics(self) -> None:
        """Before a scrape: fetch the admission process's metrics (nothing in-process)."""
        if isinstance(self.server, AdmissionProcess):
            await self.server.refresh()

    def pod_webhook(self) -> dict[str, Any] | None:
        """Our pod webhook's entry of the live MutatingWebhookConfiguration while it serves:
        the listener serves a certificate from the Secret, and the entry reaches this
        listener (our URL in local mode, our Service otherwise) with the Secret's CA as its
        caBundle (``logic.webhook_scope.pod_webhook_entry``). None otherwise, and always with
        certificates managed externally, where the configurations are not watched (nothing is
        then recreated: ``logic.recreation``)."""
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
        try:
            await (self.external or self.certs).run(stop)
        finally:
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
