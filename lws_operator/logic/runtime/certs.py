"""Webhook certificates: building them, and deciding when to rotate them (pure).

The API server only calls a webhook whose serving certificate chains to the ``caBundle`` of the
webhook configuration, so a rotation done in the wrong order fails admissions, and with
``failurePolicy: Fail`` that means failed pod creations. The order kept here:

1. A new serving certificate signed by the current CA is always safe: the bundle already trusts
   it. Serving certificates are renewed at ``rotate_at`` (2/3) of their lifetime.
2. A new CA is first *added* to the bundle (new first, old kept), while every replica keeps
   serving the old certificate.
3. Only once that bundle is in the webhook configurations and the API servers had
   ``propagation_delay`` to notice, the serving certificate is re-issued by the new CA.
4. Only once every replica had ``reload_delay`` to load that certificate, the old CA leaves the
   bundle.

Each step is a pure function of the Secret's content, the clock and one observation (is the
Secret's bundle in the webhook configurations?), so every replica computes the same next step and
the Secret's resourceVersion picks the one write that wins. Times come from the certificates
themselves (``issued_at``), so the Secret holds nothing but the four upstream keys.

Keys are ECDSA P-256: generating one takes well under a millisecond, where RSA-2048 would stall
the event loop that also serves admissions for tens of milliseconds.

``cryptography`` is imported by the functions that use it, not by this module: the operator
process imports this module for its constants, policy and plan types, and runs ``plan`` in a
short-lived process of its own (``kube.cert_planner``), so the library (resident memory for a
decision taken at start and then about once a day) never loads into it.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    _Key = ec.EllipticCurvePrivateKey

# Secret keys, as upstream's cert-controller and cert-manager write them.
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"
SECRET_KEYS = (CA_CERT_KEY, CA_KEY_KEY, TLS_CERT_KEY, TLS_KEY_KEY)

CA_COMMON_NAME = "lws-ca"
CA_ORGANIZATION = "lws"

# Certificates start this much before they are issued, so a node whose clock lags a little still
# accepts them. ``issued_at`` adds it back.
BACKDATE = dt.timedelta(minutes=5)


@dataclass(frozen=True)
class CertPolicy:
    """What the certificates must look like and how rotation is paced."""

    dns_names: tuple[str, ...]
    ip_addresses: tuple[str, ...] = ()
    ca_validity: dt.timedelta = dt.timedelta(days=3650)
    cert_validity: dt.timedelta = dt.timedelta(days=365)
    # Fraction of a certificate's lifetime after which it is replaced.
    rotate_at: float = 2 / 3
    # How long API servers may take to act on a changed caBundle.
    propagation_delay: dt.timedelta = dt.timedelta(seconds=30)
    # How long every replica may take to serve the Secret's current certificate.
    reload_delay: dt.timedelta = dt.timedelta(seconds=60)

    def __post_init__(self) -> None:
        if not self.dns_names and not self.ip_addresses:
            raise ValueError("a serving certificate needs at least one DNS name or IP address")
        if not 0 < self.rotate_at < 1:
            raise ValueError("rotate_at must be between 0 and 1")
        for ip in self.ip_addresses:
            ipaddress.ip_address(ip)  # raises ValueError on garbage


def service_dns_names(service: str, namespace: str) -> tuple[str, str]:
    """The names the API server uses for a service-referenced webhook (upstream's cert rotation
    (pkg/cert/cert.go))."""
    return (f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local")


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, both PEM."""

    cert: bytes
    key: bytes


@dataclass(frozen=True)
class CertState:
    """The parsed content of the webhook Secret."""

    cas: tuple[x509.Certificate, ...]  # the trust bundle; the first is the signing CA
    ca_key: _Key
    cert: x509.Certificate
    key: _Key

    @property
    def ca(self) -> x509.Certificate:
        return self.cas[0]


@dataclass(frozen=True)
class Plan:
    """The next step: new Secret data (None when nothing changes) and why."""

    data: dict[str, bytes] | None
    reason: str
    # When the plan can next change by the clock alone: the caller re-checks then at the latest.
    next_check: dt.datetime
    ca_changed: bool = False


# --------------------------------------------------------------------------------- building


