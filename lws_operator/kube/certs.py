"""Self-managed webhook certificates: the Secret, the served certificate and the caBundles.

Every replica runs :class:`WebhookCertManager`. It watches the Secret and both webhook
configurations (``kube.named_watch``: one listing each, then nothing while nothing changes, so
the operator at rest makes no request for its certificates). A pass runs whenever one of them
changes, and when the clock alone changes the plan (a renewal falls due): it asks
``logic.runtime.certs.plan`` for the next rotation step from the watched copies (in a short-lived
process, ``kube.cert_planner``, so that ``cryptography`` never loads into the operator), writes
it (creating the Secret if absent; a replace preconditioned on resourceVersion otherwise, so when
replicas race exactly one write wins and the others re-plan from it, after one GET of what won),
loads the Secret's serving certificate into the live listener, and copies the Secret's ``ca.crt``
into every webhook's caBundle. Another replica's rotation, a caBundle edited or a configuration
deleted is seen through the watch and acted on at once.

The Secret is the source of truth; nothing is kept between passes but what is being served.

Two modes:

* Service mode (in-cluster): the configurations are installed by Helm or ``webhooks/``; we only
  write caBundles into the webhooks that exist.
* Registration mode (``--webhook-host``, an operator outside the cluster): we own the
  configurations and write them whole, with URL client configs, and remove them on shutdown so
  a stopped dev operator does not block every LeaderWorkerSet pod.

Injection is fenced by a generation counter (``logic.runtime.certs.fence_allows``): a replica
holding an older Secret can never put an older bundle back.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.kube.cert_planner import OutOfProcessPlanner, PlannerFailed
from lws_operator.kube.client import ApiException, KubeClient, is_status
from lws_operator.kube.named_watch import NamedObject, NamedObjects, until_stop
from lws_operator.logic.runtime import certs

log = logging.getLogger(__name__)

GENERATION_ANNOTATION = "lws-operator.dev/ca-bundle-generation"
MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
_CONFIG_PATHS = {
    MUTATING: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    VALIDATING: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}
CONFIG_PATHS = _CONFIG_PATHS
_MAX_CONFLICTS = 5

SECRET = "Secret"
# A plan's next step may be years away: wake at least daily all the same (a suspended host).
_LONGEST_WAIT = 86400.0


class Conflict(Exception):
    """A write of ``watched`` lost a race (409): re-read it, plan again."""

    def __init__(self, watched: NamedObject) -> None:
        super().__init__(watched.path)
        self.watched = watched


# Given the CA bundle, the complete configuration objects to register (registration mode).
Registrar = Callable[[bytes], list[dict[str, Any]]]
# Called with (tls.crt, tls.key) whenever the Secret holds a certificate we do not serve yet.
CertificateSink = Callable[[bytes, bytes], Awaitable[None]]


@dataclass(frozen=True)
class CertSettings:
    namespace: str
    policy: certs.CertPolicy
    secret_name: str = "lws-webhook-server-cert"
    mutating_configuration: str = "lws-mutating-webhook-configuration"
    validating_configuration: str = "lws-validating-webhook-configuration"
    # The longest wait between retries of a failed pass; the rotation plan also allows two of
    # them for every replica to load a new certificate (``WebhookOptions.policy``). Passes at
    # rest are driven by the watches and the plan's clock, never by this interval.
    sync_interval: float = 10.0

    def configurations(self) -> dict[str, str]:
        return {MUTATING: self.mutating_configuration, VALIDATING: self.validating_configuration}


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _decode(secret: Mapping[str, Any] | None) -> dict[str, bytes] | None:
    if secret is None:
        return None
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def _generation(obj: Mapping[str, Any] | None) -> int | None:
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    return certs.parse_generation(annotations.get(GENERATION_ANNOTATION))


def _contains(live: Any, desired: Any) -> bool:
    """Whether ``live`` has everything ``desired`` sets (the server adds defaults of its own)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(
            k in live and _contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return isinstance(live, list) and len(live) == len(desired) and all(
            _contains(a, b) for a, b in zip(live, desired, strict=True))
    return bool(live == desired)


class WebhookCertManager:
    """Keeps the Secret rotated, the listener serving it and the caBundles injected."""

    def __init__(
        self,
        kube: KubeClient,
        settings: CertSettings,
        on_certificate: CertificateSink,
        register: Registrar | None = None,
        clock: Callable[[], dt.datetime] = _utcnow,
        planner: OutOfProcessPlanner | None = None,
    ) -> None:
        self.kube = kube
        self.planner = planner or OutOfProcessPlanner()
        self.settings = settings
        self.on_certificate = on_certificate
        self.register = register
        self.clock = clock
        self.served: bytes | None = None
        self.last_plan: certs.Plan | None = None
        self.watched = NamedObjects({
            SECRET: NamedObject(kube, self._secrets_path, settings.secret_name),
            **{kind: NamedObject(kube, _CONFIG_PATHS[kind], name)
               for kind, name in settings.configurations().items()}})

    @property
    def ready(self) -> bool:
        """A certificate from the Secret is being served."""
        return self.served is not None

    def in_place_now(self) -> tuple[list[bytes], str | None]:
        """Whether the webhooks are in place as far as the watched objects say: a certificate
        from the Secret served, and the configurations trusting a CA. In registration mode
        both configurations must exist as registered (our URL, the Secret's CA); otherwise
        those that exist must carry a caBundle (one we inject; whoever installs them may
        have put another, which the caller's handshake then rejects), and those that do not
        exist are not ours to wait for.

        Returns the caBundles the API server will verify the served certificate with (the
        Secret's ``ca.crt`` when no configuration exists) and None; or no bundle and the
        reason the webhooks are not in place yet."""
        if self.served is None:
            return [], "no webhook certificate served yet"
        data = _decode(self.watched[SECRET].obj) or {}
        secret_bundle = data.get(certs.CA_CERT_KEY)
        bundles: dict[bytes, None] = {}
        for kind, name in self.settings.configurations().items():
            live = self.watched[kind].obj
            if self.register is not None:
                if live is None:
                    return [], f"{kind} {name} is not registered yet"
                if secret_bundle is None or not _contains(
                        live.get("webhooks"),
                        next(o for o in self.register(secret_bundle)
                             if o["kind"] == kind)["webhooks"]):
                    return [], f"{kind} {name} is not registered with the current CA yet"
            if live is None:
                continue
            for hook in live.get("webhooks") or []:
                encoded = (hook.get("clientConfig") or {}).get("caBundle")
                if not encoded:
                    return [], f"{kind} {name}: webhook {hook.get('name')} has no caBundle yet"
                bundles[base64.b64decode(encoded)] = None
        if not bundles and secret_bundle:
            bundles[secret_bundle] = None
        return list(bundles), None

    # ------------------------------------------------------------------------------ paths

    @property
    def _secrets_path(self) -> str:
        return f"/api/v1/namespaces/{self.settings.namespace}/secrets"

    @property
    def _secret_path(self) -> str:
        return f"{self._secrets_path}/{self.settings.secret_name}"

    def _config_path(self, kind: str) -> str:
        return f"{_CONFIG_PATHS[kind]}/{self.settings.configurations()[kind]}"

    # ------------------------------------------------------------------------------ a pass

    async def sync(self) -> certs.Plan:
        """One pass over the watched objects (listed first if the watches have not started:
        a caller outside ``run``); after a lost write race, re-plans from a fresh read of what
        won."""
        self.watched.start()
        await self.watched.synced()
        for _ in range(_MAX_CONFLICTS):
            try:
                return await self._sync_once()
            except Conflict as exc:
                log.debug("conflict while rotating webhook certificates; re-reading %s",
                          exc.watched.path)
                await exc.watched.refresh()
        raise RuntimeError(f"webhook certificates: {_MAX_CONFLICTS} write conflicts in a row")

    async def _write(self, key: str, method: str, path: str, body: dict[str, Any],
                     ) -> dict[str, Any]:
        """One write of a watched object; its answer is stored at once (the next pass must not
        wait for the watch's echo), a 409 becomes ``Conflict``."""
        watched = self.watched[key]
        try:
            answer = await self.kube.request(method, path, body=body)
        except ApiException as exc:
            if is_status(exc, 409):
                raise Conflict(watched) from exc
            raise
        watched.store(answer, notify=False)
        return answer

    async def _sync_once(self) -> certs.Plan:
        secret = copy.deepcopy(self.watched[SECRET].obj)
        configs = {kind: copy.deepcopy(self.watched[kind].obj)
                   for kind in self.settings.configurations()}
        data = _decode(secret)
        injected = self._injected(configs, (data or {}).get(certs.CA_CERT_KEY))
        plan = await self.planner.plan(data, now=self.clock(), policy=self.settings.policy,
                                       bundle_injected=injected)
        self.last_plan = plan
        if plan.data is not None:
            newest = max((_generation(c) or 0 for c in configs.values()), default=0)
            secret = await self._write_secret(secret, plan, newest)
            data = plan.data
            log.info("webhook certificates: %s", plan.reason)
        assert data is not None
        assert secret is not None
        if data[certs.TLS_CERT_KEY] != self.served:
            await self.on_certificate(data[certs.TLS_CERT_KEY], data[certs.TLS_KEY_KEY])
            self.served = data[certs.TLS_CERT_KEY]
            log.info("serving the webhook certificate of Secret %s/%s",
                     self.settings.namespace, self.settings.secret_name)
        generation = _generation(secret) or 0
        for kind, live in configs.items():
            await self._inject(kind, live, data[certs.CA_CERT_KEY], generation)
        return plan

    def _injected(self, configs: Mapping[str, dict[str, Any] | None], bundle: bytes | None,
                  ) -> bool:
        """Whether every webhook that exists trusts exactly ``bundle``."""
        if bundle is None:
            return False
        want = base64.b64encode(bundle).decode()
        for live in configs.values():
            if live is None:
                if self.register is not None:
                    return False  # ours to create: not there means not injected
                continue
            for hook in live.get("webhooks") or []:
                if (hook.get("clientConfig") or {}).get("caBundle") != want:
                    return False
        return True

    async def _write_secret(self, secret: dict[str, Any] | None, plan: certs.Plan,
                            newest_injected: int) -> dict[str, Any]:
        """Create or replace the Secret with ``plan.data``. A new bundle gets a generation above
        every one seen, also those in the configurations: a Secret deleted or replaced by an
        installer starts again from nothing, and its bundle must still pass the fence."""
        assert plan.data is not None
        encoded = {k: base64.b64encode(v).decode() for k, v in plan.data.items()}
        generation = _generation(secret) or 0
        if plan.ca_changed:
            generation = max(generation, newest_injected) + 1
        if secret is None:
            created: dict[str, Any] = {
                "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": self.settings.secret_name,
                             "namespace": self.settings.namespace,
                             "annotations": {GENERATION_ANNOTATION: str(generation)}},
                "data": encoded,
            }
            return await self._write(SECRET, "POST", self._secrets_path, created)
        body = copy.deepcopy(secret)
        body["data"] = {**(body.get("data") or {}), **encoded}
        meta = body["metadata"]
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               GENERATION_ANNOTATION: str(generation)}
        # The body carries metadata.resourceVersion: a concurrent writer makes this a 409.
        return await self._write(SECRET, "PUT", self._secret_path, body)

    async def _inject(self, kind: str, live: dict[str, Any] | None, bundle: bytes,
                      generation: int) -> None:
        if live is not None and not certs.fence_allows(generation, _generation(live)):
            return  # a replica with a newer Secret already wrote a newer bundle
        want = base64.b64encode(bundle).decode()
        if self.register is not None:
            desired = next(o for o in self.register(bundle) if o["kind"] == kind)
            desired["metadata"]["name"] = self.settings.configurations()[kind]
            if live is not None and _generation(live) == generation and _contains(
                    live.get("webhooks"), desired["webhooks"]):
                return
            desired["metadata"].setdefault("annotations", {})[GENERATION_ANNOTATION] = str(
                generation)
            # We own these objects in this mode: replace them whole (whatever another tool put
            # there, e.g. the Service-based manifests), preconditioned on resourceVersion.
            if live is None:
                await self._write(kind, "POST", _CONFIG_PATHS[kind], desired)
            else:
                desired["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
                await self._write(kind, "PUT", self._config_path(kind), desired)
            log.info("registered %s %s", kind, desired["metadata"]["name"])
            return
        if live is None:
            return
        hooks = live.get("webhooks") or []
        if _generation(live) == generation and all(
                (h.get("clientConfig") or {}).get("caBundle") == want for h in hooks):
            return
        body = copy.deepcopy(live)
        for hook in body.get("webhooks") or []:
            hook.setdefault("clientConfig", {})["caBundle"] = want
        body["metadata"].setdefault("annotations", {})[GENERATION_ANNOTATION] = str(generation)
        await self._write(kind, "PUT", self._config_path(kind), body)
        log.info("injected the CA bundle into %s %s", kind, live["metadata"]["name"])

    # ---------------------------------------------------------------------------- lifecycle

    def _delay(self, plan: certs.Plan) -> float:
        """How long the clock alone leaves the plan unchanged; the watches announce any other
        change. A wait of years is cut to a day, so a suspended host or a clock step is
        noticed within one."""
        if plan.data is not None:
            return 0.0  # progress was made: the next step may be due already
        until = (plan.next_check - self.clock()).total_seconds()
        return max(0.0, min(until, _LONGEST_WAIT))

    async def run(self, stop: asyncio.Event) -> None:
        """Pass after pass until ``stop`` is set: after a change of a watched object, or when
        the plan's clock says so. Errors are logged and retried with backoff."""
        backoff = 0.5
        changed = self.watched.changed
        self.watched.start()
        try:
            await until_stop(stop, self.watched.synced())
            while not stop.is_set():
                changed.clear()
                try:
                    delay = self._delay(await self.sync())
                    backoff = 0.5
                except Exception as exc:
                    # An API error, an OSError (the API server unreachable, the webhook port
                    # taken) or a planner child that died is an outage to report in one line,
                    # retried; only anything else is a bug worth its traceback.
                    log.warning("webhook certificate pass failed: %s", exc, exc_info=not isinstance(
                        exc, (ApiException, OSError, PlannerFailed)))
                    delay = min(backoff, self.settings.sync_interval)
                    backoff = min(backoff * 2, 30.0)
                if delay == 0.0:
                    continue
                await until_stop(stop, changed.wait(), timeout=delay)
        finally:
            await self.watched.stop()

    async def unregister(self) -> None:
        """Delete the configurations we registered (registration mode only)."""
        if self.register is None:
            return
        for kind in self.settings.configurations():
            try:
                await self.kube.request("DELETE", self._config_path(kind))
                log.info("removed %s %s", kind, self.settings.configurations()[kind])
            except ApiException as exc:
                if not is_status(exc, 404):
                    log.warning("could not remove %s: %s", kind, exc.reason)
