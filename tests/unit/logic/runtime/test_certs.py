"""Webhook certificate building and the rotation plan (lws_operator.logic.runtime.certs), on a
fake clock.

The rotation tests walk a CA rotation step by step and check at each step the one property that
keeps admissions working: the served certificate chains to a CA in the bundle the API server has.
"""

from __future__ import annotations

import datetime as dt
import ipaddress

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from lws_operator.logic.runtime import certs

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
S = dt.timedelta(seconds=1)
POLICY = certs.CertPolicy(
    dns_names=certs.service_dns_names("lws-webhook-service", "lws-system"),
    ip_addresses=("127.0.0.1",),
    ca_validity=300 * S,
    cert_validity=60 * S,
    propagation_delay=5 * S,
    reload_delay=10 * S,
)


def state(data: dict[str, bytes] | None) -> certs.CertState:
    parsed = certs.parse(data)
    assert parsed is not None
    return parsed


def trusted(data: dict[str, bytes]) -> bool:
    """Whether the served certificate chains to the bundle in the same Secret."""
    s = state(data)
    return any(certs.signed_by(s.cert, ca) for ca in s.cas)


def test_fresh_secret_has_the_upstream_names_and_sans() -> None:
    plan = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False)
    assert plan.data is not None
    assert plan.ca_changed
    assert set(plan.data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    s = state(plan.data)
    assert s.ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "lws-ca"
    assert s.ca.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "lws"
    assert s.ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    sans = s.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "lws-webhook-service.lws-system.svc", "lws-webhook-service.lws-system.svc.cluster.local"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    eku = s.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in eku
    assert not s.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert certs.signed_by(s.cert, s.ca)
    assert s.cert.not_valid_after_utc == T0 + 60 * S
    assert certs.issued_at(s.cert) == T0


def test_up_to_date_secret_is_left_alone_until_its_renewal_point() -> None:
    data = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    plan = certs.plan(data, now=T0 + 39 * S, policy=POLICY, bundle_injected=True)
    assert plan.data is None
    assert plan.next_check == T0 + 40 * S  # 2/3 of the serving certificate's 60 s


def test_serving_certificate_is_renewed_at_two_thirds_by_the_same_ca() -> None:
    data = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    assert data is not None
    plan = certs.plan(data, now=T0 + 40 * S, policy=POLICY, bundle_injected=True)
    assert plan.data is not None
    assert plan.reason == "serving certificate renewed"
    assert not plan.ca_changed
    assert plan.data["ca.crt"] == data["ca.crt"]
    assert plan.data["tls.crt"] != data["tls.crt"]
    assert trusted(plan.data)


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    ca, key = certs.new_ca(T0, 100 * S)
    cert, _ = certs.new_serving_cert(ca, key, T0, 1000 * S, ["a.b.svc"], [])
    assert cert.not_valid_after_utc == ca.not_valid_after_utc


def test_missing_names_trigger_a_reissue_with_the_same_ca() -> None:
    data = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    assert data is not None
    moved = certs.CertPolicy(dns_names=certs.service_dns_names("other", "lws-system"),
                             ca_validity=300 * S, cert_validity=60 * S)
    plan = certs.plan(data, now=T0 + S, policy=moved, bundle_injected=True)
    assert plan.data is not None
    assert plan.data["ca.crt"] == data["ca.crt"]
    assert certs.covers(state(plan.data).cert, moved.dns_names, ())


@pytest.mark.parametrize("data", [
    {},
    {"ca.crt": b"", "ca.key": b"", "tls.crt": b"", "tls.key": b""},
    {"ca.crt": b"garbage", "ca.key": b"x", "tls.crt": b"y", "tls.key": b"z"},
])
def test_unusable_content_is_replaced_whole(data: dict[str, bytes]) -> None:
    plan = certs.plan(data, now=T0, policy=POLICY, bundle_injected=True)
    assert plan.data is not None
    assert trusted(plan.data)


def test_a_certificate_from_a_foreign_ca_is_replaced() -> None:
    one = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    two = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    assert one is not None
    assert two is not None
    mixed = {**one, "tls.crt": two["tls.crt"], "tls.key": two["tls.key"]}
    assert certs.parse(mixed) is None


def test_ca_rotation_keeps_every_step_trusted() -> None:
    data = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    assert data is not None
    old_ca = state(data).ca
    # Keep the serving certificate fresh up to the CA's renewal point (2/3 of 300 s = 200 s).
    for seconds in range(20, 200, 20):
        plan = certs.plan(data, now=T0 + seconds * S, policy=POLICY, bundle_injected=True)
        if plan.data is not None:
            assert not plan.ca_changed
            data = plan.data
    now = T0 + 200 * S
    served = data["tls.crt"]

    # Step 2: the new CA joins the bundle first; the served certificate does not change.
    start = certs.plan(data, now=now, policy=POLICY, bundle_injected=True)
    assert start.data is not None
    assert start.ca_changed
    assert start.reason.startswith("CA rotation started")
    data = start.data
    s = state(data)
    assert len(s.cas) == 2
    assert s.cas[1] == old_ca
    assert data["tls.crt"] == served
    assert trusted(data)

    # Step 3 waits for the bundle to be injected, then for the propagation delay.
    assert certs.plan(data, now=now + 9 * S, policy=POLICY, bundle_injected=False).data is None
    waiting = certs.plan(data, now=now + 4 * S, policy=POLICY, bundle_injected=True)
    assert waiting.data is None
    assert waiting.next_check == now + 5 * S
    now += 5 * S
    moved = certs.plan(data, now=now, policy=POLICY, bundle_injected=True)
    assert moved.data is not None
    assert moved.reason == "serving certificate re-issued by the new CA"
    assert not moved.ca_changed
    data = moved.data
    s = state(data)
    assert certs.signed_by(s.cert, s.ca)
    assert len(s.cas) == 2  # the old CA stays while replicas may still serve its certificate

    # Step 4: the old CA leaves only after the reload delay.
    assert certs.plan(data, now=now + 9 * S, policy=POLICY, bundle_injected=True).data is None
    now += 10 * S
    retired = certs.plan(data, now=now, policy=POLICY, bundle_injected=True)
    assert retired.data is not None
    assert retired.ca_changed
    data = retired.data
    assert len(state(data).cas) == 1
    assert state(data).ca != old_ca
    assert trusted(data)
    assert certs.plan(data, now=now, policy=POLICY, bundle_injected=True).data is None


def test_an_unusable_certificate_moves_to_the_new_ca_without_waiting() -> None:
    data = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    assert data is not None
    now = T0 + 200 * S  # the serving certificate (60 s) has expired; the CA is due
    started = certs.plan(data, now=now, policy=POLICY, bundle_injected=True)
    assert started.data is not None
    assert state(started.data).cert == state(data).cert
    plan = certs.plan(started.data, now=now, policy=POLICY, bundle_injected=False)
    assert plan.data is not None
    assert plan.reason == "serving certificate re-issued by the new CA"


def test_an_expired_ca_starts_over() -> None:
    data = certs.plan(None, now=T0, policy=POLICY, bundle_injected=False).data
    plan = certs.plan(data, now=T0 + 301 * S, policy=POLICY, bundle_injected=True)
    assert plan.reason == "CA expired"
    assert plan.data is not None
    assert plan.ca_changed


@pytest.mark.parametrize(("secret", "config", "allowed"), [
    (1, None, True), (2, 1, True), (2, 2, True), (1, 2, False),
])
def test_generation_fence(secret: int, config: int | None, allowed: bool) -> None:
    assert certs.fence_allows(secret, config) is allowed


def test_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="at least one"):
        certs.CertPolicy(dns_names=())
    with pytest.raises(ValueError, match="rotate_at"):
        certs.CertPolicy(dns_names=("a",), rotate_at=1.0)
    with pytest.raises(ValueError, match="does not appear to be"):
        certs.CertPolicy(dns_names=("a",), ip_addresses=("not-an-ip",))