def _new_key() -> _Key:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_cert(cert: x509.Certificate) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: _Key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def new_ca(now: dt.datetime, validity: dt.timedelta) -> tuple[x509.Certificate, _Key]:
    """A self-signed CA (CN ``lws-ca``, O ``lws``, as upstream's rotator names it)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import NameOID

    key = _new_key()
    name = x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, CA_ORGANIZATION),
        x509.NameAttribute(NameOID.COMMON_NAME, CA_COMMON_NAME),
    ])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def new_serving_cert(
    ca: x509.Certificate, ca_key: _Key, now: dt.datetime, validity: dt.timedelta,
    dns_names: Sequence[str], ip_addresses: Sequence[str],
) -> tuple[x509.Certificate, _Key]:
    """A serving certificate for the given names, never outliving its CA."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    not_after = min(now + validity, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(not_after)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
            encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def encode(state: CertState) -> dict[str, bytes]:
    """The Secret data for ``state``."""
    return {
        CA_CERT_KEY: b"".join(_pem_cert(c) for c in state.cas),
        CA_KEY_KEY: _pem_key(state.ca_key),
        TLS_CERT_KEY: _pem_cert(state.cert),
        TLS_KEY_KEY: _pem_key(state.key),
    }


# -------------------------------------------------------------------------------- inspecting


def _same_key(cert: x509.Certificate, key: _Key) -> bool:
    from cryptography.hazmat.primitives import serialization

    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True


