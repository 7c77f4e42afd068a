"""The operator's configuration file: upstream's ``config.lws.x-k8s.io/v1alpha1`` ``Configuration``.

A file written for the Go manager (upstream's Configuration (api/config/v1alpha1)) must load here
unchanged and mean the same thing, so
the field names, defaults and validation messages are upstream's; decoding is strict as upstream's
is: an unknown field, or a value of the wrong type, is an error naming the field's path
(``leaderElection.leaseDuration: ...``), never a silent default.

One concession: upstream ships a stale sample (``lws.x-k8s.io/v1alpha1`` with ``metadata`` and a
``spec`` block) that its own decoder rejects. We accept that legacy shape too, with the settings
read from ``spec`` under the same strict rules, and tell the caller (``legacy``) so the operator
can warn. Everything else about the file is checked as upstream checks it.

Pure: parsing and validation only; which settings this operator can honour is decided where the
options are wired (``lws_operator.options``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from lws_operator.api.constants import DEFAULT_LEASE_NAME
from lws_operator.api.go_duration import parse_go_duration

__all__ = [
    "API_VERSION",
    "CIPHER_SUITES",
    "KIND",
    "LEGACY_API_VERSION",
    "ConfigError",
    "Configuration",
    "LoadedConfiguration",
    "load",
    "parse",
    "parse_bind_address",
    "parse_go_duration",
]

API_VERSION: Final = "config.lws.x-k8s.io/v1alpha1"
LEGACY_API_VERSION = "lws.x-k8s.io/v1alpha1"
KIND: Final = "Configuration"

SUPPORTED_SCHEDULER_PROVIDERS = ("volcano",)

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")


class ConfigError(ValueError):
    """An invalid configuration; ``problems`` holds one ``path: message`` line per error."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        super().__init__(f"{source}: " + "; ".join(problems))


def parse_bind_address(value: str) -> tuple[str, int] | None:
    """``":8081"``, ``"0.0.0.0:8081"`` or ``"[::1]:8081"`` as (host, port), the host "" for
    every interface; None for ``"0"``, controller-runtime's "disabled"."""
    text = value.strip()
    if text == "0":
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"invalid bind address {value!r} (expected [host]:port, or \"0\")")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


