"""The local control plane's certificates chain to its CA and carry the right identities."""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from e2e.cluster.pki import ensure_pki


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_certificates(tmp_path: Path) -> None:
    pki = ensure_pki(tmp_path / "pki")
    ca = _load(pki.ca_crt)
    serving = _load(pki.serving_crt)
    admin = _load(pki.admin_crt)
    for cert in (serving, admin):
        cert.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    org = admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value
    assert org == "system:masters"
    usage = admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    assert oct(pki.admin_key.stat().st_mode & 0o777) == "0o600"


def test_existing_material_is_kept(tmp_path: Path) -> None:
    first = ensure_pki(tmp_path)
    before = first.ca_crt.read_bytes()
    second = ensure_pki(tmp_path)
    assert second.ca_crt.read_bytes() == before