def parse(data: Mapping[str, bytes] | None) -> CertState | None:
    """The Secret's content if it is complete and consistent, else None (start over).

    Consistent: both keys match their certificates, the serving certificate was signed by one
    of the bundle's CAs, and the first CA is the one whose key we hold. Anything else (the empty
    Secret a chart ships, a hand-edited one) cannot be rotated safely, so it is replaced whole.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    if not data or any(not data.get(k) for k in SECRET_KEYS):
        return None
    try:
        cas = tuple(x509.load_pem_x509_certificates(data[CA_CERT_KEY]))
        ca_key = serialization.load_pem_private_key(data[CA_KEY_KEY], password=None)
        cert = x509.load_pem_x509_certificate(data[TLS_CERT_KEY])
        key = serialization.load_pem_private_key(data[TLS_KEY_KEY], password=None)
    except ValueError:
        return None
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey) or not isinstance(
            key, ec.EllipticCurvePrivateKey):
        return None
    if not cas or not _same_key(cas[0], ca_key) or not _same_key(cert, key):
        return None
    if not any(signed_by(cert, ca) for ca in cas):
        return None
    return CertState(cas=cas, ca_key=ca_key, cert=cert, key=key)


def issued_at(cert: x509.Certificate) -> dt.datetime:
    """When ``cert`` was made: its notBefore without the backdating (for our own certificates)."""
    start = cert.not_valid_before_utc
    end = cert.not_valid_after_utc
    return start + BACKDATE if end - start > BACKDATE else start


def renew_at(cert: x509.Certificate, rotate_at: float) -> dt.datetime:
    """The moment ``cert`` is due for replacement: ``rotate_at`` of the way through its life."""
    start = issued_at(cert)
    return start + (cert.not_valid_after_utc - start) * rotate_at


def covers(cert: x509.Certificate, dns_names: Sequence[str], ip_addresses: Sequence[str]) -> bool:
    """Whether ``cert`` names every required DNS name and IP address."""
    from cryptography import x509

    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have_dns = set(sans.get_values_for_type(x509.DNSName))
    have_ips = set(sans.get_values_for_type(x509.IPAddress))
    want_ips = {ipaddress.ip_address(i) for i in ip_addresses}
    return set(dns_names) <= have_dns and want_ips <= have_ips


def bundle_pem(data: Mapping[str, bytes]) -> bytes:
    """The CA bundle to inject into webhook configurations."""
    return data[CA_CERT_KEY]


# --------------------------------------------------------------------------------- planning


def _fresh(now: dt.datetime, policy: CertPolicy, reason: str) -> Plan:
    ca, ca_key = new_ca(now, policy.ca_validity)
    cert, key = new_serving_cert(ca, ca_key, now, policy.cert_validity, policy.dns_names,
                                 policy.ip_addresses)
    state = CertState(cas=(ca,), ca_key=ca_key, cert=cert, key=key)
    return Plan(encode(state), reason, next_check=_next_check(state, now, policy),
                ca_changed=True)


def _next_check(state: CertState, now: dt.datetime, policy: CertPolicy) -> dt.datetime:
    """The earliest moment at which the clock alone changes the plan for ``state``."""
    times = [renew_at(state.ca, policy.rotate_at)]
    if not signed_by(state.cert, state.ca):
        # Waiting for the new CA to propagate (or, at the latest, for this certificate to end).
        times += [issued_at(state.ca) + policy.propagation_delay, state.cert.not_valid_after_utc]
    else:
        times.append(renew_at(state.cert, policy.rotate_at))
        if len(state.cas) > 1:
            times.append(issued_at(state.cert) + policy.reload_delay)
    times += [c.not_valid_after_utc for c in state.cas[1:]]
    return max(now, min(times))


def _reissue_reason(state: CertState, on_current_ca: bool, now: dt.datetime,
                    policy: CertPolicy, bundle_injected: bool) -> str:
    """Why the serving certificate is issued again now ('' when it is not): by the new CA
    (step 3), or renewed, expired or short of a name, by the current one (step 1)."""
    cert = state.cert
    cert_usable = now < cert.not_valid_after_utc and covers(
        cert, policy.dns_names, policy.ip_addresses)
    if not on_current_ca:
        # Step 3: move to the new CA once the API servers trust it (or at once if the current
        # certificate is useless anyway).
        ready = bundle_injected and now >= issued_at(state.ca) + policy.propagation_delay
        return "serving certificate re-issued by the new CA" if ready or not cert_usable else ""
    if not cert_usable:
        return "serving certificate expired or lacks a required name"
    if now >= renew_at(cert, policy.rotate_at):
        return "serving certificate renewed"
    return ""


def _retire_cas(state: CertState, on_current_ca: bool, now: dt.datetime,
                policy: CertPolicy) -> Plan | None:
    """Step 4: the bundle without the previous CAs once every replica had time to load a
    certificate of the current one (before that, without those that expired); None when there
    is nothing to remove."""
    if len(state.cas) <= 1:
        return None
    settled = on_current_ca and now >= issued_at(state.cert) + policy.reload_delay
    live = tuple(c for c in state.cas[1:] if c.not_valid_after_utc > now)
    kept = (state.ca,) if settled else (state.ca, *live)
    if kept == state.cas:
        return None
    nxt = CertState(cas=kept, ca_key=state.ca_key, cert=state.cert, key=state.key)
    return Plan(encode(nxt), "previous CA removed from the bundle",
                next_check=_next_check(nxt, now, policy), ca_changed=True)


def plan(
    data: Mapping[str, bytes] | None,
    *,
    now: dt.datetime,
    policy: CertPolicy,
    bundle_injected: bool,
) -> Plan:
    """The next rotation step for the Secret ``data`` (see the module docstring).

    ``bundle_injected`` says whether every existing webhook of our configurations already
    carries exactly this Secret's ``ca.crt`` as its caBundle.
    """
    state = parse(data)
    if state is None:
        reason = "created" if not data or not any(data.values()) else "replaced unusable content"
        return _fresh(now, policy, reason)
    ca, cert = state.ca, state.cert

    if now >= ca.not_valid_after_utc:
        # Too late for an overlap: whoever still trusts it would fail anyway.
        return _fresh(now, policy, "CA expired")

    # Step 2: a CA past its renewal point gets a successor, added to the bundle first.
    if now >= renew_at(ca, policy.rotate_at):
        new, new_key = new_ca(now, policy.ca_validity)
        kept = tuple(c for c in state.cas if c.not_valid_after_utc > now)
        nxt = CertState(cas=(new, *kept), ca_key=new_key, cert=cert, key=state.key)
        return Plan(encode(nxt), "CA rotation started: new CA added to the bundle",
                    next_check=_next_check(nxt, now, policy), ca_changed=True)

    on_current_ca = signed_by(cert, ca)
    reason = _reissue_reason(state, on_current_ca, now, policy, bundle_injected)
    if reason:
        new_cert, new_key = new_serving_cert(ca, state.ca_key, now, policy.cert_validity,
                                             policy.dns_names, policy.ip_addresses)
        nxt = CertState(cas=state.cas, ca_key=state.ca_key, cert=new_cert, key=new_key)
        return Plan(encode(nxt), reason, next_check=_next_check(nxt, now, policy))

    retired = _retire_cas(state, on_current_ca, now, policy)
    if retired is not None:
        return retired

    return Plan(None, "up to date", next_check=_next_check(state, now, policy))


def fence_allows(secret_generation: int, config_generation: int | None) -> bool:
    """Whether a replica holding bundle ``secret_generation`` may write it into a webhook
    configuration that carries ``config_generation``.

    Each change of ``ca.crt`` bumps a counter on the Secret, and injection copies it onto the
    configuration. A replica that read the Secret before the latest change then cannot put an
    older bundle back over a newer one (which could drop the CA the served certificate needs).
    """
    return config_generation is None or secret_generation >= config_generation


def parse_generation(value: str | None) -> int | None:
    """A generation annotation's value; None when absent or not a number."""
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        return None