Duration = Annotated[dt.timedelta, BeforeValidator(parse_go_duration)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ControllerWebhook(_Strict):
    port: int = Field(default=9443, ge=1, le=65535)
    host: str = ""
    certDir: str = "/tmp/k8s-webhook-server/serving-certs"


class LeaderElection(_Strict):
    """component-base's LeaderElectionConfiguration."""

    leaderElect: bool = True
    leaseDuration: Duration = dt.timedelta(seconds=15)
    renewDeadline: Duration = dt.timedelta(seconds=10)
    retryPeriod: Duration = dt.timedelta(seconds=2)
    resourceLock: str = "leases"
    resourceName: str = DEFAULT_LEASE_NAME
    # Upstream ignores it: the lease lives in the operator's namespace (upstream's Configuration
    # (api/config/v1alpha1)).
    resourceNamespace: str = ""

    @field_validator("resourceLock")
    @classmethod
    def _leases_only(cls, value: str) -> str:
        if value != "leases":
            raise ValueError(f"unsupported resource lock {value!r}: only \"leases\" is supported")
        return value

    @field_validator("leaseDuration", "renewDeadline", "retryPeriod")
    @classmethod
    def _positive(cls, value: dt.timedelta) -> dt.timedelta:
        if value <= dt.timedelta(0):
            raise ValueError("must be greater than zero")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        if not self.leaderElect:
            return self
        if self.leaseDuration <= self.renewDeadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renewDeadline.total_seconds() <= 1.2 * self.retryPeriod.total_seconds():
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        return self


def _bind_address(value: str) -> str:
    parse_bind_address(value)  # raises ValueError naming the value
    return value


BindAddress = Annotated[str, AfterValidator(_bind_address)]


class ControllerMetrics(_Strict):
    bindAddress: BindAddress = ":8443"


class ControllerHealth(_Strict):
    healthProbeBindAddress: BindAddress = ":8081"
    readinessEndpointName: str = "/readyz"
    livenessEndpointName: str = "/healthz"

    @field_validator("readinessEndpointName", "livenessEndpointName")
    @classmethod
    def _path(cls, value: str) -> str:
        if not value.startswith("/"):
            return "/" + value  # controller-runtime prefixes the endpoint name with "/"
        return value


# IANA cipher suite names (as component-base accepts them) and OpenSSL's names for them. The
# TLS 1.3 suites map to None: neither Go nor OpenSSL lets them be chosen, they are always on.
CIPHER_SUITES: dict[str, str | None] = {
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
}


class TLSOptions(_Strict):
    minVersion: str | None = None
    cipherSuites: list[str] | None = None

    @field_validator("cipherSuites")
    @classmethod
    def _known_suites(cls, value: list[str] | None) -> list[str] | None:
        unknown = [name for name in value or () if name not in CIPHER_SUITES]
        if unknown:
            raise ValueError("unsupported cipher suite(s) " + ", ".join(unknown))
        return value

    def openssl_ciphers(self) -> str | None:
        """The TLS 1.2 suites as an OpenSSL cipher list, or None to keep the defaults."""
        names = [CIPHER_SUITES[n] for n in self.cipherSuites or ()]
        chosen = [n for n in dict.fromkeys(names) if n]
        return ":".join(chosen) if chosen else None

    @field_validator("minVersion")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is None or value in ("VersionTLS12", "VersionTLS13"):
            return value
        raise ValueError("invalid minVersion. Please use VersionTLS12 or VersionTLS13")

    @model_validator(mode="after")
    def _suites(self) -> TLSOptions:
        if self.cipherSuites and self.minVersion == "VersionTLS13":
            raise ValueError("cipher suites may not be specified when minVersion is "
                             "'VersionTLS13'")
        return self


class InternalCertManagement(_Strict):
    enable: bool = True
    webhookServiceName: str | None = None
    webhookSecretName: str | None = None

    @model_validator(mode="after")
    def _defaults(self) -> InternalCertManagement:
        if not self.enable:
            return self
        service = self.webhookServiceName or "lws-webhook-service"
        secret = self.webhookSecretName or "lws-webhook-server-cert"
        if len(service) > 63 or not _DNS1035.match(service):
            raise ValueError(f"webhookServiceName {service!r} must be a DNS-1035 label")
        if len(secret) > 253 or not _DNS1123_SUBDOMAIN.match(secret):
            raise ValueError(f"webhookSecretName {secret!r} must be a DNS-1123 subdomain")
        object.__setattr__(self, "webhookServiceName", service)
        object.__setattr__(self, "webhookSecretName", secret)
        return self


class ClientConnection(_Strict):
    qps: float = Field(default=500.0, ge=0)
    burst: int = Field(default=500, ge=0, le=2**31 - 1)


class GangSchedulingManagement(_Strict):
    schedulerProvider: str

    @field_validator("schedulerProvider")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in SUPPORTED_SCHEDULER_PROVIDERS:
            raise ValueError(f"unsupported scheduler provider {value!r}; supported: "
                             + ", ".join(SUPPORTED_SCHEDULER_PROVIDERS))
        return value


class Configuration(_Strict):
    """The settings of a ``Configuration`` file, every section defaulted as upstream's scheme
    defaults it. ``gangSchedulingManagement`` stays None when absent (gang scheduling off)."""

    apiVersion: Literal["config.lws.x-k8s.io/v1alpha1"] = API_VERSION
    kind: Literal["Configuration"] = KIND
    webhook: ControllerWebhook = ControllerWebhook()
    leaderElection: LeaderElection = LeaderElection()
    metrics: ControllerMetrics = ControllerMetrics()
    health: ControllerHealth = ControllerHealth()
    tls: TLSOptions | None = None
    internalCertManagement: InternalCertManagement = InternalCertManagement()
    clientConnection: ClientConnection = ClientConnection()
    gangSchedulingManagement: GangSchedulingManagement | None = None


class LoadedConfiguration(BaseModel):
    """A parsed file: the settings, which fields the file set (dotted paths: a flag set on the
    command line overrides only what it names), and whether it used the legacy sample shape."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: Configuration
    explicit: frozenset[str]
    legacy: bool = False


def _paths(data: Mapping[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in data.items():
        path = f"{prefix}{key}"
        out.add(path)
        if isinstance(value, Mapping):
            out |= _paths(value, path + ".")
    return out


def _describe(error: Mapping[str, Any]) -> str:
    path = ".".join(str(part) for part in error.get("loc", ())) or "(document)"
    kind = error.get("type")
    if kind == "extra_forbidden":
        return f"{path}: unknown field"
    if kind == "literal_error" and path in ("apiVersion", "kind"):
        expected = API_VERSION if path == "apiVersion" else KIND
        return f"{path}: must be {expected!r}, got {error.get('input')!r}"
    message = str(error.get("msg", "invalid"))
    message = message.removeprefix("Value error, ")
    return f"{path}: {message} (got {error.get('input')!r})" \
        if kind and not str(kind).startswith("value_error") and kind != "missing" \
        else f"{path}: {message}"


def parse(data: Any, source: str = "configuration") -> LoadedConfiguration:
    """Decode a ``Configuration`` document (already YAML-decoded); ``ConfigError`` naming every
    bad field otherwise."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, ["(document): must be a mapping"])
    legacy = data.get("apiVersion") == LEGACY_API_VERSION
    if legacy:
        extra = sorted(set(data) - {"apiVersion", "kind", "metadata", "spec"})
        if extra or data.get("kind") != KIND:
            problems = [f"{key}: unknown field" for key in extra]
            if data.get("kind") != KIND:
                problems.append(f"kind: must be {KIND!r}, got {data.get('kind')!r}")
            raise ConfigError(source, problems)
        spec = data.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise ConfigError(source, ["spec: must be a mapping"])
        body = {**spec, "apiVersion": API_VERSION, "kind": KIND}
    else:
        if "apiVersion" not in data or "kind" not in data:
            missing = [key for key in ("apiVersion", "kind") if key not in data]
            raise ConfigError(source, [f"{key}: required (apiVersion: {API_VERSION}, "
                                       f"kind: {KIND})" for key in missing])
        body = dict(data)
    try:
        config = Configuration.model_validate(body)
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors()]
        if legacy:
            problems = [f"spec.{p}" for p in problems]
        raise ConfigError(source, problems) from None
    explicit = frozenset(_paths(body) - {"apiVersion", "kind"})
    return LoadedConfiguration(config=config, explicit=explicit, legacy=legacy)


class _DuplicateKey(ValueError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """YAML's safe loader, except that a key given twice in one mapping is an error (strict
    decoding rejects duplicate fields; YAML would silently keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise _DuplicateKey(f"{key}: duplicate field (line {key_node.start_mark.line + 1})")
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load(text: str, source: str = "configuration") -> LoadedConfiguration:
    """Parse a YAML (or JSON) ``Configuration`` document."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except _DuplicateKey as exc:
        raise ConfigError(source, [str(exc)]) from None
    except yaml.YAMLError as exc:
        detail = " ".join(str(exc).split())  # one line
        raise ConfigError(source, [f"(document): not valid YAML: {detail}"]) from None
    return parse(data, source)
